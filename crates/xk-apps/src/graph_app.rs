//! `ping` and `serve` over a protocol graph built from a description
//! (`--graph FILE`, issue #16): XTP as an `xk-core` protocol on a real
//! socket, the framework path end to end.
//!
//! The server echoes on XTP port 7 ([`crate::server::ECHO_PORT`]) like
//! `xpress serve`, so either client works against either server. Only the
//! `udp` device runs on real sockets so far; `ip36` and `link` are refused
//! by name (the simulator's `link` runs in `xtp-testkit`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use xk_core::{Addr, Event, Part, Participants};
use xk_driver::graph_udp::{DeviceStats, GraphUdp};
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
        "udp" => Ok(s),
        other => Err(format!(
            "graph description: device `{other}` is not yet driven on real sockets by --graph (only `udp`); {}",
            if s.device.needs_root { "it would also need root" } else { "it runs in the simulator" }
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
pub fn ping(
    text: &str,
    to: SocketAddr,
    length: usize,
    count: u64,
    timeout: std::time::Duration,
    stop: &AtomicBool,
) -> Result<GraphPingResult, String> {
    let mut s = stack(text, xk_driver::clock::time_seed())?;
    let bind: SocketAddr = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("literal");
    let mut dev = GraphUdp::bind(bind).map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
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
pub fn serve(
    text: &str,
    listen: SocketAddr,
    duration: Option<std::time::Duration>,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr),
) -> Result<GraphServeResult, String> {
    let mut s = stack(text, xk_driver::clock::time_seed())?;
    let mut dev = GraphUdp::bind(listen).map_err(|e| format!("cannot bind {listen}: {e}"))?;
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
                Event::Deliver { session, msg } => {
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
