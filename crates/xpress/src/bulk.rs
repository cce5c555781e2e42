//! `xpress bulk`: flags and printing; the transfer is `xk_apps::bulk`.
//!
//! Output follows iperf3: a header, an interval line every `-i` seconds
//! (sender's rate, receiver's goodput, retransmissions, RTT, window, pacing) per
//! context and a `[SUM]` with `-P`, `tx`/`rx` with `--bidir`, and the end
//! summary with both sides' counts and the protocol's counters;
//! `-J` gives all of it as one line of JSON at the end. Ctrl-C prints the
//! summary so far and exits with status 1.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use xk_apps::bulk::{self, Amount, BulkConfig, BulkResult, Direction, Interval, StreamResult};
use xk_apps::{Transport, format};
use xtp_proto::Congestion;

use crate::args::{self, PathArgs};

#[derive(Args)]
pub(crate) struct BulkArgs {
    #[command(flatten)]
    trace: args::TraceArgs,
    /// Server (`xpress serve`): HOST[:PORT], port 3636 by default.
    #[arg(long, default_value = "127.0.0.1:3636", value_parser = args::addr, value_name = "ADDR")]
    to: SocketAddr,
    /// Bytes to send: 100000000, 64k, 10m, 1G (k = 1024).
    #[arg(short = 'n', long, default_value = "100000000", value_parser = args::bytes, value_name = "BYTES")]
    bytes: u64,
    /// Send for this many seconds (0.1–3600) instead of a byte count: the
    /// sender stops and closes at the deadline, and the goodput counts what
    /// the receiver acknowledged by then (XTP; TCP: what it counted; QUIC:
    /// what the server counted, the data quinn buffered included, over the
    /// time until its count came back).
    #[arg(short = 't', long, conflicts_with = "bytes", value_parser = args::seconds, value_name = "SECONDS")]
    time: Option<std::time::Duration>,
    /// With -t: run this many seconds first and leave them out of the count,
    /// so the result is the steady state (iperf3's -O: slow start and the
    /// first round trip, in which nothing can be acknowledged yet, are not
    /// averaged in). Their interval lines say "(omitted)". XTP and TCP.
    #[arg(short = 'O', long, value_parser = args::seconds, value_name = "SECONDS")]
    omit: Option<std::time::Duration>,
    /// Parallel contexts (TCP and QUIC: connections) per direction, 1–128;
    /// -n is shared among them.
    #[arg(short = 'P', long, default_value_t = 1, value_name = "N")]
    parallel: u32,
    /// Reverse: the server sends, we receive (its source service).
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    reverse: bool,
    /// Both directions at once (-P contexts each way).
    #[arg(long)]
    bidir: bool,
    /// Print an interval line every this many seconds (0: none, as in
    /// iperf3; at least 0.01 otherwise).
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
    /// XTP 4.0: flow and rate control only). XTP only: kernel TCP uses the
    /// system's (`sysctl net.ipv4.tcp_congestion_control`).
    #[arg(long, value_name = "NAME")]
    cc: Option<Congestion>,
    /// A fixed window (64k, 1m; at least 1500): sending, at most this much
    /// beyond the lowest unacknowledged byte is in flight; receiving (-R),
    /// our receive window, within which the server sends. Without it the
    /// window grows with the path (receive buffer 4 MiB growing to 256 MiB;
    /// the congestion window decides how much is sent).
    #[arg(long, value_name = "BYTES", value_parser = args::size)]
    window: Option<usize>,
    /// Most data bytes per XTP packet we send. Default: the most one packet
    /// carries on the route to the server, as TCP's MSS follows the MTU: the
    /// route's MTU (at most 1,500) less IP, UDP (not with --raw) and XTP's
    /// 32-byte header: 1,440 over UDP on IPv4 at 1,500, 1,420 on IPv6,
    /// 1,448 over --raw, 178 on a 238-byte packet-radio link. The server's
    /// packets follow the size our first packet advertises. A larger value
    /// than the route carries is an error naming the limit (not clamped:
    /// the run would measure another segment than the one asked for).
    #[arg(long, value_name = "BYTES")]
    mss: Option<usize>,
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
    /// Run over the protocol graph described in FILE (e.g. one line
    /// `app -> xtp -> udp`, or `app -> xtp -> ip36` with --raw LOCAL_IP, as
    /// root): XTP as an x-kernel-style framework protocol, to the discard
    /// service of `xpress serve` (`serve --graph` has none). The
    /// description's `compose` line picks the compiled stack (the default)
    /// or the run-time graph (`compose dynamic`). With it only --to, --raw,
    /// -n, -l (default 65536) and -J apply; Ctrl-C aborts the transfer and
    /// exits 1.
    /// Any registered layer may sit where it fits: `app -> xtp -> census ->
    /// udp` counts the datagrams and bytes under XTP each way and prints
    /// them at the end (the run-time graph).
    #[arg(long, value_name = "FILE")]
    graph: Option<std::path::PathBuf>,
}

