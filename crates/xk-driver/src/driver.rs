//! The XTP endpoint on a socket: one XTP packet per datagram, XTP header at
//! offset 0, checksum always filled (digest §1 [P], G13, G14). Over UDP
//! ([`UdpDriver`], the default) or directly over IP protocol 36
//! ([`RawDriver`], root only): one loop, two [`Transport`]s.
//!
//! Single-threaded: [`UdpDriver::turn`] sends everything the endpoint has
//! (batched: GSO runs and `sendmmsg`, see [`crate::batch`]), waits for input
//! or the endpoint's next timeout (whichever comes first, bounded by the
//! caller), feeds what came in, runs due timers and sends again. Received
//! datagrams reach the application as slices of the receive buffer.
//!
//! Waiting, in blocking mode: when the next deadline is far, one blocking
//! receive (which wakes at least every [`TICK`]); when it is near, an exact
//! `ppoll`. So a ping-pong turn costs one send and one receive call, the same
//! as a plain UDP echo. In busy-poll mode the driver never sleeps: it spins on
//! non-blocking receives until input or the deadline.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xk_trace::Point;
use xtp_proto::{CopyCount, Endpoint, EndpointConfig, PeerChange};

use crate::batch::{BatchSocket, IoCounters, Outgoing, TICK};
use crate::clock::Clock;
use crate::intake::{Intake, IntakeCounters};
use crate::lanes::{LaneCounters, Lanes};
use crate::raw::RawSocket;
use crate::trace::{EngineTrace, sat_u32, span_end, span_start};
use crate::transport::Transport;

/// Default XTP-over-UDP port of this project (no port is assigned to XTP;
/// digest G13). 3636: "36", XTP's IP protocol number, twice.
pub const DEFAULT_PORT: u16 = 3636;

/// Datagrams taken from the endpoint per send batch.
const TX_BATCH: usize = 64;
/// Kernel socket buffer asked for each way (a bulk window in flight).
pub const SOCKET_BUFFER: usize = 8 << 20;

/// How the driver waits for input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Sleep in the kernel until input or the next deadline.
    #[default]
    Blocking,
    /// Spin on non-blocking receives: lowest latency, one core at 100 %.
    BusyPoll,
}

/// Driver settings.
#[derive(Clone, Copy, Debug)]
pub struct DriverConfig {
    /// How to wait.
    pub wait: WaitMode,
    /// Use UDP GSO/GRO when the kernel has them.
    pub offload: bool,
    /// Most validated peers given a UDP socket of their own, out of a
    /// flood's way ([`crate::lanes`]); 0: none, every peer shares the
    /// bound socket. Over UDP only; servers want it, clients need not.
    pub peer_lanes: usize,
    /// With peer lanes: datagrams from unvalidated sources read per second
    /// while validated peers have traffic ([`crate::intake`]); 0: no limit.
    pub unvalidated_rate: u64,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            wait: WaitMode::Blocking,
            offload: true,
            peer_lanes: 0,
            unvalidated_rate: crate::intake::DEFAULT_UNVALIDATED_RATE,
        }
    }
}

/// An XTP endpoint driven on a socket.
pub struct Driver<T: Transport> {
    sock: T,
    ep: Endpoint<EngineTrace>,
    clock: Clock,
    cfg: DriverConfig,
    max_packet: usize,
    arena: Vec<u8>,
    out: Vec<Outgoing>,
    /// Second arena for re-laying out a batch (see `data_first`).
    spare: Vec<u8>,
    /// Kernel buffer sizes granted (receive, send).
    pub buffers: (usize, usize),
    /// Sees every packet sent and received (see [`Driver::set_tap`]).
    tap: Option<Box<Tap>>,
    /// Validated peers' own sockets (`DriverConfig::peer_lanes`).
    lanes: Option<Lanes<T>>,
    /// How much of the shared socket is read beside busy lanes.
    intake: Intake,
    /// Payload copies on this side of the socket (see [`PathCopies`]).
    copies: PathCopies,
}

/// The payload copies the driver makes or hands the kernel, counted in the
/// user data of DATA and FIRST packets (the engine counts its own in
/// [`xtp_proto::ContextStats`]). Together they are E9's end-to-end count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCopies {
    /// Packets copied again to put a batch's DATA before its control
    /// packets (`data_first`: a status reply and a longer DATA packet in one
    /// batch, as in a ping-pong's reply).
    pub relaid: CopyCount,
    /// Handed to the kernel by `sendmsg`/`sendmmsg`: the kernel copies each
    /// byte once into its socket buffer (with GSO too: one copy per train).
    pub to_kernel: CopyCount,
    /// Taken from the kernel by `recvmsg`: copied once out of its socket
    /// buffer into the driver's receive buffer, which the endpoint then
    /// keeps slices of (no further copy to the receive buffer or the reader).
    pub from_kernel: CopyCount,
}

