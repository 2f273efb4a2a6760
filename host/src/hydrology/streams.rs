//! Stream networks from D8 routing: the stream mask (accumulation at or above a threshold),
//! Strahler order (Strahler 1957, "Quantitative analysis of watershed geomorphology", Trans.
//! AGU 38(6):913-920) and the network as vector links.
//!
//! Strahler order is computed in topological order over stream cells only (Kahn's in-degree
//! counting, [`super::upstream_first`]): a cell with no upstream stream
//! cell has order 1; otherwise it takes the highest upstream order, plus one when two or more
//! upstream cells share that highest order.
//!
//! Links are split at confluences: a link starts at a channel head (no upstream stream cell) or
//! at a confluence cell (two or more upstream stream cells) and runs downstream through cells
//! with exactly one upstream stream cell. Its polyline is the cell centres in map coordinates
//! (through the geotransform), plus the centre of the confluence cell it flows into — so links
//! meet at shared vertices — or, where it leaves the grid or enters nodata, the point on the
//! cell edge in its flow direction. A link ending in a pit (or a non-stream cell) ends at its
//! last cell centre, so an isolated one-cell stream is a single point. Links are numbered in
//! row-major order of their first cell; each records the id of the link it flows into.

use super::accumulation::AccumulationValue;
use super::d8::{FlowDirections, Receiver, CANONICAL_NODATA};
use super::error::{HydrologyError, Result};
use super::grid::{GeoTransform, Grid};
use super::neighbours::{COLUMN_STEP, ROW_STEP};
use super::progress::{Progress, ProgressTracker, SubProgress};
use super::upstream_first::visit_upstream_first;

/// Nodata value of stream and order grids.
pub const STREAM_NODATA: u8 = 255;

/// One link of the stream network.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamLine {
    /// The link's id (its position in the returned list).
    pub id: usize,
    /// Strahler order of the link.
    pub order: u8,
    /// The id of the link this one flows into, if any.
    pub downstream: Option<usize>,
    /// The polyline in map coordinates, upstream to downstream.
    pub coordinates: Vec<[f64; 2]>,
    /// Number of grid cells in the link.
    pub cells: usize,
}

/// Stream cells: 1 where `accumulation >= threshold`, 0 elsewhere, [`STREAM_NODATA`] on nodata
/// (NaN) cells.
pub fn stream_mask<T: AccumulationValue>(
    accumulation: &Grid<T>,
    threshold: f64,
) -> Result<Grid<u8>> {
    if threshold.is_nan() {
        return Err(HydrologyError::InvalidParameter {
            name: "threshold",
            reason: "must be a number".to_string(),
        });
    }
    let nodata = accumulation.nodata().map(T::to_f64);
    let mask = accumulation
        .data()
        .iter()
        .map(|value| {
            let value = value.to_f64();
            if value.is_nan() || Some(value) == nodata {
                STREAM_NODATA
            } else {
                u8::from(value >= threshold)
            }
        })
        .collect();
    Grid::new(
        accumulation.width(),
        accumulation.height(),
        mask,
        Some(STREAM_NODATA),
    )
}

/// Strahler order of every stream cell (0 off the network, [`STREAM_NODATA`] on nodata
/// directions). `streams` is a mask such as [`stream_mask`]'s (non-zero, non-nodata = stream).
pub fn strahler_order(
    directions: &FlowDirections,
    streams: &Grid<u8>,
    progress: &dyn Progress,
) -> Result<Grid<u8>> {
    directions.grid().check_same_shape(streams, "streams")?;
    let network = Network::new(directions, streams);
    let orders = network.orders(progress)?;
    let (width, height) = streams.shape();
    Grid::new(width, height, orders, Some(STREAM_NODATA))
}

