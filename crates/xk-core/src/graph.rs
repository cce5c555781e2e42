//! Protocol graphs and the dispatcher that runs them.
//!
//! A [`Graph`] owns its protocols and three queues: work for the dispatcher
//! (messages travelling between layers, open/close notifications), frames for
//! the device below the bottom protocol, and events for the application above.
//! Everything happens on the caller's thread: each public call runs the
//! dispatcher until its queue is empty (x-kernel used a thread per message; one
//! thread and a queue gives the same layering without locks).
//!
//! The graph does no I/O. Frames leave through [`Graph::poll_transmit`] and enter
//! through [`Graph::receive`]; whoever drives the graph (a test, the simulator,
//! a socket driver) moves them.

use std::collections::VecDeque;
use std::net::SocketAddr;

use xk_msg::{BytesMut, Msg};
use xk_time::Instant;

use crate::addr::Participants;
use crate::device::{ADDR_HEADER, write_addr};
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, Cx, DemuxError, OpenError, Protocol, ProtocolId,
    PushError, SessionId, Upper,
};

/// What the application receives from the graph.
#[derive(Debug)]
pub enum Event<M> {
    /// A message for a session the application sits on.
    Deliver {
        /// The session it arrived on.
        session: SessionId,
        /// The message, headers of every layer below removed.
        msg: M,
        /// Whether it ends a message (XTP's EOM): a protocol that delivers
        /// a message in several pieces marks the last one; one that delivers
        /// whole datagrams marks every one.
        eom: bool,
    },
    /// A session was created for the application by a passive open.
    OpenDone {
        /// The new session.
        session: SessionId,
        /// Its participants as the protocol saw them. Boxed: an open is
        /// rare, and unboxed its two address lists made every `Event` (each
        /// delivery among them, returned by value through the stack's
        /// `poll_event`) 72 bytes instead of 64 (`Event<Contig>`).
        parts: Box<Participants>,
    },
    /// A session the application sat on is closed.
    CloseDone {
        /// The closed session.
        session: SessionId,
    },
}

/// Times each protocol's `demux` for an experiment (E5: "timestamps from
/// the framework"). The framework reads no clock: the meter does, on the
/// caller's side. The graph calls `begin` right before a protocol's `demux`
/// and `end` right after it.
pub trait DemuxMeter {
    /// A `demux` starts.
    fn begin(&mut self);
    /// It returned.
    fn end(&mut self);
}

/// Counters kept per protocol by the dispatcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtocolStats {
    /// Messages accepted by `demux` + `pop`.
    pub popped: u64,
    /// Messages accepted by `push`.
    pub pushed: u64,
    /// Messages dropped on the way up (see [`Graph::last_drop`]).
    pub demux_drops: u64,
    /// Messages dropped on the way down (a full send buffer's
    /// `PushError::WouldBlock` is flow control, not counted).
    pub push_drops: u64,
}

enum Work<M> {
    Push { session: SessionId, msg: M },
    Up { to: ProtocolId, lower: Option<SessionId>, msg: M },
    OpenDone { to: ProtocolId, lower: SessionId, parts: Participants },
    CloseDone { to: ProtocolId, lower: SessionId },
}

struct Entry<M> {
    name: &'static str,
    /// `None` while the protocol is running (taken out of the table).
    protocol: Option<Box<dyn Protocol<M>>>,
    below: Vec<ProtocolId>,
    /// Where the protocol's frames for the device go instead, when it sits
    /// on a protocol offering datagrams (a `census`) rather than on the device:
    /// the session that protocol opened for it ([`Graph::carry_frames`]).
    down: Option<SessionId>,
    stats: ProtocolStats,
    last_drop: Option<String>,
}

struct Queues<M> {
    /// The time the driver last handed in (never read from a clock).
    now: Instant,
    work: VecDeque<Work<M>>,
    events: VecDeque<Event<M>>,
    transmit: VecDeque<(ProtocolId, M)>,
}

/// What a protocol may do while one of its methods runs.
pub struct Ctx<'a, M> {
    me: ProtocolId,
    table: &'a mut Vec<Entry<M>>,
    queues: &'a mut Queues<M>,
}

