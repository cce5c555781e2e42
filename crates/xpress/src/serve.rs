//! `xpress serve`: flags and printing; the services are `xk_apps::server`.

use std::net::SocketAddr;

use clap::Args;
use xk_apps::format;
use xk_apps::server::{ServeConfig, Server};
use xtp_proto::Congestion;

use crate::args;

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    trace: args::TraceArgs,
    /// Address of the XTP service (UDP) and the TCP floor: HOST[:PORT],
    /// [IPV6]:PORT; the port defaults to 3636, 0 takes any free port.
    #[arg(long, default_value = "127.0.0.1:3636", value_parser = args::addr, value_name = "ADDR")]
    listen: SocketAddr,
    /// Port of the raw UDP echo (default: the --listen port + 1; 0: any free port).
    #[arg(long, value_name = "PORT")]
    udp_echo_port: Option<u16>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_parser = args::seconds, value_name = "SECONDS")]
    duration: Option<std::time::Duration>,
    /// Spin instead of sleeping (XTP, TCP echo and UDP echo alike).
    #[arg(long)]
    busy_poll: bool,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,
    /// Most data bytes per XTP packet the server sends (`bulk -R`).
    /// Default: 1,440 over UDP on IPv4, 1,420 on an IPv6 address, 1,448 over
    /// --raw (a 1,500-byte MTU), cut for each client to the size its first
    /// packet advertises (its route's MTU: 178 from a 238-byte
    /// packet-radio link). At most those; a larger value is an error.
    #[arg(long, value_name = "BYTES")]
    mss: Option<usize>,
    /// Do not use UDP GSO/GRO.
    #[arg(long)]
    no_offload: bool,
    /// Give up to N validated XTP clients a UDP socket of their own (same
    /// port, connected to the client), so that a flood of spoofed FIRSTs
    /// filling the shared socket cannot crowd them out; 0: all share it.
    /// Not over --raw.
    #[arg(long, value_name = "N", default_value_t = xk_apps::server::DEFAULT_PEER_LANES)]
    peer_lanes: usize,
    /// While validated clients have traffic on their own sockets, read at
    /// most N datagrams per second from unvalidated sources (new clients,
    /// spoofed floods), so that a flood cannot take the CPU the served
    /// clients need; 0: no limit. Validated clients beyond --peer-lanes are
    /// not counted but share the socket (and its pauses) with them. Without
    /// lane traffic there is no limit.
    #[arg(long, value_name = "N", default_value_t = xk_driver::intake::DEFAULT_UNVALIDATED_RATE)]
    unvalidated_rate: u64,
    /// Receive buffer of the TCP floor server's connections (SO_RCVBUF; Linux
    /// then offers a window of about this size and stops auto-tuning): 65536
    /// gives the classic 64 KB TCP window of seed 002.
    #[arg(long, value_name = "BYTES", value_parser = args::size)]
    tcp_rcvbuf: Option<usize>,
    /// XTP directly over IP protocol 36 (root only) on the `--listen`
    /// address (its port is ignored; use a different loopback address from
    /// the client's, e.g. 127.0.0.2). Serves XTP only.
    #[arg(long)]
    raw: bool,
    /// Also serve QUIC (quinn) bulk transfers, with a fresh self-signed
    /// certificate written to FILE for the client to trust.
    #[arg(long, value_name = "FILE")]
    quic_cert: Option<std::path::PathBuf>,
    /// Port of the QUIC service (default: any free port; printed).
    #[arg(long, value_name = "PORT", default_value_t = 0, requires = "quic_cert")]
    quic_port: u16,
    /// Write every XTP packet sent and received to FILE (pcap, framed as
    /// IP protocol 36, IPv4 or IPv6 as the path: Wireshark and tshark
    /// decode it as XTP as it is).
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Print the engine's state (contexts held, every admission and limit
    /// counter) every this many seconds; it is always printed once at the
    /// end (Ctrl-C, SIGTERM or --duration).
    #[arg(long, value_parser = args::seconds, value_name = "SECONDS")]
    stats: Option<std::time::Duration>,
    /// Print each finished transfer, and the engine's state, as a line of
    /// JSON.
    #[arg(short = 'J', long)]
    json: bool,
    /// Serve an XTP echo (port 7) over the protocol graph described in FILE
    /// (e.g. one line `app -> xtp -> udp`) instead of the direct engine;
    /// the description's `compose` line picks the compiled stack (the
    /// default) or the run-time graph (`compose dynamic`). It has no
    /// discard service (`bulk --graph` needs the direct server's). With it
    /// only --listen, --duration and -J apply.
    /// Any registered layer may sit where it fits: `app -> xtp -> census ->
    /// udp` counts the datagrams and bytes under XTP each way and prints
    /// them at the end (the run-time graph).
    #[arg(long, value_name = "FILE")]
    graph: Option<std::path::PathBuf>,
}

/// The engine's state: `{"engine": {...}}` with -J, else one line.
fn print_engine(e: &xk_apps::EngineReport, json: bool) {
    if json {
        println!("{}", serde_json::json!({ "engine": e }));
        return;
    }
    println!(
        "engine at {}: {} held ({} half-open), {} accepted{}; {}",
        format::secs(e.seconds),
        format::count(e.contexts as u64, "context", "contexts"),
        e.counters.get("half_open"),
        e.counters.get("accepted"),
        lanes_text(&e.peer_lanes),
        e.counters.summary()
    );
}

