//! The uniform protocol interface: the verbs every protocol implements.
//!
//! | x-kernel | here | who calls it |
//! |---|---|---|
//! | `xOpen` | [`Layer::open`] | an upper protocol or the application (active open) |
//! | `xOpenEnable` / `xOpenDisable` | [`Layer::open_enable`] / [`Layer::open_disable`] | upper layer, to accept sessions created by arriving messages (passive open) |
//! | `xDemux` | [`Layer::demux`] | the dispatcher, with a message from a lower session or the device; picks the session |
//! | `xPop` | [`Layer::pop`] | the dispatcher, right after `demux`, with the session it picked |
//! | `xPush` | [`Layer::push`] | the session's upper layer, with a message to send |
//! | `xControl` | [`Layer::control`] | anyone; typed request, typed reply |
//! | `xClose` | [`Layer::close`] | the session's upper layer |
//! | `xOpenDone` / `xCloseDone` | [`Layer::open_done`] / [`Layer::close_done`] | events, queued to the upper layer |
//!
//! Protocols never call each other's `push`/`demux` directly: they ask the
//! [`Ctx`], which queues the message for the dispatcher. So no
//! protocol is ever re-entered while it is running, and a stack of any depth
//! uses constant call depth. `open`, `open_enable` and `control` are synchronous
//! calls into another protocol (they return a value); a cycle is refused.

use core::fmt;

use std::net::SocketAddr;

use xk_msg::{BytesMut, Msg, TooShort};
use xk_time::Instant;

use crate::addr::{Addr, Participants};
use crate::arena::ArenaId;
use crate::graph::{Ctx, Event};

/// Index of a protocol in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolId(pub(crate) u16);

impl ProtocolId {
    /// Position of the protocol in the graph (order of addition).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A session: the protocol that owns it and its slot in that protocol's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    /// The protocol that owns the session.
    pub protocol: ProtocolId,
    /// The session's slot in the protocol's own arena.
    pub slot: ArenaId,
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}/s{}.{}", self.protocol.0, self.slot.index(), self.slot.generation())
    }
}

/// Whoever sits above a session: another protocol or the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Upper {
    /// The application, which receives [`Event`](crate::Event)s.
    App,
    /// A protocol of the same graph.
    Protocol(ProtocolId),
}

/// Typed control requests (`xControl` opcodes). Non-exhaustive: a protocol
/// matches the requests it answers and refuses the rest with a wildcard arm
/// (`_ => Err(ControlError::Unsupported(req))`), so a request added later
/// edits no protocol that does not answer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Control {
    /// Largest message a session can push.
    GetMaxPacket,
    /// Bytes of header this protocol adds.
    GetHeaderLen,
    /// This end's address component.
    GetMyAddr,
    /// The peer's address component.
    GetPeerAddr,
    /// Number of open sessions.
    GetSessionCount,
    /// Messages the protocol itself dropped on arrival because they did
    /// not parse (XTP: its endpoint's `malformed` counter). A frame the
    /// protocol's `demux` refused is counted by the composition instead
    /// (`ProtocolStats::demux_drops`).
    GetMalformedCount,
    /// Bytes of the session's data the peer acknowledged so far (XTP:
    /// the context's `bytes_acked`), as against what was pushed.
    GetAckedBytes,
    /// Ends the session at once, without delivering what is still queued
    /// (XTP: an abort the peer is told of); its `close_done` follows.
    Abort,
    /// The protocol's named counters, whatever it keeps ([`ControlReply::Counters`]):
    /// one request for every protocol's statistics, so a new protocol adds
    /// counters without a new request here, and tools print whatever names
    /// a layer answers (`DeviceStack::counters`).
    GetCounters,
}

/// Typed control replies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlReply {
    /// A size in bytes.
    Size(usize),
    /// An address component.
    Addr(Addr),
    /// A count.
    Count(usize),
    /// Done (a request that only acts).
    Done,
    /// Named counters ([`Control::GetCounters`]), in the protocol's order.
    Counters(Counters),
}

/// Named counters, as a protocol answers [`Control::GetCounters`].
pub type Counters = Vec<(&'static str, u64)>;

/// Why a control request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The protocol does not implement this request.
    Unsupported(Control),
    /// The session does not exist (closed, or never opened).
    NoSession,
}