pub(crate) fn run(a: &BulkArgs) -> Result<ExitCode, String> {
    // Before `--trace` creates its file: the graph's run records nothing.
    if let Some(file) = &a.graph {
        return run_graph(a, file);
    }
    a.trace.around("bulk", || run_traced(a))
}

fn run_traced(a: &BulkArgs) -> Result<ExitCode, String> {
    if a.cc.is_some() && a.transport != Transport::Xtp {
        return Err(format!(
            "--cc: XTP only; {} uses its own controller (kernel TCP: sysctl net.ipv4.tcp_congestion_control)",
            a.transport.name()
        ));
    }
    let cfg = BulkConfig {
        to: a.to,
        transport: a.transport,
        amount: a.time.map_or(Amount::Bytes(a.bytes), Amount::Time),
        parallel: a.parallel,
        direction: if a.bidir {
            Direction::Both
        } else if a.reverse {
            Direction::Receive
        } else {
            Direction::Send
        },
        length: a.length,
        verify: a.verify,
        nocheck: a.nocheck,
        rate_bps: a.rate,
        cc: a.cc.unwrap_or_default(),
        window: a.window,
        mss: a.mss,
        interval: a.interval.filter(|i| !i.is_zero()),
        omit: a.omit.unwrap_or_default(),
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
            Amount::Time(t) if !cfg.omit.is_zero() => format!(
                "for {} after {} left out of the count",
                format::secs(t.as_secs_f64()),
                format::secs(cfg.omit.as_secs_f64())
            ),
            Amount::Time(t) => format!("for {}", format::secs(t.as_secs_f64())),
        };
        let how = match cfg.direction {
            Direction::Send => "sending",
            Direction::Receive => "receiving (reverse)",
            Direction::Both => "sending and receiving",
        };
        let unit = if a.transport == Transport::Xtp { "contexts" } else { "connections" };
        let streams = match (a.parallel > 1, a.bidir) {
            (true, true) => format!(", {} {unit} each way", a.parallel),
            (true, false) => format!(", {} {unit}", a.parallel),
            _ => String::new(),
        };
        let _ = writeln!(out, "Connecting to {}{via} ({}{streams}), {how} {what}", a.to, a.transport.name());
    }
    let mut header = false;
    let (labels, bidir) = (a.parallel > 1 || a.bidir, a.bidir);
    let r = bulk::run(&cfg, stop, |iv| {
        if json {
            return;
        }
        if !header {
            let _ = writeln!(out, "{}", interval_header());
            header = true;
        }
        // With one context each way, a direction's sum is that context
        // (sending ones are numbered first): no SUM line, as iperf3.
        let stream = match (iv.stream, a.parallel) {
            (None, 1) => Some(usize::from(iv.direction == Direction::Receive)),
            (k, _) => k,
        };
        let tag = if labels { label(stream, iv.direction, bidir) } else { String::new() };
        let _ = writeln!(out, "{}", interval_line(iv, &tag));
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

/// A sending context's counters on one line: `  sender (cubic): sent …`.
fn sender_line(c: &xk_apps::bulk::ContextCounters, who: &str) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format::secs(v / 1e3));
    let cwnd = if c.cwnd == u64::MAX { "none".into() } else { format::bytes(c.cwnd) };
    format!(
        "  {who}: sent {}, retransmitted {} ({} spurious), {} ({} spurious), {} ({} undone), srtt {}, \
         min rtt {}, cwnd {cwnd}, pacing {}\n",
        format::bytes(c.bytes_sent),
        format::bytes(c.retransmitted),
        format::bytes(c.spurious_retransmitted),
        format::count(c.timeouts, "timeout", "timeouts"),
        c.spurious_timeouts,
        format::count(c.congestion_events, "reduction", "reductions"),
        c.undone,
        ms(c.srtt_ms),
        ms(c.min_rtt_ms),
        c.pacing_bits_per_second.map_or_else(|| "none".into(), format::rate),
    )
}

