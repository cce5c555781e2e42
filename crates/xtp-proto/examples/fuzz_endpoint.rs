//! Stateful fuzzing of the XTP engine on stable Rust (no cargo-fuzz).
//!
//! ```text
//! cargo run --release -p xtp-proto --example fuzz_endpoint -- --seconds 60 [--seed N] [--out DIR]
//! ```
//!
//! Generates inputs from a seeded generator and runs each through
//! [`xtp_proto::fuzzing::run`] (a client and a server endpoint joined by a
//! scripted network; see that module for the invariants). An input that
//! reaches a new behaviour signature joins an in-memory corpus and is mutated
//! further (byte flips, insertions, deletions, splices), a poor man's
//! coverage guidance. Every failure (an invariant that did not hold, or a
//! panic) is written to `DIR/failure-<hash>.bin` (default `fuzz/failures`)
//! and counted; the exit status is non-zero if there was any. Prints the seed
//! first, so a run can be repeated exactly.

// A driver, not protocol code: it reads the wall clock for its time budget
// and its default seed (printed), never inside the engine.
#![allow(clippy::disallowed_methods)]

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use xk_rand::Rng;
use xtp_proto::fuzzing;

fn main() {
    let mut seconds = 60.0f64;
    let mut seed: Option<u64> = None;
    let mut out = PathBuf::from("fuzz/failures");
    let mut corpus_out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--seconds" => seconds = value().parse().unwrap_or_else(|_| usage("--seconds: a number")),
            "--seed" => seed = Some(value().parse().unwrap_or_else(|_| usage("--seed: a number"))),
            "--out" => out = PathBuf::from(value()),
            "--save-corpus" => corpus_out = Some(PathBuf::from(value())),
            "-h" | "--help" => usage(""),
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    // The one place a seed may come from outside: the wall clock, printed.
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    println!("fuzz_endpoint: seed {seed}, {seconds} s");
    // Panics are failures we record, not noise on the terminal.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng::derive(seed, "fuzz_endpoint");
    let mut corpus: Vec<Vec<u8>> = vec![vec![0, 1, 0, 200, 30, 9, 9, 9, 29, 24, 50, 7, 0, 29, 28, 5]];
    let mut seen: HashSet<u64> = HashSet::new();
    let (mut execs, mut failures) = (0u64, 0u64);
    let mut failing: HashSet<String> = HashSet::new();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut next_report = start + Duration::from_secs(10);
    while Instant::now() < deadline {
        let input = if rng.next_u32().is_multiple_of(4) || corpus.is_empty() {
            let n = 2 + (rng.next_u32() % 400) as usize;
            (0..n).map(|_| rng.next_u32() as u8).collect()
        } else {
            let base = &corpus[(rng.next_u32() as usize) % corpus.len()];
            let other = &corpus[(rng.next_u32() as usize) % corpus.len()];
            mutate(&mut rng, base, other)
        };
        execs += 1;
        match catch_unwind(AssertUnwindSafe(|| fuzzing::run(&input))) {
            Ok(Ok(stats)) => {
                if seen.insert(stats.signature) {
                    corpus.push(input);
                }
            }
            Ok(Err(f)) => {
                failures += 1;
                record(&out, &input, &f.0, &mut failing);
            }
            Err(p) => {
                failures += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                record(&out, &input, &format!("panic: {msg}"), &mut failing);
            }
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(10);
            println!(
                "  {:.0} s: {execs} execs, {} signatures, corpus {}, {failures} failures",
                start.elapsed().as_secs_f64(),
                seen.len(),
                corpus.len()
            );
        }
    }
    println!(
        "fuzz_endpoint: seed {seed}: {execs} execs in {:.1} s, {} behaviour signatures, corpus {}, {failures} failures ({} distinct)",
        start.elapsed().as_secs_f64(),
        seen.len(),
        corpus.len(),
        failing.len()
    );
    if let Some(dir) = corpus_out {
        let _ = std::fs::create_dir_all(&dir);
        for (i, c) in corpus.iter().enumerate().take(64) {
            let _ = std::fs::write(dir.join(format!("seed-{seed}-{i:03}.bin")), c);
        }
    }
    if failures > 0 {
        std::process::exit(1);
    }
}

fn record(dir: &PathBuf, input: &[u8], what: &str, failing: &mut HashSet<String>) {
    // One file per distinct message (numbers vary; keep the first word run).
    let key: String = what.chars().filter(|c| !c.is_ascii_digit()).collect();
    if failing.insert(key) {
        let _ = std::fs::create_dir_all(dir);
        let h = input
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
        let path = dir.join(format!("failure-{h:016x}.bin"));
        let _ = std::fs::write(&path, input);
        println!("  FAILURE {what}\n    input written to {}", path.display());
    }
}

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.next_u32() % 4 {
        let at = if v.is_empty() { 0 } else { rng.next_u32() as usize % v.len() };
        match rng.next_u32() % 5 {
            0 if !v.is_empty() => v[at] ^= 1 << (rng.next_u32() % 8),
            1 => v.insert(at, rng.next_u32() as u8),
            2 if v.len() > 2 => {
                v.remove(at);
            }
            3 if !other.is_empty() => {
                let from = rng.next_u32() as usize % other.len();
                let n = (rng.next_u32() as usize % 32).min(other.len() - from);
                v.splice(at..at, other[from..from + n].iter().copied());
            }
            _ if !v.is_empty() => v[at] = rng.next_u32() as u8,
            _ => v.push(rng.next_u32() as u8),
        }
    }
    v.truncate(2048);
    v
}

fn usage(err: &str) -> ! {
    if !err.is_empty() {
        eprintln!("fuzz_endpoint: {err}");
    }
    eprintln!("usage: fuzz_endpoint [--seconds S] [--seed N] [--out DIR] [--save-corpus DIR]");
    std::process::exit(2);
}
