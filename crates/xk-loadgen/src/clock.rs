//! SCHED's clock: nanoseconds since a run's start, read from the CPU's
//! time-stamp counter where the kernel itself trusts it, else from
//! `CLOCK_MONOTONIC`.
//!
//! Why not `Instant` alone: on this machine kind one `clock_gettime` costs
//! 20–30 ns and a bare `rdtsc` 10 ns (docs/LOADGEN.md, session 15). SCHED
//! reads the clock in its spin (the overshoot past t_i is up to one read)
//! and once more for τ_i (inside every miss), so the clock's own cost is
//! most of a median miss of ~50 ns. Why not the `quanta` crate: τ_i must
//! not be read before the adapter's call has returned, which needs an
//! ordered read (`lfence; rdtsc`) that quanta does not offer, and the run
//! reports how far its clock drifted from the kernel's, which needs the
//! calibration in hand.
//!
//! The TSC is used only when the CPU says it is invariant (constant rate,
//! runs through sleep states: CPUID 0x8000_0007 EDX bit 8) and the kernel
//! uses it as its clocksource (so it is synchronised across CPUs — the
//! kernel marks it unstable otherwise). Its rate is calibrated once per
//! process against `CLOCK_MONOTONIC` (50 ms, the best of several paired
//! reads at each end: under 1 ppm); every run then takes a fresh anchor.
//! Both t_i and τ_i come from this one clock, so the rate's residual error
//! scales the specified gaps by under 1 ppm and changes no miss time; only
//! comparisons with kernel timestamps see the drift, which the run reports
//! ([`RunClock::drift_ns`]).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds since a run's start.
#[derive(Clone, Debug)]
pub struct RunClock {
    start: Instant,
    tsc: Option<Tsc>,
}

/// A TSC anchor and the process's calibrated rate.
#[derive(Clone, Copy, Debug)]
struct Tsc {
    t0: u64,
    /// Nanoseconds per tick, 32.32 fixed point.
    mult: u64,
}

impl RunClock {
    /// Starts a run's clock at 0 now. `os_only` forces `CLOCK_MONOTONIC`
    /// (to compare the two).
    pub fn start(os_only: bool) -> RunClock {
        let mult = if os_only { None } else { tsc_mult() };
        match mult {
            Some(mult) => {
                // The anchor: the TSC read nearest an Instant.
                let (t0, start) = paired();
                RunClock { start, tsc: Some(Tsc { t0, mult }) }
            }
            None => RunClock { start: Instant::now(), tsc: None },
        }
    }

    /// The time now, for polling (the spin's test against t_i): an
    /// unordered read, which may run ahead of the instructions before it
    /// but never of the release after it (that depends on its value).
    #[inline]
    pub fn now(&self) -> u64 {
        match self.tsc {
            Some(t) => t.ns(rdtsc()),
            None => self.start.elapsed().as_nanos() as u64,
        }
    }

    /// The time now, after everything before it has completed: τ_i, read
    /// when the adapter's call has returned.
    #[inline]
    pub fn stamp(&self) -> u64 {
        match self.tsc {
            Some(t) => t.ns(rdtsc_ordered()),
            None => self.start.elapsed().as_nanos() as u64,
        }
    }

    /// Which clock this is, for reports.
    pub fn name(&self) -> String {
        match self.tsc {
            Some(t) => format!("tsc ({:.1} MHz)", 1e3 * (1u64 << 32) as f64 / t.mult as f64),
            None => "CLOCK_MONOTONIC".into(),
        }
    }

    /// This clock's reading minus `CLOCK_MONOTONIC`'s time since the same
    /// start, now: how far it drifted (0 for the OS clock).
    pub fn drift_ns(&self) -> i64 {
        match self.tsc {
            Some(t) => {
                let (tick, at) = paired();
                t.ns(tick) as i64 - at.duration_since(self.start).as_nanos() as i64
            }
            None => 0,
        }
    }
}

impl Tsc {
    #[inline]
    fn ns(self, tick: u64) -> u64 {
        // Saturating: a read behind the anchor (another CPU's counter a few
        // ns behind) is 0, never a huge time that would release early.
        ((tick.saturating_sub(self.t0) as u128 * self.mult as u128) >> 32) as u64
    }
}

/// The process's TSC rate (ns per tick, 32.32), calibrated on first use;
/// `None` when the TSC is not fit to be a clock here.
fn tsc_mult() -> Option<u64> {
    static MULT: OnceLock<Option<u64>> = OnceLock::new();
    *MULT.get_or_init(|| {
        if !tsc_usable() {
            return None;
        }
        let (a_tick, a_at) = paired();
        std::thread::sleep(Duration::from_millis(50));
        let (b_tick, b_at) = paired();
        let ticks = b_tick.checked_sub(a_tick).filter(|&t| t > 0)?;
        let ns = b_at.duration_since(a_at).as_nanos();
        Some(((ns << 32) / ticks as u128) as u64)
    })
}

/// A TSC reading and an `Instant` taken as close together as this machine
/// allows: of several tries, the one whose two bracketing TSC reads are
/// nearest, its TSC time taken as their midpoint.
fn paired() -> (u64, Instant) {
    let mut best = (u64::MAX, 0u64, Instant::now());
    for _ in 0..16 {
        let a = rdtsc_ordered();
        let at = Instant::now();
        let b = rdtsc_ordered();
        // A pair split by a migration to a CPU whose counter is behind is
        // skipped.
        if b >= a && b - a < best.0 {
            best = (b - a, a + (b - a) / 2, at);
        }
    }
    (best.1, best.2)
}

#[cfg(target_arch = "x86_64")]
fn tsc_usable() -> bool {
    // Leaf 0x8000_0000 says how many extended leaves there are, so
    // 0x8000_0007 is only read if it exists.
    use std::arch::x86_64::__cpuid;
    let invariant = __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    let kernel = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|s| s.trim() == "tsc");
    invariant && kernel
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_usable() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC is unprivileged on Linux (CR4.TSD clear), and only
    // reached when `tsc_usable` said yes.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc_ordered() -> u64 {
    // LFENCE lets RDTSC start only when every earlier instruction has
    // completed (Intel SDM, RDTSC; AMD documents the same for LFENCE as
    // dispatch-serialising, which Linux turns on).
    // SAFETY: as `rdtsc`; LFENCE is SSE2, part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_lfence();
        std::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    unreachable!("the TSC clock is only chosen on x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc_ordered() -> u64 {
    unreachable!("the TSC clock is only chosen on x86_64")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_keeps_the_kernels_time_and_never_runs_backwards() {
        for os_only in [false, true] {
            let c = RunClock::start(os_only);
            let wall = Instant::now();
            let mut last = 0;
            while wall.elapsed() < Duration::from_millis(20) {
                let (a, b) = (c.now(), c.stamp());
                assert!(a >= last && b >= a, "{last} {a} {b}");
                last = b;
            }
            // 20 ms after the start both clocks agree to well under 10 µs
            // (the calibration is good to about 1 ppm; 10 µs would be 500).
            assert!(c.drift_ns().abs() < 10_000, "{}: drift {} ns", c.name(), c.drift_ns());
            let ours = c.stamp();
            let kernel = c.start.elapsed().as_nanos() as u64;
            assert!(ours.abs_diff(kernel) < 10_000 + 1_000, "{ours} vs {kernel}");
        }
    }
}
