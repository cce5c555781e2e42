//! `ping` over XTP, raw UDP or kernel TCP, with ping's conventions: a
//! request every `interval` (0: the next one as soon as the reply is in —
//! ping-pong), a reply not back within `timeout` counted lost and never
//! waited on again, `count` requests or until stopped, and a summary with
//! sent/received/loss and min/avg/max/mdev plus p50/p90/p99.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use xk_driver::driver::Driver;
use xk_driver::transport::Transport as Io;
use xtp_proto::{Congestion, ContextConfig, ContextId, Event};

use crate::client::{ClientDriver, PathConfig};
use crate::floors::{TcpEcho, UdpEcho};
use crate::server::ECHO_PORT;
use crate::stats::RttSummary;
use crate::transport::Transport;

/// What to ping and how.
#[derive(Clone, Debug)]
pub struct PingConfig {
    /// The server (`xpress serve`); for `Transport::Udp`, its UDP echo.
    pub to: SocketAddr,
    /// XTP, or the raw-UDP / kernel-TCP floor.
    pub transport: Transport,
    /// Bytes per request (and reply).
    pub length: usize,
    /// Requests to send; `None`: until stopped.
    pub count: Option<u64>,
    /// Time between requests; zero: the next request right after the reply.
    pub interval: Duration,
    /// How long a reply is waited for before it is counted lost.
    pub timeout: Duration,
    /// XTP congestion controller.
    pub cc: Congestion,
    /// The path to the server.
    pub path: PathConfig,
}

impl PingConfig {
    /// `count` back-to-back XTP requests of 64 bytes to `to`, a reply
    /// given up after 10 s, every other option at its default.
    pub fn new(to: SocketAddr, count: u64) -> Self {
        PingConfig {
            to,
            transport: Transport::Xtp,
            length: 64,
            count: Some(count),
            interval: Duration::ZERO,
            timeout: Duration::from_secs(10),
            cc: Congestion::Cubic,
            path: PathConfig::default(),
        }
    }
}

/// One request's fate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Reply {
    /// Sequence number, from 0.
    pub seq: u64,
    /// Round-trip time in microseconds; `None`: lost (no reply in time).
    pub rtt_us: Option<f64>,
}

/// The outcome of a ping run. `-J` prints it as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct PingResult {
    /// `xtp`, `udp` or `tcp`.
    pub transport: &'static str,
    /// Spinning instead of sleeping.
    pub busy_poll: bool,
    /// Bytes per request.
    pub length: usize,
    /// Requests asked for (`sent` when unbounded).
    pub count: u64,
    /// Requests sent.
    pub sent: u64,
    /// Replies received in time.
    pub received: u64,
    /// Percentage of requests without a reply in time.
    pub loss_percent: f64,
    /// Round-trip times of the replies, µs; `None` when none came.
    pub rtt_us: Option<RttSummary>,
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
    /// Why the run ended early, as a sentence (the path failed).
    pub error: Option<String>,
}

/// A request/reply service the ping loop drives.
pub(crate) trait Echo {
    /// Sends request `seq`.
    fn send(&mut self, seq: u64) -> Result<(), String>;
    /// Waits until `until` (or `stop`) for replies; returns the sequence
    /// numbers of the replies completed, possibly none.
    fn wait(&mut self, until: Instant, stop: &AtomicBool) -> Result<Vec<u64>, String>;
    /// Bits of the sequence number a reply carries (short UDP datagrams
    /// carry fewer than 64).
    fn seq_bits(&self) -> u32 {
        64
    }
}

