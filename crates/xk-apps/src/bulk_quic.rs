//! The QUIC side of `bulk` (quinn): `parallel` connections each way, each
//! with one stream, with the same conventions as XTP and TCP — `-n` or
//! `-t`, `-i` intervals, `-P`, `-R`, `--bidir`, Ctrl-C.
//!
//! Counting. Sending, a flow writes until its share of `-n` is written or
//! the `-t` deadline passes, finishes its stream and waits for the server's
//! count of what arrived; the flow's goodput is that count over the time
//! until it came back (the data quinn had buffered at the deadline is
//! delivered and counted, so a timed run ends a drain after its bound;
//! timed, quinn's send buffer follows its congestion window so that drain
//! is about a round trip; the answer is awaited 3 s at most). Receiving, a
//! flow counts what arrives until the source finishes or the deadline
//! passes, and then stops reading.
//!
//! Interval lines come from quinn's own connection statistics: RTT,
//! congestion window and lost bytes (quinn retransmits lost frames, so
//! lost bytes stand for retransmitted ones). quinn paces internally and
//! does not report its rate, so the pacing column stays empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::bulk::{
    Amount, BulkConfig, BulkResult, Direction, Interval, QuicCounters, StreamResult, Sum, sum_intervals,
};
use crate::feed::{SourceRequest, pattern};
use crate::quic::DISCARD;
use crate::transport::Transport;

/// How long a connection may take to set up (quinn's own limit is its 30 s
/// idle timeout).
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// How long a sender waits for the server's count after its last write.
const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// One flow's live counters, read by the interval reports.
#[derive(Default)]
struct Live {
    /// Sending: bytes written into the stream.
    written: AtomicU64,
    /// Receiving: bytes that arrived.
    received: AtomicU64,
}

/// What one flow counted in the end.
struct Done {
    /// Bytes the receiver got (sending: the server's count).
    bytes: u64,
    /// Sending: bytes written.
    written: Option<u64>,
    /// Seconds from the start to the count.
    seconds: f64,
}

async fn send_flow(
    conn: quinn::Connection,
    live: Arc<Live>,
    limit: u64,
    length: usize,
    t0: Instant,
    deadline: Option<Instant>,
) -> Result<Done, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| format!("quic: open stream: {e}"))?;
    send.write_all(&[DISCARD]).await.map_err(|e| format!("quic: {e}"))?;
    let data = pattern();
    let piece = length.min(data.len());
    let mut sent = 0u64;
    while sent < limit && deadline.is_none_or(|d| Instant::now() < d) {
        let n = (limit - sent).min(piece as u64) as usize;
        let start = (sent % data.len() as u64) as usize;
        let start = if start + n > data.len() { 0 } else { start };
        // Timed, quinn may buffer no more than a window beyond its window
        // (at least 256 KiB): with its default 32 MiB a slow path drained
        // for many seconds after the deadline (at 3 Mbit/s, 30 s); with
        // only a quarter window beyond, loopback lost three quarters of its
        // rate (quinn's acknowledgements lag more than XTP's).
        if deadline.is_some() {
            let cwnd = conn.stats().path.cwnd;
            conn.set_send_window(cwnd + cwnd.max(256 << 10));
        }
        // `write` is cancel-safe and says how much it took, so a write cut
        // off at the deadline is counted exactly.
        let write = send.write(&data[start..start + n]);
        let took = match deadline {
            Some(d) => match tokio::time::timeout_at(d, write).await {
                Ok(r) => r.map_err(|e| format!("quic: {e}"))?,
                Err(_) => break,
            },
            None => write.await.map_err(|e| format!("quic: {e}"))?,
        };
        sent += took as u64;
        live.written.store(sent, Ordering::Relaxed);
    }
    send.finish().map_err(|e| format!("quic: {e}"))?;
    let mut answer = [0u8; 8];
    let read = recv.read_exact(&mut answer);
    let read = match deadline {
        Some(_) => tokio::time::timeout(ANSWER_WAIT, read)
            .await
            .map_err(|_| "quic: the server's count did not come within 3 s of the deadline".to_string())?,
        None => read.await,
    };
    read.map_err(|e| format!("quic: the server's count: {e}"))?;
    let got = u64::from_be_bytes(answer);
    if deadline.is_none() && got != sent {
        return Err(format!("quic: the server counted {got} of the {sent} bytes sent"));
    }
    Ok(Done { bytes: got, written: Some(sent), seconds: t0.elapsed().as_secs_f64() })
}

