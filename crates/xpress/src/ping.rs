//! `xpress ping`: flags and printing; the measurement is `xk_apps::ping`.
//!
//! Output follows ping: a line per reply (`-q` leaves them out), a
//! `--- statistics ---` block at the end (also on Ctrl-C), exit status 1
//! when no reply came at all.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use xk_apps::ping::{self, PingConfig, PingResult, Reply};
use xk_apps::{Transport, format};
use xtp_proto::Congestion;

use crate::args::{self, PathArgs};

#[derive(Args)]
pub(crate) struct PingArgs {
    #[command(flatten)]
    trace: args::TraceArgs,
    /// Server (`xpress serve`): HOST[:PORT], port 3636 by default. With
    /// `--transport udp`, the echo is at this port + 1 (serve's default)
    /// unless `--udp-echo-port` names it.
    #[arg(long, default_value = "127.0.0.1:3636", value_parser = args::addr, value_name = "ADDR")]
    to: SocketAddr,
    /// With `--transport udp`: the UDP echo's port, for a server started
    /// with `serve --udp-echo-port PORT`.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    udp_echo_port: Option<u16>,
    /// Bytes per request.
    #[arg(short = 'l', long, default_value = "64", value_parser = args::size, value_name = "BYTES")]
    length: usize,
    /// Stop after this many requests (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "COUNT")]
    count: Option<u64>,
    /// Seconds between requests; 0 sends the next request as soon as the
    /// reply is in (back-to-back ping-pong, for latency measurements).
    #[arg(short = 'i', long, default_value = "1", value_parser = args::seconds, value_name = "SECONDS")]
    interval: std::time::Duration,
    /// Seconds to wait for each reply; one not back by then is reported
    /// missing and not waited for again (if it still comes, it counts,
    /// marked late).
    #[arg(short = 'W', long, default_value = "10", value_parser = args::seconds, value_name = "SECONDS")]
    timeout: std::time::Duration,
    /// Quiet: only the summary.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Print the summary as one line of JSON (no per-reply lines).
    #[arg(short = 'J', long)]
    json: bool,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,
    /// What to measure: XTP, or the raw-UDP / kernel-TCP floor.
    #[arg(long, default_value = "xtp", value_parser = args::transport, value_name = "xtp|udp|tcp")]
    transport: Transport,
    /// Spin on non-blocking receives instead of sleeping.
    #[arg(long)]
    busy_poll: bool,
    #[command(flatten)]
    path: PathArgs,
    /// Run over the protocol graph described in FILE (e.g. one line
    /// `app -> xtp -> udp`, or `app -> xtp -> ip36` with --raw LOCAL_IP, as
    /// root): XTP as an x-kernel-style framework protocol instead of the
    /// direct engine; the description's `compose` line picks the compiled
    /// stack (the default) or the run-time graph (`compose dynamic`). With
    /// it only --to, --raw, -l, -c, -i, -W, -q and -J apply; -c defaults
    /// to 10.
    /// Any registered layer may sit where it fits: `app -> xtp -> census ->
    /// udp` counts the datagrams and bytes under XTP each way and prints
    /// them at the end (the run-time graph).
    #[arg(long, value_name = "FILE")]
    graph: Option<std::path::PathBuf>,
}

pub(crate) fn run(a: &PingArgs) -> Result<ExitCode, String> {
    // Before `--trace` creates its file: the graph's run records nothing.
    if let Some(file) = &a.graph {
        return run_graph(a, file);
    }
    a.trace.around("ping", || run_traced(a))
}

