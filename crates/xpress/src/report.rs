//! `xpress report`: the command-line face of the `xk-lab` runner.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// Small sizes and counts (about 30 s after the build; what CI runs).
    #[arg(long)]
    quick: bool,
    /// Directory for report.html, results.json and one CSV per experiment
    /// (results-E2.csv, …, results-machine.csv).
    #[arg(long, default_value = "out/report")]
    out: PathBuf,
    /// Master seed of the simulated experiments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A plan file (TOML) choosing experiments, parameters, repetitions and
    /// plots, on top of the built-in plan (full, or quick with --quick); see
    /// crates/xk-lab/src/plan.rs for the keys.
    #[arg(long)]
    plan: Option<PathBuf>,
}

pub(crate) fn run(a: &ReportArgs) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    }
    let opts =
        xk_lab::ReportOptions { quick: a.quick, out: a.out.clone(), seed: a.seed, plan: a.plan.clone() };
    xk_lab::run(&opts, stop)
}
