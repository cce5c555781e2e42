//! What the endpoint remembers to refuse packets that must not create state:
//! keys of recently closed contexts (stale duplicate FIRSTs).
//!
//! XTP 4.0 sets a context up with its first packet, so a FIRST delayed in
//! the network (or replayed) that arrives after its context was freed would
//! open a new context and deliver the old data a second time. TCP prevents
//! this with TIME-WAIT; we remember the `(peer, key)` of every responder
//! context we free for `hold` (120 s, twice a generous maximum segment
//! lifetime) and refuse FIRSTs that carry it. The table is bounded by count
//! too, so a churn of short contexts cannot grow it without end: beyond the
//! bound the oldest entries go first (a FIRST delayed that long is very
//! unlikely; exactly-once then rests on the random key bits alone).

use std::collections::VecDeque;
use std::net::SocketAddr;

use xk_core::DemuxMap;
use xk_time::{Duration, Instant};

pub(crate) struct RecentKeys {
    hold: Duration,
    max: usize,
    /// `(peer, key)` in the order they were freed, with their expiry.
    order: VecDeque<((SocketAddr, u64), Instant)>,
    /// The same entries, for lookup: the latest expiry of each.
    map: DemuxMap<(SocketAddr, u64), Instant>,
    /// Entries dropped before their time because the table was full.
    forgotten: u64,
}

impl RecentKeys {
    pub(crate) fn new(hold: Duration, max: usize, hash_seed: u64) -> Self {
        RecentKeys { hold, max, order: VecDeque::new(), map: DemuxMap::new(hash_seed), forgotten: 0 }
    }

    /// Remembers a freed responder context's `(peer, initiator key)`.
    pub(crate) fn insert(&mut self, now: Instant, peer: SocketAddr, key: u64) {
        if self.max == 0 || self.hold == Duration::ZERO {
            return;
        }
        self.expire(now);
        while self.order.len() >= self.max {
            self.pop_oldest();
            self.forgotten += 1;
        }
        let until = now + self.hold;
        self.order.push_back(((peer, key), until));
        self.map.install((peer, key), until);
    }

    /// Whether a FIRST from `peer` with `key` belongs to a recently closed
    /// context.
    pub(crate) fn contains(&mut self, now: Instant, peer: SocketAddr, key: u64) -> bool {
        self.expire(now);
        self.map.get(&(peer, key)).is_some_and(|&until| until > now)
    }

    /// Entries held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// (entries held now, entries forgotten early because the table was full).
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.order.len() as u64, self.forgotten)
    }

    fn expire(&mut self, now: Instant) {
        while self.order.front().is_some_and(|(_, until)| *until <= now) {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((k, until)) = self.order.pop_front()
            && self.map.get(&k) == Some(&until)
        {
            self.map.erase(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_for_a_while_and_is_bounded() {
        let peer: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let mut r = RecentKeys::new(Duration::from_secs(120), 3, 1);
        let t = Instant::from_secs(10);
        r.insert(t, peer, 1);
        assert!(r.contains(t + Duration::from_secs(119), peer, 1));
        assert!(!r.contains(t + Duration::from_secs(119), peer, 2));
        assert!(!r.contains(t + Duration::from_secs(120), peer, 1), "expired");
        assert_eq!(r.len(), 0);
        for k in 0..10 {
            r.insert(t, peer, k);
        }
        assert_eq!(r.len(), 3, "bounded by count");
        assert_eq!(r.counts(), (3, 7), "seven forgotten early");
        assert!(r.contains(t, peer, 9) && !r.contains(t, peer, 6), "the oldest went first");
    }
}