fn run_traced(a: &PingArgs) -> Result<ExitCode, String> {
    let stop = args::ctrl_c()?;
    let to = match (a.transport, a.udp_echo_port) {
        (Transport::Udp, Some(p)) => SocketAddr::new(a.to.ip(), p),
        // serve's UDP echo sits on the next port up.
        (Transport::Udp, None) => SocketAddr::new(
            a.to.ip(),
            xk_apps::floors::default_udp_echo_port(a.to.port())
                .ok_or("--to: port 65535 has no UDP echo above it; give --udp-echo-port")?,
        ),
        (_, Some(_)) => return Err("--udp-echo-port: with --transport udp only".into()),
        (_, None) => a.to,
    };
    let cfg = PingConfig {
        to,
        transport: a.transport,
        length: a.length,
        count: a.count,
        interval: a.interval,
        timeout: a.timeout,
        cc: a.cc,
        path: a.path.config(a.busy_poll),
    };
    // Everything that can refuse happens here, before the header.
    let pinger = ping::open(&cfg)?;
    let lines = !a.quiet && !a.json;
    if !a.json {
        match (cfg.path.via, a.transport) {
            // The relay sends where its own --server says, not to `to`:
            // say so, or a relay set up for XTP (the README's) silently
            // gets UDP datagrams to the wrong port.
            (Some(v), Transport::Udp) => println!(
                "PING {to} via {v} (udp): {} bytes per request; the relay forwards to its own --server, \
                 which must be this UDP echo",
                a.length
            ),
            (via, t) => {
                let via = via.map(|v| format!(" via {v}")).unwrap_or_default();
                println!("PING {to}{via} ({}): {} bytes per request", t.name(), a.length);
            }
        }
    }
    let r = pinger.run(stop, |reply| {
        if lines {
            println!("{}", reply_line(&reply, a.length, to));
        }
    })?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        print!("{}", summary(&r, to));
    }
    if let Some(e) = &r.error {
        eprintln!("xpress ping: {e}");
    }
    // As ping: success if any reply came back. An interrupted `-c N` run
    // did not do what was asked, so it fails (issue #13: Ctrl-C prints the
    // summary so far and exits non-zero); without `-c`, Ctrl-C is the way
    // a run ends and the replies decide.
    let cut_short = r.interrupted && a.count.is_some();
    if cut_short {
        let asked = format::count(a.count.unwrap_or(0), "request", "requests");
        eprintln!("xpress ping: interrupted after {} of {asked}", r.sent);
    }
    Ok(if r.received > 0 && r.error.is_none() && !cut_short { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `1000 bytes from 127.0.0.1:3636: seq=3 time=40.4 ms`, or the loss.
fn reply_line(r: &Reply, len: usize, to: SocketAddr) -> String {
    match r.rtt_us {
        Some(us) => format!(
            "{len} bytes from {to}: seq={} time={}{}",
            r.seq,
            format::secs(us / 1e6),
            if r.late { " (late: after -W)" } else { "" }
        ),
        None => format!("no reply from {to}: seq={} within -W (a later reply still counts)", r.seq),
    }
}

/// ping's closing block, with p50/p90/p99 added.
fn summary(r: &PingResult, to: SocketAddr) -> String {
    let mut s = format!(
        "--- {to} {} ping statistics ---\n{} sent, {} received{}, {}% loss, time {}{}\n",
        r.transport,
        format::count(r.sent, "request", "requests"),
        format::count(r.received, "reply", "replies"),
        if r.late > 0 { format!(" ({} late)", r.late) } else { String::new() },
        format::sig3(r.loss_percent),
        format::secs(r.seconds),
        if r.interrupted { " (interrupted)" } else { "" }
    );
    if let Some(t) = &r.rtt_us {
        let f = |us: f64| format::secs(us / 1e6);
        s += &format!(
            "rtt min/avg/max/mdev = {}/{}/{}/{}\nrtt p50/p90/p99 = {}/{}/{}\n",
            f(t.min),
            f(t.avg),
            f(t.max),
            f(t.mdev),
            f(t.p50),
            f(t.p90),
            f(t.p99)
        );
    }
    s
}

/// `ping --graph FILE`: round trips over the described stack.
fn run_graph(a: &PingArgs, file: &std::path::Path) -> Result<ExitCode, String> {
    let unsupported = [
        (a.udp_echo_port.is_some(), "--udp-echo-port"),
        (a.cc != Congestion::Cubic, "--cc"),
        (a.transport != Transport::Xtp, "--transport"),
        (a.busy_poll, "--busy-poll"),
        (a.trace.is_set(), "--trace"),
    ];
    let flag = unsupported.iter().find(|(set, _)| *set).map(|(_, f)| *f).or_else(|| a.path.not_for_graph());
    if let Some(flag) = flag {
        return Err(format!(
            "--graph: {flag} does not apply (only --to, --raw, -l, -c, -i, -W, -q and -J do)"
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("--graph {}: {e}", file.display()))?;
    let stop = args::ctrl_c()?;
    let count = a.count.unwrap_or(10);
    let job =
        xk_apps::graph_app::PingJob { length: a.length, count, interval: a.interval, timeout: a.timeout };
    let started = std::time::Instant::now();
    let r = xk_apps::graph_app::ping(&text, a.to, a.path.raw_local(), job, stop)
        .map_err(|e| format!("--graph {}: {e}", file.display()))?;
    if a.json {
        println!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        // In the direct ping's words and units.
        println!(
            "PING {} (xtp over the graph {}, {} composition): {} bytes per request",
            a.to, r.graph, r.composition, a.length
        );
        if !a.quiet {
            for (i, us) in r.rtt_us.iter().enumerate() {
                println!("{} bytes from {}: seq={i} time={}", a.length, a.to, format::secs(us / 1e6));
            }
        }
        // The direct ping's closing block (one copy of its wording).
        let ns: Vec<u64> = r.rtt_us.iter().map(|us| (us * 1e3) as u64).collect();
        let lost = r.sent.saturating_sub(r.received);
        let direct = PingResult {
            transport: "xtp",
            busy_poll: false,
            length: a.length,
            count: Some(count),
            sent: r.sent,
            received: r.received,
            late: 0,
            loss_percent: if r.sent > 0 { 100.0 * lost as f64 / r.sent as f64 } else { 0.0 },
            rtt_us: xk_apps::stats::RttSummary::of(&ns),
            seconds: started.elapsed().as_secs_f64(),
            interrupted: stop.load(std::sync::atomic::Ordering::Relaxed),
            error: None,
        };
        print!("{}", summary(&direct, a.to));
        println!(
            "graph {}: {} sent, {} received",
            r.graph,
            format::count(r.datagrams_sent, "datagram", "datagrams"),
            format::count(r.datagrams_received, "datagram", "datagrams"),
        );
        if let Some(line) = r.drops.summary() {
            println!("{line}");
        }
        for l in &r.layers {
            println!("{}", l.summary());
        }
    }
    // As the direct ping: an interrupted -c run did not do what was asked.
    let cut_short = stop.load(std::sync::atomic::Ordering::Relaxed) && r.sent < count;
    if cut_short {
        eprintln!(
            "xpress ping: interrupted after {} of {}",
            r.sent,
            format::count(count, "request", "requests")
        );
    }
    Ok(if r.received == 0 || cut_short { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xk_apps::stats::RttSummary;

    #[test]
    fn reply_lines_and_summary_read_like_ping() {
        let to: SocketAddr = "127.0.0.1:3636".parse().unwrap();
        assert_eq!(
            reply_line(&Reply { seq: 3, rtt_us: Some(40_424.9), late: false }, 1000, to),
            "1000 bytes from 127.0.0.1:3636: seq=3 time=40.4 ms"
        );
        assert!(
            reply_line(&Reply { seq: 4, rtt_us: None, late: false }, 1000, to).contains("seq=4 within -W")
        );
        assert!(
            reply_line(&Reply { seq: 4, rtt_us: Some(2e6), late: true }, 1000, to)
                .ends_with("time=2.00 s (late: after -W)")
        );
        let r = PingResult {
            transport: "xtp",
            busy_poll: false,
            length: 64,
            count: Some(4),
            sent: 4,
            received: 3,
            late: 1,
            loss_percent: 25.0,
            rtt_us: RttSummary::of(&[1_000_000, 2_000_000, 3_000_000]),
            seconds: 3.0,
            interrupted: false,
            error: None,
        };
        let s = summary(&r, to);
        assert!(s.contains("4 requests sent, 3 replies received (1 late), 25.0% loss, time 3.00 s"), "{s}");
        assert!(s.contains("rtt min/avg/max/mdev = 1.00 ms/2.00 ms/3.00 ms/816 µs"), "{s}");
        assert!(s.contains("rtt p50/p90/p99 = 2.00 ms/3.00 ms/3.00 ms"), "{s}");
    }
}
