//! `bulk`: one transfer with iperf3's conventions — a byte count (`-n`) or
//! a wall-time bound (`-t`), interval reports (`-i`), the receiver's own
//! count reported back at the end, and a result that says what the
//! protocol did (retransmissions, RTT, window).
//!
//! With a time bound the sender stops writing at the deadline and closes;
//! the goodput counts the bytes the receiver acknowledged by then (as
//! iperf3 counts what arrived in time). The queue is kept to about one
//! window so the close completes within a round trip or two; if it has not
//! after `max(1 s, 4 RTT)` the context is aborted, so a run never outlives
//! its bound by more than that grace.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};
use xk_driver::driver::Driver;
use xk_driver::transport::Transport as Io;
use xk_time::Instant;
use xtp_proto::{CloseReason, Congestion, ContextConfig, ContextStats};

use crate::client::{ClientDriver, PathConfig};
use crate::server::{DISCARD_PORT, VERIFY_PORT};
use crate::transport::{TCP_VIA_REFUSAL, Transport};

/// How much to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// This many bytes.
    Bytes(u64),
    /// For this long (wall time).
    Time(Duration),
}

/// A bulk transfer to run.
#[derive(Clone, Debug)]
pub struct BulkConfig {
    /// The server (`xpress serve`; for QUIC its `quic` address).
    pub to: SocketAddr,
    /// What to measure.
    pub transport: Transport,
    /// Bytes or time.
    pub amount: Amount,
    /// Messages of this many bytes (EOM each) instead of a stream.
    pub length: Option<usize>,
    /// Hash both sides (SHA-256) and compare.
    pub verify: bool,
    /// XTP checksum over headers only.
    pub nocheck: bool,
    /// XTP rate limit, bits per second.
    pub rate_bps: Option<u64>,
    /// XTP congestion controller.
    pub cc: Congestion,
    /// Fixed receive window (bytes), asked of the peer and offered.
    pub window: Option<usize>,
    /// Report every this long.
    pub interval: Option<Duration>,
    /// The path to the server.
    pub path: PathConfig,
    /// QUIC: the server's certificate.
    pub quic_cert: Option<PathBuf>,
}

impl BulkConfig {
    /// An XTP transfer of `bytes` to `to` with every option at its default.
    pub fn new(to: SocketAddr, amount: Amount) -> Self {
        BulkConfig {
            to,
            transport: Transport::Xtp,
            amount,
            length: None,
            verify: false,
            nocheck: false,
            rate_bps: None,
            cc: Congestion::Cubic,
            window: None,
            interval: None,
            path: PathConfig::default(),
            quic_cert: None,
        }
    }
}

/// One interval report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Start, seconds since the first byte.
    pub start: f64,
    /// End, seconds since the first byte.
    pub end: f64,
    /// Bytes the sender put on the wire (retransmissions included; TCP:
    /// bytes written to the socket).
    pub sent_bytes: u64,
    /// Bytes the receiver acknowledged: its goodput (XTP only).
    pub acked_bytes: Option<u64>,
    /// Sender's rate, bits per second.
    pub sent_bits_per_second: f64,
    /// Receiver's goodput, bits per second (XTP only).
    pub acked_bits_per_second: Option<f64>,
    /// Bytes retransmitted in the interval (XTP only).
    pub retransmitted: Option<u64>,
    /// Smoothed RTT at the end, ms (XTP only).
    pub srtt_ms: Option<f64>,
    /// Congestion window at the end, bytes (XTP, when a controller runs).
    pub cwnd: Option<u64>,
    /// Send window (the smaller of cwnd and the peer's allocation).
    pub send_window: Option<u64>,
}

/// A context's protocol counters at the end (XTP).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContextCounters {
    /// Congestion controller.
    pub congestion: &'static str,
    /// User bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// User bytes retransmitted.
    pub retransmitted: u64,
    /// Retransmitted bytes found spurious afterwards.
    pub spurious_retransmitted: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Timeouts found spurious.
    pub spurious_timeouts: u64,
    /// Reports that revealed loss.
    pub loss_reports: u64,
    /// Window reductions.
    pub congestion_events: u64,
    /// Reductions undone.
    pub undone: u64,
    /// Tail-loss probes.
    pub tail_probes: u64,
    /// RTT samples.
    pub rtt_samples: u64,
    /// Congestion window, bytes (`u64::MAX`: none).
    pub cwnd: u64,
    /// Send window, bytes.
    pub send_window: u64,
    /// Smoothed RTT, ms.
    pub srtt_ms: Option<f64>,
    /// Smallest RTT, ms.
    pub min_rtt_ms: Option<f64>,
    /// Retransmission timeout, ms.
    pub rto_ms: f64,
    /// Receive buffer, bytes.
    pub recv_buffer: u64,
}

