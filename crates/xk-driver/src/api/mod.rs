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
//! Threading: there is no hidden I/O thread. Each object owns (or shares,
//! for a listener and the streams it accepted) one [`UdpDriver`], and every
//! blocking call turns that driver until it can complete — so the objects are
//! `!Send` and live on one thread, like a single-threaded event loop. A
//! program wanting parallelism runs one listener per thread (or uses several
//! sockets). Errors are `io::Error`s whose text names what the protocol said:
//! a refusal carries the peer's DIAG text, a timeout says how many bytes the
//! peer acknowledged.

mod datagram;
mod listener;
mod stream;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextId, Event, Service};

pub use datagram::{send_datagram, transaction};
pub use listener::XtpListener;
pub use stream::{Message, XtpStream};

use crate::driver::UdpDriver;

/// How long one turn of the driver may wait before the caller's loop looks
/// again (deadlines and timeouts are checked between turns).
const TURN: Duration = Duration::from_millis(50);

/// What the application has learnt about one context from events.
#[derive(Default)]
struct Status {
    peer_finished: bool,
    closed: Option<CloseReason>,
}

/// The driver of a set of API objects. When the last object is gone and
/// contexts remain (closed but lingering, so that a peer which missed our
/// final acknowledgement still gets it), the driver moves to a background
/// thread that keeps turning it until no context is left — what a kernel
/// does for TCP's TIME_WAIT. Bounded by the longest linger (10 minutes).
struct Linger(Option<UdpDriver>);

impl std::ops::Deref for Linger {
    type Target = UdpDriver;
    fn deref(&self) -> &UdpDriver {
        self.0.as_ref().expect("driver present until drop")
    }
}

impl std::ops::DerefMut for Linger {
    fn deref_mut(&mut self) -> &mut UdpDriver {
        self.0.as_mut().expect("driver present until drop")
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        let Some(mut d) = self.0.take() else { return };
        if d.endpoint().context_count() == 0 {
            return;
        }
        let _ = std::thread::Builder::new().name("xtp-linger".into()).spawn(move || {
            let end = d.now() + Duration::from_secs(600);
            while d.endpoint().context_count() > 0 && d.now() < end {
                if d.turn(TURN).is_err() {
                    return;
                }
                while d.endpoint().poll_event().is_some() {}
            }
        });
    }
}

/// A driver and the events it produced, sorted by context.
struct Shared {
    driver: Linger,
    status: HashMap<ContextId, Status>,
    incoming: VecDeque<(ContextId, SocketAddr, Service)>,
}

type Handle = Rc<RefCell<Shared>>;

impl Shared {
    fn new(driver: UdpDriver) -> Handle {
        Rc::new(RefCell::new(Shared {
            driver: Linger(Some(driver)),
            status: HashMap::new(),
            incoming: VecDeque::new(),
        }))
    }

    fn now(&self) -> Instant {
        self.driver.now()
    }

    /// One turn of the driver, then every event filed by context.
    fn pump(&mut self, max_wait: Duration) -> io::Result<()> {
        self.driver.turn(max_wait)?;
        self.collect();
        Ok(())
    }

    fn collect(&mut self) {
        while let Some(ev) = self.driver.endpoint().poll_event() {
            match ev {
                Event::Incoming { ctx, peer, service, .. } => {
                    self.status.entry(ctx).or_default();
                    self.incoming.push_back((ctx, peer, service));
                }
                Event::PeerFinished { ctx } => self.status.entry(ctx).or_default().peer_finished = true,
                Event::Closed { ctx, reason } => self.status.entry(ctx).or_default().closed = Some(reason),
                Event::Readable { .. } | Event::Acked { .. } | Event::Gap { .. } => {}
            }
        }
    }

    fn status(&self, ctx: ContextId) -> (bool, Option<&CloseReason>) {
        self.status.get(&ctx).map_or((false, None), |s| (s.peer_finished, s.closed.as_ref()))
    }

    /// Takes the next in-order chunk of `ctx`, if any.
    fn read_chunk(&mut self, ctx: ContextId) -> Option<xtp_proto::Chunk> {
        let now = self.now();
        self.driver.endpoint().read(now, ctx)
    }

    fn write(&mut self, ctx: ContextId, data: Bytes, eom: bool, btag: Option<u64>) -> io::Result<()> {
        let now = self.now();
        self.driver.endpoint().write(now, ctx, data, eom, btag).map_err(|e| match e {
            // The caller waits for room (`XtpStream::wait_for_room`) and retries.
            xtp_proto::WriteError::WouldBlock => io::Error::new(io::ErrorKind::WouldBlock, e.to_string()),
            _ => io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("cannot write: the context is closed ({e:?})"),
            ),
        })
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
        CloseReason::Refused { .. } => io::ErrorKind::ConnectionRefused,
        CloseReason::NoAnswer { .. } | CloseReason::Unconfirmed { .. } => io::ErrorKind::TimedOut,
        CloseReason::Unvalidated { .. } => io::ErrorKind::ConnectionAborted,
    };
    io::Error::new(kind, reason.to_string())
}

pub(crate) use crate::clock::time_seed;

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
