//! `ping` and `serve` over a protocol graph built from a description
//! (`--graph FILE`, issue #16): XTP as an `xk-core` protocol on a real
//! socket, the framework path end to end.
//!
//! The server echoes on XTP port 7 ([`crate::server::ECHO_PORT`]) like
//! `xpress serve`, so either client works against either server. The `udp`
//! and `ip36` devices run on real sockets (`ip36` as root, on a local
//! address of its own: `ping --raw IP`, the server's `--listen` address);
//! `link` is refused by name (the simulator's `link` runs in
//! `xtp-testkit`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use xk_core::{Addr, Event, Part, Participants};
use xk_driver::graph_udp::{DeviceStats, FrameSocket, GraphDevice, GraphIp36, GraphUdp};
use xk_msg::{Bytes, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant};
use xtp_proto::stack::XtpStack;
use xtp_proto::{ContextConfig, EndpointConfig};

use crate::server::ECHO_PORT;

/// What a graph ping measured.
#[derive(Clone, Debug, Serialize)]
pub struct GraphPingResult {
    /// The layers, top first, as described.
    pub graph: String,
    /// Requests sent.
    pub sent: u64,
    /// Replies received complete.
    pub received: u64,
    /// Round-trip times of the replies, microseconds.
    pub rtt_us: Vec<f64>,
    /// Their median (NaN without replies).
    pub median_us: f64,
    /// Datagrams the device sent and received.
    pub datagrams_sent: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
}

/// What a graph server did.
#[derive(Clone, Debug, Serialize)]
pub struct GraphServeResult {
    /// Sessions accepted.
    pub sessions: u64,
    /// Bytes echoed.
    pub bytes: u64,
}

fn stack(text: &str, seed: u64) -> Result<XtpStack<Rope>, String> {
    let s = XtpStack::<Rope>::from_desc::<HeapQueue<xk_core::ArenaId>, true>(
        text,
        EndpointConfig::default(),
        ContextConfig::stream(),
        seed,
    )
    .map_err(|e| e.to_string())?;
    match s.device.name {
        "udp" | "ip36" => Ok(s),
        other => Err(format!(
            "graph description: device `{other}` is not driven on real sockets by --graph (`udp` and `ip36` are); it runs in the simulator"
        )),
    }
}

/// The IPv4 address an `ip36` device binds: `local`, or the error that
/// names the flag that gives it.
fn ip36_local(local: Option<std::net::IpAddr>, flag: &str) -> Result<std::net::Ipv4Addr, String> {
    match local {
        Some(std::net::IpAddr::V4(ip)) => Ok(ip),
        Some(ip) => Err(format!("{flag} {ip}: the ip36 device is IPv4 only")),
        None => Err(format!(
            "the graph's ip36 device needs a local IPv4 address of its own ({flag} 127.0.0.1, say; the peer on another, e.g. 127.0.0.2)"
        )),
    }
}

