//! iperf3-style tools over XTP on UDP: `xpress serve`, `xpress ping`,
//! `xpress bulk`.
//!
//! `serve` accepts on two XTP ports: 7 echoes every message back (for `ping`),
//! 9 discards, printing a line with the byte count and SHA-256 of what each
//! context delivered (for `bulk`). For floors measured with the same method it
//! also serves kernel TCP on the same port number (first byte `e`: echo, `d`:
//! discard) and a raw UDP echo on the next port up.

use std::collections::HashMap;
use std::net::SocketAddr;

use bytes::Bytes;
use clap::Args;
use serde_json::json;
use sha2::{Digest, Sha256};
use xk_driver::clock::time_seed;
use xk_driver::driver::{DEFAULT_PORT, Driver, DriverConfig, UdpDriver, WaitMode};
use xk_driver::transport::Transport as Io;

use crate::floors::{self, Transport};
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, Congestion, ContextConfig, ContextId, EndpointConfig, Event};

const ECHO_PORT: u16 = 7;
const DISCARD_PORT: u16 = 9;
/// Discard, hashing what arrives (`bulk --verify`): the server prints the
/// SHA-256 so the two sides can be compared. Hashing costs more CPU than
/// the protocol itself, so throughput runs use plain discard, like the TCP
/// floor (which never hashes).
const VERIFY_PORT: u16 = 10;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))]
    listen: SocketAddr,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    duration: Option<f64>,
    /// Spin instead of sleeping (XTP, TCP echo and UDP echo alike).
    #[arg(long)]
    busy_poll: bool,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,
    /// Do not use UDP GSO/GRO.
    #[arg(long)]
    no_offload: bool,
    /// Receive buffer of the TCP floor server's connections (SO_RCVBUF; Linux
    /// then offers a window of about this size and stops auto-tuning): 65536
    /// gives the classic 64 KB TCP window of seed 002.
    #[arg(long, value_name = "BYTES")]
    tcp_rcvbuf: Option<usize>,
    /// XTP directly over IP protocol 36 (root only) on the `--listen`
    /// address (its port is ignored; use a different loopback address from
    /// the client's, e.g. 127.0.0.2).
    #[arg(long)]
    raw: bool,
    /// Also serve QUIC (quinn) bulk transfers on the listen IP, on a port of
    /// its own (printed as `quic on ADDR`), with a fresh self-signed
    /// certificate written to FILE for the client to trust.
    #[arg(long, value_name = "FILE")]
    quic_cert: Option<std::path::PathBuf>,
}

/// The IPv4 address of `a` for a raw socket, or an error naming the flag.
fn raw_ip(flag: &str, a: SocketAddr) -> Result<std::net::Ipv4Addr, String> {
    match a.ip() {
        std::net::IpAddr::V4(ip) => Ok(ip),
        std::net::IpAddr::V6(_) => Err(format!("{flag} {a}: --raw supports IPv4 only")),
    }
}

fn driver_config(busy_poll: bool, no_offload: bool) -> DriverConfig {
    DriverConfig {
        wait: if busy_poll { WaitMode::BusyPoll } else { WaitMode::Blocking },
        offload: !no_offload,
    }
}

pub(crate) fn serve(a: &ServeArgs) -> Result<(), String> {
    let dc = driver_config(a.busy_poll, a.no_offload);
    if a.raw {
        let ip = raw_ip("--listen", a.listen)?;
        let d = Driver::bind_raw(ip, EndpointConfig::default(), time_seed(), dc)
            .map_err(|e| format!("raw IP 36 on {ip}: {e}"))?;
        return serve_on(d, a, false);
    }
    let d = UdpDriver::bind_with(a.listen, EndpointConfig::default(), time_seed(), dc)
        .map_err(|e| format!("bind {}: {e}", a.listen))?;
    serve_on(d, a, true)
}

