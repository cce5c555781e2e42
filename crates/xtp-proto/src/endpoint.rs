//! The endpoint: owns contexts, routes packets to them, runs their timers and
//! collects their output. The sans-I/O surface of the crate.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;

use bytes::Bytes;
use xk_core::{Arena, ArenaId, DemuxMap};
use xk_rand::Rng;
use xk_time::{Duration, HeapQueue, Instant, TimerId, TimerQueue};
use xtp_wire::{
    Address, Body, DiagSegment, HeaderRepr, Options, PacketRepr, PacketType, RTN, Verify, diag_code,
    diag_value,
};

use crate::admission::RecentKeys;
use crate::config::{ContextConfig, EndpointConfig};
use crate::context::{Chunk, Context, Sink, State};
use crate::events::{DropReason, Event, NoTrace, Subscriber, Trace, Work};
use crate::peers::{PeerChange, PeerWatch};
use crate::rate::TokenBucket;

/// Names a context of an endpoint. Stale once the context is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(pub(crate) ArenaId);

impl ContextId {
    /// The context's slot number (reused after the context is freed; the
    /// tracing monitor names contexts by it).
    pub fn index(self) -> u32 {
        self.0.index()
    }
}

impl fmt::Display for ContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ctx{}.{}", self.0.index(), self.0.generation())
    }
}

/// A datagram to send: `buf[..len]` goes to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub dst: SocketAddr,
    /// Bytes written into the caller's buffer.
    pub len: usize,
}

/// Payload copies made at one place: how many copy operations and how many
/// payload bytes they moved. Counted where the copy is made, so a copy
/// added or removed there shows here (E9 counts the whole path from these).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyCount {
    /// Copy operations (one per packet, or per joined message).
    pub ops: u64,
    /// Payload bytes copied.
    pub bytes: u64,
}

impl CopyCount {
    /// Counts one copy of `bytes` payload bytes.
    pub fn add(&mut self, bytes: usize) {
        self.ops += 1;
        self.bytes += bytes as u64;
    }

    /// What was counted since `earlier` (a snapshot of the same counter).
    pub fn since(self, earlier: CopyCount) -> CopyCount {
        CopyCount { ops: self.ops - earlier.ops, bytes: self.bytes - earlier.bytes }
    }
}

/// Counters of one context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextStats {
    /// User bytes sent (first transmissions and retransmissions).
    pub bytes_sent: u64,
    /// User bytes retransmitted.
    pub retransmitted: u64,
    /// User bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// User bytes received (duplicates included).
    pub bytes_received: u64,
    /// Payload copied while cutting a packet's data out of the send buffer:
    /// written pieces (`write` calls) joined into one packet. Data that lies
    /// in one written piece goes out as a slice of it, uncopied.
    pub copied_joining: CopyCount,
    /// Payload copied into the caller's packet buffer by `poll_transmit`
    /// (one copy per data packet; the one copy the engine makes on send).
    pub copied_into_packets: CopyCount,
    /// Packets sent.
    pub packets_sent: u64,
    /// WTIMER expiries.
    pub timeouts: u64,
    /// Timeouts found spurious afterwards (the peer had the data; undone).
    pub spurious_timeouts: u64,
    /// Reports that revealed loss.
    pub loss_reports: u64,
    /// Retransmitted bytes found spurious afterwards (the original arrived).
    pub spurious_retransmitted: u64,
    /// Window reductions: loss episodes and timeouts.
    pub congestion_events: u64,
    /// Reductions undone because they turned out spurious.
    pub undone: u64,
    /// Status requests sent as tail-loss probes (no reduction).
    pub tail_probes: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// Congestion window now, bytes (`u64::MAX`: none).
    pub cwnd: u64,
    /// Bytes the sender may have in flight now: the smaller of the window and
    /// the peer's allocation.
    pub send_window: u64,
    /// Bytes in flight now.
    pub in_flight: u64,
    /// The rate data may leave at now, bytes/s: the congestion controller's
    /// pacing rate or XTP rate control (RATE), whichever is lower; `None`:
    /// neither paces (data goes as the window allows).
    pub pacing_rate: Option<u64>,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// Smallest RTT seen, if measured.
    pub min_rtt: Option<Duration>,
    /// Current retransmission timeout (WTIMER).
    pub rto: Duration,
    /// Our receive buffer now (grows with dynamic right-sizing).
    pub recv_buffer: u64,
    /// The congestion controller's name.
    pub congestion: &'static str,
    /// DIAG packets received (those that did not end the context included).
    pub diags_received: u64,
    /// Received bytes dropped on arrival: beyond the advertised window, or
    /// beyond the bound on out-of-order segments (or unread NOERR data).
    pub recv_dropped: u64,
}