/// Why an open, open_enable or open_disable failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// A participant lacks the component this layer needs.
    MissingAddr(&'static str),
    /// The address is already bound.
    InUse(Addr),
    /// open_disable of something never enabled.
    NotEnabled(Addr),
    /// The protocol does not support this kind of open.
    Unsupported(&'static str),
    /// The protocol has no lower protocol to open through.
    NoLowerProtocol,
    /// The call would re-enter a protocol that is running (a cycle in the graph).
    Cycle(ProtocolId),
    /// A lower protocol refused.
    Lower(Box<OpenError>),
}

/// Why a message was not accepted on the way up. Every such message is counted
/// and dropped, never a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DemuxError {
    /// Shorter than the header.
    Truncated(TooShort),
    /// No session and no enabled listener for the key.
    NoBinding(String),
    /// The header is inconsistent.
    Malformed(&'static str),
    /// The session it was meant for no longer exists.
    StaleSession,
    /// The target protocol is running (only possible with a cyclic graph).
    Busy(ProtocolId),
}

/// Why a push failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The session does not exist.
    NoSession,
    /// The message is longer than the session can carry.
    TooLong {
        /// Message length.
        len: usize,
        /// Largest acceptable length.
        max: usize,
    },
    /// The target protocol is running (only possible with a cyclic graph).
    Busy(ProtocolId),
    /// The session's send buffer is full: nothing was queued; push again
    /// once the peer has acknowledged data.
    WouldBlock,
    /// The session no longer sends (closed for writing, or ended).
    Closed,
}

/// Why a close failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseError {
    /// The session does not exist.
    NoSession,
    /// The target protocol is running (only possible with a cyclic graph).
    Busy(ProtocolId),
    /// The protocol does not close this session (why).
    Unsupported(&'static str),
}

macro_rules! display_via_debug {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
        impl std::error::Error for $t {}
    )*};
}
display_via_debug!(ControlError, OpenError, DemuxError, PushError, CloseError);

impl From<TooShort> for DemuxError {
    fn from(e: TooShort) -> Self {
        DemuxError::Truncated(e)
    }
}

/// `demux` then `pop`: [`Layer::receive`]'s default, for a protocol that
/// overrides `receive` for some frames and keeps the default for others.
#[inline]
pub fn demux_then_pop<M: Msg, C, L: Layer<M, C> + ?Sized>(
    layer: &mut L,
    cx: &mut C,
    lower: Option<SessionId>,
    mut msg: M,
) -> Result<(), DemuxError> {
    let session = layer.demux(cx, lower, &mut msg)?;
    layer.pop(cx, session, lower, msg)
}

/// A protocol: the object that owns sessions of one kind, with the uniform
/// interface's verbs, over the context `C` of the composition it sits in.
///
/// `M` is the message representation chosen for the whole graph ([`xk_msg::Contig`]
/// or [`xk_msg::Rope`]): a type parameter, not a feature flag, so both can be
/// built and compared in one binary (experiment E10).
///
/// `C` is what the protocol may do while a verb runs: [`Ctx`] in the dynamic
/// [`Graph`](crate::Graph) (any protocol; [`Protocol`] is a layer for it), a
/// [`DeviceCx`](crate::compiled::DeviceCx) in the compiled
/// [`Stack`](crate::compiled::Stack). A protocol written against [`Cx`] (as
/// XTP's is) is one implementation serving both: monomorphised for each
/// composition, so the compiled stack calls it with no dynamic dispatch.
pub trait Layer<M: Msg, C> {
    /// Short name for traces and graph dumps.
    fn name(&self) -> &'static str;

    /// Called once, bottom protocols first, when the graph is built: the place to
    /// `open_enable` lower protocols.
    fn init(&mut self, _cx: &mut C) -> Result<(), OpenError> {
        Ok(())
    }

    /// Active open: create a session from `upper` to the remote participant.
    fn open(&mut self, cx: &mut C, upper: Upper, parts: &Participants) -> Result<SessionId, OpenError>;

    /// Passive open: sessions for messages matching `parts.local` are created
    /// on arrival and announced to `upper` with `open_done`.
    fn open_enable(&mut self, cx: &mut C, upper: Upper, parts: &Participants) -> Result<(), OpenError>;

    /// Withdraws an `open_enable`.
    fn open_disable(&mut self, cx: &mut C, upper: Upper, parts: &Participants) -> Result<(), OpenError>;

