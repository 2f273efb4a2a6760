//! The raster runners: one module per raster tool or family of tools, each the GDAL work behind
//! it (`raster_info`, `raster_stats`, `raster_convert`, `raster_reproject` and `raster_resample`,
//! `raster_terrain`, `raster_calc`, `raster_composite`, `raster_sample`, `zonal_stats`,
//! `raster_overviews`) and the whole-band reads and writes of the `dem_*` hydrology tools.
//!
//! A runner opens its inputs through [`crate::gdal::facts`] (so the checks of
//! [`crate::gdal::policy`] run before and after every open), runs GDAL or the host's own numeric
//! core on a blocking worker, and writes through [`crate::gdal::output::Staging`]. Runners depend
//! on the infrastructure rooms, never on each other's internals except where one tool is another
//! plus a step (`translate` and `dem` reuse `warp`'s request, `composite` its working-memory
//! reservation, `translate` builds overviews).

pub mod calc;
pub mod composite;
pub mod dem;
pub mod info;
pub mod overviews;
pub mod raster_io;
pub mod sample;
pub mod stats;
pub mod translate;
pub mod warp;
pub mod zonal;

/// Whether writing `value` as Float32 changes its whole part or its magnitude: a whole number
/// above 2^24, a value whose integer part moves (123456789.123 written 123456792), one that
/// underflows to 0 or overflows to infinity. A fraction's last digits are Float32's precision,
/// which the caller chose.
pub fn float32_changes_whole_part(value: f64) -> bool {
    let narrow = f64::from(value as f32);
    // NaN is no value (a nodata cell): NaN != NaN is no change (attack round 20, R20-B2: a
    // packed input's nodata cells refused a composite). A value a hair below a whole number
    // (2.9999999999999996) rounds to it, a change of 4e-16 that moved the "whole part"
    // (attack round 22, R22-B14): a change within Float32's own precision is none.
    let within_precision = (narrow - value).abs() <= f64::from(f32::EPSILON) * value.abs();
    !value.is_nan()
        && narrow != value
        && (narrow == 0.0
            || narrow.is_infinite()
            || (value.fract() == 0.0 && value.abs() > 16_777_216.0)
            || (!within_precision && (value.fract() == 0.0 || narrow.trunc() != value.trunc()))
            || (narrow - value).abs() >= 1.0)
}

#[cfg(test)]
mod mask_tests;

/// Attack round 22, R22-B14, with R16-B4's and R19-B1's cases: what Float32 changes is a whole
/// number past 2^24, a move of 1 or more, an underflow or an overflow; a value a hair below a
/// whole number, and a decimal's last digits, are its precision.
#[cfg(test)]
#[test]
fn r22_b14_float32_changes_only_whole_parts() {
    for changed in [
        16_777_217.0,
        123_456_789.123,
        1e-50,
        1e300,
        20_000_001.0,
        1_700_000_001.5,
    ] {
        assert!(float32_changes_whole_part(changed), "{changed}");
    }
    for kept in [
        2.9999999999999996,
        5.999999999999999,
        10.1,
        0.1,
        3.0,
        f64::NAN,
        0.99999998,
    ] {
        assert!(!float32_changes_whole_part(kept), "{kept}");
    }
}