/// The stream network as links split at confluences (see the module documentation).
pub fn stream_lines(
    directions: &FlowDirections,
    streams: &Grid<u8>,
    geotransform: &GeoTransform,
    progress: &dyn Progress,
) -> Result<Vec<StreamLine>> {
    directions.grid().check_same_shape(streams, "streams")?;
    let network = Network::new(directions, streams);
    let orders = network.orders(&SubProgress::new(progress, 0.0, 0.5))?;
    let cells = orders.len();

    let mut upstream = vec![0u8; cells];
    for cell in 0..cells {
        if let Some(next) = network.stream_receiver(cell) {
            if let Some(count) = upstream.get_mut(next) {
                *count = count.saturating_add(1);
            }
        }
    }
    let heads: Vec<u32> = (0..cells)
        .filter(|&cell| network.is_stream(cell) && upstream.get(cell) != Some(&1))
        .map(|cell| cell as u32)
        .collect();
    let link_of = |cell: usize| heads.binary_search(&(cell as u32)).ok();

    let hood = network.router.hood;
    let centre = |cell: usize| {
        let (col, row) = hood.col_row(cell);
        geotransform.cell_center(col, row)
    };
    let tracker_progress = SubProgress::new(progress, 0.5, 0.5);
    let mut tracker = ProgressTracker::new(&tracker_progress, heads.len() as u64);
    let mut lines = Vec::with_capacity(heads.len());
    for (id, &head) in heads.iter().enumerate() {
        tracker.tick(id as u64)?;
        let head = head as usize;
        let mut coordinates = vec![centre(head)];
        let mut downstream = None;
        let mut cell = head;
        let mut length = 1usize;
        loop {
            match network.router.receiver(cell) {
                Receiver::Cell(next) if network.is_stream(next) => {
                    if upstream.get(next) == Some(&1) && length < cells {
                        coordinates.push(centre(next));
                        length += 1;
                        cell = next;
                        continue;
                    }
                    coordinates.push(centre(next));
                    downstream = link_of(next);
                }
                Receiver::Outlet => {
                    let k = usize::from(network.router.canonical(cell)) & 7;
                    let (col, row) = hood.col_row(cell);
                    let edge_col = col as f64 + 0.5 + COLUMN_STEP[k] as f64 * 0.5;
                    let edge_row = row as f64 + 0.5 + ROW_STEP[k] as f64 * 0.5;
                    coordinates.push(geotransform.pixel_to_map(edge_col, edge_row));
                }
                _ => {}
            }
            break;
        }
        lines.push(StreamLine {
            id,
            order: orders.get(head).copied().unwrap_or(0),
            downstream,
            coordinates,
            cells: length,
        });
    }
    tracker.finish()?;
    Ok(lines)
}

/// Stream cells and their D8 routing.
struct Network<'a> {
    router: super::d8::Router<'a>,
    streams: &'a [u8],
    stream_nodata: Option<u8>,
}

impl<'a> Network<'a> {
    fn new(directions: &'a FlowDirections, streams: &'a Grid<u8>) -> Self {
        Self {
            router: directions.router(),
            streams: streams.data(),
            stream_nodata: streams.nodata(),
        }
    }

    #[inline]
    fn is_stream(&self, cell: usize) -> bool {
        match self.streams.get(cell) {
            Some(&value) => {
                value != 0
                    && Some(value) != self.stream_nodata
                    && self.router.canonical(cell) != CANONICAL_NODATA
            }
            None => false,
        }
    }

    /// The downstream stream cell of a stream cell.
    #[inline]
    fn stream_receiver(&self, cell: usize) -> Option<usize> {
        if !self.is_stream(cell) {
            return None;
        }
        match self.router.receiver(cell) {
            Receiver::Cell(next) if self.is_stream(next) => Some(next),
            _ => None,
        }
    }