async fn receive_flow(
    conn: quinn::Connection,
    live: Arc<Live>,
    req: SourceRequest,
    t0: Instant,
    deadline: Option<Instant>,
) -> Result<Done, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| format!("quic: open stream: {e}"))?;
    send.write_all(&req.encode()).await.map_err(|e| format!("quic: {e}"))?;
    send.finish().map_err(|e| format!("quic: {e}"))?;
    let mut got = 0u64;
    loop {
        let read = recv.read_chunk(1 << 20, true);
        let chunk = match deadline {
            Some(d) => match tokio::time::timeout_at(d, read).await {
                Ok(r) => r,
                Err(_) => {
                    let _ = recv.stop(0u32.into());
                    return Ok(Done { bytes: got, written: None, seconds: (d - t0).as_secs_f64() });
                }
            },
            None => read.await,
        };
        match chunk.map_err(|e| format!("quic: {e}"))? {
            Some(c) => {
                got += c.bytes.len() as u64;
                live.received.store(got, Ordering::Relaxed);
            }
            None => break,
        }
    }
    if !req.timed && got != req.amount {
        return Err(format!("-R: the server sent {got} of the {} bytes asked for", req.amount));
    }
    Ok(Done { bytes: got, written: None, seconds: t0.elapsed().as_secs_f64() })
}

/// One flow's interval from its counters `now` and `last` (written or
/// received, lost bytes); updates `last`.
fn interval(
    k: usize,
    dir: Direction,
    live: &Live,
    conn: &quinn::Connection,
    last: &mut (u64, u64),
    (start, end): (f64, f64),
) -> Interval {
    let secs = (end - start).max(1e-9);
    let st = conn.stats();
    let sending = dir == Direction::Send;
    let count =
        if sending { live.written.load(Ordering::Relaxed) } else { live.received.load(Ordering::Relaxed) };
    let b = count - last.0;
    let lost = st.path.lost_bytes - last.1;
    *last = (count, st.path.lost_bytes);
    Interval {
        stream: Some(k),
        direction: dir,
        start,
        end,
        sent_bytes: sending.then_some(b),
        sent_bits_per_second: sending.then_some(b as f64 * 8.0 / secs),
        receiver_bytes: (!sending).then_some(b),
        receiver_bits_per_second: (!sending).then_some(b as f64 * 8.0 / secs),
        retransmitted: sending.then_some(lost),
        srtt_ms: Some(st.path.rtt.as_secs_f64() * 1e3),
        cwnd: sending.then_some(st.path.cwnd),
        send_window: None,
        pacing_bits_per_second: None,
        omitted: false,
    }
}

