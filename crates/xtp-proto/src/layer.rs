//! XTP as an `xk-core` protocol: the engine behind the uniform protocol
//! interface, for a protocol graph (issue #16).
//!
//! [`XtpProtocol`] owns an [`Endpoint`] and translates the UPI verbs into its
//! calls; it is a thin adapter, not a second engine. It sits directly on a
//! datagram device (UDP socket, raw IP protocol 36, simulated link: see
//! `xk_core::device`).
//!
//! It implements [`Layer`] once, for any context `C: Cx`: in the dynamic
//! `Graph` (`C = Ctx`, frames carry the peer's socket address in the device
//! header) and in the compiled `xk_core::compiled::Stack` (`C = DeviceCx`,
//! the peer travels beside the frame; every call static). The two differ
//! only in `C::DEVICE_HEADER`, a constant, so each monomorphised copy holds
//! only its own case.
//!
//! * A session *is* a context: `SessionId.slot` is the context's arena id,
//!   so there is no second session table to search per packet.
//! * `demux` reads the device header and the XTP key at fixed offsets and
//!   resolves the context with [`Endpoint::lookup`] (the `(peer, key)`
//!   `DemuxMap` with its one-entry cache, or the return key's slot); `pop`
//!   hands the datagram on with [`Endpoint::handle_demuxed`], so each packet
//!   is looked up once. A FIRST (or an unknown key) demuxes to the
//!   protocol's pseudo-session [`XtpProtocol::UNBOUND`], and the endpoint
//!   accepts or refuses it, counting the refusal.
//! * Received data goes up as `M::from_shared(chunk)`: a slice of the
//!   received frame, not copied in either message form. Data pushed down
//!   goes in as `msg.into_bytes()`, free for a message of one piece.
//! * Output waits for [`Layer::flush`] (the device pulling a frame), as
//!   the direct driver polls the endpoint after a batch of input: the same
//!   packets leave on both paths, at the same instants. The endpoint writes
//!   each packet into a scratch buffer that stays in the cache; the frame
//!   is copied once, at its length, into a shared 64 KiB arena (one split
//!   each, as the direct drivers receive). A device that lends its own
//!   transmit buffer (the compiled stack's `poll_transmit_into`: a
//!   driver's batch buffer, the simulator host's) gets the packet written
//!   straight into it ([`Layer::flush_into`]), as the direct endpoint's
//!   driver does: no scratch, no arena, no copy.
//! * Events go up after every verb in the graph; in the compiled stack
//!   (`Cx::PULLS_EVENTS`) when the application polls: `Layer::poll_up`
//!   returns one event per call, taken straight from the endpoint (the
//!   next chunk of the context being read, else the next endpoint event
//!   translated), with no event queue in between. Both compositions use
//!   the one translation (`next_up`).
//! * In the compiled stack a frame arrives through `Layer::receive` (the
//!   x-kernel's `xDemux` calling `xPop`): the peer is beside the frame
//!   (`receive`'s `from`; `demux` and `pop` never see it there), so
//!   the endpoint's `handle_datagram` parses the packet and finds its
//!   context in one pass (`Endpoint::lookup`, as `demux` does); the graph
//!   keeps `demux` and `pop` apart for its demux meter (E5).
//! * Timers are the endpoint's own queue `Q` ([`Layer::poll_timeout`]).
//!
//! Message boundaries: XTP delivers chunks; each goes up with the chunk's
//! end-of-message mark (XTP's EOM: the `eom` of the graph's `Deliver`), so
//! the application above sees where each message ends. A push is one
//! message (sent with EOM on its last packet).

use std::marker::PhantomData;
use std::net::SocketAddr;

use bytes::BytesMut;
use xk_core::device::read_addr;
use xk_core::{
    Addr, ArenaId, CloseError, Control, ControlError, ControlReply, Cx, DemuxError, Event as UpEvent, Layer,
    OpenError, Part, Participants, ProtocolId, PushError, SessionId, Upper,
};
use xk_msg::Msg;
use xk_time::{HeapQueue, Instant, TimerQueue};
use xtp_wire::{HEADER_LEN, Packet, PacketType};

