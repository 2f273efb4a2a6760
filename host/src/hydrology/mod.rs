//! DEM hydrology in pure Rust: depression filling and breaching, flat resolution, D8 and
//! D-infinity flow routing, flow accumulation, stream networks and watersheds.
//!
//! The algorithms are the published ones, cited in each file:
//!
//! | file | concern | reference |
//! |---|---|---|
//! | [`fill`] | Priority-Flood filling, plain and epsilon | Barnes et al. 2014a, C&G 62:117 |
//! | [`breach`] | least-cost breaching, then filling | Lindsay 2016, Hydrol. Proc. 30:846 |
//! | [`flats`] | flat masks: toward lower, away from higher | Barnes et al. 2014b, C&G 62:128 |
//! | [`d8`] | steepest-descent D8, three encodings | O'Callaghan & Mark 1984 |
//! | [`dinf`] | D-infinity angles and splits | Tarboton 1997, WRR 33:309 |
//! | [`accumulation`] | D8 / D-infinity accumulation, Kahn order | Kahn 1962; Tarboton 1997 |
//! | [`streams`] | stream masks, Strahler order, links as lines | Strahler 1957 |
//! | [`watershed`] | pour-point watersheds with snapping | Jenson & Domingue 1988 |
//!
//! Shared ground rules:
//!
//! * Grids are [`Grid`]s: row-major, north up, validated shape, at most [`grid::MAX_CELLS`]
//!   cells so that cell indices fit in a `u32`. Elevation grids are `f32`; NaN and the declared
//!   nodata value both mean nodata, and nodata cells are never modified.
//! * Distances use the real [`CellSize`] (`dx`, `dy`, diagonal `sqrt(dx² + dy²)`), so
//!   non-square cells are supported.
//! * Outlets are the same everywhere: border cells drain off the grid and cells next to nodata
//!   drain into it, so a conditioned DEM drains completely (see [`d8`] for the exact policy).
//! * Ties are broken by the fixed neighbour order E, SE, S, SW, W, NW, N, NE
//!   ([`Direction::ALL`]) and, in priority queues, by cell index, so every result is
//!   deterministic.
//! * Long passes take a [`Progress`] (any `Fn(f64) -> bool` works), call it about a hundred
//!   times with the fraction done, and stop with [`HydrologyError::Cancelled`] when it returns
//!   `false`.
//! * Nothing here panics on user input: errors are [`HydrologyError`]s.

pub mod accumulation;
mod bitset;
pub mod breach;
pub mod d8;
pub mod dinf;
pub mod error;
pub mod fill;
pub mod flats;
pub mod grid;
pub mod neighbours;
pub mod progress;
mod queue;
pub mod streams;
#[cfg(test)]
mod test_support;
mod upstream_first;
pub mod watershed;

pub use accumulation::{
    d8_accumulation, dinf_accumulation, AccumulationOptions, AccumulationReport, AccumulationUnits,
    AccumulationValue,
};
pub use breach::{breach_depressions, BreachOptions, BreachReport};
pub use d8::{
    d8_flow_directions, D8Encoding, D8Options, D8Report, FlowDirections, D8_NODATA, NO_FLOW,
};
pub use dinf::{dinf_flow_directions, DinfFlow, DinfOptions, DinfReport, DinfSplit, DINF_NO_FLOW};
pub use error::HydrologyError;
pub use fill::{fill_depressions, FillMode, FillReport};
pub use flats::{flat_mask, resolve_flats, FlatReport};
pub use grid::{CellSize, GeoTransform, Grid};
pub use neighbours::Direction;
pub use progress::{NoProgress, Progress, SubProgress};
mod terrain;
pub use streams::{strahler_order, stream_lines, stream_mask, StreamLine, STREAM_NODATA};
pub use terrain::flat_fraction;
pub use watershed::{watersheds, PourPointOutcome, Snap, SnapSurface};
