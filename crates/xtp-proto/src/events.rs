//! What the engine tells the application ([`Event`]) and the monitor
//! ([`Trace`] through a [`Subscriber`]).

use std::net::SocketAddr;

use xk_time::{Duration, Instant};
use xtp_wire::{PacketType, ParseError, Service};

use crate::ContextId;
use crate::context::State;

/// Why a context ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Both directions closed and acknowledged.
    Graceful,
    /// We aborted.
    LocalAbort,
    /// The peer ended the context (END without a graceful close, or a DIAG).
    PeerAbort {
        /// DIAG code, if the peer sent one.
        code: Option<u32>,
        /// DIAG value.
        value: Option<u32>,
        /// DIAG text.
        text: String,
    },
    /// The retry limit ran out; `acked` bytes had been acknowledged.
    Timeout {
        /// Bytes of ours the peer acknowledged.
        acked: u64,
    },
    /// `EndpointConfig::connect_timeout` ran out and nothing at all came
    /// back from the peer: most likely no XTP endpoint listens there.
    NoAnswer {
        /// Where we tried to connect.
        peer: std::net::SocketAddr,
        /// The timeout.
        after: Duration,
    },
    /// `connect_timeout` ran out: the peer answered but never completed the
    /// key exchange (its TCNTL never arrived).
    Unconfirmed {
        /// Where we tried to connect.
        peer: std::net::SocketAddr,
        /// The timeout.
        after: Duration,
    },
    /// Admission control freed a responder context whose peer never proved
    /// its address (G27): `limit` names the limit (`half_open_timeout`,
    /// `max_half_open`, `half_open_memory`).
    Unvalidated {
        /// The limit that shed it.
        limit: &'static str,
    },
    /// We refused the peer's traffic spec: its `maxdata` (the most data
    /// it takes per packet) is below our `floor` (docs/PROTOCOL.md, G28).
    SpecRefused {
        /// The peer's `maxdata`.
        maxdata: u32,
        /// [`crate::MIN_MAXDATA`].
        floor: u32,
    },
    /// The peer refused the context (DIAG, e.g. no listener).
    Refused {
        /// DIAG code.
        code: u32,
        /// DIAG value.
        value: u32,
        /// DIAG text.
        text: String,
    },
}

/// The reason in words, for users: a refusal carries the peer's DIAG, a
/// timeout how much of our data the peer acknowledged.
impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Graceful => write!(f, "closed gracefully"),
            CloseReason::LocalAbort => write!(f, "aborted locally"),
            CloseReason::PeerAbort { text, .. } => write!(f, "the peer ended the context: {text}"),
            CloseReason::Timeout { acked } => {
                write!(f, "peer unreachable: gave up after the retry limit, {acked} bytes acknowledged")
            }
            CloseReason::Refused { code, value, text } => {
                write!(f, "refused by the peer: DIAG {code}/{value} \"{text}\"")
            }
            CloseReason::SpecRefused { maxdata, floor } => write!(
                f,
                "refused the peer's traffic spec: maxdata {maxdata} is below the {floor}-byte floor"
            ),
            CloseReason::Unvalidated { limit } => {
                write!(f, "freed before the peer proved its address (limit {limit})")
            }
            CloseReason::NoAnswer { peer, after } => {
                write!(f, "no answer from {peer} after {} (is `xpress serve` running there?)", secs(*after))
            }
            CloseReason::Unconfirmed { peer, after } => {
                write!(f, "{peer} answered but did not complete the key exchange within {}", secs(*after))
            }
        }
    }
}

/// "3 s", "1.5 s".
fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) { format!("{} s", ms / 1000) } else { format!("{} s", ms as f64 / 1000.0) }
}

