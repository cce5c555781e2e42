//! One direction of an emulated link, in virtual time.
//!
//! # Stage order
//!
//! A packet offered at time `now` goes through, in this order:
//!
//! 1. **schedule** — parameter changes due at or before `now` take effect;
//! 2. **MTU** — longer than `mtu`: dropped (`DropReason::Mtu`);
//! 3. **blackout** — `now` inside an outage window: dropped;
//! 4. **loss** — Bernoulli or Gilbert–Elliott: dropped;
//! 5. **duplication** — with probability `duplicate` a second copy follows the
//!    same remaining stages independently;
//! 6. **corruption** — per copy: one random bit, or each bit at the BER;
//! 7. **queue and rate** — the copy joins the bottleneck queue if that keeps it
//!    within `limit_packets` / `limit_bytes` (tail drop otherwise) and is
//!    serialised at `rate_bps` after the packets ahead of it:
//!    `done = max(now, link_free) + ceil((len + overhead) · 8 · 10⁹ / rate)` ns;
//! 8. **delay and jitter** — `arrival = done + delay + jitter`, clamped to be no
//!    earlier than `done`; unless jitter may reorder, also no earlier than the
//!    previous arrival;
//! 9. **reordering** — with probability `reorder`, the copy skips stage 8 and
//!    arrives at `done`, ahead of earlier packets still in the delay line;
//! 10. **slotting** (netem's `slot`, applied as packets leave) — a packet due
//!     waits for the next slot start; when the slot's start lies before the
//!     packet is due, the next one is drawn `min`..`max` after it is due (as
//!     netem does); each slot releases at most `packets` / `bytes`, then the
//!     next slot is drawn from then.
//!
//! All times are integer nanoseconds. Each random process has its own stream
//! derived from the link's seed, so turning one impairment on or off does not
//! change the draws of another.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use xk_rand::Rng;
use xk_time::{Duration, Instant, duration_nanos};

use crate::noise::{self, LossProcess};
use crate::params::{ConfigError, JitterDist, LinkParams};

/// A packet the link can carry.
pub trait LinkPacket: Sized {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the packet is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Flips bit `bit` (0 = most significant bit of byte 0).
    fn flip_bit(&mut self, bit: usize);
    /// A copy for duplication.
    fn duplicate(&self) -> Self;
}

impl LinkPacket for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn flip_bit(&mut self, bit: usize) {
        if let Some(b) = self.get_mut(bit / 8) {
            *b ^= 0x80 >> (bit % 8);
        }
    }
    fn duplicate(&self) -> Self {
        self.clone()
    }
}

/// A shared buffer, as the real-time drivers hold datagrams (slices of one
/// receive buffer). Corrupting one copies it first: the other holders of the
/// buffer keep the bytes they saw. Rare (corruption only), so the copy is fine.
impl LinkPacket for bytes::Bytes {
    fn len(&self) -> usize {
        bytes::Bytes::len(self)
    }
    fn flip_bit(&mut self, bit: usize) {
        if bit / 8 < self.len() {
            let mut b = bytes::BytesMut::from(&self[..]);
            b[bit / 8] ^= 0x80 >> (bit % 8);
            *self = b.freeze();
        }
    }
    fn duplicate(&self) -> Self {
        self.clone()
    }
}

/// Why the link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Longer than the MTU.
    Mtu,
    /// Sent during an outage.
    Blackout,
    /// The loss process.
    Loss,
    /// The queue was full.
    QueueFull,
    /// Overlapped another transmission on a shared channel.
    Collision,
}

/// What happened to an offered packet (the first copy; see `duplicated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// In flight; arrives at the given time.
    Scheduled(Instant),
    /// Dropped.
    Dropped(DropReason),
    /// Waiting for a shared channel; its fate is decided on the air (see
    /// [`crate::channel`]).
    Queued,
}

/// The outcome of [`Link::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendOutcome {
    /// Fate of the packet.
    pub fate: Fate,
    /// Fate of its duplicate, if one was made.
    pub duplicate: Option<Fate>,
    /// Whether the first copy was corrupted.
    pub corrupted: bool,
}

/// A packet coming out of the link.
#[derive(Debug)]
pub struct Delivery<P> {
    /// When it arrives.
    pub at: Instant,
    /// Sequence number assigned at `send` (duplicates share it).
    pub id: u64,
    /// The packet (possibly corrupted).
    pub packet: P,
    /// Whether bits were flipped.
    pub corrupted: bool,
    /// Whether this is the duplicate copy.
    pub duplicate: bool,
}

/// Counters of one link direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered.
    pub offered: u64,
    /// Bytes offered.
    pub offered_bytes: u64,
    /// Copies delivered by `poll`.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Dropped: MTU.
    pub drop_mtu: u64,
    /// Dropped: outage.
    pub drop_blackout: u64,
    /// Dropped: loss process.
    pub drop_loss: u64,
    /// Dropped: queue full.
    pub drop_queue: u64,
    /// Copies made by duplication.
    pub duplicated: u64,
    /// Copies corrupted.
    pub corrupted: u64,
    /// Copies that skipped the delay line.
    pub reordered: u64,
    /// Largest queue seen, in packets.
    pub max_queue: usize,
    /// Frames lost to overlapping transmissions (shared channel only).
    pub drop_collision: u64,
    /// Transmissions started (shared channel only).
    pub key_ups: u64,
}

