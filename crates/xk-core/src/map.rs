//! `DemuxMap`: the x-kernel `Map` with the one-entry cache of the PIX thesis.
//!
//! Demultiplexing maps a key taken from a packet header to a session. Packets
//! come in trains for the same session, so the map remembers the last binding it
//! installed or resolved; a lookup that matches it skips hashing entirely. The
//! rules (seed 003, §5.1): `install` replaces an existing binding and fills the
//! cache; `erase` of the cached key clears the cache; `resolve` checks the cache
//! first and fills it on a table hit.
//!
//! The hash is foldhash with a seed supplied by the owner: keys come from the
//! network, so the seed should come from the endpoint's injected generator
//! rather than a constant (digest G20).

use core::hash::Hash;
use std::collections::HashMap;

use foldhash::fast::FixedState;

/// A hash map from demux keys to bindings, with a one-entry cache.
///
/// `CACHE` chooses the cache at compile time (PIX's way): `DemuxMap<K, V>`
/// has it, `DemuxMap<K, V, false>` (the baseline of experiments E4, E5 and
/// E10) does not, and its lookups carry no test of a cache at all (the
/// constant folds every cache branch away).
#[derive(Clone)]
pub struct DemuxMap<K, V, const CACHE: bool = true> {
    table: HashMap<K, V, FixedState>,
    cache: Option<(K, V)>,
}

impl<K: Eq + Hash + Clone, V: Clone> DemuxMap<K, V> {
    /// An empty map with the one-entry cache, hashing with `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_seed(seed)
    }
}

impl<K: Eq + Hash + Clone, V: Clone> DemuxMap<K, V, false> {
    /// An empty map without the cache (the baseline of experiment E4).
    pub fn without_cache(seed: u64) -> Self {
        Self::with_seed(seed)
    }
}

impl<K: Eq + Hash + Clone, V: Clone, const CACHE: bool> DemuxMap<K, V, CACHE> {
    /// An empty map, hashing with `seed`; with the one-entry cache if
    /// `CACHE` (for code generic over the choice).
    pub fn with_seed(seed: u64) -> Self {
        DemuxMap { table: HashMap::with_hasher(FixedState::with_seed(seed)), cache: None }
    }

    /// Reserves room for `additional` more bindings.
    pub fn reserve(&mut self, additional: usize) {
        self.table.reserve(additional);
    }

    /// Binds `key` to `value`, replacing and returning any previous binding.
    pub fn install(&mut self, key: K, value: V) -> Option<V> {
        if CACHE {
            self.cache = Some((key.clone(), value.clone()));
        }
        self.table.insert(key, value)
    }

    /// Removes the binding of `key`.
    pub fn erase(&mut self, key: &K) -> Option<V> {
        if CACHE && self.cache.as_ref().is_some_and(|(k, _)| k == key) {
            self.cache = None;
        }
        self.table.remove(key)
    }

    /// Looks `key` up: the cache first, then the table (filling the cache).
    #[inline]
    pub fn resolve(&mut self, key: &K) -> Option<V> {
        if CACHE
            && let Some((k, v)) = &self.cache
            && k == key
        {
            return Some(v.clone());
        }
        let v = self.table.get(key)?.clone();
        if CACHE {
            self.cache = Some((key.clone(), v.clone()));
        }
        Some(v)
    }

    /// Looks `key` up in the table without touching the cache.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.table.get(key)
    }

    /// Whether `key` is bound.
    pub fn contains(&self, key: &K) -> bool {
        self.table.contains_key(key)
    }

    /// The key currently in the cache, if any.
    pub fn cached_key(&self) -> Option<&K> {
        self.cache.as_ref().map(|(k, _)| k)
    }

    /// Number of bindings.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the map has no binding.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// All bindings, in an order fixed by the hash seed. Callers that need an
    /// order independent of the seed must sort.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        #[allow(clippy::iter_over_hash_type)] // order documented as seed-dependent
        self.table.iter()
    }

    /// Removes every binding and clears the cache.
    pub fn clear(&mut self) {
        self.table.clear();
        self.cache = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap as Model;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn cache_rules_of_the_seed() {
        let mut m = DemuxMap::new(7);
        assert_eq!(m.install([1u8, 2, 3, 4], 10), None);
        assert_eq!(m.cached_key(), Some(&[1, 2, 3, 4]), "install fills the cache");
        assert_eq!(m.install([1, 2, 3, 4], 11), Some(10), "install replaces");
        assert_eq!(m.resolve(&[1, 2, 3, 4]), Some(11), "cache holds the new value");
        m.install([9, 9, 9, 9], 99);
        assert_eq!(m.resolve(&[1, 2, 3, 4]), Some(11));
        assert_eq!(m.cached_key(), Some(&[1, 2, 3, 4]), "resolve fills the cache");
        assert_eq!(m.erase(&[1, 2, 3, 4]), Some(11));
        assert_eq!(m.cached_key(), None, "erase clears the cache");
        assert_eq!(m.resolve(&[1, 2, 3, 4]), None, "erased key is not served from the cache");
        assert_eq!(m.len(), 1);
        let mut n = DemuxMap::without_cache(7);
        n.install([1u8], 1);
        assert_eq!(n.resolve(&[1]), Some(1));
        assert_eq!(n.cached_key(), None);
    }

    proptest! {
        /// Any sequence of install/erase/resolve agrees with a plain map.
        #[test]
        fn agrees_with_a_plain_map(ops in prop::collection::vec((0u8..3, 0u8..8, any::<u16>()), 0..200)) {
            let mut m = DemuxMap::new(1);
            let mut model = Model::new();
            for (op, k, v) in ops {
                match op {
                    0 => prop_assert_eq!(m.install([k], v), model.insert([k], v)),
                    1 => prop_assert_eq!(m.erase(&[k]), model.remove(&[k])),
                    _ => prop_assert_eq!(m.resolve(&[k]), model.get(&[k]).copied()),
                }
                prop_assert_eq!(m.len(), model.len());
            }
            let mut all: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
            all.sort();
            let mut want: Vec<_> = model.into_iter().collect();
            want.sort();
            prop_assert_eq!(all, want);
        }
    }
}
