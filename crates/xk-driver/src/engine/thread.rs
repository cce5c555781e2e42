//! The engine thread: one [`Driver`] turned by its own thread, commanded
//! through the TN ring and reporting through the FN ring.
//!
//! Each pass: apply the posted blocks (at most a ring's worth, so a
//! flood of writes cannot starve the socket), send what the endpoint has,
//! take what the socket has and run due timers, turn the endpoint's events
//! into FN blocks, then wait — on the socket, the doorbell and the next
//! timer together (blocking), or not at all (busy-poll).
//!
//! What the engine promises the application:
//! * nothing posted is dropped: a write the endpoint cannot take yet (its
//!   send buffer is full) waits in the context's queue, in order, and a
//!   `Close` waits behind it;
//! * a block naming an unknown context is answered with
//!   [`FromEngine::Failed`], and nothing else happens;
//! * data is delivered only up to the application's read credit, so an
//!   application that stops reading closes the peer's window instead of
//!   filling memory; the rest of a context's data is delivered before its
//!   `PeerFinished` or `Closed` block regardless of credit (it is bounded by
//!   the context's receive buffer);
//! * an FN block that does not fit waits in a backlog, in order (bounded
//!   by the credits and the number of contexts).
//!
//! Acknowledgements to the peer: like [`Driver::turn`], the engine does not
//! send right after delivering data — the application's answer, if it
//! comes within [`super::EngineConfig::reply_hold`], leaves in the same
//! system call as the status reply (one wake-up at the peer, not two).

use std::collections::{HashMap, VecDeque};
use std::io;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextId, Event, WriteError};

use super::EngineConfig;
use super::block::{BlockError, CtxHandle, FromEngine, ToEngine};
use super::ring::Link;
use crate::driver::Driver;
use crate::transport::Transport;

/// How long the engine keeps serving after the application left, for the
/// contexts it left to close (TCP's TIME_WAIT in user space).
const LINGER: Duration = Duration::from_secs(600);
/// Longest blocking wait, so the end of the linger is noticed.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// A write the endpoint could not take yet.
struct Queued {
    data: Bytes,
    eom: bool,
    btag: Option<u64>,
}

/// The engine's view of one context.
struct Ctx {
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

pub(super) struct Engine<T: Transport> {
    d: Driver<T>,
    link: Link<FromEngine, ToEngine>,
    cfg: EngineConfig,
    handles: HashMap<CtxHandle, ContextId>,
    ctxs: HashMap<ContextId, Ctx>,
    next_accepted: u64,
    /// FN blocks that did not fit, with their urgency.
    backlog: VecDeque<(FromEngine, bool)>,
    /// Contexts that may have data to deliver.
    to_read: Vec<ContextId>,
    /// Contexts with writes queued or acknowledgements to report.
    writers: Vec<ContextId>,
    /// Acknowledgements held back for the application's answer, until then.
    hold_until: Option<Instant>,
}

impl<T: Transport> Engine<T> {
    pub(super) fn new(d: Driver<T>, link: Link<FromEngine, ToEngine>, cfg: EngineConfig) -> Self {
        Engine {
            d,
            link,
            cfg,
            handles: HashMap::new(),
            ctxs: HashMap::new(),
            next_accepted: CtxHandle::ENGINE_RANGE,
            backlog: VecDeque::new(),
            to_read: Vec::new(),
            writers: Vec::new(),
            hold_until: None,
        }
    }

    /// Runs until the application has left and every context is over (or
    /// the linger ran out), or the socket fails.
    pub(super) fn run(mut self) -> io::Result<()> {
        let mut left_at: Option<Instant> = None;
        loop {
            let posted = self.apply_posted();
            if left_at.is_none() && self.link.peer_gone() && !self.link.has_input() {
                left_at = Some(self.d.now());
                self.close_all();
            }
            let now = self.d.now();
            // Send unless holding acknowledgements for the application's
            // answer (which, once posted, goes with them).
            if posted || self.hold_until.is_none_or(|t| now >= t) {
                self.hold_until = None;
                self.d.flush()?;
            }
            let delivered = self.deliver();
            if delivered && self.hold_until.is_none() && !self.cfg.reply_hold.is_zero() {
                self.hold_until = Some(self.d.now() + self.cfg.reply_hold);
            }
            if let Some(t) = left_at
                && (self.d.endpoint().context_count() == 0 || self.d.now().saturating_since(t) >= LINGER)
            {
                return Ok(());
            }
            if self.cfg.busy_poll || self.link.has_input() {
                self.d.poll_input()?;
                continue;
            }
            let mut sleep = self.d.until_timeout().unwrap_or(MAX_SLEEP).min(MAX_SLEEP);
            if let Some(t) = self.hold_until {
                sleep = sleep.min(t.saturating_since(self.d.now()));
            }
            let space = !self.backlog.is_empty() && left_at.is_none();
            let fd = self.d.input_fd();
            // A zero wait still looks at the socket (without sleeping).
            if !sleep.is_zero() {
                self.link.park(left_at.is_none(), false, space, Some(fd), Some(sleep))?;
            }
            self.d.poll_input()?;
        }
    }

    /// Applies up to a ring's worth of posted blocks; true if any.
    fn apply_posted(&mut self) -> bool {
        let mut any = false;
        for _ in 0..self.cfg.ring_slots {
            let Some(b) = self.link.try_recv() else { break };
            any = true;
            self.apply(b);
        }
        any
    }