/// Checks `cfg` and names the flag at fault.
pub fn check(cfg: &PingConfig) -> Result<(), String> {
    if cfg.length == 0 {
        return Err("-l 0: a request must carry at least 1 byte".into());
    }
    if cfg.count == Some(0) {
        return Err("-c 0: send at least one request".into());
    }
    if cfg.timeout.is_zero() {
        return Err("-W 0: the reply timeout must be positive".into());
    }
    if cfg.path.pcap.is_some() && cfg.transport != Transport::Xtp {
        return Err("--pcap: XTP only (capture kernel TCP or UDP with tcpdump)".into());
    }
    if cfg.path.via.is_some() && cfg.transport == Transport::Tcp {
        return Err(crate::transport::TCP_VIA_REFUSAL.into());
    }
    if cfg.transport == Transport::Quic {
        return Err("--transport quic: bulk only (ping measures XTP, UDP and TCP)".into());
    }
    Ok(())
}

/// Runs `cfg`, calling `on_reply` for each reply or loss as it happens;
/// returns the summary (also when stopped or when the path failed midway:
/// `error` then says why).
pub fn run(cfg: &PingConfig, stop: &AtomicBool, on_reply: impl FnMut(Reply)) -> Result<PingResult, String> {
    check(cfg)?;
    match cfg.transport {
        Transport::Xtp => match cfg.path.open(cfg.to)? {
            (ClientDriver::Udp(d), to) => drive(cfg, stop, XtpEcho::open(d, to, cfg)?, on_reply),
            (ClientDriver::Raw(d), to) => drive(cfg, stop, XtpEcho::open(d, to, cfg)?, on_reply),
        },
        Transport::Udp => {
            if cfg.path.raw.is_some() {
                return Err("--transport udp with --raw: raw IP carries XTP only".into());
            }
            // Through the relay: the relay forwards to the server it was
            // started with, which must then be the UDP echo's address.
            let to = cfg.path.via.unwrap_or(cfg.to);
            drive(cfg, stop, UdpEcho::open(to, cfg.length, cfg.path.busy_poll)?, on_reply)
        }
        Transport::Tcp => drive(cfg, stop, TcpEcho::open(cfg.to, cfg.length, cfg.path.busy_poll)?, on_reply),
        Transport::Quic => Err("--transport quic: bulk only (ping measures XTP, UDP and TCP)".into()),
    }
}