/// User bytes a DATA or FIRST packet carries (its data after the BTAG,
/// if any); None for any other packet. DATA is read from its header alone;
/// a FIRST (one per context) is parsed for the segments before its data.
fn data_bytes(packet: &[u8]) -> Option<usize> {
    let p = xtp_wire::Packet::new_checked(packet).ok()?;
    match p.ptype_code() {
        0 => {
            let tag = if p.options().contains(xtp_wire::Options::BTAG) { 8 } else { 0 };
            Some((p.dlen() as usize).saturating_sub(tag))
        }
        2 => match xtp_wire::PacketRepr::parse(packet).ok()?.body {
            xtp_wire::Body::First { data, .. } => Some(data.len()),
            _ => None,
        },
        _ => None,
    }
}

/// Which way a tapped packet went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapDir {
    /// We sent it to the address.
    Sent,
    /// We received it from the address.
    Received,
}

/// A packet observer: direction, the driver's time, the peer, one XTP
/// packet (a GSO or GRO train arrives here split into its packets).
pub type Tap = dyn FnMut(TapDir, Instant, SocketAddr, &[u8]) + Send;

/// XTP over UDP.
pub type UdpDriver = Driver<BatchSocket>;
/// XTP over raw IP protocol 36.
pub type RawDriver = Driver<RawSocket>;

impl Driver<BatchSocket> {
    /// Binds `addr` and creates an endpoint seeded from `seed`, blocking
    /// waits and offload where available.
    pub fn bind(addr: impl ToSocketAddrs, cfg: EndpointConfig, seed: u64) -> io::Result<Self> {
        Self::bind_with(addr, cfg, seed, DriverConfig::default())
    }

    /// As [`UdpDriver::bind`], with driver settings.
    pub fn bind_with(
        addr: impl ToSocketAddrs,
        cfg: EndpointConfig,
        seed: u64,
        driver: DriverConfig,
    ) -> io::Result<Self> {
        let sock = if driver.peer_lanes > 0 {
            bind_first(addr, crate::batch::bind_shared)?
        } else {
            UdpSocket::bind(addr)?
        };
        let mut d = Driver::on(BatchSocket::new(sock, driver.offload)?, cfg, seed, driver);
        if driver.peer_lanes > 0 {
            d.lanes = Some(Lanes::new(driver.peer_lanes, &d.sock)?);
            d.ep.watch_peers(true);
        }
        Ok(d)
    }
}