/// Counters of the endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams handed in.
    pub datagrams_in: u64,
    /// Datagrams handed out.
    pub datagrams_out: u64,
    /// Dropped: did not parse (checksum, length, type, …).
    pub malformed: u64,
    /// Dropped: no context for the key.
    pub unknown_context: u64,
    /// FIRSTs refused: no listener.
    pub no_listener: u64,
    /// DIAG packets sent.
    pub diags_sent: u64,
    /// DIAG packets not sent because of the rate limit.
    pub diags_suppressed: u64,
    /// Dropped: the data's `seq + len` overflows 64 bits (forged or corrupt).
    pub sequence_overflow: u64,
    /// FIRSTs refused: they name a context closed recently (stale duplicates).
    pub stale_first: u64,
    /// Ended contexts freed with received data the application never read
    /// (`unread_hold` ran out).
    pub unread_dropped: u64,
    /// Half-open contexts now (responders whose peer has not yet addressed
    /// us by our key, G27).
    pub half_open: u64,
    /// Bytes accounted to half-open contexts now (state + datagrams).
    pub half_open_bytes: u64,
    /// Half-open contexts shed for newer ones (`max_half_open` or
    /// `half_open_memory` reached).
    pub half_open_evicted: u64,
    /// Half-open contexts freed by `half_open_timeout`.
    pub half_open_expired: u64,
    /// FIRSTs refused: `max_contexts` reached.
    pub refused_max_contexts: u64,
    /// FIRSTs refused: `max_contexts_per_peer` reached.
    pub refused_peer_limit: u64,
    /// Refusal DIAGs not sent because of `refusal_rate`.
    pub refusals_suppressed: u64,
    /// Times a packet towards an unvalidated peer was held back by the
    /// amplification bound.
    pub amplification_blocked: u64,
    /// FIRSTs that created a responder context.
    pub accepted: u64,
    /// Datagrams sent by contexts whose peer had not proved its address
    /// (half-open responders: under a spoofed flood, what went to spoofed
    /// addresses; a real client validates within one round trip).
    pub unvalidated_datagrams_out: u64,
    /// Bytes of those datagrams (XTP packets, without UDP/IP headers).
    pub unvalidated_bytes_out: u64,
    /// Keys of freed contexts forgotten before `recent_key_hold` because the
    /// table was full (`recent_keys_max`, G25): a churn faster than
    /// `recent_keys_max / recent_key_hold` per second.
    pub recent_keys_forgotten: u64,
    /// Keys held in the recent-key table now (gauge, G25).
    pub recent_keys: u64,
}

impl EndpointStats {
    /// Every counter with its name, in declaration order (for tools that
    /// print them, e.g. as JSON).
    pub fn fields(&self) -> [(&'static str, u64); 23] {
        [
            ("datagrams_in", self.datagrams_in),
            ("datagrams_out", self.datagrams_out),
            ("malformed", self.malformed),
            ("unknown_context", self.unknown_context),
            ("no_listener", self.no_listener),
            ("diags_sent", self.diags_sent),
            ("diags_suppressed", self.diags_suppressed),
            ("sequence_overflow", self.sequence_overflow),
            ("stale_first", self.stale_first),
            ("unread_dropped", self.unread_dropped),
            ("half_open", self.half_open),
            ("half_open_bytes", self.half_open_bytes),
            ("half_open_evicted", self.half_open_evicted),
            ("half_open_expired", self.half_open_expired),
            ("refused_max_contexts", self.refused_max_contexts),
            ("refused_peer_limit", self.refused_peer_limit),
            ("refusals_suppressed", self.refusals_suppressed),
            ("amplification_blocked", self.amplification_blocked),
            ("accepted", self.accepted),
            ("unvalidated_datagrams_out", self.unvalidated_datagrams_out),
            ("unvalidated_bytes_out", self.unvalidated_bytes_out),
            ("recent_keys_forgotten", self.recent_keys_forgotten),
            ("recent_keys", self.recent_keys),
        ]
    }
}

/// Why `connect` failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The configuration cannot work.
    InvalidConfig(&'static str),
    /// A limit of the endpoint is reached; names it and its value.
    Full {
        /// The limit's name in `EndpointConfig`.
        limit: &'static str,
        /// Its value.
        value: u64,
    },
}

/// Why `listen` failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenError {
    /// Something already listens on the port.
    PortInUse(u16),
    /// The endpoint's or the listener's configuration cannot work.
    InvalidConfig(&'static str),
}

/// Why a write failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// No such context (closed and freed, or never opened).
    UnknownContext,
    /// The writing side is closed or the context has ended.
    Closed,
    /// The send buffer is full (`ContextConfig::send_buffer`, or twice the
    /// send window): nothing was queued; write again once data has been
    /// acknowledged (`Event::Acked`, or poll `Endpoint::can_write`).
    WouldBlock,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::InvalidConfig(w) => write!(f, "invalid context configuration: {w}"),
            ConnectError::Full { limit, value } => {
                write!(f, "the endpoint is full: {limit} ({value}) reached")
            }
        }
    }
}
impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenError::PortInUse(p) => write!(f, "XTP port {p} already has a listener"),
            ListenError::InvalidConfig(w) => write!(f, "invalid listener configuration: {w}"),
        }
    }
}
impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::UnknownContext => write!(f, "no such context"),
            WriteError::Closed => write!(f, "the context's writing side is closed"),
            WriteError::WouldBlock => {
                write!(f, "the send buffer is full; write again once data is acknowledged")
            }
        }
    }
}
impl std::error::Error for ConnectError {}
impl std::error::Error for ListenError {}
impl std::error::Error for WriteError {}

struct PendingDiag {
    /// A refusal by a limit (its own rate limit, `refusal_rate`).
    refusal: bool,
    dst: SocketAddr,
    key: u64,
    code: u32,
    value: u32,
    text: &'static str,
}

/// An XTP endpoint: all contexts bound to one socket (or simulated address).
///
/// Call order, as in quinn-proto: feed input with `handle_datagram` and
/// `handle_timeout`, issue commands, then drain `poll_transmit` until it
/// returns `None`, read `poll_event`, and come back at `poll_timeout`. `now`
/// must never go backwards.
///
/// `Q` is the timer queue (one entry per context with a deadline). Any
/// `xk_time` queue fits; [`HeapQueue`] is the default because it re-arms in
/// O(1) and its expiry cost does not depend on how far away deadlines are
/// (see `docs/ARCHITECTURE.md`, "XTP in the framework", for why the timing
/// wheel is not the default).
///
/// `CACHE` chooses the one-entry cache of the `(peer, key)` demux map at
/// compile time (on by default; `false` is the no-cache variant of E5 and
/// E10, with no cache test left in its lookups).
pub struct Endpoint<
    S: Subscriber = NoTrace,
    Q: TimerQueue<ArenaId> = HeapQueue<ArenaId>,
    const CACHE: bool = true,
