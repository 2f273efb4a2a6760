//! A first open in a child process, for formats whose readers run native code that has crashed
//! or allocated without bound on crafted files: HDF5 and netCDF, PNG and JPEG.
//!
//! The host's checks estimate what GDAL builds at an open format by format; they cannot see
//! into a reader's own code. A 17 KB netCDF-4 file with one byte changed made libhdf5 copy out
//! of bounds (SIGSEGV) inside the server (attack round 23, R23-A10); one 4 MB attribute over
//! 1,600 bands, a netCDF declaring 32,768 bands, a PNG's compressed text chunks and a JPEG's
//! progressive thumbnail took gigabytes at the open (R23-A3, A7, A11, A5). Such a file is now
//! opened first by `gdal-mcp probe-open` in a child under an address-space limit, with no
//! core dump, its output a pipe; the server opens it only when the child opened it within the
//! memory budget and the open deadline, and refuses it, saying which, when the child crashed,
//! ran out of memory or time. Outcomes are kept per file identity (device, inode, size and
//! modification time), so each version of a file is probed once.

use crate::gdal::GdalError;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// The subcommand the child runs.
pub const PROBE_COMMAND: &str = "probe-open";

/// What the child prints on its stdout when the open succeeded: the bytes its resident set
/// grew by over the open.
const GREW: &str = "grew ";

/// Whether the file's first bytes are those of a format this module probes.
fn probed_format(path: &Path) -> Option<&'static str> {
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path).ok()?;
    let read = file.read(&mut head).ok()?;
    let head = &head[..read];
    if head.starts_with(b"\x89HDF\r\n\x1a\n") {
        Some("HDF5")
    } else if head.starts_with(b"CDF\x01")
        || head.starts_with(b"CDF\x02")
        || head.starts_with(b"CDF\x05")
    {
        Some("netCDF")
    } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("PNG")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("JPEG")
    } else {
        // A netCDF-4 / HDF5 file may carry a user block of 512, 1024, 2048 ... bytes first.
        let mut at = 512u64;
        while at <= 8192 {
            let mut sig = [0u8; 8];
            if std::os::unix::fs::FileExt::read_exact_at(&file, &mut sig, at).is_ok()
                && &sig == b"\x89HDF\r\n\x1a\n"
            {
                return Some("HDF5");
            }
            at *= 2;
        }
        None
    }
}

/// What became of one probe.
#[derive(Debug, Clone)]
enum Outcome {
    /// Opened within the budget (or GDAL refused it plainly: the server's own open says why).
    Fine,
    /// Refused, with why.
    Refused(String),
}

