//! The kernel-TCP floor of `bulk`: `parallel` connections each way, one
//! thread each, blocking sockets with 50 ms timeouts so the deadline, the
//! intervals and Ctrl-C are seen on a slow path too. The main thread
//! makes the interval reports from each connection's byte counter.
//!
//! What is counted, as before: sending, the server's answer (its count of
//! what it read, sent when we shut down our side) over the time until it
//! came; receiving (`-R`), what arrived by the deadline (or in all, for a
//! byte count) — the server's `s` command sends what the 13-byte request
//! asks for, as XTP's source service does.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::bulk::{Amount, BulkConfig, BulkResult, Direction, Interval, StreamResult, Sum, sum_intervals};
use crate::feed::SourceRequest;
use crate::tcp_info::{self, TcpCounters, TcpInfo};
use crate::transport::Transport;

/// One connection's outcome.
struct Flow {
    dir: Direction,
    /// Bytes written (sending) or read (receiving) so far.
    count: AtomicU64,
    /// A second handle on the connection, for reading its `TCP_INFO`
    /// from the reporting thread.
    sock: OnceLock<TcpStream>,
}

impl Flow {
    fn new(dir: Direction) -> Self {
        Flow { dir, count: AtomicU64::new(0), sock: OnceLock::new() }
    }

    /// The kernel's view of a sending connection (a receiving one's
    /// window and RTT are the server's to know).
    fn info(&self) -> Option<TcpInfo> {
        if self.dir == Direction::Receive {
            return None;
        }
        self.sock.get().and_then(tcp_info::read)
    }

    /// Keeps a handle on `s` for [`Flow::info`].
    fn watch(&self, s: &TcpStream) {
        if let Ok(c) = s.try_clone() {
            let _ = self.sock.set(c);
        }
    }
}

struct Done {
    sent: Option<u64>,
    receiver: Option<u64>,
    seconds: f64,
    /// The sending connection's kernel counters: ours (sending), or the
    /// server's from its trailer (receiving).
    tcp: Option<TcpCounters>,
}

const TICK: Duration = Duration::from_millis(50);

fn connect(to: SocketAddr) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&to, Duration::from_secs(10))
        .map_err(|e| format!("tcp connect {to}: {e}"))?;
    s.set_write_timeout(Some(TICK)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(TICK)).map_err(|e| e.to_string())?;
    Ok(s)
}

fn pending(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
    )
}

/// Writes `limit` bytes (or until `deadline`/`stop`) to the discard
/// service, then waits for the server's count.
fn send(
    to: SocketAddr,
    limit: u64,
    deadline: Option<Instant>,
    message: Option<usize>,
    stop: &AtomicBool,
    f: &Flow,
) -> Result<Done, String> {
    let t0 = Instant::now();
    let mut s = connect(to)?;
    f.watch(&s);
    s.write_all(b"d").map_err(|e| e.to_string())?;
    if message.is_some() {
        s.set_nodelay(true).map_err(|e| e.to_string())?;
    }
    let chunk = vec![0x5au8; message.unwrap_or(1 << 20)];
    let (mut sent, mut at) = (0u64, 0usize);
    while sent < limit {
        if deadline.is_some_and(|d| Instant::now() >= d) || stop.load(Ordering::Relaxed) {
            break;
        }
        let n = ((limit - sent) as usize).min(chunk.len() - at);
        match s.write(&chunk[at..at + n]) {
            Ok(w) => {
                sent += w as u64;
                at = (at + w) % chunk.len();
                f.count.store(sent, Ordering::Relaxed);
            }
            Err(e) if pending(&e) => {}
            Err(e) => return Err(format!("tcp send: {e}")),
        }
    }
    s.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    // The server answers its count once it has read everything.
    let patience = Instant::now() + Duration::from_secs(if stop.load(Ordering::Relaxed) { 2 } else { 60 });
    let mut answer = [0u8; 8];
    let mut got = 0;
    while got < 8 && Instant::now() < patience {
        match s.read(&mut answer[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if pending(&e) => {}
            Err(_) => break,
        }
    }
    let receiver = (got == 8).then(|| u64::from_be_bytes(answer));
    let tcp = TcpCounters::of(&s, sent);
    Ok(Done { sent: Some(sent), receiver, seconds: t0.elapsed().as_secs_f64(), tcp })
}

/// Asks the server's source for `req` and reads until it closes (or
/// `stop`, or the deadline plus a grace of 3 s).
fn receive(
    to: SocketAddr,
    req: SourceRequest,
    deadline: Option<Instant>,
    stop: &AtomicBool,
    f: &Flow,
) -> Result<Done, String> {
    let t0 = Instant::now();
    let mut s = connect(to)?;
    let mut hello = vec![b's'];
    hello.extend_from_slice(&req.encode());
    s.write_all(&hello).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0u64;
    // The stream's last bytes, where the server's counters end it.
    let mut tail: Vec<u8> = Vec::with_capacity(2 * tcp_info::TRAILER_MAX);
    let mut ended = false;
    loop {
        if stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| Instant::now() >= d + Duration::from_secs(3))
        {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => {
                got += n as u64;
                f.count.store(got, Ordering::Relaxed);
                let keep = &buf[n.saturating_sub(tcp_info::TRAILER_MAX)..n];
                if tail.len() + keep.len() > 2 * tcp_info::TRAILER_MAX {
                    tail.drain(..(tail.len() + keep.len() - tcp_info::TRAILER_MAX).min(tail.len()));
                }
                tail.extend_from_slice(keep);
            }
            Err(e) if pending(&e) => {}
            Err(e) => return Err(format!("tcp receive: {e}")),
        }
    }
    // The counters are not data: off the count (they came after the
    // deadline's snapshot in a timed run, so only the total changes).
    let tcp = ended.then(|| tcp_info::split_trailer(&tail)).flatten().map(|(c, len)| {
        got -= len as u64;
        f.count.store(got, Ordering::Relaxed);
        c
    });
    Ok(Done { sent: None, receiver: Some(got), seconds: t0.elapsed().as_secs_f64(), tcp })
}

