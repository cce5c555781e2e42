//! One association: its state, both data directions, timers, and the packets
//! it builds and consumes. The endpoint owns contexts and routes to them.

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

use crate::cc::{CongestionController, Disabled, NewReno};
use crate::config::{Congestion, ContextConfig, EndpointConfig};
use crate::events::{CloseReason, Event, TimerKind, Trace};
use crate::rate::TokenBucket;
use crate::rtt::RttEstimator;
use crate::{ContextId, ContextStats};
use recv::RecvBuf;
use send::{SendBuf, sync_le};

/// Bytes a new context may send before the peer's first `alloc` arrives (a
/// decision of ours; the digest is silent).
pub const INITIAL_ALLOC: u64 = 64 * 1024;
/// Spans reported in one ECNTL at most.
const MAX_SPANS: usize = 64;
/// Remembered SREQ send times (for RTT samples).
const SREQ_HISTORY: usize = 64;

/// What a context did that the endpoint must act on.
pub(crate) struct Sink<'a> {
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) traces: &'a mut Vec<Trace>,
}

pub(crate) struct Context {
    pub(crate) id: ContextId,
    pub(crate) local_key: u64,
    /// The key the peer chose: the initiator's key (responder side), or the
    /// responder's `xkey` once learned (initiator side).
    pub(crate) peer_key: u64,
    peer_key_known: bool,
    pub(crate) peer: SocketAddr,
    pub(crate) port: u16,
    pub(crate) initiator: bool,
    /// Initiator: a packet from the responder has arrived.
    established: bool,
    /// Responder: the initiator addresses us by our key (key exchange done).
    peer_uses_rtn: bool,
    need_tcntl: bool,
    pub(crate) cfg: ContextConfig,
    pub(crate) state: State,
    pub(crate) send: SendBuf,
    pub(crate) recv: RecvBuf,
    sync: u32,
    sreqs: VecDeque<(u32, Instant)>,
    outstanding: Option<u32>,
    peer_alloc: u64,
    peer_inrate: u32,
    rtt: RttEstimator,
    cc: Box<dyn CongestionController>,
    bucket: TokenBucket,
    retries: u32,
    wtimer: Option<Instant>,
    ctimer: Option<Instant>,
    /// Last packet from the peer; CTIMER is re-armed from it lazily, so a
    /// busy context does not move its timer on every packet.
    last_activity: Instant,
    ctimeout: Option<Instant>,
    rtimer: Option<Instant>,
    reply_echo: Option<u32>,
    dreq: Option<(u64, u32)>,
    need_probe: bool,
    need_end: bool,
    need_diag: Option<(u32, u32, &'static str)>,
    wclose_pending: bool,
    data_since_sreq: u32,
    last_alloc_sent: u64,
    fastnak_mark: (u64, usize),
    peer_finished_seen: bool,
    acked_reported: u64,
    closed_reported: bool,
    /// The peer sent END: do not answer it with our own.
    peer_ended: bool,
    pub(crate) stats: ContextStats,
}

fn traffic(cfg: &ContextConfig) -> TrafficSegment {
    TrafficSegment {
        service: cfg.service,
        spec: TrafficSpec::Explicit {
            maxdata: cfg.mss as u32,
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
        let cc: Box<dyn CongestionController> = match cfg.congestion {
            Congestion::NewReno => Box::new(NewReno::new(cfg.mss)),
            Congestion::Disabled => Box::new(Disabled),
        };
        let rate = u64::from(cfg.out_rate);
        let burst = u64::from(if cfg.out_burst == 0 { cfg.mss as u32 * 4 } else { cfg.out_burst });
        Context {
            id: ContextId(xk_core::ArenaId::from_parts(0, 0)),
            local_key: 0,
            peer_key: 0,
            peer_key_known: false,
            peer,
            port,
            initiator,
            established: !initiator,
            peer_uses_rtn: initiator,
            need_tcntl: !initiator,
            send: SendBuf::new(cfg.noerr),
            recv: RecvBuf::new(cfg.recv_buffer, cfg.noerr),
            state: State::Active,
            sync: 0,
            sreqs: VecDeque::new(),
            outstanding: None,
            peer_alloc: INITIAL_ALLOC,
            peer_inrate: 0,
            rtt: RttEstimator::new(ep.min_rto, ep.max_rto),
            cc,
            bucket: TokenBucket::new(rate, burst, now),
            retries: 0,
            wtimer: None,
            ctimer: Some(now + ep.keepalive),
            last_activity: now,
            ctimeout: None,
            rtimer: None,
            reply_echo: None,
            dreq: None,
            need_probe: false,
            need_end: false,
            need_diag: None,
            wclose_pending: false,
            data_since_sreq: 0,
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

    /// Responder side: the initiator's key.
    pub(crate) fn set_peer_key(&mut self, key: u64) {
        self.peer_key = key & !RTN;
        self.peer_key_known = true;
    }

    fn transition(&mut self, input: Input, sink: &mut Sink<'_>) -> bool {
        let Some(to) = self.state.on(input) else { return false };
        sink.traces.push(Trace::StateChange { ctx: self.id, from: self.state, to });
        self.state = to;
        true
    }

    fn close_with(
        &mut self,
        input: Input,
        reason: CloseReason,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_>,
    ) {
        if self.transition(input, sink) {
            // Linger as long as the peer could keep retrying (its WTIMER
            // schedule, assumed like ours), so a peer that missed our END still
            // gets it in answer to a probe (see docs/PROTOCOL.md, G16/G17).
            let mut span = xk_time::Duration::ZERO;
            let mut rto = self.rtt.rto();
            for _ in 0..=ep.max_retries {
                span += rto;
                rto = (rto * 2).min(ep.max_rto);
            }
            let linger = ep.linger.max(span);
            self.ctimeout = Some(now + linger);
            self.wtimer = None;
            self.ctimer = None;
            self.rtimer = None;
            if !self.closed_reported {
                self.closed_reported = true;
                sink.events.push_back(Event::Closed { ctx: self.id, reason });
            }
        }
    }

    // ---- application commands ------------------------------------------

    pub(crate) fn write(&mut self, data: Bytes, eom: bool, btag: Option<u64>) {
        self.send.write(data, eom, btag);
    }

    pub(crate) fn close_write(&mut self, sink: &mut Sink<'_>) {
        if self.send.fin.is_none() {
            self.send.fin = Some(self.send.end);
            self.wclose_pending = true;
            self.transition(Input::CloseWrite, sink);
        }
    }

    pub(crate) fn abort(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_>) {
        if self.state.is_live() {
            self.need_end = true;
            self.need_diag =
                Some((diag_code::CONTEXT_ABANDONED, diag_value::UNSPECIFIED, "aborted by the application"));
            self.close_with(Input::Abort, CloseReason::LocalAbort, now, ep, sink);
        }
    }

    pub(crate) fn read(&mut self) -> Option<Chunk> {
        let c = self.recv.read_chunk()?;
        if let Some((seq, sync)) = self.dreq
            && self.recv.read >= seq
        {
            self.reply_echo = Some(sync);
            self.dreq = None;
        }
        Some(c)
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
        min(min(self.wtimer, self.ctimer), min(self.ctimeout, self.rtimer))
    }

    /// Returns true when the context should be freed.
    pub(crate) fn on_timeout(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_>) -> bool {
        if self.rtimer.is_some_and(|t| t <= now) {
            self.rtimer = None;
            sink.traces.push(Trace::TimerFired { ctx: self.id, timer: TimerKind::Rtimer });
        }
        if self.ctimeout.is_some_and(|t| t <= now) {
            sink.traces.push(Trace::TimerFired { ctx: self.id, timer: TimerKind::Ctimeout });
            if self.recv.readable() {
                self.ctimeout = Some(now + ep.linger); // the application has not read everything yet
            } else {
                self.ctimeout = None;
                self.transition(Input::LingerExpired, sink);
                return true;
            }
        }
        if self.wtimer.is_some_and(|t| t <= now) {
            sink.traces.push(Trace::TimerFired { ctx: self.id, timer: TimerKind::Wtimer });
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
            self.cc.on_timeout(now);
            sink.traces.push(Trace::WindowChange { ctx: self.id, cwnd: self.cc.window() });
            // Synchronising handshake: a fresh sync with SREQ; only its answer counts.
            self.need_probe = true;
            self.stats.timeouts += 1;
        }
        if self.ctimer.is_some_and(|t| t <= now) {
            let idle_until = self.last_activity + ep.keepalive;
            if now < idle_until {
                self.ctimer = Some(idle_until); // traffic since: not idle yet
            } else {
                sink.traces.push(Trace::TimerFired { ctx: self.id, timer: TimerKind::Ctimer });
                self.ctimer = Some(now + ep.keepalive);
                if self.state.is_live() && self.outstanding.is_none() {
                    self.need_probe = true;
                }
            }
        }
        false
    }

    // ---- input -----------------------------------------------------------

    /// Processes a packet addressed to this context. `datagram` is the buffer
    /// it arrived in, so received data is kept as slices of it.
    pub(crate) fn on_packet(
        &mut self,
        now: Instant,
        p: &PacketRepr<'_>,
        datagram: &Bytes,
        ep: &EndpointConfig,
        sink: &mut Sink<'_>,
    ) {
        let h = &p.header;
        let o = h.options;
        self.established = true;
        if !self.initiator && h.key & RTN != 0 {
            self.peer_uses_rtn = true;
        }
        self.last_activity = now;
        sink.traces.push(Trace::PacketReceived { ctx: self.id, ptype: p.body.ptype(), seq: h.seq, len: 0 });
        if !self.state.is_live() {
            // INACTIVE: answer a status request with END so a peer that missed
            // our END can finish too.
            if o.intersects(Options::SREQ | Options::DREQ) && !o.contains(Options::END) {
                self.need_end = true;
                self.reply_echo = Some(h.sync);
            }
            return;
        }
        match &p.body {
            Body::Data { btag, data } | Body::First { btag, data, .. } => {
                if let Body::First { traffic, .. } = &p.body {
                    self.apply_peer_traffic(traffic, now);
                }
                self.on_data(h, *btag, datagram.slice_ref(data), sink);
            }
            Body::Cntl(c) => self.on_control(now, h, c, &[], sink),
            Body::Ecntl(e) => {
                let spans: Vec<Span> = e.spans.iter().take(4096).collect();
                self.on_control(now, h, &e.control, &spans, sink);
            }
            Body::Tcntl { control, traffic } | Body::Jcntl { control, traffic, .. } => {
                if self.initiator && !self.peer_key_known {
                    self.peer_key = control.xkey & !RTN;
                    self.peer_key_known = true;
                }
                self.apply_peer_traffic(traffic, now);
                self.on_control(now, h, &control.control, &[], sink);
            }
            Body::Diag(d) => {
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
                if self.ctimeout.is_some() {
                    self.ctimeout = Some(now + ep.linger);
                }
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
            if let Some((seq, len)) = self.recv.set_fin(h.seq + data_len) {
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
        }
    }

    fn apply_peer_traffic(&mut self, t: &TrafficSegment, now: Instant) {
        if let TrafficSpec::Explicit { inrate, inburst, .. } = t.spec {
            self.peer_inrate = inrate;
            // Our sending rate: the smaller of our outrate and the peer's inrate.
            let ours = self.cfg.out_rate;
            let rate = match (ours, inrate) {
                (0, r) | (r, 0) => r,
                (a, b) => a.min(b),
            };
            let burst =
                if inburst == 0 { self.cfg.out_burst } else { inburst.min(self.cfg.out_burst.max(inburst)) };
            let burst = if burst == 0 { self.cfg.mss as u32 * 4 } else { burst };
            self.bucket.set(u64::from(rate), u64::from(burst), now);
        }
    }

    fn on_data(&mut self, h: &HeaderRepr, btag: Option<u64>, data: Bytes, sink: &mut Sink<'_>) {
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
        if out.out_of_order && h.options.contains(Options::FASTNAK) && !self.cfg.noerr {
            let spans = self.recv.spans(MAX_SPANS).len();
            if self.fastnak_mark != (self.recv.nxt, spans) {
                self.fastnak_mark = (self.recv.nxt, spans);
                self.reply_echo = Some(h.sync);
            }
        }
        if !out.new_data && !h.options.contains(Options::SREQ) && len > 0 && !self.cfg.noerr {
            // A duplicate: our report may have been lost; answer so the sender
            // stops resending (echo of its sync).
            self.reply_echo = Some(h.sync);
        }
    }

    fn on_control(
        &mut self,
        now: Instant,
        h: &HeaderRepr,
        c: &ControlSegment,
        spans: &[Span],
        sink: &mut Sink<'_>,
    ) {
        // An echo newer than anything we sent is forged or corrupt: use the
        // report for nothing but ignore its echo.
        let echo_valid = sync_le(c.echo, self.sync);
        let answers = self.outstanding.is_some_and(|o| echo_valid && sync_le(o, c.echo));
        // Echo 0 means the report answers nothing of ours (a window update).
        let echo = (echo_valid && c.echo != 0).then_some(c.echo);
        let out = self.send.on_report(c.rseq, spans, echo);
        if out.invalid {
            self.need_diag = Some((
                diag_code::PROTOCOL_ERROR,
                diag_value::INVALID_RETRANSMISSION,
                "report outside the data sent",
            ));
            return;
        }
        // An answer to an older status request still shows the peer alive and
        // the pipe moving: with requests pipelined (several per round trip)
        // the newest one is rarely the one answered. Restart WTIMER then, as
        // TCP restarts its timer on every new acknowledgement; only an answer
        // to the newest request stops it.
        let progress = echo_valid && c.echo != 0 && self.sreqs.iter().any(|&(s, _)| sync_le(s, c.echo));
        if progress && !answers && self.outstanding.is_some() {
            self.retries = 0;
            self.wtimer = Some(now + self.rtt.rto());
        }
        if answers || (progress && self.outstanding.is_none()) {
            self.outstanding = None;
            self.wtimer = None;
            self.retries = 0;
        }
        if answers || progress {
            // One sample per status request, from its first answer (Karn).
            if let Some(i) = self.sreqs.iter().position(|&(s, _)| s == c.echo) {
                let (_, sent) = self.sreqs.remove(i).unwrap_or((0, now));
                self.rtt.on_sample(now - sent);
                if let Some(srtt) = self.rtt.srtt() {
                    sink.traces.push(Trace::RttSample { ctx: self.id, rtt: now - sent, srtt });
                }
            }
            // Requests at or before the echo are answered (FIFO): forget them.
            let echo = c.echo;
            self.sreqs.retain(|&(s, _)| !sync_le(s, echo));
        }
        if out.newly_acked > 0 {
            self.cc.on_ack(now, out.newly_acked, self.rtt.srtt());
        }
        if let Some(first) = out.first_lost {
            self.cc.on_loss(now, first, self.send.nxt);
            self.stats.loss_reports += 1;
            sink.traces.push(Trace::WindowChange { ctx: self.id, cwnd: self.cc.window() });
        }
        if !self.cfg.noflow {
            self.peer_alloc = self.peer_alloc.max(c.alloc);
        }
        if h.options.contains(Options::WCLOSE)
            && let Some((seq, len)) = self.recv.set_fin(h.seq)
        {
            sink.events.push_back(Event::Gap { ctx: self.id, seq, len });
        }
        self.stats.bytes_acked = self.send.una;
    }

    /// Moves the state machine on after input or output.
    fn check_progress(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_>) {
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

    // ---- output ----------------------------------------------------------

    pub(crate) fn wants_to_send(&self) -> bool {
        self.need_end
            || self.need_diag.is_some()
            || (self.state.is_live()
                && (self.reply_echo.is_some()
                    || self.need_probe
                    || self.need_tcntl
                    || self.send.has_retransmit()
                    || self.send.has_new()
                    || self.wclose_pending
                    || (self.initiator && !self.established && self.stats.packets_sent == 0)
                    || self.recv.alloc() >= self.last_alloc_sent + (self.cfg.recv_buffer as u64 / 4).max(1)))
    }

    fn key_out(&self) -> u64 {
        if self.initiator {
            if self.peer_key_known { self.peer_key | RTN } else { self.local_key }
        } else {
            self.peer_key | RTN
        }
    }

    fn base_options(&self) -> Options {
        let mut o = Options::EMPTY;
        o.set(Options::NOERR, self.cfg.noerr);
        o.set(Options::NOFLOW, self.cfg.noflow);
        o.set(Options::FASTNAK, self.cfg.fastnak);
        o.set(Options::SORT, self.cfg.sort.is_some());
        o.set(Options::RCLOSE, self.recv.complete());
        o.set(Options::WCLOSE, self.send.fin.is_some_and(|f| self.send.nxt >= f));
        o
    }

    /// Advances `sync`. Every data packet and every status request gets a
    /// fresh value (digest G11, our rule), so an echo names exactly the packet
    /// that triggered a report. 0 is skipped: it means "no echo".
    fn next_sync(&mut self) -> u32 {
        self.sync = self.sync.wrapping_add(1);
        if self.sync == 0 {
            self.sync = 1;
        }
        self.sync
    }

    /// Records that the packet about to leave with the current `sync` carries
    /// SREQ: its answer gives an RTT sample and stops WTIMER.
    fn record_sreq(&mut self, now: Instant) {
        self.sreqs.push_back((self.sync, now));
        if self.sreqs.len() > SREQ_HISTORY {
            self.sreqs.pop_front();
        }
        self.outstanding = Some(self.sync);
        if self.wtimer.is_none() {
            self.wtimer = Some(now + self.rtt.rto());
        }
        self.data_since_sreq = 0;
    }

    /// A fresh `sync` for a control packet that asks for status.
    fn bump_sync(&mut self, now: Instant) {
        self.next_sync();
        self.record_sreq(now);
    }

    fn control(&self) -> ControlSegment {
        ControlSegment { rseq: self.recv.nxt, alloc: self.recv.alloc(), echo: self.reply_echo.unwrap_or(0) }
    }

    fn first_address(&self) -> AddressSegment<'static> {
        let addr = match self.peer.ip() {
            IpAddr::V4(dst) => Address::Ipv4 { dst, src: Ipv4Addr::UNSPECIFIED, dport: self.port, sport: 0 },
            IpAddr::V6(dst) => {
                Address::Ipv6 { dst, src: std::net::Ipv6Addr::UNSPECIFIED, dport: self.port, sport: 0 }
            }
        };
        AddressSegment { domain: 0, addr }
    }

    /// Builds the next packet into `buf`; returns its length.
    pub(crate) fn poll_packet(
        &mut self,
        now: Instant,
        ep: &EndpointConfig,
        buf: &mut [u8],
        sink: &mut Sink<'_>,
    ) -> Option<usize> {
        let header = |s: &Self, options: Options, ptype: PacketType, seq: u64| HeaderRepr {
            key: s.key_out(),
            options,
            ptype,
            sort: s.cfg.sort.unwrap_or(0),
            sync: s.sync,
            seq,
        };
        // 1. Diagnostics and END.
        if let Some((code, value, text)) = self.need_diag.take() {
            let mut o = self.base_options();
            if self.need_end {
                o |= Options::END;
                self.need_end = false;
            }
            let p = PacketRepr {
                header: header(self, o, PacketType::Diag, self.send.nxt),
                body: Body::Diag(DiagSegment { code, value, text: text.as_bytes() }),
            };
            return self.emit(&p, buf, None, sink);
        }
        if self.need_end {
            self.need_end = false;
            let o = self.base_options() | Options::END | Options::WCLOSE | Options::RCLOSE;
            let p = PacketRepr {
                header: header(self, o, PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            self.reply_echo = None;
            return self.emit(&p, buf, None, sink);
        }
        if !self.state.is_live() {
            return None;
        }
        // 2. Key exchange (responder's first answers) and status reports.
        if self.need_tcntl || (self.reply_echo.is_some() && !self.peer_uses_rtn) {
            self.need_tcntl = false;
            let o = self.base_options();
            let control =
                TrafficControlSegment { control: self.control(), reserved: 0, xkey: self.local_key };
            let p = PacketRepr {
                header: header(self, o, PacketType::Tcntl, self.send.nxt),
                body: Body::Tcntl { control, traffic: traffic(&self.cfg) },
            };
            self.reply_echo = None;
            self.last_alloc_sent = self.recv.alloc();
            return self.emit(&p, buf, None, sink);
        }
        if self.reply_echo.is_some() {
            let spans = if self.cfg.noerr { Vec::new() } else { self.recv.spans(MAX_SPANS) };
            let o = self.base_options();
            let ctl = self.control();
            let body = if spans.is_empty() {
                Body::Cntl(ctl)
            } else {
                Body::Ecntl(ErrorControlSegment { control: ctl, spans: Spans::List(&spans) })
            };
            let p = PacketRepr { header: header(self, o, body.ptype(), self.send.nxt), body };
            self.reply_echo = None;
            self.last_alloc_sent = self.recv.alloc();
            let n = self.emit(&p, buf, None, sink)?;
            return Some(n);
        }
        // 3. Data: retransmissions first, then new data within flow and
        //    congestion limits, paced by the rate bucket.
        let overhead = 32 + if self.established { 0 } else { 64 };
        let mss = self.cfg.mss.min(ep.max_packet.saturating_sub(overhead)).max(1);
        let flow = if self.cfg.noflow { u64::MAX } else { self.peer_alloc };
        // The congestion window counts bytes in flight (not those the peer
        // holds or we know lost), so the edge for new data is relative to nxt.
        let room = self.cc.window().saturating_sub(self.send.in_flight());
        let limit = flow.min(self.send.nxt.saturating_add(room));
        if let Some(seg) = self.send.next_segment(mss, limit) {
            let wire = overhead + seg.data.len();
            if !self.bucket.try_take(now, wire) {
                self.rtimer = Some(self.bucket.ready_at(now, wire));
                return None;
            }
            let end = seg.seq + seg.data.len() as u64;
            debug_assert!(self.cfg.noflow || end <= self.peer_alloc, "flow control violated");
            let more_after = self.send.more_after(&seg, limit);
            let mut o = self.base_options();
            o.set(Options::EOM, seg.eom);
            o.set(Options::NOCHECK, self.cfg.nocheck);
            // On data, WCLOSE marks only the packet whose data ends where ours
            // ends: the receiver takes `seq + len` of a WCLOSE packet as our
            // end of data, so a retransmitted earlier segment must not carry it.
            o.set(Options::WCLOSE, self.send.fin == Some(end));
            self.data_since_sreq += 1;
            // With a small window every reply counts: ask at least every quarter
            // window, so one lost report does not stall the sender until WTIMER.
            let window_pkts = (self.cc.window() / mss as u64).max(1);
            let every = u64::from(self.cfg.sreq_every).min((window_pkts / 4).max(1)) as u32;
            let ask = !self.cfg.noerr
                && (!more_after
                    || self.data_since_sreq >= every
                    || o.contains(Options::WCLOSE)
                    || seg.retransmit);
            self.next_sync();
            if ask {
                self.record_sreq(now);
                o |= Options::SREQ;
            }
            let datagram_done = self.cfg.service == Service::Datagram && self.send.fin == Some(end);
            if datagram_done {
                o |= Options::END;
            }
            if o.contains(Options::WCLOSE) {
                self.wclose_pending = false;
            }
            let ptype =
                if self.initiator && !self.established { PacketType::First } else { PacketType::Data };
            let body = if ptype == PacketType::First {
                Body::First {
                    address: self.first_address(),
                    traffic: traffic(&self.cfg),
                    btag: seg.btag,
                    data: &seg.data,
                }
            } else {
                Body::Data { btag: seg.btag, data: &seg.data }
            };
            let p = PacketRepr { header: header(self, o, ptype, seg.seq), body };
            let n = self.emit(&p, buf, Some(seg.data.len()), sink)?;
            if seg.retransmit {
                self.stats.retransmitted += seg.data.len() as u64;
                sink.traces.push(Trace::Retransmit { ctx: self.id, seq: seg.seq, len: seg.data.len() });
            }
            self.send.on_sent(&seg, self.sync);
            self.stats.bytes_sent += seg.data.len() as u64;
            if datagram_done {
                // An unacknowledged datagram ends with its last packet.
                self.close_with(Input::EndReceived, CloseReason::Graceful, now, ep, sink);
            }
            return Some(n);
        }
        // 4. A FIRST without data (connect before write), a WCLOSE without
        //    data, probes and window updates: a control packet.
        let first_needed = self.initiator && !self.established && self.stats.packets_sent == 0;
        let wclose = self.wclose_pending && self.send.fin == Some(self.send.nxt);
        if first_needed || wclose || self.need_probe {
            self.need_probe = false;
            let mut o = self.base_options() | Options::SREQ;
            self.bump_sync(now);
            if wclose {
                self.wclose_pending = false;
                o |= Options::WCLOSE;
            }
            if self.initiator && !self.established {
                let body = Body::First {
                    address: self.first_address(),
                    traffic: traffic(&self.cfg),
                    btag: None,
                    data: &[],
                };
                let p = PacketRepr { header: header(self, o, PacketType::First, self.send.nxt), body };
                return self.emit(&p, buf, Some(0), sink);
            }
            let p = PacketRepr {
                header: header(self, o, PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            return self.emit(&p, buf, None, sink);
        }
        if self.recv.alloc() >= self.last_alloc_sent + (self.cfg.recv_buffer as u64 / 4).max(1) {
            self.last_alloc_sent = self.recv.alloc();
            let p = PacketRepr {
                header: header(self, self.base_options(), PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            return self.emit(&p, buf, None, sink);
        }
        None
    }

    fn emit(
        &mut self,
        p: &PacketRepr<'_>,
        buf: &mut [u8],
        data: Option<usize>,
        sink: &mut Sink<'_>,
    ) -> Option<usize> {
        let n = p.emit(buf).ok()?;
        self.stats.packets_sent += 1;
        sink.traces.push(Trace::PacketSent {
            ctx: Some(self.id),
            ptype: p.body.ptype(),
            seq: p.header.seq,
            data: data.unwrap_or(0),
            len: n,
        });
        Some(n)
    }

    pub(crate) fn after_send(&mut self, now: Instant, ep: &EndpointConfig, sink: &mut Sink<'_>) {
        self.check_progress(now, ep, sink);
    }
}