pub(crate) struct InFlight<P> {
    pub(crate) at: Instant,
    pub(crate) order: u64,
    pub(crate) delivery: Delivery<P>,
}

impl<P> PartialEq for InFlight<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl<P> Eq for InFlight<P> {}
impl<P> PartialOrd for InFlight<P> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for InFlight<P> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

struct Streams {
    loss: LossProcess,
    dup: Rng,
    corrupt: Rng,
    jitter: Rng,
    reorder: Rng,
    slot: Rng,
}

/// Where slotting stands: the next slot's start and what it may still carry.
#[derive(Clone, Copy, Default)]
struct SlotState {
    next: Instant,
    packets_left: u64,
    bytes_left: u64,
}

/// A timed change of parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// Offset from the link's start.
    pub at: Duration,
    /// The parameters from then on.
    pub params: LinkParams,
}

/// One direction of a link. Sans-I/O: `send` packets in, `poll` them out,
/// `next_arrival` says when to poll next.
pub struct Link<P> {
    params: LinkParams,
    changes: VecDeque<Change>,
    start: Instant,
    rng: Streams,
    /// Serialisation end times and sizes of queued packets, oldest first.
    queue: VecDeque<(Instant, usize)>,
    queue_bytes: usize,
    link_free: Instant,
    last_arrival: Instant,
    flight: BinaryHeap<Reverse<InFlight<P>>>,
    next_id: u64,
    next_order: u64,
    stats: LinkStats,
    slot: SlotState,
}

impl<P: LinkPacket> Link<P> {
    /// A link that starts at `start` with `params`, then applies `changes` (in
    /// any order) at their offsets. Random streams derive from `seed` and
    /// `label` (use a different label per direction).
    pub fn new(
        params: LinkParams,
        mut changes: Vec<Change>,
        start: Instant,
        seed: u64,
        label: &str,
    ) -> Result<Self, ConfigError> {
        params.validate()?;
        for (i, c) in changes.iter().enumerate() {
            c.params
                .validate()
                .map_err(|e| ConfigError { param: format!("schedule[{i}].{}", e.param), ..e })?;
        }
        if params.csma.is_some() || changes.iter().any(|c| c.params.csma.is_some()) {
            return Err(ConfigError::new(
                "csma",
                label,
                "a shared radio channel joins both directions: build it as a Path, not as one Link",
            ));
        }
        changes.sort_by_key(|c| c.at);
        let s = |what: &str| Rng::derive(seed, &format!("{label}/{what}"));
        Ok(Link {
            params,
            changes: changes.into(),
            start,
            rng: Streams {
                loss: LossProcess::new(s("loss")),
                dup: s("dup"),
                corrupt: s("corrupt"),
                jitter: s("jitter"),
                reorder: s("reorder"),
                slot: s("slot"),
            },
            queue: VecDeque::new(),
            queue_bytes: 0,
            link_free: start,
            last_arrival: start,
            flight: BinaryHeap::new(),
            next_id: 0,
            next_order: 0,
            stats: LinkStats::default(),
            slot: SlotState::default(),
        })
    }

    /// The parameters in force.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Packets in flight (queued or in the delay line).
    pub fn in_flight(&self) -> usize {
        self.flight.len()
    }

    /// When the next packet arrives, if any is in flight. With slotting,
    /// not before the next slot start (a slot not yet drawn is drawn at the
    /// first `poll` at or after the packet is due; ask again after it).
    pub fn next_arrival(&self) -> Option<Instant> {
        let at = self.flight.peek().map(|Reverse(f)| f.at)?;
        Some(if self.params.slot.is_some() { at.max(self.slot.next) } else { at })
    }

    /// A new slot starting `min`..`max` after `from`, with a full budget.
    fn draw_slot(&mut self, from: Instant) {
        let Some(s) = self.params.slot else { return };
        let (lo, hi) = (duration_nanos(s.min), duration_nanos(s.max));
        let gap = lo + ((hi - lo) as f64 * self.rng.slot.unit()).round() as u64;
        let cap = |n: u64| if n == 0 { u64::MAX } else { n };
        self.slot = SlotState {
            next: from + Duration::from_nanos(gap),
            packets_left: cap(u64::from(s.packets)),
            bytes_left: cap(s.bytes),
        };
    }

    /// The next packet that has arrived by `now`.
    pub fn poll(&mut self, now: Instant) -> Option<Delivery<P>> {
        let at = self.flight.peek()?.0.at;
        if at > now {
            return None;
        }
        if self.params.slot.is_some() {
            if self.slot.next < at {
                self.draw_slot(at);
            }
            if self.slot.next > now {
                return None;
            }
        }
        let Reverse(mut f) = self.flight.pop()?;
        if self.params.slot.is_some() {
            // It leaves at the slot's start, not when it became due: drivers
            // measure their release error against this.
            f.delivery.at = f.delivery.at.max(self.slot.next);
            let len = f.delivery.packet.len() as u64;
            self.slot.packets_left = self.slot.packets_left.saturating_sub(1);
            self.slot.bytes_left = self.slot.bytes_left.saturating_sub(len);
            if self.slot.packets_left == 0 || self.slot.bytes_left == 0 {
                self.draw_slot(now);
            }
        }
        self.stats.delivered += 1;
        self.stats.delivered_bytes += f.delivery.packet.len() as u64;
        Some(f.delivery)
    }

