//! Blocking user APIs over XTP on UDP, in the shape of `std::net`:
//!
//! * [`XtpStream`] — a reliable byte stream (service 4) implementing
//!   [`std::io::Read`] and [`std::io::Write`], plus a message API
//!   ([`XtpStream::send_message`] / [`XtpStream::recv_message`]) that keeps
//!   EOM boundaries and BTAGs: the SAFENET `SEND_MESSAGE` / `GET_MESSAGE` of
//!   seed 004.
//! * [`XtpListener`] — accepts streams and transactions on an XTP port, and
//!   receives datagrams sent to it.
//! * [`send_datagram`] (services 1 and 2) and [`transaction`] (service 3):
//!   one request, one response.
//!
//! Threading: each object owns (or shares, for a listener and the streams
//! it accepted) one endpoint on one UDP socket, and the objects are `!Send`
//! and live on one thread, like a single-threaded event loop. Where the
//! endpoint runs is the deployment [`Mode`], chosen when the object is made
//! ([`Xtp`]) and invisible afterwards:
//!
//! * [`Mode::Integrated`] (the default): no hidden I/O thread; every
//!   blocking call turns the socket's [`crate::driver::UdpDriver`] until it
//!   can complete.
//! * [`Mode::EngineThread`]: the driver runs on its own thread
//!   ([`crate::engine`]); calls post control blocks to it and wait for its
//!   completions, one wake-up per message.
//! * [`Mode::Daemon`]: the driver runs in an `xpress daemon` process
//!   ([`crate::daemon`]) shared with other client processes; each object
//!   registers with it and posts the same blocks through rings in shared
//!   memory. The endpoint settings are the daemon's.
//!
//! A program wanting parallelism runs one listener per thread (or uses
//! several sockets). Errors are `io::Error`s whose text names what the protocol said:
//! a refusal carries the peer's DIAG text, a timeout says how many bytes the
//! peer acknowledged.

mod core;
mod datagram;
mod listener;
mod reaper;
mod stream;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, EndpointConfig, Event, Service};

pub(crate) use core::Cid;
pub(crate) use core::Core;
pub use datagram::{send_datagram, transaction};
pub use listener::XtpListener;
pub use reaper::{LingerCounts, linger_counts, max_lingering};
pub use stream::{Message, XtpStream};

use crate::engine::Notice;
pub use crate::engine::{EngineConfig, Mode, RingStats};

/// How long one turn of the driver may wait before the caller's loop looks
/// again (deadlines and timeouts are checked between turns).
const TURN: Duration = Duration::from_millis(50);

/// What the application has learnt about one context from events.
#[derive(Default)]
struct Status {
    peer_finished: bool,
    closed: Option<CloseReason>,
    /// The engine thread refused a block about this context.
    failed: Option<String>,
}

/// An endpoint (integrated or on its engine thread) and the events it
/// produced, sorted by context.
struct Shared {
    core: Core,
    status: HashMap<Cid, Status>,
    incoming: VecDeque<(Cid, SocketAddr, Service)>,
}

type Handle = Rc<RefCell<Shared>>;

impl Shared {
    /// Binds `local` and starts its endpoint in `mode`.
    fn bind(local: SocketAddr, ep: EndpointConfig, mode: Mode) -> io::Result<Handle> {
        Ok(Rc::new(RefCell::new(Shared {
            core: Core::bind(local, ep, mode)?,
            status: HashMap::new(),
            incoming: VecDeque::new(),
        })))
    }

    fn now(&self) -> Instant {
        self.core.now()
    }

    /// Waits up to `max_wait` for the endpoint to make progress (integrated:
    /// one turn of the driver; engine thread: blocks on FN), then files
    /// every event by context.
    fn pump(&mut self, max_wait: Duration) -> io::Result<()> {
        self.pump_for(max_wait, false)
    }

    /// As [`Shared::pump`]; `message_end`: the caller waits for the end of
    /// a message, so the engine thread need not wake it for each chunk.
    fn pump_for(&mut self, max_wait: Duration, message_end: bool) -> io::Result<()> {
        match &mut self.core {
            Core::Integrated(d) => d.turn(max_wait)?,
            Core::Engine(e) => e.wait_for(max_wait, message_end)?,
        }
        self.collect();
        Ok(())
    }

