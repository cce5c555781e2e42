//! The engine: one [`Driver`] serving one or more sessions, each a pair of
//! rings (TN in, FN out) behind a [`Port`]. The engine thread serves one
//! session (its application, through in-process rings); the daemon serves
//! one per client process (through shared-memory rings). The loop that
//! turns it — when to sleep and on what — belongs to each ([`super::thread`],
//! `crate::daemon`); this file is what they share.
//!
//! Each pass of a loop: [`Engine::apply_posted`] (at most a ring's worth
//! per session, so a flood of writes cannot starve the socket),
//! [`Engine::after_apply`] (send what the endpoint has, turn its events
//! into FN blocks), then wait on the socket, the doorbells and
//! [`Engine::sleep_for`].
//!
//! What the engine promises each session:
//! * nothing posted is dropped: a write the endpoint cannot take yet (its
//!   send buffer is full) waits in the context's queue, in order, and a
//!   `Close` waits behind it;
//! * a block naming a context the session does not have — never opened,
//!   closed, or another session's — is answered with
//!   [`FromEngine::Failed`], and nothing else happens: handles are per
//!   session, so one session cannot even name another's contexts;
//! * data is delivered only up to the session's read credit, so an
//!   application that stops reading closes the peer's window instead of
//!   filling memory; the rest of a context's data is delivered before its
//!   `PeerFinished` or `Closed` block regardless of credit (it is bounded by
//!   the context's receive buffer);
//! * an FN block that does not fit waits in the session's backlog, in
//!   order; a session with [`BACKLOG_PAUSE`] blocks waiting is not read
//!   from until its application takes some.
//!
//! What a daemon's client (which may be hostile) can make the engine hold
//! is bounded per context: data delivered and not yet read is at most the
//! read credit plus one chunk (a `Credit` block cannot raise the credit
//! above [`EngineConfig::read_credit`]), plus what is left when the peer
//! finishes or the context closes (bounded by the context's receive
//! buffer); writes waiting for the endpoint are at most the write bound
//! plus one block (a `Write` beyond is refused with
//! [`BlockError::OverWriteBound`] and the context aborted — the client
//! library waits for acknowledgements instead). The engine thread's own
//! application is this process and is not checked (its blocks carry
//! references, not copies). A paused session's blocks do not count as
//! input, so the loops sleep (for FN room) instead of spinning.
//!
//! Acknowledgements to the peer: like [`Driver::turn`], the engine does not
//! send right after delivering data — the application's answer, if it
//! comes within [`super::EngineConfig::reply_hold`], leaves in the same
//! system call as the status reply (one wake-up at the peer, not two).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::os::fd::BorrowedFd;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextId, Event, WriteError};

use super::EngineConfig;
use super::block::{BlockError, CtxHandle, FromEngine, ToEngine};
use crate::driver::Driver;
use crate::trace;
use crate::transport::Transport;

/// Longest blocking wait, so that a loop looks around regularly.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(50);

/// One session's rings as the engine sees them.
pub(crate) trait Port {
    /// The next posted block; `Err` for a block that could not be read
    /// (refused to the session, with the context it named if known).
    fn try_recv(&mut self) -> Option<Result<ToEngine, (CtxHandle, BlockError)>>;
    /// Sends a block; hands it back when FN is full.
    fn try_send(&mut self, b: FromEngine, urgent: bool) -> Result<(), FromEngine>;
    /// Whether a block is waiting in TN.
    fn has_input(&self) -> bool;
    /// The session's application has gone (or broke its rings).
    fn peer_gone(&self) -> bool;
    /// Wakes the application whatever it waits for (FN is full).
    fn nudge(&self);
    /// The largest payload of one `Write` block an honest application
    /// sends (it splits larger writes); `u64::MAX`: not checked.
    fn max_payload(&self) -> u64;
}

/// A session whose FN backlog holds this many blocks is not read from
/// until the application has taken some: every TN block may be answered
/// by an FN block (a refusal, at least), so a client that posts without
/// ever reading FN would otherwise grow the backlog without bound. The
/// client library takes FN blocks while it waits for TN room, so an
/// honest client is only slowed.
const BACKLOG_PAUSE: usize = 1024;

/// Which session: the engine thread's is 0; the daemon numbers its clients.
pub(crate) type SessionId = u64;

