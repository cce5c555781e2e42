//! A half-duplex shared radio channel between two stations, with
//! p-persistent CSMA as a KISS terminal node controller applies it — the
//! packet-radio link of seed 003 (AX.25, 1,200 and 9,600 bit/s, 255-byte
//! frames).
//!
//! # Rules
//!
//! Station `d` transmits direction `d` (0 = forward, 1 = reverse) and
//! receives the other. A packet offered by a station goes through:
//!
//! 1. **MTU, blackout** — as on a dedicated link (dropped if too long or sent
//!    during an outage);
//! 2. **queue** — the station's transmit buffer, frames waiting or on the air,
//!    bounded by `limit_packets` / `limit_bytes` (tail drop);
//! 3. **channel access** — when a station has frames and is not transmitting,
//!    it checks the channel. If it senses a carrier it re-checks when that
//!    transmission ends. If not, it draws: with probability `persist` it keys
//!    up now, otherwise it waits one `slot` and checks again. A transmission
//!    is sensed from `dcd` after its key-up (strictly after) until its end, so
//!    two stations that key up within `dcd` of each other both transmit;
//! 4. **transmission** — key-up, `txdelay` of carrier, then up to `maxframe`
//!    queued frames back to back, each `(len + overhead) · 8 / rate` long
//!    (rounded up to the nanosecond), then `txtail`. A station with more
//!    frames goes back to step 3 at the end;
//! 5. **reception** — a frame is received if no other transmission overlaps
//!    its airtime on the channel, the receiver's own included (half duplex).
//!    Overlapping frames are lost (`drop_collision`);
//! 6. **noise** — the direction's loss and corruption processes, as on a
//!    dedicated link, for frames that survived the channel;
//! 7. **delay** — the frame is handed over `delay` after its last bit.
//!
//! Jitter, duplication, reordering and parameter schedules are refused on
//! this channel (configuration error): the model does not define them.
//!
//! Events at one instant run in a fixed order — transmissions that end, then
//! channel checks in station order — and every draw comes from a stream
//! derived from the seed, so a run is a function of its seed and offers.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use xk_rand::Rng;
use xk_time::{Duration, Instant};

use crate::link::{Delivery, DropReason, Fate, InFlight, LinkPacket, LinkStats, SendOutcome};
use crate::noise::{self, LossProcess};
use crate::params::{ConfigError, CsmaParams, LinkParams};

/// What a station is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Nothing to send.
    Idle,
    /// Checks the channel at this time.
    CheckAt(Instant),
    /// Keyed up until this time.
    Sending(Instant),
}

/// One transmission on the air (kept while it may overlap a frame).
#[derive(Clone, Copy, Debug)]
struct Tx {
    station: usize,
    key_up: Instant,
    end: Instant,
}

struct Frame<P> {
    id: u64,
    len: usize,
    packet: P,
    start: Instant,
    end: Instant,
}

struct Station<P> {
    params: LinkParams,
    queue: VecDeque<Frame<P>>,
    on_air: VecDeque<Frame<P>>,
    buffered_bytes: usize,
    access: Access,
    persist: Rng,
    loss: LossProcess,
    corrupt: Rng,
    arrivals: BinaryHeap<Reverse<InFlight<P>>>,
    stats: LinkStats,
    next_id: u64,
    /// Frames lost on the air since the last `take_air_drops`.
    air_drops: Vec<AirDrop>,
}

/// A frame the channel lost after it was queued (its offer returned
/// [`Fate::Queued`]): reported so logs can close every frame's story.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AirDrop {
    /// Direction (the sending station).
    pub dir: usize,
    /// The id the frame would have been delivered with.
    pub id: u64,
    /// When its last bit went out.
    pub at: Instant,
    /// Collision or loss (noise).
    pub reason: DropReason,
}

impl<P> Station<P> {
    /// The station's next event on the channel: the end of its next frame on
    /// the air, the end of its transmission, or a channel check.
    fn next_channel_event(&self) -> Option<Instant> {
        let access = match self.access {
            Access::Idle => None,
            Access::CheckAt(t) | Access::Sending(t) => Some(t),
        };
        let frame = self.on_air.front().map(|f| f.end);
        access.into_iter().chain(frame).min()
    }
}

/// A half-duplex channel shared by two stations. Sans-I/O like
/// [`crate::Link`]: `send` frames in, `poll` them out per direction,
/// `next_event` says when the model next has something to do.
pub struct Channel<P> {
    csma: CsmaParams,
    start: Instant,
    now: Instant,
    stations: [Station<P>; 2],
    history: Vec<Tx>,
    next_order: u64,
}

