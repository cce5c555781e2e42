//! The framework path against the direct path (issue #16), each path timed
//! by criterion on its own: the direct pair, the compiled stacks and the
//! run-time graphs in each message form (`paths/mod.rs`). `layer_ab.rs`
//! times the direct and compiled paths in alternating batches instead, for
//! a ratio that the machine's load drifting between two criterion runs
//! does not move.
// A benchmark reads the clock: `iter_custom` times the batch itself so
// that the reference counts are recorded outside the timed span. The
// workspace forbids the wall clock in protocol code; `benches/` is the
// stated exemption (`crates/xpress/tests/dependency_rule.rs`).
#![allow(clippy::disallowed_methods, reason = "a benchmark times with the wall clock")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

mod paths;
use paths::{Exchange, NAMES, make};

/// The datagram count of each exchange of a fresh direct pair, by rank,
/// recorded untimed on an instance of its own and extended on demand.
struct Reference {
    x: Box<dyn Exchange>,
    counts: Vec<u32>,
}

impl Reference {
    fn new() -> Self {
        Reference { x: make("direct").unwrap(), counts: Vec::new() }
    }

    /// The counts of ranks `..end`, recording the missing ones.
    fn upto(&mut self, data: &Bytes, echo: bool, end: usize) -> &[u32] {
        while self.counts.len() < end {
            self.counts.push(self.x.exchange(data, echo).datagrams as u32);
        }
        &self.counts[..end]
    }
}

/// Times `x` exchanging `data`, checking every exchange moved what it
/// should: the bytes each side read, and the datagrams against the
/// reference's exchange of the same rank. The rank of an exchange is its
/// position in `x`'s life: `rank` lives beside `x` (criterion calls this
/// once per batch, warm-up and each sample, so a local would restart at 0
/// while `x` goes on) and counts the exchanges `x` has made in every batch
/// so far, so the n-th exchange of `x` is compared with the n-th exchange
/// of the reference (a fresh direct pair, shared by all paths of one
/// workload), whatever the batch sizes. Each path, the direct one
/// included, so times the same round trips and the same work: a read and
/// a compare per exchange. The reference is extended before the clock
/// starts.
fn time(
    b: &mut criterion::Bencher<'_>,
    x: &mut dyn Exchange,
    rank: &mut usize,
    data: &Bytes,
    echo: bool,
    r: &mut Reference,
) {
    let want = (data.len(), if echo { data.len() } else { 0 });
    b.iter_custom(|iters| {
        let end = *rank + iters as usize;
        let counts = r.upto(data, echo, end);
        let start = Instant::now();
        for &n in &counts[*rank..end] {
            let got = x.exchange(data, echo);
            assert_eq!((got.server, got.client), want);
            assert_eq!(got.datagrams as u32, n, "datagrams differ from the direct path's");
            black_box(got);
        }
        let t: Duration = start.elapsed();
        *rank = end;
        t
    })
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("framework/pingpong");
    group.throughput(Throughput::Elements(1));
    for size in [10usize, 1000, 10_000] {
        let data = Bytes::from(vec![0x42u8; size]);
        let mut r = Reference::new();
        for name in NAMES {
            let (mut x, mut rank) = (make(name).unwrap(), 0);
            group.bench_function(BenchmarkId::new(name, size), |b| {
                time(b, x.as_mut(), &mut rank, &data, true, &mut r)
            });
        }
    }
    group.finish();
}

fn bulk(c: &mut Criterion) {
    let mut group = c.benchmark_group("framework/bulk");
    let data = Bytes::from(vec![0x5au8; 1 << 20]);
    group.throughput(Throughput::Bytes(data.len() as u64));
    let mut r = Reference::new();
    for name in NAMES {
        let (mut x, mut rank) = (make(name).unwrap(), 0);
        group.bench_function(name, |b| time(b, x.as_mut(), &mut rank, &data, false, &mut r));
    }
    group.finish();
}

criterion_group!(benches, pingpong, bulk);
criterion_main!(benches);