> {
    cfg: EndpointConfig,
    rng: Rng,
    contexts: Arena<Context>,
    by_peer: DemuxMap<(SocketAddr, u64), ArenaId, CACHE>,
    per_peer: DemuxMap<SocketAddr, usize>,
    listeners: DemuxMap<u16, ContextConfig>,
    timers: Q,
    /// Each context's entry in `timers` and its instant: at or before the
    /// context's real next deadline (a deadline that moved later keeps the
    /// earlier entry, see `refresh`).
    timer_of: Vec<Option<(TimerId, Instant)>>,
    ready: VecDeque<ArenaId>,
    in_ready: Vec<bool>,
    events: VecDeque<Event>,
    diags: VecDeque<PendingDiag>,
    diag_bucket: TokenBucket,
    refusal_bucket: TokenBucket,
    recent: RecentKeys,
    /// Half-open responder contexts in admission order (entries of
    /// contexts since validated or freed are skipped when met).
    half_open: VecDeque<ArenaId>,
    peers: PeerWatch,
    subscriber: S,
    stats: EndpointStats,
}

impl Endpoint<NoTrace> {
    /// An endpoint without tracing. `seed` drives key choice and hashing.
    pub fn new(cfg: EndpointConfig, seed: u64) -> Self {
        Endpoint::with_subscriber(cfg, seed, NoTrace)
    }
}

impl<S: Subscriber> Endpoint<S> {
    /// An endpoint reporting every protocol action to `subscriber`.
    pub fn with_subscriber(cfg: EndpointConfig, seed: u64, subscriber: S) -> Self {
        Endpoint::with_timer_queue(cfg, seed, subscriber)
    }
}

impl<S: Subscriber, Q: TimerQueue<ArenaId> + Default, const CACHE: bool> Endpoint<S, Q, CACHE> {
    /// An endpoint with the timer queue `Q` (the type picks it; it starts
    /// empty), reporting every protocol action to `subscriber`. Keys, hash
    /// seeds and so every seeded run's trace are the same whatever `Q` is.
    pub fn with_timer_queue(cfg: EndpointConfig, seed: u64, subscriber: S) -> Self {
        let mut rng = Rng::derive(seed, "xtp-endpoint");
        let diag_bucket =
            TokenBucket::new(u64::from(cfg.diag_rate), u64::from(cfg.diag_rate.max(1)), Instant::ZERO);
        let h1 = rng.next_u64();
        let h2 = rng.next_u64();
        let h3 = rng.next_u64();
        let refusal_bucket =
            TokenBucket::new(u64::from(cfg.refusal_rate), u64::from(cfg.refusal_rate.max(1)), Instant::ZERO);
        let recent = RecentKeys::new(cfg.recent_key_hold, cfg.recent_keys_max, rng.next_u64());
        let by_peer = DemuxMap::with_seed(h1);
        Endpoint {
            cfg,
            rng,
            contexts: Arena::new(),
            by_peer,
            per_peer: DemuxMap::new(h2),
            listeners: DemuxMap::new(h3),
            timers: Q::default(),
            timer_of: Vec::new(),
            ready: VecDeque::new(),
            in_ready: Vec::new(),
            events: VecDeque::new(),
            diags: VecDeque::new(),
            diag_bucket,
            refusal_bucket,
            recent,
            half_open: VecDeque::new(),
            // Derived, not drawn: another draw would change every key the
            // generator gives after it, and with them seeded runs' traces.
            peers: PeerWatch::new(h2.rotate_left(17) ^ 0x7065_6572),
            subscriber,
            stats: EndpointStats::default(),
        }
    }
}

impl<S: Subscriber, Q: TimerQueue<ArenaId>, const CACHE: bool> Endpoint<S, Q, CACHE> {
    /// The subscriber.
    pub fn subscriber(&self) -> &S {
        &self.subscriber
    }

    /// Mutable access to the subscriber.
    pub fn subscriber_mut(&mut self) -> &mut S {
        &mut self.subscriber
    }

    /// Endpoint counters.
    pub fn stats(&self) -> EndpointStats {
        let (held, forgotten) = self.recent.counts();
        EndpointStats { recent_keys: held, recent_keys_forgotten: forgotten, ..self.stats }
    }

    /// Counters of a context.
    pub fn context_stats(&self, ctx: ContextId) -> Option<ContextStats> {
        self.contexts.get(ctx.0).map(|c| c.stats())
    }

    /// State of a context (`None` once freed).
    pub fn state(&self, ctx: ContextId) -> Option<State> {
        self.contexts.get(ctx.0).map(|c| c.state)
    }

    /// A context's peer and the XTP port it was opened to or accepted on.
    pub fn peer(&self, ctx: ContextId) -> Option<(SocketAddr, u16)> {
        self.contexts.get(ctx.0).map(|c| (c.peer, c.port))
    }

    /// Number of contexts held (live and lingering).
    pub fn context_count(&self) -> usize {
        self.contexts.len()
    }

    /// Whether every context held has ended and only lingers (to answer a
    /// peer that missed our last acknowledgement): closing the endpoint now
    /// loses no data either way. A context still sending or receiving, or
    /// waiting for its close to be acknowledged, makes this false.
    pub fn only_lingering(&self) -> bool {
        self.contexts.iter().all(|(_, c)| c.state == State::Inactive)
    }

    /// Accepts FIRSTs addressed to XTP `port` (0 also catches null addresses),
    /// creating contexts configured by `cfg` (the FIRST's service and options
    /// take precedence).
    pub fn listen(&mut self, port: u16, cfg: ContextConfig) -> Result<(), ListenError> {
        // As `connect` checks: below MIN_PACKET even an IPv4 peer's spec
        // (its maxdata cut to our path) leaves no room for our TCNTL, and
        // a responder that can never answer should say so here, not fall
        // silent at the first FIRST. IPv6 peers (125) are checked per FIRST.
        if self.cfg.max_packet < crate::context::MIN_PACKET {
            return Err(ListenError::InvalidConfig(
                "max_packet must be at least 105 bytes (an IPv6 FIRST with BTAG and one byte of data)",
            ));
        }
        if self.listeners.contains(&port) {
            return Err(ListenError::PortInUse(port));
        }
        self.listeners.install(port, cfg);
        Ok(())
    }

