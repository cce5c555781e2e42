//! Frames between a graph and a datagram device.
//!
//! A *datagram device* is what sits below the bottom protocol of a graph that
//! talks to peers by socket address: a UDP socket, a raw IP protocol-36
//! socket, or a simulated link. It is the driver, not a protocol object (as
//! the x-kernel's `simeth` driver over Unix UDP sockets was). Every frame
//! crossing that boundary starts with an [`ADDR_HEADER`]-byte device header
//! naming the peer — the destination on the way out, the source on the way
//! in — so the graph's `receive` / `poll_transmit` keep carrying messages
//! only, and the driver writes or strips the header in the message's
//! headroom without moving the payload.
//!
//! [`DeviceStack`] is what a driver needs of the composition above it,
//! implemented by the graph ([`GraphOn`]) and by the compiled stack.
//!
//! Layout: 16 bytes of IPv6 address (an IPv4 peer as `::ffff:a.b.c.d`) and
//! the port, big-endian (0 for raw IP).

use std::borrow::BorrowMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

use xk_msg::{BytesMut, Msg};
use xk_time::Instant;

use crate::compiled::{DeviceCx, Stack};
use crate::{
    CloseError, Control, ControlError, ControlReply, Counters, Event, Graph, Layer, OpenError, Participants,
    ProtocolId, PushError, SessionId,
};

/// The first 12 bytes of an IPv4-mapped IPv6 address.
const V4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// Length of the device header.
pub const ADDR_HEADER: usize = 18;

/// Writes `addr` as a device header into `out` (at least [`ADDR_HEADER`] bytes).
pub fn write_addr(out: &mut [u8], addr: SocketAddr) {
    // Per packet on every path through a device: the IPv4 case written
    // in place, without building an IPv6 address first.
    match addr {
        SocketAddr::V4(a) => {
            out[..12].copy_from_slice(&V4_MAPPED);
            out[12..16].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => out[..16].copy_from_slice(&a.ip().octets()),
    }
    out[16..ADDR_HEADER].copy_from_slice(&addr.port().to_be_bytes());
}

/// Reads a device header; `None` if `h` is shorter than [`ADDR_HEADER`].
pub fn read_addr(h: &[u8]) -> Option<SocketAddr> {
    let h: &[u8; ADDR_HEADER] = h.get(..ADDR_HEADER)?.try_into().ok()?;
    let port = u16::from_be_bytes([h[16], h[17]]);
    // Per packet on every path through a device: the IPv4 case without
    // building an IPv6 address first.
    if h[..12] == V4_MAPPED {
        return Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(h[12], h[13], h[14], h[15]), port)));
    }
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&h[..16]);
    let v6 = Ipv6Addr::from(octets);
    let ip = match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    };
    Some(SocketAddr::new(ip, port))
}

