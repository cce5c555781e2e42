//! Sets of half-open `u64` ranges, kept sorted, disjoint and non-adjacent.

use std::collections::BTreeMap;

/// A set of byte ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start → end, disjoint, non-adjacent.
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> Self {
        RangeSet::default()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.map.iter().map(|(s, e)| e - s).sum()
    }

    /// Adds `[start, end)`, merging with neighbours.
    pub fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        // Merge with a range that starts before and reaches `start`.
        if let Some((&s, &e)) = self.map.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
            self.map.remove(&s);
        }
        // Swallow ranges starting inside [start, end].
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
    }

    /// Removes `[start, end)`.
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let mut touched: Vec<(u64, u64)> = Vec::new();
        if let Some((&s, &e)) = self.map.range(..start).next_back()
            && e > start
        {
            touched.push((s, e));
        }
        touched.extend(self.map.range(start..end).map(|(&s, &e)| (s, e)));
        for (s, e) in touched {
            self.map.remove(&s);
            if s < start {
                self.map.insert(s, start);
            }
            if e > end {
                self.map.insert(end, e);
            }
        }
    }

    /// Removes everything below `floor`.
    pub fn clear_below(&mut self, floor: u64) {
        self.remove(0, floor);
    }

    /// Whether `[start, end)` is entirely covered.
    pub fn contains_range(&self, start: u64, end: u64) -> bool {
        start >= end || self.map.range(..=start).next_back().is_some_and(|(_, &e)| e >= end)
    }

    /// The ranges in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// The first range.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.map.iter().next().map(|(&s, &e)| (s, e))
    }

    /// The largest covered byte + 1.
    pub fn max_end(&self) -> Option<u64> {
        self.map.iter().next_back().map(|(_, &e)| e)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn behaves_like_a_bitmap(ops in prop::collection::vec((any::<bool>(), 0u64..200, 0u64..40), 0..60)) {
            let mut set = RangeSet::new();
            let mut bits = [false; 256];
            for (add, start, len) in ops {
                let end = start + len;
                if add { set.insert(start, end) } else { set.remove(start, end) }
                for b in &mut bits[start as usize..end as usize] { *b = add; }
                let want: u64 = bits.iter().filter(|&&b| b).count() as u64;
                prop_assert_eq!(set.covered(), want);
                // Disjoint, non-adjacent, each range matches the bitmap.
                let mut prev_end = None;
                for (s, e) in set.iter() {
                    prop_assert!(s < e);
                    if let Some(p) = prev_end { prop_assert!(s > p); }
                    prop_assert!((s..e).all(|i| bits[i as usize]));
                    prev_end = Some(e);
                }
            }
        }
    }
}