impl<P: LinkPacket> Channel<P> {
    /// A channel; `params[d]` describes what station `d` sends (direction
    /// `d`). Both must carry the same [`CsmaParams`] (one channel).
    pub fn new(
        params: [LinkParams; 2],
        start: Instant,
        seed: u64,
        labels: [&str; 2],
    ) -> Result<Self, ConfigError> {
        let csma = match (&params[0].csma, &params[1].csma) {
            (Some(a), Some(b)) if a == b => a.clone(),
            (a, b) => {
                return Err(ConfigError::new(
                    "csma",
                    format!("forward {a:?}, reverse {b:?}"),
                    "a shared radio channel must be configured the same in both directions",
                ));
            }
        };
        for p in &params {
            p.validate()?;
        }
        if params[0].rate_bps != params[1].rate_bps {
            return Err(ConfigError::new(
                "rate",
                format!("forward {} bit/s, reverse {} bit/s", params[0].rate_bps, params[1].rate_bps),
                "a shared radio channel has one bit rate",
            ));
        }
        let [p0, p1] = params;
        let station = |params: LinkParams, label: &str| {
            let s = |what: &str| Rng::derive(seed, &format!("{label}/{what}"));
            Station {
                params,
                queue: VecDeque::new(),
                on_air: VecDeque::new(),
                buffered_bytes: 0,
                access: Access::Idle,
                persist: s("persist"),
                loss: LossProcess::new(s("loss")),
                corrupt: s("corrupt"),
                arrivals: BinaryHeap::new(),
                stats: LinkStats::default(),
                next_id: 0,
                air_drops: Vec::new(),
            }
        };
        Ok(Channel {
            csma,
            start,
            now: start,
            stations: [station(p0, labels[0]), station(p1, labels[1])],
            history: Vec::new(),
            next_order: 0,
        })
    }

    /// The access rules.
    pub fn csma(&self) -> &CsmaParams {
        &self.csma
    }

    /// Counters of direction `dir`.
    pub fn stats(&self, dir: usize) -> LinkStats {
        self.stations[dir].stats
    }

    /// Frames buffered, on the air, or waiting for hand-over, both directions.
    pub fn in_flight(&self) -> usize {
        self.stations.iter().map(|s| s.queue.len() + s.on_air.len() + s.arrivals.len()).sum()
    }

    /// Frames lost on the air (collision, noise) since the last call, in the
    /// order they were judged per direction.
    pub fn take_air_drops(&mut self) -> Vec<AirDrop> {
        let [a, b] = &mut self.stations;
        let mut v = std::mem::take(&mut a.air_drops);
        v.append(&mut b.air_drops);
        v
    }

    /// When the model next needs `poll`: a channel event or a hand-over.
    pub fn next_event(&self) -> Option<Instant> {
        let access = self.stations.iter().filter_map(Station::next_channel_event);
        let arrivals = self.stations.iter().filter_map(|s| s.arrivals.peek().map(|Reverse(f)| f.at));
        access.chain(arrivals).min()
    }

    /// Station `from` offers a packet at `now` (non-decreasing across calls;
    /// earlier times are taken as the model's current time).
    pub fn send(&mut self, now: Instant, from: usize, packet: P) -> SendOutcome {
        self.advance(now, false);
        let now = self.now;
        let s = &mut self.stations[from];
        let len = packet.len();
        s.stats.offered += 1;
        s.stats.offered_bytes += len as u64;
        let since = now.saturating_since(self.start);
        let p = &s.params;
        let drop = if p.mtu > 0 && len > p.mtu {
            s.stats.drop_mtu += 1;
            Some(DropReason::Mtu)
        } else if p.blackouts.iter().any(|b| b.start <= since && since < b.end) {
            s.stats.drop_blackout += 1;
            Some(DropReason::Blackout)
        } else if (p.limit_packets > 0 && s.queue.len() + s.on_air.len() + 1 > p.limit_packets)
            || (p.limit_bytes > 0 && s.buffered_bytes + len > p.limit_bytes)
        {
            s.stats.drop_queue += 1;
            Some(DropReason::QueueFull)
        } else {
            None
        };
        if let Some(r) = drop {
            return SendOutcome { fate: Fate::Dropped(r), duplicate: None, corrupted: false };
        }
        let id = s.next_id;
        s.next_id += 1;
        s.buffered_bytes += len;
        s.queue.push_back(Frame { id, len, packet, start: now, end: now });
        s.stats.max_queue = s.stats.max_queue.max(s.queue.len() + s.on_air.len());
        if s.access == Access::Idle {
            s.access = Access::CheckAt(now);
        }
        SendOutcome { fate: Fate::Queued, duplicate: None, corrupted: false }
    }

