//! The one traversal that D8 and D-infinity accumulation and Strahler ordering share: every
//! cell of a flow network is visited after every cell that drains into it (Kahn 1962, by
//! in-degree counting), in O(n), without recursion, with the progress ticks and the cycle check
//! each of those passes needs.
//!
//! The network is described by `downstream(cell)`: `None` for a cell outside the network
//! (nodata, or not a stream cell), otherwise the cell's receivers that count as its
//! downstream neighbours (`None` entries are receivers outside the grid or network). Scanning
//! the grid, every cell with no unvisited donor starts a walk; a receiver joins the walk when
//! its last donor has been visited. With one receiver per cell (D8) the stack never holds more
//! than one cell, so the extra memory is one `u8` in-degree per cell; with two (D-infinity)
//! it is at most the network's width.

use super::error::{HydrologyError, Result};
use super::progress::{Progress, ProgressTracker};

/// In-degree marker of a cell outside the network or already visited.
const DONE: u8 = u8::MAX;

/// Calls `visit(cell)` once for every network cell, after every donor of that cell. A cycle
/// in the directions leaves cells unvisited and is reported as [`HydrologyError::FlowCycle`].
pub(crate) fn visit_upstream_first<const N: usize>(
    cells: usize,
    downstream: impl Fn(usize) -> Option<[Option<usize>; N]>,
    progress: &dyn Progress,
    mut visit: impl FnMut(usize),
) -> Result<()> {
    let mut pending = vec![DONE; cells];
    let mut network_cells: u64 = 0;
    for cell in 0..cells {
        if downstream(cell).is_some() {
            network_cells += 1;
            if let Some(slot) = pending.get_mut(cell) {
                *slot = 0;
            }
        }
    }
    for cell in 0..cells {
        for next in downstream(cell).into_iter().flatten().flatten() {
            if let Some(slot) = pending.get_mut(next) {
                if *slot != DONE {
                    // At most eight donors per cell: the count never reaches DONE.
                    *slot = slot.saturating_add(1);
                }
            }
        }
    }

    let mut visited: u64 = 0;
    let mut tracker = ProgressTracker::new(progress, network_cells);
    let mut ready: Vec<u32> = Vec::new();
    for start in 0..cells {
        if pending.get(start) != Some(&0) {
            continue;
        }
        ready.push(start as u32);
        while let Some(cell) = ready.pop() {
            let cell = cell as usize;
            if let Some(slot) = pending.get_mut(cell) {
                *slot = DONE;
            }
            visited += 1;
            visit(cell);
            for next in downstream(cell).into_iter().flatten().flatten() {
                if let Some(slot) = pending.get_mut(next) {
                    if *slot != DONE && *slot > 0 {
                        *slot -= 1;
                        if *slot == 0 {
                            ready.push(next as u32);
                        }
                    }
                }
            }
        }
        tracker.tick(visited)?;
    }
    if visited < network_cells {
        return Err(HydrologyError::FlowCycle {
            cells: (network_cells - visited) as usize,
        });
    }
    tracker.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::progress::NoProgress;

    /// A chain 0 → 1 → 2 and a branch 3 → 1; cell 4 is outside the network.
    fn graph(cell: usize) -> Option<[Option<usize>; 1]> {
        match cell {
            0 | 3 => Some([Some(1)]),
            1 => Some([Some(2)]),
            2 => Some([None]),
            _ => None,
        }
    }

    #[test]
    fn every_network_cell_comes_after_its_donors_and_once() {
        let mut order = Vec::new();
        visit_upstream_first(5, graph, &NoProgress, |cell| order.push(cell)).unwrap();
        assert_eq!(order.len(), 4, "cell 4 is outside the network: {order:?}");
        let at = |cell| order.iter().position(|&c| c == cell).unwrap();
        assert!(at(0) < at(1) && at(3) < at(1) && at(1) < at(2), "{order:?}");
    }

    #[test]
    fn a_cycle_leaves_cells_unvisited_and_is_reported() {
        // 0 → 1 → 0, and 2 drains into the cycle.
        let cyclic = |cell: usize| match cell {
            0 => Some([Some(1)]),
            1 => Some([Some(0)]),
            2 => Some([Some(0)]),
            _ => None,
        };
        let error = visit_upstream_first(3, cyclic, &NoProgress, |_| {}).unwrap_err();
        assert!(
            matches!(error, HydrologyError::FlowCycle { cells: 2 }),
            "{error:?}"
        );
    }

    #[test]
    fn two_receivers_wait_for_both_donors() {
        // 0 splits into 1 and 2; both drain into 3.
        let split = |cell: usize| match cell {
            0 => Some([Some(1), Some(2)]),
            1 | 2 => Some([Some(3), None]),
            3 => Some([None, None]),
            _ => None,
        };
        let mut order = Vec::new();
        visit_upstream_first(4, split, &NoProgress, |cell| order.push(cell)).unwrap();
        assert_eq!(order.first(), Some(&0));
        assert_eq!(order.last(), Some(&3));
    }
}
