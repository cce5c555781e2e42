//! A churn of short XTP contexts against one server: connect, write 1 KB,
//! close, wait for the server's 8-byte count and its close (the discard
//! service of `xpress serve`). Several client sockets, one thread each,
//! many contexts in flight on each.
//!
//! Each socket opens at most `per_socket_rate` contexts per second, and
//! keeps at most 1,000 on the server (in flight plus closed in the last
//! 2.5 s): the server keeps a closed context 2 s (its linger, as the END
//! receiver) and allows one address 1,024 contexts
//! (`max_contexts_per_peer`, G20), so one address sustains at most 512 per
//! second; beyond, the server refuses with DIAG "no resource" (counted as
//! `refused_peer_limit`).
//!
//! The clients use a short retry schedule (`max_retries` 2): they send the
//! END, and an END sender lingers its peer's whole retry span (G16), which
//! at the default 8 retries would hold ~100 s of closed contexts in the
//! client. The server keeps its defaults.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use xk_driver::driver::UdpDriver;
use xtp_proto::{CloseReason, ContextConfig, EndpointConfig, Event};

/// XTP port of the server's discard service (answers the count, closes).
const DISCARD_PORT: u16 = 9;

/// Contexts one socket keeps on the server at most: in flight plus those
/// closed within the server's linger (2 s, with 0.5 s to spare) — under
/// the 1,024 per peer of G20 even when a thread that fell behind catches
/// up in a burst.
const PEER_BUDGET: usize = 1_000;
const SERVER_LINGER: Duration = Duration::from_millis(2_500);

/// What to run.
#[derive(Clone, Debug)]
pub struct ChurnConfig {
    /// The server (`xpress serve`).
    pub server: SocketAddr,
    /// Contexts in all.
    pub total: u64,
    /// Client sockets (threads).
    pub sockets: u32,
    /// Contexts in flight per socket at most.
    pub in_flight: u32,
    /// Contexts opened per second per socket at most.
    pub per_socket_rate: f64,
    /// Bytes each context writes.
    pub bytes: usize,
    /// Wall-clock bound of the whole churn.
    pub limit: Duration,
}

/// Progress, shared with the caller while the churn runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Contexts opened.
    pub opened: AtomicU64,
    /// Contexts closed gracefully with the server's count.
    pub completed: AtomicU64,
    /// Contexts that ended otherwise.
    pub failed: AtomicU64,
}

/// The outcome.
#[derive(Clone, Debug, Default)]
pub struct ChurnResult {
    /// Contexts opened.
    pub opened: u64,
    /// Closed gracefully.
    pub completed: u64,
    /// Ended otherwise, with the first few reasons.
    pub failed: u64,
    /// Some of the failures' reasons.
    pub reasons: Vec<String>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether the time limit (or a stop) ended it early.
    pub cut_short: bool,
}

/// Runs the churn; `stop` ends it early. `progress` is updated as it goes.
pub fn run(cfg: &ChurnConfig, stop: &AtomicBool, progress: &Arc<Progress>) -> Result<ChurnResult, String> {
    let start = Instant::now();
    let deadline = start + cfg.limit;
    let per = cfg.total.div_ceil(u64::from(cfg.sockets.max(1)));
    let results: Vec<Result<(Vec<String>, bool), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.sockets.max(1))
            .map(|i| {
                let n = per.min(cfg.total.saturating_sub(per * u64::from(i)));
                s.spawn(move || one_socket(cfg, n, u64::from(i), deadline, stop, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("churn thread panicked".into())))
            .collect()
    });
    let mut out = ChurnResult {
        opened: progress.opened.load(Ordering::Relaxed),
        completed: progress.completed.load(Ordering::Relaxed),
        failed: progress.failed.load(Ordering::Relaxed),
        seconds: start.elapsed().as_secs_f64(),
        ..ChurnResult::default()
    };
    for r in results {
        let (reasons, cut) = r?;
        out.cut_short |= cut;
        for x in reasons {
            if out.reasons.len() < 5 && !out.reasons.contains(&x) {
                out.reasons.push(x);
            }
        }
    }
    Ok(out)
}

fn one_socket(
    cfg: &ChurnConfig,
    total: u64,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<(Vec<String>, bool), String> {
    let ecfg = EndpointConfig { max_retries: 2, ..EndpointConfig::default() };
    let mut d = UdpDriver::bind("127.0.0.1:0", ecfg, 0xc4u64 << 32 | seed)
        .map_err(|e| format!("churn client socket: {e}"))?;
    let payload = Bytes::from(vec![0x42u8; cfg.bytes]);
    let (mut opened, mut ended, mut in_flight) = (0u64, 0u64, 0u32);
    let mut reasons = Vec::new();
    let mut recent_closes: std::collections::VecDeque<Instant> = std::collections::VecDeque::new();
    let start = Instant::now();
    while ended < total {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Ok((reasons, true));
        }
        let allowed = (start.elapsed().as_secs_f64() * cfg.per_socket_rate) as u64 + 1;
        let now = d.now();
        while recent_closes.front().is_some_and(|t| t.elapsed() > SERVER_LINGER) {
            recent_closes.pop_front();
        }
        while opened < total
            && opened < allowed
            && in_flight < cfg.in_flight
            && in_flight as usize + recent_closes.len() < PEER_BUDGET
        {
            let ep = d.endpoint();
            let ctx = ep
                .connect(now, cfg.server, DISCARD_PORT, ContextConfig::stream())
                .map_err(|e| e.to_string())?;
            // A fresh context's buffer holds 1 KB; then its FIRST carries
            // the data and the close.
            let _ = ep.write(now, ctx, payload.clone(), false, None);
            ep.close(now, ctx);
            opened += 1;
            in_flight += 1;
            progress.opened.fetch_add(1, Ordering::Relaxed);
        }
        d.turn(xk_time::Duration::from_millis(2)).map_err(|e| format!("churn client: {e}"))?;
        let now = d.now();
        let ep = d.endpoint();
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Readable { ctx } => while ep.read(now, ctx).is_some() {},
                Event::Closed { reason, .. } => {
                    ended += 1;
                    recent_closes.push_back(Instant::now());
                    in_flight = in_flight.saturating_sub(1);
                    if reason == CloseReason::Graceful {
                        progress.completed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        progress.failed.fetch_add(1, Ordering::Relaxed);
                        if reasons.len() < 5 {
                            reasons.push(reason_text(&reason));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    // Our END leaves with the next flush.
    d.flush().map_err(|e| format!("churn client: {e}"))?;
    Ok((reasons, false))
}

fn reason_text(r: &CloseReason) -> String {
    format!("{r:?}")
}