/// A write the endpoint could not take yet.
struct Queued {
    data: Bytes,
    eom: bool,
    btag: Option<u64>,
    /// The ring block's journey (the monitor's; 0 when not recording).
    journey: u64,
}

/// The engine's view of one context.
struct Ctx {
    session: SessionId,
    handle: CtxHandle,
    /// Bytes the engine may still deliver.
    credit: u64,
    /// Writes waiting for room in the endpoint, in order.
    queued: VecDeque<Queued>,
    /// `Close` posted behind the queued writes.
    close_queued: bool,
    /// Bytes of `Write` blocks received.
    posted: u64,
    /// Bytes handed to the endpoint.
    written: u64,
    /// Acknowledged bytes last reported to the application.
    reported: u64,
}

/// One session: its rings, its handles, its backlog.
struct Session<P> {
    port: P,
    handles: HashMap<CtxHandle, ContextId>,
    next_accepted: u64,
    /// FN blocks that did not fit, with their urgency.
    backlog: VecDeque<(FromEngine, bool)>,
    /// XTP ports this session listens on.
    listening: Vec<u16>,
}

/// Per-session counts, for the daemon's status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SessionCounts {
    /// Contexts the session holds (open, closing, or lingering).
    pub(crate) contexts: usize,
    /// XTP ports it listens on.
    pub(crate) listening: usize,
}

pub(crate) struct Engine<T: Transport, P: Port> {
    d: Driver<T>,
    cfg: EngineConfig,
    sessions: BTreeMap<SessionId, Session<P>>,
    ctxs: HashMap<ContextId, Ctx>,
    /// Which session accepts on each XTP port.
    listeners: HashMap<u16, SessionId>,
    /// Contexts that may have data to deliver.
    to_read: Vec<ContextId>,
    /// Contexts with writes queued or acknowledgements to report.
    writers: Vec<ContextId>,
    /// Acknowledgements held back for the application's answer, until then.
    hold_until: Option<Instant>,
}

impl<T: Transport, P: Port> Engine<T, P> {
    pub(crate) fn new(d: Driver<T>, cfg: EngineConfig) -> Self {
        Engine {
            d,
            cfg,
            sessions: BTreeMap::new(),
            ctxs: HashMap::new(),
            listeners: HashMap::new(),
            to_read: Vec::new(),
            writers: Vec::new(),
            hold_until: None,
        }
    }

    pub(crate) fn driver(&mut self) -> &mut Driver<T> {
        &mut self.d
    }

    pub(crate) fn driver_ref(&self) -> &Driver<T> {
        &self.d
    }

    /// Serves a new session under `id`.
    pub(crate) fn add_session(&mut self, id: SessionId, port: P) {
        let s = Session {
            port,
            handles: HashMap::new(),
            next_accepted: CtxHandle::ENGINE_RANGE,
            backlog: VecDeque::new(),
            listening: Vec::new(),
        };
        self.sessions.insert(id, s);
    }

    /// The ports of the sessions served (to park on).
    pub(crate) fn ports(&self) -> impl Iterator<Item = (SessionId, &P)> {
        self.sessions.iter().map(|(id, s)| (*id, &s.port))
    }

    pub(crate) fn ports_mut(&mut self) -> impl Iterator<Item = (SessionId, &mut P)> {
        self.sessions.iter_mut().map(|(id, s)| (*id, &mut s.port))
    }

    /// The socket to wait on, beside every session's port.
    pub(crate) fn split_all(&mut self) -> (BorrowedFd<'_>, impl Iterator<Item = (SessionId, &P)>) {
        (self.d.input_fd(), self.sessions.iter().map(|(id, s)| (*id, &s.port)))
    }

    /// The socket to wait on, beside a session's port.
    pub(crate) fn split(&mut self, id: SessionId) -> (BorrowedFd<'_>, Option<&mut P>) {
        (self.d.input_fd(), self.sessions.get_mut(&id).map(|s| &mut s.port))
    }

    /// Whether any session has blocks waiting that will be applied now
    /// (a paused session's wait for its application to make room).
    pub(crate) fn has_input(&self) -> bool {
        self.sessions.values().any(|s| s.backlog.len() < BACKLOG_PAUSE && s.port.has_input())
    }