    /// Picks (or creates) the session for a message arriving from `lower`
    /// (`None`: from the device). May inspect but should not consume the header;
    /// `pop` does that.
    fn demux(&mut self, cx: &mut C, lower: Option<SessionId>, msg: &mut M) -> Result<SessionId, DemuxError>;

    /// Processes a message for `session`: strip the header, deliver upward.
    fn pop(
        &mut self,
        cx: &mut C,
        session: SessionId,
        lower: Option<SessionId>,
        msg: M,
    ) -> Result<(), DemuxError>;

    /// A message arriving from `lower` (`None`: from the device), demuxed
    /// and popped in one call: the x-kernel's `xDemux`, which finds the
    /// session and calls `xPop` itself. The default is `demux` then `pop`.
    /// The graph calls the two separately (its demux meter times `demux`
    /// alone, E5); the compiled stack calls this, so a protocol whose `pop`
    /// reads the header `demux` already read (XTP parses the whole packet
    /// and finds the context on the way) may do both in one pass. Either
    /// way the same session is found and the same work done.
    ///
    /// `from` is the frame's source where the composition has it beside
    /// the frame ([`Cx::DEVICE_HEADER`] 0): the compiled stack, the one
    /// caller, passes `Some` for each frame from its device. `None` is for
    /// a frame with no source beside it (one from a lower protocol, or a
    /// composition that carries the peer in a device header); no
    /// composition here passes it today. The graph does not call
    /// `receive`: it calls `demux` and `pop` itself (`Graph::receive`,
    /// so its meter can time `demux`), the peer in the frame's device
    /// header.
    ///
    /// `from` is an argument, not something `demux` and `pop` can ask the
    /// context for: the address goes from the device to the protocol as a
    /// call argument, never stored in the context (docs/PERF.md, Session
    /// 19). So a protocol that needs the peer in a composition with
    /// `DEVICE_HEADER == 0` overrides `receive` (XTP does); the default
    /// drops `from`, and a protocol with only `demux` and `pop` cannot learn
    /// its peer in the compiled stack — acceptable while the compiled stack
    /// holds only XTP.
    #[inline]
    fn receive(
        &mut self,
        cx: &mut C,
        lower: Option<SessionId>,
        from: Option<SocketAddr>,
        msg: M,
    ) -> Result<(), DemuxError> {
        let _ = from;
        demux_then_pop(self, cx, lower, msg)
    }

    /// Sends a message on `session`: add the header, hand it down.
    fn push(&mut self, cx: &mut C, session: SessionId, msg: M) -> Result<(), PushError>;

    /// Sends `msg` on `session` as a piece of a message: `eom` says whether
    /// it ends the message (XTP's EOM). `push` is `push_part(.., true)`.
    /// What an application that passes on what it receives needs (an echo:
    /// each `Event::Deliver` with its `eom`), so the receiver above sees the
    /// sender's boundaries, not one message per delivered chunk. A protocol
    /// whose every push is a whole datagram has no such boundaries to keep:
    /// the default sends each piece as a message of its own.
    fn push_part(&mut self, cx: &mut C, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        let _ = eom;
        self.push(cx, session, msg)
    }

