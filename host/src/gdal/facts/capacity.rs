//! Which band types each allowed raster output driver stores, for the host's own choices of an
//! output type (a `sum` widened to hold its values, R10-6): a widened Byte sum written as JPEG
//! failed inside GDAL, after the work, because the choice ignored what the driver holds.
//!
//! The rows are the `format_selection` domain's capacity rows (`plugins/format_selection`,
//! `raster::capacity`, each measured with GDAL 3.6 by the host test
//! `format_selection_capacity_is_gdal_3_6_measured`), for the type question only: the host
//! test `host_capacity_rows_agree_with_format_selection` asks the domain about every allowed
//! driver and type and requires the same answer from [`stores`], so the two cannot drift.
//! A driver that converts on write (AAIGrid, XYZ, GS7BG, RST) stores a type when one of the
//! types it writes holds every value of it.

use super::encoding::canonical_driver;

/// The types a driver writes and whether it converts other types to one of them (`None`: every
/// type).
fn written_types(
    driver: &str,
    options: &[(String, String)],
    types: &[&str],
) -> Option<(&'static [&'static str], bool)> {
    const ALL_BUT_COMPLEX: &[&str] = &[
        "Byte", "Int16", "UInt16", "Int32", "UInt32", "Float32", "Float64",
    ];
    const ALL: &[&str] = &[
        "Byte", "Int16", "UInt16", "Int32", "UInt32", "Float32", "Float64", "CFloat32", "CFloat64",
    ];
    let option = |key: &str| {
        options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.to_ascii_uppercase())
    };
    Some(match canonical_driver(driver).as_str() {
        // JPEG and WebP compression inside GeoTIFF hold Byte only (`codec_data_type`).
        "GTiff" | "COG" if matches!(option("COMPRESS").as_deref(), Some("JPEG") | Some("WEBP")) => {
            (&["Byte"], false)
        }
        "GTiff" | "COG" | "netCDF" => return None,
        "PNG" => (&["Byte", "UInt16"], false),
        "JPEG" | "WEBP" | "GIF" => (&["Byte"], false),
        "AAIGrid" => (&["Int32", "Float32"], true),
        "JP2OpenJPEG" => (&["Byte", "Int16", "UInt16", "Int32", "UInt32"], false),
        "GPKG" if types.iter().all(|t| *t == "Byte") => (&["Byte"], false),
        "GPKG" => (&["Int16", "UInt16", "Float32"], false),
        "HFA" | "ENVI" => (ALL, false),
        "SAGA" => (ALL_BUT_COMPLEX, false),
        "XYZ" => (&["Byte", "Int16", "Int32", "Float32"], true),
        "GS7BG" => (&["Float64"], true),
        "RST" => (&["Byte", "Int16", "Float32"], true),
        _ => return None,
    })
}

/// The range of values of an integer type, or the significand bits of a float type.
enum Values {
    Integer(f64, f64),
    Float(u32),
}

fn values(data_type: &str) -> Option<Values> {
    Some(match data_type {
        "Byte" => Values::Integer(0.0, 255.0),
        "Int16" => Values::Integer(-32768.0, 32767.0),
        "UInt16" => Values::Integer(0.0, 65535.0),
        "Int32" => Values::Integer(-2_147_483_648.0, 2_147_483_647.0),
        "UInt32" => Values::Integer(0.0, 4_294_967_295.0),
        "Float32" => Values::Float(24),
        "Float64" => Values::Float(53),
        _ => return None,
    })
}

/// Whether every value of `source` is a value of `target` (integers up to 2^bits fit a float's
/// significand).
fn holds(target: &str, source: &str) -> bool {
    if target == source {
        return true;
    }
    match (values(target), values(source)) {
        (Some(Values::Integer(tl, th)), Some(Values::Integer(sl, sh))) => tl <= sl && sh <= th,
        (Some(Values::Float(bits)), Some(Values::Integer(sl, sh))) => {
            let limit = 2f64.powi(bits as i32);
            -limit <= sl && sh <= limit
        }
        (Some(Values::Float(tb)), Some(Values::Float(sb))) => tb >= sb,
        _ => false,
    }
}

/// Whether `driver` with creation `options` writes every value of `data_type` as it is, for an
/// output whose bands are `types` (GeoPackage tiles depend on them); drivers without a row
/// (none of the allowed ones) are taken to store it.
pub fn stores(driver: &str, options: &[(String, String)], types: &[&str], data_type: &str) -> bool {
    match written_types(driver, options, types) {
        None => true,
        Some((written, converts)) => {
            written.contains(&data_type)
                || (converts && written.iter().any(|t| holds(t, data_type)))
        }
    }
}

/// The allowed output drivers that store `data_type` (without creation options).
pub fn drivers_storing(data_type: &str) -> Vec<&'static str> {
    crate::gdal::policy::RASTER_OUTPUT_DRIVERS
        .iter()
        .copied()
        .filter(|d| stores(d, &[], &[data_type], data_type))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converting_drivers_store_what_their_types_hold() {
        assert!(stores("AAIGrid", &[], &["UInt16"], "UInt16"));
        assert!(!stores("AAIGrid", &[], &["UInt32"], "UInt32"));
        assert!(!stores("AAIGrid", &[], &["Float64"], "Float64"));
        assert!(stores("RST", &[], &["UInt16"], "UInt16"));
        assert!(!stores("RST", &[], &["Int32"], "Int32"));
        assert!(stores("GS7BG", &[], &["UInt32"], "UInt32"));
        assert!(!stores("jpeg", &[], &["UInt16"], "UInt16"));
        let jpeg_tiff = [("COMPRESS".to_string(), "jpeg".to_string())];
        assert!(!stores("GTiff", &jpeg_tiff, &["UInt16"], "UInt16"));
        assert!(stores("GTiff", &[], &["UInt16"], "UInt16"));
        assert!(drivers_storing("UInt16").contains(&"PNG"));
        assert!(!drivers_storing("UInt32").contains(&"PNG"));
    }
}