    /// Stops accepting on `port`.
    pub fn unlisten(&mut self, port: u16) -> bool {
        self.listeners.erase(&port).is_some()
    }

    /// Opens a context to XTP `port` at `peer`. Nothing is sent until
    /// `poll_transmit`; data written before then rides in the FIRST.
    pub fn connect(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        port: u16,
        cfg: ContextConfig,
    ) -> Result<ContextId, ConnectError> {
        if cfg.mss == 0 {
            return Err(ConnectError::InvalidConfig("mss must be at least 1"));
        }
        if cfg.recv_buffer == 0 {
            return Err(ConnectError::InvalidConfig("recv_buffer must be at least 1"));
        }
        if self.contexts.len() >= self.cfg.max_contexts {
            return Err(ConnectError::Full { limit: "max_contexts", value: self.cfg.max_contexts as u64 });
        }
        // Checked for the peer's family: over IPv6 the engine takes 20
        // bytes more of `max_packet` for the IP header, and a FIRST there
        // (40-byte address) needs all of MIN_PACKET. Checked against the
        // IPv4 figure alone, 105 let an IPv6 FIRST with BTAG be 104 bytes
        // of segments in 85 of packet: nothing could ever leave.
        let v6 = if peer.is_ipv6() { 20 } else { 0 };
        if self.cfg.max_packet < crate::context::MIN_PACKET + v6 {
            return Err(ConnectError::InvalidConfig(if v6 == 0 {
                "max_packet must be at least 105 bytes (an IPv6 FIRST with BTAG and one byte of data)"
            } else {
                "max_packet must be at least 125 bytes towards an IPv6 peer (105 for an IPv6 FIRST \
                 with BTAG and one byte of data, and IPv6's header is 20 bytes longer than IPv4's)"
            }));
        }
        let id = self.new_context(now, peer, port, true, cfg, None);
        self.wake(id.0);
        Ok(id)
    }

    fn new_context(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        port: u16,
        initiator: bool,
        cfg: ContextConfig,
        peer_key: Option<u64>,
    ) -> ContextId {
        // Reserve the slot first: the key embeds its index (digest §4.2 [P]).
        let slot = self.contexts.insert(Context::new(peer, port, initiator, cfg, &self.cfg, now));
        let key = ((u64::from(slot.index()) + 1) << 32 | u64::from(self.rng.next_u32())) & !RTN;
        let id = ContextId(slot);
        if let Some(c) = self.contexts.get_mut(slot) {
            c.id = id;
            c.local_key = key;
            if let Some(k) = peer_key {
                c.set_peer_key(k);
            }
        }
        if let Some(k) = peer_key {
            self.by_peer.install((peer, k & !RTN), slot);
        }
        let n = self.per_peer.get(&peer).copied().unwrap_or(0);
        self.per_peer.install(peer, n + 1);
        id
    }

    /// Queues data on a context. `eom` ends a message; `btag` tags the message
    /// this write starts.
    pub fn write(
        &mut self,
        now: Instant,
        ctx: ContextId,
        data: Bytes,
        eom: bool,
        btag: Option<u64>,
    ) -> Result<(), WriteError> {
        let c = self.contexts.get_mut(ctx.0).ok_or(WriteError::UnknownContext)?;
        if !c.state.is_live() || c.state.is_write_closed() || c.send.fin.is_some() {
            return Err(WriteError::Closed);
        }
        // Backpressure: an application writing faster than the peer reads
        // would otherwise queue without bound. An empty write (ending a
        // message) costs nothing and always passes.
        if !data.is_empty() && c.send.unacked() >= c.send_limit() {
            return Err(WriteError::WouldBlock);
        }
        let len = data.len();
        c.write(data, eom, btag);
        if S::ENABLED {
            let t = Trace::Write { ctx, flow: c.flow(true), seq: c.send.end - len as u64, len, eom };
            self.subscriber.on_trace(now, &t);
        }
        self.wake(ctx.0);
        Ok(())
    }

    /// Whether `write` would accept data on `ctx` now (live, writing side
    /// open, send buffer not full).
    pub fn can_write(&self, ctx: ContextId) -> bool {
        self.contexts.get(ctx.0).is_some_and(|c| {
            c.state.is_live()
                && !c.state.is_write_closed()
                && c.send.fin.is_none()
                && c.send.unacked() < c.send_limit()
        })
    }

    /// Whether a writer that keeps at most `unsent_bound` bytes waiting
    /// behind the windows may write now: the context takes writes
    /// ([`Endpoint::can_write`]) and fewer than `unsent_bound` bytes are
    /// still unsent. The bound is on *unsent* bytes, not unacknowledged
    /// ones: while a loss holds the cumulative acknowledgement back for a
    /// round trip, unacknowledged bytes stand still at the window, and a
    /// writer bounded on them stops feeding a sender that has room (the
    /// feeder bug of issue #12). Memory stays bounded by `can_write`.
    pub fn writable(&self, ctx: ContextId, unsent_bound: u64) -> bool {
        self.can_write(ctx) && self.unsent_bytes(ctx) < unsent_bound
    }

    /// Reports validated peers from now on ([`Endpoint::poll_peer_change`]),
    /// or stops (forgetting what was reported). For a driver that gives a
    /// validated peer a socket of its own, out of a flood's way.
    pub fn watch_peers(&mut self, on: bool) {
        self.peers.set(on);
    }

    /// The next change in the set of validated peers, while watching.
    pub fn poll_peer_change(&mut self) -> Option<PeerChange> {
        self.peers.poll()
    }