fn serve_on<T: Io>(mut d: Driver<T>, a: &ServeArgs, floors: bool) -> Result<(), String> {
    if let Some(w) = d.buffer_warning() {
        eprintln!("xpress serve: warning: {w}");
    }
    let ep = d.endpoint();
    let mut cfg = ContextConfig::stream();
    cfg.congestion = a.cc;
    ep.listen(ECHO_PORT, cfg.clone()).map_err(|e| e.to_string())?;
    ep.listen(DISCARD_PORT, cfg.clone()).map_err(|e| e.to_string())?;
    ep.listen(VERIFY_PORT, cfg).map_err(|e| e.to_string())?;
    let local = d.local_addr().map_err(|e| e.to_string())?;
    if floors {
        let tcp = std::net::TcpListener::bind(local).map_err(|e| format!("tcp bind {local}: {e}"))?;
        if let Some(b) = a.tcp_rcvbuf {
            // Accepted connections inherit the listener's buffer size.
            nix::sys::socket::setsockopt(&tcp, nix::sys::socket::sockopt::RcvBuf, &b)
                .map_err(|e| format!("--tcp-rcvbuf {b}: {e}"))?;
        }
        let udp_echo_addr = SocketAddr::new(local.ip(), local.port().wrapping_add(1));
        let udp_echo = std::net::UdpSocket::bind(udp_echo_addr)
            .map_err(|e| format!("udp echo bind {udp_echo_addr}: {e}"))?;
        let busy = a.busy_poll;
        std::thread::spawn(move || floors::tcp_server(tcp, busy));
        std::thread::spawn(move || floors::udp_echo(udp_echo, busy));
    }
    println!("listening on {local}");
    if let Some(cert) = &a.quic_cert {
        let q = crate::quic::spawn_server(local.ip(), cert)?;
        println!("quic on {q}");
    }
    let end = a.duration.map(|s| d.now() + Duration::from_secs_f64(s));
    let mut port_of: HashMap<ContextId, u16> = HashMap::new();
    let mut hash: HashMap<ContextId, (u64, Sha256)> = HashMap::new();
    loop {
        if end.is_some_and(|e| d.now() >= e) {
            return Ok(());
        }
        d.turn(Duration::from_millis(100)).map_err(|e| format!("socket: {e}"))?;
        let now = d.now();
        let ep = d.endpoint();
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Incoming { ctx, port, .. } => {
                    port_of.insert(ctx, port);
                    if port != ECHO_PORT {
                        hash.insert(ctx, (0, Sha256::new()));
                    }
                }
                Event::Readable { ctx } => {
                    while let Some(c) = ep.read(now, ctx) {
                        if port_of.get(&ctx) == Some(&ECHO_PORT) {
                            let _ = ep.write(now, ctx, c.data, c.eom, c.btag);
                        } else if let Some((n, h)) = hash.get_mut(&ctx) {
                            *n += c.data.len() as u64;
                            if port_of.get(&ctx) == Some(&VERIFY_PORT) {
                                h.update(&c.data);
                            }
                        }
                    }
                }
                Event::PeerFinished { ctx } => ep.close(now, ctx),
                Event::Closed { ctx, reason } => {
                    if let Some((n, h)) = hash.remove(&ctx) {
                        if port_of.get(&ctx) == Some(&VERIFY_PORT) {
                            println!("received {n} bytes sha256 {} ({reason:?})", hex(&h.finalize()));
                        } else {
                            println!("received {n} bytes ({reason:?})");
                        }
                    }
                    port_of.remove(&ctx);
                }
                _ => {}
            }
        }
    }
}

#[derive(Args)]
pub(crate) struct PingArgs {
    /// Server address (`xpress serve`).
    #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))]
    to: SocketAddr,
    /// Message size in bytes.
    #[arg(short = 'l', long, default_value_t = 64)]
    length: usize,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,

    /// Number of round trips.
    #[arg(short = 'n', long, default_value_t = 1000)]
    count: u32,
    /// Print JSON.
    #[arg(short = 'J', long)]
    json: bool,
    /// What to measure: XTP, or the raw-UDP / kernel-TCP floor.
    #[arg(long, value_enum, default_value_t = Transport::Xtp)]
    transport: Transport,
    /// Spin on non-blocking receives instead of sleeping.
    #[arg(long)]
    busy_poll: bool,
    #[command(flatten)]
    path: PathArgs,
}