use crate::config::{ContextConfig, EndpointConfig};
use crate::endpoint::{ConnectError, ContextId, Endpoint, WriteError};
use crate::events::{Event, NoTrace};

/// Bytes of transmit arena allocated at a time (not zeroed: each frame is
/// copied in at its length from the scratch buffer, then split off).
const TX_ARENA: usize = 64 * 1024;

/// XTP as a framework protocol. See the module documentation.
///
/// The variants are its type parameters, chosen at compile time: `M` the
/// message form (`Contig`, `Rope`, or the copying `Limit<L>`), `Q` the
/// endpoint's timer queue, `CACHE` the demux map's one-entry cache.
pub struct XtpProtocol<M, Q: TimerQueue<ArenaId> = HeapQueue<ArenaId>, const CACHE: bool = true> {
    ep: Endpoint<NoTrace, Q, CACHE>,
    /// Configuration of contexts this side opens or accepts.
    ctx_cfg: ContextConfig,
    /// Who sits above each context, by slot index, with the slot's
    /// generation (a stale entry is recognised, never misdelivered).
    upper: Vec<Option<(u32, Upper)>>,
    /// Uppers of ended contexts whose slot a new context took before the
    /// application pulled their `CloseDone` (the compiled stack hands
    /// events up when polled): kept until their `Closed` is translated.
    closing: Vec<(ContextId, Upper)>,
    /// Ports enabled for passive opens and who enabled them.
    listeners: Vec<(u16, Upper)>,
    tx: BytesMut,
    /// Where the endpoint writes the next packet (device header room first).
    scratch: Vec<u8>,
    /// The largest packet the endpoint sends.
    max_packet: usize,
    /// Packets written into `scratch` and copied into a frame (the device
    /// did not lend its buffer: the graph, a copying form, a short buffer).
    frames_copied: u64,
    /// The sender `demux` read from the frame `pop` gets next (the
    /// dispatcher calls them back to back for one message).
    from: Option<SocketAddr>,
    /// The context whose data is being handed up, and to whom
    /// ([`Self::next_up`]): read until it has no more.
    reading: Option<(ContextId, Upper)>,
    _msg: PhantomData<fn() -> M>,
}

impl<M: Msg> XtpProtocol<M> {
    /// An XTP protocol with the default timer queue (`HeapQueue`).
    pub fn new(cfg: EndpointConfig, ctx_cfg: ContextConfig, seed: u64) -> Self {
        Self::with_timer_queue(cfg, ctx_cfg, seed)
    }
}

impl<M: Msg, Q: TimerQueue<ArenaId> + Default, const CACHE: bool> XtpProtocol<M, Q, CACHE> {
    /// An XTP protocol whose endpoint keeps its timers in a `Q`.
    pub fn with_timer_queue(cfg: EndpointConfig, ctx_cfg: ContextConfig, seed: u64) -> Self {
        let max_packet = cfg.max_packet;
        XtpProtocol {
            ep: Endpoint::with_timer_queue(cfg, seed, NoTrace),
            ctx_cfg,
            upper: Vec::new(),
            closing: Vec::new(),
            listeners: Vec::new(),
            tx: BytesMut::new(),
            scratch: Vec::new(),
            max_packet,
            frames_copied: 0,
            from: None,
            reading: None,
            _msg: PhantomData,
        }
    }
}

impl<M: Msg, Q: TimerQueue<ArenaId>, const CACHE: bool> XtpProtocol<M, Q, CACHE> {
    /// The pseudo-session a datagram without a context demuxes to.
    pub const UNBOUND: ArenaId = ArenaId::from_parts(u32::MAX, u32::MAX);

