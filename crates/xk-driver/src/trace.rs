//! The driver's side of the tracing monitor ([`xk_trace`]): the clock
//! trace timestamps are taken on, the engine's subscriber, and the test
//! every driver tracepoint makes.
//!
//! Compiled in with the `trace` feature (the `xpress` binary turns it on);
//! without it [`active`] is the constant `false`, [`EngineTrace`] declares
//! itself disabled to the engine, and every tracepoint is removed at
//! compile time. With it, a tracepoint costs one relaxed atomic load while
//! no recording runs (`xk_trace::start`), and records only while one does.
//!
//! Timestamps are nanoseconds on `CLOCK_MONOTONIC` (the kernel's, shared by
//! every process on the host, so a client's and a daemon's traces line
//! up). The driver's [`crate::clock::Clock`] reads the same clock, so the
//! engine's `now` converts exactly: `epoch + now`.

pub use crate::trace_clock::now_ns;
use xk_trace::{Event, Point, cause, journey, wake};
use xtp_proto::{Subscriber, Trace, WindowCause, Work};
use xtp_wire::PacketType;

/// Whether tracepoints are compiled in (`trace` feature).
pub const COMPILED: bool = cfg!(feature = "trace");

/// Whether to record now: compiled in and a recording runs.
#[inline(always)]
pub fn active() -> bool {
    COMPILED && xk_trace::enabled()
}

/// Nanoseconds on `CLOCK_MONOTONIC`.
#[inline]
pub fn mono_ns() -> u64 {
    // Cannot fail for CLOCK_MONOTONIC on Linux; 0 would only misplace events.
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| (t.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec() as u64))
}

/// `v`, saturated to an event's 32-bit `b`.
#[inline]
pub(crate) fn sat_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

thread_local! {
    /// The journey a hand-off on this thread carries on: the ring block
    /// an application write just pushed (for its `AppWrite` span), or the
    /// block the engine is about to write into the endpoint (for the
    /// `Link` from it to the data's journey).
    static HANDOFF: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Notes `journey` as the one a hand-off carries on. `first`: keep a
/// journey already noted (a write pushed as several blocks is named by its
/// first).
#[inline]
pub(crate) fn note(journey: u64, first: bool) {
    if active() {
        let _ = HANDOFF.try_with(|h| {
            if !first || h.get() == 0 {
                h.set(journey);
            }
        });
    }
}

/// Takes (and clears) the journey [`note`]d on this thread; 0 if none.
#[inline]
pub(crate) fn take_noted() -> u64 {
    if active() { HANDOFF.try_with(|h| h.replace(0)).unwrap_or(0) } else { 0 }
}

/// One ring's blocks as the monitor counts them. Both sides of a ring
/// count alike (one producer, one consumer, in order), so the n-th block
/// pushed is the n-th popped and both compute its journey from the ring's
/// name and n without the block carrying one — in one process (engine
/// thread) or two (daemon: the name is in the shared segment).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingTrace {
    ring: u64,
    n: u64,
}

impl RingTrace {
    /// The count of ring `ring`.
    pub(crate) fn new(ring: u64) -> RingTrace {
        RingTrace { ring, n: 0 }
    }

    /// A block crossed: pushed (`push`) or popped, on the application's
    /// side (`app`) or the engine's, at `at` ([`span_start`] read before
    /// the push published the block; 0: now). Records `RingPush`/`RingPop`
    /// (b: 0 towards the engine, 1 from it) and notes the journey for the
    /// hand-off: the application's write span takes its first push, the
    /// engine's write into the endpoint the block it popped. A push's time
    /// must be read before it publishes: read after, the other side can
    /// pop the block (and record its pop) first while the pusher is
    /// preempted between the two, and the pop then precedes its push.
    #[inline]
    pub(crate) fn crossed(&mut self, push: bool, app: bool, at: u64) {
        if COMPILED {
            let n = self.n;
            self.n += 1;
            if active() {
                let j = journey(self.ring, n);
                let point = if push { Point::RingPush } else { Point::RingPop };
                let t = if at != 0 { at } else { now_ns() };
                xk_trace::record(Event::instant(t, point, j, n, u32::from(push != app)));
                if push == app {
                    note(j, push);
                }
            }
        }
    }
}

/// Records an instant on the driver's clock, if recording.
#[inline]
pub(crate) fn instant(point: Point, journey: u64, a: u64, b: u32) {
    if active() {
        xk_trace::record(Event::instant(now_ns(), point, journey, a, b));
    }
}

/// The start of a span (0 when not recording); pass it to [`span_end`].
#[inline]
pub(crate) fn span_start() -> u64 {
    if active() { now_ns() } else { 0 }
}