/// Application events, from [`Endpoint::poll_event`](crate::Endpoint::poll_event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A listener accepted a new context.
    Incoming {
        /// The new context.
        ctx: ContextId,
        /// Who opened it.
        peer: SocketAddr,
        /// Requested service.
        service: Service,
        /// XTP port it was addressed to.
        port: u16,
    },
    /// In-order data is ready to [`read`](crate::Endpoint::read).
    Readable {
        /// The context.
        ctx: ContextId,
    },
    /// Data was lost on a NOERR context: `len` bytes from `seq` will never come.
    Gap {
        /// The context.
        ctx: ContextId,
        /// First missing byte.
        seq: u64,
        /// Missing bytes.
        len: u64,
    },
    /// Everything we wrote has been acknowledged.
    Acked {
        /// The context.
        ctx: ContextId,
        /// Bytes acknowledged in total.
        bytes: u64,
    },
    /// The peer closed its writing side; all its data has been read or is
    /// readable.
    PeerFinished {
        /// The context.
        ctx: ContextId,
    },
    /// The context is over.
    Closed {
        /// The context.
        ctx: ContextId,
        /// Why.
        reason: CloseReason,
    },
}

/// Timers of a context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// Waiting for the answer to a status request.
    Wtimer,
    /// Idle keep-alive probe.
    Ctimer,
    /// Linger of an ended context.
    Ctimeout,
    /// Rate control or pacing: tokens available again.
    Rtimer,
    /// Tail-loss probe: no report for two round trips.
    Ptimer,
    /// Loss detection: a hole has waited out the reordering window.
    LossTimer,
}

/// What changed a congestion window ([`Trace::WindowChange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowCause {
    /// An acknowledgement (growth, or a BBR model update).
    Ack,
    /// A loss began a new congestion episode.
    Loss,
    /// The retransmission timer (WTIMER) ran out.
    Timeout,
    /// The last reduction proved spurious and was undone.
    Undo,
}

/// Engine work timed as a span ([`Trace::Span`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Work {
    /// Building a packet into the caller's buffer (copy-in of the data,
    /// the checksum included).
    Build,
    /// Parsing (and verifying) an arrived datagram.
    Parse,
    /// Computing the checksum of a packet being built.
    ChecksumCompute,
    /// Verifying the checksum of an arrived packet.
    ChecksumVerify,
}

/// Why a packet was dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// It did not parse (checksum, length, …).
    Malformed(ParseError),
    /// No context and not a FIRST.
    UnknownContext,
    /// A FIRST with no matching listener.
    NoListener,
    /// Outside the receive window or already received.
    OutOfWindow,
    /// The context has ended.
    Inactive,
    /// Too many contexts from one peer.
    PeerLimit,
    /// `seq + len` of the packet's data does not fit in 64 bits: no sender
    /// can have produced it, so it is forged or corrupt.
    SequenceOverflow,
    /// A FIRST for a context closed recently (a stale duplicate).
    StaleFirst,
    /// A FIRST refused by admission control; names the limit.
    Refused(&'static str),
}