fn interval_header() -> String {
    format!(
        "{:<9} {:<15} {:>10} {:>13} {:>13} {:>10} {:>9} {:>10} {:>13}",
        "", "interval", "sent", "sender", "receiver", "retr", "rtt", "cwnd", "pacing"
    )
}

/// `[  0]`, `[SUM]`, with `tx`/`rx` when both directions run.
fn label(stream: Option<usize>, dir: Direction, bidir: bool) -> String {
    let who = stream.map_or_else(|| "SUM".to_string(), |k| format!("{k:>3}"));
    let way = match (bidir, dir) {
        (false, _) => "",
        (true, Direction::Receive) => " rx",
        (true, _) => " tx",
    };
    format!("[{who}{way}]")
}

/// One interval: seconds, bytes sent, the sender's rate, the receiver's
/// goodput (acknowledged, or delivered to us), retransmitted bytes, RTT,
/// window, pacing rate; `-` where this side cannot know (or nothing paces).
/// `tag`: whose line it is (empty with one context).
fn interval_line(iv: &Interval, tag: &str) -> String {
    let dash = || "-".to_string();
    format!(
        "{:<9} {:<15} {:>10} {:>13} {:>13} {:>10} {:>9} {:>10} {:>13}",
        tag,
        format!("{:.2}-{:.2} s", iv.start, iv.end),
        iv.sent_bytes.map_or_else(dash, format::bytes),
        iv.sent_bits_per_second.map_or_else(dash, format::rate),
        iv.receiver_bits_per_second.map_or_else(dash, format::rate),
        iv.retransmitted.map_or_else(dash, format::bytes),
        iv.srtt_ms.map_or_else(dash, |ms| format::secs(ms / 1e3)),
        iv.cwnd.map_or_else(dash, format::bytes),
        iv.pacing_bits_per_second.map_or_else(dash, format::rate),
    ) + if iv.omitted { "  (omitted)" } else { "" }
}

/// A context's line in the summary of a run with several.
fn stream_line(s: &StreamResult, bidir: bool) -> String {
    // Receiving, we are the receiver: what arrived in all, the part after
    // the deadline included; sending, the server's own count.
    let got = match (s.receiver_bytes, s.direction) {
        (None, _) => "no count from the receiver".into(),
        (Some(n), Direction::Receive) => format!("{n} bytes arrived in all"),
        (Some(n), _) => format!("receiver counted {n} bytes"),
    };
    format!(
        "  {} {} in {}: {} ({got})\n",
        label(Some(s.stream), s.direction, bidir),
        format::bytes(s.bytes),
        format::secs(s.seconds),
        format::rate(s.bits_per_second)
    )
}