/// Records a span that began at `start` ([`span_start`]) and ends now.
/// Both edges are recorded after the fact, so a span can be dropped when
/// it turns out empty (a receive call that found nothing).
#[inline]
pub(crate) fn span_end(start: u64, point: Point, a: u64, b: u32) {
    span_end_journey(start, point, 0, a, b);
}

/// [`span_end`] for a span that belongs to `journey`.
#[inline]
pub(crate) fn span_end_journey(start: u64, point: Point, journey: u64, a: u64, b: u32) {
    if start != 0 && active() {
        // Both edges in one call: a recording ended between two calls
        // would keep the begin alone.
        xk_trace::record_span(
            Event::begin(start, point, journey, a, b),
            Event::end(now_ns(), point, journey, a, b),
        );
    }
}

/// Records a [`Point::Park`] that began at `start` ([`span_start`]) and
/// ends now: a blocking wait of `timeout` (`None`: unbounded) that `ppoll`
/// ended with `r` (how many descriptors were ready, or the error), `ready`
/// its descriptors' readiness, `bells` the positions of the sleeper's
/// doorbells (eventfds) among them, every other descriptor a socket. One
/// place computes the wake cause for every wait.
#[inline]
pub(crate) fn park_end(
    start: u64,
    timeout: Option<xk_time::Duration>,
    r: &Result<i32, nix::errno::Errno>,
    ready: impl Iterator<Item = bool>,
    bells: std::ops::Range<usize>,
) {
    if start == 0 || !active() {
        return;
    }
    let mut why = match r {
        Ok(0) => wake::TIMER,
        Err(nix::errno::Errno::EINTR) => wake::INTERRUPTED,
        _ => 0,
    };
    for (i, on) in ready.enumerate() {
        if on {
            why |= if bells.contains(&i) { wake::BELL } else { wake::SOCKET };
        }
    }
    span_end(start, Point::Park, timeout.map_or(u64::MAX, |d| d.as_nanos() as u64), why);
}

/// The engine's subscriber: turns each [`Trace`] into an [`Event`] on the
/// recording thread's buffer. `epoch`: the driver clock's epoch on
/// `CLOCK_MONOTONIC`.
///
/// The engine's instants carry the `now` it was handed (no clock read);
/// its spans (packet build and parse, checksums) cannot — `now` is the same
/// at both edges — so their edges read the clock here. An instant is then
/// placed no earlier than the last edge read (`last`), so the packet event
/// inside a build span stays inside it on the timeline.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineTrace {
    /// Nanoseconds on `CLOCK_MONOTONIC` at the driver clock's zero.
    pub epoch: u64,
    /// The last span edge's time (ns on `CLOCK_MONOTONIC`).
    last: u64,
    /// The last slow-start threshold recorded (`Ssthresh` events are
    /// recorded only when it moves).
    ssthresh: u64,
    /// Span edges read the clock (false in virtual time: the simulated
    /// backend, where `now` is all there is).
    live: bool,
}

impl EngineTrace {
    /// The subscriber for a driver clock whose zero is `epoch`.
    pub fn new(epoch: u64) -> EngineTrace {
        EngineTrace { epoch, last: 0, ssthresh: 0, live: true }
    }

    /// The subscriber of an engine in virtual time (the simulated
    /// backend): every event, span edges included, at the engine's `now`.
    pub fn virtual_time() -> EngineTrace {
        EngineTrace { epoch: 0, last: 0, ssthresh: 0, live: false }
    }
}

impl EngineTrace {
    /// A span edge's time: the clock now (live) or the engine's `now`,
    /// never before the last event this engine recorded.
    fn edge_time(&mut self, now: xk_time::Instant) -> u64 {
        let t = if self.live { now_ns() } else { self.epoch + now.as_nanos() };
        self.last = t.max(self.last);
        self.last
    }

    /// An instant event's time: the engine's `now`, never before the last
    /// event this engine recorded. Both rules together keep one engine's
    /// events in the order it made them, although two clocks stamp them:
    /// the engine's `now` is read from `CLOCK_MONOTONIC` and can run a few
    /// microseconds ahead of the tick-counter clock the span edges read
    /// (its rate's error), which put a packet event after the end of the
    /// build span it was made in (Session 22: CI failed on it).
    fn instant_time(&mut self, now: xk_time::Instant) -> u64 {
        self.last = (self.epoch + now.as_nanos()).max(self.last);
        self.last
    }
}

fn cause_code(c: WindowCause) -> u32 {
    match c {
        WindowCause::Ack => cause::ACK,
        WindowCause::Loss => cause::LOSS,
        WindowCause::Timeout => cause::TIMEOUT,
        WindowCause::Undo => cause::UNDO,
    }
}

