//! A band's nodata as its cells hold it: the one value every host-side reader compares cells
//! with.
//!
//! A declared nodata is a double, but a band stores its cells in its own type, and GDAL
//! compares them there. An ENVI or EHdr Float32 band declaring -999.9 holds
//! `float32(-999.9)` (-999.9000244140625) in its nodata cells: GDAL's statistics skip them, a
//! comparison in double counts every one as data (attack round 9, R9-4: `raster_stats` and
//! `zonal_stats` answered a mean of -432.95 for 134). So, as GDAL's `ComputeStatistics`
//! (`GDALNoDataValues`) and `gdalwarp` compare:
//! - Float32: the value rounded to float32; within 1e-10 of float32's largest magnitude it is
//!   that largest value (GDAL's `GDALAdjustNoDataCloseToFloatMax`); beyond float32's range it
//!   matches no cell. NaN and the infinities stay themselves.
//! - integer types: the value itself when it is a whole number in the type's range (-128..127
//!   for a Byte band that declares `PIXELTYPE=SIGNEDBYTE`, as [`super::read_cells`] gives its
//!   cells); any other value (1.5 or -9999 on a Byte band, NaN) matches no cell. GDAL's mask
//!   band alone truncates a fractional value in range (1.5 masks the 1s of a Byte band); its
//!   statistics, which the host's figures are checked against, do not.
//! - Float64 (and any other type): the value as declared.
//!
//! What a band *declares* is still reported as GDAL reports it ([`super::BandFacts::nodata`],
//! `raster_stats`' `nodata`): only the comparison with cells goes through here.

use gdal::raster::{GdalDataType, RasterBand};

/// The nodata of `band` as its cells hold it (see the module doc), `None` when it declares
/// none or one no cell of its type can hold. What a read into `f64` compares with.
pub fn band_nodata(band: &RasterBand<'_>) -> Option<f64> {
    band.no_data_value()
        .and_then(|declared| nodata_in_band(declared, band))
}

/// [`band_nodata`] as a read into `f32` holds it (a Float64 band read as `f32` holds
/// `float32(-999.9)` where it stores -999.9), widened back to `f64` for the comparisons that
/// take one.
pub fn band_nodata_read_as_f32(band: &RasterBand<'_>) -> Option<f64> {
    band_nodata(band).map(|n| f64::from(n as f32))
}

/// A nodata value given for `band` (an argument that overrides what it declares), as its cells
/// would hold it: the same rule as [`band_nodata`].
pub fn nodata_in_band(nodata: f64, band: &RasterBand<'_>) -> Option<f64> {
    nodata_as_stored(nodata, band.band_type(), super::signed_byte(band))
}

/// `nodata` as a cell of `band_type` holds it (`signed_byte`: a Byte band read -128..127), or
/// `None` when no such cell can hold it.
pub fn nodata_as_stored(nodata: f64, band_type: GdalDataType, signed_byte: bool) -> Option<f64> {
    use GdalDataType as T;
    let whole_in = |low: f64, high: f64| {
        (nodata.fract() == 0.0 && (low..=high).contains(&nodata)).then_some(nodata)
    };
    match band_type {
        T::UInt8 if signed_byte => whole_in(-128.0, 127.0),
        T::UInt8 => whole_in(0.0, 255.0),
        T::UInt16 => whole_in(0.0, f64::from(u16::MAX)),
        T::Int16 => whole_in(f64::from(i16::MIN), f64::from(i16::MAX)),
        T::UInt32 => whole_in(0.0, f64::from(u32::MAX)),
        T::Int32 => whole_in(f64::from(i32::MIN), f64::from(i32::MAX)),
        T::UInt64 => whole_in(0.0, u64::MAX as f64),
        T::Int64 => whole_in(i64::MIN as f64, i64::MAX as f64),
        T::Float32 => float32(nodata),
        _ => Some(nodata),
    }
}

