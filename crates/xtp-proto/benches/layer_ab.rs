//! The direct and the compiled framework path timed in alternating batches
//! (issue #16's "framework path costs <= 5 % against the direct path").
//!
//! Two criterion runs, one per path, are seconds apart; on a shared machine
//! the load moves between them by more than the 5 % being judged (the
//! direct path alone varied by 8 % from one run to the next in session 17).
//! Here each round times a batch of exchanges on each path back to back
//! (the order alternating between rounds), so both batches of a round meet
//! the same load; the ratio reported is the median over the rounds of the
//! per-round ratio, with its quartiles.
//!
//! ```sh
//! cargo bench -p xtp-proto --bench layer_ab -- [10] [1000] [10000] [bulk] \
//!     [--rounds N] [--ms T] [--paths direct,compiled-contig]
//! ```
//!
//! Each batch runs about `T` ms (default 25) of the first path; `N` rounds
//! (default 21). Every exchange is checked (the bytes each side read) and
//! each batch's datagram count must equal the first path's over the same
//! exchanges, so both paths time the same round trips. A path may be
//! named twice (`--paths direct,direct`): the ratio of a path against
//! itself is the harness's own spread.

use bytes::Bytes;
use criterion::measurement::{Measurement, WallTime};

mod paths;
use paths::{Exchange, paths};

/// Seconds `f` took, on criterion's wall clock (the one `layer.rs` times
/// with; this crate's code never reads the clock itself).
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = WallTime.start();
    let r = f();
    (r, WallTime.end(start).as_secs_f64())
}

struct Opts {
    workloads: Vec<String>,
    rounds: usize,
    ms: f64,
    paths: Vec<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        workloads: Vec::new(),
        rounds: 21,
        ms: 25.0,
        paths: vec!["direct".into(), "compiled-contig".into()],
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--rounds" => o.rounds = value("--rounds").parse().expect("--rounds: a number of rounds"),
            "--ms" => o.ms = value("--ms").parse().expect("--ms: milliseconds per batch"),
            "--paths" => o.paths = value("--paths").split(',').map(String::from).collect(),
            w @ ("10" | "1000" | "10000" | "bulk") => o.workloads.push(w.into()),
            other => panic!("unknown argument `{other}` (workloads: 10 1000 10000 bulk)"),
        }
    }
    if o.workloads.is_empty() {
        o.workloads = ["10", "1000", "10000", "bulk"].map(String::from).to_vec();
    }
    assert!(o.paths.len() >= 2, "--paths: the baseline and at least one other path");
    o
}

/// Runs `n` exchanges; their datagrams. Panics if one moved the wrong
/// number of bytes.
fn batch(x: &mut dyn Exchange, data: &Bytes, echo: bool, n: usize) -> usize {
    let want = (data.len(), if echo { data.len() } else { 0 });
    let mut datagrams = 0;
    for _ in 0..n {
        let m = std::hint::black_box(x.exchange(data, echo));
        assert_eq!((m.server, m.client), want);
        datagrams += m.datagrams;
    }
    datagrams
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let o = opts();
    for w in &o.workloads {
        let (data, echo) = match w.as_str() {
            "bulk" => (Bytes::from(vec![0x5au8; 1 << 20]), false),
            size => (Bytes::from(vec![0x42u8; size.parse().unwrap()]), true),
        };
        // Each from a fresh set, so a path may be named twice: an A/A run
        // (`--paths direct,direct`) shows the harness's own spread.
        let mut xs: Vec<(&str, Box<dyn Exchange>)> = o
            .paths
            .iter()
            .map(|want| {
                paths().into_iter().find(|(name, _)| name == want).unwrap_or_else(|| {
                    panic!("--paths: no path `{want}` (direct, compiled-contig, compiled-rope, contig, rope)")
                })
            })
            .collect();
        // Calibrate on the first path: the batch that takes about `ms`.
        let (mut probe, mut spent) = (0, 0.0);
        while spent < 0.05 {
            spent += timed(|| batch(xs[0].1.as_mut(), &data, echo, 1)).1;
            probe += 1;
        }
        let per = spent / probe as f64;
        let n = ((o.ms / 1e3 / per) as usize).max(1);
        // Warm up every path (and bring each to the first's exchange count,
        // so the datagram check compares the same ranks).
        for (_, x) in xs.iter_mut().skip(1) {
            batch(x.as_mut(), &data, echo, probe);
        }
        for (_, x) in xs.iter_mut() {
            batch(x.as_mut(), &data, echo, n);
        }
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); xs.len()];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); xs.len()];
        for r in 0..o.rounds {
            let mut dg = vec![0; xs.len()];
            let mut round = vec![0.0; xs.len()];
            let order: Vec<usize> =
                if r % 2 == 0 { (0..xs.len()).collect() } else { (0..xs.len()).rev().collect() };
            for i in order {
                let (d, t) = timed(|| batch(xs[i].1.as_mut(), &data, echo, n));
                dg[i] = d;
                round[i] = t * 1e9 / n as f64;
            }
            for i in 1..xs.len() {
                assert_eq!(dg[i], dg[0], "round {r}: {} sent other datagrams than {}", xs[i].0, xs[0].0);
                ratios[i].push(round[i] / round[0]);
            }
            for (i, t) in round.into_iter().enumerate() {
                ns[i].push(t);
            }
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load = load.split_whitespace().next().unwrap_or("?");
        println!("{w}: {} rounds of {n} exchanges per path, load {load}", o.rounds);
        for i in 0..xs.len() {
            let mut t = ns[i].clone();
            t.sort_by(f64::total_cmp);
            print!("  {:16} median {:10.1} ns  min {:10.1} ns", xs[i].0, quantile(&t, 0.5), t[0]);
            if i > 0 {
                let mut q = ratios[i].clone();
                q.sort_by(f64::total_cmp);
                print!(
                    "  ratio median {:.3} (quartiles {:.3}-{:.3}, range {:.3}-{:.3})",
                    quantile(&q, 0.5),
                    quantile(&q, 0.25),
                    quantile(&q, 0.75),
                    q[0],
                    q[q.len() - 1]
                );
            }
            println!();
        }
    }
}
