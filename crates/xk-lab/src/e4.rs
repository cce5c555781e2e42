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
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
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
        hit: crate::stats::median(hit.iter().copied()),
        miss: crate::stats::median(miss.iter().copied()),
        nocache: crate::stats::median(nocache.iter().copied()),
        samples: [hit, miss, nocache],
    }
}

/// The cells of one table size, every key size.
fn cells_for(n: usize, args: &MapParams) -> Vec<Cell> {
    fn word<const K: usize, const W: usize>(k: &[u8; K]) -> WordKey<W> {
        WordKey::from_bytes(k).unwrap_or(WordKey::from_words([0; W]))
    }
    KEY_SIZES
        .into_iter()
        .map(|k| match (k, args.raw_keys) {
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
        })
        .collect()
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
        if progress {
            eprint!("\rmeasuring {n} bindings   ");
        }
        cells.extend(cells_for(n, args));
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

/// Seed 003, Table 5.2, 14-byte keys (µs), 100 … 1,000 bindings.
const SEED003_T52_14B_HIT_US: [f64; 10] = [17.0, 17.0, 17.3, 17.2, 17.0, 17.2, 17.0, 17.1, 17.0, 17.2];
const SEED003_T52_14B_MISS_US: [f64; 10] = [19.4, 20.9, 23.1, 25.8, 27.9, 30.5, 32.3, 34.7, 37.9, 41.8];

/// E4's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Largest table measured (100, 1,000, … 1,000,000 bindings).
    pub max_bindings: usize,
    /// Lookups timed per repetition.
    pub lookups: usize,
    /// Repetitions per cell.
    pub reps: usize,
}

/// E4 (seed 003 Table 5.2): demux map lookup time.
pub struct E4(Params);

impl E4 {
    fn args(&self) -> MapParams {
        MapParams {
            max_bindings: self.0.max_bindings,
            lookups: self.0.lookups,
            reps: self.0.reps,
            raw_keys: false,
        }
    }
}

impl crate::experiment::Experiment for E4 {
    const ID: &'static str = "E4";
    const TITLE: &'static str = "Demux map lookup time vs bindings and key size (seed 003)";
    type Params = Params;
    type Point = usize;
    type Row = Cell;

    fn defaults(quick: bool) -> Params {
        Params {
            max_bindings: if quick { 10_000 } else { 1_000_000 },
            lookups: if quick { 200_000 } else { 1_000_000 },
            reps: if quick { 3 } else { 5 },
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if !(100..=10_000_000).contains(&p.max_bindings) {
            return Err("max_bindings: 100 to 10,000,000".into());
        }
        if p.lookups == 0 || p.reps == 0 {
            return Err("lookups and reps must be at least 1".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E4(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &crate::experiment::Env) -> Vec<crate::experiment::Step<usize>> {
        BINDINGS
            .into_iter()
            .filter(|&n| n <= self.0.max_bindings)
            .map(|n| crate::experiment::Step { label: format!("{n} bindings, every key size"), point: n })
            .collect()
    }
    fn run(&mut self, &n: &usize, _env: &crate::experiment::Env) -> Result<Vec<Cell>, String> {
        Ok(cells_for(n, &self.args()))
    }
    fn csv_key() -> &'static [&'static str] {
        &["key", "bindings"]
    }
    fn render(_p: &Params, rows: &[Cell], _notes: &[String], page: &mut crate::html::Page) {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|c| {
                vec![
                    c.bindings.to_string(),
                    c.key.to_string(),
                    format!("{:.2}", c.hit),
                    format!("{:.2}", c.miss),
                    format!("{:.2}", c.nocache),
                ]
            })
            .collect();
        page.table(
            "Measured here: ns per lookup (median of the repetitions)",
            &["bindings", "key bytes", "hit", "miss", "no cache"],
            &table,
        );
        let mut seed = vec![vec!["hit".to_string()], vec!["miss".to_string()]];
        seed[0].extend(SEED003_T52_14B_HIT_US.iter().map(|v| format!("{v}")));
        seed[1].extend(SEED003_T52_14B_MISS_US.iter().map(|v| format!("{v}")));
        let header: Vec<String> =
            std::iter::once(String::new()).chain((1..=10).map(|i| format!("{}", i * 100))).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        page.table(
            "Seed 003 (Li 2003), Table 5.2, 14-byte keys, µs per lookup (Pentium III 547 MHz), by bindings",
            &header,
            &seed,
        );
        let pick = |k: usize, f: fn(&Cell) -> f64| -> Vec<(f64, f64)> {
            rows.iter().filter(|c| c.key == k).map(|c| (c.bindings as f64, f(c))).collect()
        };
        let seed_series = |v: &[f64; 10]| -> Vec<(f64, f64)> {
            v.iter().enumerate().map(|(i, v)| ((i + 1) as f64 * 100.0, v * 1e3)).collect()
        };
        let series = vec![
            ("hit, 14 B".to_string(), pick(14, |c| c.hit)),
            ("miss, 14 B".to_string(), pick(14, |c| c.miss)),
            ("no cache, 14 B".to_string(), pick(14, |c| c.nocache)),
            ("hit 2003 (seed 003)".to_string(), seed_series(&SEED003_T52_14B_HIT_US)),
            ("miss 2003 (seed 003)".to_string(), seed_series(&SEED003_T52_14B_MISS_US)),
        ];
        page.figure(
            crate::svg::loglog(
                "E4 lookup time vs bindings (14-byte keys)",
                "bindings in the map",
                "time per lookup (ns)",
                &series,
            ),
            "E4: lookup time against table size for 14-byte keys, with seed 003's Table 5.2.",
        );
        let hits: Vec<f64> = rows.iter().map(|c| c.hit).collect();
        let misses: Vec<f64> = rows.iter().map(|c| c.miss).collect();
        let (hlo, hhi) = hits.iter().fold((f64::MAX, 0f64), |(a, b), &h| (a.min(h), b.max(h)));
        let (mlo, mhi) = misses.iter().fold((f64::MAX, 0f64), |(a, b), &h| (a.min(h), b.max(h)));
        page.reading(&format!(
            "A cache hit costs {hlo:.2}–{hhi:.2} ns at every table size; a miss {mlo:.1}–{mhi:.1} ns. Seed 003 measured 17 µs per hit, flat, and 19–42 µs per miss, growing with the table."
        ));
    }
    fn summary(p: &Params, rows: &[Cell]) -> Vec<String> {
        let hit_max = rows.iter().map(|c| c.hit).fold(0.0, f64::max);
        let miss_max = rows.iter().map(|c| c.miss).fold(0.0, f64::max);
        vec![format!(
            "E4: cache hit ≤ {hit_max:.2} ns, miss ≤ {miss_max:.1} ns up to {} bindings (seed 003: 17 µs hit, 19–42 µs miss)",
            p.max_bindings
        )]
    }
    fn headline(c: &Cell) -> Option<(String, f64, &'static str)> {
        Some((format!("{} bindings {} B hit", c.bindings, c.key), c.hit, "ns"))
    }
}
