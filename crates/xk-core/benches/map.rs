//! Experiment E4 (seed 003, Table 5.2): demux map lookup time vs number of
//! bindings and key size, for a cache hit, a cache miss and a map without cache.
//!
//! * hit: the same bound key resolved again and again (a train of packets for
//!   one session);
//! * miss: every lookup a different bound key, in random order, so the
//!   one-entry cache never matches and the table is searched (and the cache
//!   refilled);
//! * nocache: the same key sequence on a map built without the cache.
//!
//! Keys of K bytes are held as `WordKey`s (64-bit words), as the XTP engine
//! holds them. Set `XK_E4_MAX_BINDINGS` to stop early (e.g. 10000).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use xk_core::keys::distinct_keys;
use xk_core::{DemuxMap, WordKey};

fn bindings() -> Vec<usize> {
    let max = std::env::var("XK_E4_MAX_BINDINGS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    [100, 1_000, 10_000, 100_000, 1_000_000].into_iter().filter(|&n| n <= max).collect()
}

fn key_size<const K: usize, const W: usize>(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("e4/key{K}"));
    group.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    for n in bindings() {
        let keys: Vec<WordKey<W>> = distinct_keys::<K>(n, n as u64 ^ K as u64)
            .iter()
            .map(|k| WordKey::from_bytes(k).unwrap())
            .collect();
        let mut cached = DemuxMap::new(1);
        let mut uncached = DemuxMap::without_cache(1);
        cached.reserve(n);
        uncached.reserve(n);
        for (i, k) in keys.iter().enumerate() {
            cached.install(*k, i as u32);
            uncached.install(*k, i as u32);
        }
        let hot = keys[n / 2];
        group.bench_function(BenchmarkId::new("hit", n), |b| b.iter(|| cached.resolve(black_box(&hot))));
        let mut i = 0;
        group.bench_function(BenchmarkId::new("miss", n), |b| {
            b.iter(|| {
                i = if i + 1 == n { 0 } else { i + 1 };
                cached.resolve(black_box(&keys[i]))
            })
        });
        group.bench_function(BenchmarkId::new("nocache", n), |b| {
            b.iter(|| {
                i = if i + 1 == n { 0 } else { i + 1 };
                uncached.resolve(black_box(&keys[i]))
            })
        });
    }
    group.finish();
}

fn e4(c: &mut Criterion) {
    key_size::<4, 1>(c);
    key_size::<7, 1>(c);
    key_size::<8, 1>(c);
    key_size::<12, 2>(c);
    key_size::<14, 2>(c);
}

criterion_group!(benches, e4);
criterion_main!(benches);