    /// Strahler orders in topological order (walk-down Kahn).
    fn orders(&self, progress: &dyn Progress) -> Result<Vec<u8>> {
        let cells = self.streams.len();
        // Until a cell is visited: the highest upstream order and how many upstream cells have it.
        let mut orders: Vec<u8> = (0..cells)
            .map(|cell| {
                if self.router.canonical(cell) == CANONICAL_NODATA {
                    STREAM_NODATA
                } else {
                    0
                }
            })
            .collect();
        let mut ties = vec![0u8; cells];
        visit_upstream_first(
            cells,
            |cell| self.is_stream(cell).then(|| [self.stream_receiver(cell)]),
            progress,
            |cell| {
                let highest = orders.get(cell).copied().unwrap_or(0);
                let order = match (highest, ties.get(cell).copied().unwrap_or(0)) {
                    (0, _) => 1,
                    (highest, count) if count >= 2 => highest.saturating_add(1),
                    (highest, _) => highest,
                };
                if let Some(slot) = orders.get_mut(cell) {
                    *slot = order;
                }
                let Some(next) = self.stream_receiver(cell) else {
                    return;
                };
                if let (Some(highest), Some(count)) = (orders.get_mut(next), ties.get_mut(next)) {
                    if order > *highest {
                        *highest = order;
                        *count = 1;
                    } else if order == *highest {
                        *count = count.saturating_add(1);
                    }
                }
            },
        )?;
        Ok(orders)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::d8::{D8Encoding, D8Options};
    use crate::hydrology::fill::{fill_depressions, FillMode};
    use crate::hydrology::grid::CellSize;
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{
        accumulation_on_unit_cells, d8_on_unit_cells, random_dem,
    };

    /// Esri codes: E 1, SE 2, S 4, SW 8, W 16, NW 32, N 64, NE 128.
    fn esri(codes: &[u8], width: usize) -> FlowDirections {
        let height = codes.len() / width;
        FlowDirections::new(
            Grid::new(width, height, codes.to_vec(), Some(255)).unwrap(),
            D8Encoding::Esri,
        )
        .unwrap()
    }

    /// Two heads (columns 0 and 4) meeting at (2,2), a third head joining at (2,3), the outlet
    /// leaving south from (2,4).
    ///
    /// ```text
    ///   col: 0  1  2  3  4
    ///   r0   SE .  .  .  SW
    ///   r1   .  SE .  SW .
    ///   r2   .  .  S  .  .
    ///   r3   .  E  S  .  .      (1,3) is a head flowing E into (2,3)
    ///   r4   .  .  S  .  .
    /// ```
    fn network() -> (FlowDirections, Grid<u8>) {
        let d = 0u8;
        #[rustfmt::skip]
        let codes = [
            2, d, d, d, 8,
            d, 2, d, 8, d,
            d, d, 4, d, d,
            d, 1, 4, d, d,
            d, d, 4, d, d,
        ];
        #[rustfmt::skip]
        let streams = [
            1, 0, 0, 0, 1,
            0, 1, 0, 1, 0,
            0, 0, 1, 0, 0,
            0, 1, 1, 0, 0,
            0, 0, 1, 0, 0,
        ];
        (
            esri(&codes, 5),
            Grid::new(5, 5, streams.to_vec(), Some(STREAM_NODATA)).unwrap(),
        )
    }

    #[test]
    fn strahler_increments_only_where_equal_orders_meet() {
        let (directions, streams) = network();
        let orders = strahler_order(&directions, &streams, &NoProgress).unwrap();
        assert_eq!(orders.get(0, 0), Some(1));
        assert_eq!(orders.get(3, 1), Some(1));
        assert_eq!(orders.get(2, 2), Some(2));
        assert_eq!(orders.get(1, 3), Some(1));
        assert_eq!(
            orders.get(2, 3),
            Some(2),
            "an order-1 tributary does not raise order 2"
        );
        assert_eq!(orders.get(2, 4), Some(2));
        assert_eq!(orders.get(1, 0), Some(0));
    }

    #[test]
    fn links_split_at_confluences_and_point_downstream() {
        let (directions, streams) = network();
        let transform =
            GeoTransform::north_up(100.0, 200.0, CellSize::new(10.0, 10.0).unwrap()).unwrap();
        let lines = stream_lines(&directions, &streams, &transform, &NoProgress).unwrap();
        // Heads in row-major order: (0,0), (4,0), (2,2) confluence, (1,3) head, (2,3)
        // confluence.
        assert_eq!(lines.len(), 5);
        let starts: Vec<[f64; 2]> = lines.iter().map(|l| l.coordinates[0]).collect();
        assert_eq!(
            starts,
            vec![
                [105.0, 195.0],
                [145.0, 195.0],
                [125.0, 175.0],
                [115.0, 165.0],
                [125.0, 165.0]
            ]
        );
        assert_eq!(
            lines[0].coordinates,
            vec![[105.0, 195.0], [115.0, 185.0], [125.0, 175.0]]
        );
        assert_eq!(lines[0].downstream, Some(2));
        assert_eq!(lines[1].downstream, Some(2));
        assert_eq!(lines[0].cells, 2);
        assert_eq!(lines[2].coordinates, vec![[125.0, 175.0], [125.0, 165.0]]);
        assert_eq!((lines[2].order, lines[2].downstream), (2, Some(4)));
        assert_eq!((lines[3].order, lines[3].downstream), (1, Some(4)));
        // The last link leaves the grid southward: it ends on the grid's southern edge.
        assert_eq!(
            lines[4].coordinates,
            vec![[125.0, 165.0], [125.0, 155.0], [125.0, 150.0]]
        );
        assert_eq!((lines[4].order, lines[4].downstream), (2, None));
    }

    #[test]
    fn stream_mask_thresholds_and_keeps_nodata() {
        let accumulation = Grid::new(3, 1, vec![1.0f64, 5.0, f64::NAN], Some(f64::NAN)).unwrap();
        let mask = stream_mask(&accumulation, 5.0).unwrap();
        assert_eq!(mask.data(), &[0, 1, STREAM_NODATA]);
        assert!(stream_mask(&accumulation, f64::NAN).is_err());
    }

    #[test]
    fn random_networks_are_consistent() {
        let mut dem = random_dem(50, 50, 99, true);
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
        let (directions, _) = d8_on_unit_cells(&dem, D8Options::default());
        let (accumulation, _) = accumulation_on_unit_cells(&directions);
        let streams = stream_mask(&accumulation, 20.0).unwrap();
        let orders = strahler_order(&directions, &streams, &NoProgress).unwrap();
        let transform = GeoTransform::north_up(0.0, 50.0, CellSize::UNIT).unwrap();
        let lines = stream_lines(&directions, &streams, &transform, &NoProgress).unwrap();
        let stream_cells = streams.data().iter().filter(|&&v| v == 1).count();
        assert_eq!(lines.iter().map(|l| l.cells).sum::<usize>(), stream_cells);
        for line in &lines {
            assert!(line.order >= 1);
            assert!(line.coordinates.len() >= 2);
            if let Some(down) = line.downstream {
                let below = &lines[down];
                assert!(below.order >= line.order);
                assert_eq!(line.coordinates.last(), below.coordinates.first());
            }
        }
        let max_order = orders.data().iter().filter(|&&o| o != STREAM_NODATA).max();
        assert!(max_order.copied().unwrap_or(0) >= 2);
    }
}
