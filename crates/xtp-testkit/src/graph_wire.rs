//! Two protocol graphs joined by a perfect wire: [`Wire`](crate::Wire) for
//! the framework path (issue #16). Each graph's bottom protocol sits on a
//! datagram device (`xk_core::device`); this wire is that device for both,
//! moving frames without copying them and rewriting the device header from
//! destination to source, with the same clock rule as `Wire`: `step` of
//! virtual time per delivered frame, jumps to the next timer.

use std::net::SocketAddr;

use xk_core::device::{ADDR_HEADER, read_addr, write_addr};
use xk_core::{Graph, ProtocolId};
use xk_msg::Msg;
use xk_time::{Duration, Instant};

use crate::stepping::{self, Stepped};

/// Graph `a` at `aa` (its bottom protocol `a_dev`) and `b` at `ba`, joined
/// by a perfect wire.
pub struct GraphWire<M> {
    /// One graph.
    pub a: Graph<M>,
    /// Its address.
    pub aa: SocketAddr,
    /// The protocol of `a` that sits on the device.
    pub a_dev: ProtocolId,
    /// The other.
    pub b: Graph<M>,
    /// Its address.
    pub ba: SocketAddr,
    /// The protocol of `b` that sits on the device.
    pub b_dev: ProtocolId,
    /// Virtual time.
    pub now: Instant,
    /// Virtual time added before each delivery.
    pub step: Duration,
    /// Frames addressed to neither graph, or without a device header (dropped).
    pub stray: u64,
}

impl<M: Msg> GraphWire<M> {
    /// Joins the two graphs at `now`, instant delivery.
    pub fn new(
        (a, a_dev, aa): (Graph<M>, ProtocolId, SocketAddr),
        (b, b_dev, ba): (Graph<M>, ProtocolId, SocketAddr),
        now: Instant,
    ) -> Self {
        GraphWire { a, aa, a_dev, b, ba, b_dev, now, step: Duration::ZERO, stray: 0 }
    }

    /// Delivers everything `a` sends to `b`; returns how many frames.
    pub fn from_a(&mut self) -> usize {
        let GraphWire { a, aa, b, ba, b_dev, now, step, stray, .. } = self;
        deliver(a, *aa, b, *b_dev, *ba, now, *step, stray)
    }

    /// Delivers everything `b` sends to `a`; returns how many frames.
    pub fn from_b(&mut self) -> usize {
        let GraphWire { a, aa, a_dev, b, ba, now, step, stray, .. } = self;
        deliver(b, *ba, a, *a_dev, *aa, now, *step, stray)
    }

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

impl<M: Msg> Stepped for GraphWire<M> {
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
    fn idle_until(&mut self, end: Instant) {
        self.a.advance(end);
        self.b.advance(end);
    }
}

#[allow(clippy::too_many_arguments)] // the wire's fields, split for the borrow checker
fn deliver<M: Msg>(
    from: &mut Graph<M>,
    fa: SocketAddr,
    to: &mut Graph<M>,
    to_dev: ProtocolId,
    ta: SocketAddr,
    now: &mut Instant,
    step: Duration,
    stray: &mut u64,
) -> usize {
    let mut n = 0;
    from.advance(*now);
    while let Some((_, mut frame)) = from.poll_transmit() {
        n += 1;
        *now += step;
        let dst = frame.pop(ADDR_HEADER).ok().and_then(read_addr);
        if dst != Some(ta) {
            *stray += 1;
            continue;
        }
        write_addr(frame.push(ADDR_HEADER), fa);
        to.advance(*now);
        to.receive(to_dev, frame);
        from.advance(*now);
    }
    n
}