    /// A control request on a session or (with `None`) on the protocol.
    fn control(
        &mut self,
        cx: &mut C,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError>;

    /// Closes a session opened by (or announced to) the caller. Completion is
    /// reported with a `close_done` event to the session's upper layer.
    fn close(&mut self, cx: &mut C, session: SessionId) -> Result<(), CloseError>;

    /// A lower protocol created `lower` for this protocol (after `open_enable`).
    fn open_done(&mut self, _cx: &mut C, _lower: SessionId, _parts: &Participants) -> Result<(), OpenError> {
        Err(OpenError::Unsupported("open_done"))
    }

    /// A lower session of this protocol has been closed.
    fn close_done(&mut self, _cx: &mut C, _lower: SessionId) {}

    /// The device is ready for a frame: queue (with `Ctx::transmit` or
    /// `Ctx::push`) the next one this protocol held back, or several. The
    /// graph calls it each time the driver asks for a frame and none is
    /// queued, so a protocol that batches its output (XTP answers a train of
    /// packets once, as its direct driver does) may hand out one frame per
    /// call, each at the graph's time of that call.
    fn flush(&mut self, _cx: &mut C) {}

    /// [`Layer::flush`] for a device that lends its transmit buffer: write
    /// the next frame straight into `buf` and return where it goes and its
    /// length (`None`: nothing to send). A driver sends from its own buffer
    /// (the kernel copies from there), so a frame built as a message first
    /// costs one more pass over its bytes than the direct endpoint, which
    /// writes its packets into the driver's buffer. Called by the compiled
    /// stack ([`crate::compiled::Stack::poll_transmit_into`]), whose context
    /// has no device header, only when no frame is queued. The default
    /// flushes and returns `None`; the stack then copies whatever frame
    /// `flush` queued into `buf`, so a protocol without this verb loses
    /// nothing. An override must not queue a frame and also return one.
    fn flush_into(&mut self, cx: &mut C, _buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        self.flush(cx);
        None
    }

    /// The application asks for its next event and none is queued: return
    /// the next thing ready to go up (a delivery, an `OpenDone`, a
    /// `CloseDone`), taken straight from the protocol's own state: no queue
    /// between the protocol and the application, one event per call, as
    /// the direct application reads an endpoint. Called only where
    /// [`Cx::PULLS_EVENTS`]; a protocol that hands everything up at once
    /// (with `deliver`, `open_done`, `close_done`) needs nothing here.
    fn poll_up(&mut self, _cx: &mut C) -> Option<Event<M>> {
        None
    }

    /// When this protocol next wants [`Layer::handle_timeout`]: the
    /// earliest deadline of its own timer queue (the x-kernel's event
    /// manager, one queue per protocol so each picks its queue type). May
    /// be early; never late.
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    /// Runs the timers due at `now` (also `cx.now()`).
    fn handle_timeout(&mut self, _cx: &mut C, _now: Instant) {}
}

/// A protocol of the dynamic [`Graph`](crate::Graph): a [`Layer`] over the
/// graph's [`Ctx`], whatever its lifetime. Implemented by every such layer;
/// the graph holds them as `Box<dyn Protocol<M>>`.
pub trait Protocol<M: Msg>: for<'a> Layer<M, Ctx<'a, M>> {}

impl<M: Msg, T: ?Sized + for<'a> Layer<M, Ctx<'a, M>>> Protocol<M> for T {}

/// What a protocol that sits on a datagram device may do while one of its
/// verbs runs, in any composition: the part of the context the dynamic
/// graph ([`Ctx`]) and the compiled stack
/// ([`DeviceCx`](crate::compiled::DeviceCx)) both offer. A protocol written
/// against it is one implementation for both (see [`Layer`]).
pub trait Cx<M> {
    /// Bytes of device header at the front of every frame between this
    /// composition and its device: [`ADDR_HEADER`](crate::device::ADDR_HEADER)
    /// in the dynamic graph (the peer travels in the frame, see
    /// [`crate::device`]), 0 in the compiled stack (the peer travels beside
    /// the frame, typed: the source as [`Layer::receive`]'s `from`). A
    /// constant, so each composition's code has only its own case.
    const DEVICE_HEADER: usize;

    /// Whether the application pulls its events: the composition calls
    /// [`Layer::poll_up`] each time the application finds no event waiting,
    /// so a protocol may leave what is ready where it is instead of handing
    /// it up after every packet (as the direct drivers' applications read a
    /// batch of packets' data at once). `false` in the dynamic graph (every
    /// verb hands up at once, the x-kernel's upcall), `true` in the compiled
    /// stack.
    const PULLS_EVENTS: bool;

    /// The time the driver last handed in.
    fn now(&self) -> Instant;

    /// The running protocol's id (to build its [`SessionId`]s).
    fn me(&self) -> ProtocolId;

    /// Hands `msg` up from `session` to `upper`; `eom`: it ends a message
    /// (the application sees message boundaries, XTP's EOM).
    fn deliver(&mut self, upper: Upper, session: SessionId, msg: M, eom: bool);

    /// Tells `upper` that `session` was created for it by a passive open.
    fn open_done(&mut self, upper: Upper, session: SessionId, parts: Participants);

    /// Tells `upper` that `session` is closed.
    fn close_done(&mut self, upper: Upper, session: SessionId);

    /// Hands a frame for `peer` to the device. `frame` starts with
    /// [`Cx::DEVICE_HEADER`] bytes of room the composition fills (or not).
    fn transmit_to(&mut self, peer: SocketAddr, frame: BytesMut);
}
