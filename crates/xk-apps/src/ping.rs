//! `ping` over XTP, raw UDP or kernel TCP, with ping's conventions: a
//! request every `interval` (0: the next one as soon as the reply is in —
//! ping-pong), a reply not back within `timeout` reported missing and not
//! waited on again, `count` requests or until stopped, and a summary with
//! sent/received/loss and min/avg/max/mdev plus p50/p90/p99.
//!
//! A reply that comes after its request was given up still counts, as in
//! ping: it is reported `late` with its whole round trip, and loss is what
//! never came back. Over XTP and TCP a reply is never lost, only delayed
//! behind a retransmission; counting those as lost overstated loss on
//! lossy paths (issue #14).
//!
//! [`open`] does everything that can refuse (sockets, privileges, the
//! connection) before a caller prints its header; [`Pinger::run`] then
//! measures.

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

/// One request's fate, as it becomes known.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Reply {
    /// Sequence number, from 0.
    pub seq: u64,
    /// Round-trip time in microseconds; `None`: no reply within the
    /// timeout (it may still come, then reported again as `late`).
    pub rtt_us: Option<f64>,
    /// The reply came after its request had been given up.
    pub late: bool,
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
    /// Requests asked for (`-c`); `None`: until stopped.
    pub count: Option<u64>,
    /// Requests sent.
    pub sent: u64,
    /// Replies received, late ones included.
    pub received: u64,
    /// Of `received`, replies that came after their timeout.
    pub late: u64,
    /// Percentage of requests that never got a reply.
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
    cfg.path.check(cfg.to)?;
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

/// A ping ready to run: its sockets open and, for XTP and TCP, its
/// connection under way.
pub struct Pinger {
    cfg: PingConfig,
    echo: Box<dyn Echo>,
}

/// Checks `cfg` and opens what it pings through; every refusal (a bad
/// flag, a socket, raw IP without root, a TCP connection refused) comes
/// from here, before the run prints anything.
pub fn open(cfg: &PingConfig) -> Result<Pinger, String> {
    check(cfg)?;
    let echo: Box<dyn Echo> = match cfg.transport {
        Transport::Xtp => match cfg.path.open(cfg.to)? {
            (ClientDriver::Udp(d), to) => Box::new(XtpEcho::open(d, to, cfg)?),
            (ClientDriver::Raw(d), to) => Box::new(XtpEcho::open(d, to, cfg)?),
        },
        Transport::Udp => {
            if cfg.path.raw.is_some() {
                return Err("--transport udp with --raw: raw IP carries XTP only".into());
            }
            // Through the relay: the relay forwards to the server it was
            // started with, which must then be the UDP echo's address.
            let to = cfg.path.via.unwrap_or(cfg.to);
            Box::new(UdpEcho::open(to, cfg.length, cfg.path.busy_poll)?)
        }
        Transport::Tcp => Box::new(TcpEcho::open(cfg.to, cfg.length, cfg.path.busy_poll)?),
        Transport::Quic => return Err("--transport quic: bulk only (ping measures XTP, UDP and TCP)".into()),
    };
    Ok(Pinger { cfg: cfg.clone(), echo })
}

impl Pinger {
    /// Runs, calling `on_reply` for each reply or timeout as it happens;
    /// returns the summary (also when stopped or when the path failed
    /// midway: `error` then says why).
    pub fn run(mut self, stop: &AtomicBool, on_reply: impl FnMut(Reply)) -> Result<PingResult, String> {
        drive(&self.cfg, stop, self.echo.as_mut(), on_reply)
    }
}

/// [`open`] and [`Pinger::run`] in one.
pub fn run(cfg: &PingConfig, stop: &AtomicBool, on_reply: impl FnMut(Reply)) -> Result<PingResult, String> {
    open(cfg)?.run(stop, on_reply)
}

/// Requests given up on that a late reply may still match: the newest
/// this many (a reply older than that is dropped, as one to a request
/// never sent would be).
const GIVEN_UP_KEPT: usize = 4096;

