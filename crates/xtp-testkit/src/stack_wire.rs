//! Two compiled stacks (`xk_core::compiled::Stack`) joined by a perfect
//! wire: [`GraphWire`](crate::GraphWire) for the compiled path. Frames move
//! with their peer beside them (no device header to rewrite), without
//! copying unless [`StackWire::receive_copy`] asks for a socket's shape:
//! the sender writes each frame into the wire's transmit buffer
//! (`Stack::poll_transmit_into`, as a driver lends its batch buffer) and
//! the receiver gets a copy of it in a receive arena (the kernel's copy),
//! exactly as `Wire`'s `Delivery::Arena` treats the direct endpoint. Same
//! clock rule as `Wire`: `step` of virtual time per delivered frame, jumps
//! to the next timer.

use std::net::SocketAddr;

use bytes::BytesMut;
use xk_core::Layer;
use xk_core::compiled::{DeviceCx, Stack};
use xk_msg::Msg;
use xk_time::{Duration, Instant};

use crate::MAX_DATAGRAM;
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
    /// Have the sender write each frame into the wire's transmit buffer
    /// and copy it from there into a shared 64 KiB receive arena before the
    /// receiver sees it, as `Wire`'s `Delivery::Arena` does for the direct
    /// path: the stand-in for a driver's send buffer and the kernel's copy
    /// to the receiving process, which a compiled stack over a real socket
    /// pays too. Off by default (frames move as they are).
    pub receive_copy: bool,
    /// Bytes copied into the receive arena (0 unless `receive_copy`).
    pub copied: u64,
    /// Bytes of the frames sent over the wire, copied or not.
    pub moved: u64,
    rx: BytesMut,
    tx: Vec<u8>,
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
            copied: 0,
            moved: 0,
            rx: BytesMut::new(),
            // The largest datagram, once (as `Wire`'s buffer): not tested
            // at every delivery.
            tx: vec![0; MAX_DATAGRAM],
        }
    }

    /// Delivers everything `a` sends to `b`; returns how many frames.
    pub fn from_a(&mut self) -> usize {
        let StackWire { a, aa, b, ba, now, step, stray, receive_copy, copied, moved, rx, tx } = self;
        let copy = receive_copy.then_some(SocketBufs { rx, tx, copied });
        deliver(a, *aa, b, *ba, now, *step, stray, moved, copy)
    }

    /// Delivers everything `b` sends to `a`; returns how many frames.
    pub fn from_b(&mut self) -> usize {
        let StackWire { a, aa, b, ba, now, step, stray, receive_copy, copied, moved, rx, tx } = self;
        let copy = receive_copy.then_some(SocketBufs { rx, tx, copied });
        deliver(b, *ba, a, *aa, now, *step, stray, moved, copy)
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

/// The buffers of the socket-shaped delivery (`receive_copy`).
struct SocketBufs<'w> {
    rx: &'w mut BytesMut,
    tx: &'w mut Vec<u8>,
    copied: &'w mut u64,
}

/// Moves everything `from` (at `fa`) sends to `to` (at `ta`); returns how
/// many frames. With `copy`, the socket's shape, as `Wire`'s `Link::deliver`
/// with `Delivery::Arena` moves the direct endpoint's datagrams: `from`
/// writes each frame into the transmit buffer, which is copied into the
/// receive arena and split off. A loop of its own for each shape, so that
/// the frame is never handed between them as a `(peer, message)` value:
/// in one loop with an `Option` of either, that value was moved four times
/// per frame and the shape tested at every poll (docs/PERF.md, Session 21).
#[allow(clippy::too_many_arguments)]
fn deliver<M: Msg, P: Layer<M, DeviceCx<M>>>(
    from: &mut Stack<M, P>,
    fa: SocketAddr,
    to: &mut Stack<M, P>,
    ta: SocketAddr,
    now: &mut Instant,
    step: Duration,
    stray: &mut u64,
    moved: &mut u64,
    copy: Option<SocketBufs<'_>>,
) -> usize {
    let mut n = 0;
    from.advance(*now);
    if let Some(SocketBufs { rx, tx, copied }) = copy {
        while let Some((dst, len)) = from.poll_transmit_into(tx) {
            n += 1;
            *moved += len as u64;
            *now += step;
            // Copied whoever it is for, as `Wire` copies every datagram.
            if rx.capacity() < len {
                *rx = BytesMut::with_capacity(64 * 1024);
            }
            rx.extend_from_slice(&tx[..len]);
            *copied += len as u64;
            if dst != ta {
                *stray += 1;
                continue;
            }
            to.advance(*now);
            to.receive(fa, M::from_received(rx.split()));
            from.advance(*now);
        }
    } else {
        while let Some((dst, frame)) = from.poll_transmit() {
            n += 1;
            *moved += frame.len() as u64;
            *now += step;
            if dst != ta {
                *stray += 1;
                continue;
            }
            to.advance(*now);
            to.receive(fa, frame);
            from.advance(*now);
        }
    }
    n
}