/// A composition a datagram device drives, whichever it is: the dynamic
/// graph with a protocol on the device ([`GraphOn`]) or a compiled
/// [`Stack`]. A driver written against it (xk-driver's `GraphDevice`) runs
/// either, each monomorphised: the compiled stack's frames never carry a
/// device header, the graph's get one here.
pub trait DeviceStack<M> {
    /// Bytes of room a received frame must have before the datagram.
    const HEADROOM: usize;
    /// Whether [`DeviceStack::poll_transmit_into`] has the protocol write
    /// into the lent buffer (the compiled stack) rather than copy a frame
    /// it built (the graph): a sink that needs the frame in a buffer of its
    /// own choosing (the simulator's `Vec`) takes the frame itself from
    /// [`DeviceStack::poll_transmit_to`] when this is false, so that it
    /// copies once either way.
    const LENDS: bool;
    /// Moves the composition's time to `now`.
    fn advance(&mut self, now: Instant);
    /// When it next wants [`DeviceStack::handle_timeout`].
    fn poll_timeout(&mut self) -> Option<Instant>;
    /// Runs the timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// A datagram from `from`: `frame` holds [`DeviceStack::HEADROOM`]
    /// bytes of room, then the datagram.
    fn receive_from(&mut self, from: SocketAddr, frame: BytesMut);
    /// The next datagram to send and its destination.
    fn poll_transmit_to(&mut self) -> Option<(SocketAddr, M)>;
    /// The next datagram written into the device's `buf` (which holds the
    /// largest datagram the device sends), with its destination and
    /// length. The compiled stack lets its protocol write there directly
    /// ([`Stack::poll_transmit_into`]), saving the copy of a frame built
    /// as a message; the graph copies its frame in. A frame longer than
    /// `buf` is dropped and counted ([`DeviceDrops::bad_frames`]).
    fn poll_transmit_into(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)>;
    /// Active open by the application, on the top protocol.
    fn open(&mut self, parts: &Participants) -> Result<SessionId, OpenError>;
    /// Passive open by the application, on the top protocol.
    fn open_enable(&mut self, parts: &Participants) -> Result<(), OpenError>;
    /// Sends `msg` on a session the application holds.
    fn push(&mut self, session: SessionId, msg: M) -> Result<(), PushError>;
    /// Sends `msg` as a piece of a message, `eom` marking its end
    /// ([`Layer::push_part`]): an echo passes each delivered chunk on with
    /// its mark and the boundaries survive.
    fn push_part(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError>;
    /// A control request to the top protocol (on `session` if given).
    fn control(&mut self, session: Option<SessionId>, req: Control) -> Result<ControlReply, ControlError>;
    /// What the composition dropped between itself and the device.
    fn drops(&self) -> DeviceDrops;
    /// Closes a session the application holds.
    fn close(&mut self, session: SessionId) -> Result<(), CloseError>;
    /// The named counters of every layer that answers
    /// `Control::GetCounters`, by layer name, bottom first; none in the
    /// compiled stack (its one protocol is XTP, which does not answer it).
    /// Not per packet: read at the end.
    fn counters(&mut self) -> Vec<(&'static str, Counters)> {
        Vec::new()
    }
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Event<M>>;
}

/// Frames a [`DeviceStack`] dropped between the device and its protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceDrops {
    /// Frames the composition handed out that the device could not send:
    /// without a readable device header ([`GraphOn::bad_frames`]; the
    /// compiled stack has no such header), or longer than the buffer
    /// passed to [`DeviceStack::poll_transmit_into`].
    pub bad_frames: u64,
    /// Frames a protocol refused: in `demux` or `pop` on the way up
    /// (`ProtocolStats::demux_drops`), and in the graph also a lower
    /// layer's `push` on the way down (`ProtocolStats::push_drops`), summed
    /// over every protocol. A frame the protocol took and then
    /// found malformed is its own count (`Control::GetMalformedCount`).
    pub demux_drops: u64,
}

/// A dynamic graph on a datagram device: `device` is the protocol on the
/// device, `top` the one the application opens. `G` is the graph or a
/// `&mut` to one (for a caller that keeps its graph elsewhere).
pub struct GraphOn<G> {
    /// The graph.
    pub graph: G,
    /// The protocol on the device.
    pub device: ProtocolId,
    /// The protocol the application opens sessions of.
    pub top: ProtocolId,
    /// Frames the graph handed out without a readable device header, or
    /// too long for the buffer passed to `poll_transmit_into` (dropped).
    pub bad_frames: u64,
}

impl<G> GraphOn<G> {
    /// `graph` with the application's sessions and the device on `p`.
    pub fn new(graph: G, p: ProtocolId) -> Self {
        GraphOn { graph, device: p, top: p, bad_frames: 0 }
    }
}

