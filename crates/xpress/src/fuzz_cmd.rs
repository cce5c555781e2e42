//! `xpress fuzz`: stateful fuzzing of the XTP engine on stable Rust (no
//! cargo-fuzz, so CI runs it on a fresh machine).
//!
//! ```text
//! xpress fuzz --seconds 60 [--seed N] [--out DIR] [--save-corpus DIR]
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
//! first, so a run can be repeated exactly. It lives in the binary because
//! it reads the wall clock for its budget; the engine under test never does.
//! A debug build keeps overflow checks on (an overflow on wire input is a
//! failure); a release build runs several times more inputs.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xk_rand::Rng;
use xtp_proto::fuzzing;

/// `xpress fuzz`: the stateful endpoint fuzzer.
#[derive(clap::Args)]
pub(crate) struct FuzzArgs {
    /// Wall-clock budget in seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Generator seed (default: from the clock, printed first).
    #[arg(long)]
    seed: Option<u64>,
    /// Where each distinct failing input is written.
    #[arg(long, default_value = "fuzz/failures")]
    out: PathBuf,
    /// Also write up to 64 inputs that reached distinct behaviours here.
    #[arg(long, value_name = "DIR")]
    save_corpus: Option<PathBuf>,
}

/// Runs the fuzzer for its budget; `Ok(false)` when any input failed.
pub(crate) fn run(args: &FuzzArgs) -> Result<bool, String> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err(format!("--seconds must be a positive number, not {}", args.seconds));
    }
    let (seconds, out, corpus_out) = (args.seconds, &args.out, &args.save_corpus);
    let seed = args.seed.unwrap_or_else(xk_driver::clock::time_seed);
    println!("xpress fuzz: seed {seed}, {seconds} s");
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
                record(out, &input, &f.0, &mut failing);
            }
            Err(p) => {
                failures += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                record(out, &input, &format!("panic: {msg}"), &mut failing);
            }
        }
        if Instant::now() >= next_report {
            // From now, not from the last report: a starved run prints one
            // line per 10 s it gets, not a burst of catch-up lines.
            next_report = Instant::now() + Duration::from_secs(10);
            println!(
                "  {:.0} s: {execs} execs, {} signatures, corpus {}, {failures} failures",
                start.elapsed().as_secs_f64(),
                seen.len(),
                corpus.len()
            );
        }
    }
    println!(
        "xpress fuzz: seed {seed}: {execs} execs in {:.1} s, {} behaviour signatures, corpus {}, {failures} failures ({} distinct)",
        start.elapsed().as_secs_f64(),
        seen.len(),
        corpus.len(),
        failing.len()
    );
    if let Some(dir) = corpus_out {
        let _ = std::fs::create_dir_all(dir);
        for (i, c) in corpus.iter().enumerate().take(64) {
            let _ = std::fs::write(dir.join(format!("seed-{seed}-{i:03}.bin")), c);
        }
    }
    Ok(failures == 0)
}

fn record(dir: &Path, input: &[u8], what: &str, failing: &mut HashSet<String>) {
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
