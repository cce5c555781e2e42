//! A protocol composition as a simulator node (issue #16): the `link` device
//! of `app -> xtp -> link`. The same compositions as on real sockets
//! (`xpress --graph`: the run-time graph, `xk_core::device::GraphOn`, or
//! the compiled stack, `xk_core::compiled::Stack`), on `xk-sim`'s links
//! with their delay, loss and reordering.
//!
//! The node drives any [`DeviceStack`], as the socket driver does: the
//! device header (the graph's, none for the compiled stack) is the
//! composition's business (`DeviceStack::receive_from` /
//! `poll_transmit_to`, one copy of that code for every device). The
//! simulator hands datagrams over as `Vec<u8>`: the node copies each into a
//! buffer with the composition's headroom in front (where the direct `Host`
//! hands the `Vec` over as it is), and frames going out into the
//! simulator's `Vec`: one copy, as `Host` makes — from the node's buffer
//! the compiled stack's protocol wrote into (`poll_transmit_into`), or
//! from the graph's frame (`poll_transmit_to`).

use std::marker::PhantomData;
use std::net::SocketAddr;

use bytes::BytesMut;
use xk_core::device::DeviceStack;
use xk_msg::Msg;
use xk_sim::Node;

use crate::MAX_DATAGRAM;
use xk_time::Instant;

/// What runs on top of a [`GraphHost`]'s composition `S` (of messages
/// `M`): reads its events, pushes.
pub trait GraphApp<M, S> {
    /// Called after every input to the composition (datagram or timer).
    fn poll(&mut self, s: &mut S);
}

/// A composition `S` on the simulator's link, messages of form `M`, with an
/// application `A`.
pub struct GraphHost<M, S, A> {
    /// The composition (a `GraphOn` or a compiled `Stack`).
    pub stack: S,
    /// The application.
    pub app: A,
    /// Where the composition writes each frame going out.
    buf: Vec<u8>,
    _msg: PhantomData<fn() -> M>,
}

impl<M: Msg, S: DeviceStack<M>, A: GraphApp<M, S>> GraphHost<M, S, A> {
    /// A node for `stack`, `app` on top.
    pub fn new(stack: S, app: A) -> Self {
        GraphHost { stack, app, buf: Vec::new(), _msg: PhantomData }
    }
}

impl<M: Msg, S: DeviceStack<M>, A: GraphApp<M, S>> Node for GraphHost<M, S, A> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: Vec<u8>) {
        let mut frame = BytesMut::with_capacity(S::HEADROOM + data.len());
        frame.resize(S::HEADROOM, 0);
        frame.extend_from_slice(&data);
        self.stack.advance(now);
        self.stack.receive_from(from, frame);
        self.app.poll(&mut self.stack);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.stack.handle_timeout(now);
        self.app.poll(&mut self.stack);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.stack.advance(now);
        // One copy into the simulator's `Vec` either way, as `Host` makes:
        // the compiled stack's protocol writes into the host's buffer
        // (then copied out), the graph's frame is copied out as it is.
        if !S::LENDS {
            let (dst, frame) = self.stack.poll_transmit_to()?;
            return Some((dst, frame.to_vec()));
        }
        if self.buf.len() < MAX_DATAGRAM {
            self.buf.resize(MAX_DATAGRAM, 0);
        }
        let (dst, n) = self.stack.poll_transmit_into(&mut self.buf)?;
        Some((dst, self.buf[..n].to_vec()))
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.stack.poll_timeout()
    }
}
