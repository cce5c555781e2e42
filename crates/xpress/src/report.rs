//! `xpress report`: the command-line face of the `xk-lab` runner.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// The quick plan: small sizes and counts, short runs (what CI runs; a
    /// few minutes).
    #[arg(long)]
    quick: bool,
    /// Directory for report.html (with one SVG file per figure),
    /// results.json and one CSV file per experiment.
    #[arg(long, default_value = "out/report")]
    out: PathBuf,
    /// Master seed of the simulated experiments and the emulated links.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A plan file (TOML) choosing experiments, their parameters,
    /// repetitions and extra plots, on top of the built-in plan (full, or
    /// quick with --quick); `--list` shows every parameter.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Run only the steps k with k mod N = I (`--shard I/N`), so N machines
    /// share a sweep; `--merge` joins the shards' directories.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Rebuild report.html, the figures and the CSV files from
    /// DIR/results.json without measuring.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["compare", "merge", "shard", "plan"])]
    replot: Option<PathBuf>,
    /// Compare two result directories row by row (headline value of each
    /// row and the ratio B/A).
    #[arg(long, num_args = 2, value_names = ["DIR_A", "DIR_B"], conflicts_with_all = ["merge", "shard", "plan"])]
    compare: Vec<PathBuf>,
    /// Merge the result directories of the shards of one plan into --out.
    #[arg(long, num_args = 1.., value_name = "DIR", conflicts_with_all = ["shard", "plan"])]
    merge: Vec<PathBuf>,
    /// List the experiments and their parameters with built-in values (full
    /// plan, or quick with --quick), as a plan file would set them.
    #[arg(long)]
    list: bool,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s.split_once('/').ok_or("must be I/N, e.g. 0/4")?;
    let (i, n): (usize, usize) =
        (i.trim().parse().map_err(|_| "I: not a number")?, n.trim().parse().map_err(|_| "N: not a number")?);
    if n == 0 || i >= n {
        return Err(format!("{i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

pub(crate) fn run(a: &ReportArgs) -> Result<(), String> {
    if a.list {
        print!("{}", xk_lab::runner::list(a.quick));
        return Ok(());
    }
    if let Some(dir) = &a.replot {
        return xk_lab::replot(dir);
    }
    if let [x, y] = a.compare.as_slice() {
        return xk_lab::compare(x, y);
    }
    if !a.merge.is_empty() {
        return xk_lab::merge(&a.merge, &a.out);
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    }
    let opts = xk_lab::ReportOptions {
        quick: a.quick,
        out: a.out.clone(),
        seed: a.seed,
        plan: a.plan.clone(),
        shard: a.shard,
    };
    xk_lab::run(&opts, stop)
}