    /// Packets written into the protocol's own scratch buffer and copied
    /// into a frame: every packet in the graph; none in a compiled stack
    /// whose device lends its transmit buffer
    /// (`Stack::poll_transmit_into`), where the endpoint writes there.
    pub fn frames_copied(&self) -> u64 {
        self.frames_copied
    }

    /// The engine (counters, context state).
    pub fn endpoint(&self) -> &Endpoint<NoTrace, Q, CACHE> {
        &self.ep
    }

    /// The context behind a session of this protocol.
    pub fn context(session: SessionId) -> ContextId {
        ContextId(session.slot)
    }

    fn session<C: Cx<M>>(cx: &C, ctx: ContextId) -> SessionId {
        Self::session_of(cx.me(), ctx)
    }

    fn session_of(me: ProtocolId, ctx: ContextId) -> SessionId {
        SessionId { protocol: me, slot: ctx.0 }
    }

    fn set_upper(&mut self, ctx: ContextId, upper: Upper) {
        let i = ctx.0.index() as usize;
        if self.upper.len() <= i {
            self.upper.resize(i + 1, None);
        }
        // An entry of an older generation is a context that ended and
        // whose `Closed` waits in the endpoint's queue: keep its upper.
        if let Some((g, old)) = self.upper[i].filter(|(g, _)| *g != ctx.0.generation()) {
            self.closing.push((ContextId(ArenaId::from_parts(ctx.0.index(), g)), old));
        }
        self.upper[i] = Some((ctx.0.generation(), upper));
    }

    fn upper_of(&self, ctx: ContextId) -> Option<Upper> {
        match self.upper.get(ctx.0.index() as usize) {
            Some(Some((g, u))) if *g == ctx.0.generation() => Some(*u),
            _ => None,
        }
    }

    /// Hands the endpoint's events upward, if it has any (checked inline:
    /// `flush` drains after every frame and there is rarely an event then)
    /// and the application does not pull them (`poll_up` does then).
    #[inline]
    fn drain_events<C: Cx<M>>(&mut self, cx: &mut C) {
        if !C::PULLS_EVENTS && self.ep.has_events() {
            self.hand_up_events(cx);
        }
    }

    /// Hands the endpoint's events upward: new contexts as `open_done`,
    /// readable data as `deliver`, ended contexts as `close_done`, each to
    /// its session's upper layer. The translation is [`Self::next_up`]'s,
    /// the one the compiled stack's application pulls through `poll_up`.
    fn hand_up_events<C: Cx<M>>(&mut self, cx: &mut C) {
        let (now, me) = (cx.now(), cx.me());
        while let Some((upper, ev)) = self.next_up(now, me, false) {
            match ev {
                UpEvent::Deliver { session, msg, eom } => cx.deliver(upper, session, msg, eom),
                UpEvent::OpenDone { session, parts } => cx.open_done(upper, session, *parts),
                UpEvent::CloseDone { session } => cx.close_done(upper, session),
            }
        }
    }

    /// The next chunk of the context being handed up, as a delivery to its
    /// upper layer; `None` when it has no more (and the reading ends).
    /// Inline: the per-delivery path of both compositions.
    ///
    /// `pull` (the application pulls, one event per call): once a chunk is
    /// handed up and other events wait, the reading ends there and the
    /// context is signalled readable again behind them
    /// ([`Endpoint::requeue_readable`]), so a context whose data keeps
    /// coming cannot hold back other contexts' events for as long as it
    /// streams. The graph drains everything at each verb and reads on.
    #[inline]
    fn read_up(&mut self, now: Instant, me: ProtocolId, pull: bool) -> Option<(Upper, UpEvent<M>)> {
        let (ctx, upper) = self.reading?;
        match self.ep.read(now, ctx) {
            Some(chunk) => {
                if pull && self.ep.has_events() {
                    self.reading = None;
                    self.ep.requeue_readable(ctx);
                }
                let session = Self::session_of(me, ctx);
                Some((upper, UpEvent::Deliver { session, msg: M::from_shared(chunk.data), eom: chunk.eom }))
            }
            None => {
                self.reading = None;
                None
            }
        }
    }