    /// Whether session `id` is not read from until its application takes
    /// FN blocks ([`BACKLOG_PAUSE`]).
    pub(crate) fn session_paused(&self, id: SessionId) -> bool {
        self.sessions.get(&id).is_some_and(|s| s.backlog.len() >= BACKLOG_PAUSE)
    }

    /// Whether some session's FN blocks wait in a backlog.
    pub(crate) fn backlogged(&self) -> bool {
        self.sessions.values().any(|s| !s.backlog.is_empty())
    }

    /// Whether session `id`'s FN blocks wait in its backlog.
    pub(crate) fn session_backlogged(&self, id: SessionId) -> bool {
        self.sessions.get(&id).is_some_and(|s| !s.backlog.is_empty())
    }

    /// FN blocks waiting in session `id`'s backlog.
    #[cfg(test)]
    pub(crate) fn backlog_len(&self, id: SessionId) -> usize {
        self.sessions.get(&id).map_or(0, |s| s.backlog.len())
    }

    /// The read credit left to the context session `id` calls `ctx`.
    #[cfg(test)]
    pub(crate) fn credit(&self, id: SessionId, ctx: CtxHandle) -> Option<u64> {
        let cid = self.sessions.get(&id)?.handles.get(&ctx)?;
        self.ctxs.get(cid).map(|c| c.credit)
    }

    /// What a session holds.
    pub(crate) fn counts(&self, id: SessionId) -> SessionCounts {
        SessionCounts {
            contexts: self.ctxs.values().filter(|c| c.session == id).count(),
            listening: self.sessions.get(&id).map_or(0, |s| s.listening.len()),
        }
    }

    /// Contexts the sessions opened or accepted and that are not over yet
    /// (those of an ended session too, while they close).
    pub(crate) fn live_contexts(&self) -> usize {
        self.ctxs.len()
    }

    /// Contexts the endpoint holds in all, lingering ones included (a
    /// closed context stays a while to absorb late packets).
    pub(crate) fn context_count(&mut self) -> usize {
        self.d.endpoint().context_count()
    }