    fn apply(&mut self, b: ToEngine) {
        let now = self.d.now();
        match b {
            ToEngine::Listen { port, cfg } => {
                let result = self.d.endpoint().listen(port, cfg).map_err(|e| e.to_string());
                self.emit(FromEngine::Listening { port, result });
            }
            ToEngine::Connect { ctx, peer, port, cfg } => {
                if self.bad_new_handle(ctx) {
                    return;
                }
                match self.d.endpoint().connect(now, peer, port, cfg) {
                    Ok(id) => self.adopt(ctx, id),
                    Err(e) => self.emit(FromEngine::Failed { ctx, error: BlockError::Open(e.to_string()) }),
                }
            }
            ToEngine::Datagram { ctx, peer, port, data, acknowledged } => {
                if self.bad_new_handle(ctx) {
                    return;
                }
                match self.d.endpoint().send_datagram(now, peer, port, data, acknowledged) {
                    Ok(id) => self.adopt(ctx, id),
                    Err(e) => self.emit(FromEngine::Failed { ctx, error: BlockError::Open(e.to_string()) }),
                }
            }
            ToEngine::Write { ctx, data, eom, btag } => {
                let Some(id) = self.known(ctx) else { return };
                let Some(c) = self.ctxs.get_mut(&id) else { return };
                c.posted += data.len() as u64;
                c.queued.push_back(Queued { data, eom, btag });
                self.push_queued(id);
                if !self.writers.contains(&id) {
                    self.writers.push(id);
                }
            }
            ToEngine::Credit { ctx, bytes } => {
                let Some(id) = self.known(ctx) else { return };
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.credit = c.credit.saturating_add(bytes);
                }
                if !self.to_read.contains(&id) {
                    self.to_read.push(id);
                }
            }
            ToEngine::Close { ctx } => {
                let Some(id) = self.known(ctx) else { return };
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.close_queued = true;
                }
                self.push_queued(id);
            }
            ToEngine::Abort { ctx } => {
                let Some(id) = self.known(ctx) else { return };
                if let Some(c) = self.ctxs.get_mut(&id) {
                    c.queued.clear();
                }
                self.d.endpoint().abort(now, id);
            }
        }
    }

    /// Refuses a `Connect`/`Datagram` handle in the engine's range or in use.
    fn bad_new_handle(&mut self, ctx: CtxHandle) -> bool {
        let bad = ctx.is_accepted() || self.handles.contains_key(&ctx);
        if bad {
            self.emit(FromEngine::Failed { ctx, error: BlockError::BadHandle });
        }
        bad
    }

    /// The context of `ctx`, or a `Failed` block to the application.
    fn known(&mut self, ctx: CtxHandle) -> Option<ContextId> {
        let id = self.handles.get(&ctx).copied();
        if id.is_none() {
            self.emit(FromEngine::Failed { ctx, error: BlockError::UnknownContext });
        }
        id
    }

    fn adopt(&mut self, handle: CtxHandle, id: ContextId) {
        self.handles.insert(handle, id);
        self.ctxs.insert(
            id,
            Ctx {
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
            let ctx = c.handle;
            self.emit(FromEngine::Failed { ctx, error });
        }
    }

    /// Closes every context gracefully (the application left).
    fn close_all(&mut self) {
        let ids: Vec<ContextId> = self.ctxs.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.ctxs.get_mut(&id) {
                c.close_queued = true;
            }
            self.push_queued(id);
        }
    }

    /// Turns events into FN blocks and delivers data within credit; true
    /// if data was delivered.
    fn deliver(&mut self) -> bool {
        let mut delivered = false;
        while let Some(ev) = self.d.endpoint().poll_event() {
            match ev {
                Event::Incoming { ctx: id, peer, service, port } => {
                    let handle = CtxHandle(self.next_accepted);
                    self.next_accepted += 1;
                    self.adopt(handle, id);
                    self.emit(FromEngine::Incoming { ctx: handle, peer, service, port });
                }
                Event::Readable { ctx: id } => {
                    if !self.to_read.contains(&id) {
                        self.to_read.push(id);
                    }
                }
                Event::PeerFinished { ctx: id } => {
                    let Some(handle) = self.ctxs.get(&id).map(|c| c.handle) else { continue };
                    delivered |= self.read_out(id, true);
                    self.emit(FromEngine::PeerFinished { ctx: handle });
                }
                Event::Closed { ctx: id, reason } => {
                    let Some(handle) = self.ctxs.get(&id).map(|c| c.handle) else { continue };
                    delivered |= self.read_out(id, true);
                    self.ctxs.remove(&id);
                    self.handles.remove(&handle);
                    self.to_read.retain(|&c| c != id);
                    self.writers.retain(|&c| c != id);
                    self.emit(FromEngine::Closed { ctx: handle, reason });
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
        self.flush_backlog();
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
            let handle = c.handle;
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
            self.emit_as(b, urgent);
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
                let ctx = c.handle;
                self.emit(FromEngine::Acked { ctx, bytes: acked });
            }
            let c = &self.ctxs[&id];
            if c.queued.is_empty() && c.posted - c.reported < bound / 2 && !c.close_queued {
                self.writers.swap_remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// Sends a block to the application (urgent: it wakes the application
    /// whatever it waits for), or queues it behind the backlog.
    fn emit(&mut self, b: FromEngine) {
        self.emit_as(b, true);
    }

    fn emit_as(&mut self, b: FromEngine, urgent: bool) {
        if self.link.peer_gone() {
            return; // nobody reads any more
        }
        if !self.backlog.is_empty() {
            self.backlog.push_back((b, urgent));
            return;
        }
        if let Err(b) = self.link.try_send(b, urgent) {
            self.backlog.push_back((b, urgent));
            // FN is full: the application must drain it, whatever it waits for.
            self.link.nudge();
        }
    }

    fn flush_backlog(&mut self) {
        while let Some((b, urgent)) = self.backlog.pop_front() {
            if let Err(b) = self.link.try_send(b, urgent) {
                self.backlog.push_front((b, urgent));
                self.link.nudge();
                return;
            }
        }
    }
}