impl From<ContextStats> for ContextCounters {
    fn from(s: ContextStats) -> Self {
        let ms = |d: Option<xk_time::Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        ContextCounters {
            congestion: s.congestion,
            bytes_sent: s.bytes_sent,
            retransmitted: s.retransmitted,
            spurious_retransmitted: s.spurious_retransmitted,
            packets_sent: s.packets_sent,
            timeouts: s.timeouts,
            spurious_timeouts: s.spurious_timeouts,
            loss_reports: s.loss_reports,
            congestion_events: s.congestion_events,
            undone: s.undone,
            tail_probes: s.tail_probes,
            rtt_samples: s.rtt_samples,
            cwnd: s.cwnd,
            send_window: s.send_window,
            srtt_ms: ms(s.srtt),
            min_rtt_ms: ms(s.min_rtt),
            rto_ms: s.rto.as_secs_f64() * 1e3,
            recv_buffer: s.recv_buffer,
        }
    }
}

/// The outcome of a bulk run; `-J` prints it as one line of JSON.
#[derive(Clone, Debug, Serialize)]
pub struct BulkResult {
    /// `xtp`, `tcp` or `quic`.
    pub transport: &'static str,
    /// Bytes counted: sent (`-n`, all of them delivered) or acknowledged
    /// by the receiver within the time (`-t`, XTP; TCP: what the receiver
    /// counted).
    pub bytes: u64,
    /// Seconds those bytes took.
    pub seconds: f64,
    /// `bytes` over `seconds`, Gbit/s.
    pub gbit_per_s: f64,
    /// The same in bits per second.
    pub bits_per_second: f64,
    /// Ran for a time (`-t`) rather than a byte count.
    pub timed: bool,
    /// Bytes the application wrote.
    pub sent_bytes: u64,
    /// What the server said it received (`None`: no answer, e.g. aborted).
    pub receiver_bytes: Option<u64>,
    /// SHA-256 of what was sent (`--verify`).
    pub sha256: Option<String>,
    /// SHA-256 the server computed (`--verify`).
    pub receiver_sha256: Option<String>,
    /// Checksum over headers only.
    pub nocheck: bool,
    /// Message size, if messages were sent.
    pub message_bytes: Option<usize>,
    /// Datagrams sent by the driver (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_sent: Option<u64>,
    /// Send system calls (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_calls: Option<u64>,
    /// Send errors (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_errors: Option<u64>,
    /// UDP GSO in use (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// UDP GRO in use (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// The context's counters at the end (XTP).
    pub context: Option<ContextCounters>,
    /// Interval reports (`-i`).
    pub intervals: Vec<Interval>,
    /// Stopped early (Ctrl-C): the numbers are what was done by then.
    pub interrupted: bool,
    /// Warnings about the set-up (small socket buffers, …).
    pub warnings: Vec<String>,
}

impl BulkResult {
    fn new(transport: Transport, cfg: &BulkConfig) -> Self {
        BulkResult {
            transport: transport.name(),
            bytes: 0,
            seconds: 0.0,
            gbit_per_s: 0.0,
            bits_per_second: 0.0,
            timed: matches!(cfg.amount, Amount::Time(_)),
            sent_bytes: 0,
            receiver_bytes: None,
            sha256: None,
            receiver_sha256: None,
            nocheck: cfg.nocheck,
            message_bytes: cfg.length,
            datagrams_sent: None,
            send_calls: None,
            send_errors: None,
            gso: None,
            gro: None,
            context: None,
            intervals: Vec::new(),
            interrupted: false,
            warnings: Vec::new(),
        }
    }

    fn set_rate(&mut self, bytes: u64, seconds: f64) {
        self.bytes = bytes;
        self.seconds = seconds;
        self.bits_per_second = if seconds > 0.0 { bytes as f64 * 8.0 / seconds } else { 0.0 };
        self.gbit_per_s = self.bits_per_second / 1e9;
    }
}