    /// The next thing to hand up and to whom, taken from the endpoint: the
    /// next chunk of the context being read ([`Self::read_up`]), else the
    /// endpoint's next event translated (readable data starts reading its
    /// context; the rest is [`Self::translate`]'s). `None`: nothing is
    /// ready. One event per call, so an application that pulls gets each
    /// straight from the endpoint, with no queue in between.
    ///
    /// The events of every transfer are handled here: `Readable` (one per
    /// delivery) and those with nothing to hand up (`Acked`: half of a
    /// ping-pong's endpoint events). `Incoming` and `Closed`, once per
    /// context, are [`Self::translate`]'s, out of line, so that this loop
    /// stays small. (Forcing this function, with `read_up` and `poll_up`,
    /// inline into the application's poll cost more instructions per round
    /// trip than this call, Session 21 measured; docs/PERF.md.)
    #[inline]
    fn next_up(&mut self, now: Instant, me: ProtocolId, pull: bool) -> Option<(Upper, UpEvent<M>)> {
        loop {
            if let Some(up) = self.read_up(now, me, pull) {
                return Some(up);
            }
            match self.ep.poll_event()? {
                Event::Readable { ctx } => {
                    if let Some(upper) = self.upper_of(ctx) {
                        self.reading = Some((ctx, upper));
                    }
                }
                // Nothing to hand up. Kept in this loop, not left to
                // `translate`: `Acked` comes with every acknowledgement of a
                // ping-pong's data, and a call out of line would copy each
                // there only to drop it.
                Event::Gap { .. } | Event::Acked { .. } | Event::PeerFinished { .. } => {}
                ev => {
                    if let Some(up) = self.translate(now, me, ev) {
                        return Some(up);
                    }
                }
            }
        }
    }

    /// An endpoint event `next_up` does not handle inline, translated: a
    /// new context is an `OpenDone`, an ended context a `CloseDone`; `None`
    /// for one with nothing to hand up (an `Incoming` on a port since
    /// disabled, a context with no upper, the events `next_up` handles).
    #[inline(never)]
    fn translate(&mut self, now: Instant, me: ProtocolId, ev: Event) -> Option<(Upper, UpEvent<M>)> {
        match ev {
            Event::Incoming { ctx, peer, port, .. } => {
                let Some(&(_, upper)) = self.listeners.iter().find(|(p, _)| *p == port) else {
                    // Accepted by the endpoint for a port since disabled.
                    self.ep.abort(now, ctx);
                    return None;
                };
                self.set_upper(ctx, upper);
                let parts = Participants::new(
                    Part::top_first([Addr::Port(port)]),
                    Part::top_first([Addr::Inet(peer)]),
                );
                Some((
                    upper,
                    UpEvent::OpenDone { session: Self::session_of(me, ctx), parts: Box::new(parts) },
                ))
            }
            Event::Closed { ctx, .. } => {
                let upper = if let Some(upper) = self.upper_of(ctx) {
                    self.upper[ctx.0.index() as usize] = None;
                    Some(upper)
                } else {
                    let at = self.closing.iter().position(|(c, _)| *c == ctx);
                    at.map(|at| self.closing.swap_remove(at).1)
                };
                upper.map(|upper| (upper, UpEvent::CloseDone { session: Self::session_of(me, ctx) }))
            }
            // Handled by `next_up` itself.
            Event::Readable { .. } | Event::Gap { .. } | Event::Acked { .. } | Event::PeerFinished { .. } => {
                None
            }
        }
    }

    /// [`Layer::receive`] of a frame whose peer is in its device header, or
    /// is not known (`from` is `None`): `demux` then `pop`. Reached by no
    /// composition today (the graph calls `demux` and `pop` itself; the
    /// compiled stack passes the peer), so kept out of `receive`'s inline
    /// path.
    #[cold]
    #[inline(never)]
    fn receive_framed<C: Cx<M>>(
        &mut self,
        cx: &mut C,
        lower: Option<SessionId>,
        msg: M,
    ) -> Result<(), DemuxError>
    where
        Self: Layer<M, C>,
    {
        xk_core::demux_then_pop(self, cx, lower, msg)
    }
}

