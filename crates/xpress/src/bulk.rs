//! `xpress bulk`: flags and printing; the transfer is `xk_apps::bulk`.
//!
//! Output follows iperf3: a header, an interval line every `-i` seconds
//! (sender's rate, receiver's goodput, retransmissions, RTT, window), and
//! the end summary with both sides' counts and the protocol's counters;
//! `-J` gives all of it as one line of JSON at the end. Ctrl-C prints the
//! summary so far and exits with status 1.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use xk_apps::bulk::{self, Amount, BulkConfig, BulkResult, Interval};
use xk_apps::{Transport, format};
use xtp_proto::Congestion;

use crate::args::{self, PathArgs};

#[derive(Args)]
pub(crate) struct BulkArgs {
    /// Server (`xpress serve`): HOST[:PORT], port 3636 by default.
    #[arg(long, default_value = "127.0.0.1:3636", value_parser = args::addr, value_name = "ADDR")]
    to: SocketAddr,
    /// Bytes to send: 100000000, 64k, 10m, 1G (k = 1024).
    #[arg(short = 'n', long, default_value = "100000000", value_parser = args::bytes, value_name = "BYTES")]
    bytes: u64,
    /// Send for this many seconds (0.1–3600) instead of a byte count: the
    /// sender stops and closes at the deadline, and the goodput counts what
    /// the receiver acknowledged by then (XTP; TCP: what it counted).
    #[arg(short = 't', long, conflicts_with = "bytes", value_parser = args::seconds, value_name = "SECONDS")]
    time: Option<std::time::Duration>,
    /// Print an interval line every this many seconds.
    #[arg(short = 'i', long, value_parser = args::seconds, value_name = "SECONDS")]
    interval: Option<std::time::Duration>,
    /// Send messages of this many bytes (XTP: each ends with EOM; TCP: one
    /// write each, Nagle off) instead of an unbroken stream.
    #[arg(short = 'l', long, value_name = "BYTES", value_parser = args::size)]
    length: Option<usize>,
    /// Hash the data on both sides (SHA-256) and compare them: a check,
    /// not a throughput run — hashing costs more than XTP itself.
    #[arg(long)]
    verify: bool,
    /// Checksum over headers only (NOCHECK).
    #[arg(long)]
    nocheck: bool,
    /// XTP rate limit, as tc writes rates: 10mbit, 1.5gbit, 64kbit.
    #[arg(long, value_parser = args::rate, value_name = "RATE")]
    rate: Option<u64>,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,
    /// Receive window asked of the peer and offered by us (64k, 4m).
    /// Without it, the window starts at 4 MiB and grows with the path (up to
    /// 256 MiB, receive-buffer right-sizing); with it, it stays this size.
    #[arg(long, value_name = "BYTES", value_parser = args::size)]
    window: Option<usize>,
    /// Print the result as one line of JSON (intervals included).
    #[arg(short = 'J', long)]
    json: bool,
    /// Write the output to FILE (appended) instead of the terminal.
    #[arg(long, value_name = "FILE")]
    logfile: Option<std::path::PathBuf>,
    /// What to measure: XTP, the kernel-TCP floor, or QUIC (quinn).
    #[arg(long, default_value = "xtp", value_parser = args::transport, value_name = "xtp|tcp|quic")]
    transport: Transport,
    /// With `--transport quic`: the server's certificate (the FILE given to
    /// `xpress serve --quic-cert`); `--to` is then the `quic on` address.
    #[arg(long, value_name = "FILE")]
    quic_cert: Option<std::path::PathBuf>,
    #[command(flatten)]
    path: PathArgs,
}

