//! `xpress bench …`: framework micro-benchmarks with printed tables.

pub(crate) mod map;
pub(crate) mod relay;

use clap::Subcommand;

/// Benchmarks available under `xpress bench`.
#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Experiment E4: demux map lookup time vs bindings and key size.
    Map(map::MapArgs),
    /// Forwarding capacity of the `emulate` relay (packets per second).
    Relay(relay::RelayArgs),
}

pub(crate) fn run(cmd: BenchCommand) -> Result<(), String> {
    match cmd {
        BenchCommand::Map(args) => map::run(&args),
        BenchCommand::Relay(args) => relay::run(&args),
    }
}