/// Events for the tracing monitor: every significant protocol action.
///
/// Data is identified across layers, threads and the two ends by its
/// `flow` and sequence number: `flow` is the initiator's key (without the
/// RTN bit) with the RTN bit set for data the initiator sends — both ends
/// know both, so a byte's (flow, seq) is the same in the sender's and the
/// receiver's traces, and a monitor can follow it (a journey) from the
/// writer's call to the reader's.
#[derive(Clone, Debug, PartialEq)]
pub enum Trace {
    /// The application queued data on a context.
    Write {
        /// Context.
        ctx: ContextId,
        /// The data flow.
        flow: u64,
        /// Sequence number of the first byte.
        seq: u64,
        /// Bytes.
        len: usize,
        /// Ends a message.
        eom: bool,
    },
    /// The application took in-order data from a context.
    Read {
        /// Context.
        ctx: ContextId,
        /// The data flow (the peer's sending flow).
        flow: u64,
        /// Sequence number of the first byte.
        seq: u64,
        /// Bytes.
        len: usize,
        /// Ends a message.
        eom: bool,
    },
    /// A packet left.
    PacketSent {
        /// Context (none for DIAG about unknown contexts).
        ctx: Option<ContextId>,
        /// The data flow the packet belongs to (see [`Trace::Write`]); 0
        /// for DIAG about unknown contexts.
        flow: u64,
        /// Type.
        ptype: PacketType,
        /// `seq` field.
        seq: u64,
        /// User data bytes carried.
        data: usize,
        /// Bytes on the wire.
        len: usize,
    },
    /// A packet arrived and was accepted.
    PacketReceived {
        /// Context.
        ctx: ContextId,
        /// The data flow the packet belongs to (the peer's sending flow).
        flow: u64,
        /// Type.
        ptype: PacketType,
        /// `seq` field.
        seq: u64,
        /// Bytes on the wire.
        len: usize,
    },
    /// A packet arrived and was dropped.
    PacketDropped {
        /// Sender.
        from: SocketAddr,
        /// Why.
        reason: DropReason,
    },
    /// Data sent again.
    Retransmit {
        /// Context.
        ctx: ContextId,
        /// The data flow.
        flow: u64,
        /// First byte.
        seq: u64,
        /// Bytes.
        len: usize,
    },
    /// A context changed state.
    StateChange {
        /// Context.
        ctx: ContextId,
        /// Old state.
        from: State,
        /// New state.
        to: State,
    },
    /// A timer fired.
    TimerFired {
        /// Context.
        ctx: ContextId,
        /// Which.
        timer: TimerKind,
    },
    /// The congestion controller changed its window or threshold: a
    /// congestion-control decision.
    WindowChange {
        /// Context.
        ctx: ContextId,
        /// What decided it.
        cause: WindowCause,
        /// New congestion window in bytes.
        cwnd: u64,
        /// New slow-start threshold in bytes (`u64::MAX`: none, or a
        /// controller without one).
        ssthresh: u64,
    },
    /// A rate-control decision: the pacing rate changed, or a packet had
    /// to wait for rate control or pacing (RTIMER set).
    RateDecision {
        /// Context.
        ctx: ContextId,
        /// Pacing rate in wire bytes per second (0: unpaced).
        rate: u64,
        /// How long the next packet waits (zero: the rate changed, nothing
        /// waits).
        wait: Duration,
    },
    /// A flow-control decision: the peer's allocation (the highest byte it
    /// lets us send, exclusive) advanced.
    FlowWindow {
        /// Context.
        ctx: ContextId,
        /// The new allocation edge (a sequence number).
        alloc: u64,
        /// Bytes we may now send beyond what the peer acknowledged.
        window: u64,
    },
    /// Engine work with a duration begins (`begin`) or ends: packet build
    /// and parse, checksum computation and verification. The engine reads
    /// no clock, and the `now` it reports is the same at both edges: a
    /// subscriber that times the work reads its own clock here.
    Span {
        /// Which work.
        work: Work,
        /// Beginning (true) or end.
        begin: bool,
        /// Bytes the work covers (the packet's length; 0 at a parse's
        /// beginning only when the datagram was empty).
        len: usize,
    },
    /// An informational DIAG arrived (the context goes on).
    DiagReceived {
        /// Context.
        ctx: ContextId,
        /// DIAG code.
        code: u32,
        /// DIAG value.
        value: u32,
    },
    /// A new RTT sample.
    RttSample {
        /// Context.
        ctx: ContextId,
        /// The sample.
        rtt: Duration,
        /// Smoothed RTT.
        srtt: Duration,
    },
}

/// Receives [`Trace`] events.
///
/// [`Subscriber::ENABLED`] is read at compile time at every tracepoint: a
/// subscriber that sets it to `false` (like [`NoTrace`], the default) costs
/// nothing — the event is not even built. A subscriber that wants events
/// but can turn them off at run time keeps it `true` and tests its own flag.
pub trait Subscriber {
    /// Whether the engine reports events to this subscriber at all.
    const ENABLED: bool = true;

    /// One event at `now`.
    fn on_trace(&mut self, now: Instant, trace: &Trace) {
        let _ = (now, trace);
    }

    /// Whether it records now, asked before an event is built (where
    /// `ENABLED`): a subscriber compiled in but not recording (the
    /// driver's, between recordings) then costs a load and a branch per
    /// tracepoint, not a call and an event, and the engine takes its
    /// untraced paths (plain packet build and parse). Must be cheap.
    #[inline]
    fn recording(&self) -> bool {
        true
    }
}

/// The subscriber that ignores everything; the engine builds no event for
/// it (`ENABLED` is false).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTrace;

impl Subscriber for NoTrace {
    const ENABLED: bool = false;
}

/// A subscriber that keeps every event (tests, small runs).
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// The events, in order.
    pub events: Vec<(Instant, Trace)>,
}

impl Subscriber for Recorder {
    fn on_trace(&mut self, now: Instant, trace: &Trace) {
        self.events.push((now, trace.clone()));
    }
}
