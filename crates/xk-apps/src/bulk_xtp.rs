//! The XTP side of `bulk`: `parallel` contexts each way on one endpoint,
//! turned by one loop that feeds the senders, counts what the receivers
//! got, reports intervals and ends the run.
//!
//! Ending. A byte-count run ends when every context has closed gracefully
//! (all data delivered; each discard context's answer carries the
//! server's count). A timed run, or Ctrl-C, snapshots what each receiver
//! has got (sending: acknowledged; receiving: delivered to us), stops the
//! senders and closes; contexts not closed after `max(1 s, 4 RTT)` (3 s at
//! most) are aborted, so a run never outlives its bound by more than that.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use xk_driver::driver::Driver;
use xk_driver::transport::Transport as Io;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, ContextId, ContextStats, Endpoint, Event};

use crate::bulk::{
    Amount, BulkConfig, BulkResult, ContextCounters, Direction, Interval, StreamResult, Sum, sum_intervals,
};
use crate::feed::{COUNTERS_TAG, Feeder, SourceRequest, hex};
use crate::server::{DISCARD_PORT, SOURCE_PORT, VERIFY_PORT};
use crate::transport::Transport;

/// One context of the run.
struct Flow {
    dir: Direction,
    ctx: ContextId,
    /// Sending: what we write.
    feeder: Option<Feeder>,
    /// Receiving: bytes delivered to us. Sending: the server's answer.
    received: u64,
    answer: Vec<u8>,
    /// Receiving: the source's counters message as it arrives (tagged
    /// `COUNTERS_TAG`, after the data), and whether it is still coming.
    counters: Vec<u8>,
    in_counters: bool,
    /// Receiving: the bytes the server was asked for (byte-count runs).
    expected: Option<u64>,
    closing: bool,
    stats: Option<ContextStats>,
    closed: Option<CloseReason>,
    /// The receiver's count at the deadline or Ctrl-C.
    counted: Option<u64>,
    /// The receiver's count when the omitted start ended (0 without one).
    base: u64,
    /// At the last interval: bytes on the wire, receiver's bytes, retransmitted.
    last: (u64, u64, u64),
    /// When the receiver's count last grew, and what it was then.
    progress: (Instant, u64),
    /// Set at the deadline when the receiver's count had not grown for a
    /// while before it: seconds since the run began at which it stopped.
    silent_from: Option<f64>,
}

impl Flow {
    /// Bytes the receiver has got so far.
    fn goodput(&self) -> u64 {
        match self.dir {
            Direction::Receive => self.received,
            _ => self.stats.map_or(0, |s| s.bytes_acked),
        }
    }
}

/// Why the run stopped early.
#[derive(Clone, Copy, PartialEq)]
enum Finish {
    /// The `-t` deadline.
    Time,
    /// Ctrl-C.
    Stopped,
}

