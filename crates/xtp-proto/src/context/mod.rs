//! One association: its state, both data directions, timers, and the packets
//! it builds and consumes. The endpoint owns contexts and routes to them.

mod output;
mod prr;
mod recovery;
mod recv;
mod send;
mod state;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::Bytes;
use xk_time::Instant;
use xtp_wire::{
    Address, AddressSegment, Body, ControlSegment, DiagSegment, ErrorControlSegment, HeaderRepr, Options,
    PacketRepr, PacketType, RTN, Service, Span, Spans, TrafficControlSegment, TrafficSegment, TrafficSpec,
    diag_code, diag_value,
};

pub use recv::Chunk;

pub use state::{Input, State};

use crate::cc::{Ack, CongestionController, Controller};
use crate::config::{ContextConfig, EndpointConfig};
use crate::events::{CloseReason, Event, Subscriber, TimerKind, Trace, WindowCause, Work};
use crate::rate::TokenBucket;
use crate::rtt::RttEstimator;
use crate::{ContextId, ContextStats};
use recovery::{Lost, Recovery};
use recv::RecvBuf;
use send::SendBuf;

/// Bytes a new context may send before the peer's first `alloc` arrives (a
/// decision of ours; the digest is silent).
pub const INITIAL_ALLOC: u64 = 64 * 1024;
/// Spans reported in one ECNTL at most (fewer when the path's packets are
/// smaller: an ECNTL must fit like any other packet).
const MAX_SPANS: usize = 64;

/// Bytes of an ECNTL before its spans: header, control segment, span count.
const ECNTL_BASE: usize = 32 + 24;
/// The smallest `max_packet` XTP can work with: an IPv6 FIRST with BTAG and
/// one byte of data (32 header + 40 address + 24 traffic + 8 tag + 1).
pub(crate) const MIN_PACKET: usize = 105;
/// The smallest `maxdata` a peer may advertise (docs/PROTOCOL.md, G28):
/// we take `32 + maxdata` as the largest packet it accepts, and every
/// packet we send once the key exchange is done (TCNTL 88 bytes, an ECNTL
/// with 3 spans, a DIAG with 65 bytes of text) fits in [`MIN_PACKET`]. A
/// smaller `maxdata` refuses the context (DIAG code 1, value 6) rather
/// than stall it on packets that can never leave; 0 means "no constraint"
/// (the digest, §3.2) and is accepted.
pub const MIN_MAXDATA: u32 = (MIN_PACKET - xtp_wire::HEADER_LEN) as u32;

/// A loss episode: losses of data sent before `start` belong to it and do
/// not reduce the window again.
#[derive(Clone, Copy, Debug)]
struct Episode {
    start: Instant,
    /// Bytes found lost in it, and how many of those turned out spurious.
    lost: u64,
    spurious: u64,
}

/// What a context did that the endpoint must act on.
///
/// Tracing goes straight to the endpoint's subscriber. `trace` takes a
/// closure and tests the subscriber's `ENABLED` constant first, so with
/// [`crate::NoTrace`] the event is never built and the call is gone after
/// monomorphisation (before, every tracepoint pushed a `Trace` into a `Vec`
/// whatever the subscriber).
pub(crate) struct Sink<'a, S: Subscriber> {
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) subscriber: &'a mut S,
    pub(crate) now: Instant,
}

impl<S: Subscriber> Sink<'_, S> {
    /// Reports `f()` at the sink's time, building it only when the
    /// subscriber wants events.
    #[inline(always)]
    pub(crate) fn trace(&mut self, f: impl FnOnce() -> Trace) {
        if S::ENABLED && self.subscriber.recording() {
            self.subscriber.on_trace(self.now, &f());
        }
    }
}

