//! The async API on tokio (feature `tokio`): [`AsyncXtpStream`] implements
//! `tokio::io::AsyncRead` and `AsyncWrite`; [`AsyncXtpListener`] accepts them.
//!
//! Where the endpoint runs is the deployment [`Mode`], chosen when the
//! object is made — [`Xtp::connect_async`] / [`Xtp::bind_async`] — and
//! invisible afterwards, as in the blocking API; [`AsyncXtpStream::connect`]
//! and [`AsyncXtpListener::bind`] are the integrated mode's.
//!
//! One task per socket (per engine connection in the ring modes) serves the
//! objects made on it:
//!
//! * integrated (`udp.rs`): the task drives the sans-I/O endpoint through
//!   the same [`crate::driver::UdpDriver`] as the blocking API (batched
//!   sends and receives), waiting in tokio's reactor for the socket, the
//!   endpoint's next timer, or a nudge from an application call;
//! * engine thread and daemon (`ring.rs`): the endpoint runs on the engine
//!   thread or in the daemon; calls post control blocks to TN through the
//!   same [`EngineClient`] as the blocking API, and the task waits in
//!   tokio's reactor for the FN ring's doorbell — the eventfd the engine
//!   rings only when the application side has announced a sleep, so one
//!   wake-up per batch of completions — then files what came by context;
//! * simulated (`sim.rs`, [`SimNet`]): the endpoints sit on hosts of the
//!   deterministic simulator, joined by the link model, in virtual time;
//!   one task per simulated network drives every endpoint on it through
//!   the same state, events and wake-ups as the integrated mode.
//!
//! The state sits behind a mutex shared with the handles; nobody holds the
//! lock across an `.await`. A handle that cannot progress registers its
//! waker; whoever takes the events of a context wakes it. When every handle
//! is gone the task ends: integrated, once no context is left (it lingers
//! as long as closed contexts do, like TCP's TIME_WAIT); in the ring modes
//! at once, the engine closing what is left and lingering itself.
//!
//! Registering with a daemon (`Mode::Daemon`) is the blocking API's
//! handshake over its Unix socket, done inside `connect_async` /
//! `bind_async` (bounded: 5 s without an answer is an error).
//!
//! Backpressure, not loss, in every mode: a write waits (its future is
//! pending) while the endpoint's send buffer, the write bound or the TN
//! ring is full; a read returns the engine's read credit as it consumes.
//! A dead engine or daemon fails the pending and the next calls with the
//! mode's error ("xpress daemon at PATH went away"), not a hang.

mod ring;
mod sim;
mod udp;

pub use sim::{SimNet, SimReport};

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskCx, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::ToSocketAddrs;
use tokio::sync::Notify;
use xk_time::Instant;
use xtp_proto::{Chunk, CloseReason, ContextConfig, Endpoint, EndpointConfig};

use crate::api::{Cid, Core, Mode, Xtp, reason_error};
use crate::clock::TimeSource;
use crate::driver::UdpDriver;
use crate::engine::{EngineClient, ToEngine};
use crate::trace::EngineTrace;

/// Unsent bytes above which `poll_write` waits in the integrated mode (see
/// [`xtp_proto::Endpoint::writable`]); the ring modes wait on the engine's
/// write bound instead.
const WRITE_BUFFER: u64 = 4 << 20;

#[derive(Default)]
struct CtxState {
    peer_finished: bool,
    closed: Option<CloseReason>,
    /// The engine refused a block about this context (ring modes).
    failed: Option<String>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Handles alive for this context.
    handles: usize,
}

/// Where the endpoint runs. Once per socket, inside an `Arc`: the size
/// difference costs nothing, and boxing the driver would put an
/// indirection on the integrated path.
#[allow(clippy::large_enum_variant)]
enum Backend {
    /// In the driver task.
    Udp(UdpDriver),
    /// On an engine thread or in a daemon, behind the rings.
    Ring(EngineClient),
    /// On a simulated host, driven by its network's task in virtual time.
    Sim(sim::SimSocket),
}

impl Backend {
    /// The endpoint, where it runs in this process's tasks (integrated
    /// and simulated; None in the ring modes).
    fn local_ep(&mut self) -> Option<&mut Endpoint<EngineTrace>> {
        match self {
            Backend::Udp(d) => Some(d.endpoint()),
            Backend::Sim(s) => Some(&mut s.ep),
            Backend::Ring(_) => None,
        }
    }
}