/// A nodata value as a Float32 cell holds it (GDAL's `GDALAdjustNoDataCloseToFloatMax`, then
/// the cast when in range).
fn float32(nodata: f64) -> Option<f64> {
    let largest = f64::from(f32::MAX);
    if !nodata.is_finite() {
        return Some(nodata);
    }
    if (nodata.abs() - largest).abs() < 1e-10 * largest {
        return Some(largest.copysign(nodata));
    }
    (nodata.abs() <= largest).then(|| f64::from(nodata as f32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use GdalDataType as T;

    #[test]
    fn r9_4_a_float32_nodata_is_compared_as_float32() {
        // ENVI's `data ignore value = -999.9` on a Float32 band: its cells hold float32(-999.9).
        assert_eq!(
            nodata_as_stored(-999.9, T::Float32, false),
            Some(f64::from(-999.9f32))
        );
        assert_eq!(f64::from(-999.9f32), -999.900_024_414_062_5);
        // Clean twin: a value Float32 holds exactly stays itself.
        assert_eq!(nodata_as_stored(-9999.0, T::Float32, false), Some(-9999.0));
        // Float64 holds the double as declared.
        assert_eq!(nodata_as_stored(-999.9, T::Float64, false), Some(-999.9));
    }

    /// Through GDAL: an ENVI Float32 band declaring -999.9 (ENVI keeps the double it is
    /// given, as a hand-written header does) holds float32(-999.9) in the cells written as
    /// -999.9, and `band_nodata` is that value; its Float64 twin holds -999.9 itself.
    #[test]
    fn r9_4_an_envi_float32_band_holds_its_nodata_as_float32() {
        let dir = tempfile::tempdir().unwrap();
        for (name, float32) in [("f32.dat", true), ("f64.dat", false)] {
            let path = dir.path().join(name);
            let driver = gdal::DriverManager::get_driver_by_name("ENVI").unwrap();
            {
                let dataset = if float32 {
                    driver.create_with_band_type::<f32, _>(&path, 2, 1, 1)
                } else {
                    driver.create_with_band_type::<f64, _>(&path, 2, 1, 1)
                }
                .unwrap();
                let mut band = dataset.rasterband(1).unwrap();
                band.set_no_data_value(Some(-999.9)).unwrap();
                let mut cells = gdal::raster::Buffer::new((2, 1), vec![-999.9f64, 134.0]);
                band.write((0, 0), (2, 1), &mut cells).unwrap();
            }
            let dataset = gdal::Dataset::open(&path).unwrap();
            let band = dataset.rasterband(1).unwrap();
            assert_eq!(band.no_data_value(), Some(-999.9), "{name}: declared");
            let cells = crate::gdal::facts::read_cells::<f64>(&band, (0, 0), (2, 1), (2, 1))
                .unwrap()
                .data()
                .to_vec();
            let nodata = band_nodata(&band);
            assert_eq!(nodata, Some(cells[0]), "{name}: the nodata cell");
            assert_ne!(nodata, Some(cells[1]), "{name}: the data cell");
            let expected = if float32 {
                f64::from(-999.9f32)
            } else {
                -999.9
            };
            assert_eq!(nodata, Some(expected), "{name}");
            assert_eq!(band_nodata_read_as_f32(&band), Some(f64::from(-999.9f32)));
        }
    }

    #[test]
    fn float32_extremes_follow_gdal() {
        let largest = f64::from(f32::MAX);
        // A rounded spelling of float32's lowest is its lowest (GDAL's tolerance: 1e-10).
        assert_eq!(
            nodata_as_stored(-largest * (1.0 + 1e-12), T::Float32, false),
            Some(-largest)
        );
        assert_eq!(nodata_as_stored(largest, T::Float32, false), Some(largest));
        // Beyond float32's range: no cell holds it (a cast would make it -inf, and match -inf).
        assert_eq!(nodata_as_stored(-1e40, T::Float32, false), None);
        assert!(nodata_as_stored(f64::NAN, T::Float32, false).is_some_and(f64::is_nan));
        assert_eq!(
            nodata_as_stored(f64::NEG_INFINITY, T::Float32, false),
            Some(f64::NEG_INFINITY)
        );
    }

    #[test]
    fn integer_types_hold_whole_numbers_in_range_only() {
        // As GDAL's statistics: a fractional or out-of-range nodata matches no cell.
        assert_eq!(nodata_as_stored(1.5, T::UInt8, false), None);
        assert_eq!(nodata_as_stored(-9999.0, T::UInt8, false), None);
        assert_eq!(nodata_as_stored(256.0, T::UInt8, false), None);
        assert_eq!(nodata_as_stored(f64::NAN, T::Int16, false), None);
        assert_eq!(nodata_as_stored(-32768.4, T::Int16, false), None);
        // Clean twins.
        assert_eq!(nodata_as_stored(255.0, T::UInt8, false), Some(255.0));
        assert_eq!(nodata_as_stored(-32768.0, T::Int16, false), Some(-32768.0));
        assert_eq!(
            nodata_as_stored(4_294_967_295.0, T::UInt32, false),
            Some(4_294_967_295.0)
        );
        assert_eq!(nodata_as_stored(-9999.0, T::Int32, false), Some(-9999.0));
        // A signed-byte band's cells are -128..127.
        assert_eq!(nodata_as_stored(-1.0, T::UInt8, true), Some(-1.0));
        assert_eq!(nodata_as_stored(255.0, T::UInt8, true), None);
    }
}
