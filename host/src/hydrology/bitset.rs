//! A fixed-size bit set over cell indices.
//!
//! Priority-Flood's "closed" set (Barnes, Lehman & Mulla 2014) and the other visited masks need
//! one bit per cell, not one byte: on a 4000 x 4000 grid that is 2 MB instead of 16 MB, which
//! keeps peak memory within a small multiple of the DEM. Out-of-range indices read as unset and
//! are ignored on write, so a caller bug cannot panic.

/// One bit per cell.
#[derive(Debug, Clone)]
pub(crate) struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// `len` bits, all unset.
    pub(crate) fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
        }
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, index: usize) -> bool {
        self.words
            .get(index >> 6)
            .is_some_and(|word| word & (1u64 << (index & 63)) != 0)
    }

    #[inline]
    pub(crate) fn insert(&mut self, index: usize) {
        if let Some(word) = self.words.get_mut(index >> 6) {
            *word |= 1u64 << (index & 63);
        }
    }

    /// Sets the bit and reports whether it was unset before.
    #[inline]
    pub(crate) fn insert_new(&mut self, index: usize) -> bool {
        match self.words.get_mut(index >> 6) {
            Some(word) => {
                let bit = 1u64 << (index & 63);
                let was_unset = *word & bit == 0;
                *word |= bit;
                was_unset
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_reads_bits() {
        let mut bits = BitSet::new(130);
        assert!(!bits.contains(129));
        bits.insert(129);
        assert!(bits.contains(129));
        assert!(!bits.contains(128));
        assert!(bits.insert_new(64));
        assert!(!bits.insert_new(64));
        bits.insert(10_000);
        assert!(!bits.contains(10_000));
    }
}