struct State {
    core: Backend,
    ctxs: HashMap<Cid, CtxState>,
    incoming: VecDeque<(Cid, SocketAddr)>,
    acceptor: Option<Waker>,
    /// Writers waiting for unsent bytes to leave (integrated): woken once
    /// transmissions bring them under the bound (acknowledgements alone
    /// would not: during a recovery the cumulative acknowledgement stands
    /// still).
    unsent_waiters: Vec<Cid>,
    /// Handles alive in total (streams and the listener).
    handles: usize,
    /// The engine has gone (ring modes): why, as every later call says.
    gone: Option<(io::ErrorKind, String)>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the task that drives the endpoint (in the simulated backend,
    /// one notifier for the whole network: its one task drives them all).
    nudge: Arc<Notify>,
    clock: TimeSource,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the endpoint as it was; go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

impl State {
    fn new(core: Backend) -> State {
        State {
            core,
            ctxs: HashMap::new(),
            incoming: VecDeque::new(),
            acceptor: None,
            unsent_waiters: Vec::new(),
            // The creator's reservation, released once its handle exists:
            // on a multi-threaded runtime the driver task may run before
            // `connect` or `bind` has registered anything, and with no
            // handle it would take itself for finished and end — leaving
            // the stream or listener without a driver (found by the FTP
            // tests: a hang at connect, or a passive data listener that
            // never accepted).
            handles: 1,
            gone: None,
        }
    }

    /// Takes what the engine sent (ring modes; integrated, the driver task
    /// does this) and wakes whoever it concerns.
    fn pump(&mut self) {
        ring::pump(self);
    }

    /// Wakes everyone waiting (the engine, or the simulated network, has
    /// gone: each sees the error).
    // The order of the wake-ups does not matter (each waker only schedules).
    #[allow(clippy::iter_over_hash_type)]
    fn wake_all(&mut self) {
        for cs in self.ctxs.values_mut() {
            for w in [cs.reader.take(), cs.writer.take()].into_iter().flatten() {
                w.wake();
            }
        }
        if let Some(w) = self.acceptor.take() {
            w.wake();
        }
    }

    /// The engine's end as the error every call now gets.
    fn gone_error(&self) -> Option<io::Error> {
        self.gone.as_ref().map(|(k, t)| io::Error::new(*k, t.clone()))
    }

    fn read_chunk(&mut self, now: Instant, ctx: Cid) -> Option<Chunk> {
        match (&mut self.core, ctx) {
            (Backend::Ring(c), Cid::Remote(h)) => c.read_chunk(h),
            (b, Cid::Local(id)) => b.local_ep()?.read(now, id),
            _ => None,
        }
    }

    /// Closes `ctx`'s writing side; false if the TN ring is full (try
    /// again once it has room).
    fn try_close(&mut self, now: Instant, ctx: Cid) -> bool {
        match (&mut self.core, ctx) {
            (Backend::Ring(c), Cid::Remote(h)) => c.try_post(ToEngine::Close { ctx: h }).is_ok(),
            (b, Cid::Local(id)) => {
                if let Some(ep) = b.local_ep() {
                    ep.close(now, id);
                }
                true
            }
            _ => true,
        }
    }
}

/// Makes the state of a new socket (or engine connection) in `mode` and
/// starts its task; `local` is where to bind (the daemon's own address is
/// used in the daemon mode).
fn spawn(mode: Mode, local: SocketAddr, ep: EndpointConfig) -> io::Result<Arc<Shared>> {
    match Core::bind(local, ep, mode)? {
        Core::Integrated(l) => {
            let d = l.into_driver().ok_or_else(|| io::Error::other("internal: no driver"))?;
            udp::spawn(d)
        }
        Core::Engine(c) => ring::spawn(c),
    }
}

/// The first address of `addr`.
async fn resolve(addr: impl ToSocketAddrs, what: &str) -> io::Result<SocketAddr> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no address to {what}")))
}

impl Xtp {
    /// As [`AsyncXtpStream::connect`], in this mode (needs a tokio runtime
    /// with I/O and time enabled).
    pub async fn connect_async(&self, addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpStream> {
        let peer = resolve(addr, "connect to").await?;
        let shared = spawn(self.mode.clone(), crate::api::any_local(peer), self.client_endpoint())?;
        open(shared, peer, port)
    }

    /// As [`AsyncXtpListener::bind`], in this mode.
    pub async fn bind_async(&self, addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpListener> {
        let addr = resolve(addr, "bind").await?;
        let shared = spawn(self.mode.clone(), addr, self.server_endpoint())?;
        listener(shared, port).await
    }
}

/// Opens a stream to XTP `port` at `peer` on a fresh socket's state, whose
/// creator's reservation it takes over (every backend).
fn open(shared: Arc<Shared>, peer: SocketAddr, port: u16) -> io::Result<AsyncXtpStream> {
    let opened = {
        let mut st = shared.lock();
        let now = shared.now();
        let r = match &mut st.core {
            // A fresh ring: the post does not wait.
            Backend::Ring(c) => c.connect(peer, port, ContextConfig::stream()).map(Cid::Remote),
            b => match b.local_ep() {
                Some(ep) => ep
                    .connect(now, peer, port, ContextConfig::stream())
                    .map(Cid::Local)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}"))),
                None => Err(io::Error::other("internal: no endpoint")),
            },
        };
        if let Ok(ctx) = r {
            st.ctxs.entry(ctx).or_default();
        }
        r
    };
    let stream = opened.map(|ctx| AsyncXtpStream::new(shared.clone(), ctx, peer));
    shared.lock().handles -= 1; // the stream's handle replaces the reservation
    shared.nudge.notify_one();
    stream
}

/// Listens on XTP `port` on a fresh socket's state, whose creator's
/// reservation becomes the listener's handle (every backend).
async fn listener(shared: Arc<Shared>, port: u16) -> io::Result<AsyncXtpListener> {
    let r = listen(&shared, port).await;
    let local = shared.lock().local_addr();
    match r.and(local) {
        // The listener's handle is the creator's reservation.
        Ok(local) => Ok(AsyncXtpListener { shared, local }),
        Err(e) => {
            // Released so the driver ends.
            shared.lock().handles -= 1;
            shared.nudge.notify_one();
            Err(e)
        }
    }
}

impl State {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.core {
            Backend::Udp(d) => d.local_addr(),
            Backend::Ring(c) => Ok(c.local_addr()),
            Backend::Sim(s) => Ok(s.local),
        }
    }
}

/// Listens on XTP `port` (in the ring modes, waits for the engine's answer).
async fn listen(shared: &Arc<Shared>, port: u16) -> io::Result<()> {
    let refused = |e: String| io::Error::new(io::ErrorKind::AddrInUse, format!("XTP port {port}: {e}"));
    {
        let mut st = shared.lock();
        match &mut st.core {
            // A fresh ring: the post does not wait.
            Backend::Ring(c) => c.post(ToEngine::Listen { port, cfg: ContextConfig::stream() })?,
            b => {
                let ep = b.local_ep().ok_or_else(|| io::Error::other("internal: no endpoint"))?;
                return ep.listen(port, ContextConfig::stream()).map_err(|e| refused(format!("{e:?}")));
            }
        }
    }
    std::future::poll_fn(|cx| {
        let mut st = shared.lock();
        st.pump();
        if let Backend::Ring(c) = &mut st.core
            && let Some(r) = c.listen_answer(port)
        {
            return Poll::Ready(r.map_err(|e| refused(e.to_string())));
        }
        if let Some(e) = st.gone_error() {
            return Poll::Ready(Err(e));
        }
        st.acceptor = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// A reliable XTP stream over UDP for tokio.
pub struct AsyncXtpStream {
    shared: Arc<Shared>,
    ctx: Cid,
    peer: SocketAddr,
    pending: Bytes,
    shut: bool,
}

impl AsyncXtpStream {
    /// Opens a stream to XTP `port` at `addr`, integrated (needs a tokio
    /// runtime with I/O and time enabled). No handshake: returns at once.
    /// Other modes: [`Xtp::connect_async`].
    pub async fn connect(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpStream> {
        Xtp::default().connect_async(addr, port).await
    }

    fn new(shared: Arc<Shared>, ctx: Cid, peer: SocketAddr) -> AsyncXtpStream {
        {
            let mut st = shared.lock();
            st.handles += 1;
            st.ctxs.entry(ctx).or_default().handles += 1;
        }
        AsyncXtpStream { shared, ctx, peer, pending: Bytes::new(), shut: false }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The rings' wake-up and backpressure counters (None in the
    /// integrated mode).
    pub fn ring_stats(&self) -> Option<crate::engine::RingStats> {
        match &self.shared.lock().core {
            Backend::Udp(_) | Backend::Sim(_) => None,
            Backend::Ring(c) => Some(c.stats()),
        }
    }
}

impl AsyncRead for AsyncXtpStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskCx<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pending.is_empty() {
            let mut st = this.shared.lock();
            st.pump();
            let now = this.shared.now();
            // An empty chunk (an empty message's EOM) is no data: a read
            // that returned nothing would be taken for the end of the stream.
            let mut first = st.read_chunk(now, this.ctx);
            while first.as_ref().is_some_and(|c| c.data.is_empty()) {
                first = st.read_chunk(now, this.ctx);
            }
            match first {
                Some(c) => this.pending = c.data,
                None => {
                    let gone = st.gone_error();
                    let c = st.ctxs.entry(this.ctx).or_default();
                    match &c.closed {
                        Some(CloseReason::Graceful) => return Poll::Ready(Ok(())),
                        Some(r) => return Poll::Ready(Err(reason_error(r))),
                        None if c.peer_finished => return Poll::Ready(Ok(())), // end of stream
                        None => {
                            if let Some(f) = &c.failed {
                                return Poll::Ready(Err(refused(f)));
                            }
                            if let Some(e) = gone {
                                return Poll::Ready(Err(e));
                            }
                            c.reader = Some(cx.waker().clone());
                            return Poll::Pending;
                        }
                    }
                }
            }
            // Fill the caller's buffer with every chunk already here, not
            // one packet's worth per call: a copy loop above (FTP's file
            // writes) then makes one write per buffer, not one per packet,
            // and the driver is nudged once per read, not once per chunk.
            loop {
                let n = buf.remaining().min(this.pending.len());
                buf.put_slice(&this.pending.split_to(n));
                if buf.remaining() == 0 {
                    break;
                }
                match st.read_chunk(now, this.ctx) {
                    Some(c) => this.pending = c.data,
                    None => break,
                }
            }
            // Reading freed window space: let the driver tell the peer
            // (the ring modes returned read credit to the engine already).
            let local = !matches!(st.core, Backend::Ring(_));
            drop(st);
            if local {
                this.shared.nudge.notify_one();
            }
            return Poll::Ready(Ok(()));
        }
        let n = buf.remaining().min(this.pending.len());
        buf.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

/// The engine's refusal of a block about a context, as an error.
fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("the XTP engine refused: {why}"))
}

impl AsyncWrite for AsyncXtpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut TaskCx<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.shut {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "write after shutdown")));
        }
        let mut st = self.shared.lock();
        st.pump();
        let ctx = self.ctx;
        {
            let c = st.ctxs.entry(ctx).or_default();
            if let Some(r) = &c.closed {
                return Poll::Ready(Err(reason_error(r)));
            }
            if let Some(f) = &c.failed {
                return Poll::Ready(Err(refused(f)));
            }
        }
        if let Some(e) = st.gone_error() {
            return Poll::Ready(Err(e));
        }
        let State { core, ctxs, unsent_waiters, .. } = &mut *st;
        match (core, ctx) {
            (b @ (Backend::Udp(_) | Backend::Sim(_)), Cid::Local(id)) => {
                let Some(ep) = b.local_ep() else { unreachable!("a local backend") };
                // Wait while the engine's send buffer is full (woken on
                // Acked; the engine would refuse the write with WouldBlock)
                // or our bound on unsent bytes is reached (woken once they
                // have left).
                if !ep.writable(id, WRITE_BUFFER) {
                    ctxs.entry(ctx).or_default().writer = Some(cx.waker().clone());
                    if ep.can_write(id) && !unsent_waiters.contains(&ctx) {
                        unsent_waiters.push(ctx);
                    }
                    return Poll::Pending;
                }
                let now = self.shared.now();
                let r = ep.write(now, id, Bytes::copy_from_slice(data), false, None);
                drop(st);
                self.shared.nudge.notify_one();
                Poll::Ready(
                    r.map(|()| data.len()).map_err(|e| {
                        io::Error::new(io::ErrorKind::BrokenPipe, format!("cannot write: {e:?}"))
                    }),
                )
            }
            (Backend::Ring(c), Cid::Remote(h)) => {
                // One block at a time (the daemon's blocks are at most a
                // quarter ring), within the write bound: woken by the
                // engine's Acked or by room in TN.
                let n = data.len().min(c.max_payload());
                if !c.has_room(h) || !c.try_write(h, &data[..n]) {
                    ctxs.entry(ctx).or_default().writer = Some(cx.waker().clone());
                    drop(st);
                    // The task may sleep without asking for TN room: tell it.
                    self.shared.nudge.notify_one();
                    return Poll::Pending;
                }
                Poll::Ready(Ok(n))
            }
            _ => Poll::Ready(Err(io::Error::other("internal: a context of the other deployment mode"))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        self.shared.nudge.notify_one();
        Poll::Ready(Ok(()))
    }

    /// Closes our sending side and waits until the context has closed
    /// gracefully (everything we wrote acknowledged, the peer finished too).
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        let mut st = self.shared.lock();
        st.pump();
        if !self.shut {
            let now = self.shared.now();
            if !st.try_close(now, self.ctx) {
                // TN full: the task wakes us when it has room.
                st.ctxs.entry(self.ctx).or_default().writer = Some(cx.waker().clone());
                drop(st);
                self.shared.nudge.notify_one();
                return Poll::Pending;
            }
            drop(st);
            self.shut = true;
            self.shared.nudge.notify_one();
            st = self.shared.lock();
        }
        let gone = st.gone_error();
        let c = st.ctxs.entry(self.ctx).or_default();
        match &c.closed {
            Some(CloseReason::Graceful) => Poll::Ready(Ok(())),
            Some(r) => Poll::Ready(Err(reason_error(r))),
            None => {
                if let Some(f) = &c.failed {
                    return Poll::Ready(Err(refused(f)));
                }
                if let Some(e) = gone {
                    return Poll::Ready(Err(e));
                }
                c.writer = Some(cx.waker().clone());
                // The peer's finish can also be what we wait for.
                c.reader = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for AsyncXtpStream {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        if !self.shut && !st.try_close(now, self.ctx) {
            // TN full: wait for room here (the engine empties TN by
            // itself; `post` takes FN meanwhile, and fails only if the
            // engine is gone — then there is nothing left to close).
            if let (Backend::Ring(c), Cid::Remote(h)) = (&mut st.core, self.ctx) {
                let _ = c.post(ToEngine::Close { ctx: h });
            }
        }
        st.handles -= 1;
        if let Some(c) = st.ctxs.get_mut(&self.ctx) {
            c.handles -= 1;
            if c.handles == 0 {
                st.ctxs.remove(&self.ctx);
                if let (Backend::Ring(c), Cid::Remote(h)) = (&mut st.core, self.ctx) {
                    c.forget(h);
                }
            }
        }
        drop(st);
        self.shared.nudge.notify_one();
    }
}

/// Accepts XTP streams on a UDP address and XTP port, for tokio.
pub struct AsyncXtpListener {
    shared: Arc<Shared>,
    local: SocketAddr,
}

impl AsyncXtpListener {
    /// Binds `addr` (UDP) and listens on XTP `port`, integrated. Other
    /// modes: [`Xtp::bind_async`].
    pub async fn bind(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpListener> {
        Xtp::default().bind_async(addr, port).await
    }

    /// The UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next incoming stream.
    pub async fn accept(&self) -> io::Result<(AsyncXtpStream, SocketAddr)> {
        let (ctx, peer) = std::future::poll_fn(|cx| {
            let mut st = self.shared.lock();
            st.pump();
            match st.incoming.pop_front() {
                Some(next) => Poll::Ready(Ok(next)),
                None => {
                    if let Some(e) = st.gone_error() {
                        return Poll::Ready(Err(e));
                    }
                    st.acceptor = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await?;
        Ok((AsyncXtpStream::new(self.shared.clone(), ctx, peer), peer))
    }
}

impl Drop for AsyncXtpListener {
    fn drop(&mut self) {
        self.shared.lock().handles -= 1;
        self.shared.nudge.notify_one();
    }
}