pub(crate) struct Context {
    pub(crate) id: ContextId,
    pub(crate) local_key: u64,
    /// The key the peer chose: the initiator's key (responder side), or the
    /// responder's `xkey` once learned (initiator side).
    pub(crate) peer_key: u64,
    pub(crate) peer_key_known: bool,
    pub(crate) peer: SocketAddr,
    pub(crate) port: u16,
    pub(crate) initiator: bool,
    /// Initiator: the endpoint has indexed us under the responder's key, so
    /// a DIAG the responder sends for an unknown context (key = its own key,
    /// RTN clear) reaches us (G22).
    pub(crate) rkey_indexed: bool,
    /// Initiator: a packet from the responder has arrived.
    established: bool,
    /// Responder: the initiator addresses us by our key (key exchange done).
    peer_uses_rtn: bool,
    need_tcntl: bool,
    pub(crate) cfg: ContextConfig,
    pub(crate) state: State,
    pub(crate) send: SendBuf,
    pub(crate) recv: RecvBuf,
    /// Send log, loss detection, `sync` numbering.
    rec: Recovery,
    peer_alloc: u64,
    peer_inrate: u32,
    rtt: RttEstimator,
    cc: Controller,
    /// XTP rate control: min(our `outrate`, the peer's `inrate`).
    bucket: TokenBucket,
    /// Congestion-control pacing (the controller's rate, in bursts).
    pacer: TokenBucket,
    /// Largest packet towards this peer (IPv6 takes 20 bytes of it).
    max_packet: usize,
    /// Data bytes in a full DATA packet: the controller's segment (with the
    /// header, what the pacer counts for it).
    seg: usize,
    /// The `maxdata` we advertise: what a packet on our path carries after
    /// the header (`max_packet` less 32, before the peer's `maxdata` cut
    /// it), so a peer whose end of the path is larger sends nothing our
    /// end cannot take (G28). Not `cfg.mss`: that is what *we* send.
    maxdata: usize,
    retries: u32,
    wtimer: Option<Instant>,
    /// Tail-loss probe: a status request 2 SRTT (at least 1 ms) after the
    /// last data sent or the last progress.
    ptimer: Option<Instant>,
    /// A WTIMER expiry not yet known genuine or spurious.
    timeout_at: Option<Instant>,
    episode: Option<Episode>,
    /// Proportional rate reduction while a loss episode recovers.
    prr: Option<prr::Prr>,
    /// Largest bytes in flight in this round and the last one (is the
    /// window used? controllers do not grow an unused window).
    round_peak: u64,
    last_round_peak: u64,
    /// Dynamic right-sizing: `(when, bytes read then)` at the round start.
    drs: (Instant, u64),
    /// When our last status request for an RTT sample as a receiver left,
    /// and how much data we had received then.
    rtt_probe_at: Option<(Instant, u64)>,
    /// Ranges a report newly showed held (reused buffer).
    covered: Vec<(u64, u64)>,
    /// A TCNTL answered a status request while we held spans: an ECNTL
    /// with the same echo goes next.
    report_follows: bool,
    /// The initial timeout expired once without an RTT sample (probed, not
    /// counted as a timeout).
    initial_probe_sent: bool,
    ctimer: Option<Instant>,
    /// Last packet from the peer; CTIMER is re-armed from it lazily, so a
    /// busy context does not move its timer on every packet.
    last_activity: Instant,
    ctimeout: Option<Instant>,
    /// Responder not yet validated (G27): freed at this time if the peer
    /// has still not addressed us by our key.
    pub(crate) half_open_deadline: Option<Instant>,
    /// Counted by the endpoint as half-open (its admission bookkeeping).
    pub(crate) half_open: bool,
    /// Responder: a packet other than a FIRST came from the peer, or one
    /// with our key (validated, G27).
    heard_back: bool,
    /// Freed because `half_open_deadline` passed.
    pub(crate) expired_half_open: bool,
    /// Wire bytes received from and sent to the peer (the amplification
    /// bound and the half-open memory account use them).
    pub(crate) rx_wire: u64,
    pub(crate) tx_wire: u64,
    /// Initiator with a connect timeout: when to give up if the key
    /// exchange has not completed.
    connect_deadline: Option<Instant>,
    /// Initiator: something (anything) came back from the peer.
    answered: bool,
    /// When CTIMEOUT first found data the application had not read.
    unread_since: Option<Instant>,
    /// Freed with data still unread (`unread_hold` ran out).
    pub(crate) freed_unread: bool,
    rtimer: Option<Instant>,
    reply_echo: Option<u32>,
    dreq: Option<(u64, u32)>,
    need_probe: bool,
    need_end: bool,
    need_diag: Option<(u32, u32, &'static str)>,
    wclose_pending: bool,
    data_since_sreq: u32,
    /// When our last status request left (on data or alone).
    sreq_at: Option<Instant>,
    last_alloc_sent: u64,
    fastnak_mark: (u64, usize),
    peer_finished_seen: bool,
    acked_reported: u64,
    closed_reported: bool,
    /// The peer sent END: do not answer it with our own.
    peer_ended: bool,
    pub(crate) stats: ContextStats,
}

/// Whether a DIAG with `code` ends the context it reaches, with or without
/// END (docs/PROTOCOL.md G21): the peer refused the context (1), abandoned
/// it (2), has no such context (3) or refused a join (5). Every other code
/// reports a problem with one packet or request.
pub(crate) fn ends_context(code: u32) -> bool {
    matches!(
        code,
        diag_code::CONTEXT_REFUSED
            | diag_code::CONTEXT_ABANDONED
            | diag_code::INVALID_CONTEXT
            | diag_code::JOIN_REFUSED
    )
}

/// Our traffic spec; `maxdata` is the most data we take in one packet.
fn traffic(cfg: &ContextConfig, maxdata: usize) -> TrafficSegment {
    TrafficSegment {
        service: cfg.service,
        spec: TrafficSpec::Explicit {
            maxdata: maxdata.min(u32::MAX as usize) as u32,
            inrate: cfg.in_rate,
            inburst: cfg.in_burst,
            outrate: cfg.out_rate,
            outburst: cfg.out_burst,
        },
    }
}

impl Context {
    /// A context; the endpoint sets `id` and `local_key` once its slot is known.
    pub(crate) fn new(
        peer: SocketAddr,
        port: u16,
        initiator: bool,
        cfg: ContextConfig,
        ep: &EndpointConfig,
        now: Instant,
    ) -> Self {
        let max_packet = ep.max_packet.saturating_sub(if peer.is_ipv6() { 20 } else { 0 });
        // The controller counts in the data a DATA packet carries at most.
        let seg = cfg.mss.min(max_packet.saturating_sub(xtp_wire::HEADER_LEN)).max(1);
        let cc = Controller::new(cfg.congestion, seg);
        let rate = u64::from(cfg.out_rate);
        let burst =
            if cfg.out_burst == 0 { crate::rate::default_burst(rate, seg) } else { u64::from(cfg.out_burst) };
        Context {
            id: ContextId(xk_core::ArenaId::from_parts(0, 0)),
            local_key: 0,
            peer_key: 0,
            peer_key_known: false,
            peer,
            port,
            initiator,
            rkey_indexed: false,
            established: !initiator,
            peer_uses_rtn: initiator,
            need_tcntl: !initiator,
            send: SendBuf::new(cfg.noerr),
            recv: RecvBuf::new(cfg.recv_buffer, cfg.recv_buffer_max, cfg.noerr),
            state: State::Active,
            rec: Recovery::new(),
            peer_alloc: INITIAL_ALLOC,
            peer_inrate: 0,
            rtt: RttEstimator::new(ep.min_rto, ep.max_rto),
            cc,
            bucket: TokenBucket::new(rate, burst, now),
            pacer: TokenBucket::new(0, 1, now),
            max_packet,
            seg,
            maxdata: max_packet.saturating_sub(xtp_wire::HEADER_LEN),
            retries: 0,
            wtimer: None,
            ptimer: None,
            timeout_at: None,
            episode: None,
            prr: None,
            round_peak: 0,
            last_round_peak: 0,
            drs: (now, 0),
            rtt_probe_at: None,
            covered: Vec::new(),
            report_follows: false,
            initial_probe_sent: false,
            ctimer: Some(now + ep.keepalive),
            last_activity: now,
            ctimeout: None,
            half_open_deadline: None,
            half_open: false,
            heard_back: false,
            expired_half_open: false,
            rx_wire: 0,
            tx_wire: 0,
            connect_deadline: if initiator { ep.connect_timeout.map(|t| now + t) } else { None },
            answered: false,
            unread_since: None,
            freed_unread: false,
            rtimer: None,
            reply_echo: None,
            dreq: None,
            need_probe: false,
            need_end: false,
            need_diag: None,
            wclose_pending: false,
            data_since_sreq: 0,
            sreq_at: None,
            last_alloc_sent: cfg.recv_buffer as u64,
            fastnak_mark: (u64::MAX, 0),
            peer_finished_seen: false,
            acked_reported: 0,
            closed_reported: false,
            peer_ended: false,
            stats: ContextStats::default(),
            cfg,
        }
    }