/// How a client tool reaches the server (shared by `ping` and `bulk`).
#[derive(Args)]
pub(crate) struct PathArgs {
    /// Do not use UDP GSO/GRO.
    #[arg(long)]
    no_offload: bool,
    /// Go through a running `xpress emulate` listening at ADDR (started with
    /// `--server` set to the `--to` address): packets are sent there instead.
    #[arg(long, value_name = "ADDR")]
    via: Option<SocketAddr>,
    /// XTP directly over IP protocol 36 (root only) from this local IPv4
    /// address to the `--to` address (port ignored).
    #[arg(long, value_name = "LOCAL_IP")]
    raw: Option<std::net::Ipv4Addr>,
}

impl PathArgs {
    /// The driver and the address to send to.
    fn open(&self, to: SocketAddr, busy_poll: bool) -> Result<(ClientDriver, SocketAddr), String> {
        if self.raw.is_some() && self.via.is_some() {
            return Err(
                "--via and --raw: the emulator relays UDP; run raw IP through `xpress netns` instead".into(),
            );
        }
        let d = client_driver(self.raw, driver_config(busy_poll, self.no_offload))?;
        let dst = match &d {
            ClientDriver::Raw(_) => SocketAddr::new(to.ip(), 0),
            ClientDriver::Udp(_) => self.via.unwrap_or(to),
        };
        Ok((d, dst))
    }
}

/// The driver a client tool runs on: UDP, or raw IP 36 from `raw`.
fn client_driver(raw: Option<std::net::Ipv4Addr>, dc: DriverConfig) -> Result<ClientDriver, String> {
    match raw {
        Some(ip) => Driver::bind_raw(ip, EndpointConfig::default(), time_seed(), dc)
            .map(ClientDriver::Raw)
            .map_err(|e| format!("raw IP 36 on {ip}: {e}")),
        None => UdpDriver::bind_with("0.0.0.0:0", EndpointConfig::default(), time_seed(), dc)
            .map(ClientDriver::Udp)
            .map_err(|e| e.to_string()),
    }
}

enum ClientDriver {
    Udp(UdpDriver),
    Raw(xk_driver::driver::RawDriver),
}

fn wait_for<T, X: Io>(
    d: &mut Driver<X>,
    deadline: Instant,
    mut f: impl FnMut(&mut Driver<X>) -> Option<T>,
) -> Result<T, String> {
    loop {
        if let Some(t) = f(d) {
            return Ok(t);
        }
        if d.now() >= deadline {
            return Err("timed out".into());
        }
        d.turn(Duration::from_millis(50)).map_err(|e| format!("socket: {e}"))?;
    }
}

fn closed_error(reason: &CloseReason) -> String {
    reason.to_string()
}

pub(crate) fn ping(a: &PingArgs) -> Result<(), String> {
    if a.length == 0 || a.count == 0 {
        return Err("-l and -n must be at least 1".into());
    }
    let rtts = match a.transport {
        Transport::Xtp => ping_xtp(a)?,
        Transport::Udp => floors::ping_udp(a.to, a.length, a.count, a.busy_poll)?,
        Transport::Tcp => floors::ping_tcp(a.to, a.length, a.count, a.busy_poll)?,
        Transport::Quic => return Err("--transport quic: bulk only (ping measures XTP, UDP and TCP)".into()),
    };
    report_rtts(a, rtts);
    Ok(())
}

fn ping_xtp(a: &PingArgs) -> Result<Vec<u64>, String> {
    match a.path.open(a.to, a.busy_poll)? {
        (ClientDriver::Udp(d), to) => ping_on(d, a, to),
        (ClientDriver::Raw(d), to) => ping_on(d, a, to),
    }
}

