//! `xpress emulate`: the real-time UDP relay (driver 2 of the link model).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use xk_apps::pcap_file::LiveFile;
use xk_driver::pacer;
use xk_driver::relay::{self, DEFAULT_MAX_P99_ERROR, RelayConfig};
use xk_netemu::{LinkSpec, parse_line, parse_toml};
use xk_time::Duration;
use xtp_wire::pcap::PcapWriter;

#[derive(Args)]
pub(crate) struct EmulateArgs {
    #[command(flatten)]
    trace: crate::args::TraceArgs,
    /// Address clients send to (what they give as `--via`): HOST[:PORT].
    #[arg(long, value_parser = crate::args::addr, value_name = "ADDR")]
    listen: SocketAddr,
    /// The server the relay forwards to: HOST[:PORT], port 3636 by default
    /// (`xpress serve`'s XTP address; its UDP echo for `ping --transport udp`).
    #[arg(long, value_parser = crate::args::addr, value_name = "ADDR")]
    server: SocketAddr,
    /// Client → server link in tc-netem's words (`delay 20ms 5ms rate
    /// 100mbit loss 1%`; see docs/NETEM.md) or `@file.toml`.
    #[arg(long, default_value = "")]
    link: String,
    /// Server → client link (default: the same as --link).
    #[arg(long)]
    reverse: Option<String>,
    /// Master seed (default: derived from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many seconds (Ctrl-C stops earlier; the report is
    /// printed either way).
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Least margin (µs) before each release spent spinning instead of
    /// sleeping; the margin grows with the wake-up lateness measured during
    /// the run, up to 100 µs (a spin holds a core at real-time priority).
    #[arg(long, default_value_t = duration_micros(pacer::DEFAULT_SPIN))]
    spin_us: u64,
    /// Mark the run invalid (not trustworthy) when the p99 release error of
    /// either direction exceeds this (µs).
    #[arg(long, default_value_t = duration_micros(DEFAULT_MAX_P99_ERROR))]
    max_p99_error_us: u64,
    /// Do not ask for SCHED_FIFO (by default the forwarding thread asks, and
    /// goes on at normal priority, saying so, where it is not permitted).
    #[arg(long)]
    no_realtime: bool,
    /// Do not keep the forwarding thread's CPU awake with a SCHED_IDLE
    /// spinner (by default one runs while releases are near, on idle time
    /// only, when the thread got SCHED_FIFO).
    #[arg(long)]
    no_keep_warm: bool,
    /// Write one JSON line per datagram event here.
    #[arg(long)]
    log: Option<String>,
    /// Write every datagram that crossed the emulated link (dropped ones
    /// are not) to FILE as pcap, framed as IP protocol 36: for XTP
    /// traffic, which Wireshark and tshark then decode as it is.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
}

/// The pacing the `--no-realtime` / `--no-keep-warm` flags leave.
pub(crate) fn pacing(no_realtime: bool, no_keep_warm: bool) -> pacer::Pacing {
    pacer::Pacing { realtime: !no_realtime, keep_warm: !no_keep_warm }
}

/// Whole microseconds of `d`, for command-line defaults.
pub(crate) const fn duration_micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// A pcap file for `--pcap` (readable while the run goes on), or an
/// error naming it.
pub(crate) fn pcap_writer(p: &std::path::Path) -> Result<PcapWriter<LiveFile>, String> {
    xk_apps::pcap_file::create(p)
}

/// Nanoseconds since 1970 at the moment a new driver clock reads zero
/// (pcap files want wall time; the forwarding loop's clock starts at 0).
pub(crate) fn unix_base() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_nanos() as u64)
}

pub(crate) fn spec(what: &str, s: &str) -> Result<LinkSpec, String> {
    let r = match s.strip_prefix('@') {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read {path}: {e}"))?;
            parse_toml(&text)
        }
        None => parse_line(s),
    };
    r.map_err(|e| format!("{what}: {e}"))
}

pub(crate) fn run(a: &EmulateArgs) -> Result<(), String> {
    a.trace.around("emulate", || run_traced(a))
}

fn run_traced(a: &EmulateArgs) -> Result<(), String> {
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        return Err(format!("--duration {}: must be a positive number of seconds", a.duration));
    }
    let forward = spec("--link", &a.link)?;
    let reverse = spec("--reverse", a.reverse.as_deref().unwrap_or(&a.link))?;
    let seed = a.seed.unwrap_or_else(xk_driver::clock::time_seed);
    let sock = std::net::UdpSocket::bind(a.listen).map_err(|e| format!("relay on {}: {e}", a.listen))?;
    // The address bound, so `--listen 127.0.0.1:0` says which port to give
    // `--via`.
    let listen = sock.local_addr().unwrap_or(a.listen);
    eprintln!("xpress emulate: {listen} <-> {} seed {seed} for {} s", a.server, a.duration);
    // What was understood, in the link's own words (a typo that still
    // parses shows here).
    eprintln!("xpress emulate: forward (client -> server): {forward}");
    eprintln!("xpress emulate: reverse (server -> client): {reverse}");
    // Ctrl-C ends the relay early; its report (below) is still printed.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    }
    let cfg = RelayConfig {
        listen,
        server: a.server,
        forward,
        reverse,
        seed,
        duration: Duration::from_secs_f64(a.duration),
        spin: Duration::from_micros(a.spin_us),
        max_p99_error: Duration::from_micros(a.max_p99_error_us),
        stop: Some(stop),
    };
    let mut file = match &a.log {
        Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| format!("--log {p}: {e}"))?)),
        None => None,
    };
    if a.spin_us > duration_micros(pacer::MAX_SPIN) {
        return Err(format!(
            "--spin-us {}: at most {} (a longer spin holds a core at real-time priority)",
            a.spin_us,
            duration_micros(pacer::MAX_SPIN)
        ));
    }
    let mut log = file.as_mut().map(|f| f as &mut dyn Write);
    let mut pcap = match &a.pcap {
        Some(p) => Some(pcap_writer(p)?),
        None => None,
    };
    let base = unix_base();
    let mut capture = |_dir: usize, t: xk_time::Instant, from: SocketAddr, to: SocketAddr, data: &[u8]| {
        if let Some(w) = pcap.as_mut() {
            let _ = w.write_packet(base + t.as_nanos(), from.ip(), to.ip(), data);
        }
    };
    let cap: Option<relay::Capture<'_>> = a.pcap.is_some().then_some(&mut capture as relay::Capture<'_>);
    let report = relay::run_on_captured(sock, &cfg, pacing(a.no_realtime, a.no_keep_warm), &mut log, cap)
        .map_err(|e| format!("relay on {listen}: {e}"))?;
    if let Some(w) = pcap {
        w.into_inner().map_err(|e| format!("--pcap: {e}"))?;
    }
    if let (Some(s), Some(w)) = (&report.timing.scheduling, &report.timing.keep_warm) {
        eprintln!("xpress emulate: forwarding thread: {s}; keep-warm: {w}");
    }
    if let Some(mut f) = file {
        f.flush().map_err(|e| e.to_string())?;
    }
    println!("{}", serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?);
    eprintln!("xpress emulate: forward: {}", report.forward.summary());
    eprintln!("xpress emulate: reverse: {}", report.reverse.summary());
    if !report.valid {
        return Err(format!(
            "this run is not trustworthy (measurements taken through it should be marked invalid): {}",
            report.invalid_reasons.join("; ")
        ));
    }
    Ok(())
}
