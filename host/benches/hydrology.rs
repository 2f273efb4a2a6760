//! End-to-end DEM conditioning and routing on synthetic DEMs with many depressions, one core:
//! Priority-Flood fill, flat resolution, D8 and D8 accumulation, with per-step times and the
//! process's peak RSS. Run one size per process so the peak is that size's:
//!
//! ```text
//! cargo bench -p gdal-mcp --bench hydrology -- 2000
//! cargo bench -p gdal-mcp --bench hydrology -- 4000 [--epsilon] [--f64] [--breach]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gdal_mcp::hydrology::*;
use std::time::Instant;

struct XorShift(u64);
impl XorShift {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

fn synthetic_dem(size: usize) -> Grid<f32> {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let scale = 4000.0 / size as f32;
    let mut data = Vec::with_capacity(size * size);
    for row in 0..size {
        let y = row as f32 * scale;
        let sy1 = (y / 310.0).sin();
        let sy2 = (y / 47.0).cos();
        for col in 0..size {
            let x = col as f32 * scale;
            let z = 500.0
                + 120.0 * (x / 530.0).sin() * sy1
                + 25.0 * (x / 83.0 + y / 120.0).sin()
                + 8.0 * sy2 * (x / 61.0).cos()
                + 0.002 * (x + 0.5 * y)
                + 3.0 * rng.next_f32();
            data.push(z);
        }
    }
    // Random pits: dig 1 cell in 2000 by up to 20 m.
    let cells = size * size;
    for _ in 0..cells / 2000 {
        let index = (rng.next_u64() % cells as u64) as usize;
        data[index] -= 20.0 * rng.next_f32();
    }
    Grid::new(size, size, data, Some(-9999.0)).unwrap()
}

fn vm_hwm_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("VmHWM:") {
            let kb: f64 = rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0.0);
            return kb / 1024.0;
        }
    }
    0.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epsilon = args.iter().any(|a| a == "--epsilon");
    let f64_out = args.iter().any(|a| a == "--f64");
    let breach = args.iter().any(|a| a == "--breach");
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let size = sizes.first().copied().unwrap_or(2000);
    let cell_size = CellSize::new(10.0, 10.0).unwrap();
    let calls = std::cell::Cell::new(0u32);
    let progress = |_f: f64| {
        calls.set(calls.get() + 1);
        true
    };

    let t = Instant::now();
    let mut dem = synthetic_dem(size);
    let generate = t.elapsed().as_secs_f64();
    let dem_mb = (size * size * 4) as f64 / 1048576.0;
    println!("size {size}x{size}: DEM {dem_mb:.1} MB, generated in {generate:.2}s, RSS peak so far {:.1} MB", vm_hwm_mb());

    let total = Instant::now();
    let t = Instant::now();
    if breach {
        let report =
            breach_depressions(&mut dem, cell_size, &BreachOptions::default(), &progress).unwrap();
        println!(
            "breach:        {:.3}s  {report:?}",
            t.elapsed().as_secs_f64()
        );
    } else {
        let mode = if epsilon {
            FillMode::Epsilon
        } else {
            FillMode::Plain
        };
        let report = fill_depressions(&mut dem, cell_size, mode, &progress).unwrap();
        println!(
            "fill ({mode:?}): {:.3}s  {report:?}",
            t.elapsed().as_secs_f64()
        );
    }
    println!("  progress calls so far {}", calls.get());

    let t = Instant::now();
    let options = D8Options {
        encoding: D8Encoding::Esri,
        resolve_flats: !epsilon,
    };
    let (directions, report) = d8_flow_directions(&dem, cell_size, &options, &progress).unwrap();
    println!(
        "d8 + flats:    {:.3}s  {report:?}",
        t.elapsed().as_secs_f64()
    );
    drop(dem);

    let t = Instant::now();
    let (max, outlet_total, total_weight) = if f64_out {
        let (acc, report) = d8_accumulation::<f64>(
            &directions,
            cell_size,
            &AccumulationOptions::default(),
            &progress,
        )
        .unwrap();
        drop(acc);
        (report.max, report.outlet_total, report.total_weight)
    } else {
        let (acc, report) = d8_accumulation::<f32>(
            &directions,
            cell_size,
            &AccumulationOptions::default(),
            &progress,
        )
        .unwrap();
        drop(acc);
        (report.max, report.outlet_total, report.total_weight)
    };
    println!(
        "accumulation:  {:.3}s  max {max} outlet_total {outlet_total} total {total_weight}",
        t.elapsed().as_secs_f64()
    );
    println!(
        "TOTAL (fill+flats+d8+acc): {:.3}s",
        total.elapsed().as_secs_f64()
    );
    println!(
        "peak RSS (VmHWM): {:.1} MB = {:.2} x DEM; progress calls {}",
        vm_hwm_mb(),
        vm_hwm_mb() / dem_mb,
        calls.get()
    );
}
