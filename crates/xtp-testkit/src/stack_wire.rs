//! Two compiled stacks (`xk_core::compiled::Stack`) joined by a perfect
//! wire: [`GraphWire`](crate::GraphWire) for the compiled path. Frames move
//! with their peer beside them (no device header to rewrite), without
//! copying unless [`StackWire::receive_copy`] asks for the copy a socket's
//! receive makes, with the same clock rule as `Wire`: `step` of virtual
//! time per delivered frame, jumps to the next timer.

use std::net::SocketAddr;

use bytes::BytesMut;
use xk_core::Layer;
use xk_core::compiled::{DeviceCx, Stack};
use xk_msg::Msg;
use xk_time::{Duration, Instant};

use crate::stepping::{self, Stepped};

/// Stack `a` at `aa` and `b` at `ba`, joined by a perfect wire.
pub struct StackWire<M, P> {
    /// One stack.
    pub a: Stack<M, P>,
    /// Its address.
    pub aa: SocketAddr,
    /// The other.
    pub b: Stack<M, P>,
    /// Its address.
    pub ba: SocketAddr,
    /// Virtual time.
    pub now: Instant,
    /// Virtual time added before each delivery.
    pub step: Duration,
    /// Frames addressed to neither stack (dropped).
    pub stray: u64,
    /// Copy each frame into a shared 64 KiB receive arena before the
    /// receiver sees it, as `Wire`'s `Delivery::Arena` does for the direct
    /// path: the stand-in for the kernel's copy to the receiving process,
    /// which a compiled stack over a real socket pays too. Off by default
    /// (frames move as they are).
    pub receive_copy: bool,
    rx: BytesMut,
}

impl<M: Msg, P: Layer<M, DeviceCx<M>>> StackWire<M, P> {
    /// Joins the two stacks at `now`, instant delivery.
    pub fn new((a, aa): (Stack<M, P>, SocketAddr), (b, ba): (Stack<M, P>, SocketAddr), now: Instant) -> Self {
        StackWire {
            a,
            aa,
            b,
            ba,
            now,
            step: Duration::ZERO,
            stray: 0,
            receive_copy: false,
            rx: BytesMut::new(),
        }
    }

    /// Delivers everything `a` sends to `b`; returns how many frames.
    pub fn from_a(&mut self) -> usize {
        let StackWire { a, aa, b, ba, now, step, stray, receive_copy, rx } = self;
        let rx = receive_copy.then_some(rx);
        deliver(a, *aa, b, *ba, now, *step, stray, rx)
    }

    /// Delivers everything `b` sends to `a`; returns how many frames.
    pub fn from_b(&mut self) -> usize {
        let StackWire { a, aa, b, ba, now, step, stray, receive_copy, rx } = self;
        let rx = receive_copy.then_some(rx);
        deliver(b, *ba, a, *aa, now, *step, stray, rx)
    }

    /// Moves datagrams both ways until both are quiet (bounded).
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

impl<M: Msg, P: Layer<M, DeviceCx<M>>> Stepped for StackWire<M, P> {
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

#[allow(clippy::too_many_arguments)]
fn deliver<M: Msg, P: Layer<M, DeviceCx<M>>>(
    from: &mut Stack<M, P>,
    fa: SocketAddr,
    to: &mut Stack<M, P>,
    ta: SocketAddr,
    now: &mut Instant,
    step: Duration,
    stray: &mut u64,
    mut rx: Option<&mut BytesMut>,
) -> usize {
    let mut n = 0;
    from.advance(*now);
    while let Some((dst, frame)) = from.poll_transmit() {
        n += 1;
        *now += step;
        if dst != ta {
            *stray += 1;
            continue;
        }
        let frame = match rx.as_deref_mut() {
            Some(rx) => {
                if rx.capacity() < frame.len() {
                    *rx = BytesMut::with_capacity(64 * 1024);
                }
                frame.for_each_chunk(|c| rx.extend_from_slice(c));
                M::from_received(rx.split())
            }
            None => frame,
        };
        to.advance(*now);
        to.receive(fa, frame);
        from.advance(*now);
    }
    n
}
