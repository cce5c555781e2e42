//! The async API on tokio (feature `tokio`): [`AsyncXtpStream`] implements
//! `tokio::io::AsyncRead` and `AsyncWrite`; [`AsyncXtpListener`] accepts them.
//!
//! One task per socket drives the sans-I/O endpoint through the same
//! [`UdpDriver`] as the blocking API (batched sends with GSO or
//! `sendmmsg`, batched receives with GRO or `recvmmsg`): it flushes what
//! the endpoint has, then waits for the socket to become readable (tokio's
//! readiness of a duplicate of the socket), the endpoint's next timer, or a nudge from an application
//! call, whichever comes first, and takes everything waiting. The endpoint sits
//! behind a mutex shared with the stream handles; nobody holds the lock
//! across an `.await`. A handle that cannot progress registers its waker; the
//! driver task wakes the handles of a context when its events arrive. When
//! every handle is gone and no context is left, the task ends (it lingers as
//! long as closed contexts do, like TCP's TIME_WAIT).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskCx, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{ToSocketAddrs, UdpSocket};
use tokio::sync::Notify;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, ContextId, EndpointConfig, Event};

use crate::api::{reason_error, time_seed};
use crate::clock::Clock;
use crate::driver::{DriverConfig, UdpDriver};

/// Unsent bytes above which `poll_write` waits (see
/// [`xtp_proto::Endpoint::writable`]).
const WRITE_BUFFER: u64 = 4 << 20;

#[derive(Default)]
struct CtxState {
    peer_finished: bool,
    closed: Option<CloseReason>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Handles alive for this context.
    handles: usize,
}

struct State {
    d: UdpDriver,
    ctxs: HashMap<ContextId, CtxState>,
    incoming: VecDeque<(ContextId, SocketAddr)>,
    acceptor: Option<Waker>,
    /// Writers waiting for unsent bytes to leave: woken once transmissions
    /// bring them under the bound (acknowledgements alone would not: during
    /// a recovery the cumulative acknowledgement stands still).
    unsent_waiters: Vec<ContextId>,
    /// Handles alive in total (streams and the listener).
    handles: usize,
}

struct Shared {
    state: Mutex<State>,
    nudge: Notify,
    clock: Clock,
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

/// Binds a driver (the blocking API's, with its batching and offloads).
fn bind(addr: SocketAddr, cfg: EndpointConfig) -> io::Result<UdpDriver> {
    UdpDriver::bind_with(addr, cfg, time_seed(), DriverConfig { offload: true, ..DriverConfig::default() })
}

/// Starts the driver task for a bound driver.
fn spawn(d: UdpDriver) -> io::Result<Arc<Shared>> {
    // The task learns of input through tokio's reactor, on a duplicate of
    // the driver's socket (the same socket: readiness only; every read and
    // write is the driver's own, non-blocking, batched).
    // Tokio wants it non-blocking (the flag is the socket's, shared with
    // the driver, which never blocks here: its reads and writes in this
    // mode all pass MSG_DONTWAIT).
    let dup = std::net::UdpSocket::from(d.input_fd().try_clone_to_owned()?);
    dup.set_nonblocking(true)?;
    let ready = UdpSocket::from_std(dup)?;
    let clock = d.clock();
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            d,
            ctxs: HashMap::new(),
            incoming: VecDeque::new(),
            acceptor: None,
            unsent_waiters: Vec::new(),
            // The creator's reservation, released once its handle exists:
            // on a multi-threaded runtime the driver task may run before
            // `connect` or `bind` has registered anything, and with no
            // handle and no context it would take itself for finished and
            // end — leaving the stream or listener without a driver (found
            // by the FTP tests: a hang at connect, or a passive data
            // listener that never accepted).
            handles: 1,
        }),
        nudge: Notify::new(),
        clock,
    });
    tokio::spawn(drive(ready, shared.clone()));
    Ok(shared)
}

/// Receive batches taken per wake-up before looking at timers and sends
/// again (each batch is up to the driver's `recvmmsg`/GRO size).
const RECV_ROUNDS: usize = 8;