/// Reads the XTP key and whether the packet is a DIAG from the XTP header
/// at `h`, without parsing it. `None`: too short for the XTP header (the
/// endpoint will count it malformed).
fn xtp_key(h: &[u8]) -> Option<(u64, bool)> {
    let x = h.get(..HEADER_LEN)?;
    let p = Packet::new_unchecked(x);
    Some((p.key(), p.ptype_code() == PacketType::Diag.code()))
}

impl<M: Msg, C: Cx<M>, Q: TimerQueue<ArenaId>, const CACHE: bool> Layer<M, C> for XtpProtocol<M, Q, CACHE> {
    fn name(&self) -> &'static str {
        "xtp"
    }

    fn open(&mut self, cx: &mut C, upper: Upper, parts: &Participants) -> Result<SessionId, OpenError> {
        let mut remote = parts.remote.clone();
        let Some(Addr::Port(port)) = remote.pop() else {
            return Err(OpenError::MissingAddr("remote XTP port"));
        };
        let Some(Addr::Inet(peer)) = remote.pop() else {
            return Err(OpenError::MissingAddr("remote socket address (below the XTP port)"));
        };
        let ctx = self.ep.connect(cx.now(), peer, port, self.ctx_cfg.clone()).map_err(|e| match e {
            ConnectError::InvalidConfig(w) => OpenError::Unsupported(w),
            ConnectError::Full { limit, .. } => OpenError::Unsupported(limit),
        })?;
        self.set_upper(ctx, upper);
        Ok(Self::session(cx, ctx))
    }

    fn open_enable(&mut self, _cx: &mut C, upper: Upper, parts: &Participants) -> Result<(), OpenError> {
        let port = local_port(parts)?;
        self.ep.listen(port, self.ctx_cfg.clone()).map_err(|_| OpenError::InUse(Addr::Port(port)))?;
        self.listeners.push((port, upper));
        Ok(())
    }

    fn open_disable(&mut self, _cx: &mut C, upper: Upper, parts: &Participants) -> Result<(), OpenError> {
        let port = local_port(parts)?;
        let Some(i) = self.listeners.iter().position(|l| *l == (port, upper)) else {
            return Err(OpenError::NotEnabled(Addr::Port(port)));
        };
        self.listeners.swap_remove(i);
        self.ep.unlisten(port);
        Ok(())
    }

    #[inline]
    fn demux(&mut self, cx: &mut C, _lower: Option<SessionId>, msg: &mut M) -> Result<SessionId, DemuxError> {
        let dh = C::DEVICE_HEADER;
        let len = msg.len().min(dh + HEADER_LEN);
        let h = msg.peek(len)?;
        let from = if dh > 0 {
            if h.len() < dh {
                return Err(DemuxError::Malformed("frame shorter than the device header"));
            }
            // Kept for `pop`: the header is decoded once per frame.
            self.from = read_addr(h);
            self.from
        } else {
            // No device header and no `from` here. Reached by no
            // composition today: the graph's header is `ADDR_HEADER` bytes
            // (the branch above, the peer read from it), and the compiled
            // stack calls `receive` with `Some(from)`, which does not come
            // here. A header-less composition calling `demux` itself, or
            // `receive` with `None`, would: no peer, so no context is
            // found, and `pop` refuses the frame.
            None
        };
        let key = xtp_key(&h[dh..]);
        let found = from.zip(key).and_then(|(from, (key, diag))| self.ep.lookup(from, key, diag));
        Ok(SessionId { protocol: cx.me(), slot: found.map_or(Self::UNBOUND, |c| c.0) })
    }

    #[inline]
    fn pop(
        &mut self,
        cx: &mut C,
        session: SessionId,
        _lower: Option<SessionId>,
        mut msg: M,
    ) -> Result<(), DemuxError> {
        let dh = C::DEVICE_HEADER;
        let from = if dh > 0 {
            match self.from.take() {
                Some(from) => {
                    msg.pop(dh)?;
                    from
                }
                None => read_addr(msg.pop(dh)?).ok_or(DemuxError::Malformed("device header"))?,
            }
        } else {
            // See `demux`'s same branch (reached by no composition today):
            // without a device header the peer comes only as `receive`'s
            // `from`, and a frame without one is counted and dropped.
            return Err(DemuxError::Malformed("no source address from the device"));
        };
        let found = (session.slot != Self::UNBOUND).then_some(ContextId(session.slot));
        self.ep.handle_demuxed(cx.now(), from, msg.into_bytes(), found);
        self.drain_events(cx);
        Ok(())
    }

    // Every frame of the compiled stack, and a thin translation around
    // `Endpoint::handle_datagram` (itself out of line): `#[inline]` alone
    // left it a call of its own, with the frame and the `Result` passed
    // through memory (about 50 instructions per frame, docs/PERF.md
    // Session 21). The fallback, which no composition takes, is out of line.
    #[inline(always)]
    fn receive(
        &mut self,
        cx: &mut C,
        lower: Option<SessionId>,
        from: Option<SocketAddr>,
        msg: M,
    ) -> Result<(), DemuxError> {
        match from {
            // The peer beside the frame (the compiled stack): the endpoint
            // parses the packet and finds its context in the one pass it
            // makes anyway (`Endpoint::lookup`, as `demux` would), instead
            // of `demux` reading the key first and `pop` parsing after.
            Some(from) if C::DEVICE_HEADER == 0 => {
                self.ep.handle_datagram(cx.now(), from, msg.into_bytes());
                self.drain_events(cx);
                Ok(())
            }
            _ => self.receive_framed(cx, lower, msg),
        }
    }

    fn push(&mut self, cx: &mut C, session: SessionId, msg: M) -> Result<(), PushError> {
        self.push_part(cx, session, msg, true)
    }

    // A thin translation around `Endpoint::write` (itself out of line), on
    // every push: `#[inline]` alone left it a call of its own.
    #[inline(always)]
    fn push_part(&mut self, cx: &mut C, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        let r = self.ep.write(cx.now(), ContextId(session.slot), msg.into_bytes(), eom, None);
        r.map_err(|e| match e {
            WriteError::UnknownContext => PushError::NoSession,
            WriteError::Closed => PushError::Closed,
            WriteError::WouldBlock => PushError::WouldBlock,
        })
    }

    #[inline]
    fn flush(&mut self, cx: &mut C) {
        // One frame per call, at the graph's time of the call: the device
        // pulls frames as it sends them, and each leaves at the instant the
        // direct driver's `poll_transmit` would have produced it.
        //
        // The endpoint writes the packet into a scratch buffer that stays
        // in the cache; the frame is then copied once, at its length, into
        // a shared arena (as the direct drivers receive): one pass over the
        // bytes, and no zeroing of arena memory ahead of use.
        let dh = C::DEVICE_HEADER;
        let room = dh + self.max_packet;
        if self.scratch.len() < room {
            self.scratch = vec![0; room];
        }
        if let Some(t) = self.ep.poll_transmit(cx.now(), &mut self.scratch[dh..room]) {
            let n = dh + t.len;
            if self.tx.capacity() < n {
                self.tx = BytesMut::with_capacity(TX_ARENA.max(n));
            }
            self.tx.extend_from_slice(&self.scratch[..n]);
            self.frames_copied += 1;
            cx.transmit_to(t.dst, self.tx.split());
        }
        // Sending can end contexts (the last acknowledgement of a close).
        self.drain_events(cx);
    }

    #[inline]
    fn flush_into(&mut self, cx: &mut C, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        // The endpoint writes the packet where the device sends from, as
        // the direct driver has it write into its batch arena: no scratch
        // buffer, no frame, no copy. Not where the frame needs a device
        // header (the graph; a constant, so this test compiles away), nor
        // in a form that copies at every crossing by design (Limit), nor
        // into a buffer too short for the largest packet: those take the
        // frame path and the stack copies the frame in.
        if C::DEVICE_HEADER != 0 || M::COPIES_AT_CROSSING || buf.len() < self.max_packet {
            self.flush(cx);
            return None;
        }
        let sent = self.ep.poll_transmit(cx.now(), &mut buf[..self.max_packet]).map(|t| (t.dst, t.len));
        // Sending can end contexts (the last acknowledgement of a close).
        self.drain_events(cx);
        sent
    }

    #[inline]
    fn poll_up(&mut self, cx: &mut C) -> Option<UpEvent<M>> {
        // The two common cases inline: the next chunk of the context being
        // read (every delivery of a transfer), and nothing at all (the
        // application polls until it finds nothing). The rest is `next_up`.
        if let Some((_, ev)) = self.read_up(cx.now(), cx.me(), C::PULLS_EVENTS) {
            return Some(ev);
        }
        if !self.ep.has_events() {
            return None;
        }
        self.next_up(cx.now(), cx.me(), C::PULLS_EVENTS).map(|(_, ev)| ev)
    }

    fn control(
        &mut self,
        cx: &mut C,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        let count = |n: u64| ControlReply::Count(usize::try_from(n).unwrap_or(usize::MAX));
        match req {
            Control::GetHeaderLen => Ok(ControlReply::Size(HEADER_LEN)),
            Control::GetSessionCount => Ok(ControlReply::Count(self.ep.context_count())),
            Control::GetMalformedCount => Ok(count(self.ep.stats().malformed)),
            Control::GetAckedBytes => {
                let ctx = ContextId(session.ok_or(ControlError::NoSession)?.slot);
                Ok(count(self.ep.context_stats(ctx).ok_or(ControlError::NoSession)?.bytes_acked))
            }
            Control::Abort => {
                let ctx = ContextId(session.ok_or(ControlError::NoSession)?.slot);
                if self.upper_of(ctx).is_none() || self.ep.state(ctx).is_none() {
                    return Err(ControlError::NoSession);
                }
                self.ep.abort(cx.now(), ctx);
                self.drain_events(cx);
                Ok(ControlReply::Done)
            }
            // A message of any length is accepted and cut into packets.
            Control::GetMaxPacket => Ok(ControlReply::Size(usize::MAX)),
            Control::GetMyAddr | Control::GetPeerAddr => {
                let s = session.ok_or(ControlError::NoSession)?;
                let ctx = ContextId(s.slot);
                let (peer, port) = self.ep.peer(ctx).ok_or(ControlError::NoSession)?;
                Ok(ControlReply::Addr(if req == Control::GetMyAddr {
                    Addr::Port(port)
                } else {
                    Addr::Inet(peer)
                }))
            }
            // Anything else (`Control` is non-exhaustive: a request added
            // later): not XTP's.
            _ => Err(ControlError::Unsupported(req)),
        }
    }

    fn close(&mut self, cx: &mut C, session: SessionId) -> Result<(), CloseError> {
        let ctx = ContextId(session.slot);
        if self.upper_of(ctx).is_none() || self.ep.state(ctx).is_none() {
            return Err(CloseError::NoSession);
        }
        self.ep.close(cx.now(), ctx);
        Ok(())
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.ep.poll_timeout()
    }

    fn handle_timeout(&mut self, cx: &mut C, now: Instant) {
        self.ep.handle_timeout(now);
        self.drain_events(cx);
    }
}

/// The local XTP port an open-enable or open-disable names.
fn local_port(parts: &Participants) -> Result<u16, OpenError> {
    match parts.local.peek().copied() {
        Some(Addr::Port(port)) => Ok(port),
        _ => Err(OpenError::MissingAddr("local XTP port")),
    }
}