/// Checks `cfg` and names the flag at fault.
pub fn check(cfg: &BulkConfig) -> Result<(), String> {
    match cfg.amount {
        Amount::Time(t) if !(0.1..=3600.0).contains(&t.as_secs_f64()) => {
            return Err(format!("-t {}: must be between 0.1 and 3600 seconds", t.as_secs_f64()));
        }
        Amount::Bytes(0) => return Err("-n 0: send at least one byte".into()),
        _ => {}
    }
    if let Some(l) = cfg.length
        && !(1..=1 << 20).contains(&l)
    {
        return Err(format!("-l {l}: a message must be 1 B to 1 MiB"));
    }
    if cfg.window == Some(0) {
        return Err("--window 0: the window must be at least 1 byte".into());
    }
    if let Some(i) = cfg.interval
        && i < Duration::from_millis(10)
    {
        return Err(format!("-i {}: report at most every 10 ms (0.01)", i.as_secs_f64()));
    }
    if let Some(r) = cfg.rate_bps
        && r / 8 > u64::from(u32::MAX)
    {
        return Err(format!(
            "--rate {r} bit/s: XTP's rate field holds at most {} bit/s",
            u64::from(u32::MAX) * 8
        ));
    }
    if cfg.rate_bps.is_some() && cfg.transport != Transport::Xtp {
        return Err("--rate: XTP only (its rate control); TCP and QUIC are not paced by this tool".into());
    }
    if cfg.path.via.is_some() && cfg.transport == Transport::Tcp {
        return Err(TCP_VIA_REFUSAL.into());
    }
    Ok(())
}

/// Runs `cfg`, calling `on_interval` with each interval report as it is
/// made. Stopping (`stop`) ends the run early with the numbers so far.
pub fn run(
    cfg: &BulkConfig,
    stop: &AtomicBool,
    on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    check(cfg)?;
    match cfg.transport {
        Transport::Xtp => match cfg.path.open(cfg.to)? {
            (ClientDriver::Udp(d), to) => bulk_xtp(d, cfg, to, stop, on_interval),
            (ClientDriver::Raw(d), to) => bulk_xtp(d, cfg, to, stop, on_interval),
        },
        Transport::Tcp => bulk_tcp(cfg, stop, on_interval),
        Transport::Udp => {
            Err("--transport udp: bulk over raw UDP has no reliability to compare; use tcp or xtp".into())
        }
        Transport::Quic => bulk_quic(cfg),
    }
}

fn bulk_tcp(
    cfg: &BulkConfig,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    if cfg.verify || cfg.path.raw.is_some() {
        return Err("--transport tcp: --verify and --raw are XTP only".into());
    }
    let (bytes, secs) = match cfg.amount {
        Amount::Bytes(b) => (b, None),
        Amount::Time(t) => (0, Some(t.as_secs_f64())),
    };
    let mut r = BulkResult::new(Transport::Tcp, cfg);
    let mut last = (0.0, 0u64);
    let mut intervals = Vec::new();
    let out = crate::floors::bulk_tcp(cfg.to, bytes, secs, cfg.length, cfg.interval, stop, |t, sent| {
        let iv = Interval {
            start: last.0,
            end: t,
            sent_bytes: sent - last.1,
            acked_bytes: None,
            sent_bits_per_second: (sent - last.1) as f64 * 8.0 / (t - last.0),
            acked_bits_per_second: None,
            retransmitted: None,
            srtt_ms: None,
            cwnd: None,
            send_window: None,
        };
        on_interval(&iv);
        intervals.push(iv);
        last = (t, sent);
    })?;
    r.intervals = intervals;
    r.sent_bytes = out.sent;
    r.receiver_bytes = out.server_bytes;
    r.interrupted = out.interrupted;
    if !out.interrupted && secs.is_none() && out.server_bytes != Some(out.sent) {
        return Err(match out.server_bytes {
            Some(n) => format!("tcp: the server counted {n} of {} bytes", out.sent),
            None => "tcp: the server did not answer its count (is it `xpress serve`?)".into(),
        });
    }
    r.set_rate(out.server_bytes.unwrap_or(out.sent), out.seconds);
    Ok(r)
}