async fn drive(ready: UdpSocket, shared: Arc<Shared>) {
    let mut more = false;
    loop {
        // Send everything queued (batched), then look at the clock.
        let (deadline, done) = {
            let mut st = shared.lock();
            // A send error (a full buffer, an ICMP error) loses datagrams;
            // XTP recovers.
            let _ = st.d.flush();
            wake_unsent_waiters(&mut st);
            (st.d.until_timeout(), st.handles == 0 && st.d.endpoint().context_count() == 0)
        };
        if done {
            return;
        }
        if !more {
            let sleep = deadline.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                _ = ready.readable() => {
                    // Tokio forgets the readiness only when an operation
                    // of its own would block; this one says so at once.
                    // Cleared before the socket is drained below, so a
                    // datagram arriving after it makes it ready again.
                    let _ = ready.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                }
                () = tokio::time::sleep(std::time::Duration::from_nanos(sleep.as_nanos() as u64)) => {}
                () = shared.nudge.notified() => {}
            }
        }
        let mut st = shared.lock();
        // Drain the socket (bounded: sends and timers get their turn).
        more = false;
        for round in 0..RECV_ROUNDS {
            match st.d.poll_input() {
                Ok(0) | Err(_) => break,
                Ok(_) => more = round + 1 == RECV_ROUNDS,
            }
        }
        let now = st.d.now();
        st.d.endpoint().handle_timeout(now);
        dispatch(&mut st);
    }
}

/// Wakes the writers whose unsent bytes have left (and who have room).
fn wake_unsent_waiters(st: &mut State) {
    let State { d, ctxs, unsent_waiters, .. } = st;
    let ep = d.endpoint();
    unsent_waiters.retain(|ctx| {
        if ep.writable(*ctx, WRITE_BUFFER) || !ep.can_write(*ctx) {
            // Room, or waiting on acknowledgements (or closed) now: either
            // way the Acked/Closed dispatch or this wake-up serves it.
            if let Some(w) = ctxs.get_mut(ctx).and_then(|c| c.writer.take()) {
                w.wake();
            }
            false
        } else {
            true
        }
    });
}

/// Files the endpoint's events by context and wakes whoever waits on them.
fn dispatch(st: &mut State) {
    while let Some(ev) = st.d.endpoint().poll_event() {
        let (ctx, wake_all) = match ev {
            Event::Incoming { ctx, peer, .. } => {
                st.ctxs.entry(ctx).or_default();
                st.incoming.push_back((ctx, peer));
                if let Some(w) = st.acceptor.take() {
                    w.wake();
                }
                continue;
            }
            Event::Readable { ctx } | Event::Gap { ctx, .. } => (ctx, false),
            Event::Acked { ctx, .. } => (ctx, true),
            Event::PeerFinished { ctx } => {
                st.ctxs.entry(ctx).or_default().peer_finished = true;
                (ctx, false)
            }
            Event::Closed { ctx, reason } => {
                st.ctxs.entry(ctx).or_default().closed = Some(reason);
                (ctx, true)
            }
        };
        let c = st.ctxs.entry(ctx).or_default();
        if let Some(w) = c.reader.take() {
            w.wake();
        }
        if wake_all && let Some(w) = c.writer.take() {
            w.wake();
        }
    }
}

/// A reliable XTP stream over UDP for tokio.
pub struct AsyncXtpStream {
    shared: Arc<Shared>,
    ctx: ContextId,
    peer: SocketAddr,
    pending: Bytes,
    shut: bool,
}