/// Binds the first of `addr`'s addresses that `bind` accepts (as
/// `UdpSocket::bind` tries them), or returns the last error.
fn bind_first(
    addr: impl ToSocketAddrs,
    bind: impl Fn(SocketAddr) -> io::Result<UdpSocket>,
) -> io::Result<UdpSocket> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to bind");
    for a in addr.to_socket_addrs()? {
        match bind(a) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The UDP header's bytes, which XTP over raw IP does not spend.
pub const UDP_HEADER: usize = 8;

impl Driver<RawSocket> {
    /// Opens a raw IP protocol-36 socket on `local` (root only; the error
    /// says so) and creates an endpoint seeded from `seed`.
    ///
    /// `cfg.max_packet` is read as the limit over UDP (the engine's default,
    /// 1,472 = a 1,500-byte MTU less the IPv4 and UDP headers): over raw IP
    /// there is no UDP header, so XTP gets those 8 bytes (1,480 by default,
    /// room for the 1,448-byte segment TCP carries with timestamps).
    pub fn bind_raw(
        local: std::net::Ipv4Addr,
        cfg: EndpointConfig,
        seed: u64,
        driver: DriverConfig,
    ) -> io::Result<Self> {
        let cfg = EndpointConfig { max_packet: cfg.max_packet + UDP_HEADER, ..cfg };
        Ok(Driver::on(RawSocket::bind(local)?, cfg, seed, driver))
    }
}

impl<T: Transport> Driver<T> {
    /// Runs an endpoint on an open transport.
    pub fn on(sock: T, cfg: EndpointConfig, seed: u64, driver: DriverConfig) -> Self {
        let buffers = sock.size_buffers(SOCKET_BUFFER);
        let max_packet = cfg.max_packet.max(2048);
        let clock = Clock::new();
        Driver {
            sock,
            ep: Endpoint::with_subscriber(cfg, seed, EngineTrace::new(clock.epoch_ns())),
            clock,
            cfg: driver,
            max_packet,
            arena: vec![0u8; TX_BATCH * max_packet],
            out: Vec::with_capacity(TX_BATCH),
            spare: vec![0u8; TX_BATCH * max_packet],
            buffers,
            tap: None,
            copies: PathCopies::default(),
            lanes: None,
            intake: Intake::new(driver.unvalidated_rate),
        }
    }

    /// What the peer lanes did (all zero without `DriverConfig::peer_lanes`).
    pub fn lane_counters(&self) -> LaneCounters {
        self.lanes.as_ref().map(Lanes::counters).unwrap_or_default()
    }

    /// What the intake budget did (all zero without peer lanes).
    pub fn intake_counters(&self) -> IntakeCounters {
        self.intake.counters()
    }

    /// The endpoint's next timer, or the intake budget's refill if sooner.
    fn next_deadline(&mut self) -> Option<Instant> {
        match (self.ep.poll_timeout(), self.intake.resume_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Opens and closes lanes as the endpoint validates peers and frees
    /// their last contexts.
    fn sync_lanes(&mut self) {
        let Some(lanes) = self.lanes.as_mut() else { return };
        while let Some(change) = self.ep.poll_peer_change() {
            match change {
                PeerChange::Validated(peer) => lanes.open(&self.sock, peer),
                PeerChange::Gone(peer) => lanes.close(&self.sock, peer),
            }
        }
    }

    /// Waits until input is readable on any socket or `timeout` passes.
    fn wait_input(&self, timeout: Option<Duration>) -> io::Result<bool> {
        match &self.lanes {
            Some(l) => crate::transport::wait_readable(l.fd(), timeout),
            None => self.sock.wait(timeout),
        }
    }

    /// Calls `tap` with every packet sent and received from now on (a
    /// packet capture: `--pcap`). `None` removes it. Costs one branch per
    /// packet when unset.
    pub fn set_tap(&mut self, tap: Option<Box<Tap>>) {
        self.tap = tap;
    }

    /// A warning when the kernel granted less socket buffer than asked
    /// (a bulk transfer then loses datagrams in the kernel), naming the
    /// sysctl to raise.
    pub fn buffer_warning(&self) -> Option<String> {
        // Linux reports twice the granted size (bookkeeping overhead).
        let want = SOCKET_BUFFER;
        let (r, s) = self.buffers;
        (r < want || s < want).then(|| {
            format!(
                "kernel socket buffers are {} KiB receive / {} KiB send, below the {} KiB asked for; \
                 raise net.core.rmem_max and net.core.wmem_max (sysctl -w net.core.rmem_max={want}) \
                 for full-speed bulk transfers",
                r / 2048,
                s / 2048,
                want / 1024
            )
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

    /// The driver's clock (a copy: the same epoch, for callers that pass
    /// times to the endpoint without holding the driver).
    pub fn clock(&self) -> crate::clock::Clock {
        self.clock
    }

    /// The endpoint, for commands and events.
    pub fn endpoint(&mut self) -> &mut Endpoint<EngineTrace> {
        &mut self.ep
    }

    /// The engine, to look at.
    pub fn endpoint_ref(&self) -> &Endpoint<EngineTrace> {
        &self.ep
    }

    /// What the socket did (datagrams, errors, system calls).
    pub fn counters(&self) -> IoCounters {
        self.sock.counters()
    }

    /// Whether GSO (send) and GRO (receive) are in use.
    pub fn offload(&self) -> (bool, bool) {
        self.sock.offload()
    }

    /// The payload copies counted so far on this side of the socket.
    pub fn copies(&self) -> PathCopies {
        self.copies
    }

    /// Sends everything the endpoint has queued, in batches.
    pub fn flush(&mut self) -> io::Result<()> {
        loop {
            let now = self.clock.now();
            self.out.clear();
            let mut used = 0;
            while self.out.len() < TX_BATCH {
                let Some(t) = self.ep.poll_transmit(now, &mut self.arena[used..used + self.max_packet])
                else {
                    break;
                };
                self.out.push(Outgoing { dst: t.dst, start: used, len: t.len });
                used += t.len;
            }
            if self.out.is_empty() {
                return Ok(());
            }
            self.data_first();
            if let Some(tap) = self.tap.as_mut() {
                for o in &self.out {
                    tap(TapDir::Sent, now, o.dst, &self.arena[o.start..o.start + o.len]);
                }
            }
            let t0 = span_start();
            let sent = self.sock.send(&self.arena, &self.out)?;
            if t0 != 0 {
                let bytes = self.out.iter().map(|o| o.len as u32).sum();
                span_end(t0, Point::SendCall, sent as u64, bytes);
            }
            // Datagrams the kernel refused are not returned; which ones is
            // not known, so a short count credits the first `sent` (on
            // loopback every send is taken).
            for o in &self.out[..sent.min(self.out.len())] {
                if let Some(n) = data_bytes(&self.arena[o.start..o.start + o.len]) {
                    self.copies.to_kernel.add(n);
                }
            }
            if self.out.len() < TX_BATCH {
                return Ok(());
            }
        }
    }

    /// Puts a batch's DATA packets before its control packets, each group in
    /// its own order, when a control packet came before a longer DATA packet. A status reply and a
    /// data packet to one peer then form one GSO send (equal sizes, shorter
    /// last) — in a ping-pong, one datagram-train and one wake-up at the peer
    /// instead of two. Control and data are separate sequence spaces, so
    /// their relative order within a batch carries no meaning; DATA order is
    /// kept.
    fn data_first(&mut self) {
        let is_data = |arena: &[u8], o: &Outgoing| {
            xtp_wire::Packet::new_unchecked(&arena[o.start..o.start + o.len]).ptype_code() == 0
        };
        // Only when a control packet precedes a longer DATA packet: a longer
        // control packet followed by shorter DATA already fits GSO's shape.
        let mut shortest_control_so_far = usize::MAX;
        let mut needed = false;
        for o in &self.out {
            if is_data(&self.arena, o) {
                needed |= o.len > shortest_control_so_far;
            } else {
                shortest_control_so_far = shortest_control_so_far.min(o.len);
            }
        }
        if !needed {
            return;
        }
        let mut order: Vec<Outgoing> = Vec::with_capacity(self.out.len());
        order.extend(self.out.iter().filter(|o| is_data(&self.arena, o)).copied());
        order.extend(self.out.iter().filter(|o| !is_data(&self.arena, o)).copied());
        let mut used = 0;
        for o in &mut order {
            let packet = &self.arena[o.start..o.start + o.len];
            if let Some(n) = data_bytes(packet) {
                self.copies.relaid.add(n);
            }
            self.spare[used..used + o.len].copy_from_slice(packet);
            o.start = used;
            used += o.len;
        }
        std::mem::swap(&mut self.arena, &mut self.spare);
        self.out = order;
    }

    /// Receives what is waiting (`block`: or waits up to [`TICK`] for it) and
    /// feeds it to the endpoint. Returns the number of datagrams.
    fn receive(&mut self, block: bool) -> io::Result<usize> {
        // The arrival time is read when a call's first datagram is handed
        // over, not before the call: a blocking receive may wait up to a
        // TICK, and datagrams stamped with the time the wait began make
        // every RTT sample short by the wait (measured: a 30 ms path showed
        // a 13.5 ms minimum RTT, which shrank BBR's window and RACK's wait).
        let ep = &mut self.ep;
        let clock = &self.clock;
        let tap = &mut self.tap;
        let copies = &mut self.copies;
        let stamp = std::cell::Cell::new(None);
        // Bytes handed over by the current receive call (its span's `b`).
        let got = std::cell::Cell::new(0u64);
        let mut feed = |from: SocketAddr, data: Bytes| {
            let now = stamp.get().unwrap_or_else(|| clock.now());
            stamp.set(Some(now));
            got.set(got.get() + data.len() as u64);
            if let Some(n) = data_bytes(&data) {
                copies.from_kernel.add(n);
            }
            if let Some(tap) = tap.as_mut() {
                tap(TapDir::Received, now, from, &data);
            }
            ep.handle_datagram(now, from, data)
        };
        if let Some(lanes) = self.lanes.as_mut() {
            // Validated peers first, then one batch of the shared socket:
            // under a flood it is always full, and draining it would put the
            // lanes behind it again. A lane is drained (bounded) only under
            // bulk load, as the shared socket is below; a lone datagram ends
            // its turn. Beside busy lanes the shared socket is read within
            // the intake budget ([`crate::intake`]).
            let mut n = 0;
            let shared_ready = lanes.read_ready(|lane| {
                for _ in 0..crate::batch::BATCH {
                    stamp.set(None);
                    let t0 = span_start();
                    let k = lane.recv(false, &mut feed)?;
                    if k > 0 {
                        span_end(t0, Point::RecvCall, k as u64, sat_u32(got.take()));
                    }
                    n += k;
                    if k <= 2 {
                        break;
                    }
                }
                Ok(())
            })?;
            let now = clock.now();
            self.intake.lanes_read(now, n);
            if shared_ready || lanes.shared_aside() {
                let may = self.intake.may_read(now);
                lanes.set_aside(&self.sock, !may)?;
                if may {
                    stamp.set(None);
                    let t0 = span_start();
                    // Validated peers beyond the lane limit share this
                    // socket; their datagrams are not charged.
                    let mut validated = 0;
                    let k = self.sock.recv(false, &mut |from, data| {
                        validated += usize::from(lanes.is_waiting(&from));
                        feed(from, data)
                    })?;
                    if k > 0 {
                        span_end(t0, Point::RecvCall, k as u64, sat_u32(got.take()));
                    }
                    self.intake.charge(now, k, k.saturating_sub(validated));
                    n += k;
                }
            }
            return Ok(n);
        }
        let t0 = span_start();
        let n = self.sock.recv(block, &mut feed)?;
        if n > 0 {
            span_end(t0, Point::RecvCall, n as u64, sat_u32(got.take()));
        }
        // Under bulk load (a GRO train of several datagrams) take what else is
        // queued before sending: the drain saves turns. In request/response
        // traffic (one or two datagrams) it would end in an empty call that
        // costs a quarter of a ping-pong round trip's system calls; the next
        // turn's receive returns at once if more is waiting.
        if n > 2 {
            for _ in 0..crate::batch::BATCH {
                stamp.set(None);
                let t0 = span_start();
                let k = self.sock.recv(false, &mut feed)?;
                if k == 0 {
                    break;
                }
                span_end(t0, Point::RecvCall, k as u64, sat_u32(got.take()));
            }
        }
        Ok(n)
    }

    /// The descriptor that becomes readable when input waits, for a loop
    /// that waits on it together with other things (the engine thread waits
    /// on it and its doorbell): the socket's, or with peer lanes the epoll
    /// set's of all of them.
    pub fn input_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.lanes {
            Some(l) => l.fd(),
            None => self.sock.fd(),
        }
    }

    /// Time left until the endpoint's next timer (None: no timer).
    pub fn until_timeout(&mut self) -> Option<Duration> {
        let now = self.clock.now();
        self.next_deadline().map(|t| t.saturating_since(now))
    }

    /// For a loop that waits elsewhere ([`crate::engine`]): takes what is
    /// waiting on the socket without blocking and runs the timers that are
    /// due. Does not flush (see [`UdpDriver::turn`]). Returns the number of
    /// datagrams received.
    pub fn poll_input(&mut self) -> io::Result<usize> {
        let n = self.receive(false)?;
        let now = self.clock.now();
        if n > 0 || self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        self.sync_lanes();
        Ok(n)
    }

    /// One turn of the loop: flush, wait up to `max_wait` (or the endpoint's
    /// next timeout) for input, process it and any due timers.
    ///
    /// The turn does not flush at its end: what the endpoint produced while
    /// processing (a status reply, say) waits for the application's own
    /// response to the same input, and both leave together at the start of
    /// the next turn — one system call and one wake-up at the peer instead
    /// of two. Call [`UdpDriver::flush`] to send without waiting.
    pub fn turn(&mut self, max_wait: Duration) -> io::Result<()> {
        self.flush()?;
        let now = self.clock.now();
        let deadline = match self.next_deadline() {
            Some(t) => t.min(now + max_wait),
            None => now + max_wait,
        };
        match self.cfg.wait {
            WaitMode::BusyPoll => {
                while self.receive(false)? == 0 && self.clock.now() < deadline {
                    std::hint::spin_loop();
                }
            }
            WaitMode::Blocking => {
                let wait = deadline.saturating_since(now);
                if wait.is_zero() {
                    self.receive(false)?;
                } else if wait >= TICK + Duration::from_millis(5) && self.lanes.is_none() {
                    self.receive(true)?;
                } else if self.wait_input(Some(wait))? || self.intake.resume_at().is_some() {
                    // A set-aside shared socket is not in the wait: read it
                    // when its budget refills.
                    self.receive(false)?;
                }
            }
        }
        self.ep.handle_timeout(self.clock.now());
        self.sync_lanes();
        Ok(())
    }
}
