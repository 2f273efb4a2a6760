//! Bounded memos: every cache keyed by what a caller sends (a CRS, a pair of CRSs, a prompt's
//! arguments, a refusal's key) holds at most a fixed number of entries and forgets the least
//! recently used first, so that a client sending 10,000 distinct CRSs cannot grow the server.
//!
//! A hit or an insert costs a hash lookup; an insert into a full memo also scans it once for
//! the oldest entry (a few hundred entries: microseconds, next to the PROJ search or plugin
//! call a memo saves). Keys longer than [`MAX_KEY_BYTES`] are not memoised at all.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// A key (as its caller measures it) longer than this is computed every time, not kept.
pub const MAX_KEY_BYTES: usize = 256 << 10;

/// A least-recently-used memo of at most `capacity` entries.
pub struct Memo<K, V> {
    capacity: usize,
    inner: Mutex<Option<Inner<K, V>>>,
}

struct Inner<K, V> {
    entries: HashMap<K, (V, u64)>,
    tick: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> Memo<K, V> {
    /// An empty memo (usable in a `static`).
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(None),
        }
    }

    /// The value for `key`, if memoised (and marks it used).
    pub fn get(&self, key: &K) -> Option<V> {
        let mut guard = self.inner.lock().ok()?;
        let inner = guard.as_mut()?;
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.get_mut(key).map(|(value, used)| {
            *used = tick;
            value.clone()
        })
    }

    /// Memoise `value` for `key`, forgetting the least recently used entry if full.
    pub fn insert(&self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut guard) = self.inner.lock() else {
            return;
        };
        let inner = guard.get_or_insert_with(|| Inner {
            entries: HashMap::new(),
            tick: 0,
        });
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.entries.contains_key(&key) && inner.entries.len() >= self.capacity {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                inner.entries.remove(&oldest);
            }
        }
        inner.entries.insert(key, (value, tick));
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|i| i.entries.len()))
            .unwrap_or(0)
    }

    /// Whether the memo holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry for `key`, removed.
    pub fn remove(&self, key: &K) -> Option<V> {
        let mut guard = self.inner.lock().ok()?;
        guard.as_mut()?.entries.remove(key).map(|(v, _)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 21): the transformation cache and the authority memo were never
    /// evicted; a client sending distinct CRSs grew the server without bound.
    #[test]
    fn a_full_memo_forgets_the_least_recently_used_entry() {
        let memo: Memo<String, usize> = Memo::new(3);
        for i in 0..3 {
            memo.insert(format!("k{i}"), i);
        }
        assert_eq!(memo.get(&"k0".to_string()), Some(0));
        memo.insert("k3".to_string(), 3);
        assert_eq!(memo.len(), 3);
        assert_eq!(memo.get(&"k1".to_string()), None, "the least recently used");
        assert_eq!(memo.get(&"k0".to_string()), Some(0));
        for i in 0..10_000 {
            memo.insert(format!("x{i}"), i);
        }
        assert_eq!(memo.len(), 3);
        assert_eq!(memo.get(&"x9999".to_string()), Some(9999));
        memo.insert("x9999".to_string(), 1);
        assert_eq!(memo.len(), 3);
        assert_eq!(memo.remove(&"x9999".to_string()), Some(1));
        let none: Memo<u8, u8> = Memo::new(0);
        none.insert(1, 1);
        assert!(none.is_empty());
    }
}
