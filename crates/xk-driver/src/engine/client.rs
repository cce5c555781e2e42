//! The application's side of the engine thread: posts blocks, takes
//! completions, and keeps per context what the blocking API asks about —
//! delivered chunks not yet read, bytes written and acknowledged — so that
//! reads and the write bound need no trip to the engine.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
#[cfg(feature = "tokio")]
use std::os::fd::BorrowedFd;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{Chunk, CloseReason, ContextConfig, Service};

use super::EngineConfig;
use super::block::{BlockError, CtxHandle, FromEngine, ToEngine};
use super::ring::{Link, RingStats};
use crate::clock::Clock;

/// The application's side of a ring pair, as [`EngineClient`] uses it: the
/// engine thread's in-process rings, or a daemon's shared-memory rings.
pub(crate) trait AppLink {
    /// Posts a block; hands it back when TN is full.
    fn try_send(&mut self, b: ToEngine, urgent: bool) -> Result<(), ToEngine>;
    /// Takes a block from FN, if one is waiting.
    fn try_recv(&mut self) -> Option<FromEngine>;
    /// Whether a block waits in FN.
    fn has_input(&self) -> bool;
    /// Whether TN is full.
    fn is_full(&self) -> bool;
    /// The engine has ended (or the daemon went away).
    fn peer_gone(&self) -> bool;
    /// Sleeps until FN has a block (`data`; with `urgent_only`, an urgent
    /// one), TN has room (`space`), or `timeout` passes.
    fn park(&mut self, data: bool, urgent_only: bool, space: bool, timeout: Duration) -> io::Result<()>;
    /// Wake-up counters of both sides.
    fn stats(&self) -> RingStats;
    /// The error a call gets once the engine is gone.
    fn gone_error(&self) -> io::Error;
    /// Largest payload one block may carry (larger writes are split).
    fn max_payload(&self) -> usize;
    /// Whether payload is copied to cross (the daemon's rings): then a
    /// write is best posted from the caller's slice
    /// ([`AppLink::try_send_write`]), not from a `Bytes` made for it.
    fn copies_payload(&self) -> bool {
        false
    }
    /// Posts a `Write` block whose payload is copied from `data`; false
    /// when TN is full. (The in-process ring needs a `Bytes`, made here.)
    fn try_send_write(&mut self, ctx: CtxHandle, data: &[u8], eom: bool, btag: Option<u64>) -> bool {
        self.try_send(ToEngine::Write { ctx, data: Bytes::copy_from_slice(data), eom, btag }, true).is_ok()
    }
    /// The eventfd this side sleeps on (the async API waits for it in
    /// tokio's reactor instead of calling `park`).
    #[cfg(feature = "tokio")]
    fn bell_fd(&self) -> BorrowedFd<'_>;
    /// A descriptor that becomes readable when the engine goes away, if
    /// `peer_gone` needs a look at one (the daemon's registration socket).
    #[cfg(feature = "tokio")]
    fn gone_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// `park` in two halves, for a caller that waits for `bell_fd` itself:
    /// announces a sleep for FN data (and TN room if `space`); false if it
    /// must not sleep after all. An announced sleep ends with `disarm`.
    #[cfg(feature = "tokio")]
    fn arm(&mut self, space: bool) -> bool;
    /// Ends a sleep announced by `arm` (clears it, empties the eventfd).
    #[cfg(feature = "tokio")]
    fn disarm(&mut self);
    /// Whether the engine has gone, looking at `gone_fd` now.
    #[cfg(feature = "tokio")]
    fn look_gone(&self) -> bool {
        self.peer_gone()
    }
}

impl AppLink for Link<ToEngine, FromEngine> {
    fn try_send(&mut self, b: ToEngine, urgent: bool) -> Result<(), ToEngine> {
        Link::try_send(self, b, urgent)
    }
    fn try_recv(&mut self) -> Option<FromEngine> {
        Link::try_recv(self)
    }
    fn has_input(&self) -> bool {
        Link::has_input(self)
    }
    fn is_full(&self) -> bool {
        Link::is_full(self)
    }
    fn peer_gone(&self) -> bool {
        Link::peer_gone(self)
    }
    fn park(&mut self, data: bool, urgent_only: bool, space: bool, timeout: Duration) -> io::Result<()> {
        Link::park(self, data, urgent_only, space, None, Some(timeout)).map(|_| ())
    }
    fn stats(&self) -> RingStats {
        Link::stats(self)
    }
    fn gone_error(&self) -> io::Error {
        io::Error::new(io::ErrorKind::BrokenPipe, "the XTP engine thread has ended (socket error)")
    }
    fn max_payload(&self) -> usize {
        usize::MAX
    }
    #[cfg(feature = "tokio")]
    fn bell_fd(&self) -> BorrowedFd<'_> {
        Link::bell_fd(self)
    }
    #[cfg(feature = "tokio")]
    fn arm(&mut self, space: bool) -> bool {
        Link::arm(self, space)
    }
    #[cfg(feature = "tokio")]
    fn disarm(&mut self) {
        Link::disarm(self)
    }
}