    /// Whether the peer has proved it receives our packets at its address:
    /// always for contexts we opened; for a responder, once the initiator
    /// sent a packet other than a FIRST or addressed us by our key (G27).
    pub(crate) fn validated(&self) -> bool {
        self.initiator || self.heard_back
    }

    /// Shed by admission control: reported closed (if not already).
    pub(crate) fn shed<S: Subscriber>(&mut self, limit: &'static str, sink: &mut Sink<'_, S>) {
        if !self.closed_reported {
            self.closed_reported = true;
            sink.events.push_back(Event::Closed { ctx: self.id, reason: CloseReason::Unvalidated { limit } });
        }
    }

    /// Responder side: the initiator's key.
    pub(crate) fn set_peer_key(&mut self, key: u64) {
        self.peer_key = key & !RTN;
        self.peer_key_known = true;
    }

    fn transition<S: Subscriber>(&mut self, input: Input, sink: &mut Sink<'_, S>) -> bool {
        let Some(to) = self.state.on(input) else { return false };
        sink.trace(|| Trace::StateChange { ctx: self.id, from: self.state, to });
        self.state = to;
        true
    }

    fn close_with<S: Subscriber>(
        &mut self,
        input: Input,
        reason: CloseReason,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) {
        if self.transition(input, sink) {
            // Linger as long as the peer could keep retrying (its WTIMER
            // schedule, assumed like ours), so a peer that missed our END still
            // gets it in answer to a probe (see docs/PROTOCOL.md, G16/G17).
            // The peer's timeout is not ours: a side whose only samples
            // were short (or none) may retry on a longer schedule, so start
            // from at least the initial 1 s (seed 7060 of the long property
            // sweep: our 0.5 s schedule ended 57 s before the peer's).
            let mut span = xk_time::Duration::ZERO;
            let mut rto = self.rtt.rto().max(xk_time::Duration::from_secs(1));
            for _ in 0..=ep.max_retries {
                span += rto;
                rto = (rto * 2).min(ep.max_rto);
            }
            // But a peer that sent END is INACTIVE and never retries: the
            // shortest linger, which absorbs packets already in flight, will
            // do. (Before, the END receiver lingered the retry span too: a
            // churn of short contexts kept every closed responder ~100 s on
            // loopback — 9 back-offs from the 200 ms RTO floor — and one
            // client address hit `max_contexts_per_peer` after 1,024.)
            let linger = if self.peer_ended { ep.linger } else { ep.linger.max(span) };
            self.ctimeout = Some(now + linger);
            self.wtimer = None;
            self.ctimer = None;
            self.rtimer = None;
            self.ptimer = None;
            self.connect_deadline = None;
            self.rec.clear();
            if !self.closed_reported {
                self.closed_reported = true;
                sink.events.push_back(Event::Closed { ctx: self.id, reason });
            }
        }
    }

    /// Shortens the linger `close_with` set to `ep.linger` when the peer
    /// will not retry (it sent END or a DIAG, or it never answers: an
    /// unacknowledged datagram); only copies already in flight remain to be
    /// absorbed.
    fn linger_briefly(&mut self, now: Instant, ep: &EndpointConfig) {
        if let Some(t) = self.ctimeout {
            self.ctimeout = Some(t.min(now + ep.linger));
        }
    }

    // ---- application commands ------------------------------------------

    /// Bytes written and not yet acknowledged beyond which `write` refuses:
    /// `send_buffer`, or twice the send window when that is larger (the
    /// window term capped at 1 GiB so NOFLOW without congestion control,
    /// whose window is unbounded, still has a bound).
    pub(crate) fn send_limit(&self) -> u64 {
        let flow = if self.cfg.noflow { u64::MAX } else { self.peer_alloc.saturating_sub(self.send.una) };
        let window = self.cc.window().min(flow).min(1 << 30);
        (self.cfg.send_buffer as u64).max(2 * window)
    }

    pub(crate) fn write(&mut self, data: Bytes, eom: bool, btag: Option<u64>) {
        self.send.write(data, eom, btag);
    }

    /// The tracing monitor's name for this context's data one way
    /// ([`Trace`]): the initiator's key with RTN set when the initiator
    /// sends, so both ends name the same bytes alike.
    pub(crate) fn flow(&self, outbound: bool) -> u64 {
        let initiator_key = if self.initiator { self.local_key } else { self.peer_key } & !RTN;
        if outbound == self.initiator { initiator_key | RTN } else { initiator_key }
    }

    pub(crate) fn close_write<S: Subscriber>(&mut self, sink: &mut Sink<'_, S>) {
        if self.send.fin.is_none() {
            self.send.fin = Some(self.send.end);
            self.wclose_pending = true;
            self.transition(Input::CloseWrite, sink);
        }
    }

