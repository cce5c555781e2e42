//! Per-phase profiles, as PATO reported them: every span (a `Begin` and
//! the next `End` of the same point on the same thread) is one sample of
//! its phase; a phase's profile is its count and min / median / p99 / max.
//!
//! Medians and percentiles are xk-stats' nearest rank (always a measured
//! duration, like a ping summary). Outliers are not removed here: the
//! caller sets apart the operations the operating system disturbed (see
//! the lab's E8) and profiles the rest and them separately.

use std::collections::BTreeMap;

use crate::event::{Phase, Point};
use crate::recorder::Recording;

/// One phase's durations, nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseProfile {
    /// The tracepoint whose spans these are.
    pub point: Point,
    /// Spans measured.
    pub count: usize,
    /// Shortest.
    pub min: u64,
    /// Median (nearest rank).
    pub median: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
    /// Longest.
    pub max: u64,
    /// Sum of all spans.
    pub total: u64,
}

/// The durations of every span in `rec`, per point (spans left open at the
/// end, or an `End` without a `Begin`, are not counted).
pub fn durations(rec: &Recording) -> BTreeMap<Point, Vec<u64>> {
    let mut out: BTreeMap<Point, Vec<u64>> = BTreeMap::new();
    for t in &rec.threads {
        let mut open: BTreeMap<Point, Vec<u64>> = BTreeMap::new();
        for e in &t.events {
            match e.phase {
                Phase::Begin => open.entry(e.point).or_default().push(e.t),
                Phase::End => {
                    if let Some(b) = open.get_mut(&e.point).and_then(Vec::pop) {
                        out.entry(e.point).or_default().push(e.t.saturating_sub(b));
                    }
                }
                Phase::Instant => {}
            }
        }
    }
    out
}

/// Profiles of the spans in `rec`, one per point that has any, in
/// [`Point`] order.
pub fn profile(rec: &Recording) -> Vec<PhaseProfile> {
    durations(rec).into_iter().filter_map(|(point, d)| summarise(point, d)).collect()
}

/// The profile of one phase's durations (None for none).
pub fn summarise(point: Point, mut d: Vec<u64>) -> Option<PhaseProfile> {
    d.sort_unstable();
    Some(PhaseProfile {
        point,
        count: d.len(),
        min: *d.first()?,
        median: xk_stats::nearest_rank(&d, 0.5)?,
        p99: xk_stats::nearest_rank(&d, 0.99)?,
        max: *d.last()?,
        total: d.iter().sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::recorder::ThreadEvents;

    #[test]
    fn spans_pair_per_thread_and_point() {
        let mut events = Vec::new();
        for i in 0..100u64 {
            let t0 = i * 1_000;
            events.push(Event::begin(t0, Point::AppWrite, 0, 0, 0));
            events.push(Event::begin(t0 + 10, Point::SendCall, 0, 0, 0));
            events.push(Event::end(t0 + 10 + (i + 1), Point::SendCall, 0, 1, 0));
            events.push(Event::end(t0 + 500, Point::AppWrite, 0, 0, 0));
        }
        events.push(Event::end(999_999, Point::RecvCall, 0, 0, 0)); // no begin
        let rec = Recording { threads: vec![ThreadEvents { tid: 1, name: "t".into(), events }], dropped: 0 };
        let p = profile(&rec);
        assert_eq!(p.len(), 2);
        let w = p.iter().find(|p| p.point == Point::AppWrite).unwrap();
        assert_eq!((w.count, w.min, w.median, w.max), (100, 500, 500, 500));
        let s = p.iter().find(|p| p.point == Point::SendCall).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.max, s.total), (1, 50, 99, 100, 5050));
    }
}