/// Longest single sleep while waiting for ring space (the engine's end is
/// checked between sleeps).
const SPACE_WAIT: Duration = Duration::from_millis(50);

/// What the application learns from FN besides data and acknowledgements.
#[derive(Debug)]
pub enum Notice {
    /// A listener accepted a context.
    Incoming {
        /// The context.
        ctx: CtxHandle,
        /// Who opened it.
        peer: SocketAddr,
        /// Its service.
        service: Service,
    },
    /// The peer closed its writing side (all its data is delivered).
    PeerFinished {
        /// The context.
        ctx: CtxHandle,
    },
    /// The context is over (all its data is delivered).
    Closed {
        /// The context.
        ctx: CtxHandle,
        /// Why.
        reason: CloseReason,
    },
    /// The engine refused a block about `ctx`.
    Failed {
        /// The context.
        ctx: CtxHandle,
        /// Why.
        error: BlockError,
    },
}

/// Per context: what was delivered and not read, and the write accounting.
#[derive(Default)]
struct Mirror {
    chunks: VecDeque<Chunk>,
    /// Bytes posted in `Write` blocks.
    posted: u64,
    /// Bytes the engine reported acknowledged.
    acked: u64,
    /// Bytes read and not yet returned as credit.
    consumed: u64,
    /// `Closed` arrived: no credit to return any more.
    ended: bool,
}

/// The application's end of an engine thread or of a daemon.
pub struct EngineClient {
    link: Box<dyn AppLink + Send>,
    clock: Clock,
    local: SocketAddr,
    cfg: EngineConfig,
    next_handle: u64,
    ctxs: HashMap<CtxHandle, Mirror>,
    notices: VecDeque<Notice>,
    listening: VecDeque<(u16, Result<(), String>)>,
}