/// The end: what was counted, both sides' view, the protocol's counters.
fn summary(r: &BulkResult) -> String {
    let mut s = String::new();
    let bidir = r.direction == Direction::Both;
    if r.streams.len() > 1 {
        for st in &r.streams {
            s += &stream_line(st, bidir);
        }
    }
    let rate = format::rate(r.bits_per_second);
    let mut secs = format::secs(r.seconds);
    if r.omitted_seconds > 0.0 {
        secs += &format!(" after the {} omitted", format::secs(r.omitted_seconds));
    }
    let sum = if r.streams.len() > 1 { label(None, Direction::Send, bidir) + " " } else { String::new() };
    let t = r.transport;
    if r.direction == Direction::Receive {
        s +=
            &format!("{sum}{t}: received {} bytes ({}) in {secs}: {rate}\n", r.bytes, format::bytes(r.bytes));
    } else if r.timed && t == "xtp" {
        s += &format!(
            "{sum}{t}: {} acknowledged by the receiver within {secs}: {rate}\n",
            format::bytes(r.bytes)
        );
    } else {
        s += &format!("{sum}{t}: {} bytes ({}) in {secs}: {rate}\n", r.bytes, format::bytes(r.bytes));
    }
    if let Some(rx) = &r.receive_sum {
        s += &format!(
            "{} {t}: received {} in {}: {}\n",
            label(None, Direction::Receive, true),
            format::bytes(rx.bytes),
            format::secs(rx.seconds),
            format::rate(rx.bits_per_second)
        );
    }
    if r.direction != Direction::Receive {
        let receiver = match r.receiver_bytes {
            Some(n) => format!("the receiver counted {n} bytes"),
            None => "no count from the receiver (the transfer was cut short)".into(),
        };
        s += &format!("  sender wrote {} bytes; {receiver}\n", r.sent_bytes);
    }
    if let Some(h) = &r.sha256 {
        let same = if r.receiver_sha256.as_ref() == Some(h) { " (the receiver's matches)" } else { "" };
        s += &format!("  sha256 {h}{same}\n");
    }
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format::secs(v / 1e3));
    let several = r.streams.len() > 1;
    if let (Some(c), Direction::Receive) = (&r.context, r.direction) {
        // A receiving context's window and retransmissions are the server's:
        // its own report of them follows, when it came.
        s += &format!("  receiving: srtt {}, min rtt {}\n", ms(c.srtt_ms), ms(c.min_rtt_ms));
        match &r.sender {
            Some(c) => {
                let who = if several { ", context 0" } else { "" };
                s += &sender_line(c, &format!("server's sender ({}{who})", c.congestion));
            }
            None if r.transport == "xtp" => {
                s += "  server's sender: no counters came (the run was cut short)\n"
            }
            None => {}
        }
    } else if let Some(c) = &r.context {
        let who = if several { ", context 0" } else { "" };
        s += &sender_line(c, &format!("sender ({}{who})", c.congestion));
    }
    if let Some(c) = &r.tcp {
        let whose = if r.direction == Direction::Receive { "server's sender" } else { "sender" };
        let which = if r.streams.len() > 1 { ", connection 0" } else { "" };
        s += &format!(
            "  {whose} (kernel {}{which}): wrote {}, retransmitted {}, srtt {}, cwnd {}\n",
            c.congestion,
            format::bytes(c.bytes_written),
            format::count(c.retransmitted_segments, "segment", "segments"),
            format::secs(c.srtt_ms / 1e3),
            format::bytes(c.cwnd),
        );
    } else if r.transport == "tcp" && r.direction == Direction::Receive {
        s += "  server's sender: no counters came (the run was cut short)\n";
    }
    if let Some(q) = &r.quic {
        let which = if r.streams.len() > 1 { " (connection 0)" } else { "" };
        s += &format!(
            "  quinn{which}: lost {} ({} of {} packets), {} congestion events, srtt {}, min rtt {}, cwnd {}\n",
            format::bytes(q.lost_bytes),
            q.lost_packets,
            q.packets_sent,
            q.congestion_events,
            format::secs(q.srtt_ms / 1e3),
            format::secs(q.min_rtt_ms / 1e3),
            format::bytes(q.cwnd),
        );
    }
    if let Some(e) = &r.endpoint {
        s += &format!("  endpoint: {}\n", e.summary());
    }
    if r.interrupted {
        s += "  (interrupted)\n";
    }
    s
}