fn ping_on<X: Io>(mut d: Driver<X>, a: &PingArgs, to: SocketAddr) -> Result<Vec<u64>, String> {
    let now = d.now();
    let mut cfg = ContextConfig::stream();
    cfg.congestion = a.cc;
    let ctx = d.endpoint().connect(now, to, ECHO_PORT, cfg).map_err(|e| e.to_string())?;
    let msg = Bytes::from(vec![0x5au8; a.length]);
    let mut rtts = Vec::with_capacity(a.count as usize);
    for _ in 0..a.count {
        let t0 = d.now();
        d.endpoint().write(t0, ctx, msg.clone(), true, None).map_err(|e| e.to_string())?;
        let mut got = 0usize;
        wait_for(&mut d, t0 + Duration::from_secs(30), |d| {
            let now = d.now();
            let ep = d.endpoint();
            while let Some(ev) = ep.poll_event() {
                if let Event::Closed { reason, .. } = &ev {
                    got = usize::MAX;
                    eprintln!("xpress ping: {}", closed_error(reason));
                }
            }
            while let Some(c) = ep.read(now, ctx) {
                got += c.data.len();
            }
            (got >= a.length).then_some(())
        })?;
        if got == usize::MAX {
            return Err("ping failed".into());
        }
        rtts.push((d.now() - t0).as_nanos() as u64);
    }
    let now = d.now();
    d.endpoint().close(now, ctx);
    let _ = wait_for(&mut d, now + Duration::from_secs(2), |d| {
        let ep = d.endpoint();
        let mut done = None;
        while let Some(ev) = ep.poll_event() {
            if matches!(ev, Event::Closed { .. }) {
                done = Some(());
            }
        }
        done
    });
    Ok(rtts)
}

fn report_rtts(a: &PingArgs, mut rtts: Vec<u64>) {
    let name = a.transport.name();
    rtts.sort_unstable();
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    if a.json {
        println!(
            "{}",
            json!({"transport": name, "busy_poll": a.busy_poll, "length": a.length, "count": a.count,
            "rtt_us": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0)}})
        );
    } else {
        println!(
            "{name}{} ping {} B × {}: rtt p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs  max {:.1} µs",
            if a.busy_poll { " (busy-poll)" } else { "" },
            a.length,
            a.count,
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    }
}

#[derive(Args)]
pub(crate) struct BulkArgs {
    /// Server address (`xpress serve`).
    #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))]
    to: SocketAddr,
    /// Bytes to send.
    #[arg(short = 'n', long, default_value_t = 100_000_000)]
    bytes: u64,
    /// Send messages of this many bytes (XTP: each ends with EOM; TCP: one
    /// write each, Nagle off) instead of an unbroken stream.
    #[arg(short = 'l', long, value_name = "BYTES")]
    length: Option<usize>,
    /// Hash the data on both sides (SHA-256, printed by client and server):
    /// a check, not a throughput run — hashing costs more than XTP itself.
    #[arg(long)]
    verify: bool,
    /// Send for this many seconds instead of a byte count (0.1–3600). XTP's
    /// goodput then counts the bytes the peer acknowledged within that time
    /// (as iperf3 counts what arrived), and the context is aborted then:
    /// what was still queued is not delivered.
    #[arg(short = 't', long, conflicts_with = "bytes")]
    time: Option<f64>,
    /// Checksum over headers only (NOCHECK).
    #[arg(long)]
    nocheck: bool,
    /// Rate limit in bytes/s (0 = none).
    #[arg(long, default_value_t = 0)]
    rate: u32,
    /// Congestion controller: cubic (default), bbr, newreno, or none (pure
    /// XTP 4.0: flow and rate control only).
    #[arg(long, default_value_t = Congestion::Cubic, value_name = "NAME")]
    cc: Congestion,
    /// Receive window (bytes) asked of the peer... and offered by us.
    /// Without it, the window starts at 4 MiB and grows with the path (up to
    /// 256 MiB, receive-buffer right-sizing); with it, it stays this size.
    #[arg(long, value_name = "BYTES")]
    window: Option<usize>,
    /// Print JSON.
    #[arg(short = 'J', long)]
    json: bool,
    /// What to measure: XTP, the kernel-TCP floor, or QUIC (quinn).
    #[arg(long, value_enum, default_value_t = floors::Transport::Xtp)]
    transport: floors::Transport,
    /// With `--transport quic`: the server's certificate (the FILE given to
    /// `xpress serve --quic-cert`); `--to` is then the `quic on` address.
    #[arg(long, value_name = "FILE")]
    quic_cert: Option<std::path::PathBuf>,
    #[command(flatten)]
    path: PathArgs,
}

/// A peer's bulk result (TCP, QUIC), as a line or as JSON.
fn print_peer_result(transport: &str, bytes: u64, secs: f64, as_json: bool) {
    let gbps = bytes as f64 * 8.0 / secs / 1e9;
    if as_json {
        println!("{}", json!({"transport": transport, "bytes": bytes, "seconds": secs, "gbit_per_s": gbps}));
    } else {
        println!("{transport}: sent {bytes} bytes in {secs:.3} s: {gbps:.3} Gbit/s");
    }
}

