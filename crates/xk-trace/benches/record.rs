//! Cost of one tracepoint: `record` while a recording runs (the goal:
//! ≤ 20 ns per event) and while none runs (the compiled-in, switched-off
//! cost). The clock read a driver tracepoint adds is measured where the
//! clock is, `cargo bench -p xk-driver --bench clock` (this crate reads no
//! clock, benchmarks included).
//!
//! Two enabled cases, because a recording's cost depends on whether its
//! memory is new: `enabled/reused` records into a buffer already touched
//! (the collector's budget is 0, so every full buffer is emptied and
//! reused: the hot path alone); `enabled/fresh` keeps everything, so every
//! 4 KiB page of events is a first touch (a page fault) as in a real
//! recording — restarted every million events (32 MiB, in the untimed
//! setup of a batch) to keep the benchmark's memory bounded.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use xk_trace::{Config, Event, Point, journey};

const N: u64 = 1_000;

fn burst(t: &mut u64) {
    for i in 0..N {
        *t += 7;
        xk_trace::record(Event::instant(black_box(*t), Point::PacketSent, journey(3, i), i, 1400));
    }
}

fn record(c: &mut Criterion) {
    let mut g = c.benchmark_group("trace");
    g.throughput(Throughput::Elements(N));
    let mut t = 0u64;
    xk_trace::start(Config { chunk: 16_384, max_events: 0 });
    xk_trace::name_thread("bench");
    g.bench_function("record/enabled/reused", |b| b.iter(|| burst(&mut t)));
    let rec = xk_trace::finish();
    assert!(rec.is_empty() && rec.dropped > 0, "the budget of 0 keeps nothing");
    let mut kept = u64::MAX;
    g.bench_function("record/enabled/fresh", |b| {
        b.iter_batched(
            || {
                if kept >= 1 << 20 {
                    black_box(xk_trace::finish());
                    xk_trace::start(Config { chunk: 16_384, max_events: 2 << 20 });
                    kept = 0;
                }
                kept += N;
            },
            |()| burst(&mut t),
            BatchSize::PerIteration,
        )
    });
    let rec = xk_trace::finish();
    assert_eq!(rec.dropped, 0);
    g.bench_function("record/disabled", |b| b.iter(|| burst(&mut t)));
    g.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
