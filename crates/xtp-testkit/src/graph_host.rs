//! A protocol graph as a simulator node (issue #16): the `link` device of
//! `app -> xtp -> link`. The same graph as on real sockets (`xpress
//! --graph`), on `xk-sim`'s links with their delay, loss and reordering.
//!
//! The simulator hands datagrams over as `Vec<u8>`; the node puts the
//! device header in front (one copy into a buffer with room for it, where
//! the direct `Host` hands the `Vec` over as it is) and takes it off frames
//! going out (one copy into the simulator's `Vec`, as `Host` does).

use std::net::SocketAddr;

use bytes::BytesMut;
use xk_core::device::{ADDR_HEADER, read_addr, write_addr};
use xk_core::{Graph, ProtocolId};
use xk_msg::Msg;
use xk_sim::Node;
use xk_time::Instant;

/// What runs on top of a [`GraphHost`]'s graph: reads its events, pushes.
pub trait GraphApp<M> {
    /// Called after every input to the graph (datagram or timer).
    fn poll(&mut self, g: &mut Graph<M>);
}

/// A graph whose protocol `dev` sits on the simulator's link, with an
/// application.
pub struct GraphHost<M, A> {
    /// The graph.
    pub graph: Graph<M>,
    /// The protocol on the device.
    pub dev: ProtocolId,
    /// The application.
    pub app: A,
    /// Frames the graph produced without a readable device header.
    pub bad_frames: u64,
}

impl<M: Msg, A: GraphApp<M>> GraphHost<M, A> {
    /// A node for `graph`, its protocol `dev` on the link, `app` on top.
    pub fn new(graph: Graph<M>, dev: ProtocolId, app: A) -> Self {
        GraphHost { graph, dev, app, bad_frames: 0 }
    }
}

impl<M: Msg, A: GraphApp<M>> Node for GraphHost<M, A> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: Vec<u8>) {
        let mut frame = BytesMut::with_capacity(ADDR_HEADER + data.len());
        frame.resize(ADDR_HEADER, 0);
        write_addr(&mut frame, from);
        frame.extend_from_slice(&data);
        self.graph.advance(now);
        self.graph.receive(self.dev, M::from_received(frame));
        self.app.poll(&mut self.graph);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.graph.handle_timeout(now);
        self.app.poll(&mut self.graph);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.graph.advance(now);
        loop {
            let (_, mut frame) = self.graph.poll_transmit()?;
            match frame.pop(ADDR_HEADER).ok().and_then(read_addr) {
                Some(dst) => return Some((dst, frame.to_vec())),
                None => self.bad_frames += 1,
            }
        }
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.graph.poll_timeout()
    }
}