fn drive(
    cfg: &PingConfig,
    stop: &AtomicBool,
    echo: &mut dyn Echo,
    mut on_reply: impl FnMut(Reply),
) -> Result<PingResult, String> {
    let mask = match echo.seq_bits() {
        64 => u64::MAX,
        b => (1u64 << b) - 1,
    };
    let t0 = Instant::now();
    // Requests not yet answered nor given up: seq -> time sent.
    let mut waiting: BTreeMap<u64, Instant> = BTreeMap::new();
    // Requests given up on (reported missing): seq -> time sent.
    let mut given_up: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut rtts = Vec::new();
    let mut late = 0u64;
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
            given_up.insert(seq, at);
            if given_up.len() > GIVEN_UP_KEPT {
                given_up.pop_first();
            }
            on_reply(Reply { seq, rtt_us: None, late: false });
        }
        let mut until = waiting.values().next().map_or(now + cfg.timeout, |&at| at + cfg.timeout);
        if more && !cfg.interval.is_zero() {
            until = until.min(next_send);
        }
        match echo.wait(until, stop) {
            Ok(done) => {
                let at = Instant::now();
                for s in done {
                    // The awaited request with these low bits, else one
                    // given up on (the reply is late); a reply matching
                    // neither (a duplicate) is dropped.
                    let find = |m: &BTreeMap<u64, Instant>| m.keys().copied().find(|k| k & mask == s & mask);
                    let (seq, was_late) = match find(&waiting) {
                        Some(k) => (Some(k), false),
                        None => (find(&given_up), true),
                    };
                    let Some(seq) = seq else { continue };
                    let from = if was_late { &mut given_up } else { &mut waiting };
                    let sent_at = from.remove(&seq).unwrap_or(at);
                    let ns = at.duration_since(sent_at).as_nanos() as u64;
                    rtts.push(ns);
                    late += u64::from(was_late);
                    on_reply(Reply { seq, rtt_us: Some(ns as f64 / 1000.0), late: was_late });
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let interrupted = stop.load(Ordering::Relaxed);
    // Requests still out when the run ended are lost, as ping counts them
    // (but not reported one by one when the path failed: the error says
    // why they went unanswered).
    if !interrupted && error.is_none() {
        for &seq in waiting.keys() {
            on_reply(Reply { seq, rtt_us: None, late: false });
        }
    }
    let received = rtts.len() as u64;
    Ok(PingResult {
        transport: cfg.transport.name(),
        busy_poll: cfg.path.busy_poll,
        length: cfg.length,
        count: cfg.count,
        sent,
        received,
        late,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers request k after `delays[k]` (`None`: never).
    struct Scripted {
        delays: Vec<Option<Duration>>,
        sent: Vec<Instant>,
    }

    impl Echo for Scripted {
        fn send(&mut self, _seq: u64) -> Result<(), String> {
            self.sent.push(Instant::now());
            Ok(())
        }

        fn wait(&mut self, until: Instant, _stop: &AtomicBool) -> Result<Vec<u64>, String> {
            // The earliest reply due that is not yet handed over.
            let due: Vec<(Instant, u64)> = self
                .sent
                .iter()
                .enumerate()
                .filter_map(|(k, &t)| self.delays[k].map(|d| (t + d, k as u64)))
                .collect();
            let now = Instant::now();
            let next = due.iter().min();
            match next {
                Some(&(t, k)) if t <= until => {
                    std::thread::sleep(t.saturating_duration_since(now));
                    self.delays[k as usize] = None;
                    Ok(vec![k])
                }
                _ => {
                    std::thread::sleep(until.saturating_duration_since(now));
                    Ok(Vec::new())
                }
            }
        }
    }

    #[test]
    fn a_reply_after_the_timeout_counts_as_late_and_loss_is_what_never_came() {
        let mut cfg = PingConfig::new("127.0.0.1:9".parse().unwrap(), 3);
        cfg.timeout = Duration::from_millis(40);
        cfg.interval = Duration::from_millis(100);
        let ms = |m| Some(Duration::from_millis(m));
        let mut echo = Scripted { delays: vec![ms(5), ms(70), None], sent: Vec::new() };
        let mut seen = Vec::new();
        let r = drive(&cfg, &AtomicBool::new(false), &mut echo, |rep| seen.push(rep)).unwrap();
        let what: Vec<(u64, bool, bool)> = seen.iter().map(|x| (x.seq, x.rtt_us.is_some(), x.late)).collect();
        // 0 in time; 1 missing at 40 ms, then late at 70 ms; 2 never.
        assert_eq!(what, vec![(0, true, false), (1, false, false), (1, true, true), (2, false, false)]);
        assert_eq!((r.sent, r.received, r.late), (3, 2, 1));
        assert!((r.loss_percent - 100.0 / 3.0).abs() < 1e-9, "{}", r.loss_percent);
        let late_rtt = seen[2].rtt_us.unwrap();
        assert!((70_000.0..90_000.0).contains(&late_rtt), "the late reply's whole round trip: {late_rtt} µs");
    }
}