pub(crate) fn run(
    cfg: &BulkConfig,
    stop: &AtomicBool,
    mut on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    let cert = cfg.quic_cert.as_ref().ok_or(
        "--transport quic needs --quic-cert FILE (the certificate `xpress serve --quic-cert FILE` wrote)",
    )?;
    let rt = crate::quic::runtime()?;
    // quinn binds its socket on the runtime it is entered in.
    let endpoint = {
        let _g = rt.enter();
        crate::quic::client(cfg.to, cert)?
    };
    let p = u64::from(cfg.parallel);
    let dirs = cfg.direction.ways();
    let share = |i: u64| cfg.share(i);
    let to = cfg.to;
    let length = cfg.length.unwrap_or(1 << 20);
    let mut r = BulkResult::new(Transport::Quic, cfg);
    let results = rt.block_on(async {
        let mut conns = Vec::new();
        for &dir in dirs {
            for _ in 0..p {
                let connecting =
                    endpoint.connect(to, "localhost").map_err(|e| format!("quic connect {to}: {e}"))?;
                let c = match tokio::time::timeout(CONNECT_WAIT, connecting).await {
                    Ok(c) => c.map_err(|e| format!("quic connect {to}: {e}"))?,
                    Err(_) => {
                        return Err(format!(
                            "no answer from {to} in {} s: is `xpress serve --quic-cert` running there? \
                             (--to is its `quic on` address)",
                            CONNECT_WAIT.as_secs()
                        ));
                    }
                };
                conns.push((dir, c));
            }
        }
        let t0 = Instant::now();
        let deadline = match cfg.amount {
            Amount::Time(t) => Some(t0 + t),
            Amount::Bytes(_) => None,
        };
        let mut flows = Vec::new();
        for (k, (dir, conn)) in conns.iter().enumerate() {
            let live = Arc::new(Live::default());
            let i = (k as u64) % p;
            let task = match dir {
                Direction::Receive => {
                    let req = match cfg.amount {
                        Amount::Bytes(_) => SourceRequest {
                            amount: share(i),
                            timed: false,
                            length: length as u32,
                            counters: false,
                        },
                        Amount::Time(t) => SourceRequest {
                            amount: t.as_millis() as u64,
                            timed: true,
                            length: length as u32,
                            counters: false,
                        },
                    };
                    tokio::spawn(receive_flow(conn.clone(), live.clone(), req, t0, deadline))
                }
                _ => tokio::spawn(send_flow(conn.clone(), live.clone(), share(i), length, t0, deadline)),
            };
            flows.push((*dir, conn.clone(), live, task, (0u64, 0u64)));
        }
        let mut next = cfg.interval.map(|i| t0 + i);
        let mut last_t = t0;
        let mut interrupted = false;
        while !flows.iter().all(|f| f.3.is_finished()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            let now = Instant::now();
            if let (Some(t), Some(i)) = (next, cfg.interval)
                && now >= t
                && deadline.is_none_or(|d| t <= d)
            {
                let span = ((last_t - t0).as_secs_f64(), (now - t0).as_secs_f64());
                for dir in [Direction::Send, Direction::Receive] {
                    let parts: Vec<Interval> = flows
                        .iter_mut()
                        .enumerate()
                        .filter(|(_, f)| f.0 == dir)
                        .map(|(k, f)| interval(k, dir, &f.2, &f.1, &mut f.4, span))
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
                    let s = sum_intervals(&parts, dir);
                    on_interval(&s);
                    r.intervals.push(s);
                }
                last_t = now;
                next = Some(t + i);
            }
        }
        let mut out = Vec::new();
        if interrupted {
            // Ctrl-C: what each flow had by now; the connections are closed.
            let secs = t0.elapsed().as_secs_f64();
            for (dir, conn, live, task, _) in flows {
                let stats = QuicCounters::from(&conn.stats());
                conn.close(0u32.into(), b"interrupted");
                task.abort();
                let (w, g) = (live.written.load(Ordering::Relaxed), live.received.load(Ordering::Relaxed));
                out.push((
                    dir,
                    Ok(Done {
                        bytes: if dir == Direction::Receive { g } else { w },
                        written: (dir != Direction::Receive).then_some(w),
                        seconds: secs,
                    }),
                    stats,
                ));
            }
        } else {
            for (dir, conn, _, task, _) in flows {
                let done = task.await.unwrap_or_else(|e| Err(format!("quic flow: {e}")));
                let stats = QuicCounters::from(&conn.stats());
                conn.close(0u32.into(), b"done");
                out.push((dir, done, stats));
            }
        }
        endpoint.wait_idle().await;
        Ok::<_, String>((out, interrupted))
    })?;
    let (results, interrupted) = results;
    r.interrupted = interrupted;
    for (k, (dir, done, stats)) in results.into_iter().enumerate() {
        let d = done?;
        r.streams.push(StreamResult {
            stream: k,
            direction: dir,
            bytes: d.bytes,
            seconds: d.seconds,
            bits_per_second: d.bytes as f64 * 8.0 / d.seconds.max(1e-9),
            sent_bytes: d.written,
            receiver_bytes: (!interrupted).then_some(d.bytes),
            sha256: None,
            receiver_sha256: None,
            context: None,
            sender: None,
            quic: Some(stats),
            tcp: None,
        });
    }
    r.quic = r.streams.first().and_then(|s| s.quic.clone());
    let primary = if cfg.direction == Direction::Receive { Direction::Receive } else { Direction::Send };
    let of = |dir: Direction| r.streams.iter().filter(move |s| s.direction == dir);
    let total = |dir: Direction| -> (u64, f64) {
        (of(dir).map(|s| s.bytes).sum(), of(dir).map(|s| s.seconds).fold(0.0, f64::max))
    };
    if cfg.direction == Direction::Both {
        let (b, secs) = total(Direction::Receive);
        r.receive_sum =
            Some(Sum { bytes: b, seconds: secs, bits_per_second: b as f64 * 8.0 / secs.max(1e-9) });
    }
    r.sent_bytes = of(primary).filter_map(|s| s.sent_bytes).sum();
    r.receiver_bytes = of(primary).map(|s| s.receiver_bytes).sum();
    let (bytes, secs) = total(primary);
    r.set_rate(bytes, secs);
    Ok(r)
}