fn dur(d: std::time::Duration) -> Duration {
    Duration::from_nanos(d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// Opens the contexts: sending ones first, then receiving ones.
fn open<S: xtp_proto::Subscriber>(
    ep: &mut Endpoint<S>,
    now: Instant,
    cfg: &BulkConfig,
    to: SocketAddr,
) -> Result<Vec<Flow>, String> {
    let mut c = ContextConfig::stream();
    c.nocheck = cfg.nocheck;
    // XTP's rate is in bytes per second.
    c.out_rate = cfg.rate_bps.map_or(0, |b| (b / 8).max(1) as u32);
    c.congestion = cfg.cc;
    // The path's segment unless --mss says otherwise, as TCP's MSS follows
    // the route's MTU: the engine cuts the FIRST's address and traffic
    // segments and a BTAG out of the same packet, so a full segment fits.
    // The route's MTU sets the packet (`PathConfig::max_packet`).
    let packet = cfg.path.max_packet(cfg.to).0;
    c.mss = cfg.mss.unwrap_or_else(|| crate::bulk::max_mss(packet, cfg.path.raw.is_some(), to.is_ipv6()));
    if let Some(w) = cfg.window {
        // Ours to receive in (so with -R the server sends within it), and
        // a cap on what our sending contexts let out (so without -R it
        // binds too, whatever the server offers).
        c.recv_buffer = w;
        c.recv_buffer_max = w;
        c.send_window = Some(w as u64);
    }
    let p = u64::from(cfg.parallel);
    let share = |i: u64| cfg.share(i);
    let timed = matches!(cfg.amount, Amount::Time(_));
    let mut flows = Vec::new();
    let dirs = cfg.direction.ways();
    for &dir in dirs {
        for i in 0..p {
            let port = match dir {
                Direction::Receive => SOURCE_PORT,
                _ if cfg.verify => VERIFY_PORT,
                _ => DISCARD_PORT,
            };
            let ctx = ep.connect(now, to, port, c.clone()).map_err(|e| format!("connect {to}: {e}"))?;
            let (feeder, expected) = if dir == Direction::Receive {
                let (amount, timed) = match cfg.amount {
                    Amount::Bytes(_) => (share(i), false),
                    Amount::Time(t) => ((cfg.omit + t).as_millis() as u64, true),
                };
                let length = cfg.length.map_or(0, |l| l as u32);
                let req = SourceRequest { amount, timed, length, counters: true }.encode();
                ep.write(now, ctx, req.into(), true, None).map_err(|e| e.to_string())?;
                (None, (!timed).then_some(amount))
            } else {
                (Some(Feeder::new(share(i), timed, cfg.length, cfg.verify)), None)
            };
            flows.push(Flow {
                dir,
                ctx,
                feeder,
                received: 0,
                answer: Vec::new(),
                counters: Vec::new(),
                in_counters: false,
                expected,
                closing: false,
                stats: None,
                closed: None,
                counted: None,
                base: 0,
                last: (0, 0, 0),
                progress: (now, 0),
                silent_from: None,
            });
        }
    }
    Ok(flows)
}

/// The interval of `f` from `last` to now (`secs` long, ending `end`).
fn flow_interval(f: &Flow, index: usize, start: f64, end: f64, omitted: bool) -> Interval {
    let secs = (end - start).max(1e-9);
    let s = f.stats;
    let got = f.goodput() - f.last.1;
    let sending = f.dir != Direction::Receive;
    let wire = s.map_or(0, |s| s.bytes_sent) - f.last.0;
    Interval {
        stream: Some(index),
        direction: f.dir,
        start,
        end,
        sent_bytes: sending.then_some(wire),
        sent_bits_per_second: sending.then_some(wire as f64 * 8.0 / secs),
        receiver_bytes: Some(got),
        receiver_bits_per_second: Some(got as f64 * 8.0 / secs),
        retransmitted: sending.then(|| s.map_or(0, |s| s.retransmitted) - f.last.2),
        srtt_ms: s.and_then(|s| s.srtt).map(|d| d.as_secs_f64() * 1e3),
        cwnd: s.filter(|s| sending && s.cwnd != u64::MAX).map(|s| s.cwnd),
        send_window: s.filter(|_| sending).map(|s| s.send_window),
        pacing_bits_per_second: s.filter(|_| sending).and_then(|s| s.pacing_rate).map(|r| r as f64 * 8.0),
        omitted,
    }
}

pub(crate) fn run<X: Io>(
    mut d: Driver<X>,
    cfg: &BulkConfig,
    to: SocketAddr,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    let mut r = BulkResult::new(Transport::Xtp, cfg);
    r.warnings.extend(d.buffer_warning());
    let t0 = d.now();
    let mut flows = open(d.endpoint(), t0, cfg, to)?;
    let omit_end = t0 + dur(cfg.omit);
    // Counting: the omitted start (if any) is over.
    let mut counting = cfg.omit.is_zero();
    let deadline = match cfg.amount {
        Amount::Time(t) => Some(omit_end + dur(t)),
        Amount::Bytes(_) => None,
    };
    let tick = cfg.interval.map(dur);
    let mut next_tick = tick.map(|i| t0 + i);
    let mut last_tick = t0;
    let mut finish: Option<(Finish, Instant)> = None;
    let mut counted_secs = None;
    loop {
        let now = d.now();
        let ep = d.endpoint();
        for f in &mut flows {
            f.stats = ep.context_stats(f.ctx).or(f.stats);
            let got = f.goodput();
            if got > f.progress.1 {
                f.progress = (now, got);
            }
        }
        // The omitted start ends now: its last interval line is cut here
        // (the next ones count), as iperf3 does.
        let omit_ends = !counting && now >= omit_end;
        // The deadline or Ctrl-C: count what each receiver has got by now,
        // stop the senders and close; abort what has not closed in time.
        let why = if stop.load(Ordering::Relaxed) {
            Some(Finish::Stopped)
        } else if deadline.is_some_and(|dl| now >= dl) {
            Some(Finish::Time)
        } else {
            None
        };
        // At the end, the interval since the last line is reported too (a
        // partial one when -t is not a multiple of -i, or on Ctrl-C).
        let ending = why.is_some() && finish.is_none() && now > last_tick;
        if let (Some(t), Some(i)) = (next_tick, tick)
            && (now >= t || omit_ends || ending)
            && finish.is_none()
        {
            let (start, end) = ((last_tick - t0).as_secs_f64(), (now - t0).as_secs_f64());
            for dir in [Direction::Send, Direction::Receive] {
                let parts: Vec<Interval> = flows
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.dir == dir)
                    .map(|(k, f)| flow_interval(f, k, start, end, !counting))
                    .collect();
                if parts.is_empty() {
                    continue;
                }
                if parts.len() > 1 {
                    for iv in &parts {
                        on_interval(iv);
                        r.intervals.push(iv.clone());
                    }
                }
                let sum = sum_intervals(&parts, dir);
                on_interval(&sum);
                r.intervals.push(sum);
            }
            for f in &mut flows {
                let s = f.stats.unwrap_or_default();
                f.last = (s.bytes_sent, f.goodput(), s.retransmitted);
            }
            last_tick = now;
            // Counted intervals keep step with the end of the omitted
            // start, so the last one ends at the deadline rather than just
            // after it, where it was lost.
            next_tick = Some(if omit_ends { omit_end + i } else { t + i });
        }
        if omit_ends {
            counting = true;
            for f in &mut flows {
                f.base = f.goodput();
            }
        }
        if let (Some(why), None) = (why, finish) {
            // Ctrl-C during the omitted start counts from the start.
            let from = if counting { omit_end } else { t0 };
            counted_secs = Some(match (why, deadline) {
                (Finish::Time, Some(dl)) => (dl - from).as_secs_f64(),
                _ => now.saturating_since(from).as_secs_f64(),
            });
            let mut srtt = Duration::ZERO;
            for f in &mut flows {
                f.counted = Some(f.goodput().saturating_sub(f.base));
                // Nothing acknowledged (or received) for a second and four
                // round trips before the end: the server stopped answering.
                let quiet =
                    (f.stats.and_then(|s| s.srtt).unwrap_or_default() * 4).max(Duration::from_secs(1));
                if why == Finish::Time && now.saturating_since(f.progress.0) > quiet {
                    f.silent_from = Some(f.progress.0.saturating_since(t0).as_secs_f64());
                }
                srtt = srtt.max(f.stats.and_then(|s| s.srtt).unwrap_or_default());
                if let Some(feeder) = f.feeder.as_mut() {
                    feeder.stop();
                }
                if f.closed.is_none() && !f.closing && f.dir != Direction::Receive {
                    ep.close(now, f.ctx);
                    f.closing = true;
                }
                // The server's source cannot be told to stop but by an abort.
                if why == Finish::Stopped && f.dir == Direction::Receive && f.closed.is_none() {
                    ep.abort(now, f.ctx);
                }
            }
            let grace = (srtt * 4).max(Duration::from_secs(1)).min(Duration::from_secs(3));
            finish = Some((why, now + grace));
        }
        if let Some((_, abort_at)) = finish
            && now >= abort_at
        {
            for f in flows.iter().filter(|f| f.closed.is_none()) {
                ep.abort(now, f.ctx);
            }
        }
        for f in &mut flows {
            if let Some(feeder) = f.feeder.as_mut()
                && f.closed.is_none()
                && !f.closing
            {
                feeder.feed(ep, now, f.ctx)?;
                if feeder.done() {
                    ep.close(now, f.ctx);
                    f.closing = true;
                }
            }
            while let Some(c) = ep.read(now, f.ctx) {
                match f.dir {
                    // The source's counters follow its data as a tagged
                    // message; they are not data.
                    Direction::Receive if f.in_counters || c.btag == Some(COUNTERS_TAG) => {
                        f.in_counters = !c.eom;
                        if f.counters.len() + c.data.len() <= 64 << 10 {
                            f.counters.extend_from_slice(&c.data);
                        }
                    }
                    Direction::Receive => f.received += c.data.len() as u64,
                    _ => f.answer.extend_from_slice(&c.data),
                }
            }
        }
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Closed { ctx, reason } => {
                    if let Some(f) = flows.iter_mut().find(|f| f.ctx == ctx) {
                        f.closed = Some(reason);
                    }
                }
                // The source finished: close our side too.
                Event::PeerFinished { ctx } => {
                    if let Some(f) = flows.iter_mut().find(|f| f.ctx == ctx && f.dir == Direction::Receive) {
                        ep.close(now, f.ctx);
                        f.closing = true;
                    }
                }
                _ => {}
            }
        }
        if flows.iter().all(|f| f.closed.is_some()) {
            break;
        }
        let wait = next_tick
            .map_or(Duration::from_millis(50), |t| t.saturating_since(now).min(Duration::from_millis(50)));
        d.turn(wait).map_err(|e| format!("socket: {e}"))?;
    }
    let end = d.now();
    let rtt = flows.iter().filter_map(|f| f.stats.and_then(|s| s.srtt)).max();
    crate::client::linger(&mut d, rtt);
    r.interrupted = matches!(finish, Some((Finish::Stopped, _)));
    r.datagrams_sent = Some(d.counters().sent);
    r.send_calls = Some(d.counters().send_calls);
    r.send_errors = Some(d.counters().send_errors);
    r.gso = Some(d.offload().0);
    r.gro = Some(d.offload().1);
    r.endpoint = Some(d.endpoint().stats().into());
    if !counting {
        r.counted_from_start();
    }
    finish_result(r, cfg, to, flows, finish.is_some(), counted_secs.unwrap_or((end - t0).as_secs_f64()))
}

