//! A protocol graph on a real UDP socket (issue #16): the datagram device of
//! `app -> xtp -> udp`. Blocking, one socket, one thread: the framework
//! path's first real driver, without the batching of `batch.rs` (one
//! `recv_from` / `send_to` per datagram).
//!
//! Frames to and from the graph carry the peer's address in the device
//! header (`xk_core::device`). Received datagrams land in a shared zeroed
//! arena behind room for that header, so the graph gets them without a copy
//! after the kernel's; frames leave through one `send_to` of the message
//! (a gather into the send buffer when the message is in pieces).

use std::io;
use std::net::{SocketAddr, UdpSocket};

use bytes::BytesMut;
use xk_core::device::{ADDR_HEADER, read_addr, write_addr};
use xk_core::{Graph, ProtocolId};
use xk_msg::Msg;
use xk_time::{Duration, Instant};

use crate::clock::Clock;

/// Largest datagram received (larger ones are cut by the kernel and then
/// refused by the protocol as malformed).
const MAX_DATAGRAM: usize = 65_535;
/// Receive arena allocated at a time.
const RX_ARENA: usize = 256 * 1024;

/// Counters of the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Datagrams received and handed to the graph.
    pub received: u64,
    /// Frames sent.
    pub sent: u64,
    /// Frames the graph produced without a readable device header (dropped).
    pub bad_frames: u64,
    /// `send_to` failures (dropped; the protocol retransmits).
    pub send_errors: u64,
}

/// A graph's device: a UDP socket and the clock that drives the graph.
pub struct GraphUdp {
    sock: UdpSocket,
    clock: Clock,
    rx: BytesMut,
    tx: Vec<u8>,
    /// Counters.
    pub stats: DeviceStats,
}

impl GraphUdp {
    /// Binds a UDP socket at `bind`.
    pub fn bind(bind: SocketAddr) -> io::Result<Self> {
        let sock = UdpSocket::bind(bind)?;
        Ok(GraphUdp {
            sock,
            clock: Clock::new(),
            rx: BytesMut::new(),
            tx: Vec::new(),
            stats: DeviceStats::default(),
        })
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The time now, as the graph counts it.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Sends every frame the graph has for the device.
    pub fn flush<M: Msg>(&mut self, g: &mut Graph<M>) {
        g.advance(self.clock.now());
        while let Some((_, mut frame)) = g.poll_transmit() {
            let Some(dst) = frame.pop(ADDR_HEADER).ok().and_then(read_addr) else {
                self.stats.bad_frames += 1;
                continue;
            };
            self.tx.clear();
            frame.for_each_chunk(|c| self.tx.extend_from_slice(c));
            match self.sock.send_to(&self.tx, dst) {
                Ok(_) => self.stats.sent += 1,
                Err(_) => self.stats.send_errors += 1,
            }
            g.advance(self.clock.now());
        }
    }

    /// Runs the graph on the socket until `until` (or until `stop` says so,
    /// checked after every datagram and timer): sends what the graph has,
    /// waits for a datagram or the graph's next timer, hands it in.
    pub fn run_until<M: Msg>(
        &mut self,
        g: &mut Graph<M>,
        dev: ProtocolId,
        until: Instant,
        mut stop: impl FnMut(&mut Graph<M>) -> bool,
    ) -> io::Result<()> {
        loop {
            self.flush(g);
            if stop(g) {
                return Ok(());
            }
            // What `stop` pushed (an echo) leaves now, not after the wait.
            self.flush(g);
            let now = self.clock.now();
            if now >= until {
                return Ok(());
            }
            let wake = g.poll_timeout().map_or(until, |t| t.min(until));
            if wake <= now {
                g.handle_timeout(now);
                continue;
            }
            // Whole microseconds, at least one: a zero timeout would block.
            let wait = Duration::from_nanos((wake - now).as_nanos().max(1_000) as u64);
            self.sock.set_read_timeout(Some(wait))?;
            if self.rx.len() < ADDR_HEADER + MAX_DATAGRAM {
                self.rx = BytesMut::zeroed(RX_ARENA);
            }
            match self.sock.recv_from(&mut self.rx[ADDR_HEADER..ADDR_HEADER + MAX_DATAGRAM]) {
                Ok((n, from)) => {
                    write_addr(&mut self.rx[..ADDR_HEADER], from);
                    let frame = self.rx.split_to(ADDR_HEADER + n);
                    self.stats.received += 1;
                    g.advance(self.clock.now());
                    g.receive(dev, M::from_received(frame));
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    g.handle_timeout(self.clock.now());
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {} // ICMP from an earlier send
                Err(e) => return Err(e),
            }
        }
    }
}
