//! `ping`, `bulk` and `serve` over a protocol graph built from a
//! description (`--graph FILE`, issue #16): XTP as an `xk-core` protocol on
//! a real socket, the framework path end to end. The description picks the
//! composition (its `compose` line, `xtp_proto::stack`): the compiled stack
//! by default, the run-time graph with `compose dynamic`; both run on the
//! same device code (`xk_core::device::DeviceStack`).
//!
//! The server echoes on XTP port 7 ([`crate::server::ECHO_PORT`]) like
//! `xpress serve`, so either client works against either server; the echo
//! passes each delivered chunk on with its end-of-message mark
//! (`push_part`), so a client sees its own message boundaries. `bulk`
//! sends to the discard service of `xpress serve` (XTP port 9,
//! [`crate::server::DISCARD_PORT`]), which answers the count it received
//! when the client closes. (The graph's server has no discard: the uniform
//! interface does not report that the peer finished sending, which is when
//! the count is due.) The `udp`
//! and `ip36` devices run on real sockets (`ip36` as root, on a local
//! address of its own: `ping --raw IP`, the server's `--listen` address);
//! `link` is refused by name (the simulator's `link` runs in
//! `xtp-testkit`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use xk_core::device::DeviceStack;
use xk_core::graph_desc::Kind;
use xk_core::{Addr, Control, ControlReply, Event, Part, Participants, PushError, SessionId};
use xk_driver::graph_udp::{DeviceStats, FrameSocket, GraphDevice, GraphIp36, GraphUdp};
use xk_msg::{Bytes, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant};
use xtp_proto::stack::{Composed, XtpStack};
use xtp_proto::{ContextConfig, EndpointConfig};

use crate::server::{DISCARD_PORT, ECHO_PORT};

/// The composition a description gives, with the message form of these
/// applications.
type Built = Composed<Rope, HeapQueue<xk_core::ArenaId>, true>;

/// Runs `$body` with `$g` bound to the composition, whichever it is: each
/// arm is its own monomorphised copy (no dispatch per call).
macro_rules! on_stack {
    ($c:expr, |$g:ident| $body:expr) => {
        match $c {
            Composed::Graph($g) => $body,
            Composed::Compiled($g) => $body,
        }
    };
}

/// `compiled` or `dynamic`, for the results.
fn composition(c: &Built) -> &'static str {
    match c {
        Composed::Graph(_) => "dynamic",
        Composed::Compiled(_) => "compiled",
    }
}

/// What the composition and XTP dropped (counted, never a panic).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct GraphDrops {
    /// Frames the run-time graph handed out without a readable device
    /// header (`GraphOn::bad_frames`; the compiled stack has none: 0).
    pub bad_frames: u64,
    /// Frames XTP's `demux` or `pop` refused, or a layer's between it and
    /// the device (a `census`'s) (the composition's `demux_drops`).
    pub demux_drops: u64,
    /// Datagrams XTP's endpoint took and found malformed (its `malformed`).
    pub malformed: u64,
    /// Datagrams the socket refused to send (the protocol retransmits).
    pub send_errors: u64,
}

impl GraphDrops {
    /// One line for people, or `None` when nothing was dropped.
    pub fn summary(&self) -> Option<String> {
        let d = self;
        (d.bad_frames + d.demux_drops + d.malformed + d.send_errors > 0).then(|| {
            format!(
                "dropped: {} without a device header, {} refused by a layer's demux, {} malformed, {} send errors",
                d.bad_frames, d.demux_drops, d.malformed, d.send_errors
            )
        })
    }
}

fn drops<G: DeviceStack<Rope>, S: FrameSocket>(g: &mut G, dev: &GraphDevice<S>) -> GraphDrops {
    let d = g.drops();
    let malformed = match g.control(None, Control::GetMalformedCount) {
        Ok(ControlReply::Count(n)) => n as u64,
        _ => 0,
    };
    GraphDrops {
        bad_frames: d.bad_frames,
        demux_drops: d.demux_drops,
        malformed,
        send_errors: dev.stats.send_errors,
    }
}

