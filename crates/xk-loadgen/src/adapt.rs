//! ADAPT (seed 001): executes abstract requests at a real interface.
//!
//! Each adapter turns a batch of due requests into system calls. Batches
//! are for the adapters whose calls take several datagrams (`sendmmsg`,
//! GSO); the others take one request at a time. Every payload starts with
//! the request's sequence number (little-endian, as many of its 8 bytes as
//! fit) so a sink can count loss and reordering.
//!
//! Adapters are opened on the thread that uses them ([`AdapterSpec::open`]):
//! the XTP API objects live on one thread.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, MultiHeaders, SockaddrStorage, recvmsg, sendmmsg, sendmsg,
    setsockopt, sockopt,
};
use serde::{Deserialize, Serialize};

use crate::gar::Request;

/// Most datagrams one `sendmmsg` or one GSO call carries.
pub const MAX_BATCH: usize = 64;

/// Largest GSO super-datagram the kernel takes (one IP packet's worth).
const GSO_BYTES: usize = 65_000;

/// Which adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// Does nothing: measures GAR + SCHED alone.
    Null,
    /// Touches one byte of the payload buffer (the least real work).
    Null1,
    /// One `sendto` per request.
    Udp,
    /// `sendmmsg`, up to 64 due requests per call.
    UdpMmsg,
    /// UDP GSO (`UDP_SEGMENT`): up to 64 due requests of one size per call.
    UdpGso,
    /// A TCP connection; each request is written whole.
    Tcp,
    /// XTP unacknowledged datagrams (service 1) through our endpoint.
    Xtp,
    /// One XTP stream; each request is one message.
    XtpStream,
    /// One XTP transaction (service 3) per request.
    XtpTransaction,
}

impl Kind {
    /// Every adapter, in report order.
    pub const ALL: [Kind; 9] = [
        Kind::Null,
        Kind::Null1,
        Kind::Udp,
        Kind::UdpMmsg,
        Kind::UdpGso,
        Kind::Tcp,
        Kind::Xtp,
        Kind::XtpStream,
        Kind::XtpTransaction,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Null1 => "null-1",
            Kind::Udp => "udp",
            Kind::UdpMmsg => "udp-mmsg",
            Kind::UdpGso => "udp-gso",
            Kind::Tcp => "tcp",
            Kind::Xtp => "xtp",
            Kind::XtpStream => "xtp-stream",
            Kind::XtpTransaction => "xtp-transaction",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            format!("--adapter {s}: not one of {}", names.join(", "))
        })
    }

    /// Whether it sends anything (and so needs `--to`).
    pub fn sends(self) -> bool {
        !matches!(self, Kind::Null | Kind::Null1)
    }
}

/// An adapter to open: its kind and target.
#[derive(Clone, Debug)]
pub struct AdapterSpec {
    /// Which adapter.
    pub kind: Kind,
    /// Where to (UDP or TCP address; for XTP the UDP address of the peer).
    pub to: Option<SocketAddr>,
    /// XTP port at the peer (XTP adapters).
    pub xtp_port: u16,
    /// Ask the kernel for transmit timestamps (`SO_TIMESTAMPING`, UDP).
    pub tx_timestamps: bool,
}

/// What an adapter counted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Requests handed to the interface.
    pub sent: u64,
    /// Requests the interface refused (the first reason in `first_error`).
    pub errors: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// System calls (or API calls) made.
    pub calls: u64,
    /// The first refusal's text.
    pub first_error: Option<String>,
    /// With `--tx-timestamps`: the kernel's transmit timestamp minus the
    /// specified time, per datagram that got one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_miss: Option<crate::stats::Summary>,
}

impl Counts {
    pub(crate) fn error(&mut self, n: u64, e: impl std::fmt::Display) {
        self.errors += n;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// Which due requests may join a batch (up to [`Adapter::max_batch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// Any.
    Any,
    /// Only requests of the first one's size, `max_bytes` in all.
    SameSize {
        /// Most bytes in one batch.
        max_bytes: usize,
    },
}

impl Batching {
    /// Most requests a batch that starts with `first` may hold, given the
    /// adapter's `max_batch` (asked once per batch, not per request).
    #[inline]
    pub fn limit(self, first: &Request, max_batch: usize) -> usize {
        match self {
            Batching::Any => max_batch,
            Batching::SameSize { max_bytes } => match first.size as usize {
                0 => max_batch,
                size => max_batch.min(max_bytes / size).max(1),
            },
        }
    }