impl<M: Msg> Ctx<'_, M> {
    /// The time the driver last gave the graph ([`Graph::advance`]).
    pub fn now(&self) -> Instant {
        self.queues.now
    }

    /// The running protocol's id (to build its [`SessionId`]s).
    pub fn me(&self) -> ProtocolId {
        self.me
    }

    /// The protocols configured below the running one, in graph order.
    pub fn below(&self) -> &[ProtocolId] {
        &self.table[self.me.index()].below
    }

    /// The first protocol below, or `OpenError::NoLowerProtocol`.
    pub fn lower(&self) -> Result<ProtocolId, OpenError> {
        self.below().first().copied().ok_or(OpenError::NoLowerProtocol)
    }

    /// Sends `msg` down on `lower` (queued; runs after the current call).
    pub fn push(&mut self, lower: SessionId, msg: M) {
        self.queues.work.push_back(Work::Push { session: lower, msg });
    }

    /// Hands `msg` up from `session` to `upper` (queued); `eom`: it ends a
    /// message. A protocol above receives it with `pop`, which has no mark
    /// (the uniform interface's `xPop`): only the application sees it.
    pub fn deliver(&mut self, upper: Upper, session: SessionId, msg: M, eom: bool) {
        match upper {
            Upper::App => self.queues.events.push_back(Event::Deliver { session, msg, eom }),
            Upper::Protocol(to) => self.queues.work.push_back(Work::Up { to, lower: Some(session), msg }),
        }
    }

    /// Tells `upper` that `session` was created for it by a passive open.
    pub fn open_done(&mut self, upper: Upper, session: SessionId, parts: Participants) {
        match upper {
            Upper::App => self.queues.events.push_back(Event::OpenDone { session, parts: Box::new(parts) }),
            Upper::Protocol(to) => self.queues.work.push_back(Work::OpenDone { to, lower: session, parts }),
        }
    }

    /// Tells `upper` that `session` is closed.
    pub fn close_done(&mut self, upper: Upper, session: SessionId) {
        match upper {
            Upper::App => self.queues.events.push_back(Event::CloseDone { session }),
            Upper::Protocol(to) => self.queues.work.push_back(Work::CloseDone { to, lower: session }),
        }
    }

    /// Hands a frame to the device below the graph, or, for a protocol on
    /// a datagram layer ([`Graph::carry_frames`]), to that layer: its `push`
    /// on the session it opened for this protocol. One test of a field the
    /// protocol's entry already has in cache; no other cost for a protocol
    /// on the device.
    pub fn transmit(&mut self, frame: M) {
        match self.table[self.me.index()].down {
            None => self.queues.transmit.push_back((self.me, frame)),
            Some(session) => self.queues.work.push_back(Work::Push { session, msg: frame }),
        }
    }

    /// Opens a session of protocol `p` for the running protocol.
    pub fn open(&mut self, p: ProtocolId, parts: &Participants) -> Result<SessionId, OpenError> {
        let upper = Upper::Protocol(self.me);
        call(self.table, self.queues, p, |proto, cx| proto.open(cx, upper, parts))
            .unwrap_or(Err(OpenError::Cycle(p)))
    }

    /// Enables passive opens of protocol `p` for the running protocol.
    pub fn open_enable(&mut self, p: ProtocolId, parts: &Participants) -> Result<(), OpenError> {
        let upper = Upper::Protocol(self.me);
        call(self.table, self.queues, p, |proto, cx| proto.open_enable(cx, upper, parts))
            .unwrap_or(Err(OpenError::Cycle(p)))
    }

    /// A control request to protocol `p` (on `session` if given).
    pub fn control(
        &mut self,
        p: ProtocolId,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        call(self.table, self.queues, p, |proto, cx| proto.control(cx, session, req))
            .unwrap_or(Err(ControlError::Unsupported(req)))
    }

    /// Closes a lower session the running protocol opened.
    pub fn close(&mut self, session: SessionId) -> Result<(), CloseError> {
        let p = session.protocol;
        call(self.table, self.queues, p, |proto, cx| proto.close(cx, session))
            .unwrap_or(Err(CloseError::Busy(p)))
    }
}