    pub(crate) fn abort<S: Subscriber>(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_, S>) {
        if self.state.is_live() {
            self.need_end = true;
            self.need_diag =
                Some((diag_code::CONTEXT_ABANDONED, diag_value::UNSPECIFIED, "aborted by the application"));
            self.close_with(Input::Abort, CloseReason::LocalAbort, now, ep, sink);
        }
    }

    pub(crate) fn read(&mut self, now: Instant) -> Option<Chunk> {
        let c = self.recv.read_chunk()?;
        if let Some((seq, sync)) = self.dreq
            && self.recv.read >= seq
        {
            self.reply_echo = Some(sync);
            self.dreq = None;
        }
        self.right_size(now);
        Some(c)
    }

    /// Dynamic right-sizing of the receive buffer (Linux's receive
    /// autotuning, by the same rule): once per round trip, if the
    /// application read at least half a buffer in it, the buffer — not the
    /// reader — limits the transfer: make it twice what was read (a loss's
    /// recovery holds a window out of order for a round trip while the
    /// sender goes on). Linux also adds twice the growth over the round
    /// before, to stay ahead of slow start; measured and not taken
    /// (docs/PERF.md, Session 20: the receiver's lag is what slows slow
    /// start near the pipe, and without it shallow queues overflow by a
    /// doubling).
    fn right_size(&mut self, now: Instant) {
        let Some(srtt) = self.rtt.srtt() else { return };
        let (since, read_then) = self.drs;
        let elapsed = now.saturating_since(since);
        if elapsed < srtt {
            return;
        }
        let copied = self.recv.read - read_then;
        if copied * 2 >= self.recv.buffer() {
            // Scaled to the round trip the data sees now: a receiver samples
            // about once per round trip, so its smoothed RTT trails a growing
            // queue by seconds at a 1 s path (1.41 s against the sender's
            // 1.93 s), and a buffer of twice the reads per SRTT held 1.2 ×
            // the sender's window where Linux's rule gives 2 × (45 Mbit/s ×
            // 1 s with a BDP queue: in the recovery the receiver held the
            // window out of order behind the hole, the data in flight fell
            // from 12 MB to 2 MB and the link idled, 2 % of a minute's
            // goodput). The round itself stays one SRTT (measuring it as
            // the latest RTT gave the same numbers). BBR's −5.6 % at
            // 1 Gbit/s × 500 ms that came with this rule was ProbeRtt's exit
            // meeting a shifted cycle, fixed in `cc/bbr.rs` (docs/PERF.md,
            // Session 21).
            let rtt = srtt.max(self.rtt.latest());
            let per_rtt = (u128::from(copied) * rtt.as_nanos() / elapsed.as_nanos().max(1)) as u64;
            self.recv.grow_to(per_rtt.max(copied) * 2);
        }
        self.drs = (now, self.recv.read);
    }

    // ---- timers --------------------------------------------------------

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        // Written out: the iterator form compiled to a loop that cost 7 % of
        // the bulk benchmark (this runs once per packet on both sides).
        let min = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        let a = min(min(self.wtimer, self.ctimer), min(self.ctimeout, self.rtimer));
        let b = min(self.connect_deadline, self.half_open_deadline);
        min(min(a, b), min(self.ptimer, self.rec.loss_timer))
    }

