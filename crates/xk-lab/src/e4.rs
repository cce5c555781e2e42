//! Experiment E4 (seed 003, Table 5.2, Fig 5.1): lookup time of the demux map
//! against the number of bindings and the key size, for a cache hit, a cache
//! miss and a map without the cache.
//!
//! Method: for every (key size, bindings) cell one map with the cache and one
//! without are filled with distinct random keys. "hit" resolves the same bound
//! key `lookups` times; "miss" resolves bound keys in random order (the cache
//! never matches, so the table is searched and the cache refilled); "nocache"
//! resolves the same sequence on the map without the cache. Each cell is timed
//! `reps` times and the median is reported, in nanoseconds per lookup.
//!
//! Keys are held as `WordKey`s (64-bit words), as the XTP engine holds them;
//! `--raw-keys` measures plain `[u8; K]` arrays instead, for comparison.

use std::hint::black_box;
use std::io::IsTerminal;
use std::time::Instant;

use core::hash::Hash;
use serde_json::json;

use xk_core::keys::distinct_keys;
use xk_core::{DemuxMap, WordKey};

const KEY_SIZES: [usize; 5] = [4, 7, 8, 12, 14];
const BINDINGS: [usize; 5] = [100, 1_000, 10_000, 100_000, 1_000_000];

/// What the E4 table measures.
#[derive(Clone, Debug)]
pub struct MapParams {
    /// Largest number of bindings measured (from 100, 1000, … 1000000).
    pub max_bindings: usize,
    /// Lookups timed per repetition.
    pub lookups: usize,
    /// Repetitions per cell (the median is reported).
    pub reps: usize,
    /// Hold keys as plain byte arrays instead of 64-bit words.
    pub raw_keys: bool,
}