/// The named counters of a layer that answers `Control::GetCounters`,
/// read when the run ended: whatever names the layer answers, printed and
/// serialized as they come (no tool knows any protocol's counters).
#[derive(Clone, Debug, Serialize)]
pub struct LayerCounters {
    /// The layer's name in the description.
    pub layer: &'static str,
    /// Its counters, by name, in the layer's order (a JSON object).
    #[serde(serialize_with = "as_map")]
    pub counters: Vec<(&'static str, u64)>,
}

fn as_map<S: serde::Serializer>(c: &[(&'static str, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(c.iter().map(|(n, v)| (n, v)))
}

impl LayerCounters {
    /// One line for people: `layer: name=value, ...`.
    pub fn summary(&self) -> String {
        let c: Vec<_> = self.counters.iter().map(|(n, v)| format!("{n}={v}")).collect();
        format!("{}: {}", self.layer, c.join(", "))
    }
}

fn layers<G: DeviceStack<Rope>>(g: &mut G) -> Vec<LayerCounters> {
    g.counters().into_iter().map(|(layer, counters)| LayerCounters { layer, counters }).collect()
}

/// What a graph ping measured.
#[derive(Clone, Debug, Serialize)]
pub struct GraphPingResult {
    /// The layers, top first, as described.
    pub graph: String,
    /// `compiled` (the compiled stack) or `dynamic` (the run-time graph).
    pub composition: &'static str,
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
    /// What was dropped on the way.
    pub drops: GraphDrops,
    /// The named counters of the graph's layers that answer `GetCounters`.
    pub layers: Vec<LayerCounters>,
}

/// What a graph server did.
#[derive(Clone, Debug, Serialize)]
pub struct GraphServeResult {
    /// `compiled` or `dynamic`.
    pub composition: &'static str,
    /// Sessions accepted.
    pub sessions: u64,
    /// Bytes received (and echoed, or queued to be when it stopped).
    pub bytes: u64,
    /// What was dropped on the way.
    pub drops: GraphDrops,
    /// The named counters of the graph's layers that answer `GetCounters`.
    pub layers: Vec<LayerCounters>,
}

fn stack(text: &str, seed: u64) -> Result<(Built, Kind), String> {
    let (c, device) = XtpStack::<Rope>::compose::<HeapQueue<xk_core::ArenaId>, true>(
        text,
        EndpointConfig::default(),
        ContextConfig::stream(),
        seed,
    )
    .map_err(|e| e.to_string())?;
    match device.name {
        "udp" | "ip36" => Ok((c, device)),
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

/// `dev.run_until` in slices of at most 100 ms: `stop` is set by Ctrl-C's
/// thread, which does not wake the socket wait, so without slices a stack
/// with nothing arriving and no timer due (an idle server, a peer that
/// went quiet) would see it only at the next datagram or timer.
fn watching<G: DeviceStack<Rope>, S: FrameSocket>(
    dev: &mut GraphDevice<S>,
    g: &mut G,
    until: Instant,
    stop: &AtomicBool,
    mut done: impl FnMut(&mut G) -> bool,
) -> Result<(), String> {
    loop {
        let slice = until.min(dev.now() + Duration::from_millis(100));
        let mut finished = false;
        dev.run_until(g, slice, |g| {
            finished = done(g);
            finished
        })
        .map_err(|e| format!("socket: {e}"))?;
        if finished || stop.load(Ordering::Relaxed) || dev.now() >= until {
            return Ok(());
        }
    }
}

fn graph_line(text: &str) -> String {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && !l.starts_with("compose"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a graph ping does: `count` requests of `length` bytes, the next
/// `interval` after the previous one's start (0: as soon as its reply is
/// in), each waited for at most `timeout`.
#[derive(Clone, Copy, Debug)]
pub struct PingJob {
    /// Bytes per request.
    pub length: usize,
    /// Requests.
    pub count: u64,
    /// From one request's start to the next's.
    pub interval: std::time::Duration,
    /// Longest wait for a reply.
    pub timeout: std::time::Duration,
}

/// Ping-pong over the described stack to the XTP echo at `to`, one request
/// at a time (see [`PingJob`]). Over `ip36` the client binds `raw_local`
/// (`ping --raw IP`) and the port of `to` is ignored.
pub fn ping(
    text: &str,
    to: SocketAddr,
    raw_local: Option<std::net::IpAddr>,
    job: PingJob,
    stop: &AtomicBool,
) -> Result<GraphPingResult, String> {
    let (c, device) = stack(text, xk_driver::clock::time_seed())?;
    let how = composition(&c);
    if device.name == "ip36" {
        let local = ip36_local(raw_local, "--raw")?;
        let dev = GraphIp36::bind(local).map_err(|e| format!("raw IP 36 on {local}: {e}"))?;
        let to = SocketAddr::new(to.ip(), 0);
        return on_stack!(c, |g| ping_on(g, dev, text, how, to, job, stop));
    }
    let bind: SocketAddr = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("literal");
    let dev = GraphUdp::bind(bind).map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
    on_stack!(c, |g| ping_on(g, dev, text, how, to, job, stop))
}

fn ping_on<G: DeviceStack<Rope>, S: FrameSocket>(
    mut g: G,
    mut dev: GraphDevice<S>,
    text: &str,
    composition: &'static str,
    to: SocketAddr,
    job: PingJob,
    stop: &AtomicBool,
) -> Result<GraphPingResult, String> {
    let PingJob { length, count, interval, timeout } = job;
    let nanos =
        |d: std::time::Duration| Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let interval = nanos(interval);
    g.advance(dev.now());
    let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(ECHO_PORT), Addr::Inet(to)]));
    let session = g.open(&parts).map_err(|e| format!("cannot open an XTP session to {to}: {e}"))?;
    let payload = Bytes::from((0..length).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let timeout = nanos(timeout);
    let mut r = GraphPingResult {
        graph: graph_line(text),
        composition,
        sent: 0,
        received: 0,
        rtt_us: Vec::new(),
        median_us: f64::NAN,
        datagrams_sent: 0,
        datagrams_received: 0,
        drops: GraphDrops::default(),
        layers: Vec::new(),
    };
    let mut last_start = dev.now();
    for i in 0..count {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if i > 0 && !interval.is_zero() {
            // Wait out the interval, the stack running (acknowledgements,
            // a late reply's data, read and dropped).
            let next = last_start + interval;
            watching(&mut dev, &mut g, next, stop, |g| {
                while g.poll_event().is_some() {}
                stop.load(Ordering::Relaxed)
            })?;
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let start = dev.now();
        last_start = start;
        g.push(session, Rope::from_shared(payload.clone())).map_err(|e| format!("push: {e}"))?;
        r.sent += 1;
        let mut got = 0usize;
        let mut closed = false;
        watching(&mut dev, &mut g, start + timeout, stop, |g| {
            while let Some(ev) = g.poll_event() {
                match ev {
                    Event::Deliver { msg, .. } => got += msg.len(),
                    Event::CloseDone { .. } => closed = true,
                    Event::OpenDone { .. } => {}
                }
            }
            got >= length || closed || stop.load(Ordering::Relaxed)
        })?;
        if closed {
            return Err(format!("the session to {to} ended (no XTP echo there?)"));
        }
        if got >= length {
            r.received += 1;
            r.rtt_us.push((dev.now() - start).as_nanos() as f64 / 1e3);
        }
    }
    let _ = g.close(session);
    let end = dev.now() + Duration::from_millis(200);
    dev.run_until(&mut g, end, |g| {
        std::iter::from_fn(|| g.poll_event()).any(|e| matches!(e, Event::CloseDone { .. }))
    })
    .map_err(|e| format!("socket: {e}"))?;
    if !r.rtt_us.is_empty() {
        r.median_us = xk_stats::median(r.rtt_us.iter().copied());
    }
    let DeviceStats { sent, received, .. } = dev.stats;
    (r.datagrams_sent, r.datagrams_received) = (sent, received);
    r.drops = drops(&mut g, &dev);
    r.layers = layers(&mut g);
    Ok(r)
}

/// An XTP echo on port 7 over the described stack at `listen`; `ready` is
/// called with the bound address and the composition (`compiled` or
/// `dynamic`). Runs for `duration` or until `stop`.
/// Over `ip36` it binds `listen`'s address (its port is ignored).
pub fn serve(
    text: &str,
    listen: SocketAddr,
    duration: Option<std::time::Duration>,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr, &'static str),
) -> Result<GraphServeResult, String> {
    let (c, device) = stack(text, xk_driver::clock::time_seed())?;
    let how = composition(&c);
    if device.name == "ip36" {
        let local = ip36_local(Some(listen.ip()), "--listen")?;
        let dev = GraphIp36::bind(local).map_err(|e| format!("raw IP 36 on {local}: {e}"))?;
        return on_stack!(c, |g| serve_on(g, dev, how, duration, stop, ready));
    }
    let dev = GraphUdp::bind(listen).map_err(|e| format!("cannot bind {listen}: {e}"))?;
    on_stack!(c, |g| serve_on(g, dev, how, duration, stop, ready))
}

fn serve_on<G: DeviceStack<Rope>, S: FrameSocket>(
    mut g: G,
    mut dev: GraphDevice<S>,
    how: &'static str,
    duration: Option<std::time::Duration>,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr, &'static str),
) -> Result<GraphServeResult, String> {
    g.advance(dev.now());
    g.open_enable(&Participants::local(Part::top_first([Addr::Port(ECHO_PORT)])))
        .map_err(|e| format!("open_enable: {e}"))?;
    ready(dev.local_addr().map_err(|e| e.to_string())?, how);
    let end = duration.map_or(Instant::MAX, |d| {
        dev.now() + Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    });
    let mut r = GraphServeResult {
        composition: how,
        sessions: 0,
        bytes: 0,
        drops: GraphDrops::default(),
        layers: Vec::new(),
    };
    // Chunks waiting to be echoed, each with its end-of-message mark (the
    // client sees its own boundaries). A full send buffer keeps them here,
    // in order, and no more is read meanwhile: nothing is dropped, and the
    // compiled stack's unread data holds the client back (XTP's window).
    let mut echo: VecDeque<(SessionId, Bytes, bool)> = VecDeque::new();
    watching(&mut dev, &mut g, end, stop, |g| {
        loop {
            while let Some((session, data, eom)) = echo.front() {
                match g.push_part(*session, Rope::from_shared(data.clone()), *eom) {
                    Err(PushError::WouldBlock) => return stop.load(Ordering::Relaxed),
                    // Ok, or the session has gone: nothing to keep.
                    _ => echo.pop_front(),
                };
            }
            let Some(ev) = g.poll_event() else { break };
            match ev {
                Event::OpenDone { .. } => r.sessions += 1,
                Event::Deliver { session, msg, eom } => {
                    r.bytes += msg.len() as u64;
                    echo.push_back((session, msg.into_bytes(), eom));
                }
                Event::CloseDone { .. } => {}
            }
        }
        stop.load(Ordering::Relaxed)
    })?;
    r.drops = drops(&mut g, &dev);
    r.layers = layers(&mut g);
    Ok(r)
}

/// What a graph bulk transfer measured.
#[derive(Clone, Debug, Serialize)]
pub struct GraphBulkResult {
    /// The layers, top first, as described.
    pub graph: String,
    /// `compiled` or `dynamic`.
    pub composition: &'static str,
    /// Bytes asked for (`-n`).
    pub asked: u64,
    /// Bytes written into the session (taken by XTP's send buffer).
    pub bytes: u64,
    /// Bytes the peer had acknowledged when the transfer ended, if known:
    /// XTP's count while the session exists; once it has closed, `bytes`
    /// if the server counted them all, else unknown.
    pub acknowledged: Option<u64>,
    /// Bytes the server says it received (its 8-byte answer), if it answered.
    pub server_bytes: Option<u64>,
    /// Ctrl-C ended it (the session was aborted).
    pub interrupted: bool,
    /// From the open to the server's answer and close (or the interruption),
    /// seconds.
    pub seconds: f64,
    /// `acknowledged` (0 if unknown) over `seconds`, Mbit/s: what reached
    /// the peer, not what the send buffer took.
    pub goodput_mbit: f64,
    /// Datagrams the device sent.
    pub datagrams_sent: u64,
    /// Datagrams it received.
    pub datagrams_received: u64,
    /// What was dropped on the way.
    pub drops: GraphDrops,
    /// The named counters of the graph's layers that answer `GetCounters`.
    pub layers: Vec<LayerCounters>,
}

/// A bulk transfer over the described stack: `bytes` in messages of
/// `length` bytes (each with EOM) to the discard service of `xpress serve`
/// at `to`, then a close; the server answers the count it received. Gives
/// up at `timeout` after the start; `stop` aborts the session and returns
/// what was done (`interrupted`). Over `ip36` the client binds `raw_local`
/// and the port of `to` is ignored.
#[allow(clippy::too_many_arguments)] // bulk's own flags
pub fn bulk(
    text: &str,
    to: SocketAddr,
    raw_local: Option<std::net::IpAddr>,
    bytes: u64,
    length: usize,
    timeout: std::time::Duration,
    stop: &AtomicBool,
) -> Result<GraphBulkResult, String> {
    if length == 0 {
        return Err("message length 0: say at least 1 byte".into());
    }
    let (c, device) = stack(text, xk_driver::clock::time_seed())?;
    let how = composition(&c);
    let job = BulkJob { text, how, bytes, length, timeout, stop };
    if device.name == "ip36" {
        let local = ip36_local(raw_local, "--raw")?;
        let dev = GraphIp36::bind(local).map_err(|e| format!("raw IP 36 on {local}: {e}"))?;
        let to = SocketAddr::new(to.ip(), 0);
        return on_stack!(c, |g| bulk_on(g, dev, to, &job));
    }
    let bind: SocketAddr = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().expect("literal");
    let dev = GraphUdp::bind(bind).map_err(|e| format!("cannot bind a UDP socket: {e}"))?;
    on_stack!(c, |g| bulk_on(g, dev, to, &job))
}

struct BulkJob<'a> {
    text: &'a str,
    how: &'static str,
    bytes: u64,
    length: usize,
    timeout: std::time::Duration,
    stop: &'a AtomicBool,
}

fn bulk_on<G: DeviceStack<Rope>, S: FrameSocket>(
    mut g: G,
    mut dev: GraphDevice<S>,
    to: SocketAddr,
    job: &BulkJob<'_>,
) -> Result<GraphBulkResult, String> {
    g.advance(dev.now());
    let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(DISCARD_PORT), Addr::Inet(to)]));
    let session = g.open(&parts).map_err(|e| format!("cannot open an XTP session to {to}: {e}"))?;
    let payload = Bytes::from((0..job.length).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let start = dev.now();
    let until = start + Duration::from_nanos(u64::try_from(job.timeout.as_nanos()).unwrap_or(u64::MAX));
    let (mut sent, mut closing, mut closed) = (0u64, false, false);
    let mut answer: Vec<u8> = Vec::new();
    let mut failure: Option<String> = None;
    watching(&mut dev, &mut g, until, job.stop, |g| {
        while let Some(ev) = g.poll_event() {
            match ev {
                Event::Deliver { msg, .. } => answer.extend_from_slice(&msg.to_vec()),
                Event::CloseDone { .. } => closed = true,
                Event::OpenDone { .. } => {}
            }
        }
        // Write until the send buffer is full; the acknowledgements that
        // come in free it, and this runs again after each datagram.
        while sent < job.bytes && !closed {
            let n = usize::try_from(job.bytes - sent).map_or(job.length, |left| left.min(job.length));
            match g.push(session, Rope::from_shared(payload.slice(..n))) {
                Ok(()) => sent += n as u64,
                Err(PushError::WouldBlock) => break,
                Err(e) => {
                    failure = Some(format!("push: {e}"));
                    return true;
                }
            }
        }
        if sent == job.bytes && !closing {
            closing = true;
            if let Err(e) = g.close(session) {
                failure = Some(format!("close: {e}"));
                return true;
            }
        }
        closed || job.stop.load(Ordering::Relaxed)
    })?;
    if let Some(f) = failure {
        return Err(f);
    }
    let interrupted = !closed && job.stop.load(Ordering::Relaxed);
    if !closed && !interrupted {
        return Err(format!(
            "the transfer to {to} did not end within {:?} ({sent} of {} bytes written; no XTP discard there?)",
            job.timeout, job.bytes
        ));
    }
    let seconds = (dev.now() - start).as_nanos() as f64 / 1e9;
    let server_bytes = answer.get(..8).map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
    let acknowledged = match g.control(Some(session), Control::GetAckedBytes) {
        Ok(ControlReply::Count(n)) => Some(n as u64),
        // The session has ended; the server's count says what arrived.
        _ if server_bytes == Some(sent) => Some(sent),
        _ => None,
    };
    if interrupted {
        // Ctrl-C: end the session now, the peer told (a close would go on
        // sending what is queued), and give the abort a moment to leave.
        if g.control(Some(session), Control::Abort).is_ok() {
            let end = dev.now() + Duration::from_millis(100);
            dev.run_until(&mut g, end, |g| {
                std::iter::from_fn(|| g.poll_event()).any(|e| matches!(e, Event::CloseDone { .. }))
            })
            .map_err(|e| format!("socket: {e}"))?;
        }
    }
    let DeviceStats { sent: ds, received: dr, .. } = dev.stats;
    Ok(GraphBulkResult {
        graph: graph_line(job.text),
        composition: job.how,
        asked: job.bytes,
        bytes: sent,
        acknowledged,
        server_bytes,
        interrupted,
        seconds,
        goodput_mbit: if seconds > 0.0 {
            acknowledged.unwrap_or(0) as f64 * 8.0 / seconds / 1e6
        } else {
            0.0
        },
        datagrams_sent: ds,
        datagrams_received: dr,
        drops: drops(&mut g, &dev),
        layers: layers(&mut g),
    })
}