impl AsyncXtpStream {
    /// Opens a stream to XTP `port` at `addr` (needs a tokio runtime with
    /// I/O and time enabled). No handshake: returns at once.
    pub async fn connect(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpStream> {
        let peer = tokio::net::lookup_host(addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to"))?;
        let local = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let shared = spawn(bind(local.parse().expect("a literal address"), crate::api::client_config())?)?;
        let ctx = {
            let mut st = shared.lock();
            let now = shared.now();
            let ctx = st.d.endpoint().connect(now, peer, port, ContextConfig::stream()).map_err(|e| {
                st.handles -= 1; // no stream: release the reservation
                io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}"))
            });
            let ctx = match ctx {
                Ok(ctx) => ctx,
                Err(e) => {
                    drop(st);
                    shared.nudge.notify_one();
                    return Err(e);
                }
            };
            st.ctxs.entry(ctx).or_default();
            ctx
        };
        let stream = AsyncXtpStream::new(shared.clone(), ctx, peer);
        shared.lock().handles -= 1; // the stream's handle replaces the reservation
        shared.nudge.notify_one();
        Ok(stream)
    }

    fn new(shared: Arc<Shared>, ctx: ContextId, peer: SocketAddr) -> AsyncXtpStream {
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
            let now = this.shared.now();
            // An empty chunk (an empty message's EOM) is no data: a read
            // that returned nothing would be taken for the end of the stream.
            let mut first = st.d.endpoint().read(now, this.ctx);
            while first.as_ref().is_some_and(|c| c.data.is_empty()) {
                first = st.d.endpoint().read(now, this.ctx);
            }
            match first {
                Some(c) => this.pending = c.data,
                None => {
                    let c = st.ctxs.entry(this.ctx).or_default();
                    match &c.closed {
                        Some(CloseReason::Graceful) => return Poll::Ready(Ok(())),
                        Some(r) => return Poll::Ready(Err(reason_error(r))),
                        None if c.peer_finished => return Poll::Ready(Ok(())), // end of stream
                        None => {
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
                match st.d.endpoint().read(now, this.ctx) {
                    Some(c) => this.pending = c.data,
                    None => break,
                }
            }
            // Reading freed window space: let the driver tell the peer.
            drop(st);
            this.shared.nudge.notify_one();
            return Poll::Ready(Ok(()));
        }
        let n = buf.remaining().min(this.pending.len());
        buf.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
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
        if let Some(r) = &st.ctxs.entry(self.ctx).or_default().closed {
            return Poll::Ready(Err(reason_error(r)));
        }
        // Wait while the engine's send buffer is full (woken on Acked; the
        // engine would refuse the write with WouldBlock) or our bound on
        // unsent bytes is reached (woken once they have left).
        if !st.d.endpoint().writable(self.ctx, WRITE_BUFFER) {
            st.ctxs.entry(self.ctx).or_default().writer = Some(cx.waker().clone());
            if st.d.endpoint().can_write(self.ctx) && !st.unsent_waiters.contains(&self.ctx) {
                st.unsent_waiters.push(self.ctx);
            }
            return Poll::Pending;
        }
        let now = self.shared.now();
        let r = st.d.endpoint().write(now, self.ctx, Bytes::copy_from_slice(data), false, None);
        drop(st);
        self.shared.nudge.notify_one();
        Poll::Ready(
            r.map(|()| data.len())
                .map_err(|e| io::Error::new(io::ErrorKind::BrokenPipe, format!("cannot write: {e:?}"))),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        self.shared.nudge.notify_one();
        Poll::Ready(Ok(()))
    }

    /// Closes our sending side and waits until the context has closed
    /// gracefully (everything we wrote acknowledged, the peer finished too).
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<io::Result<()>> {
        let mut st = self.shared.lock();
        if !self.shut {
            let now = self.shared.now();
            st.d.endpoint().close(now, self.ctx);
            drop(st);
            self.shut = true;
            self.shared.nudge.notify_one();
            st = self.shared.lock();
        }
        let c = st.ctxs.entry(self.ctx).or_default();
        match &c.closed {
            Some(CloseReason::Graceful) => Poll::Ready(Ok(())),
            Some(r) => Poll::Ready(Err(reason_error(r))),
            None => {
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
        if !self.shut {
            st.d.endpoint().close(now, self.ctx);
        }
        st.handles -= 1;
        if let Some(c) = st.ctxs.get_mut(&self.ctx) {
            c.handles -= 1;
            if c.handles == 0 {
                st.ctxs.remove(&self.ctx);
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
    /// Binds `addr` (UDP) and listens on XTP `port`.
    pub async fn bind(addr: impl ToSocketAddrs, port: u16) -> io::Result<AsyncXtpListener> {
        let addr = tokio::net::lookup_host(addr)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to bind"))?;
        let d = bind(addr, EndpointConfig::default())?;
        let local = d.local_addr()?;
        let shared = spawn(d)?;
        {
            let mut st = shared.lock();
            // The listener's handle is the creator's reservation; on error
            // it is released so the driver ends.
            if let Err(e) = st.d.endpoint().listen(port, ContextConfig::stream()) {
                st.handles -= 1;
                drop(st);
                shared.nudge.notify_one();
                return Err(io::Error::new(io::ErrorKind::AddrInUse, format!("XTP port {port}: {e:?}")));
            }
        }
        Ok(AsyncXtpListener { shared, local })
    }

    /// The UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next incoming stream.
    pub async fn accept(&self) -> io::Result<(AsyncXtpStream, SocketAddr)> {
        let (ctx, peer) = std::future::poll_fn(|cx| {
            let mut st = self.shared.lock();
            match st.incoming.pop_front() {
                Some(next) => Poll::Ready(next),
                None => {
                    st.acceptor = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        Ok((AsyncXtpStream::new(self.shared.clone(), ctx, peer), peer))
    }
}

impl Drop for AsyncXtpListener {
    fn drop(&mut self) {
        self.shared.lock().handles -= 1;
        self.shared.nudge.notify_one();
    }
}