    fn collect(&mut self) {
        match &mut self.core {
            Core::Integrated(d) => {
                while let Some(ev) = d.endpoint().poll_event() {
                    match ev {
                        Event::Incoming { ctx, peer, service, .. } => {
                            self.status.entry(Cid::Local(ctx)).or_default();
                            self.incoming.push_back((Cid::Local(ctx), peer, service));
                        }
                        Event::PeerFinished { ctx } => {
                            self.status.entry(Cid::Local(ctx)).or_default().peer_finished = true
                        }
                        Event::Closed { ctx, reason } => {
                            self.status.entry(Cid::Local(ctx)).or_default().closed = Some(reason)
                        }
                        Event::Readable { .. } | Event::Acked { .. } | Event::Gap { .. } => {}
                    }
                }
            }
            Core::Engine(e) => {
                e.collect();
                while let Some(n) = e.next_notice() {
                    match n {
                        Notice::Incoming { ctx, peer, service } => {
                            self.status.entry(Cid::Remote(ctx)).or_default();
                            self.incoming.push_back((Cid::Remote(ctx), peer, service));
                        }
                        Notice::PeerFinished { ctx } => {
                            self.status.entry(Cid::Remote(ctx)).or_default().peer_finished = true
                        }
                        Notice::Closed { ctx, reason } => {
                            self.status.entry(Cid::Remote(ctx)).or_default().closed = Some(reason)
                        }
                        // Only for a context still in use and not over (a
                        // close racing the engine's `Closed` is no error).
                        Notice::Failed { ctx, error } => {
                            if let Some(s) = self.status.get_mut(&Cid::Remote(ctx))
                                && s.closed.is_none()
                            {
                                s.failed = Some(error.to_string());
                            }
                        }
                    }
                }
            }
        }
    }

    fn status(&self, ctx: Cid) -> (bool, Option<&CloseReason>) {
        self.status.get(&ctx).map_or((false, None), |s| (s.peer_finished, s.closed.as_ref()))
    }

    /// Why the engine thread refused a block about `ctx`, if it did.
    fn failure(&self, ctx: Cid) -> Option<io::Error> {
        let s = self.status.get(&ctx)?.failed.as_ref()?;
        Some(io::Error::new(io::ErrorKind::InvalidInput, format!("the XTP engine refused: {s}")))
    }

    /// Registers a context the application opened.
    fn opened(&mut self, ctx: Cid) -> Cid {
        self.status.entry(ctx).or_default();
        ctx
    }

    /// The object of `ctx` is gone.
    fn forget(&mut self, ctx: Cid) {
        self.status.remove(&ctx);
        self.core.forget(ctx);
    }

    /// Takes the next in-order chunk of `ctx`, if any.
    fn read_chunk(&mut self, ctx: Cid) -> Option<xtp_proto::Chunk> {
        self.core.read_chunk(ctx)
    }

    fn write(
        &mut self,
        ctx: Cid,
        data: &[u8],
        eom: bool,
        btag: Option<u64>,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        self.core.write(ctx, data, eom, btag, deadline)
    }

    /// The wake-up counters of the engine thread's rings (None: integrated).
    fn ring_stats(&self) -> Option<RingStats> {
        match &self.core {
            Core::Integrated(_) => None,
            Core::Engine(e) => Some(e.stats()),
        }
    }
}

/// How API objects are made: the deployment [`Mode`] and the endpoint's
/// settings. `Xtp::default()` is what `XtpStream::connect`,
/// `XtpListener::bind`, [`send_datagram`] and [`transaction`] use
/// (integrated); the rest of the application is the same in every mode.
///
/// ```no_run
/// use std::io::Write;
/// use xk_driver::api::{Mode, Xtp};
/// let xtp = Xtp::new(Mode::engine_thread());
/// let mut s = xtp.connect("127.0.0.1:3636", 7)?;
/// s.write_all(b"hello")?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Xtp {
    /// Where the endpoint runs.
    pub mode: Mode,
    /// Endpoint settings for clients (connect, datagrams, transactions);
    /// None: [`client_config`].
    pub client: Option<EndpointConfig>,
    /// Endpoint settings for listeners; None: the engine's defaults.
    pub server: Option<EndpointConfig>,
}