pub(crate) fn bulk(a: &BulkArgs) -> Result<(), String> {
    if a.window == Some(0) {
        return Err("--window must be at least 1".into());
    }
    if let Some(t) = a.time
        && !(0.1..=3600.0).contains(&t)
    {
        return Err(format!("-t {t}: must be between 0.1 and 3600 seconds"));
    }
    if let Some(l) = a.length
        && !(1..=1 << 20).contains(&l)
    {
        return Err(format!("-l {l}: a message must be 1 B to 1 MiB"));
    }
    match a.transport {
        Transport::Xtp => {}
        Transport::Tcp => {
            let (bytes, secs) = floors::bulk_tcp(a.to, a.bytes, a.time, a.length)?;
            print_peer_result("tcp", bytes, secs, a.json);
            return Ok(());
        }
        Transport::Udp => {
            return Err(
                "--transport udp: bulk over raw UDP has no reliability to compare; use tcp or xtp".into()
            );
        }
        Transport::Quic => {
            let cert = a.quic_cert.as_ref().ok_or(
                "--transport quic needs --quic-cert FILE (the certificate `xpress serve --quic-cert FILE` wrote)",
            )?;
            if a.time.is_some() || a.verify {
                return Err("--transport quic: -t and --verify are not supported; give -n BYTES".into());
            }
            let (bytes, secs) = crate::quic::bulk(a.to, cert, a.bytes, a.length.unwrap_or(1 << 20))?;
            if bytes != a.bytes {
                return Err(format!("quic: the server counted {bytes} of {} bytes", a.bytes));
            }
            print_peer_result("quic", bytes, secs, a.json);
            return Ok(());
        }
    }
    match a.path.open(a.to, false)? {
        (ClientDriver::Udp(d), to) => bulk_on(d, a, to),
        (ClientDriver::Raw(d), to) => bulk_on(d, a, to),
    }
}