/// Probe `path` when its format is one this module probes ([`probed_format`]); `Err` when
/// the child crashed, ran out of memory or time, or grew past the memory budget.
pub fn check(path: &Path) -> Result<(), GdalError> {
    let Some(format) = probed_format(path) else {
        return Ok(());
    };
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    use std::os::unix::fs::MetadataExt;
    let key = format!(
        "{}:{}:{}:{}:{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    static OUTCOMES: crate::memo::Memo<String, Outcome> = crate::memo::Memo::new(1024);
    let outcome = match OUTCOMES.get(&key) {
        Some(outcome) => outcome,
        None => {
            let outcome = probe(path, format);
            OUTCOMES.insert(key, outcome.clone());
            outcome
        }
    };
    match outcome {
        Outcome::Fine => Ok(()),
        Outcome::Refused(why) => Err(GdalError::Arguments(format!(
            "{}: {why}; it is not opened in the server",
            path.display()
        ))),
    }
}

/// Run the child on `path` and read what became of it.
fn probe(path: &Path, format: &str) -> Outcome {
    let budget = crate::budget::global().total();
    let deadline = super::deadline::open_deadline();
    let Ok(exe) = std::env::current_exe() else {
        return Outcome::Fine;
    };
    let mut command = std::process::Command::new(exe);
    command
        .arg(PROBE_COMMAND)
        .arg(path)
        .env(crate::budget::BUDGET_VARIABLE, budget.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls between fork and exec: setrlimit.
        unsafe {
            command.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                Ok(())
            });
        }
    }
    let Ok(mut child) = command.spawn() else {
        tracing::warn!("cannot start the open probe for {}", path.display());
        return Outcome::Fine;
    };
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value to be written over.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child; status and usage are valid out-pointers.
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break;
        }
        if done < 0 {
            return Outcome::Fine;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            // SAFETY: as above; reaps the killed child.
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            return Outcome::Refused(format!(
                "opening this {format} file did not finish within the open deadline of {} s \
                 (GDAL_MCP_OPEN_DEADLINE_SECS), tried in a separate process",
                deadline.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut said = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.by_ref().take(4096).read_to_string(&mut said);
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let what = if signal == libc::SIGABRT {
            "ran out of memory or aborted"
        } else {
            "crashed"
        };
        return Outcome::Refused(format!(
            "GDAL's {format} reader {what} (signal {signal}) opening this file, tried in a \
             separate process under the memory budget: the file is damaged or crafted"
        ));
    }
    let code = libc::WEXITSTATUS(status);
    if code == OUT_OF_MEMORY {
        return Outcome::Refused(format!(
            "opening this {format} file takes more memory than the {budget} bytes the server \
             may use ({}), measured in a separate process",
            crate::budget::BUDGET_VARIABLE
        ));
    }
    let grew = said
        .lines()
        .find_map(|l| l.strip_prefix(GREW))
        .and_then(|n| n.trim().parse::<u64>().ok());
    match grew {
        Some(bytes) if bytes > budget => Outcome::Refused(format!(
            "opening this {format} file took {bytes} bytes of memory, more than the {budget} \
             bytes the server may use ({}), measured in a separate process",
            crate::budget::BUDGET_VARIABLE
        )),
        _ => Outcome::Fine,
    }
}

/// The child's exit code when an allocation failed.
const OUT_OF_MEMORY: i32 = 86;

/// A size line of this process's `/proc/self/status` (`VmHWM`, the peak resident set;
/// `VmSize`, the address space), in bytes.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix(field)
                    .and_then(|v| v.strip_prefix(':'))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

/// The child: open `path` read-only as the server would, read what an open reads (every
/// band's metadata in every domain, the layers), and print how much the resident set grew.
/// Its address space is limited to what it holds now plus twice the budget; an allocation
/// past it ends the child with [`OUT_OF_MEMORY`]. Returns the exit code.
pub fn child(path: &Path) -> i32 {
    crate::gdal::init();
    let budget = crate::budget::global().total();
    let limit = status_bytes("VmSize").saturating_add(budget.saturating_mul(2));
    let rlimit = libc::rlimit {
        rlim_cur: limit as libc::rlim_t,
        rlim_max: limit as libc::rlim_t,
    };
    // SAFETY: sets this process's own limit.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) };
    let before = status_bytes("VmHWM");
    let opened = std::panic::catch_unwind(|| {
        let options = gdal::DatasetOptions {
            open_flags: gdal::GdalOpenFlags::GDAL_OF_READONLY
                | gdal::GdalOpenFlags::GDAL_OF_RASTER
                | gdal::GdalOpenFlags::GDAL_OF_VECTOR,
            ..Default::default()
        };
        let Ok(dataset) = gdal::Dataset::open_ex(path, options) else {
            return false;
        };
        use gdal::Metadata;
        let _ = dataset.metadata_domains();
        for domain in dataset.metadata_domains() {
            let _ = dataset.metadata_domain(&domain);
        }
        for index in 1..=dataset.raster_count() {
            if let Ok(band) = dataset.rasterband(index) {
                for domain in band.metadata_domains() {
                    let _ = band.metadata_domain(&domain);
                }
                let _ = band.overview_count();
                // The decimated sample the server's facts read first (through an overview
                // where there is one: a JPEG's EXIF thumbnail, R23-A5).
                if index == 1 {
                    let (w, h) = band.size();
                    let side = (w.min(256), h.min(256));
                    let _ = band.read_as::<f64>((0, 0), (w, h), side, None);
                }
            }
        }
        let _ = dataset.layer_count();
        let _ = dataset.spatial_ref();
        true
    });
    let grew = status_bytes("VmHWM").saturating_sub(before);
    match opened {
        Ok(_) => {
            println!("{GREW}{grew}");
            0
        }
        Err(_) => OUT_OF_MEMORY,
    }
}