/// `, 2 clients on their own sockets` (and the lanes refused), or nothing.
fn lanes_text(l: &xk_apps::server::PeerLanes) -> String {
    let mut t = String::new();
    if l.open > 0 {
        t = format!(
            ", {} on {} own socket{}",
            format::count(l.open, "client", "clients"),
            if l.open == 1 { "its" } else { "their" },
            if l.open == 1 { "" } else { "s" }
        );
    }
    if l.at_limit > 0 {
        t += &format!(
            ", {} left on the shared socket (--peer-lanes reached)",
            format::count(l.at_limit, "client", "clients")
        );
    }
    if l.failed > 0 {
        t += &format!(", {} the system refused", format::count(l.failed, "peer lane", "peer lanes"));
    }
    if l.unvalidated_deferred > 0 {
        t += &format!(
            ", unvalidated input set aside {} (--unvalidated-rate reached)",
            format::count(l.unvalidated_deferred, "time", "times")
        );
    }
    t
}

pub(crate) fn run(a: &ServeArgs) -> Result<(), String> {
    // Before `--trace` creates its file: the graph's run records nothing.
    if let Some(file) = &a.graph {
        return run_graph(a, file);
    }
    a.trace.around("serve", || run_traced(a))
}

/// `serve --graph FILE`: an XTP echo over the described stack.
fn run_graph(a: &ServeArgs, file: &std::path::Path) -> Result<(), String> {
    let unsupported = [
        (a.udp_echo_port.is_some(), "--udp-echo-port"),
        (a.busy_poll, "--busy-poll"),
        (a.cc != Congestion::Cubic, "--cc"),
        (a.mss.is_some(), "--mss"),
        (a.no_offload, "--no-offload"),
        (a.peer_lanes != xk_apps::server::DEFAULT_PEER_LANES, "--peer-lanes"),
        (a.unvalidated_rate != xk_driver::intake::DEFAULT_UNVALIDATED_RATE, "--unvalidated-rate"),
        (a.tcp_rcvbuf.is_some(), "--tcp-rcvbuf"),
        // The description's device decides: `app -> xtp -> ip36`.
        (a.raw, "--raw"),
        (a.quic_cert.is_some(), "--quic-cert"),
        (a.pcap.is_some(), "--pcap"),
        (a.stats.is_some(), "--stats"),
        (a.trace.is_set(), "--trace"),
    ];
    if let Some((_, flag)) = unsupported.iter().find(|(set, _)| *set) {
        let hint = if *flag == "--raw" {
            "; the description's device decides: write `app -> xtp -> ip36` (on the --listen address)"
        } else {
            ""
        };
        return Err(format!("--graph: {flag} does not apply (only --listen, --duration and -J do){hint}"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("--graph {}: {e}", file.display()))?;
    let stop = args::ctrl_c()?;
    let r = xk_apps::graph_app::serve(&text, a.listen, a.duration, stop, |addr, how| {
        println!("listening on {addr}");
        println!(
            "  {:<8} {:<22} XTP echo over the graph in {} ({how} composition)",
            "echo",
            addr,
            file.display()
        );
    })
    .map_err(|e| format!("--graph {}: {e}", file.display()))?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        let d = &r.drops;
        println!(
            "{} session{}, {} bytes echoed ({} composition); dropped: {} without a device header, \
             {} refused by a layer's demux, {} malformed, {} send errors",
            r.sessions,
            if r.sessions == 1 { "" } else { "s" },
            r.bytes,
            r.composition,
            d.bad_frames,
            d.demux_drops,
            d.malformed,
            d.send_errors
        );
        for l in &r.layers {
            println!("  {}", l.summary());
        }
    }
    Ok(())
}

fn run_traced(a: &ServeArgs) -> Result<(), String> {
    if let Some(m) = a.mss {
        xk_apps::bulk::check_mss(m, xk_apps::bulk::default_packet(), None, a.raw, a.listen.is_ipv6())?;
    }
    let stop = args::ctrl_c()?;
    let cfg = ServeConfig {
        listen: a.listen,
        busy_poll: a.busy_poll,
        cc: a.cc,
        mss: a.mss,
        no_offload: a.no_offload,
        peer_lanes: a.peer_lanes,
        unvalidated_rate: a.unvalidated_rate,
        tcp_rcvbuf: a.tcp_rcvbuf,
        raw: a.raw,
        udp_echo_port: a.udp_echo_port,
        quic_cert: a.quic_cert.clone(),
        quic_port: a.quic_port,
        duration: a.duration,
        pcap: a.pcap.clone(),
        stats_every: a.stats,
    };
    let server = Server::bind(&cfg)?;
    if let Some(w) = server.warning() {
        eprintln!("xpress serve: warning: {w}");
    }
    // The first line names the XTP address and, with --quic-cert, the
    // second the QUIC one (scripts and the lab read these two); then one
    // line per service.
    let services = server.services().to_vec();
    println!("listening on {}", services[0].addr);
    if let Some(q) = services.iter().find(|s| s.name == "quic") {
        println!("quic on {}", q.addr);
    }
    for s in &services {
        println!("  {:<8} {:<22} {}", s.name, s.addr, s.what);
    }
    let json = a.json;
    let last = server.run_with(
        stop,
        |r| {
            if json {
                println!("{}", serde_json::to_string(r).unwrap_or_default());
                return;
            }
            let sha = r.sha256.as_ref().map(|h| format!(" sha256 {h}")).unwrap_or_default();
            let rate = if r.seconds > 0.0 { r.bytes as f64 * 8.0 / r.seconds } else { 0.0 };
            let (verb, dir) = if r.service == "source" { ("sent", "to") } else { ("received", "from") };
            println!(
                "{verb} {} bytes{sha} {dir} {} in {}: {} ({})",
                r.bytes,
                r.peer,
                format::secs(r.seconds),
                format::rate(rate),
                r.reason
            );
        },
        |e| print_engine(e, json),
    )?;
    print_engine(&last, json);
    Ok(())
}