fn bulk_on<X: Io>(mut d: Driver<X>, a: &BulkArgs, to: SocketAddr) -> Result<(), String> {
    if let Some(w) = d.buffer_warning() {
        eprintln!("xpress bulk: warning: {w}");
    }
    let mut cfg = ContextConfig::stream();
    cfg.nocheck = a.nocheck;
    cfg.out_rate = a.rate;
    cfg.congestion = a.cc;
    if let Some(w) = a.window {
        cfg.recv_buffer = w;
        cfg.recv_buffer_max = w;
    }
    let t0 = d.now();
    let port = if a.verify { VERIFY_PORT } else { DISCARD_PORT };
    let ctx = d.endpoint().connect(t0, to, port, cfg).map_err(|e| e.to_string())?;
    // The data: a deterministic 1 MiB pattern, generated once and written as
    // shared slices as the send queue drains (bounded memory, no per-chunk
    // work), hashed as it goes only with --verify.
    let pattern: Bytes =
        (0..1u64 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect::<Vec<u8>>().into();
    let mut sha = a.verify.then(Sha256::new);
    let mut written = 0u64;
    let chunk_len = 1 << 20;
    let mut closed: Option<CloseReason> = None;
    let mut limit = if a.time.is_some() { u64::MAX } else { a.bytes };
    // The context's counters as last seen (it is gone once closed).
    let mut stats = None;
    let mut timed: Option<(u64, f64)> = None;
    while closed.is_none() {
        let now = d.now();
        let ep = d.endpoint();
        // With -t, the byte count is whatever was written when time ran out.
        if a.time.is_some_and(|t| now - t0 >= Duration::from_secs_f64(t)) && timed.is_none() {
            // Goodput is what the peer acknowledged within the time, as
            // iperf3 counts what arrived within it. The run ends here: the
            // context is aborted, not drained — what is still queued (up to
            // twice the window) would take minutes on a slow, lossy path.
            let acked = ep.context_stats(ctx).map_or(0, |s| s.bytes_acked);
            timed = Some((acked, (now - t0).as_secs_f64()));
            limit = written;
            ep.abort(now, ctx);
        }
        let piece = a.length.unwrap_or(chunk_len);
        // Keep twice the send window queued (at least 8 MiB), so a long fat
        // path is limited by the protocol, not by this loop.
        stats = ep.context_stats(ctx).or(stats);
        let window = stats.map_or(0, |s| s.send_window.min(1 << 30));
        let queued = (2 * window).max(8 * chunk_len as u64);
        while written < limit && ep.unacked_bytes(ctx) < queued {
            let n = (limit - written).min(piece as u64) as usize;
            let start = (written % chunk_len as u64) as usize;
            let start = if start + n > chunk_len { 0 } else { start };
            let chunk = pattern.slice(start..start + n);
            if let Some(sha) = sha.as_mut() {
                sha.update(&chunk);
            }
            ep.write(now, ctx, chunk, a.length.is_some(), None).map_err(|e| e.to_string())?;
            written += n as u64;
            if written == limit {
                ep.close(now, ctx);
            }
        }
        if limit == 0 && written == 0 {
            ep.close(now, ctx);
            written = u64::MAX;
        }
        while let Some(ev) = ep.poll_event() {
            if let Event::Closed { reason, .. } = ev {
                closed = Some(reason);
            }
        }
        if closed.is_none() {
            d.turn(Duration::from_millis(50)).map_err(|e| format!("socket: {e}"))?;
        }
    }
    let secs = (d.now() - t0).as_secs_f64();
    let reason = closed.unwrap_or(CloseReason::LocalAbort);
    if reason != CloseReason::Graceful && !(timed.is_some() && reason == CloseReason::LocalAbort) {
        return Err(closed_error(&reason));
    }
    let (bytes, secs) = timed.unwrap_or((written.min(limit), secs));
    let gbps = bytes as f64 * 8.0 / secs / 1e9;
    let digest = sha.map(|s| hex(&s.finalize()));
    if a.json {
        println!(
            "{}",
            json!({"transport": "xtp", "bytes": bytes, "seconds": secs, "gbit_per_s": gbps,
            "nocheck": a.nocheck, "message_bytes": a.length, "sha256": digest, "datagrams_sent": d.counters().sent,
            "send_calls": d.counters().send_calls, "send_errors": d.counters().send_errors,
            "gso": d.offload().0, "gro": d.offload().1, "context": stats.map(stats_json)})
        );
    } else {
        let digest = digest.map(|d| format!(" sha256 {d}")).unwrap_or_default();
        let verb = if timed.is_some() { "acknowledged" } else { "sent" };
        println!("{verb} {bytes} bytes{digest} in {secs:.3} s: {gbps:.3} Gbit/s");
        if let Some(s) = stats {
            println!(
                "  {}: retransmitted {} B ({} spurious), {} timeouts ({} spurious), {} reductions ({} undone), \
                 srtt {:.1} ms, min rtt {:.1} ms, cwnd {} B",
                s.congestion,
                s.retransmitted,
                s.spurious_retransmitted,
                s.timeouts,
                s.spurious_timeouts,
                s.congestion_events,
                s.undone,
                s.srtt.unwrap_or_default().as_secs_f64() * 1e3,
                s.min_rtt.unwrap_or_default().as_secs_f64() * 1e3,
                s.cwnd,
            );
        }
    }
    Ok(())
}

/// A context's counters as JSON (for `-J`).
fn stats_json(s: xtp_proto::ContextStats) -> serde_json::Value {
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    json!({"congestion": s.congestion, "bytes_sent": s.bytes_sent, "retransmitted": s.retransmitted,
        "spurious_retransmitted": s.spurious_retransmitted, "packets_sent": s.packets_sent,
        "timeouts": s.timeouts, "spurious_timeouts": s.spurious_timeouts, "loss_reports": s.loss_reports,
        "congestion_events": s.congestion_events, "undone": s.undone, "tail_probes": s.tail_probes,
        "rtt_samples": s.rtt_samples, "cwnd": s.cwnd, "send_window": s.send_window,
        "srtt_ms": ms(s.srtt), "min_rtt_ms": ms(s.min_rtt), "rto_ms": s.rto.as_secs_f64() * 1e3,
        "recv_buffer": s.recv_buffer})
}