    /// The next frame handed over to the receiver of direction `dir` by `now`.
    pub fn poll(&mut self, now: Instant, dir: usize) -> Option<Delivery<P>> {
        self.advance(now, true);
        let s = &mut self.stations[dir];
        if s.arrivals.peek()?.0.at > now {
            return None;
        }
        let Reverse(f) = s.arrivals.pop()?;
        s.stats.delivered += 1;
        s.stats.delivered_bytes += f.delivery.packet.len() as u64;
        Some(f.delivery)
    }

    /// Runs every channel event due before `to` (or at `to` too, if
    /// `inclusive`), each at its own time. Offers run events strictly before
    /// their time, so all offers of one instant are queued before the
    /// channel checks of that instant.
    fn advance(&mut self, to: Instant, inclusive: bool) {
        loop {
            let next = self.stations.iter().filter_map(Station::next_channel_event).min();
            match next {
                Some(t) if t < to || (inclusive && t == to) => self.step(t.max(self.now)),
                _ => break,
            }
        }
        self.now = self.now.max(to);
    }

    /// One instant: frames whose last bit has gone out, transmissions that
    /// end, then channel checks.
    fn step(&mut self, t: Instant) {
        self.now = t;
        for s in 0..2 {
            while self.stations[s].on_air.front().is_some_and(|f| f.end <= t) {
                self.receive(s);
            }
            let st = &mut self.stations[s];
            if matches!(st.access, Access::Sending(e) if e <= t) {
                st.access = if st.queue.is_empty() { Access::Idle } else { Access::CheckAt(t) };
            }
        }
        for s in 0..2 {
            if matches!(self.stations[s].access, Access::CheckAt(c) if c <= t) {
                self.check(s, t);
            }
        }
        // Forget transmissions that can no longer overlap a frame: every
        // frame still to be judged starts at or after the earliest key-up of
        // a transmission in progress, or after now.
        let horizon = self.history.iter().filter(|x| x.end > t).map(|x| x.key_up).min().unwrap_or(t).min(t);
        self.history.retain(|x| x.end > horizon);
    }

    /// Step 3: channel access for station `s` at `t`.
    fn check(&mut self, s: usize, t: Instant) {
        if self.stations[s].queue.is_empty() {
            self.stations[s].access = Access::Idle;
            return;
        }
        let dcd = self.csma.dcd;
        let carrier = self
            .history
            .iter()
            .filter(|x| x.station != s && x.key_up + dcd < t && t < x.end)
            .map(|x| x.end)
            .max();
        if let Some(end) = carrier {
            self.stations[s].access = Access::CheckAt(end);
            return;
        }
        let csma = &self.csma;
        let st = &mut self.stations[s];
        if csma.persist < 1.0 && !st.persist.chance(csma.persist) {
            st.access = Access::CheckAt(t + csma.slot);
            return;
        }
        // Step 4: key up and lay the frames out back to back.
        let mut cursor = t + csma.txdelay;
        for _ in 0..csma.maxframe {
            let Some(mut f) = st.queue.pop_front() else { break };
            f.start = cursor;
            f.end = cursor
                + Duration::from_nanos(noise::serialisation_ns(
                    f.len,
                    st.params.overhead,
                    st.params.rate_bps,
                ));
            cursor = f.end;
            st.on_air.push_back(f);
        }
        let end = cursor + csma.txtail;
        st.access = Access::Sending(end);
        st.stats.key_ups += 1;
        self.history.push(Tx { station: s, key_up: t, end });
    }

    /// Steps 5–7 for the oldest frame of station `s` on the air, at the
    /// moment its last bit has gone out: any transmission overlapping it has
    /// keyed up by then.
    fn receive(&mut self, s: usize) {
        let Some(f) = self.stations[s].on_air.pop_front() else { return };
        let collided = self.history.iter().any(|x| x.station != s && x.key_up < f.end && f.start < x.end);
        let order = self.next_order;
        self.next_order += 1;
        let st = &mut self.stations[s];
        st.buffered_bytes -= f.len;
        if collided {
            st.stats.drop_collision += 1;
            st.air_drops.push(AirDrop { dir: s, id: f.id, at: f.end, reason: DropReason::Collision });
            return;
        }
        if st.loss.lose(&st.params.loss) {
            st.stats.drop_loss += 1;
            st.air_drops.push(AirDrop { dir: s, id: f.id, at: f.end, reason: DropReason::Loss });
            return;
        }
        let mut packet = f.packet;
        let corrupted = noise::corrupt(&mut st.corrupt, &st.params.corrupt, &mut packet);
        if corrupted {
            st.stats.corrupted += 1;
        }
        let at = f.end + st.params.delay;
        st.arrivals.push(Reverse(InFlight {
            at,
            order,
            delivery: Delivery { at, id: f.id, packet, corrupted, duplicate: false },
        }));
    }
}