/// `bulk --graph FILE`: one transfer over the described stack.
fn run_graph(a: &BulkArgs, file: &std::path::Path) -> Result<ExitCode, String> {
    let unsupported = [
        (a.time.is_some(), "-t"),
        (a.omit.is_some(), "-O"),
        (a.parallel != 1, "-P"),
        (a.reverse, "-R"),
        (a.bidir, "--bidir"),
        (a.interval.is_some(), "-i"),
        (a.verify, "--verify"),
        (a.nocheck, "--nocheck"),
        (a.rate.is_some(), "--rate"),
        (a.cc.is_some(), "--cc"),
        (a.window.is_some(), "--window"),
        (a.mss.is_some(), "--mss"),
        (a.logfile.is_some(), "--logfile"),
        (a.transport != Transport::Xtp, "--transport"),
        (a.quic_cert.is_some(), "--quic-cert"),
        (a.trace.is_set(), "--trace"),
    ];
    let flag = unsupported.iter().find(|(set, _)| *set).map(|(_, f)| *f).or_else(|| a.path.not_for_graph());
    if let Some(flag) = flag {
        return Err(format!("--graph: {flag} does not apply (only --to, --raw, -n, -l and -J do)"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("--graph {}: {e}", file.display()))?;
    let stop = args::ctrl_c()?;
    // Generous: the transfer's own pace decides; this only ends a transfer
    // to a peer that never answers.
    let timeout =
        std::time::Duration::from_secs(60) + std::time::Duration::from_nanos(a.bytes.saturating_mul(100));
    let length = a.length.unwrap_or(64 * 1024);
    let r = xk_apps::graph_app::bulk(&text, a.to, a.path.raw_local(), a.bytes, length, timeout, stop)
        .map_err(|e| format!("--graph {}: {e}", file.display()))?;
    let acked = r.acknowledged.map_or("an unknown number".to_string(), |n| n.to_string());
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        println!("Connecting to {} (xtp over the graph {}, {} composition)", a.to, r.graph, r.composition);
        let server = r
            .server_bytes
            .map_or("no count from the server".to_string(), |b| format!("the server counted {b} bytes"));
        println!(
            "wrote {} bytes, {acked} acknowledged, in {}: {:.1} Mbit/s acknowledged; {server}; {} sent, {} received",
            r.bytes,
            format::secs(r.seconds),
            r.goodput_mbit,
            format::count(r.datagrams_sent, "datagram", "datagrams"),
            format::count(r.datagrams_received, "datagram", "datagrams"),
        );
        if let Some(line) = r.drops.summary() {
            println!("  {line}");
        }
        for l in &r.layers {
            println!("  {}", l.summary());
        }
    }
    if r.interrupted {
        // As the direct bulk: Ctrl-C prints what was done and fails.
        eprintln!(
            "xpress bulk: interrupted after {} of {} bytes written ({acked} acknowledged)",
            r.bytes, r.asked
        );
        return Ok(ExitCode::FAILURE);
    }
    match r.server_bytes {
        None => Err(format!(
            "no count came back from {}; `xpress serve` has a discard service, `serve --graph` does not",
            a.to
        )),
        Some(n) if n != r.bytes => Err(format!("the server counted {n} bytes of the {} written", r.bytes)),
        Some(_) => Ok(ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_lines_show_both_rates_retransmissions_rtt_and_window() {
        let iv = Interval {
            stream: None,
            direction: Direction::Send,
            start: 1.0,
            end: 2.0,
            sent_bytes: Some(12_500_000),
            sent_bits_per_second: Some(100e6),
            receiver_bytes: Some(12_000_000),
            receiver_bits_per_second: Some(96e6),
            retransmitted: Some(3000),
            srtt_ms: Some(20.34),
            cwnd: Some(1 << 20),
            send_window: Some(1 << 20),
            pacing_bits_per_second: Some(125e6),
            omitted: false,
        };
        let l = interval_line(&iv, "");
        for part in [
            "1.00-2.00 s",
            "11.9 MiB",
            "100 Mbit/s",
            "96.0 Mbit/s",
            "2.93 KiB",
            "20.3 ms",
            "1.00 MiB",
            "125 Mbit/s",
        ] {
            assert!(l.contains(part), "{part:?} not in {l:?}");
        }
        assert!(!l.contains('['), "{l}");
        assert_eq!(interval_header().chars().count(), l.chars().count());
        // TCP knows only what it wrote.
        let tcp = Interval {
            receiver_bytes: None,
            receiver_bits_per_second: None,
            retransmitted: None,
            srtt_ms: None,
            cwnd: None,
            pacing_bits_per_second: None,
            ..iv.clone()
        };
        assert!(interval_line(&tcp, "").ends_with('-'), "{}", interval_line(&tcp, ""));
        // With -P and --bidir each line says whose it is.
        assert_eq!(label(None, Direction::Send, true), "[SUM tx]");
        assert_eq!(label(Some(1), Direction::Send, false), "[  1]");
        let rx = Interval { stream: Some(2), direction: Direction::Receive, sent_bytes: None, ..iv };
        let l = interval_line(&rx, &label(rx.stream, rx.direction, true));
        assert!(l.starts_with("[  2 rx]"), "{l}");
        // `[`, `2`, `rx]`, `1.00-2.00`, `s`, then the sent column.
        assert_eq!(l.split_whitespace().nth(5), Some("-"), "a receiver does not know what was sent: {l}");
        // iperf3's -O: the omitted start's lines say so.
        let o = Interval { omitted: true, ..rx };
        assert!(interval_line(&o, "").ends_with("(omitted)"), "{}", interval_line(&o, ""));
    }

    #[test]
    fn stream_lines_say_whose_count_it_is() {
        let st = StreamResult {
            stream: 1,
            direction: Direction::Receive,
            bytes: 2_000_000,
            seconds: 3.0,
            bits_per_second: 5.33e6,
            sent_bytes: None,
            receiver_bytes: Some(2_500_000),
            sha256: None,
            receiver_sha256: None,
            context: None,
            sender: None,
            quic: None,
            tcp: None,
        };
        let l = stream_line(&st, false);
        assert!(
            l.contains("[  1] 1.91 MiB in 3.00 s") && l.contains("(2500000 bytes arrived in all)"),
            "{l}"
        );
        let tx = StreamResult { direction: Direction::Send, ..st.clone() };
        assert!(stream_line(&tx, false).contains("(receiver counted 2500000 bytes)"));
        let cut = StreamResult { receiver_bytes: None, ..st };
        assert!(stream_line(&cut, false).contains("(no count from the receiver)"));
    }
}