    /// Returns true when the context should be freed.
    pub(crate) fn on_timeout<S: Subscriber>(
        &mut self,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) -> bool {
        if self.half_open_deadline.is_some_and(|t| t <= now) && !self.state.is_live() {
            // Ended already (the FIRST carried the whole exchange): it
            // lingers as any ended context does, answering the initiator's
            // probes with END; the half-open bound still sheds it under
            // pressure. Freeing it here left an initiator that missed our
            // END retrying into a refusal (seed 1183).
            self.half_open_deadline = None;
        }
        if self.half_open_deadline.is_some_and(|t| t <= now) {
            // Never validated: most likely a spoofed FIRST. Freed at once,
            // without linger or END (nobody is there to hear it).
            self.half_open_deadline = None;
            self.expired_half_open = true;
            if !self.closed_reported {
                self.closed_reported = true;
                sink.events.push_back(Event::Closed {
                    ctx: self.id,
                    reason: CloseReason::Unvalidated { limit: "half_open_timeout" },
                });
            }
            return true;
        }
        if let Some(t) = self.connect_deadline
            && t <= now
        {
            self.connect_deadline = None;
            if let Some(start) = ep.connect_timeout {
                let (peer, after) = (self.peer, start);
                let reason = if self.answered {
                    // The peer holds state for us: tell it we are gone.
                    self.need_end = true;
                    self.need_diag =
                        Some((diag_code::CONTEXT_ABANDONED, diag_value::UNSPECIFIED, "connect timeout"));
                    CloseReason::Unconfirmed { peer, after }
                } else {
                    CloseReason::NoAnswer { peer, after }
                };
                self.close_with(Input::RetryLimit, reason, now, ep, sink);
                // Nobody retries towards us: the shortest linger will do.
                self.linger_briefly(now, ep);
                return false;
            }
        }
        if self.rtimer.is_some_and(|t| t <= now) {
            self.rtimer = None;
            sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Rtimer });
        }
        if self.ctimeout.is_some_and(|t| t <= now) {
            sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Ctimeout });
            // The application has not read everything yet: keep the data
            // for it, but not for ever — an application that never reads
            // (or a FIRST flood nobody accepts) must not pin memory.
            let since = *self.unread_since.get_or_insert(now);
            let give_up = since + ep.unread_hold;
            if self.recv.readable() && now < give_up {
                self.ctimeout = Some((now + ep.linger).min(give_up));
            } else {
                self.freed_unread = self.recv.readable();
                self.ctimeout = None;
                self.transition(Input::LingerExpired, sink);
                return true;
            }
        }
        if self.rec.loss_timer.is_some_and(|t| t <= now) {
            sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::LossTimer });
            let lost = self.rec.detect_lost(now, self.srtt_or_rto(), &mut self.send);
            self.on_lost(now, lost, sink);
        }
        if self.ptimer.is_some_and(|t| t <= now) {
            self.ptimer = None;
            if self.rec.outstanding() && self.state.is_live() {
                // No report for two round trips: ask for one. Cheaper than
                // TCP's tail-loss probe (a status request, no data), and its
                // answer lets loss detection see a lost tail without a
                // timeout and its window collapse.
                sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Ptimer });
                self.need_probe = true;
                self.stats.tail_probes += 1;
            }
        }
        if self.wtimer.is_some_and(|t| t <= now) && self.rtt.srtt().is_none() && !self.initial_probe_sent {
            // No RTT yet and no answer within the initial timeout (1 s, RFC
            // 6298): ask again, but do not yet take it for loss: the path may
            // simply be long. The timeout proper comes at 3 s (RFC 6298
            // §5.7), so a first round trip under 3 s costs nothing.
            self.initial_probe_sent = true;
            self.need_probe = true;
            self.stats.tail_probes += 1;
            self.wtimer = Some(now + xk_time::Duration::from_secs(2));
            sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Ptimer });
        }
        if self.wtimer.is_some_and(|t| t <= now) {
            sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Wtimer });
            self.wtimer = None;
            self.retries += 1;
            if self.retries > ep.max_retries {
                self.need_end = true;
                self.need_diag =
                    Some((diag_code::CONTEXT_ABANDONED, diag_value::UNSPECIFIED, "retry limit reached"));
                let acked = self.send.una;
                self.close_with(Input::RetryLimit, CloseReason::Timeout { acked }, now, ep, sink);
                return false;
            }
            self.rtt.back_off();
            // Reduce now; undo if the answer shows the data was only late.
            if self.timeout_at.is_none() {
                self.cc.on_timeout(now);
                self.stats.congestion_events += 1;
                self.timeout_at = Some(now);
                self.episode = None;
                self.prr = None;
                self.trace_window(WindowCause::Timeout, sink);
            }
            // Synchronising handshake: a status request with a fresh sync;
            // its answer tells what the peer holds.
            self.need_probe = true;
            self.stats.timeouts += 1;
        }
        if self.ctimer.is_some_and(|t| t <= now) {
            let idle_until = self.last_activity + ep.keepalive;
            if now < idle_until {
                self.ctimer = Some(idle_until); // traffic since: not idle yet
            } else {
                sink.trace(|| Trace::TimerFired { ctx: self.id, timer: TimerKind::Ctimer });
                self.ctimer = Some(now + ep.keepalive);
                // A half-open responder has nobody proven to keep alive: a
                // probe (and the WTIMER retries after it) would go to a
                // possibly spoofed address every back-off until the
                // amplification budget is spent (measured: 6 packets per
                // spoofed FIRST 30–61 s after a flood). It waits for
                // validation or `half_open_timeout` in silence.
                if self.state.is_live() && !self.rec.outstanding() && self.validated() {
                    self.need_probe = true;
                }
            }
        }
        false
    }

    // ---- input -----------------------------------------------------------

    /// Processes a packet addressed to this context. `datagram` is the buffer
    /// it arrived in, so received data is kept as slices of it.
    pub(crate) fn on_packet<S: Subscriber>(
        &mut self,
        now: Instant,
        p: &PacketRepr<'_>,
        datagram: &Bytes,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) {
        let h = &p.header;
        let o = h.options;
        self.established = true;
        self.answered = true;
        if !self.initiator && h.key & RTN != 0 {
            // The endpoint routed it by our full 63-bit key from the peer's
            // address: the peer received our TCNTL there (G27).
            self.peer_uses_rtn = true;
        }
        if !self.initiator && (h.key & RTN != 0 || h.ptype != PacketType::First) {
            // A second packet that is not a copy of the FIRST: the peer is
            // there (G27). Weaker than the key echo above (a spoofer can
            // send two packets), but it does not need our TCNTL to have
            // arrived, so a lossy path still validates.
            self.heard_back = true;
            self.half_open_deadline = None;
        }
        self.last_activity = now;
        sink.trace(|| Trace::PacketReceived {
            ctx: self.id,
            flow: self.flow(false),
            ptype: p.body.ptype(),
            seq: h.seq,
            len: datagram.len(),
        });
        if !self.state.is_live() {
            // INACTIVE: answer a status request with END so a peer that missed
            // our END can finish too.
            if o.intersects(Options::SREQ | Options::DREQ) && !o.contains(Options::END) {
                self.need_end = true;
                self.reply_echo = Some(h.sync);
            }
            if o.contains(Options::END) {
                // Our END and the peer's crossed (each side closed on the
                // other's RCLOSE): we ended first, with the whole retry span
                // to linger, but the peer is INACTIVE as well and will retry
                // nothing. Without this every ping's echo context stayed on
                // the server for 243 s after a clean close (a newcomer's
                // walk: "16 contexts held" after 17 pings).
                self.peer_ended = true;
                self.linger_briefly(now, ep);
            }
            return;
        }
        match &p.body {
            Body::Data { btag, data } | Body::First { btag, data, .. } => {
                if let Body::First { traffic, .. } = &p.body
                    && !self.apply_peer_traffic(traffic, now, ep, sink)
                {
                    return;
                }
                self.on_data(h, *btag, datagram.slice_ref(data), sink);
            }
            Body::Cntl(c) => self.on_control(now, h, c, &[], true, sink),
            Body::Ecntl(e) => {
                let spans: Vec<Span> = e.spans.iter().take(4096).collect();
                self.on_control(now, h, &e.control, &spans, true, sink);
            }
            Body::Tcntl { control, traffic } | Body::Jcntl { control, traffic, .. } => {
                if self.initiator && !self.peer_key_known {
                    self.peer_key = control.xkey & !RTN;
                    self.peer_key_known = true;
                    self.connect_deadline = None; // confirmed
                    // Answer at once with the responder's key: that proves
                    // our address to it (G27), lifting its anti-amplification
                    // bound, even when we have nothing else to send.
                    self.reply_echo.get_or_insert(h.sync);
                }
                if !self.apply_peer_traffic(traffic, now, ep, sink) {
                    return;
                }
                // A TCNTL has no room for spans: it acknowledges, gives an
                // RTT sample, but is no evidence of loss beyond rseq.
                self.on_control(now, h, &control.control, &[], false, sink);
            }
            Body::Diag(d) => {
                self.stats.diags_received += 1;
                // G21: only an END-bearing DIAG or a code saying the peer has
                // no context or refuses it ends ours; anything else (protocol
                // error, request refused, packet size) is information about
                // one packet, and the association goes on.
                if !o.contains(Options::END) && !ends_context(d.code) {
                    sink.trace(|| Trace::DiagReceived { ctx: self.id, code: d.code, value: d.value });
                    return;
                }
                let text = String::from_utf8_lossy(d.text).into_owned();
                let reason = if d.code == diag_code::CONTEXT_REFUSED {
                    CloseReason::Refused { code: d.code, value: d.value, text }
                } else {
                    CloseReason::PeerAbort { code: Some(d.code), value: Some(d.value), text }
                };
                self.close_with(Input::EndReceived, reason, now, ep, sink);
                // A DIAG means the peer keeps no state for this context: it
                // will not retry, so there is nothing to wait for beyond the
                // shortest linger that absorbs packets already in flight.
                self.linger_briefly(now, ep);
                return;
            }
        }
        if o.contains(Options::SREQ) {
            self.reply_echo = Some(h.sync);
        }
        if o.contains(Options::DREQ) {
            let upto = self.recv.nxt;
            if self.recv.read >= upto {
                self.reply_echo = Some(h.sync);
            } else {
                self.dreq = Some((upto, h.sync));
            }
        }
        if o.contains(Options::WCLOSE) {
            let data_len = match &p.body {
                Body::Data { data, .. } | Body::First { data, .. } => data.len() as u64,
                _ => 0,
            };
            // The endpoint drops packets whose `seq + len` overflows; checked
            // here too so this function is safe on its own.
            if let Some(end) = h.seq.checked_add(data_len)
                && let Some((seq, len)) = self.recv.set_fin(end)
            {
                sink.events.push_back(Event::Gap { ctx: self.id, seq, len });
            }
        }
        if o.contains(Options::END) {
            self.peer_ended = true;
        }
        self.check_progress(now, ep, sink);
        if o.contains(Options::END) && self.state.is_live() {
            let graceful = self.recv.complete() && self.send.all_acked();
            let reason = if graceful {
                CloseReason::Graceful
            } else {
                CloseReason::PeerAbort { code: None, value: None, text: "peer sent END".into() }
            };
            self.reply_echo = None;
            self.close_with(Input::EndReceived, reason, now, ep, sink);
            // The side that sent END holds nothing it could retry (G17: it is
            // INACTIVE and only answers probes), so the receiver of an END
            // lingers only to absorb copies already in flight; later stale
            // FIRSTs are refused by the recent-key table (G25). Lingering the
            // whole retry span here held every finished datagram context for
            // 243 s, so one peer's 1,024-context limit capped datagram
            // receipt at ~4/s (docs/LOADGEN.md).
            self.linger_briefly(now, ep);
        }
    }

    /// Takes the peer's traffic spec (FIRST, TCNTL, JCNTL): its `maxdata`
    /// caps our segment, its `inrate`/`inburst` our rate. Returns false when
    /// the spec is refused (the context is closing with a DIAG).
    fn apply_peer_traffic<S: Subscriber>(
        &mut self,
        t: &TrafficSegment,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) -> bool {
        if let TrafficSpec::Explicit { maxdata, inrate, inburst, .. } = t.spec {
            if maxdata != 0 && maxdata < MIN_MAXDATA {
                self.refuse_spec(maxdata, now, ep, sink);
                return false;
            }
            // Never a packet larger than the peer accepts (G28): its
            // maxdata may be smaller than ours because its end of the path
            // is (its route's MTU, a packet-radio hop) even when ours is
            // not. As ours, it counts what follows the header, so a BTAG
            // and an ECNTL's spans come out of it too. Only ever downwards:
            // a later TCNTL cannot undo it.
            if maxdata != 0 {
                let packet = xtp_wire::HEADER_LEN.saturating_add(maxdata as usize);
                self.max_packet = self.max_packet.min(packet);
                // Saturating: `listen` and `accept` keep `max_packet` at 105
                // or more, but a peer's spec must never be able to panic us.
                let seg = self.seg.min(self.max_packet.saturating_sub(xtp_wire::HEADER_LEN)).max(1);
                if seg < self.seg {
                    self.seg = seg;
                    self.cc.set_mss(seg);
                }
            }
            self.peer_inrate = inrate;
            // Our sending rate: the smaller of our outrate and the peer's inrate.
            let ours = self.cfg.out_rate;
            let rate = match (ours, inrate) {
                (0, r) | (r, 0) => r,
                (a, b) => a.min(b),
            };
            // The peer's INBURST caps ours when both are set (the old
            // expression, inburst.min(out_burst.max(inburst)), was always
            // inburst: our own BURST never applied).
            let burst = match (inburst, self.cfg.out_burst) {
                (0, o) | (o, 0) => o,
                (i, o) => i.min(o),
            };
            let burst = if burst == 0 {
                crate::rate::default_burst(u64::from(rate), self.seg)
            } else {
                u64::from(burst)
            };
            self.bucket.set(u64::from(rate), burst, now);
        }
        true
    }

    /// Refuses a peer whose `maxdata` is below [`MIN_MAXDATA`]: DIAG code 1
    /// (context refused) value 6 (traffic specification refused) with END.
    fn refuse_spec<S: Subscriber>(
        &mut self,
        maxdata: u32,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) {
        if self.state.is_live() {
            self.need_end = true;
            self.need_diag = Some((
                diag_code::CONTEXT_REFUSED,
                diag_value::TRAFFIC_SPEC_REFUSED,
                "maxdata below the 73-byte floor",
            ));
            let reason = CloseReason::SpecRefused { maxdata, floor: MIN_MAXDATA };
            self.close_with(Input::Abort, reason, now, ep, sink);
        }
    }

    fn on_data<S: Subscriber>(
        &mut self,
        h: &HeaderRepr,
        btag: Option<u64>,
        data: Bytes,
        sink: &mut Sink<'_, S>,
    ) {
        let len = data.len();
        let eom = h.options.contains(Options::EOM);
        let was_readable = self.recv.readable();
        let out = self.recv.on_data(h.seq, data, eom, btag);
        self.stats.bytes_received += len as u64;
        if let Some((seq, len)) = out.gap {
            sink.events.push_back(Event::Gap { ctx: self.id, seq, len });
        }
        if out.readable && !was_readable {
            sink.events.push_back(Event::Readable { ctx: self.id });
        }
        if h.options.contains(Options::FASTNAK) && !self.cfg.noerr {
            if out.filled {
                // Data that fills a hole is news the sender waits for (its
                // loss detection holds a timer on it): answer at once, as
                // TCP acknowledges at once a segment that fills a gap.
                self.reply_echo = Some(h.sync);
            } else if out.out_of_order {
                // A new hole: report once per hole, not per packet.
                let spans = self.recv.span_count();
                if self.fastnak_mark != (self.recv.nxt, spans) {
                    self.fastnak_mark = (self.recv.nxt, spans);
                    self.reply_echo = Some(h.sync);
                }
            }
        }
        if !out.new_data && !h.options.contains(Options::SREQ) && len > 0 && !self.cfg.noerr {
            // A duplicate: our report may have been lost; answer so the sender
            // stops resending (echo of its sync).
            self.reply_echo = Some(h.sync);
        }
    }

    fn on_control<S: Subscriber>(
        &mut self,
        now: Instant,
        h: &HeaderRepr,
        c: &ControlSegment,
        spans: &[Span],
        complete: bool,
        sink: &mut Sink<'_, S>,
    ) {
        // An echo we never sent (newer than our last sync) is forged or
        // corrupt: the report still acknowledges, but its echo counts for
        // nothing.
        let echo = self.rec.unwrap_echo(c.echo);
        let mut covered = std::mem::take(&mut self.covered);
        covered.clear();
        let applied = self.send.apply_report(c.rseq, spans, |a, b| covered.push((a, b)));
        let Ok((acked, unmarked)) = applied else {
            self.covered = covered;
            self.need_diag = Some((
                diag_code::PROTOCOL_ERROR,
                diag_value::INVALID_RETRANSMISSION,
                "report outside the data sent",
            ));
            return;
        };
        let info = self.rec.on_report(now, echo, c.rseq, acked, &covered, complete);
        self.covered = covered;
        if let Some(rtt) = info.rtt {
            self.rtt.on_sample(rtt, info.overtook);
            self.stats.rtt_samples += 1;
            // A sample of our own counts as a probe: a side that gets one
            // each round trip from its own data (ping-pong, request and
            // response) need not ask again. Its reports carried SREQ, the
            // peer's answers too: six packets per ping-pong instead of four,
            // and 1.65x the instructions per round trip (callgrind against
            // bb39841, issue #13's engine regression).
            self.rtt_probe_at = Some((now, self.recv.nxt));
            if let Some(srtt) = self.rtt.srtt() {
                sink.trace(|| Trace::RttSample { ctx: self.id, rtt, srtt });
            }
        }
        let progress = acked > 0 || info.echo_advanced;
        if progress {
            // The peer answers and the pipe moves: WTIMER restarts (re-armed
            // below while anything is outstanding), the retry count clears.
            self.retries = 0;
            self.wtimer = None;
        }
        if info.spurious_bytes + unmarked > 0 {
            self.stats.spurious_retransmitted += info.spurious_bytes;
            self.rec.widen_reordering_window();
            if let Some(e) = &mut self.episode {
                e.spurious += info.spurious_bytes + unmarked;
                if e.spurious >= e.lost {
                    // Every loss of the episode was reordering: undo it.
                    self.episode = None;
                    self.prr = None;
                    self.undo(sink);
                }
            }
        }
        if info.round_start {
            self.last_round_peak = self.round_peak;
            self.round_peak = self.send.in_flight();
        }
        let lost = self.rec.detect_lost(now, self.srtt_or_rto(), &mut self.send);
        if progress && let Some(at) = self.timeout_at.take() {
            // Eifel with sync: the answer was triggered by a packet sent
            // before the timeout, or shows nothing lost: the network was
            // slow, not lossy.
            if info.echoed_sent_at.is_some_and(|t| t < at) || lost.bytes == 0 {
                self.stats.spurious_timeouts += 1;
                self.undo(sink);
            }
        }
        if acked > 0
            && let Some(p) = &mut self.prr
            && !p.on_delivered(acked, self.send.una)
        {
            self.prr = None;
        }
        if acked > 0 {
            let cwnd = self.cc.window();
            let ack = Ack {
                now,
                bytes: acked,
                rtt: info.rtt,
                sent_at: info.echoed_sent_at,
                srtt: self.rtt.srtt().unwrap_or_default(),
                min_rtt: self.rec.min_rtt.unwrap_or_default(),
                in_flight: self.send.in_flight(),
                round_start: info.round_start,
                delivery_rate: info.delivery_rate,
                app_limited: self.last_round_peak.max(self.round_peak) < cwnd / 2,
            };
            let traced = S::ENABLED && sink.subscriber.recording();
            let ssthresh = if traced { self.cc.ssthresh() } else { 0 };
            self.cc.on_ack(&ack);
            // Growth (or a model update) is a decision too; an
            // acknowledgement that changed nothing is not reported.
            if traced && (self.cc.window() != cwnd || self.cc.ssthresh() != ssthresh) {
                self.trace_window(WindowCause::Ack, sink);
            }
        }
        let new_episode = self.on_lost(now, lost, sink);
        if new_episode && let Some(p) = &mut self.prr {
            // The report that found the loss also delivered data: the first
            // allowance (the retransmission) goes out now, not a report later.
            p.on_delivered(acked, self.send.una);
        }
        if !self.cfg.noflow && c.alloc > self.peer_alloc {
            self.peer_alloc = c.alloc;
            sink.trace(|| Trace::FlowWindow {
                ctx: self.id,
                alloc: c.alloc,
                window: c.alloc.saturating_sub(self.send.una),
            });
        }
        if !self.cfg.noerr && self.data_since_sreq > 0 && self.send.in_flight() >= self.cc.window() {
            // The window shut on packets sent without a status request (it
            // shrank after they left: a reduction, BBR's ProbeRTT). Nothing
            // would answer for them before WTIMER: ask now.
            self.need_probe = true;
        }
        if h.options.contains(Options::WCLOSE)
            && let Some((seq, len)) = self.recv.set_fin(h.seq)
        {
            sink.events.push_back(Event::Gap { ctx: self.id, seq, len });
        }
        self.stats.bytes_acked = self.send.una;
        self.arm_timers(now, progress);
    }

    /// The RTT loss detection waits for: the smoothed RTT, or the timeout
    /// before any sample.
    fn srtt_or_rto(&self) -> xk_time::Duration {
        self.rtt.srtt().unwrap_or_else(|| self.rtt.rto())
    }

    /// Acts on data found lost: retransmission is already queued; the first
    /// loss of data sent after the current episode began starts a new one,
    /// which reduces the window once (returns whether it did).
    fn on_lost<S: Subscriber>(&mut self, now: Instant, lost: Lost, sink: &mut Sink<'_, S>) -> bool {
        let Some(first) = lost.first_sent else { return false };
        self.stats.loss_reports += 1;
        match &mut self.episode {
            Some(e) if first < e.start => {
                e.lost += lost.bytes;
                false
            }
            _ => {
                self.episode = Some(Episode { start: now, lost: lost.bytes, spurious: 0 });
                let in_flight = self.send.in_flight();
                self.cc.on_congestion(now, in_flight);
                self.prr = self
                    .cc
                    .reduces_proportionally()
                    .then(|| prr::Prr::new(self.send.nxt, in_flight + lost.bytes));
                self.stats.congestion_events += 1;
                self.trace_window(WindowCause::Loss, sink);
                true
            }
        }
    }

    /// The last reduction was spurious: the controller restores its window.
    fn undo<S: Subscriber>(&mut self, sink: &mut Sink<'_, S>) {
        self.cc.on_spurious();
        self.stats.undone += 1;
        self.trace_window(WindowCause::Undo, sink);
    }

    /// Reports the controller's window and threshold after a decision.
    fn trace_window<S: Subscriber>(&self, cause: WindowCause, sink: &mut Sink<'_, S>) {
        sink.trace(|| Trace::WindowChange {
            ctx: self.id,
            cause,
            cwnd: self.cc.window(),
            ssthresh: self.cc.ssthresh(),
        });
    }

    /// WTIMER runs while anything is outstanding (restarted on progress);
    /// the tail-loss probe two round trips after the last send or progress,
    /// when that comes before the timeout.
    fn arm_timers(&mut self, now: Instant, restart_probe: bool) {
        if !self.rec.outstanding() {
            self.wtimer = None;
            self.ptimer = None;
            return;
        }
        if self.wtimer.is_none() {
            self.wtimer = Some(now + self.rtt.rto());
        }
        if (restart_probe || self.ptimer.is_none())
            && let Some(srtt) = self.rtt.srtt()
        {
            let pto = (srtt * 2).max(xk_time::Duration::from_millis(1));
            self.ptimer = (pto < self.rtt.rto()).then(|| now + pto);
        }
    }

    /// Counters and gauges of this context.
    pub(crate) fn stats(&self) -> ContextStats {
        let cwnd = self.cc.window();
        let flow = if self.cfg.noflow { u64::MAX } else { self.peer_alloc.saturating_sub(self.send.una) };
        ContextStats {
            cwnd,
            send_window: cwnd.min(flow),
            in_flight: self.send.in_flight(),
            pacing_rate: self.pacing_rate(),
            srtt: self.rtt.srtt(),
            min_rtt: self.rec.min_rtt,
            rto: self.rtt.rto(),
            recv_buffer: self.recv.buffer(),
            recv_dropped: self.recv.dropped,
            congestion: self.cc.name(),
            ..self.stats
        }
    }

    /// The lower of the controller's pacing rate and XTP's RATE (bytes/s),
    /// as `may_send` applies them; `None` when neither limits.
    fn pacing_rate(&self) -> Option<u64> {
        let rate = (self.bucket.rate() != 0).then(|| self.bucket.rate());
        match (self.cc.pacing_rate(self.rtt.srtt()), rate) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves the state machine on after input or output.
    fn check_progress<S: Subscriber>(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_, S>) {
        if self.recv.complete() && !self.peer_finished_seen {
            self.peer_finished_seen = true;
            self.transition(Input::PeerFinished, sink);
            sink.events.push_back(Event::PeerFinished { ctx: self.id });
            // An acknowledged datagram closes its responder at once.
            if !self.initiator && self.cfg.service == Service::AckedDatagram && self.send.fin.is_none() {
                self.close_write(sink);
            }
        }
        if self.send.una > self.acked_reported && self.send.all_acked() {
            self.acked_reported = self.send.una;
            sink.events.push_back(Event::Acked { ctx: self.id, bytes: self.send.una });
        }
        if self.state == State::Closing
            && self.send.fin == Some(self.send.nxt)
            && self.send.all_acked()
            && self.recv.complete()
        {
            self.need_end = !self.peer_ended;
            self.close_with(Input::AllAcked, CloseReason::Graceful, now, ep, sink);
        }
    }
}