fn ctx_number(ctx: &xtp_proto::ContextId) -> u64 {
    u64::from(ctx.index())
}

impl Subscriber for EngineTrace {
    const ENABLED: bool = COMPILED;

    #[inline]
    fn recording(&self) -> bool {
        xk_trace::enabled()
    }

    fn on_trace(&mut self, now: xk_time::Instant, trace: &Trace) {
        if !xk_trace::enabled() {
            return;
        }
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        if let Trace::Span { work, begin, len } = *trace {
            let t = self.edge_time(now);
            let (point, b) = match work {
                Work::Build => (Point::PacketBuild, 0),
                Work::Parse => (Point::PacketParse, 0),
                Work::ChecksumCompute => (Point::Checksum, 0),
                Work::ChecksumVerify => (Point::Checksum, 1),
            };
            let e = if begin { Event::begin } else { Event::end };
            xk_trace::record(e(t, point, 0, len as u64, b));
            return;
        }
        let t = self.instant_time(now);
        let e = match *trace {
            Trace::Write { flow, seq, len, .. } => {
                let j = journey(flow, seq);
                // Written from a ring block (engine thread, daemon): the
                // block's journey goes on as the data's.
                let from = take_noted();
                if from != 0 {
                    xk_trace::record(Event::instant(t, Point::Link, from, j, 0));
                }
                Event::instant(t, Point::Write, j, seq, sat(len as u64))
            }
            Trace::Read { flow, seq, len, .. } => {
                Event::instant(t, Point::Read, journey(flow, seq), seq, sat(len as u64))
            }
            Trace::PacketSent { flow, seq, data, .. } => {
                let j = if data > 0 { journey(flow, seq) } else { 0 };
                Event::instant(t, Point::PacketSent, j, seq, sat(data as u64))
            }
            Trace::PacketReceived { flow, seq, ptype, .. } => {
                let j = if matches!(ptype, PacketType::Data | PacketType::First) {
                    journey(flow, seq)
                } else {
                    0
                };
                Event::instant(t, Point::PacketReceived, j, seq, ptype as u32)
            }
            Trace::PacketDropped { .. } => Event::instant(t, Point::PacketDropped, 0, 0, 0),
            Trace::Retransmit { flow, seq, len, .. } => {
                Event::instant(t, Point::Retransmit, journey(flow, seq), seq, sat(len as u64))
            }
            Trace::StateChange { ctx, to, .. } => {
                Event::instant(t, Point::StateChange, 0, ctx_number(&ctx), to as u32)
            }
            Trace::TimerFired { ctx, timer } => {
                Event::instant(t, Point::Timer, 0, ctx_number(&ctx), timer as u32)
            }
            Trace::WindowChange { cause: c, cwnd, ssthresh, .. } => {
                let c = cause_code(c);
                if ssthresh != self.ssthresh {
                    self.ssthresh = ssthresh;
                    xk_trace::record(Event::instant(t, Point::Ssthresh, 0, ssthresh, c));
                }
                Event::instant(t, Point::Window, 0, cwnd, c)
            }
            Trace::RateDecision { rate, wait, .. } => Event::instant(
                t,
                Point::Rate,
                0,
                rate,
                sat(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX)),
            ),
            Trace::FlowWindow { alloc, window, .. } => {
                Event::instant(t, Point::FlowWindow, 0, alloc, sat(window))
            }
            Trace::Span { .. } => return,
            Trace::RttSample { ctx, rtt, .. } => Event::instant(
                t,
                Point::Rtt,
                0,
                ctx_number(&ctx),
                sat(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX)),
            ),
            Trace::DiagReceived { .. } => return,
        };
        xk_trace::record(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine whose `now` runs ahead of the span clock still records
    /// its events in order: the packet event made inside a build span
    /// lies between the span's edges.
    #[test]
    fn one_engines_events_stay_in_order_across_its_two_clocks() {
        let epoch = now_ns();
        let mut t = EngineTrace::new(epoch);
        let begin = t.edge_time(xk_time::Instant::ZERO);
        // The engine's clock 50 µs ahead of the span clock.
        let ahead = xk_time::Instant::from_nanos(begin - epoch + 50_000);
        let sent = t.instant_time(ahead);
        let end = t.edge_time(ahead);
        assert!(begin <= sent && sent <= end, "{begin} {sent} {end}");
        // And an engine's `now` behind its last span edge is held to it.
        assert_eq!(t.instant_time(xk_time::Instant::ZERO), end);
    }
}
