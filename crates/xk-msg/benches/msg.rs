//! `Msg` costs: a three-header push/pop round trip, slicing, and split + join,
//! for both forms, at 10 / 1,000 / 10,000-byte payloads.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use xk_msg::{Bytes, Contig, Msg, Rope};

fn push_pop<M: Msg>(payload: &Bytes) -> usize {
    let mut m = M::from_payload(payload.clone(), 64);
    m.push(32).fill(1);
    m.push(8).fill(2);
    m.push(20).fill(3);
    let mut sum = 0;
    sum += m.pop(20).unwrap()[0] as usize;
    sum += m.pop(8).unwrap()[0] as usize;
    sum += m.pop(32).unwrap()[0] as usize;
    sum + m.len()
}

fn form<M: Msg>(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group(format!("msg/{name}"));
    for size in [10usize, 1_000, 10_000] {
        let payload = Bytes::from(vec![0xA5u8; size]);
        group.bench_function(BenchmarkId::new("build+push3+pop3", size), |b| {
            b.iter(|| push_pop::<M>(black_box(&payload)))
        });
        let mut m = M::from_payload(payload.clone(), 64);
        group.bench_function(BenchmarkId::new("slice", size), |b| {
            b.iter(|| black_box(m.slice(size / 4..size / 2).unwrap()).len())
        });
        // A fresh message: `slice` above made `m` shared, which for `Contig`
        // changes what a join costs.
        let mut m = M::from_payload(payload.clone(), 64);
        group.bench_function(BenchmarkId::new("split+join", size), |b| {
            b.iter(|| {
                let tail = m.split_off(size / 2).unwrap();
                m.join(black_box(tail));
            })
        });
    }
    group.finish();
}

fn msgs(c: &mut Criterion) {
    form::<Contig>(c, "contig");
    form::<Rope>(c, "rope");
}

criterion_group!(benches, msgs);
criterion_main!(benches);
