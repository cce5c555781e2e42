//! Sets of half-open `u64` ranges, kept sorted, disjoint and non-adjacent.
//!
//! Every operation is O(log n + k) for the k ranges it touches, and the total
//! covered is kept as a running sum, so the per-packet questions the engine
//! asks (bytes in flight, holes in one packet's range) do not grow with the
//! window.

use std::collections::BTreeMap;

/// A set of byte ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start → end, disjoint, non-adjacent.
    map: BTreeMap<u64, u64>,
    /// Sum of `end - start` over `map`.
    covered: u64,
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
        self.covered
    }

    /// Adds `[start, end)`, merging with neighbours.
    pub fn insert(&mut self, start: u64, end: u64) {
        self.insert_with(start, end, |_, _| {});
    }

    /// Adds `[start, end)` and calls `new` for each part of it that was not
    /// covered before, in order. Returns the bytes newly covered.
    pub fn insert_with(&mut self, start: u64, end: u64, mut new: impl FnMut(u64, u64)) -> u64 {
        if start >= end {
            return 0;
        }
        let before = self.covered;
        let (mut lo, mut hi) = (start, end);
        // The uncovered parts of [start, end) are the gaps between the ranges
        // merged below; `at` walks them left to right.
        let mut at = start;
        // Merge with a range that starts before and reaches `start`.
        if let Some((&s, &e)) = self.map.range(..=start).next_back()
            && e >= start
        {
            at = at.max(e);
            lo = s;
            hi = hi.max(e);
            self.map.remove(&s);
            self.covered -= e - s;
        }
        // Swallow ranges starting inside [start, end].
        while let Some((&s, &e)) = self.map.range(lo..=hi).next() {
            if s > at && at < end {
                new(at, s.min(end));
            }
            at = at.max(e);
            hi = hi.max(e);
            self.map.remove(&s);
            self.covered -= e - s;
        }
        if at < end {
            new(at, end);
        }
        self.map.insert(lo, hi);
        self.covered += hi - lo;
        self.covered - before
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
            self.covered -= e - s;
            if s < start {
                self.map.insert(s, start);
                self.covered += start - s;
            }
            if e > end {
                self.map.insert(end, e);
                self.covered += e - end;
            }
        }
    }

    /// Removes everything below `floor`.
    pub fn clear_below(&mut self, floor: u64) {
        while let Some((&s, &e)) = self.map.first_key_value() {
            if s >= floor {
                break;
            }
            self.map.remove(&s);
            self.covered -= e - s;
            if e > floor {
                self.map.insert(floor, e);
                self.covered += e - floor;
                break;
            }
        }
    }

    /// Calls `f` for each part of `[start, end)` the set does not cover, in
    /// order.
    pub fn for_each_gap(&self, start: u64, end: u64, mut f: impl FnMut(u64, u64)) {
        let mut at = start;
        if let Some((_, &e)) = self.map.range(..=start).next_back() {
            at = at.max(e);
        }
        for (&s, &e) in self.map.range(start..end) {
            if s > at {
                f(at, s);
            }
            at = at.max(e);
        }
        if at < end {
            f(at, end);
        }
    }

    /// Whether `[start, end)` is entirely covered.
    pub fn contains_range(&self, start: u64, end: u64) -> bool {
        start >= end || self.map.range(..=start).next_back().is_some_and(|(_, &e)| e >= end)
    }

    /// The ranges in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
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
        fn behaves_like_a_bitmap(ops in prop::collection::vec((any::<bool>(), 0u64..200, 0u64..40), 0..60), floor in 0u64..240) {
            let mut set = RangeSet::new();
            let mut bits = [false; 256];
            for (add, start, len) in ops {
                let end = start + len;
                // The gaps reported before an insert are exactly the bits it sets.
                let mut gaps = Vec::new();
                set.for_each_gap(start, end, |a, b| gaps.push((a, b)));
                let want_gaps: u64 = (start..end).filter(|&i| !bits[i as usize]).count() as u64;
                prop_assert_eq!(gaps.iter().map(|(a, b)| b - a).sum::<u64>(), want_gaps);
                if add {
                    let mut fresh = Vec::new();
                    let n = set.insert_with(start, end, |a, b| fresh.push((a, b)));
                    prop_assert_eq!(n, want_gaps);
                    prop_assert_eq!(&fresh, &gaps);
                } else { set.remove(start, end) }
                for b in &mut bits[start as usize..end as usize] { *b = add; }
                let want: u64 = bits.iter().filter(|&&b| b).count() as u64;
                prop_assert_eq!(set.covered(), want);
                prop_assert_eq!(set.covered(), set.iter().map(|(s, e)| e - s).sum::<u64>());
                // Disjoint, non-adjacent, each range matches the bitmap.
                let mut prev_end = None;
                for (s, e) in set.iter() {
                    prop_assert!(s < e);
                    if let Some(p) = prev_end { prop_assert!(s > p); }
                    prop_assert!((s..e).all(|i| bits[i as usize]));
                    prev_end = Some(e);
                }
            }
            set.clear_below(floor);
            for b in &mut bits[..floor as usize] { *b = false; }
            prop_assert_eq!(set.covered(), bits.iter().filter(|&&b| b).count() as u64);
            prop_assert!(set.iter().all(|(s, e)| s >= floor && (s..e).all(|i| bits[i as usize])));
        }
    }
}
