//! A two-way path: what every driver holds. Either two independent link
//! directions ([`Link`]) or one half-duplex shared radio channel
//! ([`Channel`]), chosen by the configuration (`csma` set or not).
//!
//! Direction 0 is "forward" (the first endpoint sends), 1 is "reverse".

use xk_time::Instant;

use crate::channel::{AirDrop, Channel};
use crate::config::LinkSpec;
use crate::link::{Delivery, Link, LinkPacket, LinkStats, SendOutcome};
use crate::params::ConfigError;

enum Inner<P> {
    Duplex(Box<[Link<P>; 2]>),
    Shared(Box<Channel<P>>),
}

/// Both directions between two endpoints.
pub struct Path<P>(Inner<P>);

impl<P: LinkPacket> Path<P> {
    /// A path from the two directions' configurations. Random streams derive
    /// from `seed` and `labels` (one per direction), so a duplex path draws
    /// exactly what two `Link`s with those labels would.
    pub fn new(
        forward: &LinkSpec,
        reverse: &LinkSpec,
        start: Instant,
        seed: u64,
        labels: [&str; 2],
    ) -> Result<Self, ConfigError> {
        if forward.params.csma.is_none() && reverse.params.csma.is_none() {
            let mk = |s: &LinkSpec, label| Link::new(s.params.clone(), s.changes.clone(), start, seed, label);
            return Ok(Path(Inner::Duplex(Box::new([mk(forward, labels[0])?, mk(reverse, labels[1])?]))));
        }
        for (s, name) in [(forward, "forward"), (reverse, "reverse")] {
            if let Some(c) = s.changes.first() {
                return Err(ConfigError::new(
                    format!("{name} at"),
                    format!("{:?}", c.at),
                    "parameter schedules are not supported on a shared radio channel (csma)",
                ));
            }
        }
        let params = [forward.params.clone(), reverse.params.clone()];
        Ok(Path(Inner::Shared(Box::new(Channel::new(params, start, seed, labels)?))))
    }

    /// Whether this is a shared half-duplex channel.
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Inner::Shared(_))
    }

    /// Offers a packet in direction `dir` at `now`.
    pub fn send(&mut self, now: Instant, dir: usize, packet: P) -> SendOutcome {
        match &mut self.0 {
            Inner::Duplex(l) => l[dir].send(now, packet),
            Inner::Shared(c) => c.send(now, dir, packet),
        }
    }

    /// The next packet of direction `dir` due by `now`.
    pub fn poll(&mut self, now: Instant, dir: usize) -> Option<Delivery<P>> {
        match &mut self.0 {
            Inner::Duplex(l) => l[dir].poll(now),
            Inner::Shared(c) => c.poll(now, dir),
        }
    }

    /// When to call `poll` next (a hand-over, or a channel event).
    pub fn next_event(&self) -> Option<Instant> {
        match &self.0 {
            Inner::Duplex(l) => [l[0].next_arrival(), l[1].next_arrival()].into_iter().flatten().min(),
            Inner::Shared(c) => c.next_event(),
        }
    }

    /// When direction `dir`'s next packet arrives, on a duplex path (None on
    /// a shared channel, whose releases depend on both directions' events):
    /// the netns driver holds a batch back for a packet due soon after it.
    pub fn next_arrival(&self, dir: usize) -> Option<Instant> {
        match &self.0 {
            Inner::Duplex(l) => l[dir].next_arrival(),
            Inner::Shared(_) => None,
        }
    }

    /// Counters of direction `dir`.
    pub fn stats(&self, dir: usize) -> LinkStats {
        match &self.0 {
            Inner::Duplex(l) => l[dir].stats(),
            Inner::Shared(c) => c.stats(dir),
        }
    }

    /// Frames a shared channel lost after queueing them (collisions, noise)
    /// since the last call; always empty for a duplex path, whose drops are
    /// all known at `send`.
    pub fn take_air_drops(&mut self) -> Vec<AirDrop> {
        match &mut self.0 {
            Inner::Duplex(_) => Vec::new(),
            Inner::Shared(c) => c.take_air_drops(),
        }
    }

    /// Packets in flight in both directions.
    pub fn in_flight(&self) -> usize {
        match &self.0 {
            Inner::Duplex(l) => l[0].in_flight() + l[1].in_flight(),
            Inner::Shared(c) => c.in_flight(),
        }
    }
}