impl EngineClient {
    pub(crate) fn new(link: Box<dyn AppLink + Send>, local: SocketAddr, cfg: EngineConfig) -> Self {
        EngineClient {
            link,
            clock: Clock::new(),
            local,
            cfg,
            next_handle: 1,
            ctxs: HashMap::new(),
            notices: VecDeque::new(),
            listening: VecDeque::new(),
        }
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Now, on this side's clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The settings the engine runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Wake-up counters of both sides.
    pub fn stats(&self) -> RingStats {
        self.link.stats()
    }

    /// Posts a block, waiting while the TN ring is full (backpressure: the
    /// block is never dropped). Fails only if the engine has ended.
    pub fn post(&mut self, block: ToEngine) -> io::Result<()> {
        let mut block = Some(block);
        self.post_with(|link| {
            let Some(b) = block.take() else { return true };
            match link.try_send(b, true) {
                Ok(()) => true,
                Err(b) => {
                    block = Some(b);
                    false
                }
            }
        })
    }

    /// Makes `attempt` post until it succeeds (true), waiting for TN room
    /// in between. Fails only if the engine has ended.
    fn post_with(&mut self, mut attempt: impl FnMut(&mut (dyn AppLink + Send)) -> bool) -> io::Result<()> {
        loop {
            if attempt(&mut *self.link) {
                return Ok(());
            }
            if self.link.peer_gone() {
                return Err(self.link.gone_error());
            }
            // Take what the engine sent meanwhile: it stops reading TN
            // while its blocks for us pile up (`serve::BACKLOG_PAUSE`).
            self.collect();
            if self.cfg.busy_poll {
                std::hint::spin_loop();
            } else {
                self.link.park(true, false, true, SPACE_WAIT)?;
            }
        }
    }

    /// Posts a block if the TN ring has room; hands it back otherwise (the
    /// non-blocking form: the caller's `WouldBlock`).
    pub fn try_post(&mut self, block: ToEngine) -> Result<(), ToEngine> {
        self.link.try_send(block, true)
    }

    /// Whether the TN ring is full (a post would wait).
    pub fn is_full(&self) -> bool {
        self.link.is_full()
    }

    fn new_handle(&mut self) -> CtxHandle {
        let h = CtxHandle(self.next_handle);
        self.next_handle += 1;
        h
    }

    /// Opens a context. Returns at once with its handle; a refusal arrives
    /// as [`Notice::Failed`].
    pub fn connect(&mut self, peer: SocketAddr, port: u16, cfg: ContextConfig) -> io::Result<CtxHandle> {
        let ctx = self.new_handle();
        self.ctxs.insert(ctx, Mirror::default());
        self.post(ToEngine::Connect { ctx, peer, port, cfg })?;
        Ok(ctx)
    }

    /// Sends one datagram (its context ends by itself).
    pub fn send_datagram(
        &mut self,
        peer: SocketAddr,
        port: u16,
        data: Bytes,
        acknowledged: bool,
    ) -> io::Result<CtxHandle> {
        // One datagram is one block: a larger one cannot cross the ring
        // (the daemon's ring would take it as a broken link).
        let max = self.link.max_payload();
        if data.len() > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a datagram of {} bytes does not fit the ring's {max}-byte blocks", data.len()),
            ));
        }
        let ctx = self.new_handle();
        self.ctxs.insert(ctx, Mirror::default());
        self.post(ToEngine::Datagram { ctx, peer, port, data, acknowledged })?;
        Ok(ctx)
    }

    /// Listens on XTP `port`; waits for the engine's answer.
    pub fn listen(&mut self, port: u16, cfg: ContextConfig) -> io::Result<()> {
        self.post(ToEngine::Listen { port, cfg })?;
        loop {
            if let Some(r) = self.listen_answer(port) {
                return r;
            }
            self.wait(SPACE_WAIT)?;
        }
    }

    /// The engine's answer to a `Listen` on `port`, if it has come (taken
    /// by [`EngineClient::collect`]).
    pub(crate) fn listen_answer(&mut self, port: u16) -> Option<io::Result<()>> {
        let i = self.listening.iter().position(|(p, _)| *p == port)?;
        let (_, r) = self.listening.remove(i)?;
        Some(r.map_err(|e| io::Error::new(io::ErrorKind::AddrInUse, e)))
    }

    /// Posts a write (no copy in the engine-thread mode: `data` crosses
    /// the ring; one into the shared segment in the daemon mode). A write
    /// larger than a block may carry goes as several blocks, the EOM on the
    /// last and the BTAG on the first; before each, it waits until the
    /// context's unacknowledged bytes are under the write bound — the
    /// daemon refuses a block beyond that (it holds what waits for the
    /// network on the client's behalf), so a large write waits here instead.
    pub fn write(&mut self, ctx: CtxHandle, data: Bytes, eom: bool, btag: Option<u64>) -> io::Result<()> {
        self.write_until(ctx, data, eom, btag, None)
    }

    /// As [`EngineClient::write`], giving up (`TimedOut`) if waiting for
    /// acknowledgements between blocks lasts past `deadline`.
    pub fn write_until(
        &mut self,
        ctx: CtxHandle,
        data: Bytes,
        eom: bool,
        btag: Option<u64>,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        if self.link.copies_payload() {
            // Copied into the ring anyway, in blocks of the ring's size.
            return self.write_slice_until(ctx, &data, eom, btag, deadline);
        }
        // In process: the block carries `data` itself, whatever its size
        // (nothing to split; the API keeps within the write bound).
        if let Some(m) = self.ctxs.get_mut(&ctx) {
            m.posted += data.len() as u64;
        }
        self.post(ToEngine::Write { ctx, data, eom, btag })
    }

    /// As [`EngineClient::write_until`], from the caller's slice. In the
    /// daemon mode the bytes are copied once, into the ring — the copy the
    /// mode adds replaces the one into a `Bytes` the API would otherwise
    /// make, so a write costs the daemon mode no copy more than integrated
    /// on this side; in the engine-thread mode they are copied into a
    /// `Bytes` that crosses the ring as it is.
    pub fn write_slice_until(
        &mut self,
        ctx: CtxHandle,
        data: &[u8],
        eom: bool,
        btag: Option<u64>,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        if !self.link.copies_payload() {
            return self.write_until(ctx, Bytes::copy_from_slice(data), eom, btag, deadline);
        }
        let max = self.link.max_payload().max(1);
        let (mut rest, mut btag) = (data, btag);
        loop {
            let (piece, tail) = rest.split_at(rest.len().min(max));
            let last = tail.is_empty();
            self.wait_for_bound(ctx, deadline)?;
            if let Some(m) = self.ctxs.get_mut(&ctx) {
                m.posted += piece.len() as u64;
            }
            let (e, b) = (eom && last, btag.take());
            self.post_with(|link| link.try_send_write(ctx, piece, e, b))?;
            if last {
                return Ok(());
            }
            rest = tail;
        }
    }

    /// Waits until `ctx` has fewer unacknowledged bytes than the bound (or
    /// is unknown here: the engine answers that).
    fn wait_for_bound(&mut self, ctx: CtxHandle, deadline: Option<Instant>) -> io::Result<()> {
        while let Some(m) = self.ctxs.get(&ctx) {
            if m.posted - m.acked.min(m.posted) < self.cfg.write_bound {
                break;
            }
            if m.ended {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the context closed during a write"));
            }
            if deadline.is_some_and(|d| self.clock.now() >= d) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "write: timed out waiting for acknowledgements (part of the write was sent)",
                ));
            }
            self.wait(SPACE_WAIT)?;
        }
        Ok(())
    }

    /// Whether a write on `ctx` stays within the write bound.
    pub fn has_room(&self, ctx: CtxHandle) -> bool {
        self.ctxs.get(&ctx).is_some_and(|m| m.posted - m.acked.min(m.posted) < self.cfg.write_bound)
    }

    /// Bytes written on `ctx` and not yet reported acknowledged.
    pub fn unacked_bytes(&self, ctx: CtxHandle) -> u64 {
        self.ctxs.get(&ctx).map_or(0, |m| m.posted.saturating_sub(m.acked))
    }

    /// Takes the next delivered chunk of `ctx`, returning read credit to the
    /// engine a quarter of the credit at a time.
    pub fn read_chunk(&mut self, ctx: CtxHandle) -> Option<Chunk> {
        let m = self.ctxs.get_mut(&ctx)?;
        let c = m.chunks.pop_front()?;
        m.consumed += c.data.len() as u64;
        if !m.ended && m.consumed >= (self.cfg.read_credit / 4).max(1) {
            let bytes = std::mem::take(&mut m.consumed);
            // A full ring: keep the credit for the next read (no waiting
            // inside a read).
            if let Err(ToEngine::Credit { bytes, .. }) =
                self.link.try_send(ToEngine::Credit { ctx, bytes }, true)
                && let Some(m) = self.ctxs.get_mut(&ctx)
            {
                m.consumed += bytes;
            }
        }
        Some(c)
    }

    /// Closes `ctx`'s writing side (behind the writes already posted).
    pub fn close(&mut self, ctx: CtxHandle) -> io::Result<()> {
        self.post(ToEngine::Close { ctx })
    }

    /// Aborts `ctx`.
    pub fn abort(&mut self, ctx: CtxHandle) -> io::Result<()> {
        self.post(ToEngine::Abort { ctx })
    }

    /// Forgets `ctx` (its object is gone; data still arriving is dropped).
    pub fn forget(&mut self, ctx: CtxHandle) {
        self.ctxs.remove(&ctx);
    }

    /// The next notice, if any (call [`EngineClient::collect`] or
    /// [`EngineClient::wait`] first).
    pub fn next_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// Waits up to `max` for blocks from the engine (spinning in busy-poll
    /// mode, sleeping on the doorbell otherwise), then takes them all.
    /// Fails if the engine has ended and left nothing to take.
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        self.wait_for(max, false)
    }

    /// As [`EngineClient::wait`]; with `message_end`, a sleeping caller is
    /// woken only by the end of a message (or any other block but a
    /// message's middle) — one wake-up per message, not per chunk.
    pub fn wait_for(&mut self, max: Duration, message_end: bool) -> io::Result<()> {
        // Notices taken while posting (`post` and a write's wait for the
        // bound collect FN) are news already: no sleep before they are seen.
        if !self.notices.is_empty() {
            self.collect();
            return Ok(());
        }
        if !self.link.has_input() {
            if self.cfg.busy_poll {
                let end = self.clock.now() + max;
                while !self.link.has_input() && !self.link.peer_gone() && self.clock.now() < end {
                    // Yield, not a pure spin: the engine thread and the
                    // peer may need this core (the engine is the side
                    // that must not sleep; it polls the socket).
                    std::thread::yield_now();
                }
            } else {
                self.link.park(true, message_end, false, max)?;
            }
        }
        if !self.link.has_input() && self.link.peer_gone() {
            return Err(self.link.gone_error());
        }
        self.collect();
        Ok(())
    }

    /// Takes every block waiting in FN: data and acknowledgements go to
    /// their contexts, the rest to the notices.
    pub fn collect(&mut self) {
        while let Some(b) = self.link.try_recv() {
            match b {
                FromEngine::Data { ctx, seq, data, eom, btag } => {
                    if let Some(m) = self.ctxs.get_mut(&ctx) {
                        m.chunks.push_back(Chunk { seq, data, eom, btag });
                    }
                }
                FromEngine::Acked { ctx, bytes } => {
                    if let Some(m) = self.ctxs.get_mut(&ctx) {
                        m.acked = m.acked.max(bytes);
                    }
                }
                FromEngine::Incoming { ctx, peer, service, .. } => {
                    self.ctxs.insert(ctx, Mirror::default());
                    self.notices.push_back(Notice::Incoming { ctx, peer, service });
                }
                FromEngine::PeerFinished { ctx } => self.notices.push_back(Notice::PeerFinished { ctx }),
                FromEngine::Closed { ctx, reason } => {
                    if let Some(m) = self.ctxs.get_mut(&ctx) {
                        m.ended = true;
                    }
                    self.notices.push_back(Notice::Closed { ctx, reason });
                }
                FromEngine::Failed { ctx, error } => self.notices.push_back(Notice::Failed { ctx, error }),
                FromEngine::Listening { port, result } => self.listening.push_back((port, result)),
            }
        }
    }
}