    /// Takes the next chunk of in-order data.
    pub fn read(&mut self, now: Instant, ctx: ContextId) -> Option<Chunk> {
        let c = self.contexts.get_mut(ctx.0)?;
        // Nothing to read changes nothing: no wake (the reader that drains
        // per packet, as a protocol graph hands data up, ends every packet
        // with this call).
        let k = c.read(now)?;
        if S::ENABLED {
            let t = Trace::Read { ctx, flow: c.flow(false), seq: k.seq, len: k.data.len(), eom: k.eom };
            self.subscriber.on_trace(now, &t);
        }
        self.wake(ctx.0);
        Some(k)
    }

    /// Signals `ctx` readable again, if it is, behind the events waiting
    /// now but ahead of any later event of its own (its data is handed up
    /// before, say, its `Closed`): a reader that stops reading one context
    /// to let other contexts' events go first (the compiled stack's
    /// `poll_up`) comes back to it in turn. The scan runs only then.
    // Cold and out of line: kept off the per-delivery path it branches from.
    #[cold]
    #[inline(never)]
    pub(crate) fn requeue_readable(&mut self, ctx: ContextId) {
        if !self.contexts.get(ctx.0).is_some_and(|c| c.recv.readable()) {
            return;
        }
        let own = |e: &Event| match e {
            Event::Incoming { ctx: c, .. }
            | Event::Readable { ctx: c }
            | Event::Gap { ctx: c, .. }
            | Event::Acked { ctx: c, .. }
            | Event::PeerFinished { ctx: c }
            | Event::Closed { ctx: c, .. } => *c == ctx,
        };
        let at = self.events.iter().position(own).unwrap_or(self.events.len());
        self.events.insert(at, Event::Readable { ctx });
    }

    /// Bytes readable now.
    pub fn readable_bytes(&self, ctx: ContextId) -> u64 {
        self.contexts.get(ctx.0).map_or(0, |c| c.recv.ready_bytes())
    }

    /// Bytes written but not yet acknowledged.
    pub fn unacked_bytes(&self, ctx: ContextId) -> u64 {
        self.contexts.get(ctx.0).map_or(0, |c| c.send.unacked())
    }

    /// Bytes written and not yet sent once: what waits behind the windows.
    /// Unlike [`Endpoint::unacked_bytes`] it does not grow while a loss
    /// holds the cumulative acknowledgement back, so a writer that keeps it
    /// small still keeps the sender supplied through a recovery.
    pub fn unsent_bytes(&self, ctx: ContextId) -> u64 {
        self.contexts.get(ctx.0).map_or(0, |c| c.send.unsent())
    }

    /// Closes our writing side (graceful close, digest §5.7).
    pub fn close(&mut self, now: Instant, ctx: ContextId) {
        if let Some(c) = self.contexts.get_mut(ctx.0) {
            let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
            c.close_write(&mut sink);
        }
        self.wake(ctx.0);
    }

    /// Aborts a context: END and a DIAG "context abandoned" go to the peer.
    pub fn abort(&mut self, now: Instant, ctx: ContextId) {
        if let Some(c) = self.contexts.get_mut(ctx.0) {
            let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
            c.abort(now, &self.cfg, &mut sink);
        }
        self.wake(ctx.0);
    }

    /// Sends one datagram: service 1 (unacknowledged) or 2 (acknowledged).
    /// Returns the context, which ends by itself.
    pub fn send_datagram(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        port: u16,
        data: Bytes,
        acknowledged: bool,
    ) -> Result<ContextId, ConnectError> {
        let service =
            if acknowledged { xtp_wire::Service::AckedDatagram } else { xtp_wire::Service::Datagram };
        let id = self.connect(now, peer, port, ContextConfig::new(service))?;
        let _ = self.write(now, id, data, true, None);
        self.close(now, id);
        Ok(id)
    }

    /// The next application event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether [`Endpoint::poll_event`] has something (a framework checks
    /// it inline before draining, which it does after every frame).
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// When to call `handle_timeout` next. It may be earlier than any
    /// context's real deadline (a deadline that moved later is re-filed only
    /// when its old instant comes); calling `handle_timeout` then does
    /// nothing but file the real one.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// Re-files a context's timer and queues it for sending if it has output.
    fn wake(&mut self, slot: ArenaId) {
        self.refresh(slot, true);
    }

    /// Re-files a context's timer; with `ready`, also queues it for sending
    /// if it has output. (A context that just produced nothing is blocked —
    /// by flow, congestion or rate control — until new input wakes it.)
    fn refresh(&mut self, slot: ArenaId, ready: bool) {
        let idx = slot.index() as usize;
        if self.timer_of.len() <= idx {
            self.timer_of.resize(idx + 1, None);
            self.in_ready.resize(idx + 1, false);
        }
        let Some(c) = self.contexts.get(slot) else { return };
        let want = c.next_deadline();
        let have = self.timer_of[idx].map(|(_, t)| t);
        // A deadline that moved later keeps the earlier entry: it fires
        // early, the context finds nothing due and is filed again then.
        // WTIMER moves later on every acknowledgement, so re-filing each
        // time cost two heap operations per packet — among 10,000 idle
        // contexts' timers, cache misses the benchmark measured (issue #13).
        let keep = matches!((want, have), (Some(w), Some(h)) if w > h);
        if want != have && !keep {
            if let Some((id, _)) = self.timer_of[idx].take() {
                self.timers.cancel(id);
            }
            if let Some(t) = want {
                self.timer_of[idx] = Some((self.timers.schedule(t, slot), t));
            }
        }
        if ready && c.wants_to_send() && !self.in_ready[idx] {
            self.in_ready[idx] = true;
            self.ready.push_back(slot);
        }
    }