    /// Whether `r` may join a batch that starts with `first` (within
    /// [`Batching::limit`]).
    #[inline]
    pub fn joins(self, first: &Request, r: &Request) -> bool {
        match self {
            Batching::Any => true,
            Batching::SameSize { .. } => r.size == first.size,
        }
    }
}

/// An adapter.
pub trait Adapter {
    /// Most requests per [`Adapter::execute`].
    fn max_batch(&self) -> usize {
        1
    }
    /// Which due requests may share a batch (asked once per run: the
    /// answer is applied per request, where a call through the trait
    /// object cost 3.6 % of the GSO adapter's P_max).
    fn batching(&self) -> Batching {
        Batching::Any
    }
    /// Executes the batch (refusals are counted, not returned: a load
    /// generator goes on when the network drops a datagram). An `Err` ends
    /// the run (the connection is gone).
    fn execute(&mut self, batch: &[Request]) -> io::Result<()>;
    /// The run starts: `realtime_ns` is the wall clock (CLOCK_REALTIME, ns)
    /// at t = 0, for adapters that compare kernel timestamps with t_i.
    fn begin(&mut self, _realtime_ns: i128) {}
    /// Housekeeping while idle (the XTP driver's timers).
    fn idle(&mut self) {}
    /// Called shortly before a request's time: read what `execute` will
    /// touch first, so that a long wait's cache losses are not in the miss.
    fn warm(&mut self) {}
    /// Ends the adapter (flushes, closes) and returns its counts.
    fn finish(self: Box<Self>) -> Counts;
}

/// Writes the request's sequence number into the payload's first bytes.
#[inline]
fn stamp(buf: &mut [u8], r: &Request) {
    let seq = r.seq.to_le_bytes();
    match buf.first_chunk_mut::<8>() {
        // The usual case: one 8-byte store, not a copy of variable length.
        Some(head) => *head = seq,
        None => {
            let n = buf.len();
            buf.copy_from_slice(&seq[..n]);
        }
    }
}

impl AdapterSpec {
    /// Opens the adapter (on the calling thread).
    pub fn open(&self) -> io::Result<Box<dyn Adapter>> {
        let to = || {
            self.to.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("adapter {} needs --to ADDR", self.kind.name()),
                )
            })
        };
        Ok(match self.kind {
            Kind::Null => Box::new(Null(Counts::default())),
            Kind::Null1 => Box::new(Null1 { c: Counts::default(), buf: vec![0; 64] }),
            Kind::Udp => Box::new(Udp::open(to()?, self.kind, self.tx_timestamps)?),
            Kind::UdpMmsg | Kind::UdpGso => Box::new(Udp::open(to()?, self.kind, self.tx_timestamps)?),
            Kind::Tcp => Box::new(Tcp::open(to()?)?),
            Kind::Xtp | Kind::XtpStream | Kind::XtpTransaction => {
                crate::adapt_xtp::open(self.kind, to()?, self.xtp_port)?
            }
        })
    }
}

struct Null(Counts);

impl Adapter for Null {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        std::hint::black_box(batch);
        self.0.sent += batch.len() as u64;
        Ok(())
    }
    fn warm(&mut self) {
        std::hint::black_box(self.0.sent);
    }
    fn finish(self: Box<Self>) -> Counts {
        self.0
    }
}

struct Null1 {
    c: Counts,
    buf: Vec<u8>,
}

impl Adapter for Null1 {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        for r in batch {
            self.buf[0] = r.seq as u8;
            std::hint::black_box(&mut self.buf);
            self.c.sent += 1;
            self.c.bytes += 1;
        }
        Ok(())
    }
    fn finish(self: Box<Self>) -> Counts {
        self.c
    }
}

/// The UDP adapters: one `sendto`, `sendmmsg` or GSO per call.
struct Udp {
    kind: Kind,
    sock: UdpSocket,
    to: SocketAddr,
    c: Counts,
    /// Payload arena: every datagram of the batch, back to back.
    arena: Vec<u8>,
    tx: Option<TxStamps>,
}

/// Transmit timestamps: the kernel queues one per datagram on the socket's
/// error queue (SO_TIMESTAMPING, software), in send order; each is paired
/// with the specified time of the datagram it belongs to.
struct TxStamps {
    start_real_ns: i128,
    pending: VecDeque<u64>,
    hist: crate::stats::Histogram,
    cmsg: Vec<u8>,
}

