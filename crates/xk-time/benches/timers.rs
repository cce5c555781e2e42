//! Timer queue costs at 10 … 1,000,000 pending timers.
//!
//! Two steady-state operations keep the number of pending timers constant:
//! * `rearm`: cancel the oldest-scheduled pending timer and schedule a new one at
//!   a random deadline — what a protocol does when it restarts a timer;
//! * `hold`: fire the earliest timer and schedule a new one a random interval
//!   after it — the classic "hold" model of event-queue benchmarks.
//!
//! Deadlines are uniform over 10 s of nanoseconds, like retransmission and
//! keep-alive timers.

use std::collections::VecDeque;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use xk_time::{DeltaList, HeapQueue, Instant, TimerId, TimerQueue, TimingWheel};

const SPAN: u64 = 10_000_000_000;

/// SplitMix64: a tiny deterministic generator so runs are comparable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn sizes() -> Vec<usize> {
    match std::env::var("XK_BENCH_MAX_TIMERS") {
        Ok(v) => {
            let max: usize = v.parse().expect("XK_BENCH_MAX_TIMERS must be a number");
            [10, 100, 1_000, 10_000, 100_000, 1_000_000].into_iter().filter(|&n| n <= max).collect()
        }
        Err(_) => vec![10, 100, 1_000, 10_000, 100_000, 1_000_000],
    }
}

/// Fills a queue with `n` timers; sorted deadlines keep the delta list's fill O(n).
fn filled<Q: TimerQueue<u64> + Default>(n: usize, rng: &mut Rng) -> (Q, VecDeque<TimerId>) {
    let mut deadlines: Vec<u64> = (0..n).map(|_| SPAN + rng.next() % SPAN).collect();
    deadlines.sort_unstable();
    let mut q = Q::default();
    let ids = deadlines.iter().map(|&d| q.schedule(Instant::from_nanos(d), d)).collect();
    (q, ids)
}

fn bench_queue<Q: TimerQueue<u64> + Default>(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group(format!("timers/{name}"));
    group.sample_size(20);
    group.warm_up_time(std::time::Duration::from_millis(500));
    group.measurement_time(std::time::Duration::from_secs(2));
    for n in sizes() {
        let mut rng = Rng(n as u64);
        let (mut q, mut ids) = filled::<Q>(n, &mut rng);
        group.bench_function(BenchmarkId::new("rearm", n), |b| {
            b.iter(|| {
                let old = ids.pop_front().unwrap();
                black_box(q.cancel(old));
                let d = SPAN + rng.next() % SPAN;
                ids.push_back(q.schedule(Instant::from_nanos(d), d));
            })
        });
        let (mut q, _) = filled::<Q>(n, &mut rng);
        group.bench_function(BenchmarkId::new("hold", n), |b| {
            b.iter(|| {
                let d = q.next_deadline().unwrap();
                let e = q.poll_expired(d).unwrap();
                let next = e.deadline.as_nanos() + rng.next() % SPAN;
                q.schedule(Instant::from_nanos(next), next);
            })
        });
    }
    group.finish();
}

fn timers(c: &mut Criterion) {
    bench_queue::<HeapQueue<u64>>(c, "heap");
    bench_queue::<TimingWheel<u64>>(c, "wheel");
    bench_queue::<DeltaList<u64>>(c, "delta_list");
}

criterion_group!(benches, timers);
criterion_main!(benches);