fn graph_line(text: &str) -> String {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Ping-pong over the described stack: `count` requests of `length` bytes to
/// the XTP echo at `to`, one at a time, each waited for at most `timeout`.
/// Over `ip36` the client binds `raw_local` (`ping --raw IP`) and the port
/// of `to` is ignored.
pub fn ping(
    text: &str,
    to: SocketAddr,
    raw_local: Option<std::net::IpAddr>,
    length: usize,
    count: u64,
    timeout: std::time::Duration,
    stop: &AtomicBool,
) -> Result<GraphPingResult, String> {
    let s = stack(text, xk_driver::clock::time_seed())?;
    if s.device.name == "ip36" {
        let local = ip36_local(raw_local, "--raw")?;
        let dev = GraphIp36::bind(local).map_err(|e| format!("raw IP 36 on {local}: {e}"))?;
        return ping_on(s, dev, text, SocketAddr::new(to.ip(), 0), length, count, timeout, stop);
    }
    let bind: SocketAddr = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("literal");
    let dev = GraphUdp::bind(bind).map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
    ping_on(s, dev, text, to, length, count, timeout, stop)
}

#[allow(clippy::too_many_arguments)] // ping's own, with the stack and device made
fn ping_on<S: FrameSocket>(
    mut s: XtpStack<Rope>,
    mut dev: GraphDevice<S>,
    text: &str,
    to: SocketAddr,
    length: usize,
    count: u64,
    timeout: std::time::Duration,
    stop: &AtomicBool,
) -> Result<GraphPingResult, String> {
    s.graph.advance(dev.now());
    let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(ECHO_PORT), Addr::Inet(to)]));
    let session =
        s.graph.open(s.xtp, &parts).map_err(|e| format!("cannot open an XTP session to {to}: {e}"))?;
    let payload = Bytes::from((0..length).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let timeout = Duration::from_nanos(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
    let mut r = GraphPingResult {
        graph: graph_line(text),
        sent: 0,
        received: 0,
        rtt_us: Vec::new(),
        median_us: f64::NAN,
        datagrams_sent: 0,
        datagrams_received: 0,
    };
    for _ in 0..count {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let start = dev.now();
        s.graph.push(session, Rope::from_shared(payload.clone())).map_err(|e| format!("push: {e}"))?;
        r.sent += 1;
        let mut got = 0usize;
        let mut closed = false;
        dev.run_until(&mut s.graph, s.xtp, start + timeout, |g| {
            while let Some(ev) = g.poll_event() {
                match ev {
                    Event::Deliver { msg, .. } => got += msg.len(),
                    Event::CloseDone { .. } => closed = true,
                    Event::OpenDone { .. } => {}
                }
            }
            got >= length || closed || stop.load(Ordering::Relaxed)
        })
        .map_err(|e| format!("socket: {e}"))?;
        if closed {
            return Err(format!("the session to {to} ended (no XTP echo there?)"));
        }
        if got >= length {
            r.received += 1;
            r.rtt_us.push((dev.now() - start).as_nanos() as f64 / 1e3);
        }
    }
    let _ = s.graph.close(session);
    let end = dev.now() + Duration::from_millis(200);
    dev.run_until(&mut s.graph, s.xtp, end, |g| {
        std::iter::from_fn(|| g.poll_event()).any(|e| matches!(e, Event::CloseDone { .. }))
    })
    .map_err(|e| format!("socket: {e}"))?;
    if !r.rtt_us.is_empty() {
        r.median_us = xk_stats::median(r.rtt_us.iter().copied());
    }
    let DeviceStats { sent, received, .. } = dev.stats;
    (r.datagrams_sent, r.datagrams_received) = (sent, received);
    Ok(r)
}

/// An XTP echo on port 7 over the described stack at `listen`; `ready` is
/// called with the bound address. Runs for `duration` or until `stop`.
/// Over `ip36` it binds `listen`'s address (its port is ignored).
pub fn serve(
    text: &str,
    listen: SocketAddr,
    duration: Option<std::time::Duration>,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr),
) -> Result<GraphServeResult, String> {
    let s = stack(text, xk_driver::clock::time_seed())?;
    if s.device.name == "ip36" {
        let local = ip36_local(Some(listen.ip()), "--listen")?;
        let dev = GraphIp36::bind(local).map_err(|e| format!("raw IP 36 on {local}: {e}"))?;
        return serve_on(s, dev, duration, stop, ready);
    }
    let dev = GraphUdp::bind(listen).map_err(|e| format!("cannot bind {listen}: {e}"))?;
    serve_on(s, dev, duration, stop, ready)
}

fn serve_on<S: FrameSocket>(
    mut s: XtpStack<Rope>,
    mut dev: GraphDevice<S>,
    duration: Option<std::time::Duration>,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr),
) -> Result<GraphServeResult, String> {
    s.graph.advance(dev.now());
    s.graph
        .open_enable(s.xtp, &Participants::local(Part::top_first([Addr::Port(ECHO_PORT)])))
        .map_err(|e| format!("open_enable: {e}"))?;
    ready(dev.local_addr().map_err(|e| e.to_string())?);
    let end = duration.map_or(Instant::MAX, |d| {
        dev.now() + Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    });
    let mut r = GraphServeResult { sessions: 0, bytes: 0 };
    let mut echo = Vec::new();
    dev.run_until(&mut s.graph, s.xtp, end, |g| {
        while let Some(ev) = g.poll_event() {
            match ev {
                Event::OpenDone { .. } => r.sessions += 1,
                Event::Deliver { session, msg, .. } => {
                    r.bytes += msg.len() as u64;
                    echo.push((session, msg));
                }
                Event::CloseDone { .. } => {}
            }
        }
        for (session, msg) in echo.drain(..) {
            // A full send buffer drops the echo of this chunk (counted by
            // the client as a missing reply); ping sends one at a time.
            let _ = g.push(session, msg);
        }
        stop.load(Ordering::Relaxed)
    })
    .map_err(|e| format!("socket: {e}"))?;
    Ok(r)
}
