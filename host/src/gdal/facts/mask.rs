//! A band's validity as GDAL defines it beyond its nodata value: the mask GDAL gives for the
//! band when it is neither "all valid" nor derived from the nodata value (a per-dataset mask,
//! as `gdal_translate -mask` or a JPEG-compressed COG writes, an alpha band, a band's own mask
//! band). Every host reader of cells goes through [`super::read_cells`], which reads this mask
//! beside the cells and turns the masked ones into NaN, which every reader already counts as
//! nodata (attack round 13, R13-B6 / R13-8: `raster_stats` answered mean 70 where the cells
//! the mask marks valid have mean 100, and `raster_aggregate`, through gdalwarp, 100).

use crate::gdal::GdalError;
use gdal::raster::RasterBand;

/// Where a band's mask comes from, when the host must read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskSource {
    /// A mask shared by every band of the dataset (an internal or `.msk` mask).
    PerDataset,
    /// The dataset's alpha band: 0 is transparent (invalid), any other value valid.
    Alpha,
    /// A mask band of this band alone.
    Band,
}

impl MaskSource {
    /// In words, for the notes of a result.
    pub fn describe(self) -> &'static str {
        match self {
            MaskSource::PerDataset => "a per-dataset mask",
            MaskSource::Alpha => "an alpha band",
            MaskSource::Band => "a mask band",
        }
    }
}

/// The band's mask, when GDAL's flags say it is neither all valid nor the nodata value's.
pub fn mask_source(band: &RasterBand<'_>) -> Option<MaskSource> {
    let flags = band.mask_flags().ok()?;
    if flags.is_all_valid() || flags.is_nodata() {
        return None;
    }
    Some(if flags.is_alpha() {
        MaskSource::Alpha
    } else if flags.is_per_dataset() {
        MaskSource::PerDataset
    } else {
        MaskSource::Band
    })
}

/// Refuse handing `dataset` to GDAL's `program` (`gdalwarp`, `gdaladdo`) when a band marks
/// its invalid cells two ways: a declared nodata and a mask of its own ([`mask_source`]).
/// GDAL 3.6's warper follows the nodata and ignores the mask, its overviews follow the mask
/// alone (in which the nodata cells may be valid); the host's readers honour both. A block's
/// max came out 1000 (a masked cloud) where `raster_stats` said 15, and an overview cell
/// averaged -9999 in (attack round 21, R21-B9, R21-B16). `raster_calc` (expression `a`)
/// writes a copy whose masked cells are nodata: one mark, which every program reads.
pub fn check_one_validity_mark(
    dataset: &gdal::Dataset,
    what: &str,
    program: &str,
) -> Result<(), GdalError> {
    let both: Vec<(usize, f64, MaskSource)> = (1..=dataset.raster_count())
        .filter_map(|index| {
            let band = dataset.rasterband(index).ok()?;
            let source = mask_source(&band)?;
            let nodata = super::nodata::band_nodata(&band)?;
            Some((index, nodata, source))
        })
        .collect();
    let Some((index, nodata, source)) = both.first() else {
        return Ok(());
    };
    Err(GdalError::Arguments(format!(
        "{what}: band {index} marks its invalid cells two ways, nodata {nodata} and {}; {program} \
         would follow only one of them ({}), so cells the other marks invalid would be read as \
         values. Make them one first: raster_calc with inputs {{\"a\": this raster}}, \
         expression \"a\" and the band's data type writes a copy whose masked cells are \
         nodata; run this on the copy",
        source.describe(),
        if program.starts_with("gdalwarp") {
            "gdalwarp reads the nodata and ignores the mask"
        } else {
            "overviews read the mask, in which nodata cells may be valid"
        }
    )))
}

/// Whether any band of `dataset` has a mask of its own ([`mask_source`]).
pub fn any_band_masked(dataset: &gdal::Dataset) -> bool {
    (1..=dataset.raster_count()).any(|index| {
        dataset
            .rasterband(index)
            .is_ok_and(|band| mask_source(&band).is_some())
    })
}

/// The mask's values over a window (0 is invalid), read as the cells are (same window, same
/// output size, nearest); `None` when the band has no mask of its own ([`mask_source`]).
pub fn read_mask(
    band: &RasterBand<'_>,
    offset: (isize, isize),
    window: (usize, usize),
    size: (usize, usize),
) -> gdal::errors::Result<Option<Vec<u8>>> {
    if mask_source(band).is_none() {
        return Ok(None);
    }
    let mask = band.open_mask_band()?;
    let buffer = mask.read_as::<u8>(offset, window, size, None)?;
    Ok(Some(buffer.into_shape_and_vec().1))
}

/// A note for a result: `what` (e.g. "band 1") has a mask, and its masked cells (`masked`,
/// when counted) were read as nodata.
pub fn note(what: &str, source: MaskSource, masked: Option<u64>) -> String {
    format!(
        "{what} has {} (GDAL's mask flags are not \"all valid\"): {} read as nodata, as GDAL's \
         programs read them",
        source.describe(),
        match masked {
            Some(n) => format!("its {n} masked cell(s) were"),
            None => "its masked cells are".to_string(),
        }
    )
}

/// Drivers whose `gdal_translate` output keeps no GDAL mask of its input: netCDF and SAGA
/// declare their own fill as nodata, which the masked cells' stored values are not; RST and
/// XYZ keep nothing; GeoPackage fails at `CreateMaskBand`. Measured with GDAL 3.6.2 (GTiff,
/// COG, HFA, ENVI, AAIGrid, GS7BG, PNG and JPEG keep it, as an internal mask or a `.msk`).
pub const DRIVERS_WITHOUT_MASKS: &[&str] = &["netCDF", "SAGA", "RST", "XYZ", "GPKG"];

/// Refuse a copy of the raster at `path` to `driver` when one of its bands has a mask of its
/// own ([`mask_source`]) that the driver cannot keep: the cells it marks invalid would be
/// written as data (attack round 14, R14-B4: `raster_convert` to netCDF of a DEM whose 100
/// masked cells held 0 answered `lossless_write`, and the output's mean fell from 119.83 to
/// 112.34). Refused before the gate, naming the ways out.
pub fn refuse_mask_lost(role: &str, path: &std::path::Path, driver: &str) -> Result<(), GdalError> {
    if !DRIVERS_WITHOUT_MASKS
        .iter()
        .any(|d| d.eq_ignore_ascii_case(driver))
    {
        return Ok(());
    }
    let dataset = super::open(path)?;
    for index in 1..=dataset.raster_count() {
        let Some(mask) = dataset.rasterband(index).ok().and_then(|b| mask_source(&b)) else {
            continue;
        };
        return Err(GdalError::Arguments(format!(
            "{role}: band {index} of {} has {}, which {driver} cannot keep: the cells it marks \
             invalid would be written as data. Write a format that keeps masks (GTiff, COG, \
             HFA, ENVI), or first write the masked cells as nodata (raster_calc with the \
             expression \"a\" does) and convert that",
            path.display(),
            mask.describe()
        )));
    }
    Ok(())
}