impl<M: Msg, G: BorrowMut<Graph<M>>> DeviceStack<M> for GraphOn<G> {
    const HEADROOM: usize = ADDR_HEADER;
    const LENDS: bool = false;
    fn advance(&mut self, now: Instant) {
        self.graph.borrow_mut().advance(now)
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.graph.borrow_mut().poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.graph.borrow_mut().handle_timeout(now)
    }
    fn receive_from(&mut self, from: SocketAddr, mut frame: BytesMut) {
        write_addr(&mut frame[..ADDR_HEADER], from);
        self.graph.borrow_mut().receive(self.device, M::from_received(frame));
    }
    fn poll_transmit_to(&mut self) -> Option<(SocketAddr, M)> {
        loop {
            let (_, mut frame) = self.graph.borrow_mut().poll_transmit()?;
            match frame.pop(ADDR_HEADER).ok().and_then(read_addr) {
                Some(dst) => return Some((dst, frame)),
                None => self.bad_frames += 1,
            }
        }
    }
    fn poll_transmit_into(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        loop {
            let (dst, frame) = self.poll_transmit_to()?;
            if let Ok(n) = frame.frame_into(buf) {
                return Some((dst, n));
            }
            self.bad_frames += 1;
        }
    }
    fn open(&mut self, parts: &Participants) -> Result<SessionId, OpenError> {
        self.graph.borrow_mut().open(self.top, parts)
    }
    fn open_enable(&mut self, parts: &Participants) -> Result<(), OpenError> {
        self.graph.borrow_mut().open_enable(self.top, parts)
    }
    fn push(&mut self, session: SessionId, msg: M) -> Result<(), PushError> {
        self.graph.borrow_mut().push(session, msg)
    }
    fn push_part(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        self.graph.borrow_mut().push_part(session, msg, eom)
    }
    fn control(&mut self, session: Option<SessionId>, req: Control) -> Result<ControlReply, ControlError> {
        self.graph.borrow_mut().control(self.top, session, req)
    }
    fn drops(&self) -> DeviceDrops {
        let g = self.graph.borrow();
        // Any layer of the graph may refuse a frame, on the way up (`demux`
        // or `pop`) or down (a `push` on a lower layer's session, e.g. a
        // `census`'s): every protocol's refusals both ways are counted.
        let ids: Vec<_> = g.protocols().map(|(p, _)| p).collect();
        let demux_drops = ids.iter().map(|&p| g.stats(p).demux_drops + g.stats(p).push_drops).sum();
        DeviceDrops { bad_frames: self.bad_frames, demux_drops }
    }
    fn counters(&mut self) -> Vec<(&'static str, Counters)> {
        let g = self.graph.borrow_mut();
        let ids: Vec<_> = g.protocols().collect();
        ids.into_iter()
            .filter_map(|(p, name)| match g.control(p, None, Control::GetCounters) {
                Ok(ControlReply::Counters(c)) => Some((name, c)),
                _ => None,
            })
            .collect()
    }
    fn close(&mut self, session: SessionId) -> Result<(), CloseError> {
        self.graph.borrow_mut().close(session)
    }
    fn poll_event(&mut self) -> Option<Event<M>> {
        self.graph.borrow_mut().poll_event()
    }
}

impl<M: Msg, P: Layer<M, DeviceCx<M>>> DeviceStack<M> for Stack<M, P> {
    const HEADROOM: usize = 0;
    const LENDS: bool = true;
    fn advance(&mut self, now: Instant) {
        Stack::advance(self, now)
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        Stack::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Stack::handle_timeout(self, now)
    }
    fn receive_from(&mut self, from: SocketAddr, frame: BytesMut) {
        self.receive(from, M::from_received(frame))
    }
    fn poll_transmit_to(&mut self) -> Option<(SocketAddr, M)> {
        self.poll_transmit()
    }
    fn poll_transmit_into(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        Stack::poll_transmit_into(self, buf)
    }
    fn open(&mut self, parts: &Participants) -> Result<SessionId, OpenError> {
        Stack::open(self, parts)
    }
    fn open_enable(&mut self, parts: &Participants) -> Result<(), OpenError> {
        Stack::open_enable(self, parts)
    }
    fn push(&mut self, session: SessionId, msg: M) -> Result<(), PushError> {
        Stack::push(self, session, msg)
    }
    fn push_part(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        Stack::push_part(self, session, msg, eom)
    }
    fn control(&mut self, session: Option<SessionId>, req: Control) -> Result<ControlReply, ControlError> {
        Stack::control(self, session, req)
    }
    fn drops(&self) -> DeviceDrops {
        DeviceDrops { bad_frames: self.too_long(), demux_drops: self.stats().demux_drops }
    }
    fn close(&mut self, session: SessionId) -> Result<(), CloseError> {
        Stack::close(self, session)
    }
    fn poll_event(&mut self) -> Option<Event<M>> {
        Stack::poll_event(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_short_headers_are_refused() {
        for a in ["10.0.0.1:7", "[2001:db8::5]:65535", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut h = [0u8; ADDR_HEADER];
            write_addr(&mut h, a);
            assert_eq!(read_addr(&h), Some(a));
        }
        assert_eq!(read_addr(&[0u8; ADDR_HEADER - 1]), None);
    }
}
