//! What a driver tracepoint costs with its timestamp: reading the clock —
//! `trace::mono_ns` (`CLOCK_MONOTONIC` through the vDSO) against
//! `trace::now_ns` (the tick counter calibrated against it,
//! `trace_clock`) — and a whole tracepoint, clock and `xk_trace::record`
//! while a recording runs (budget 0: every full buffer emptied and reused,
//! the hot path alone). 10 million calls each, three times.

use std::hint::black_box;

use xk_driver::trace::{mono_ns, now_ns};
use xk_trace::{Config, Event, Point};

fn per_call(what: &str, n: u32, mut f: impl FnMut(u32) -> u64) {
    let t0 = std::time::Instant::now();
    let mut x = 0u64;
    for i in 0..n {
        x = x.wrapping_add(f(i));
    }
    let ns = t0.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{what}: {ns:.1} ns per call (checksum {})", black_box(x) % 7);
}

fn main() {
    const N: u32 = 10_000_000;
    now_ns(); // calibrate outside the timing
    xk_trace::start(Config { chunk: 16_384, max_events: 0 });
    xk_trace::name_thread("bench");
    for _ in 0..3 {
        per_call("clock mono_ns (clock_gettime)", N, |_| mono_ns());
        per_call("clock now_ns (calibrated ticks)", N, |_| now_ns());
        per_call("tracepoint with mono_ns + record", N, |i| {
            let t = mono_ns();
            xk_trace::record(Event::instant(t, Point::RingPush, 7, u64::from(i), 0));
            t
        });
        per_call("tracepoint with now_ns + record", N, |i| {
            let t = now_ns();
            xk_trace::record(Event::instant(t, Point::RingPush, 7, u64::from(i), 0));
            t
        });
    }
    let rec = xk_trace::finish();
    assert!(rec.is_empty() && rec.dropped > 0);
}