    /// Sessions whose application has gone and whose blocks are all applied.
    pub(crate) fn gone_sessions(&self) -> Vec<SessionId> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.port.peer_gone() && !s.port.has_input())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Ends a session: its listeners stop, its contexts are closed
    /// gracefully (`abort` false: the application left in order) or aborted
    /// (it died), and its rings are dropped. Returns the port.
    pub(crate) fn remove_session(&mut self, id: SessionId, abort: bool) -> Option<P> {
        let s = self.sessions.remove(&id)?;
        for port in &s.listening {
            self.listeners.remove(port);
            self.d.endpoint().unlisten(*port);
        }
        let now = self.d.now();
        let ids: Vec<ContextId> = s.handles.values().copied().collect();
        for cid in ids {
            if abort {
                if let Some(c) = self.ctxs.get_mut(&cid) {
                    c.queued.clear();
                }
                self.d.endpoint().abort(now, cid);
            } else {
                if let Some(c) = self.ctxs.get_mut(&cid) {
                    c.close_queued = true;
                }
                self.push_queued(cid);
            }
        }
        Some(s.port)
    }

    /// Applies up to a ring's worth of posted blocks per session; true if any.
    pub(crate) fn apply_posted(&mut self) -> bool {
        let mut any = false;
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for sid in ids {
            for _ in 0..self.cfg.ring_slots {
                let Some(s) = self.sessions.get_mut(&sid) else { break };
                if s.backlog.len() >= BACKLOG_PAUSE {
                    s.port.nudge();
                    break;
                }
                let Some(b) = s.port.try_recv() else { break };
                any = true;
                match b {
                    Ok(b) => self.apply(sid, b),
                    Err((ctx, error)) => self.emit(sid, FromEngine::Failed { ctx, error }),
                }
            }
        }
        any
    }

    /// After applying: sends what the endpoint has (unless acknowledgements
    /// are held for the application's answer) and delivers events and data.
    pub(crate) fn after_apply(&mut self, posted: bool) -> io::Result<()> {
        let now = self.d.now();
        if posted || self.hold_until.is_none_or(|t| now >= t) {
            self.hold_until = None;
            self.d.flush()?;
        }
        let delivered = self.deliver();
        if delivered && self.hold_until.is_none() && !self.cfg.reply_hold.is_zero() {
            self.hold_until = Some(self.d.now() + self.cfg.reply_hold);
        }
        Ok(())
    }

    /// How long a loop may sleep: until the next timer or held
    /// acknowledgement, at most [`MAX_SLEEP`].
    pub(crate) fn sleep_for(&mut self) -> Duration {
        let mut sleep = self.d.until_timeout().unwrap_or(MAX_SLEEP).min(MAX_SLEEP);
        if let Some(t) = self.hold_until {
            sleep = sleep.min(t.saturating_since(self.d.now()));
        }
        sleep
    }

    fn apply(&mut self, sid: SessionId, b: ToEngine) {
        let now = self.d.now();
        match b {
            ToEngine::Listen { port, cfg } => {
                let result = match self.d.endpoint().listen(port, cfg) {
                    Ok(()) => {
                        self.listeners.insert(port, sid);
                        if let Some(s) = self.sessions.get_mut(&sid) {
                            s.listening.push(port);
                        }
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                };
                self.emit(sid, FromEngine::Listening { port, result });
            }
            ToEngine::Connect { ctx, peer, port, cfg } => {
                if self.bad_new_handle(sid, ctx) {
                    return;
                }
                match self.d.endpoint().connect(now, peer, port, cfg) {
                    Ok(id) => self.adopt(sid, ctx, id),
                    Err(e) => {
                        self.emit(sid, FromEngine::Failed { ctx, error: BlockError::Open(e.to_string()) })
                    }
                }
            }
            ToEngine::Datagram { ctx, peer, port, data, acknowledged } => {
                if self.bad_new_handle(sid, ctx) {
                    return;
                }
                match self.d.endpoint().send_datagram(now, peer, port, data, acknowledged) {
                    Ok(id) => self.adopt(sid, ctx, id),
                    Err(e) => {
                        self.emit(sid, FromEngine::Failed { ctx, error: BlockError::Open(e.to_string()) })
                    }
                }
            }
            ToEngine::Write { ctx, data, eom, btag } => {
                let Some(id) = self.known(sid, ctx) else { return };
                let limit = self.sessions.get(&sid).map_or(0, |s| s.port.max_payload());
                let limit = self.cfg.write_bound.saturating_add(limit);
                let Some(c) = self.ctxs.get_mut(&id) else { return };
                if (c.posted + data.len() as u64).saturating_sub(c.reported) > limit {
                    c.queued.clear();
                    self.d.endpoint().abort(now, id);
                    let error = BlockError::OverWriteBound(self.cfg.write_bound);
                    self.emit(sid, FromEngine::Failed { ctx, error });
                    return;
                }
                c.posted += data.len() as u64;
                c.queued.push_back(Queued { data, eom, btag, journey: trace::take_noted() });
                self.push_queued(id);
                if !self.writers.contains(&id) {
                    self.writers.push(id);
                }
            }
            ToEngine::Credit { ctx, bytes } => {
                let Some(id) = self.known(sid, ctx) else { return };
                // Never more than the initial credit: an honest client only
                // returns what it has read.
                let most = self.cfg.read_credit;
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.credit = c.credit.saturating_add(bytes).min(most);
                }
                if !self.to_read.contains(&id) {
                    self.to_read.push(id);
                }
            }
            ToEngine::Close { ctx } => {
                let Some(id) = self.known(sid, ctx) else { return };
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.close_queued = true;
                }
                self.push_queued(id);
            }
            ToEngine::Abort { ctx } => {
                let Some(id) = self.known(sid, ctx) else { return };
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.queued.clear();
                }
                self.d.endpoint().abort(now, id);
            }
        }
    }

    /// Refuses a `Connect`/`Datagram` handle in the engine's range or in use.
    fn bad_new_handle(&mut self, sid: SessionId, ctx: CtxHandle) -> bool {
        let bad = ctx.is_accepted()
            || ctx.0 == 0
            || self.sessions.get(&sid).is_none_or(|s| s.handles.contains_key(&ctx));
        if bad {
            self.emit(sid, FromEngine::Failed { ctx, error: BlockError::BadHandle });
        }
        bad
    }

    /// The context `sid` calls `ctx`, or a `Failed` block to the session.
    fn known(&mut self, sid: SessionId, ctx: CtxHandle) -> Option<ContextId> {
        let id = self.sessions.get(&sid).and_then(|s| s.handles.get(&ctx)).copied();
        if id.is_none() {
            self.emit(sid, FromEngine::Failed { ctx, error: BlockError::UnknownContext });
        }
        id
    }

    fn adopt(&mut self, sid: SessionId, handle: CtxHandle, id: ContextId) {
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.handles.insert(handle, id);
        }
        self.ctxs.insert(
            id,
            Ctx {
                session: sid,
                handle,
                credit: self.cfg.read_credit,
                queued: VecDeque::new(),
                close_queued: false,
                posted: 0,
                written: 0,
                reported: 0,
            },
        );
    }

    /// Hands queued writes to the endpoint while it takes them, then a
    /// queued `Close`.
    fn push_queued(&mut self, id: ContextId) {
        let now = self.d.now();
        let Some(c) = self.ctxs.get_mut(&id) else { return };
        let ep = self.d.endpoint();
        let mut failed = None;
        while let Some(q) = c.queued.front() {
            trace::note(q.journey, false);
            match ep.write(now, id, q.data.clone(), q.eom, q.btag) {
                Ok(()) => {
                    c.written += q.data.len() as u64;
                    c.queued.pop_front();
                }
                Err(WriteError::WouldBlock) => return,
                Err(e) => {
                    c.queued.clear();
                    failed = Some(if e == WriteError::UnknownContext {
                        BlockError::UnknownContext
                    } else {
                        BlockError::Closed
                    });
                    break;
                }
            }
        }
        if c.close_queued {
            c.close_queued = false;
            ep.close(now, id);
        }
        if let Some(error) = failed {
            let (sid, ctx) = (c.session, c.handle);
            self.emit(sid, FromEngine::Failed { ctx, error });
        }
    }

    /// Turns events into FN blocks and delivers data within credit; true
    /// if data was delivered.
    fn deliver(&mut self) -> bool {
        let mut delivered = false;
        while let Some(ev) = self.d.endpoint().poll_event() {
            match ev {
                Event::Incoming { ctx: id, peer, service, port } => {
                    // The listener's session (gone: nobody takes it).
                    let Some(sid) = self.listeners.get(&port).copied() else {
                        let now = self.d.now();
                        self.d.endpoint().abort(now, id);
                        continue;
                    };
                    let Some(s) = self.sessions.get_mut(&sid) else { continue };
                    let handle = CtxHandle(s.next_accepted);
                    s.next_accepted += 1;
                    self.adopt(sid, handle, id);
                    self.emit(sid, FromEngine::Incoming { ctx: handle, peer, service, port });
                }
                Event::Readable { ctx: id } => {
                    if !self.to_read.contains(&id) {
                        self.to_read.push(id);
                    }
                }
                Event::PeerFinished { ctx: id } => {
                    let Some((sid, handle)) = self.ctxs.get(&id).map(|c| (c.session, c.handle)) else {
                        continue;
                    };
                    delivered |= self.read_out(id, true);
                    self.emit(sid, FromEngine::PeerFinished { ctx: handle });
                }
                Event::Closed { ctx: id, reason } => {
                    let Some((sid, handle)) = self.ctxs.get(&id).map(|c| (c.session, c.handle)) else {
                        continue;
                    };
                    delivered |= self.read_out(id, true);
                    self.ctxs.remove(&id);
                    if let Some(s) = self.sessions.get_mut(&sid) {
                        s.handles.remove(&handle);
                    }
                    self.to_read.retain(|&c| c != id);
                    self.writers.retain(|&c| c != id);
                    self.emit(sid, FromEngine::Closed { ctx: handle, reason });
                }
                Event::Acked { .. } | Event::Gap { .. } => {}
            }
        }
        let mut k = 0;
        while k < self.to_read.len() {
            let id = self.to_read[k];
            delivered |= self.read_out(id, false);
            let more =
                self.ctxs.get(&id).is_some_and(|c| c.credit > 0) && self.d.endpoint().readable_bytes(id) > 0;
            // Kept while credit is what stops it: a `Credit` block re-adds it anyway.
            if more {
                k += 1
            } else {
                self.to_read.swap_remove(k);
            }
        }
        self.report_acked();
        self.flush_backlogs();
        delivered
    }

    /// Delivers `id`'s readable data: within credit, or all of it (`all`).
    fn read_out(&mut self, id: ContextId, all: bool) -> bool {
        let now = self.d.now();
        let mut any = false;
        loop {
            let Some(c) = self.ctxs.get(&id) else { return any };
            if !all && c.credit == 0 {
                return any;
            }
            let (sid, handle) = (c.session, c.handle);
            let Some(chunk) = self.d.endpoint().read(now, id) else { return any };
            let mut exhausted = false;
            if let Some(c) = self.ctxs.get_mut(&id) {
                c.credit = c.credit.saturating_sub(chunk.data.len() as u64);
                exhausted = c.credit == 0;
            }
            any = true;
            // Urgent (wakes an application waiting for a whole message):
            // a message's end, or the last chunk the credit allows (the
            // application must read to return credit).
            let urgent = chunk.eom || exhausted;
            let b = FromEngine::Data {
                ctx: handle,
                seq: chunk.seq,
                data: chunk.data,
                eom: chunk.eom,
                btag: chunk.btag,
            };
            self.emit_as(sid, b, urgent);
        }
    }

    /// Moves queued writes on and reports acknowledgements to writers that
    /// may be waiting for room (half their bound outstanding).
    fn report_acked(&mut self) {
        let bound = self.cfg.write_bound;
        let mut k = 0;
        while k < self.writers.len() {
            let id = self.writers[k];
            self.push_queued(id);
            let unacked = self.d.endpoint().unacked_bytes(id);
            let Some(c) = self.ctxs.get_mut(&id) else {
                self.writers.swap_remove(k);
                continue;
            };
            let acked = c.written.saturating_sub(unacked);
            let outstanding = c.posted - c.reported;
            if acked > c.reported
                && outstanding >= bound / 2
                && (acked - c.reported >= bound / 16 || acked == c.posted)
            {
                c.reported = acked;
                let (sid, ctx) = (c.session, c.handle);
                self.emit(sid, FromEngine::Acked { ctx, bytes: acked });
            }
            let c = &self.ctxs[&id];
            if c.queued.is_empty() && c.posted - c.reported < bound / 2 && !c.close_queued {
                self.writers.swap_remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// Sends a block to a session (urgent: it wakes the application
    /// whatever it waits for), or queues it behind its backlog.
    fn emit(&mut self, sid: SessionId, b: FromEngine) {
        self.emit_as(sid, b, true);
    }

    fn emit_as(&mut self, sid: SessionId, b: FromEngine, urgent: bool) {
        // A session that ended or whose application left: nobody reads.
        let Some(s) = self.sessions.get_mut(&sid) else { return };
        if s.port.peer_gone() {
            return;
        }
        if !s.backlog.is_empty() {
            s.backlog.push_back((b, urgent));
            return;
        }
        if let Err(b) = s.port.try_send(b, urgent) {
            s.backlog.push_back((b, urgent));
            // FN is full: the application must drain it, whatever it waits for.
            s.port.nudge();
        }
    }

    fn flush_backlogs(&mut self) {
        for s in self.sessions.values_mut() {
            while let Some((b, urgent)) = s.backlog.pop_front() {
                if let Err(b) = s.port.try_send(b, urgent) {
                    s.backlog.push_front((b, urgent));
                    s.port.nudge();
                    break;
                }
            }
        }
    }
}

/// Waits up to `timeout` until one of `fds` is readable (or hung up);
/// returns which are. An interrupted wait counts as a timeout. `fds` from
/// `bells` on are doorbells (eventfds), the ones before sockets: the
/// `Park` tracepoint names what woke the wait by that.
pub(crate) fn wait_readable(
    fds: &[BorrowedFd<'_>],
    bells: usize,
    timeout: Duration,
) -> io::Result<Vec<bool>> {
    let mut polls: Vec<PollFd<'_>> = fds.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)).collect();
    let ts = TimeSpec::from_duration(std::time::Duration::from_nanos(timeout.as_nanos() as u64));
    let t0 = crate::trace::span_start();
    let r = ppoll(&mut polls, Some(ts), None);
    crate::trace::park_end(
        t0,
        Some(timeout),
        &r,
        polls.iter().map(|p| p.any().unwrap_or(false)),
        bells..fds.len(),
    );
    match r {
        Ok(_) => Ok(polls.iter().map(|p| p.any().unwrap_or(false)).collect()),
        Err(Errno::EINTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(io::Error::from(e)),
    }
}