/// Checks how each context ended and adds them up.
fn finish_result(
    mut r: BulkResult,
    cfg: &BulkConfig,
    to: SocketAddr,
    flows: Vec<Flow>,
    cut_short: bool,
    secs: f64,
) -> Result<BulkResult, String> {
    let mut silent = true;
    for (k, mut f) in flows.into_iter().enumerate() {
        let reason = f.closed.clone().unwrap_or(CloseReason::LocalAbort);
        let ours = cut_short && reason == CloseReason::LocalAbort;
        if reason != CloseReason::Graceful && !ours {
            return Err(crate::close::describe(&reason));
        }
        silent &= f.stats.is_none_or(|s| s.rtt_samples == 0 && s.bytes_acked == 0) && f.received == 0;
        let sha256 = f.feeder.as_mut().and_then(Feeder::digest).map(|h| hex(&h));
        let written = f.feeder.as_ref().map(|x| x.written);
        let (receiver_bytes, receiver_sha256) = match f.dir {
            Direction::Receive => (Some(f.received), None),
            _ if f.answer.len() >= 8 => {
                let n = u64::from_be_bytes(f.answer[..8].try_into().unwrap_or_default());
                (Some(n), (f.answer.len() >= 40).then(|| hex(&f.answer[8..40])))
            }
            _ => (None, None),
        };
        if reason == CloseReason::Graceful {
            match f.dir {
                Direction::Receive => {
                    if let Some(want) = f.expected
                        && f.received != want
                    {
                        return Err(format!(
                            "-R: the server sent {} of the {want} bytes asked for",
                            f.received
                        ));
                    }
                }
                _ => {
                    if receiver_bytes != written {
                        return Err(match receiver_bytes {
                            Some(n) => {
                                format!("the server counted {n} of the {} bytes sent", written.unwrap_or(0))
                            }
                            None => {
                                "the server closed without its count (is it `xpress serve` of this version?)"
                                    .into()
                            }
                        });
                    }
                    if cfg.verify && receiver_sha256 != sha256 {
                        return Err(format!(
                            "--verify: the data differ: sent sha256 {}, server's {}",
                            sha256.as_deref().unwrap_or("?"),
                            receiver_sha256.as_deref().unwrap_or("none")
                        ));
                    }
                }
            }
        }
        if let Some(at) = f.silent_from
            && !r.interrupted
            && (f.dir == Direction::Receive || receiver_bytes.is_none())
        {
            return Err(format!(
                "the server stopped answering {} into the run: nothing {} after that (is `xpress serve` still \
                 running?); {} by then",
                crate::format::secs(at),
                if f.dir == Direction::Receive { "arrived" } else { "was acknowledged" },
                crate::format::bytes(f.progress.1)
            ));
        }
        let bytes = f.counted.unwrap_or(match f.dir {
            Direction::Receive => f.received,
            _ => written.unwrap_or(0),
        });
        r.streams.push(StreamResult {
            stream: k,
            direction: f.dir,
            bytes,
            seconds: secs,
            bits_per_second: bytes as f64 * 8.0 / secs.max(1e-9),
            sent_bytes: written,
            receiver_bytes,
            sha256,
            receiver_sha256,
            context: f.stats.map(ContextCounters::from),
            sender: (f.dir == Direction::Receive).then(|| serde_json::from_slice(&f.counters).ok()).flatten(),
            quic: None,
            tcp: None,
        });
    }
    // Cut short before the peer ever answered: not a zero result but a
    // missing server (or a path that drops everything).
    if cut_short && silent && !r.interrupted {
        return Err(format!(
            "no answer from {to} in {}: nothing was acknowledged (is `xpress serve` running there?)",
            crate::format::secs(secs)
        ));
    }
    let primary = if cfg.direction == Direction::Receive { Direction::Receive } else { Direction::Send };
    let of = |dir: Direction| r.streams.iter().filter(move |s| s.direction == dir);
    let bytes: u64 = of(primary).map(|s| s.bytes).sum();
    let sent: Option<u64> = of(primary).map(|s| s.sent_bytes).sum();
    let got: Option<u64> = of(primary).map(|s| s.receiver_bytes).sum();
    let single = of(primary).count() == 1;
    let first = of(primary).next().cloned();
    if cfg.direction == Direction::Both {
        let b: u64 = of(Direction::Receive).map(|s| s.bytes).sum();
        r.receive_sum =
            Some(Sum { bytes: b, seconds: secs, bits_per_second: b as f64 * 8.0 / secs.max(1e-9) });
    }
    r.sent_bytes = sent.unwrap_or(0);
    r.receiver_bytes = got;
    if let Some(first) = first {
        r.context = first.context;
        r.sender = first.sender;
        if single {
            r.sha256 = first.sha256;
            r.receiver_sha256 = first.receiver_sha256;
        }
    }
    r.set_rate(bytes, secs);
    Ok(r)
}
