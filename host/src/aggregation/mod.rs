//! The numeric core of the aggregation tools (`zonal_stats`, `raster_composite`), in pure Rust
//! with no GDAL: the callers read rasters and zones through GDAL and hand plain slices and
//! coordinates to this module, which keeps the arithmetic testable, deterministic and fast.
//!
//! | file | concern |
//! |---|---|
//! | [`coverage`] | which cells of a north-up grid a zone (multipolygon) touches, and how much: cell centre (GDAL's rasterize rule), all touched, exact coverage fraction (exactextract) |
//! | [`zonal`] | statistics over (value, weight) pairs with nodata policies |
//! | [`mod@composite`] | per-pixel compositing of aligned inputs, nodata-aware |
//!
//! Ground rules shared by the three files:
//!
//! * Raster values are `f32`; NaN is always nodata, and so is the band's nodata value when it
//!   has one (compared after widening the value to `f64`).
//! * Nothing here panics on user input: bad shapes, lengths and coordinates are
//!   [`AggregationError`]s.
//! * Results are deterministic: ties are broken by value, never by hash or memory order.

/// Declares a statistic enum named as the tools spell it: the enum, `ALL` (declaration order),
/// `as_str`, `Display`, and `FromStr` (an unknown name lists the known ones, under `$kind`).
macro_rules! statistic_names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($kind:literal) {
            $first:ident = $first_text:literal
            $(, $variant:ident = $text:literal)* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $first,
            $($variant,)*
        }

        impl $name {
            /// All statistics, in declaration order.
            pub const ALL: [$name; <[&str]>::len(&[$first_text $(, $text)*])] =
                [Self::$first $(, Self::$variant)*];

            /// The tool argument spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$first => $first_text,
                    $(Self::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::aggregation::AggregationError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|stat| stat.as_str() == s)
                    .ok_or_else(|| $crate::aggregation::AggregationError::UnknownName {
                        kind: $kind,
                        name: s.to_string(),
                        expected: concat!($first_text $(, ", ", $text)*),
                    })
            }
        }
    };
}

pub mod composite;
pub mod coverage;
pub mod zonal;

pub use composite::{Compositor, Statistic};
pub use coverage::{
    outside_fraction, wrap_longitudes, zone_weights, zone_weights_in, zone_window, CellWindow,
    GridWindow, Polygon, Ring, Semantics, ZoneWeights,
};
pub use zonal::{
    nodata_predicate, weighted_quantile, NodataPolicy, Stat, ZonalAccumulator, ZonalResult,
};

/// Everything that can go wrong in this module: all of it is a caller or input error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AggregationError {
    /// The grid description is unusable (rotated, south-up, zero or non-finite cell size...).
    #[error("invalid grid: {0}")]
    InvalidGrid(&'static str),
    /// A zone vertex is NaN or infinite (in world or in pixel coordinates).
    #[error("zone has a non-finite coordinate")]
    NonFiniteCoordinate,
    /// A requested window does not lie inside the raster.
    #[error("window (col {col_off}, row {row_off}, {cols} x {rows}) is outside the {grid_cols} x {grid_rows} raster")]
    WindowOutsideGrid {
        col_off: usize,
        row_off: usize,
        cols: usize,
        rows: usize,
        grid_cols: usize,
        grid_rows: usize,
    },
    /// A window has more cells than fit in memory addressing.
    #[error("window of {cols} x {rows} cells is too large")]
    WindowTooLarge { cols: usize, rows: usize },
    /// Two slices that must have the same length do not.
    #[error("{what}: expected length {expected}, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// `composite` needs at least one input.
    #[error("at least one input is required")]
    NoInputs,
    /// A lon/lat zone reaches past the raster's longitudes, and the raster spans more than one
    /// turn, so the zone's part there cannot be moved onto it without counting its seam twice.
    #[error(
        "the zone reaches past the raster's longitudes ({west}..{east}), which span more than \
         one turn ({turn}), so its part past them cannot be moved a turn onto the raster without \
         counting the raster's repeated longitudes twice; split the zone at the raster's edge \
         ({west} or {east}) and move the part past it by a turn yourself"
    )]
    WrapAcrossRepeatedLongitudes { west: f64, east: f64, turn: f64 },
    /// A statistic, semantics or policy name that is not known.
    #[error("unknown {kind} '{name}' (expected one of: {expected})")]
    UnknownName {
        kind: &'static str,
        name: String,
        expected: &'static str,
    },
}