impl Udp {
    fn open(to: SocketAddr, kind: Kind, tx_timestamps: bool) -> io::Result<Udp> {
        let local: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let sock = socket2::Socket::new(socket2::Domain::for_address(to), socket2::Type::DGRAM, None)?;
        // A large send buffer keeps sendmmsg/GSO bursts from failing with
        // ENOBUFS before the kernel drains them.
        let _ = sock.set_send_buffer_size(4 << 20);
        sock.bind(&local.into())?;
        let sock: UdpSocket = sock.into();
        if kind != Kind::Udp {
            // Batches go to one peer: connect once, no address per message.
            sock.connect(to)?;
        }
        if kind == Kind::UdpGso && nix::sys::socket::getsockopt(&sock, sockopt::UdpGsoSegment).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "udp-gso: this kernel has no UDP_SEGMENT (GSO for UDP needs Linux 4.18 or later)",
            ));
        }
        if tx_timestamps && kind == Kind::UdpGso {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "--tx-timestamps: with udp and udp-mmsg only (GSO segments share one timestamp)",
            ));
        }
        if tx_timestamps {
            use nix::sys::socket::TimestampingFlag as F;
            setsockopt(
                &sock,
                sockopt::Timestamping,
                &(F::SOF_TIMESTAMPING_TX_SOFTWARE | F::SOF_TIMESTAMPING_SOFTWARE),
            )
            .map_err(|e| io::Error::other(format!("--tx-timestamps: SO_TIMESTAMPING refused: {e}")))?;
        }
        Ok(Udp {
            kind,
            sock,
            to,
            c: Counts::default(),
            arena: vec![0; MAX_BATCH * 2048],
            tx: tx_timestamps.then(|| TxStamps {
                start_real_ns: 0,
                pending: VecDeque::new(),
                hist: crate::stats::Histogram::default(),
                cmsg: nix::cmsg_space!(nix::sys::socket::Timestamps, [u8; 64]),
            }),
        })
    }

    /// Reads the transmit timestamps the kernel has queued so far.
    fn drain_timestamps(&mut self) {
        let Some(tx) = self.tx.as_mut() else { return };
        let mut buf = [0u8; 2048];
        loop {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let r = recvmsg::<SockaddrStorage>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut tx.cmsg),
                MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
            );
            let Ok(msg) = r else { break };
            let Ok(cmsgs) = msg.cmsgs() else { break };
            for c in cmsgs {
                if let ControlMessageOwned::ScmTimestampsns(ts) = c {
                    let Some(t) = tx.pending.pop_front() else { continue };
                    let real =
                        i128::from(ts.system.tv_sec()) * 1_000_000_000 + i128::from(ts.system.tv_nsec());
                    let miss = real - tx.start_real_ns - i128::from(t);
                    tx.hist.record(miss.max(0) as u64);
                }
            }
        }
    }

    /// Writes the batch's payloads back to back into the arena, each
    /// stamped with its sequence number; returns the bytes in all.
    fn fill(&mut self, batch: &[Request]) -> usize {
        let Some(first) = batch.first() else { return 0 };
        let size = first.size as usize;
        if self.kind == Kind::UdpGso && size > 0 {
            // GSO batches are of one size (`Batching::SameSize`): each
            // segment's stamp is at a multiple of the size — no
            // per-request length or offset sum (docs/LOADGEN.md, Session 14).
            let total = size * batch.len();
            if self.arena.len() < total {
                self.arena.resize(total, 0);
            }
            for (seg, r) in self.arena[..total].chunks_exact_mut(size).zip(batch) {
                debug_assert_eq!(r.size as usize, size);
                stamp(seg, r);
            }
            return total;
        }
        let total: usize = batch.iter().map(|r| r.size as usize).sum();
        if self.arena.len() < total {
            self.arena.resize(total, 0);
        }
        let mut at = 0;
        for r in batch {
            let n = r.size as usize;
            stamp(&mut self.arena[at..at + n], r);
            at += n;
        }
        total
    }
}

impl Adapter for Udp {
    fn max_batch(&self) -> usize {
        if self.kind == Kind::Udp { 1 } else { MAX_BATCH }
    }

    fn batching(&self) -> Batching {
        // GSO cuts one buffer into equal segments: same size only, and the
        // whole must fit one IP packet.
        if self.kind == Kind::UdpGso { Batching::SameSize { max_bytes: GSO_BYTES } } else { Batching::Any }
    }