pub(crate) fn run(
    cfg: &BulkConfig,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    let t0 = Instant::now();
    let p = u64::from(cfg.parallel);
    let omit_end = t0 + cfg.omit;
    let deadline = match cfg.amount {
        Amount::Time(t) => Some(omit_end + t),
        Amount::Bytes(_) => None,
    };
    let share = |i: u64| cfg.share(i);
    let dirs = cfg.direction.ways();
    let flows: Vec<(Flow, u64)> = dirs
        .iter()
        .flat_map(|&dir| (0..p).map(move |i| (dir, i)))
        .map(|(dir, i)| (Flow::new(dir), share(i)))
        .collect();
    let mut r = BulkResult::new(Transport::Tcp, cfg);
    let mut counted: Vec<Option<u64>> = vec![None; flows.len()];
    // Each flow's count when the omitted start ended (sending: bytes
    // written; receiving: bytes read).
    let mut base: Vec<u64> = vec![0; flows.len()];
    let mut base_taken = cfg.omit.is_zero();
    let results: Vec<Result<Done, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = flows
            .iter()
            .map(|(f, amount)| {
                let amount = *amount;
                sc.spawn(move || match f.dir {
                    Direction::Receive => {
                        let req = match cfg.amount {
                            Amount::Bytes(_) => {
                                SourceRequest { amount, timed: false, length: 0, counters: true }
                            }
                            Amount::Time(t) => SourceRequest {
                                amount: (cfg.omit + t).as_millis() as u64,
                                timed: true,
                                length: 0,
                                counters: true,
                            },
                        };
                        receive(cfg.to, req, deadline, stop, f)
                    }
                    _ => send(cfg.to, amount, deadline, cfg.length, stop, f),
                })
            })
            .collect();
        // Interval reports and the deadline's snapshot, from the counters.
        let mut last: Vec<u64> = vec![0; flows.len()];
        // Each flow's retransmitted segments at the last line.
        let mut last_retrans: Vec<u64> = vec![0; flows.len()];
        let (mut last_t, mut next) = (t0, cfg.interval.map(|i| t0 + i));
        // The deadline has passed and its last interval is reported.
        let mut ended = false;
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            // The omitted start ends now: its last interval line is cut
            // here (the next ones count), as iperf3 does.
            let omit_ends = !base_taken && now >= omit_end;
            if deadline.is_some_and(|d| now >= d) && counted.iter().all(Option::is_none) {
                for (k, (f, _)) in flows.iter().enumerate() {
                    counted[k] = Some(f.count.load(Ordering::Relaxed));
                }
            }
            // At the deadline, the interval since the last line is reported
            // too (a partial one when -t is not a multiple of -i).
            let ending = deadline.is_some_and(|d| now >= d) && !ended && now > last_t;
            if let (Some(t), Some(i)) = (next, cfg.interval)
                && (now >= t || omit_ends || ending)
                && !ended
            {
                let (start, end) = ((last_t - t0).as_secs_f64(), (now - t0).as_secs_f64());
                let secs = (end - start).max(1e-9);
                for dir in [Direction::Send, Direction::Receive] {
                    let mut parts = Vec::new();
                    for (k, (f, _)) in flows.iter().enumerate().filter(|(_, (f, _))| f.dir == dir) {
                        let c = f.count.load(Ordering::Relaxed);
                        let b = c - last[k];
                        last[k] = c;
                        let sending = dir == Direction::Send;
                        let info = f.info();
                        let retransmitted = info.map(|i| {
                            let segs = i.total_retrans.saturating_sub(last_retrans[k]);
                            last_retrans[k] = i.total_retrans;
                            segs * i.mss
                        });
                        parts.push(Interval {
                            stream: Some(k),
                            direction: dir,
                            start,
                            end,
                            sent_bytes: sending.then_some(b),
                            sent_bits_per_second: sending.then_some(b as f64 * 8.0 / secs),
                            receiver_bytes: (!sending).then_some(b),
                            receiver_bits_per_second: (!sending).then_some(b as f64 * 8.0 / secs),
                            retransmitted,
                            srtt_ms: info.map(|i| i.srtt_ms),
                            cwnd: info.map(|i| i.cwnd),
                            send_window: None,
                            pacing_bits_per_second: None,
                            omitted: !base_taken,
                        });
                    }
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
                last_t = now;
                // Counted intervals keep step with the end of the omitted
                // start, so the last one ends at the deadline.
                next = Some(if omit_ends { omit_end + i } else { t + i });
            }
            ended |= deadline.is_some_and(|d| now >= d);
            if omit_ends {
                base_taken = true;
                for (k, (f, _)) in flows.iter().enumerate() {
                    base[k] = f.count.load(Ordering::Relaxed);
                }
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a connection thread panicked".into())))
            .collect()
    });
    r.interrupted = stop.load(Ordering::Relaxed);
    if !base_taken {
        r.counted_from_start();
    }
    let secs_t = deadline.map(|d| (d - omit_end).as_secs_f64());
    // Ctrl-C during the omitted start counts from the start.
    let omit = if base_taken { cfg.omit.as_secs_f64() } else { 0.0 };
    for (k, ((f, amount), done)) in flows.iter().zip(results).enumerate() {
        let done = done?;
        let (bytes, seconds) = match f.dir {
            Direction::Receive => {
                let got = done.receiver.unwrap_or(0);
                if deadline.is_none() && !r.interrupted && got != *amount {
                    return Err(format!("-R: the server sent {got} of the {amount} bytes asked for"));
                }
                match (counted[k], secs_t) {
                    (Some(c), Some(t)) => (c.saturating_sub(base[k]), t),
                    _ => (got.saturating_sub(base[k]), (done.seconds - omit).max(0.0)),
                }
            }
            _ => {
                let sent = done.sent.unwrap_or(0);
                if deadline.is_none() && !r.interrupted && done.receiver != Some(sent) {
                    return Err(match done.receiver {
                        Some(n) => format!("tcp: the server counted {n} of {sent} bytes"),
                        None => "tcp: the server did not answer its count (is it `xpress serve`?)".into(),
                    });
                }
                if omit > 0.0
                    && let Some(t) = secs_t
                {
                    // After an omitted start, the bytes written from its end
                    // to the deadline over that time: the sender's rate, as
                    // iperf3's sender counts (in steady state the socket
                    // buffer holds as much at the deadline as at the omit's
                    // end). The server's total would leave out what the
                    // buffer held at the omit's end and add the drain time.
                    (sent.saturating_sub(base[k]), t)
                } else {
                    (done.receiver.unwrap_or(sent), done.seconds)
                }
            }
        };
        r.streams.push(StreamResult {
            stream: k,
            direction: f.dir,
            bytes,
            seconds,
            bits_per_second: bytes as f64 * 8.0 / seconds.max(1e-9),
            sent_bytes: done.sent,
            receiver_bytes: done.receiver,
            sha256: None,
            receiver_sha256: None,
            context: None,
            sender: None,
            tcp: done.tcp,
            quic: None,
        });
    }
    let primary = if cfg.direction == Direction::Receive { Direction::Receive } else { Direction::Send };
    let of = |dir: Direction| r.streams.iter().filter(move |s| s.direction == dir);
    let bytes: u64 = of(primary).map(|s| s.bytes).sum();
    let secs = of(primary).map(|s| s.seconds).fold(0.0, f64::max);
    r.sent_bytes = of(primary).filter_map(|s| s.sent_bytes).sum();
    r.tcp = of(primary).next().and_then(|s| s.tcp.clone());
    r.receiver_bytes = of(primary).map(|s| s.receiver_bytes).sum();
    if cfg.direction == Direction::Both {
        let b: u64 = of(Direction::Receive).map(|s| s.bytes).sum();
        let s = of(Direction::Receive).map(|s| s.seconds).fold(0.0, f64::max);
        r.receive_sum = Some(Sum { bytes: b, seconds: s, bits_per_second: b as f64 * 8.0 / s.max(1e-9) });
    }
    r.set_rate(bytes, secs);
    Ok(r)
}
