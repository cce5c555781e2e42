//! The XTP endpoint on a UDP socket: one XTP packet per datagram, XTP header
//! at offset 0, checksum always filled (digest §1 [P], G13, G14).
//!
//! Blocking and single-threaded: [`UdpDriver::turn`] sends everything the
//! endpoint has, waits for one datagram or the endpoint's next timeout
//! (whichever comes first, bounded by the caller), and feeds it in. Received
//! datagrams are read into a `BytesMut` and split off without copying, so
//! payload reaches the application as slices of the receive buffer.
//!
//! Not yet here (issue #6): recvmmsg/sendmmsg batching, GSO/GRO, busy-poll,
//! raw IP protocol 36.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration as StdDuration;

use bytes::BytesMut;
use xk_time::{Duration, Instant};
use xtp_proto::{Endpoint, EndpointConfig};

use crate::clock::Clock;

/// Default XTP-over-UDP port of this project (no port is assigned to XTP;
/// digest G13). 3636: "36", XTP's IP protocol number, twice.
pub const DEFAULT_PORT: u16 = 3636;

const RX_BUFFER: usize = 256 * 1024;
const MAX_DATAGRAM: usize = 65_536;

/// An XTP endpoint driven on a UDP socket.
pub struct UdpDriver {
    sock: UdpSocket,
    ep: Endpoint,
    clock: Clock,
    tx: Vec<u8>,
    rx: BytesMut,
    /// Datagrams sent and received, and send errors.
    pub counters: (u64, u64, u64),
}

impl UdpDriver {
    /// Binds `addr` and creates an endpoint seeded from `seed`.
    pub fn bind(addr: impl ToSocketAddrs, cfg: EndpointConfig, seed: u64) -> io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        let tx = vec![0u8; cfg.max_packet.max(2048)];
        Ok(UdpDriver {
            sock,
            ep: Endpoint::new(cfg, seed),
            clock: Clock::new(),
            tx,
            rx: BytesMut::with_capacity(RX_BUFFER),
            counters: (0, 0, 0),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Current time on the driver's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The endpoint, for commands and events.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.ep
    }

    /// Sends everything the endpoint has queued.
    pub fn flush(&mut self) -> io::Result<()> {
        loop {
            let now = self.clock.now();
            let Some(t) = self.ep.poll_transmit(now, &mut self.tx) else { return Ok(()) };
            match self.sock.send_to(&self.tx[..t.len], t.dst) {
                Ok(_) => self.counters.0 += 1,
                // A full socket buffer loses the datagram like a congested
                // link would; the protocol recovers. Count it.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    // A signal: the datagram did not leave; count it like a
                    // full buffer (the protocol retransmits).
                    self.counters.2 += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.counters.2 += 1,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.counters.2 += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Receives one datagram into the receive buffer and hands it to the
    /// endpoint as a slice of that buffer. False when none was waiting.
    fn recv_one(&mut self) -> io::Result<bool> {
        // `rx` stays MAX_DATAGRAM long: after a datagram is split off the
        // front, only its length is re-filled (and a fresh buffer is taken
        // when the old one is used up), so no 64 KiB memset per datagram.
        if self.rx.capacity() < MAX_DATAGRAM {
            self.rx = BytesMut::with_capacity(RX_BUFFER);
        }
        self.rx.resize(MAX_DATAGRAM, 0);
        let r = self.sock.recv_from(&mut self.rx[..]);
        match r {
            Ok((n, from)) => {
                self.counters.1 += 1;
                let data = self.rx.split_to(n).freeze();
                self.ep.handle_datagram(self.clock.now(), from, data);
                Ok(true)
            }
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::ConnectionRefused => {
                    Ok(false)
                }
                _ => Err(e),
            },
        }
    }

    /// One turn of the loop: flush, wait up to `max_wait` (or the endpoint's
    /// next timeout) for a datagram, process it and any due timers, flush.
    pub fn turn(&mut self, max_wait: Duration) -> io::Result<()> {
        self.flush()?;
        let now = self.clock.now();
        let wait = match self.ep.poll_timeout() {
            Some(t) => t.saturating_since(now).min(max_wait),
            None => max_wait,
        };
        if wait.is_zero() {
            self.sock.set_nonblocking(true)?;
        } else {
            self.sock.set_nonblocking(false)?;
            let w = StdDuration::from_nanos(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX));
            self.sock.set_read_timeout(Some(w.max(StdDuration::from_micros(1))))?;
        }
        if self.recv_one()? {
            // Drain what else is already waiting, without blocking.
            self.sock.set_nonblocking(true)?;
            for _ in 0..64 {
                if !self.recv_one()? {
                    break;
                }
            }
        }
        self.ep.handle_timeout(self.clock.now());
        self.flush()
    }
}