impl Xtp {
    /// Objects made in `mode`, with the default settings.
    pub fn new(mode: Mode) -> Xtp {
        Xtp { mode, client: None, server: None }
    }

    pub(crate) fn client_endpoint(&self) -> EndpointConfig {
        self.client.clone().unwrap_or_else(client_config)
    }

    pub(crate) fn server_endpoint(&self) -> EndpointConfig {
        self.server.clone().unwrap_or_default()
    }

    /// As [`XtpStream::connect`].
    pub fn connect(&self, addr: impl std::net::ToSocketAddrs, port: u16) -> io::Result<XtpStream> {
        XtpStream::open(self.mode.clone(), addr, port, self.client_endpoint(), ContextConfig::stream())
    }

    /// As [`XtpStream::connect_with`] (`ep` replaces the client settings).
    pub fn connect_with(
        &self,
        addr: impl std::net::ToSocketAddrs,
        port: u16,
        ep: EndpointConfig,
        cfg: ContextConfig,
    ) -> io::Result<XtpStream> {
        XtpStream::open(self.mode.clone(), addr, port, ep, cfg)
    }

    /// As [`XtpListener::bind`].
    pub fn bind(&self, addr: impl std::net::ToSocketAddrs, port: u16) -> io::Result<XtpListener> {
        XtpListener::open(self.mode.clone(), addr, port, self.server_endpoint())
    }

    /// As [`send_datagram`].
    pub fn send_datagram(
        &self,
        addr: impl std::net::ToSocketAddrs,
        port: u16,
        data: &[u8],
        acknowledged: bool,
        timeout: std::time::Duration,
    ) -> io::Result<()> {
        datagram::send(self.mode.clone(), self.client_endpoint(), addr, port, data, acknowledged, timeout)
    }

    /// As [`transaction`].
    pub fn transaction(
        &self,
        addr: impl std::net::ToSocketAddrs,
        port: u16,
        request: &[u8],
        timeout: std::time::Duration,
    ) -> io::Result<Vec<u8>> {
        datagram::request(self.mode.clone(), self.client_endpoint(), addr, port, request, timeout)
    }
}

/// The error a context's end turns into (None for a graceful close).
fn close_error(reason: &CloseReason) -> Option<io::Error> {
    (*reason != CloseReason::Graceful).then(|| reason_error(reason))
}

/// A context's end as an `io::Error` whose kind says what happened and whose
/// text is the reason in words; also used by the async API.
pub(crate) fn reason_error(reason: &CloseReason) -> io::Error {
    let kind = match reason {
        CloseReason::Graceful => io::ErrorKind::NotConnected,
        CloseReason::LocalAbort => io::ErrorKind::ConnectionAborted,
        CloseReason::PeerAbort { .. } => io::ErrorKind::ConnectionReset,
        CloseReason::Timeout { .. } => io::ErrorKind::TimedOut,
        CloseReason::Refused { .. } | CloseReason::SpecRefused { .. } => io::ErrorKind::ConnectionRefused,
        CloseReason::NoAnswer { .. } | CloseReason::Unconfirmed { .. } => io::ErrorKind::TimedOut,
        CloseReason::Unvalidated { .. } => io::ErrorKind::ConnectionAborted,
    };
    io::Error::new(kind, reason.to_string())
}

pub(crate) use crate::clock::time_seed;

/// The wildcard address of `peer`'s family, any port: where a client binds.
pub(crate) fn any_local(peer: SocketAddr) -> SocketAddr {
    if peer.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    }
}

/// How long a client waits for any answer from the server before giving up
/// (TCP fails at once with "connection refused"; XTP, having no handshake,
/// would otherwise retry for minutes).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The endpoint settings for a client: the engine's defaults and a connect
/// timeout of [`CONNECT_TIMEOUT`], so connecting to an address where
/// nothing answers ends with "no answer from ADDR after 3 s (is `xpress
/// serve` running there?)" instead of hanging.
pub fn client_config() -> xtp_proto::EndpointConfig {
    xtp_proto::EndpointConfig { connect_timeout: Some(CONNECT_TIMEOUT), ..Default::default() }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what}: timed out"))
}