/// What the async API ([`crate::aio`]) needs beyond the blocking API's calls.
#[cfg(feature = "tokio")]
impl EngineClient {
    /// Posts one `Write` block of `data` if the TN ring has room, counting
    /// it against the write bound; false (nothing posted) otherwise. The
    /// caller keeps within [`EngineClient::has_room`] and
    /// [`EngineClient::max_payload`] (the non-blocking form of
    /// [`EngineClient::write_slice_until`], for the async API; one copy of
    /// `data` either way: into the daemon's ring, or into a `Bytes`).
    pub(crate) fn try_write(&mut self, ctx: CtxHandle, data: &[u8]) -> bool {
        if !self.link.try_send_write(ctx, data, false, None) {
            return false;
        }
        if let Some(m) = self.ctxs.get_mut(&ctx) {
            m.posted += data.len() as u64;
        }
        true
    }

    /// Largest payload of one block (a larger write goes as several).
    pub(crate) fn max_payload(&self) -> usize {
        self.link.max_payload().max(1)
    }

    /// Whether a delivered chunk of `ctx` waits to be read.
    pub(crate) fn has_chunk(&self, ctx: CtxHandle) -> bool {
        self.ctxs.get(&ctx).is_some_and(|m| !m.chunks.is_empty())
    }

    /// Whether a block waits in FN.
    pub(crate) fn has_input(&self) -> bool {
        self.link.has_input()
    }

    /// Whether the engine has ended (or the daemon went away).
    pub(crate) fn peer_gone(&self) -> bool {
        self.link.peer_gone()
    }

    /// The error a call gets once the engine is gone.
    pub(crate) fn gone_error(&self) -> io::Error {
        self.link.gone_error()
    }

    /// See [`AppLink::bell_fd`].
    pub(crate) fn bell_fd(&self) -> BorrowedFd<'_> {
        self.link.bell_fd()
    }

    /// See [`AppLink::gone_fd`].
    pub(crate) fn gone_fd(&self) -> Option<BorrowedFd<'_>> {
        self.link.gone_fd()
    }

    /// See [`AppLink::arm`].
    pub(crate) fn arm(&mut self, space: bool) -> bool {
        self.link.arm(space)
    }

    /// See [`AppLink::disarm`].
    pub(crate) fn disarm(&mut self) {
        self.link.disarm()
    }

    /// See [`AppLink::look_gone`].
    pub(crate) fn look_gone(&self) -> bool {
        self.link.look_gone()
    }
}
