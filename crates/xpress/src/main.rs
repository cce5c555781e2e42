//! `xpress`: the command-line front end of the project.
//!
//! Every part of the laboratory adds a subcommand here. The binary is the one
//! place (with the driver and lab crates) allowed to read the wall clock.

mod args;
mod bench;
mod bulk;
mod daemon_cmd;
mod emulate;
mod ftp_cmd;
mod fuzz_cmd;
mod loadgen_cmd;
mod netns_cmd;
mod ping;
mod report;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xpress", version, about = "XTP 4.0 in user space, and the laboratory that measures it")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Micro-benchmarks of the framework mechanisms.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Real-time UDP relay applying the link model in each direction.
    Emulate(emulate::EmulateArgs),
    /// Two network namespaces joined by the emulator through TUN devices
    /// (root): run any program under the emulated link.
    Netns(netns_cmd::NetnsArgs),
    /// The seeds' experiments reproduced here: HTML and JSON report.
    Report(report::ReportArgs),
    /// Serve `ping` and `bulk`: XTP echo/discard/verify, the TCP and UDP
    /// floors, optionally QUIC; one line per bound service.
    Serve(serve::ServeArgs),
    /// The XTP endpoint as a daemon serving client processes over shared
    /// memory (`Mode::Daemon`); `--status` asks a running one.
    Daemon(daemon_cmd::DaemonArgs),
    /// Round trips over XTP (or the UDP/TCP floors), as ping reports them.
    Ping(ping::PingArgs),
    /// Bulk transfer over XTP (or TCP, QUIC), as iperf3 reports it.
    Bulk(bulk::BulkArgs),
    /// FTP over kernel TCP or XTP: a server, and get/put/ls as a client.
    #[command(subcommand)]
    Ftp(ftp_cmd::FtpCommand),
    /// Load generator after UniLoG: behaviour automata driving UDP, TCP
    /// and XTP, with P_max and miss times; check, run, sink, floor, merge.
    #[command(subcommand)]
    Loadgen(loadgen_cmd::LoadgenCommand),
    /// Stateful fuzzing of the XTP engine (client and server endpoints over
    /// a scripted hostile network); exit 1 if any input failed.
    Fuzz(fuzz_cmd::FuzzArgs),
}

/// A tool's own exit status, or 1 with its error printed.
fn status(r: Result<ExitCode, String>) -> ExitCode {
    r.unwrap_or_else(|e| {
        eprintln!("xpress: error: {e}");
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Netns(args) = &cli.command {
        // Its exit status is the status of the command run in namespace B.
        return netns_cmd::run(args).unwrap_or_else(|e| {
            eprintln!("xpress: error: {e}");
            ExitCode::FAILURE
        });
    }
    let result = match cli.command {
        Command::Netns(_) => unreachable!("handled above"),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Emulate(args) => emulate::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Daemon(args) => daemon_cmd::run(&args),
        Command::Ping(args) => return status(ping::run(&args)),
        Command::Bulk(args) => return status(bulk::run(&args)),
        Command::Ftp(cmd) => ftp_cmd::run(cmd),
        Command::Loadgen(cmd) => loadgen_cmd::run(cmd),
        Command::Fuzz(args) => {
            return status(
                fuzz_cmd::run(&args).map(|ok| if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }),
            );
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xpress: error: {e}");
            ExitCode::FAILURE
        }
    }
}