    /// Offers a packet to the link at `now` (non-decreasing across calls).
    pub fn send(&mut self, now: Instant, packet: P) -> SendOutcome {
        while self.changes.front().is_some_and(|c| self.start + c.at <= now) {
            if let Some(c) = self.changes.pop_front() {
                self.params = c.params;
            }
        }
        let len = packet.len();
        self.stats.offered += 1;
        self.stats.offered_bytes += len as u64;
        let dropped = |s: &mut Self, r: DropReason| {
            match r {
                DropReason::Mtu => s.stats.drop_mtu += 1,
                DropReason::Blackout => s.stats.drop_blackout += 1,
                DropReason::Loss => s.stats.drop_loss += 1,
                DropReason::QueueFull => s.stats.drop_queue += 1,
                DropReason::Collision => s.stats.drop_collision += 1,
            }
            SendOutcome { fate: Fate::Dropped(r), duplicate: None, corrupted: false }
        };
        if self.params.mtu > 0 && len > self.params.mtu {
            return dropped(self, DropReason::Mtu);
        }
        let since = now.saturating_since(self.start);
        if self.params.blackouts.iter().any(|b| b.start <= since && since < b.end) {
            return dropped(self, DropReason::Blackout);
        }
        if self.rng.loss.lose(&self.params.loss) {
            return dropped(self, DropReason::Loss);
        }
        let id = self.next_id;
        self.next_id += 1;
        let dup = if self.rng.dup.chance(self.params.duplicate) { Some(packet.duplicate()) } else { None };
        let (fate, corrupted) = self.carry(now, id, packet, false);
        let duplicate = dup.map(|d| {
            self.stats.duplicated += 1;
            self.carry(now, id, d, true).0
        });
        SendOutcome { fate, duplicate, corrupted }
    }

    fn jitter_ns(&mut self) -> i64 {
        let j = duration_nanos(self.params.jitter) as f64;
        if j == 0.0 {
            return 0;
        }
        let x = match self.params.jitter_dist {
            JitterDist::Uniform => (self.rng.jitter.unit() * 2.0 - 1.0) * j,
            JitterDist::Normal => self.rng.jitter.normal() * j,
            JitterDist::Pareto => {
                // Shape 3: std = xm·√3/2, mean = 1.5·xm.
                let xm = 2.0 * j / 3f64.sqrt();
                self.rng.jitter.pareto(xm, 3.0) - 1.5 * xm
            }
        };
        x.round() as i64
    }

    /// Stages 6–9 for one copy.
    fn carry(&mut self, now: Instant, id: u64, mut packet: P, duplicate: bool) -> (Fate, bool) {
        let corrupted = noise::corrupt(&mut self.rng.corrupt, &self.params.corrupt, &mut packet);
        // Stage 7: queue and rate.
        while self.queue.front().is_some_and(|&(done, _)| done <= now) {
            if let Some((_, b)) = self.queue.pop_front() {
                self.queue_bytes -= b;
            }
        }
        let len = packet.len();
        let p = &self.params;
        if (p.limit_packets > 0 && self.queue.len() + 1 > p.limit_packets)
            || (p.limit_bytes > 0 && self.queue_bytes + len > p.limit_bytes)
        {
            self.stats.drop_queue += 1;
            return (Fate::Dropped(DropReason::QueueFull), false);
        }
        let done = if p.rate_bps > 0 {
            let ns = noise::serialisation_ns(len, p.overhead, p.rate_bps);
            let start = self.link_free.max(now);
            let done = start + Duration::from_nanos(ns);
            self.link_free = done;
            self.queue.push_back((done, len));
            self.queue_bytes += len;
            self.stats.max_queue = self.stats.max_queue.max(self.queue.len());
            done
        } else {
            now
        };
        // Stages 8–9: delay line, or skip it.
        let at = if self.rng.reorder.chance(self.params.reorder) {
            self.stats.reordered += 1;
            done
        } else {
            let base = done + self.params.delay;
            let j = self.jitter_ns();
            let mut at = if j >= 0 {
                base + Duration::from_nanos(j as u64)
            } else {
                Instant::from_nanos(base.as_nanos().saturating_sub(j.unsigned_abs())).max(done)
            };
            if !self.params.jitter_reorders {
                at = at.max(self.last_arrival);
            }
            self.last_arrival = self.last_arrival.max(at);
            at
        };
        if corrupted {
            self.stats.corrupted += 1;
        }
        let order = self.next_order;
        self.next_order += 1;
        self.flight.push(Reverse(InFlight {
            at,
            order,
            delivery: Delivery { at, id, packet, corrupted, duplicate },
        }));
        (Fate::Scheduled(at), corrupted)
    }
}
