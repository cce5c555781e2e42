//! Two endpoints joined by a perfect wire, without the simulator: every
//! packet arrives, in order, at once (or `step` later). Virtual time moves
//! only by `step` per delivered datagram and by jumping to the next timer.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use xk_core::ArenaId;
use xk_time::{Duration, HeapQueue, Instant, TimerQueue};
use xtp_proto::{Endpoint, NoTrace};

use crate::stepping::{self, Stepped};

/// How a datagram reaches the receiving endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Each datagram in its own allocation: what the endpoint keeps of it
    /// holds that datagram's memory only (memory tests count on this).
    #[default]
    Copy,
    /// Copied into a shared 64 KiB receive buffer and split off, the way the
    /// UDP driver receives: one allocation per 64 KiB, not per datagram (the
    /// benchmark, which should cost what the real path costs).
    Arena,
}

/// `a` at `aa` and `b` at `ba`, joined by a perfect wire. `Q` is the
/// endpoints' timer queue (the engine's default unless a test compares
/// queues).
pub struct Wire<Q: TimerQueue<ArenaId> = HeapQueue<ArenaId>> {
    /// One endpoint.
    pub a: Endpoint<NoTrace, Q>,
    /// Its address.
    pub aa: SocketAddr,
    /// The other.
    pub b: Endpoint<NoTrace, Q>,
    /// Its address.
    pub ba: SocketAddr,
    /// Virtual time.
    pub now: Instant,
    /// Every packet b sent to a, when `log` (for forging and inspection).
    pub b_to_a: Vec<Bytes>,
    /// Whether to keep `b_to_a`.
    pub log: bool,
    /// Virtual time added before each delivery.
    pub step: Duration,
    /// How datagrams are handed over.
    pub delivery: Delivery,
    /// Packets addressed to neither endpoint (dropped).
    pub stray: u64,
    buf: Vec<u8>,
    rx: BytesMut,
}

impl<Q: TimerQueue<ArenaId>> Wire<Q> {
    /// Joins `a` and `b` at `now`: logged, instant, one allocation per
    /// datagram.
    pub fn new(
        a: Endpoint<NoTrace, Q>,
        aa: SocketAddr,
        b: Endpoint<NoTrace, Q>,
        ba: SocketAddr,
        now: Instant,
    ) -> Self {
        Wire {
            a,
            aa,
            b,
            ba,
            now,
            b_to_a: Vec::new(),
            log: true,
            step: Duration::ZERO,
            delivery: Delivery::Copy,
            stray: 0,
            buf: vec![0u8; 2048],
            rx: BytesMut::new(),
        }
    }

    /// Delivers everything `a` has queued to `b`; returns how many packets.
    pub fn from_a(&mut self) -> usize {
        let Wire { a, aa, b, ba, .. } = self;
        let mut sent = Link { now: &mut self.now, step: self.step, rx: &mut self.rx, buf: &mut self.buf };
        let n = sent.deliver(a, *aa, b, *ba, self.delivery, None);
        self.stray += n.1;
        n.0
    }

    /// Delivers everything `b` has queued to `a` (logging it when `log`);
    /// returns how many packets.
    pub fn from_b(&mut self) -> usize {
        let Wire { a, aa, b, ba, .. } = self;
        let log = if self.log { Some(&mut self.b_to_a) } else { None };
        let mut sent = Link { now: &mut self.now, step: self.step, rx: &mut self.rx, buf: &mut self.buf };
        let n = sent.deliver(b, *ba, a, *aa, self.delivery, log);
        self.stray += n.1;
        n.0
    }

    /// Moves packets both ways until both are quiet at `now` (bounded: two
    /// Moves datagrams both ways until both are quiet (bounded: two peers
    /// that never fall quiet end the test rather than hang it).
    pub fn exchange(&mut self) {
        stepping::exchange(self)
    }