    fn free(&mut self, now: Instant, slot: ArenaId) {
        if let Some(c) = self.contexts.remove(slot) {
            if !c.initiator && c.peer_key_known {
                self.recent.insert(now, c.peer, c.peer_key);
            }
            if c.freed_unread {
                self.stats.unread_dropped += 1;
            }
            if c.expired_half_open {
                self.stats.half_open_expired += 1;
            }
            if c.half_open {
                self.stats.half_open -= 1;
                self.stats.half_open_bytes -= half_open_cost(&c);
            }
            // Both roles may be indexed (the responder under the initiator's
            // key, the initiator under the responder's); erase only our own
            // entry, never one a colliding context installed.
            if c.peer_key_known && self.by_peer.get(&(c.peer, c.peer_key)) == Some(&slot) {
                self.by_peer.erase(&(c.peer, c.peer_key));
            }
            if let Some(n) = self.per_peer.get(&c.peer).copied() {
                if n <= 1 {
                    self.per_peer.erase(&c.peer);
                    self.peers.gone(c.peer);
                } else {
                    self.per_peer.install(c.peer, n - 1);
                }
            }
            let idx = slot.index() as usize;
            if let Some((id, _)) = self.timer_of.get_mut(idx).and_then(Option::take) {
                self.timers.cancel(id);
            }
        }
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(e) = self.timers.poll_expired(now) {
            let slot = e.value;
            let idx = slot.index() as usize;
            if self.timer_of.get(idx).and_then(|t| *t).map(|(id, _)| id) == Some(e.id) {
                self.timer_of[idx] = None;
            }
            let free = match self.contexts.get_mut(slot) {
                Some(c) => {
                    let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
                    c.on_timeout(now, &self.cfg, &mut sink)
                }
                None => continue,
            };
            if free {
                self.free(now, slot);
            } else {
                self.wake(slot);
            }
        }
    }

    fn queue_diag(&mut self, dst: SocketAddr, key: u64, code: u32, value: u32, text: &'static str) {
        self.diags.push_back(PendingDiag { refusal: false, dst, key, code, value, text });
        if self.diags.len() > 64 {
            self.diags.pop_front();
            self.stats.diags_suppressed += 1;
        }
    }

    /// A FIRST refused by a limit: counted by the caller, answered with
    /// DIAG "context refused / no resource" naming the limit, within
    /// `refusal_rate`.
    fn refuse(&mut self, now: Instant, from: SocketAddr, key: u64, limit: &'static str, text: &'static str) {
        self.dropped(now, from, DropReason::Refused(limit));
        if !self.refusal_bucket.try_take(now, 1) {
            self.stats.refusals_suppressed += 1;
            return;
        }
        self.diags.push_back(PendingDiag {
            refusal: true,
            dst: from,
            key: key | RTN,
            code: diag_code::CONTEXT_REFUSED,
            value: diag_value::NO_RESOURCE,
            text,
        });
        if self.diags.len() > 64 {
            self.diags.pop_front();
            self.stats.refusals_suppressed += 1;
        }
    }

    fn dropped(&mut self, now: Instant, from: SocketAddr, reason: DropReason) {
        if S::ENABLED {
            self.subscriber.on_trace(now, &Trace::PacketDropped { from, reason });
        }
    }