/// Median nanoseconds per lookup of one cell, for the three modes.
pub struct Cell {
    /// Key size in bytes.
    pub key: usize,
    /// Bindings in the map.
    pub bindings: usize,
    /// Cache hit.
    pub hit: f64,
    /// Cache miss (table searched, cache refilled).
    pub miss: f64,
    /// Map without the cache.
    pub nocache: f64,
    /// Every repetition's ns per lookup: hit, miss, no cache.
    pub samples: [Vec<f64>; 3],
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `lookups` calls of `f(i)`, where `i` cycles through `0..n` (by
/// increment and wrap: a `%` per lookup would cost more than a cache hit).
fn time_per_op(lookups: usize, n: usize, mut f: impl FnMut(usize) -> Option<u32>) -> f64 {
    let start = Instant::now();
    let mut acc = 0u32;
    let mut i = 0;
    for _ in 0..lookups {
        acc = acc.wrapping_add(f(i).unwrap_or(0));
        i += 1;
        if i == n {
            i = 0;
        }
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / lookups as f64
}

fn measure<const K: usize, Key: Eq + Hash + Clone>(
    n: usize,
    args: &MapParams,
    pack: fn(&[u8; K]) -> Key,
) -> Cell {
    let keys: Vec<Key> = distinct_keys::<K>(n, (n * 31 + K) as u64).iter().map(pack).collect();
    let mut cached = DemuxMap::new(7);
    let mut plain = DemuxMap::without_cache(7);
    cached.reserve(n);
    plain.reserve(n);
    for (i, k) in keys.iter().enumerate() {
        cached.install(k.clone(), i as u32);
        plain.install(k.clone(), i as u32);
    }
    let hot = keys[n / 2].clone();
    let (mut hit, mut miss, mut nocache) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.reps {
        hit.push(time_per_op(args.lookups, n, |_| cached.resolve(black_box(&hot))));
        miss.push(time_per_op(args.lookups, n, |i| cached.resolve(black_box(&keys[i]))));
        nocache.push(time_per_op(args.lookups, n, |i| plain.resolve(black_box(&keys[i]))));
    }
    Cell {
        key: K,
        bindings: n,
        hit: median(&hit),
        miss: median(&miss),
        nocache: median(&nocache),
        samples: [hit, miss, nocache],
    }
}

/// Measures the whole table.
pub fn table(args: &MapParams, progress: bool) -> Result<Vec<Cell>, String> {
    if args.lookups == 0 || args.reps == 0 {
        return Err("--lookups and --reps must be at least 1".into());
    }
    let sizes: Vec<usize> = BINDINGS.into_iter().filter(|&n| n <= args.max_bindings).collect();
    if sizes.is_empty() {
        return Err(format!("--max-bindings {} is below the smallest table size (100)", args.max_bindings));
    }
    let mut cells = Vec::new();
    for &n in &sizes {
        for k in KEY_SIZES {
            if progress {
                eprint!("\rmeasuring {n} bindings, {k}-byte keys   ");
            }
            fn word<const K: usize, const W: usize>(k: &[u8; K]) -> WordKey<W> {
                WordKey::from_bytes(k).unwrap_or(WordKey::from_words([0; W]))
            }
            cells.push(match (k, args.raw_keys) {
                (4, false) => measure::<4, _>(n, args, word::<4, 1>),
                (7, false) => measure::<7, _>(n, args, word::<7, 1>),
                (8, false) => measure::<8, _>(n, args, word::<8, 1>),
                (12, false) => measure::<12, _>(n, args, word::<12, 2>),
                (_, false) => measure::<14, _>(n, args, word::<14, 2>),
                (4, true) => measure::<4, _>(n, args, |k| *k),
                (7, true) => measure::<7, _>(n, args, |k| *k),
                (8, true) => measure::<8, _>(n, args, |k| *k),
                (12, true) => measure::<12, _>(n, args, |k| *k),
                (_, true) => measure::<14, _>(n, args, |k| *k),
            });
        }
    }
    if progress {
        eprint!("\r{:60}\r", "");
    }
    Ok(cells)
}

/// `xpress bench map`: measures the table and prints it (or JSON).
pub fn run(args: &MapParams, as_json: bool) -> Result<(), String> {
    let cells = table(args, !as_json && std::io::stderr().is_terminal())?;
    if as_json {
        let rows: Vec<_> = cells
            .iter()
            .map(|c| json!({"key_bytes": c.key, "bindings": c.bindings, "hit_ns": c.hit, "miss_ns": c.miss, "nocache_ns": c.nocache}))
            .collect();
        let keys = if args.raw_keys { "bytes" } else { "words" };
        println!(
            "{}",
            json!({"experiment": "E4", "keys": keys, "lookups": args.lookups, "reps": args.reps, "rows": rows})
        );
        return Ok(());
    }
    let form = if args.raw_keys { "plain byte arrays" } else { "64-bit words (WordKey)" };
    println!(
        "E4 — demux map lookup, ns per lookup (median of {} × {} lookups); keys held as {form}",
        args.reps, args.lookups
    );
    println!("seed 003 Table 5.2 measured the same three cases on a 2003 PC; see docs/PERF.md\n");
    print!("{:>10} {:>5}", "bindings", "key");
    for h in ["hit", "miss", "nocache"] {
        print!(" {h:>9}");
    }
    println!();
    for c in &cells {
        println!("{:>10} {:>4}B {:>9.2} {:>9.2} {:>9.2}", c.bindings, c.key, c.hit, c.miss, c.nocache);
    }
    println!("\ncache hit, flatness over table sizes per key size (max/min; goal <= 1.5):");
    for k in KEY_SIZES {
        let hits: Vec<f64> = cells.iter().filter(|c| c.key == k).map(|c| c.hit).collect();
        let (lo, hi) = hits.iter().fold((f64::MAX, 0f64), |(lo, hi), &h| (lo.min(h), hi.max(h)));
        println!("  {k:>2}-byte keys: {lo:.2}–{hi:.2} ns, max/min {:.2}", hi / lo);
    }
    Ok(())
}