pub(crate) fn run(a: &BulkArgs) -> Result<ExitCode, String> {
    let cfg = BulkConfig {
        to: a.to,
        transport: a.transport,
        amount: a.time.map_or(Amount::Bytes(a.bytes), Amount::Time),
        length: a.length,
        verify: a.verify,
        nocheck: a.nocheck,
        rate_bps: a.rate,
        cc: a.cc,
        window: a.window,
        interval: a.interval,
        path: a.path.config(false),
        quic_cert: a.quic_cert.clone(),
    };
    bulk::check(&cfg)?;
    let mut out: Box<dyn Write> = match &a.logfile {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("--logfile {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let stop = args::ctrl_c()?;
    let json = a.json;
    if !json {
        let via = cfg.path.via.map(|v| format!(" via {v}")).unwrap_or_default();
        let what = match cfg.amount {
            Amount::Bytes(b) => format!("{} bytes", b),
            Amount::Time(t) => format!("for {}", format::secs(t.as_secs_f64())),
        };
        let _ = writeln!(out, "Connecting to {}{via} ({}), sending {what}", a.to, a.transport.name());
    }
    let mut header = false;
    let r = bulk::run(&cfg, stop, |iv| {
        if json {
            return;
        }
        if !header {
            let _ = writeln!(out, "{}", interval_header());
            header = true;
        }
        let _ = writeln!(out, "{}", interval_line(iv));
    })?;
    for w in &r.warnings {
        eprintln!("xpress bulk: warning: {w}");
    }
    if json {
        let _ = writeln!(out, "{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        let _ = write!(out, "{}", summary(&r));
    }
    let _ = out.flush();
    if r.interrupted {
        eprintln!("xpress bulk: interrupted (the summary covers the time until Ctrl-C)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn interval_header() -> String {
    format!(
        "{:<15} {:>10} {:>13} {:>13} {:>10} {:>9} {:>10}",
        "interval", "sent", "sender", "receiver", "retr", "rtt", "cwnd"
    )
}

/// One interval: seconds, bytes sent, the sender's rate, the receiver's
/// goodput (acknowledged bytes), retransmitted bytes, RTT, window.
fn interval_line(iv: &Interval) -> String {
    let dash = || "-".to_string();
    format!(
        "{:<15} {:>10} {:>13} {:>13} {:>10} {:>9} {:>10}",
        format!("{:.2}-{:.2} s", iv.start, iv.end),
        format::bytes(iv.sent_bytes),
        format::rate(iv.sent_bits_per_second),
        iv.acked_bits_per_second.map_or_else(dash, format::rate),
        iv.retransmitted.map_or_else(dash, format::bytes),
        iv.srtt_ms.map_or_else(dash, |ms| format::secs(ms / 1e3)),
        iv.cwnd.map_or_else(dash, format::bytes),
    )
}

/// The end: what was counted, both sides' view, the protocol's counters.
fn summary(r: &BulkResult) -> String {
    let mut s = String::new();
    let rate = format::rate(r.bits_per_second);
    let secs = format::secs(r.seconds);
    if r.timed && r.transport == "xtp" {
        s += &format!(
            "{}: {} acknowledged by the receiver within {secs}: {rate}\n",
            r.transport,
            format::bytes(r.bytes)
        );
    } else {
        s += &format!("{}: {} bytes ({}) in {secs}: {rate}\n", r.transport, r.bytes, format::bytes(r.bytes));
    }
    let receiver = match r.receiver_bytes {
        Some(n) => format!("the receiver counted {n} bytes"),
        None => "no count from the receiver (the transfer was cut short)".into(),
    };
    s += &format!("  sender wrote {} bytes; {receiver}\n", r.sent_bytes);
    if let Some(h) = &r.sha256 {
        let same = if r.receiver_sha256.as_ref() == Some(h) { " (the receiver's matches)" } else { "" };
        s += &format!("  sha256 {h}{same}\n");
    }
    if let Some(c) = &r.context {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format::secs(v / 1e3));
        let cwnd = if c.cwnd == u64::MAX { "none".into() } else { format::bytes(c.cwnd) };
        s += &format!(
            "  {}: retransmitted {} ({} spurious), {} timeouts ({} spurious), {} reductions ({} undone), \
             srtt {}, min rtt {}, cwnd {cwnd}\n",
            c.congestion,
            format::bytes(c.retransmitted),
            format::bytes(c.spurious_retransmitted),
            c.timeouts,
            c.spurious_timeouts,
            c.congestion_events,
            c.undone,
            ms(c.srtt_ms),
            ms(c.min_rtt_ms),
        );
    }
    if r.interrupted {
        s += "  (interrupted)\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_lines_show_both_rates_retransmissions_rtt_and_window() {
        let iv = Interval {
            start: 1.0,
            end: 2.0,
            sent_bytes: 12_500_000,
            acked_bytes: Some(12_000_000),
            sent_bits_per_second: 100e6,
            acked_bits_per_second: Some(96e6),
            retransmitted: Some(3000),
            srtt_ms: Some(20.34),
            cwnd: Some(1 << 20),
            send_window: Some(1 << 20),
        };
        let l = interval_line(&iv);
        for part in
            ["1.00-2.00 s", "11.9 MiB", "100 Mbit/s", "96.0 Mbit/s", "2.93 KiB", "20.3 ms", "1.00 MiB"]
        {
            assert!(l.contains(part), "{part:?} not in {l:?}");
        }
        let tcp = Interval {
            acked_bytes: None,
            acked_bits_per_second: None,
            retransmitted: None,
            srtt_ms: None,
            cwnd: None,
            ..iv
        };
        assert!(interval_line(&tcp).ends_with('-'), "{}", interval_line(&tcp));
        assert_eq!(interval_header().chars().count(), l.chars().count());
    }
}