fn drive(
    cfg: &PingConfig,
    stop: &AtomicBool,
    mut echo: impl Echo,
    mut on_reply: impl FnMut(Reply),
) -> Result<PingResult, String> {
    let mask = match echo.seq_bits() {
        64 => u64::MAX,
        b => (1u64 << b) - 1,
    };
    let t0 = Instant::now();
    // Requests not yet answered nor given up: seq -> time sent.
    let mut waiting: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut rtts = Vec::new();
    let (mut sent, mut error) = (0u64, None);
    let mut next_send = t0;
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let more = cfg.count.is_none_or(|c| sent < c);
        // Back-to-back mode sends when nothing is outstanding.
        let due = if cfg.interval.is_zero() { waiting.is_empty() } else { now >= next_send };
        if more && due {
            // Stamped before the send: on loopback the reply can be back
            // before the send call returns.
            waiting.insert(sent, Instant::now());
            if let Err(e) = echo.send(sent) {
                error = Some(e);
                break;
            }
            sent += 1;
            next_send += cfg.interval;
            continue;
        }
        if !more && waiting.is_empty() {
            break;
        }
        // Give up on replies older than the timeout.
        while let Some((&seq, &at)) = waiting.first_key_value() {
            if now.duration_since(at) < cfg.timeout {
                break;
            }
            waiting.remove(&seq);
            on_reply(Reply { seq, rtt_us: None });
        }
        let mut until = waiting.values().next().map_or(now + cfg.timeout, |&at| at + cfg.timeout);
        if more && !cfg.interval.is_zero() {
            until = until.min(next_send);
        }
        match echo.wait(until, stop) {
            Ok(done) => {
                let at = Instant::now();
                for s in done {
                    // The awaited request with these low bits; a reply to a
                    // request already given up finds nothing and is dropped.
                    let seq = waiting.keys().copied().find(|k| k & mask == s & mask);
                    if let Some(seq) = seq {
                        let sent_at = waiting.remove(&seq).unwrap_or(at);
                        let ns = at.duration_since(sent_at).as_nanos() as u64;
                        rtts.push(ns);
                        on_reply(Reply { seq, rtt_us: Some(ns as f64 / 1000.0) });
                    }
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let interrupted = stop.load(Ordering::Relaxed);
    // Requests still out when the run ended are lost, as ping counts them.
    if !interrupted {
        for &seq in waiting.keys() {
            on_reply(Reply { seq, rtt_us: None });
        }
    }
    let received = rtts.len() as u64;
    Ok(PingResult {
        transport: cfg.transport.name(),
        busy_poll: cfg.path.busy_poll,
        length: cfg.length,
        count: cfg.count.unwrap_or(sent),
        sent,
        received,
        loss_percent: if sent == 0 { 0.0 } else { (sent - received) as f64 * 100.0 / sent as f64 },
        rtt_us: RttSummary::of(&rtts),
        seconds: t0.elapsed().as_secs_f64(),
        interrupted,
        error,
    })
}

/// Ping over an XTP stream to the echo port: replies come back in order,
/// so the k-th `length` bytes answer request k.
struct XtpEcho<X: Io> {
    d: Driver<X>,
    ctx: ContextId,
    msg: Bytes,
    got: u64,
}

impl<X: Io> XtpEcho<X> {
    fn open(mut d: Driver<X>, to: SocketAddr, cfg: &PingConfig) -> Result<Self, String> {
        let now = d.now();
        let mut c = ContextConfig::stream();
        c.congestion = cfg.cc;
        let ctx = d.endpoint().connect(now, to, ECHO_PORT, c).map_err(|e| format!("connect {to}: {e}"))?;
        Ok(XtpEcho { d, ctx, msg: Bytes::from(vec![0x5au8; cfg.length]), got: 0 })
    }
}

impl<X: Io> Echo for XtpEcho<X> {
    fn send(&mut self, _seq: u64) -> Result<(), String> {
        let now = self.d.now();
        self.d.endpoint().write(now, self.ctx, self.msg.clone(), true, None).map_err(|e| e.to_string())
    }

    fn wait(&mut self, until: Instant, stop: &AtomicBool) -> Result<Vec<u64>, String> {
        let len = self.msg.len() as u64;
        let before = self.got / len;
        loop {
            let now = self.d.now();
            let ep = self.d.endpoint();
            while let Some(ev) = ep.poll_event() {
                if let Event::Closed { reason, .. } = &ev {
                    return Err(crate::close::describe(reason));
                }
            }
            while let Some(c) = ep.read(now, self.ctx) {
                self.got += c.data.len() as u64;
            }
            let after = self.got / len;
            if after > before {
                return Ok((before..after).collect());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || stop.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            let step = xk_time::Duration::from_nanos(left.min(Duration::from_millis(50)).as_nanos() as u64);
            self.d.turn(step).map_err(|e| format!("socket: {e}"))?;
        }
    }
}

impl<X: Io> Drop for XtpEcho<X> {
    /// Closes gracefully, answering the server's close for up to 2 s.
    fn drop(&mut self) {
        // Already over (refused, no answer, peer gone): nothing to close,
        // and waiting would only delay the exit.
        if !self.d.endpoint().state(self.ctx).is_some_and(|s| s.is_live()) {
            return;
        }
        let now = self.d.now();
        let rtt = self.d.endpoint().context_stats(self.ctx).and_then(|s| s.srtt);
        self.d.endpoint().close(now, self.ctx);
        let deadline = now + xk_time::Duration::from_secs(2);
        while self.d.now() < deadline {
            let mut closed = false;
            while let Some(ev) = self.d.endpoint().poll_event() {
                closed |= matches!(ev, Event::Closed { .. });
            }
            if closed {
                crate::client::linger(&mut self.d, rtt);
                return;
            }
            if self.d.turn(xk_time::Duration::from_millis(50)).is_err() {
                return;
            }
        }
    }
}