    /// A datagram arrived from `from`.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: Bytes) {
        self.handle(now, from, data, None);
    }

    /// The context a datagram from `from` whose header carries `key` belongs
    /// to, found exactly as [`Endpoint::handle_datagram`] finds it: by the
    /// slot a return key embeds, or through the `(peer, key)` demux map and
    /// its one-entry cache. `None`: no context (a FIRST to accept, or a key
    /// to refuse). `is_diag`: the packet is a DIAG (the only type an
    /// initiator accepts under the responder's key).
    ///
    /// With [`Endpoint::handle_demuxed`] this is `handle_datagram` in two
    /// steps, for a framework that demultiplexes before it processes (the
    /// UPI's `demux` and `pop`); one lookup either way.
    pub fn lookup(&mut self, from: SocketAddr, key: u64, is_diag: bool) -> Option<ContextId> {
        if key & RTN != 0 {
            let k = key & !RTN;
            let index = (k >> 32).checked_sub(1).and_then(|i| u32::try_from(i).ok());
            index
                .and_then(|i| self.contexts.get_by_index(i))
                .filter(|(_, c)| c.local_key == k && c.peer == from)
                .map(|(id, _)| ContextId(id))
        } else {
            // An initiator is indexed under the responder's key only so the
            // responder's DIAGs reach it (G22): nothing else may use that.
            self.by_peer
                .resolve(&(from, key))
                .filter(|s| self.contexts.get(*s).is_some_and(|c| !c.initiator || is_diag))
                .map(ContextId)
        }
    }

    /// Processes a datagram whose context [`Endpoint::lookup`] found (or
    /// did not: `found == None`) for this same datagram, with nothing in
    /// between. Everything else is as `handle_datagram`.
    pub fn handle_demuxed(&mut self, now: Instant, from: SocketAddr, data: Bytes, found: Option<ContextId>) {
        self.handle(now, from, data, Some(found.map(|c| c.0)));
    }

    /// `handle_datagram`, with the lookup's result when the caller made it.
    fn handle(&mut self, now: Instant, from: SocketAddr, data: Bytes, found: Option<Option<ArenaId>>) {
        self.stats.datagrams_in += 1;
        // Parse and checksum as spans, timed by the subscriber (the engine
        // reads no clock).
        let len = data.len();
        let sub = &mut self.subscriber;
        let traced = S::ENABLED && sub.recording();
        if traced {
            sub.on_trace(now, &Trace::Span { work: Work::Parse, begin: true, len });
        }
        // Untraced, the plain parse (see `Context::emit` for why).
        let parsed = if traced {
            PacketRepr::parse_observed(&data, Verify::Checksum, |begin| {
                sub.on_trace(now, &Trace::Span { work: Work::ChecksumVerify, begin, len });
            })
        } else {
            PacketRepr::parse(&data)
        };
        if traced {
            sub.on_trace(now, &Trace::Span { work: Work::Parse, begin: false, len });
        }
        let repr = match parsed {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                self.dropped(now, from, DropReason::Malformed(e));
                return;
            }
        };
        // Every later use of `seq + len` may then assume it fits: a sender
        // counts from 0 and cannot reach 2^64 bytes, so such a packet is
        // forged or corrupt (and would panic a build with overflow checks).
        let data_len = match &repr.body {
            Body::Data { data, .. } | Body::First { data, .. } => data.len() as u64,
            _ => 0,
        };
        if repr.header.seq.checked_add(data_len).is_none() {
            self.stats.sequence_overflow += 1;
            self.dropped(now, from, DropReason::SequenceOverflow);
            return;
        }
        let key = repr.header.key;
        let o = repr.header.options;
        let slot = match found {
            Some(found) => found,
            None => self.lookup(from, key, repr.header.ptype == PacketType::Diag).map(|c| c.0),
        };
        let slot = match slot {
            Some(s) => s,
            None if repr.header.ptype == PacketType::First && key & RTN == 0 => {
                match self.accept(now, from, &repr) {
                    Some(s) => s,
                    None => return,
                }
            }
            None => {
                self.stats.unknown_context += 1;
                self.dropped(now, from, DropReason::UnknownContext);
                // Tell the sender, unless it is ending anyway or is a DIAG.
                if !o.contains(Options::END) && repr.header.ptype != PacketType::Diag {
                    self.queue_diag(
                        from,
                        key ^ RTN,
                        diag_code::INVALID_CONTEXT,
                        diag_value::UNSPECIFIED,
                        "no such context",
                    );
                }
                return;
            }
        };
        let mut index = None;
        if let Some(c) = self.contexts.get_mut(slot) {
            let before = half_open_cost(c);
            c.rx_wire += data.len() as u64;
            let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
            c.on_packet(now, &repr, &data, &self.cfg, &mut sink);
            if c.half_open {
                // Still half-open: the datagram counts against the budget;
                // validated: it leaves the half-open account.
                self.stats.half_open_bytes -= before;
                if c.validated() {
                    c.half_open = false;
                    self.stats.half_open -= 1;
                    self.peers.validated(c.peer);
                } else {
                    self.stats.half_open_bytes += half_open_cost(c);
                }
            }
            if c.initiator && c.peer_key_known && !c.rkey_indexed {
                c.rkey_indexed = true;
                index = Some((c.peer, c.peer_key));
            }
        }
        if let Some(k) = index
            && !self.by_peer.contains(&k)
        {
            self.by_peer.install(k, slot);
        }
        self.wake(slot);
    }

    /// Passive open: match a FIRST against the listeners.
    fn accept(&mut self, now: Instant, from: SocketAddr, repr: &PacketRepr<'_>) -> Option<ArenaId> {
        let Body::First { address, traffic, .. } = &repr.body else { return None };
        let key = repr.header.key;
        let port = match address.addr {
            Address::Ipv4 { dport, .. } | Address::Ipv6 { dport, .. } => dport,
            Address::Null(_) => 0,
            Address::Other { .. } => {
                self.queue_diag(
                    from,
                    key | RTN,
                    diag_code::CONTEXT_REFUSED,
                    diag_value::ADDRESS_FORMAT_UNSUPPORTED,
                    "address format not supported",
                );
                return None;
            }
        };
        if self.recent.contains(now, from, key) {
            // A duplicate of a FIRST whose context is over: its data was
            // delivered once already. Dropped without a DIAG (the initiator
            // is gone or finished; nobody waits for an answer).
            self.stats.stale_first += 1;
            self.dropped(now, from, DropReason::StaleFirst);
            return None;
        }
        let Some(mut cfg) = self.listeners.get(&port).cloned() else {
            self.stats.no_listener += 1;
            self.dropped(now, from, DropReason::NoListener);
            if !repr.header.options.contains(Options::END) {
                self.queue_diag(
                    from,
                    key | RTN,
                    diag_code::CONTEXT_REFUSED,
                    diag_value::NO_LISTENER,
                    "no listener",
                );
            }
            return None;
        };
        if self.per_peer.get(&from).copied().unwrap_or(0) >= self.cfg.max_contexts_per_peer {
            self.stats.refused_peer_limit += 1;
            self.refuse(now, from, key, "max_contexts_per_peer", "too many contexts (max_contexts_per_peer)");
            return None;
        }
        // The same per-family budget `connect` checks (G28): towards an IPv6
        // peer 20 more bytes of `max_packet` go to the IP header, and below
        // 125 our TCNTL (88 B) cannot leave, so the context would stay
        // silent until the peer gave up. Refused with a reason instead.
        if from.is_ipv6() && self.cfg.max_packet < crate::context::MIN_PACKET + 20 {
            self.refuse(now, from, key, "max_packet", "max_packet below 125 for an IPv6 peer");
            return None;
        }
        if !self.admit(now, from, key, repr_len(repr)) {
            return None;
        }
        let o = repr.header.options;
        cfg.service = traffic.service;
        cfg.noerr = o.contains(Options::NOERR);
        cfg.noflow = o.contains(Options::NOFLOW);
        let id = self.new_context(now, from, port, false, cfg, Some(key));
        if let Some(c) = self.contexts.get_mut(id.0) {
            // Half-open until the initiator addresses us by our key (G27).
            c.half_open = true;
            c.half_open_deadline = Some(now + self.cfg.half_open_timeout);
            self.stats.half_open += 1;
            self.stats.half_open_bytes += half_open_cost(c);
        }
        self.half_open.push_back(id.0);
        self.stats.accepted += 1;
        if self.half_open.len() > 2 * self.stats.half_open as usize + 64 {
            // Entries of validated or freed contexts: drop them now and then
            // so the queue stays proportional to the half-open count.
            let contexts = &self.contexts;
            self.half_open.retain(|s| contexts.get(*s).is_some_and(|c| c.half_open));
        }
        self.events.push_back(Event::Incoming { ctx: id, peer: from, service: traffic.service, port });
        Some(id.0)
    }

    /// Admission control for a new responder context (G27): sheds the
    /// oldest half-open contexts while the half-open count or memory is at
    /// its bound; refuses when all contexts are taken. Established
    /// contexts are never shed.
    fn admit(&mut self, now: Instant, from: SocketAddr, key: u64, first_len: u64) -> bool {
        let new_cost = CONTEXT_COST + first_len;
        while self.stats.half_open as usize >= self.cfg.max_half_open
            || self.stats.half_open_bytes + new_cost > self.cfg.half_open_memory as u64
        {
            let limit = if self.stats.half_open as usize >= self.cfg.max_half_open {
                "max_half_open"
            } else {
                "half_open_memory"
            };
            let Some(old) = self.half_open.pop_front() else { break };
            let Some(c) = self.contexts.get_mut(old) else { continue };
            if !c.half_open {
                continue;
            }
            let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
            c.shed(limit, &mut sink);
            self.stats.half_open_evicted += 1;
            self.free(now, old);
        }
        if self.contexts.len() >= self.cfg.max_contexts {
            self.stats.refused_max_contexts += 1;
            self.refuse(now, from, key, "max_contexts", "endpoint full (max_contexts)");
            return false;
        }
        true
    }

    /// Writes the next datagram to send into `buf` (at least
    /// `EndpointConfig::max_packet` bytes).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // Context-less DIAGs first, within their rate limit.
        while let Some(d) = self.diags.pop_front() {
            // Refusals were rate-limited when queued (`refusal_rate`);
            // other context-less DIAGs are limited here (`diag_rate`).
            if !d.refusal && !self.diag_bucket.try_take(now, 1) {
                self.stats.diags_suppressed += 1;
                continue;
            }
            let p = PacketRepr {
                header: HeaderRepr {
                    key: d.key,
                    options: Options::END,
                    ptype: PacketType::Diag,
                    sort: 0,
                    sync: 0,
                    seq: 0,
                },
                body: Body::Diag(DiagSegment { code: d.code, value: d.value, text: d.text.as_bytes() }),
            };
            if let Ok(n) = p.emit(buf) {
                self.stats.diags_sent += 1;
                self.stats.datagrams_out += 1;
                if S::ENABLED {
                    self.subscriber.on_trace(
                        now,
                        &Trace::PacketSent {
                            ctx: None,
                            flow: 0,
                            ptype: PacketType::Diag,
                            seq: 0,
                            data: 0,
                            len: n,
                        },
                    );
                }
                return Some(Transmit { dst: d.dst, len: n });
            }
        }
        // SORT: the most urgent ready context goes first; otherwise round robin.
        while !self.ready.is_empty() {
            let pick = self
                .ready
                .iter()
                .enumerate()
                .max_by_key(|(i, s)| {
                    let prio = self.contexts.get(**s).and_then(|c| c.cfg.sort).map_or(0i32, i32::from);
                    (prio, -(*i as i64))
                })
                .map_or(0, |(i, _)| i);
            let Some(slot) = self.ready.remove(pick) else { break };
            let idx = slot.index() as usize;
            self.in_ready[idx] = false;
            let Some(c) = self.contexts.get_mut(slot) else { continue };
            let dst = c.peer;
            // Anti-amplification (G27): towards a peer that has not proved
            // its address, at most `amplification` times what it sent us.
            // The packet is cut to the budget left; under the smallest
            // useful packet nothing leaves until the peer sends more.
            let cap = if c.validated() {
                None
            } else {
                let budget = (c.rx_wire * u64::from(self.cfg.amplification)).saturating_sub(c.tx_wire);
                Some(usize::try_from(budget).unwrap_or(usize::MAX))
            };
            if cap.is_some_and(|b| b < MIN_ANSWER) {
                self.stats.amplification_blocked += 1;
                continue;
            }
            let restore = cap.map(|b| c.cap_packet(b));
            let mut sink = Sink { events: &mut self.events, subscriber: &mut self.subscriber, now };
            let sent = c.poll_packet(now, &self.cfg, buf, &mut sink);
            if let Some(old) = restore {
                c.restore_packet_cap(old);
            }
            if let Some(n) = sent {
                c.tx_wire += n as u64;
                if cap.is_some() {
                    self.stats.unvalidated_datagrams_out += 1;
                    self.stats.unvalidated_bytes_out += n as u64;
                }
                c.after_send(now, &self.cfg, &mut sink);
            }
            self.refresh(slot, sent.is_some());
            if let Some(len) = sent {
                self.stats.datagrams_out += 1;
                return Some(Transmit { dst, len });
            }
        }
        None
    }
}

/// What a context costs in memory before any data: the structure itself
/// plus its entries in the demux maps, timer queue and ready queue (an
/// estimate; the half-open budget counts in it).
const CONTEXT_COST: u64 = std::mem::size_of::<Context>() as u64 + 256;

/// The smallest packet towards an unvalidated peer: a CNTL (header 32 +
/// control 20), e.g. a probe; below this budget nothing is tried.
const MIN_ANSWER: usize = 52;

/// What a half-open context counts against `half_open_memory`: its state
/// and the datagrams received for it (payload slices pin them).
fn half_open_cost(c: &Context) -> u64 {
    CONTEXT_COST + c.rx_wire
}

/// Wire length of a parsed packet (for the half-open account of a FIRST
/// not yet in a context).
fn repr_len(p: &PacketRepr<'_>) -> u64 {
    p.buffer_len() as u64
}
