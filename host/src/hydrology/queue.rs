//! The priority queue behind Priority-Flood: cells ordered by elevation, packed into one `u64`.
//!
//! Barnes, Lehman & Mulla (2014, Computers & Geosciences 62:117-127) spend most of
//! Priority-Flood's time in the priority queue, so it is kept compact: the key is the `f32`
//! elevation mapped to an order-preserving `u32` in the high half and the `u32` cell index in the
//! low half. Equal elevations therefore pop in increasing index order, which makes every
//! algorithm that uses the queue deterministic. Priority-Flood only ever pushes keys at or above
//! the last key popped (a *monotone* queue), so a radix heap (Ahuja, Mehlhorn, Orlin & Tarjan
//! 1990) applies: items sit in buckets by the highest bit in which they differ from the last
//! popped key, and each item moves down at most 64 times, which beats a binary heap by a wide
//! margin on large grids.

/// Maps an `f32` to a `u32` whose unsigned order is the float's total order (−0 sorts below +0;
/// NaN never reaches the queue because it is nodata).
#[inline]
pub(crate) fn elevation_key(elevation: f32) -> u32 {
    let bits = elevation.to_bits();
    if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// Inverse of [`elevation_key`].
#[inline]
pub(crate) fn key_elevation(key: u32) -> f32 {
    if key & 0x8000_0000 != 0 {
        f32::from_bits(key & 0x7fff_ffff)
    } else {
        f32::from_bits(!key)
    }
}

/// Packs `(elevation, index)` into one sortable key.
#[inline]
fn pack(elevation: f32, index: u32) -> u64 {
    (u64::from(elevation_key(elevation)) << 32) | u64::from(index)
}

/// A monotone min-queue of `(elevation, cell index)`: pushes must not go below the last pop.
///
/// Keys pushed below the last popped key (which Priority-Flood never does) are clamped into the
/// lowest bucket and still pop before anything larger, so misuse degrades order, not memory
/// safety.
pub(crate) struct CellQueue {
    /// `buckets[0]` holds keys equal to `last`; `buckets[b]` for `b >= 1` keys whose highest bit
    /// differing from `last` is bit `b - 1`.
    buckets: Vec<Vec<u64>>,
    last: u64,
    len: usize,
}

impl CellQueue {
    pub(crate) fn new() -> Self {
        Self {
            buckets: (0..65).map(|_| Vec::new()).collect(),
            last: 0,
            len: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn bucket_of(&self, key: u64) -> usize {
        let differing = key ^ self.last;
        if differing == 0 || key < self.last {
            0
        } else {
            64 - differing.leading_zeros() as usize
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, elevation: f32, index: u32) {
        let key = pack(elevation, index);
        let bucket = self.bucket_of(key);
        if let Some(items) = self.buckets.get_mut(bucket) {
            items.push(key);
            self.len += 1;
        }
    }

    /// The smallest key, without removing it: `(elevation, index)`.
    pub(crate) fn peek(&mut self) -> Option<(f32, u32)> {
        self.refill_lowest_bucket();
        let key = self.buckets.first()?.last().copied()?;
        Some(unpack(key))
    }

    /// Removes and returns the smallest `(elevation, index)`.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(f32, u32)> {
        self.refill_lowest_bucket();
        let key = self.buckets.first_mut()?.pop()?;
        self.len -= 1;
        Some(unpack(key))
    }

    /// Makes bucket 0 non-empty (if the queue is not): finds the lowest non-empty bucket, moves
    /// `last` to its minimum and redistributes it, which sends that minimum to bucket 0.
    #[inline]
    fn refill_lowest_bucket(&mut self) {
        if self.len == 0 || self.buckets.first().is_some_and(|b| !b.is_empty()) {
            return;
        }
        let Some(lowest) = self.buckets.iter().position(|b| !b.is_empty()) else {
            return;
        };
        let Some(items) = self.buckets.get_mut(lowest).map(std::mem::take) else {
            return;
        };
        let Some(minimum) = items.iter().copied().min() else {
            return;
        };
        self.last = minimum;
        for &key in &items {
            let bucket = self.bucket_of(key);
            if let Some(target) = self.buckets.get_mut(bucket) {
                target.push(key);
            }
        }
        // Give the emptied bucket its allocation back so it is reused, not reallocated.
        let mut items = items;
        items.clear();
        if let Some(slot) = self.buckets.get_mut(lowest) {
            if slot.is_empty() && slot.capacity() < items.capacity() {
                *slot = items;
            }
        }
    }
}

#[inline]
fn unpack(key: u64) -> (f32, u32) {
    (key_elevation((key >> 32) as u32), key as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_preserve_float_order() {
        let values = [
            f32::NEG_INFINITY,
            -1e30,
            -1.5,
            -0.0,
            0.0,
            f32::from_bits(1),
            1.0,
            1.0f32.next_up(),
            3e38,
            f32::INFINITY,
        ];
        for pair in values.windows(2) {
            assert!(elevation_key(pair[0]) < elevation_key(pair[1]), "{pair:?}");
        }
        for value in values {
            assert_eq!(
                key_elevation(elevation_key(value)).to_bits(),
                value.to_bits()
            );
        }
    }

    #[test]
    fn pops_in_elevation_then_index_order_under_monotone_use() {
        let mut queue = CellQueue::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut reference = std::collections::BinaryHeap::new();
        let mut floor = -100.0f32;
        for round in 0..20_000u32 {
            let pushes = next() % 3;
            for _ in 0..pushes {
                let elevation = floor + (next() % 1000) as f32 * 0.25;
                let index = (next() % 1000) as u32;
                queue.push(elevation, index);
                reference.push(std::cmp::Reverse((elevation_key(elevation), index)));
            }
            if round % 2 == 0 {
                let popped = queue.pop();
                let expected = reference
                    .pop()
                    .map(|std::cmp::Reverse((key, index))| (key_elevation(key), index));
                assert_eq!(popped, expected);
                if let Some((elevation, _)) = popped {
                    floor = elevation;
                }
            }
            assert_eq!(queue.len(), reference.len());
        }
        while let Some(expected) = reference.pop() {
            let std::cmp::Reverse((key, index)) = expected;
            assert_eq!(queue.peek(), Some((key_elevation(key), index)));
            assert_eq!(queue.pop(), Some((key_elevation(key), index)));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.pop(), None);
    }
}