    /// Jumps to the earlier peer's next timer, if there is one no later
    /// than `end`, and runs both peers' timers there. Returns whether time
    /// moved to a timer.
    pub fn fire_next_timer(&mut self, end: Option<Instant>) -> bool {
        stepping::fire_next_timer(self, end)
    }

    /// Runs for `d` of virtual time, jumping between timers.
    pub fn run(&mut self, d: Duration) {
        stepping::run(self, d)
    }
}

impl<Q: TimerQueue<ArenaId>> Stepped for Wire<Q> {
    fn deliver_a(&mut self) -> usize {
        self.from_a()
    }
    fn deliver_b(&mut self) -> usize {
        self.from_b()
    }
    fn next_timer(&mut self) -> Option<Instant> {
        [self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min()
    }
    fn fire(&mut self, now: Instant) {
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
    }
    fn now(&mut self) -> &mut Instant {
        &mut self.now
    }
}

/// The wire's state one delivery needs: the clock, the step, the buffers.
struct Link<'w> {
    now: &'w mut Instant,
    step: Duration,
    rx: &'w mut BytesMut,
    buf: &'w mut Vec<u8>,
}

impl Link<'_> {
    /// Moves everything `from` (at `fa`) has queued to `to` (at `ta`),
    /// logging it into `log`; returns (packets, packets addressed elsewhere).
    fn deliver<Q: TimerQueue<ArenaId>>(
        &mut self,
        from: &mut Endpoint<NoTrace, Q>,
        fa: SocketAddr,
        to: &mut Endpoint<NoTrace, Q>,
        ta: SocketAddr,
        delivery: Delivery,
        mut log: Option<&mut Vec<Bytes>>,
    ) -> (usize, u64) {
        let (mut n, mut stray) = (0, 0);
        while let Some(t) = from.poll_transmit(*self.now, self.buf) {
            n += 1;
            *self.now += self.step;
            let d = datagram(self.rx, delivery, &self.buf[..t.len]);
            if t.dst == ta {
                if let Some(log) = log.as_mut() {
                    log.push(d.clone());
                }
                to.handle_datagram(*self.now, fa, d);
            } else {
                stray += 1;
            }
        }
        (n, stray)
    }
}

fn datagram(rx: &mut BytesMut, delivery: Delivery, d: &[u8]) -> Bytes {
    match delivery {
        Delivery::Copy => Bytes::copy_from_slice(d),
        Delivery::Arena => {
            if rx.capacity() < d.len() {
                *rx = BytesMut::with_capacity(64 * 1024);
            }
            rx.extend_from_slice(d);
            rx.split().freeze()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xtp_proto::{ContextConfig, EndpointConfig};

    fn wire(delivery: Delivery) -> (Wire, u64) {
        let cfg = EndpointConfig::default();
        let (aa, ba) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
        let mut w = Wire::new(Endpoint::new(cfg.clone(), 1), aa, Endpoint::new(cfg, 2), ba, Instant::ZERO);
        w.delivery = delivery;
        w.step = Duration::from_micros(1);
        w.b.listen(7, ContextConfig::stream()).unwrap();
        let ctx = w.a.connect(w.now, ba, 7, ContextConfig::stream()).unwrap();
        w.a.write(w.now, ctx, Bytes::from(vec![3u8; 5000]), true, None).unwrap();
        w.run(Duration::from_millis(100));
        let mut got = 0;
        while let Some(ev) = w.b.poll_event() {
            if let xtp_proto::Event::Readable { ctx } = ev {
                while let Some(c) = w.b.read(w.now, ctx) {
                    got += c.data.len() as u64;
                }
            }
        }
        (w, got)
    }

    #[test]
    fn both_deliveries_carry_the_same_bytes() {
        for d in [Delivery::Copy, Delivery::Arena] {
            let (w, got) = wire(d);
            assert_eq!(got, 5000, "{d:?}");
            assert!(!w.b_to_a.is_empty(), "{d:?}: b's replies are logged");
            assert_eq!(w.stray, 0);
            assert_eq!(w.now, Instant::ZERO + Duration::from_millis(100));
        }
    }
}