fn bulk_quic(cfg: &BulkConfig) -> Result<BulkResult, String> {
    let cert = cfg.quic_cert.as_ref().ok_or(
        "--transport quic needs --quic-cert FILE (the certificate `xpress serve --quic-cert FILE` wrote)",
    )?;
    let Amount::Bytes(bytes) = cfg.amount else {
        return Err("--transport quic: -t is not supported; give -n BYTES".into());
    };
    if cfg.verify || cfg.interval.is_some() || cfg.path.via.is_some() || cfg.path.raw.is_some() {
        return Err("--transport quic: --verify, -i, --via and --raw are not supported".into());
    }
    let (got, secs) = crate::quic::bulk(cfg.to, cert, bytes, cfg.length.unwrap_or(1 << 20))?;
    if got != bytes {
        return Err(format!("quic: the server counted {got} of {bytes} bytes"));
    }
    let mut r = BulkResult::new(Transport::Quic, cfg);
    r.sent_bytes = bytes;
    r.receiver_bytes = Some(got);
    r.set_rate(bytes, secs);
    Ok(r)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why the sender stopped writing before its byte count.
#[derive(Clone, Copy, PartialEq)]
enum Finish {
    /// The `-t` deadline.
    Time,
    /// Ctrl-C.
    Stopped,
}

fn bulk_xtp<X: Io>(
    mut d: Driver<X>,
    cfg: &BulkConfig,
    to: SocketAddr,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    let mut r = BulkResult::new(Transport::Xtp, cfg);
    r.warnings.extend(d.buffer_warning());
    let mut c = ContextConfig::stream();
    c.nocheck = cfg.nocheck;
    // XTP's rate is in bytes per second.
    c.out_rate = cfg.rate_bps.map_or(0, |b| (b / 8).max(1) as u32);
    c.congestion = cfg.cc;
    if let Some(w) = cfg.window {
        c.recv_buffer = w;
        c.recv_buffer_max = w;
    }
    let t0 = d.now();
    let port = if cfg.verify { VERIFY_PORT } else { DISCARD_PORT };
    let ctx = d.endpoint().connect(t0, to, port, c).map_err(|e| format!("connect {to}: {e}"))?;
    // The data: a deterministic 1 MiB pattern, generated once and written
    // as shared slices as the send queue drains (bounded memory, no
    // per-chunk work), hashed as it goes only with --verify.
    let chunk_len = 1usize << 20;
    let pattern: Bytes = (0..chunk_len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect::<Vec<u8>>()
        .into();
    let mut sha = cfg.verify.then(Sha256::new);
    let (limit, deadline) = match cfg.amount {
        Amount::Bytes(b) => (b, None),
        Amount::Time(t) => (u64::MAX, Some(t0 + xk_time::Duration::from_nanos(t.as_nanos() as u64))),
    };
    let tick = cfg.interval.map(|i| xk_time::Duration::from_nanos(i.as_nanos() as u64));
    let mut next_tick = tick.map(|i| t0 + i);
    let mut last = (t0, 0u64, 0u64, 0u64); // time, bytes_sent, bytes_acked, retransmitted
    let mut written = 0u64;
    let mut closing = false;
    let mut finish: Option<(Finish, Instant)> = None; // why, and when to abort if not closed
    let mut stats: Option<ContextStats> = None;
    let mut answer = Vec::new();
    let mut counted: Option<(u64, f64)> = None;
    let reason = loop {
        let now = d.now();
        let ep = d.endpoint();
        stats = ep.context_stats(ctx).or(stats);
        if let (Some(t), Some(i)) = (next_tick, tick)
            && now >= t
            && finish.is_none()
            && let Some(s) = stats
        {
            let secs = (now - last.0).as_secs_f64().max(1e-9);
            let acked = s.bytes_acked - last.2;
            let iv = Interval {
                start: (last.0 - t0).as_secs_f64(),
                end: (now - t0).as_secs_f64(),
                sent_bytes: s.bytes_sent - last.1,
                acked_bytes: Some(acked),
                sent_bits_per_second: (s.bytes_sent - last.1) as f64 * 8.0 / secs,
                acked_bits_per_second: Some(acked as f64 * 8.0 / secs),
                retransmitted: Some(s.retransmitted - last.3),
                srtt_ms: s.srtt.map(|d| d.as_secs_f64() * 1e3),
                cwnd: (s.cwnd != u64::MAX).then_some(s.cwnd),
                send_window: Some(s.send_window),
            };
            on_interval(&iv);
            r.intervals.push(iv);
            last = (now, s.bytes_sent, s.bytes_acked, s.retransmitted);
            next_tick = Some(t + i);
        }
        // The deadline or Ctrl-C: count what the receiver acknowledged by
        // now, stop writing, close; abort if the close takes too long.
        let why = if stop.load(Ordering::Relaxed) {
            Some(Finish::Stopped)
        } else if deadline.is_some_and(|dl| now >= dl) {
            Some(Finish::Time)
        } else {
            None
        };
        if let (Some(why), None) = (why, finish) {
            let acked = stats.map_or(0, |s| s.bytes_acked);
            let secs = match (why, deadline) {
                (Finish::Time, Some(dl)) => (dl - t0).as_secs_f64(),
                _ => (now - t0).as_secs_f64(),
            };
            counted = Some((acked, secs));
            let srtt = stats.and_then(|s| s.srtt).unwrap_or_default();
            let grace = (srtt * 4).max(xk_time::Duration::from_secs(1));
            finish = Some((why, now + grace));
            if !closing {
                ep.close(now, ctx);
                closing = true;
            }
        }
        if let Some((_, abort_at)) = finish
            && now >= abort_at
        {
            ep.abort(now, ctx);
        }
        if finish.is_none() && !closing {
            // Keep twice the send window queued (at least 8 MiB), so a long
            // fat path is limited by the protocol, not by this loop; with a
            // time bound only a quarter window (at least 256 KiB) more than
            // can be in flight, so what is queued at the deadline drains in
            // about a round trip, within the grace, not in seconds.
            let window = stats.map_or(0, |s| s.send_window.min(1 << 30));
            let queued = if deadline.is_some() {
                window + (window / 4).max(256 << 10)
            } else {
                (2 * window).max(8 * chunk_len as u64)
            };
            let piece = cfg.length.unwrap_or(chunk_len);
            while written < limit && ep.unacked_bytes(ctx) < queued {
                let n = (limit - written).min(piece as u64) as usize;
                let start = (written % chunk_len as u64) as usize;
                let start = if start + n > chunk_len { 0 } else { start };
                let chunk = pattern.slice(start..start + n);
                if let Some(sha) = sha.as_mut() {
                    sha.update(&chunk);
                }
                ep.write(now, ctx, chunk, cfg.length.is_some(), None).map_err(|e| e.to_string())?;
                written += n as u64;
            }
            if written == limit {
                ep.close(now, ctx);
                closing = true;
            }
        }
        // The server's answer: its count, then (verify) its SHA-256.
        while let Some(c) = ep.read(now, ctx) {
            answer.extend_from_slice(&c.data);
        }
        let mut closed = None;
        while let Some(ev) = ep.poll_event() {
            if let xtp_proto::Event::Closed { reason, .. } = ev {
                closed = Some(reason);
            }
        }
        if let Some(reason) = closed {
            break reason;
        }
        let wait = next_tick.map_or(xk_time::Duration::from_millis(50), |t| {
            t.saturating_since(now).min(xk_time::Duration::from_millis(50))
        });
        d.turn(wait).map_err(|e| format!("socket: {e}"))?;
    };
    let end = d.now();
    crate::client::linger(&mut d, stats.and_then(|s| s.srtt));
    r.sent_bytes = written;
    r.interrupted = matches!(finish, Some((Finish::Stopped, _)));
    r.sha256 = sha.map(|s| hex(&s.finalize()));
    if answer.len() >= 8 {
        r.receiver_bytes = Some(u64::from_be_bytes(answer[..8].try_into().unwrap_or_default()));
        if answer.len() >= 40 {
            r.receiver_sha256 = Some(hex(&answer[8..40]));
        }
    }
    r.datagrams_sent = Some(d.counters().sent);
    r.send_calls = Some(d.counters().send_calls);
    r.send_errors = Some(d.counters().send_errors);
    r.gso = Some(d.offload().0);
    r.gro = Some(d.offload().1);
    r.context = stats.map(ContextCounters::from);
    let ours = finish.is_some() && reason == CloseReason::LocalAbort;
    if reason != CloseReason::Graceful && !ours {
        return Err(crate::close::describe(&reason));
    }
    // Cut short by us before the peer ever answered: not a zero result but
    // a missing server (or a path that drops everything).
    if ours && stats.is_none_or(|s| s.rtt_samples == 0 && s.bytes_acked == 0) && !r.interrupted {
        return Err(format!(
            "no answer from {to} in {}: nothing was acknowledged (is `xpress serve` running there?)",
            crate::format::secs((end - t0).as_secs_f64())
        ));
    }
    if reason == CloseReason::Graceful {
        if r.receiver_bytes != Some(written) {
            return Err(match r.receiver_bytes {
                Some(n) => format!("the server counted {n} of the {written} bytes sent"),
                None => "the server closed without its count (is it `xpress serve` of this version?)".into(),
            });
        }
        if cfg.verify && r.receiver_sha256 != r.sha256 {
            return Err(format!(
                "--verify: the data differ: sent sha256 {}, server's {}",
                r.sha256.as_deref().unwrap_or("?"),
                r.receiver_sha256.as_deref().unwrap_or("none")
            ));
        }
    }
    let (bytes, secs) = counted.unwrap_or((written, (end - t0).as_secs_f64()));
    r.set_rate(bytes, secs);
    Ok(r)
}
