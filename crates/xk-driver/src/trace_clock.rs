//! The tracing monitor's clock: nanoseconds on `CLOCK_MONOTONIC`, made
//! from the processor's tick counter ([`xk_trace::cycles`], a few ns)
//! instead of a `clock_gettime` per event (~28 ns here), so that a
//! tracepoint with its timestamp stays within the monitor's 20 ns.
//!
//! Each thread keeps an anchor — a `CLOCK_MONOTONIC` reading and the tick
//! count beside it — and extends it by ticks × the calibrated rate; after
//! [`REANCHOR_NS`] it reads the real clock again. The error is the rate's
//! error over at most that span: the rate is first measured over
//! [`CALIBRATE_NS`] (once per process, at the first event; each end a
//! clock reading bracketed by two tick counts) and then
//! re-measured at every re-anchoring over everything since, so it only
//! gets better (after a second, parts in 10⁸). Per thread, time never goes
//! backwards (a re-anchoring that lands behind the extension is held to
//! it). Across threads and processes the clocks agree to the
//! extension's error (a few ns), as they are all `CLOCK_MONOTONIC`.
//!
//! Used only where the kernel itself keeps time by the tick counter (its
//! clock source is `tsc`: invariant and in step on every processor);
//! elsewhere every event reads `CLOCK_MONOTONIC`.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::trace::mono_ns;

/// How long a thread extends its anchor before reading the clock again.
pub const REANCHOR_NS: u64 = 100_000;
/// The first calibration's length (a spin, once per process).
pub const CALIBRATE_NS: u64 = 200_000;

/// The process's calibration: the first anchor (ticks, ns) and the rate.
struct Calibration {
    ticks0: u64,
    ns0: u64,
    /// Nanoseconds per tick, × 2^32.
    rate: AtomicU64,
    /// `REANCHOR_NS` in ticks.
    reanchor_ticks: u64,
}

static CAL: OnceLock<Option<Calibration>> = OnceLock::new();

fn calibrate() -> Option<Calibration> {
    let tsc = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|s| s.trim() == "tsc");
    if !tsc {
        return None;
    }
    let (t0, n0) = pair()?;
    let mut n = n0;
    while n - n0 < CALIBRATE_NS {
        n = mono_ns();
    }
    let (t1, n1) = pair()?;
    let ticks = t1.checked_sub(t0).filter(|&t| t > 0)?;
    let rate = ((u128::from(n1 - n0) << 32) / u128::from(ticks)) as u64;
    let reanchor_ticks = ((u128::from(REANCHOR_NS) << 32) / u128::from(rate.max(1))) as u64;
    Some(Calibration { ticks0: t0, ns0: n0, rate: AtomicU64::new(rate), reanchor_ticks })
}

/// A tick count and a `CLOCK_MONOTONIC` reading taken together: the clock
/// read between two tick counts, their midpoint, the closest of three
/// tries. An interrupt or preemption between two bare reads would put
/// microseconds between them, and a calibration made from such a pair
/// carries that error into every timestamp.
fn pair() -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..3 {
        let a = xk_trace::cycles()?;
        let n = mono_ns();
        let b = xk_trace::cycles()?;
        let width = b.wrapping_sub(a);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, a + width / 2, n));
        }
    }
    best.map(|(_, t, n)| (t, n))
}

thread_local! {
    /// (anchor ticks, anchor ns, last value returned); ticks 0: none yet.
    static ANCHOR: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

/// Nanoseconds on `CLOCK_MONOTONIC`, from the tick counter where the
/// kernel trusts it, else read directly.
#[inline]
pub fn now_ns() -> u64 {
    let Some(cal) = CAL.get_or_init(calibrate) else { return mono_ns() };
    let Some(t) = xk_trace::cycles() else { return mono_ns() };
    ANCHOR
        .try_with(|a| {
            let (ta, na, last) = a.get();
            let d = t.wrapping_sub(ta);
            let v = if ta == 0 || d > cal.reanchor_ticks {
                reanchor(cal, a, last)
            } else {
                let v = na + ((u128::from(d) * u128::from(cal.rate.load(Ordering::Relaxed))) >> 32) as u64;
                v.max(last)
            };
            a.set((a.get().0, a.get().1, v));
            v
        })
        .unwrap_or_else(|_| mono_ns())
}

/// Reads the clock, anchors this thread to it and refines the rate.
#[cold]
fn reanchor(cal: &Calibration, a: &Cell<(u64, u64, u64)>, last: u64) -> u64 {
    let Some((t, n)) = pair() else { return mono_ns().max(last) };
    if let Some(ticks) = t.checked_sub(cal.ticks0).filter(|&x| x > 0)
        && n > cal.ns0 + 10 * CALIBRATE_NS
    {
        let rate = ((u128::from(n - cal.ns0) << 32) / u128::from(ticks)) as u64;
        cal.rate.store(rate, Ordering::Relaxed);
    }
    a.set((t, n, last));
    n.max(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The extended clock stays within a microsecond of `CLOCK_MONOTONIC`
    /// (the anchor's error over at most 100 µs, plus the two reads'
    /// distance) and never goes backwards on a thread.
    #[test]
    fn follows_the_monotonic_clock() {
        let mut last = 0;
        let mut worst = 0i64;
        for i in 0..200_000u64 {
            let before = mono_ns();
            let v = now_ns();
            let after = mono_ns();
            assert!(v >= last, "went backwards at {i}");
            last = v;
            let off = if v < before {
                (before - v) as i64
            } else if v > after {
                (v - after) as i64
            } else {
                0
            };
            worst = worst.max(off);
        }
        assert!(worst < 1_000, "worst distance from CLOCK_MONOTONIC: {worst} ns");
    }
}
