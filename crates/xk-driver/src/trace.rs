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

use xk_trace::{Event, Point, journey};
use xtp_proto::{Subscriber, Trace};
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

/// Records an instant on the driver's clock, if recording.
#[inline]
pub(crate) fn instant(point: Point, journey: u64, a: u64, b: u32) {
    if active() {
        xk_trace::record(Event::instant(mono_ns(), point, journey, a, b));
    }
}

/// The start of a span (0 when not recording); pass it to [`span_end`].
#[inline]
pub(crate) fn span_start() -> u64 {
    if active() { mono_ns() } else { 0 }
}

/// Records a span that began at `start` ([`span_start`]) and ends now.
/// Both edges are recorded after the fact, so a span can be dropped when
/// it turns out empty (a receive call that found nothing).
#[inline]
pub(crate) fn span_end(start: u64, point: Point, a: u64, b: u32) {
    if start != 0 && active() {
        xk_trace::record(Event::begin(start, point, 0, a, b));
        xk_trace::record(Event::end(mono_ns(), point, 0, a, b));
    }
}

/// The engine's subscriber: turns each [`Trace`] into an [`Event`] on the
/// recording thread's buffer. `epoch`: the driver clock's epoch on
/// `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineTrace {
    /// Nanoseconds on `CLOCK_MONOTONIC` at the driver clock's zero.
    pub epoch: u64,
}

fn ctx_number(ctx: &xtp_proto::ContextId) -> u64 {
    u64::from(ctx.index())
}

impl Subscriber for EngineTrace {
    const ENABLED: bool = COMPILED;

    fn on_trace(&mut self, now: xk_time::Instant, trace: &Trace) {
        if !xk_trace::enabled() {
            return;
        }
        let t = self.epoch + now.as_nanos();
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let e = match *trace {
            Trace::Write { flow, seq, len, .. } => {
                Event::instant(t, Point::Write, journey(flow, seq), seq, sat(len as u64))
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
            Trace::WindowChange { ctx, cwnd } => {
                Event::instant(t, Point::Window, 0, ctx_number(&ctx), sat(cwnd))
            }
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
