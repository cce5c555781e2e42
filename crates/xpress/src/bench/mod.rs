//! `xpress bench …`: framework micro-benchmarks with printed tables.

pub(crate) mod relay;

use clap::{Args, Subcommand};

/// `xpress bench map` (experiment E4; the measurement lives in `xk-lab`).
#[derive(Args)]
pub(crate) struct MapArgs {
    /// Largest number of bindings measured (from 100, 1000, … 1000000).
    #[arg(long, default_value_t = 1_000_000)]
    max_bindings: usize,
    /// Lookups timed per repetition.
    #[arg(long, default_value_t = 1_000_000)]
    lookups: usize,
    /// Repetitions per cell (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Hold keys as plain byte arrays instead of 64-bit words.
    #[arg(long)]
    raw_keys: bool,
}

/// Benchmarks available under `xpress bench`.
#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Experiment E4: demux map lookup time vs bindings and key size.
    Map(MapArgs),
    /// Forwarding capacity of the `emulate` relay (packets per second).
    Relay(relay::RelayArgs),
}

pub(crate) fn run(cmd: BenchCommand) -> Result<(), String> {
    match cmd {
        BenchCommand::Map(a) => {
            let p = xk_lab::e4::MapParams {
                max_bindings: a.max_bindings,
                lookups: a.lookups,
                reps: a.reps,
                raw_keys: a.raw_keys,
            };
            xk_lab::e4::run(&p, a.json)
        }
        BenchCommand::Relay(args) => relay::run(&args),
    }
}