impl<M: Msg> Cx<M> for Ctx<'_, M> {
    const DEVICE_HEADER: usize = ADDR_HEADER;
    const PULLS_EVENTS: bool = false;

    fn now(&self) -> Instant {
        Ctx::now(self)
    }
    fn me(&self) -> ProtocolId {
        self.me
    }
    fn deliver(&mut self, upper: Upper, session: SessionId, msg: M, eom: bool) {
        Ctx::deliver(self, upper, session, msg, eom)
    }
    fn open_done(&mut self, upper: Upper, session: SessionId, parts: Participants) {
        Ctx::open_done(self, upper, session, parts)
    }
    fn close_done(&mut self, upper: Upper, session: SessionId) {
        Ctx::close_done(self, upper, session)
    }
    fn transmit_to(&mut self, peer: SocketAddr, mut frame: BytesMut) {
        // The graph's frames carry the peer in their device header.
        write_addr(&mut frame[..ADDR_HEADER], peer);
        self.transmit(M::from_received(frame));
    }
}

/// Runs `f` on protocol `p` with a context for it. `None` if `p` is running
/// already (a cycle) or does not exist.
fn call<M: Msg, R>(
    table: &mut Vec<Entry<M>>,
    queues: &mut Queues<M>,
    p: ProtocolId,
    f: impl FnOnce(&mut dyn Protocol<M>, &mut Ctx<'_, M>) -> R,
) -> Option<R> {
    let mut proto = table.get_mut(p.index())?.protocol.take()?;
    let r = {
        let mut cx = Ctx { me: p, table, queues };
        f(proto.as_mut(), &mut cx)
    };
    table[p.index()].protocol = Some(proto);
    Some(r)
}

/// Assembles a graph: protocols are added bottom-up, each naming the protocols
/// below it.
pub struct GraphBuilder<M> {
    table: Vec<Entry<M>>,
}

impl<M: Msg> Default for GraphBuilder<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Msg> GraphBuilder<M> {
    /// An empty builder.
    pub fn new() -> Self {
        GraphBuilder { table: Vec::new() }
    }

    /// Adds a protocol above the given (already added) protocols.
    pub fn add(&mut self, protocol: impl Protocol<M> + 'static, below: &[ProtocolId]) -> ProtocolId {
        self.add_boxed(Box::new(protocol), below)
    }

    /// [`GraphBuilder::add`] for a protocol already boxed (built from a
    /// graph description).
    pub fn add_boxed(&mut self, protocol: Box<dyn Protocol<M>>, below: &[ProtocolId]) -> ProtocolId {
        let id = ProtocolId(u16::try_from(self.table.len()).expect("more than 65535 protocols"));
        assert!(below.iter().all(|b| b.index() < self.table.len()), "protocols are added bottom-up");
        self.table.push(Entry {
            name: protocol.name(),
            protocol: Some(protocol),
            below: below.to_vec(),
            down: None,
            stats: ProtocolStats::default(),
            last_drop: None,
        });
        id
    }

    /// Initialises every protocol, bottom first, and returns the running graph.
    pub fn build(self) -> Result<Graph<M>, (ProtocolId, OpenError)> {
        let mut g = Graph {
            meter: None,
            table: self.table,
            queues: Queues {
                now: Instant::ZERO,
                work: VecDeque::new(),
                events: VecDeque::new(),
                transmit: VecDeque::new(),
            },
        };
        for i in 0..g.table.len() {
            let p = ProtocolId(i as u16);
            let r = call(&mut g.table, &mut g.queues, p, |proto, cx| proto.init(cx));
            if let Some(Err(e)) = r {
                return Err((p, e));
            }
        }
        g.run();
        Ok(g)
    }
}

/// A running protocol graph. See the module documentation.
pub struct Graph<M> {
    table: Vec<Entry<M>>,
    queues: Queues<M>,
    meter: Option<Box<dyn DemuxMeter>>,
}

impl<M: Msg> Graph<M> {
    /// Makes `lower`, a protocol offering datagrams (its frames carry the
    /// device header, see [`crate::device`]), carry the frames `upper`
    /// hands to the device: `lower` opens a session for `upper` (its
    /// `open`, `upper` as the upper layer, no participants), and from then
    /// on `upper`'s [`Ctx::transmit`] pushes on it; `lower` hands frames
    /// from the device up to `upper` with `deliver`. A protocol written for
    /// the device (XTP) needs no change to sit on such a layer.
    /// `lower` must be configured below `upper` (refused otherwise: a
    /// protocol carrying its own frames would push them to itself forever).
    pub fn carry_frames(&mut self, upper: ProtocolId, lower: ProtocolId) -> Result<(), OpenError> {
        if self.table.get(upper.index()).is_none_or(|e| !e.below.contains(&lower)) {
            return Err(OpenError::Unsupported("carry_frames: `lower` is not configured below `upper`"));
        }
        let none = Participants::new(crate::Part::new(), crate::Part::new());
        let session = call(&mut self.table, &mut self.queues, lower, |proto, cx| {
            proto.open(cx, Upper::Protocol(upper), &none)
        })
        .unwrap_or(Err(OpenError::Cycle(lower)))?;
        self.table[upper.index()].down = Some(session);
        self.run();
        Ok(())
    }

    /// Every protocol's id and name, in the order they were added.
    pub fn protocols(&self) -> impl Iterator<Item = (ProtocolId, &'static str)> + '_ {
        self.table.iter().enumerate().map(|(i, e)| (ProtocolId(i as u16), e.name))
    }

    /// The id of the first protocol with this name.
    pub fn protocol_id(&self, name: &str) -> Option<ProtocolId> {
        self.table.iter().position(|e| e.name == name).map(|i| ProtocolId(i as u16))
    }

    /// Active open of protocol `p` by the application.
    pub fn open(&mut self, p: ProtocolId, parts: &Participants) -> Result<SessionId, OpenError> {
        let r = call(&mut self.table, &mut self.queues, p, |proto, cx| proto.open(cx, Upper::App, parts))
            .unwrap_or(Err(OpenError::Cycle(p)));
        self.run();
        r
    }

    /// Passive open of protocol `p` by the application.
    pub fn open_enable(&mut self, p: ProtocolId, parts: &Participants) -> Result<(), OpenError> {
        let r =
            call(&mut self.table, &mut self.queues, p, |proto, cx| proto.open_enable(cx, Upper::App, parts))
                .unwrap_or(Err(OpenError::Cycle(p)));
        self.run();
        r
    }

    /// Withdraws a passive open of protocol `p` by the application.
    pub fn open_disable(&mut self, p: ProtocolId, parts: &Participants) -> Result<(), OpenError> {
        let r =
            call(&mut self.table, &mut self.queues, p, |proto, cx| proto.open_disable(cx, Upper::App, parts))
                .unwrap_or(Err(OpenError::Cycle(p)));
        self.run();
        r
    }

    /// Sends `msg` on a session the application holds.
    pub fn push(&mut self, session: SessionId, msg: M) -> Result<(), PushError> {
        let r = self.do_push(session, msg, true);
        self.run();
        r
    }

    /// Sends `msg` on a session the application holds as a piece of a
    /// message, `eom` marking its end ([`Layer::push_part`](crate::Layer::push_part)).
    pub fn push_part(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        let r = self.do_push(session, msg, eom);
        self.run();
        r
    }

    /// A control request on a protocol (and session, if given).
    pub fn control(
        &mut self,
        p: ProtocolId,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        let r = call(&mut self.table, &mut self.queues, p, |proto, cx| proto.control(cx, session, req))
            .unwrap_or(Err(ControlError::Unsupported(req)));
        self.run();
        r
    }

    /// Closes a session the application holds.
    pub fn close(&mut self, session: SessionId) -> Result<(), CloseError> {
        let p = session.protocol;
        let r = call(&mut self.table, &mut self.queues, p, |proto, cx| proto.close(cx, session))
            .unwrap_or(Err(CloseError::Busy(p)));
        self.run();
        r
    }

    /// A frame from the device, for bottom protocol `p`.
    pub fn receive(&mut self, p: ProtocolId, frame: M) {
        self.up(p, None, frame);
        self.run();
    }

    /// Moves the graph's time to `now` (ignored if earlier: time never goes
    /// back). The driver calls it before handing in frames or calls; the
    /// framework never reads a clock.
    pub fn advance(&mut self, now: Instant) {
        self.queues.now = self.queues.now.max(now);
    }

    /// The graph's time.
    pub fn now(&self) -> Instant {
        self.queues.now
    }

    /// The earliest instant any protocol wants [`Graph::handle_timeout`].
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.table.iter_mut().filter_map(|e| e.protocol.as_mut()?.poll_timeout()).min()
    }

    /// Advances to `now` and runs every protocol's timers due by then,
    /// bottom protocols first, then the work they queued.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        let now = self.queues.now;
        for i in 0..self.table.len() {
            let p = ProtocolId(i as u16);
            let due =
                self.table[i].protocol.as_mut().and_then(|x| x.poll_timeout()).is_some_and(|t| t <= now);
            if due {
                call(&mut self.table, &mut self.queues, p, |proto, cx| proto.handle_timeout(cx, now));
            }
        }
        self.run();
    }

    /// The next frame for the device, with the protocol that sent it. When
    /// none is queued, every protocol is asked to [`Layer::flush`](crate::Layer::flush) first.
    pub fn poll_transmit(&mut self) -> Option<(ProtocolId, M)> {
        if self.queues.transmit.is_empty() {
            for i in 0..self.table.len() {
                call(&mut self.table, &mut self.queues, ProtocolId(i as u16), |proto, cx| proto.flush(cx));
            }
            self.run();
        }
        self.queues.transmit.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event<M>> {
        self.queues.events.pop_front()
    }

    /// Installs (or with `None` removes) a meter around every `demux`.
    pub fn set_demux_meter(&mut self, meter: Option<Box<dyn DemuxMeter>>) {
        self.meter = meter;
    }

    /// Counters of protocol `p`.
    pub fn stats(&self, p: ProtocolId) -> ProtocolStats {
        self.table[p.index()].stats
    }

    /// Why protocol `p` last dropped a message, if it ever did.
    pub fn last_drop(&self, p: ProtocolId) -> Option<&str> {
        self.table[p.index()].last_drop.as_deref()
    }

    /// The graph in Graphviz DOT (edges point down).
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph protocols {\n  rankdir=TB;\n");
        for (i, e) in self.table.iter().enumerate() {
            s.push_str(&format!("  p{i} [label=\"{}\"];\n", e.name));
            for b in &e.below {
                s.push_str(&format!("  p{i} -> p{};\n", b.0));
            }
        }
        s.push_str("}\n");
        s
    }

    fn do_push(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        let p = session.protocol;
        let r = call(&mut self.table, &mut self.queues, p, |proto, cx| {
            if eom { proto.push(cx, session, msg) } else { proto.push_part(cx, session, msg, false) }
        })
        .unwrap_or(Err(PushError::Busy(p)));
        if let Some(e) = self.table.get_mut(p.index()) {
            match &r {
                Ok(()) => e.stats.pushed += 1,
                // Flow control, not a drop: the caller keeps the message
                // and pushes again (a sender filling its buffer meets it
                // on every write; no count, no string).
                Err(PushError::WouldBlock) => {}
                Err(err) => {
                    e.stats.push_drops += 1;
                    e.last_drop = Some(err.to_string());
                }
            }
        }
        r
    }

    fn up(&mut self, p: ProtocolId, lower: Option<SessionId>, mut msg: M) {
        let meter = &mut self.meter;
        let r = call(&mut self.table, &mut self.queues, p, |proto, cx| {
            if let Some(m) = meter.as_mut() {
                m.begin();
            }
            let session = proto.demux(cx, lower, &mut msg);
            if let Some(m) = meter.as_mut() {
                m.end();
            }
            let session = session?;
            proto.pop(cx, session, lower, msg)
        })
        .unwrap_or(Err(DemuxError::Busy(p)));
        if let Some(e) = self.table.get_mut(p.index()) {
            match r {
                Ok(()) => e.stats.popped += 1,
                Err(err) => {
                    e.stats.demux_drops += 1;
                    e.last_drop = Some(err.to_string());
                }
            }
        }
    }

    /// Runs the dispatcher until no work is left.
    fn run(&mut self) {
        while let Some(w) = self.queues.work.pop_front() {
            match w {
                Work::Push { session, msg } => {
                    // Failures are counted in the stats of the refusing protocol.
                    let _ = self.do_push(session, msg, true);
                }
                Work::Up { to, lower, msg } => self.up(to, lower, msg),
                Work::OpenDone { to, lower, parts } => {
                    let r = call(&mut self.table, &mut self.queues, to, |proto, cx| {
                        proto.open_done(cx, lower, &parts)
                    });
                    if let Some(Err(e)) = r {
                        self.table[to.index()].last_drop = Some(format!("open_done refused: {e}"));
                    }
                }
                Work::CloseDone { to, lower } => {
                    call(&mut self.table, &mut self.queues, to, |proto, cx| proto.close_done(cx, lower));
                }
            }
        }
    }
}