    fn begin(&mut self, realtime_ns: i128) {
        if let Some(tx) = self.tx.as_mut() {
            tx.start_real_ns = realtime_ns;
        }
    }

    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        if let Some(tx) = self.tx.as_mut() {
            tx.pending.extend(batch.iter().map(|r| r.t_ns));
        }
        let total = self.fill(batch);
        self.c.calls += 1;
        let n = batch.len() as u64;
        match self.kind {
            Kind::Udp => match self.sock.send_to(&self.arena[..total], self.to) {
                Ok(_) => {
                    self.c.sent += 1;
                    self.c.bytes += total as u64;
                }
                Err(e) => self.c.error(1, format!("sendto: {e}")),
            },
            Kind::UdpGso => {
                let seg = batch[0].size as u16;
                let iov = [IoSlice::new(&self.arena[..total])];
                let r = if batch.len() == 1 || seg == 0 {
                    sendmsg::<SockaddrStorage>(self.sock.as_raw_fd(), &iov, &[], MsgFlags::empty(), None)
                } else {
                    let cmsg = [ControlMessage::UdpGsoSegments(&seg)];
                    sendmsg::<SockaddrStorage>(self.sock.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
                };
                match r {
                    Ok(_) => {
                        self.c.sent += n;
                        self.c.bytes += total as u64;
                    }
                    Err(e) => self.c.error(n, format!("sendmsg with UDP_SEGMENT: {e}")),
                }
            }
            _ => {
                let mut slices = Vec::with_capacity(batch.len());
                let mut at = 0;
                for r in batch {
                    let len = r.size as usize;
                    slices.push([IoSlice::new(&self.arena[at..at + len])]);
                    at += len;
                }
                let mut done = 0usize;
                while done < slices.len() {
                    // The socket is connected: no address per message (nix
                    // still wants one entry per message).
                    let part = &slices[done..];
                    let addrs: Vec<Option<SockaddrStorage>> = vec![None; part.len()];
                    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(part.len(), None);
                    let r =
                        sendmmsg(self.sock.as_raw_fd(), &mut headers, part, &addrs, [], MsgFlags::empty());
                    match r {
                        Ok(res) => {
                            let k = res.count();
                            if k == 0 {
                                break;
                            }
                            self.c.sent += k as u64;
                            self.c.bytes +=
                                batch[done..done + k].iter().map(|r| u64::from(r.size)).sum::<u64>();
                            done += k;
                        }
                        Err(e) => {
                            // The first datagram failed: count it, go on with
                            // the rest (a refusal is per datagram).
                            self.c.error(1, format!("sendmmsg: {e}"));
                            done += 1;
                        }
                    }
                    if done < slices.len() {
                        self.c.calls += 1;
                    }
                }
            }
        }
        if self.tx.is_some() {
            self.drain_timestamps();
        }
        Ok(())
    }

    fn idle(&mut self) {
        self.drain_timestamps();
    }

    fn finish(mut self: Box<Self>) -> Counts {
        // The last timestamps may still be on their way.
        std::thread::sleep(std::time::Duration::from_millis(if self.tx.is_some() { 20 } else { 0 }));
        self.drain_timestamps();
        if let Some(tx) = &self.tx {
            self.c.tx_miss = Some(tx.hist.summary(1_000));
        }
        self.c
    }
}

/// TCP: one connection, each request written whole (Nagle off: a request
/// leaves when it is executed, not when the kernel has gathered more).
struct Tcp {
    s: TcpStream,
    buf: Vec<u8>,
    c: Counts,
}

impl Tcp {
    fn open(to: SocketAddr) -> io::Result<Tcp> {
        let s = TcpStream::connect(to)
            .map_err(|e| io::Error::new(e.kind(), format!("tcp: connect {to}: {e}")))?;
        s.set_nodelay(true)?;
        Ok(Tcp { s, buf: vec![0; 2048], c: Counts::default() })
    }
}

impl Adapter for Tcp {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        for r in batch {
            let n = r.size as usize;
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            stamp(&mut self.buf[..n], r);
            self.c.calls += 1;
            self.s
                .write_all(&self.buf[..n])
                .map_err(|e| io::Error::new(e.kind(), format!("tcp: write: {e}")))?;
            self.c.sent += 1;
            self.c.bytes += n as u64;
        }
        Ok(())
    }
    fn finish(self: Box<Self>) -> Counts {
        let _ = self.s.shutdown(std::net::Shutdown::Write);
        self.c
    }
}
