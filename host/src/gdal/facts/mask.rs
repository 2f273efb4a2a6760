//! A band's validity as GDAL defines it beyond its nodata value: the mask GDAL gives for the
//! band when it is neither "all valid" nor derived from the nodata value (a per-dataset mask,
//! as `gdal_translate -mask` or a JPEG-compressed COG writes, an alpha band, a band's own mask
//! band). Every host reader of cells goes through [`super::read_cells`], which reads this mask
//! beside the cells and turns the masked ones into NaN, which every reader already counts as
//! nodata (attack round 13, R13-B6 / R13-8: `raster_stats` answered mean 70 where the cells
//! the mask marks valid have mean 100, and `raster_aggregate`, through gdalwarp, 100).

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
