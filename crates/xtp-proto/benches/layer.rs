//! The framework path against the direct path (issue #16), each path timed
//! by criterion on its own: the direct pair, the compiled stacks and the
//! run-time graphs in each message form (`paths/mod.rs`). `layer_ab.rs`
//! times the direct and compiled paths in alternating batches instead, for
//! a ratio that the machine's load drifting between two criterion runs
//! does not move.

use std::cell::{Cell, RefCell};
use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

mod paths;
use paths::{Exchange, paths};

/// Times `x` exchanging `data`, checking every exchange moved what it
/// should: the bytes each side read, and the datagrams against the direct
/// path's exchange of the same rank (`direct`: recorded by the direct
/// path, which runs first; every other path must match it, so each path
/// times the same round trips; `rank` counts the path's exchanges across
/// criterion's calls). (One dynamic call per exchange, on every path
/// alike: a nanosecond against microseconds, and not in the ratio.)
fn time(
    b: &mut criterion::Bencher<'_>,
    x: &mut dyn Exchange,
    data: &Bytes,
    echo: bool,
    direct: &RefCell<Vec<usize>>,
    (is_direct, rank): (bool, &Cell<usize>),
) {
    let want = (data.len(), if echo { data.len() } else { 0 });
    b.iter(|| {
        let got = x.exchange(data, echo);
        assert_eq!((got.server, got.client), want);
        let mut d = direct.borrow_mut();
        if is_direct {
            d.push(got.datagrams);
        } else if let Some(&n) = d.get(rank.get()) {
            assert_eq!(got.datagrams, n, "exchange {}: datagrams differ from the direct path's", rank.get());
        }
        rank.set(rank.get() + 1);
        black_box(got)
    })
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("framework/pingpong");
    group.throughput(Throughput::Elements(1));
    for size in [10usize, 1000, 10_000] {
        let data = Bytes::from(vec![0x42u8; size]);
        let direct = RefCell::new(Vec::new());
        for (name, mut x) in paths() {
            let me = (name == "direct", &Cell::new(0));
            group.bench_function(BenchmarkId::new(name, size), |b| {
                time(b, x.as_mut(), &data, true, &direct, me)
            });
        }
    }
    group.finish();
}

fn bulk(c: &mut Criterion) {
    let mut group = c.benchmark_group("framework/bulk");
    let data = Bytes::from(vec![0x5au8; 1 << 20]);
    group.throughput(Throughput::Bytes(data.len() as u64));
    let direct = RefCell::new(Vec::new());
    for (name, mut x) in paths() {
        let me = (name == "direct", &Cell::new(0));
        group.bench_function(name, |b| time(b, x.as_mut(), &data, false, &direct, me));
    }
    group.finish();
}

criterion_group!(benches, pingpong, bulk);
criterion_main!(benches);
