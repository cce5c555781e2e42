//! `xpress emulate`: a real-time UDP relay applying the link model.
//!
//! One UDP socket, bound to the listen address. Datagrams from the server
//! address go toward the client; datagrams from anyone else are from the
//! client (the latest sender is remembered) and go toward the server. Each
//! direction has its own [`Link`](xk_netemu::Link), seeded from one master seed.
//!
//! I/O is batched ([`crate::batch`]): up to 32 datagrams per `recvmmsg`, and
//! everything due at one instant leaves in one `sendmmsg` (GSO runs where
//! sizes allow). Datagrams are held as slices of a shared receive buffer, not
//! one allocation each.
//!
//! Timing ([`crate::pacer`]): the loop releases what is due, reads one batch
//! of arrivals, and when nothing is readable sleeps on a `timerfd` until
//! `spin` before the next release, then spins for the rest; the thread asks
//! for `SCHED_FIFO`. For every released datagram it records the release
//! error (the time the send returned minus the model's departure time).
//!
//! Validity: a run is valid when the p99 release error of each direction is
//! at most the configured limit ([`DEFAULT_MAX_P99_ERROR`], 200 µs, unless
//! the caller chose another) and the kernel dropped no datagram on the
//! relay's socket (`/proc/net/udp`); [`RelayReport::invalid_reasons`] says
//! which test failed, with the numbers.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use serde_json::json;
use xk_netemu::{Fate, LinkSpec, LinkStats, Path};
use xk_time::{Duration, Instant};
use xk_trace::Point;

use std::os::fd::AsFd;

use crate::batch::{BATCH, BatchSocket, MAX_DATAGRAM, Outgoing, TICK, socket_drops};
use crate::clock::Clock;
use crate::pacer::{self, LoopStats, Pacer, Pacing};
use crate::trace;

/// The release-error limit of a trustworthy run: p99 of each direction at
/// most 200 µs. At the E2 operating point (45 Mbit/s, 1,500-byte packets)
/// that is under one packet time (267 µs), so late releases neither reorder
/// nor visibly bunch packets; against 100 ms of delay it is 0.2 %.
pub const DEFAULT_MAX_P99_ERROR: Duration = Duration::from_micros(200);

/// A timer wake-up this late counts as a stall of the machine in the
/// invalid reasons (on this 2-core VM a real-time thread's wake-up is
/// 15–50 µs late normally; stalls of 10–100 ms come from outside the guest).
const STALL: Duration = Duration::from_millis(1);

/// Relay settings.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Where clients send.
    pub listen: SocketAddr,
    /// The server.
    pub server: SocketAddr,
    /// Client → server link.
    pub forward: LinkSpec,
    /// Server → client link.
    pub reverse: LinkSpec,
    /// Master seed.
    pub seed: u64,
    /// Stop after this long.
    pub duration: Duration,
    /// Spin this long before a release instead of sleeping (capped at
    /// [`pacer::MAX_SPIN`]; [`pacer::DEFAULT_SPIN`] is the measured choice).
    pub spin: Duration,
    /// p99 release error above which the run is marked invalid (see
    /// [`DEFAULT_MAX_P99_ERROR`]).
    pub max_p99_error: Duration,
    /// Set to stop the relay before `duration` (checked every loop turn, at
    /// least every 10 ms).
    pub stop: Option<Arc<AtomicBool>>,
}

/// Per-direction results.
#[derive(Clone, Debug)]
pub struct DirectionReport {
    /// Link counters.
    pub link: LinkStats,
    /// Release errors in nanoseconds, sorted.
    pub errors_ns: Vec<u64>,
    /// Datagrams the socket refused to send.
    pub send_errors: u64,
}

impl DirectionReport {
    /// The `q`-quantile of the release error (0 if nothing was released).
    pub fn error_quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(xk_stats::closest(&self.errors_ns, q).unwrap_or(0))
    }

    /// One line for a person, in the order a packet meets them: what
    /// arrived, what left, what the link took and why, how late releases
    /// were. Causes that took nothing are left out, as `tc -s` does.
    pub fn summary(&self) -> String {
        let l = &self.link;
        let mut line = format!("{} packets in, {} delivered", l.offered, l.delivered);
        for (n, what) in [
            (l.drop_loss, "lost"),
            (l.drop_queue, "queue-dropped"),
            (l.drop_mtu, "over the MTU"),
            (l.drop_blackout, "in blackouts"),
            (l.drop_collision, "collided"),
            (l.duplicated, "duplicated"),
            (l.corrupted, "corrupted"),
            (l.reordered, "reordered"),
            (self.send_errors, "send errors"),
        ] {
            if n > 0 {
                line.push_str(&format!(", {n} {what}"));
            }
        }
        let us = |q| self.error_quantile(q).as_secs_f64() * 1e6;
        line.push_str(&format!(
            "; release error p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
            us(0.5),
            us(0.99),
            us(1.0)
        ));
        line
    }
}

/// What a relay run did.
#[derive(Clone, Debug)]
pub struct RelayReport {
    /// Client → server.
    pub forward: DirectionReport,
    /// Server → client.
    pub reverse: DirectionReport,
    /// Whether the run can be trusted: the p99 release error of each
    /// direction within [`RelayReport::max_p99_error`] and no datagram
    /// dropped by the kernel. Reports of measurements taken through the
    /// emulator mark their rows with this.
    pub valid: bool,
    /// Why the run is not valid (empty when it is), one sentence per failed
    /// test with the measured value and the limit.
    pub invalid_reasons: Vec<String>,
    /// The p99 release-error limit applied.
    pub max_p99_error: Duration,
    /// Seed used.
    pub seed: u64,
    /// Datagrams the kernel dropped on the relay's socket during the run
    /// (receive buffer full); None if the counter could not be read.
    pub kernel_drops: Option<u64>,
    /// System calls: sends, receives.
    pub syscalls: (u64, u64),
    /// What the forwarding loop did: scheduling, wake-up lateness, spinning,
    /// read batches.
    pub timing: LoopStats,
}

impl RelayReport {
    /// A report with its verdict: valid when both directions' p99 release
    /// error is within `max_p99_error` and the kernel dropped nothing.
    pub(crate) fn judged(
        forward: DirectionReport,
        reverse: DirectionReport,
        seed: u64,
        kernel_drops: Option<u64>,
        max_p99_error: Duration,
        syscalls: (u64, u64),
        timing: LoopStats,
    ) -> RelayReport {
        let mut invalid_reasons = Vec::new();
        for (name, d) in [("forward", &forward), ("reverse", &reverse)] {
            let p99 = d.error_quantile(0.99);
            if p99 > max_p99_error {
                invalid_reasons.push(format!(
                    "{name} release error p99 {:.1} µs above the limit of {:.1} µs (max {:.1} µs)",
                    p99.as_secs_f64() * 1e6,
                    max_p99_error.as_secs_f64() * 1e6,
                    d.error_quantile(1.0).as_secs_f64() * 1e6
                ));
            }
        }
        if !invalid_reasons.is_empty() {
            // Say what the loop saw, so the reader can tell an overloaded or
            // stalled machine from a slow emulator.
            let (stalls, worst) = timing.stalls(STALL);
            if stalls > 0 {
                invalid_reasons.push(format!(
                    "the forwarding thread was run up to {:.1} ms after its timer ({stalls} wake-ups later than {} ms): \
                     the machine did not schedule it (overload, or the virtual CPU was descheduled)",
                    worst.as_secs_f64() * 1e3,
                    STALL.as_millis()
                ));
            }
            let (wake, found, hand, held) = timing.p99s_us();
            let limit_us = max_p99_error.as_secs_f64() * 1e6;
            if found > limit_us && wake <= limit_us {
                invalid_reasons.push(format!(
                    "the loop was busy, not asleep: releases were found due {found:.0} µs late at p99 while \
                     its wake-ups were {wake:.0} µs late; sends took up to {hand:.0} µs at p99 (the kernel's \
                     own work inside them, slower when the machine is contended)"
                ));
            }
            if held > 0.0 {
                invalid_reasons.push(format!(
                    "releases were held back up to {held:.0} µs at p99 to leave in one write with later ones \
                     (the batch span; --batch-span-us 0 holds nothing)"
                ));
            }
            if let Some(pacer::Scheduling::Normal(why)) = &timing.scheduling {
                invalid_reasons.push(format!("the forwarding thread ran at normal priority: {why}"));
            }
        }
        if let Some(n) = kernel_drops.filter(|&n| n > 0) {
            invalid_reasons.push(format!("the kernel dropped {n} packets on the emulator's input"));
        }
        RelayReport {
            forward,
            reverse,
            valid: invalid_reasons.is_empty(),
            invalid_reasons,
            max_p99_error,
            seed,
            kernel_drops,
            syscalls,
            timing,
        }
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let dir = |d: &DirectionReport| {
            json!({
                "offered": d.link.offered, "delivered": d.link.delivered,
                "drop_loss": d.link.drop_loss, "drop_queue": d.link.drop_queue, "drop_mtu": d.link.drop_mtu,
                "drop_blackout": d.link.drop_blackout, "duplicated": d.link.duplicated,
                "corrupted": d.link.corrupted, "reordered": d.link.reordered, "send_errors": d.send_errors,
                "drop_collision": d.link.drop_collision, "key_ups": d.link.key_ups,
                "release_error_p50_us": d.error_quantile(0.5).as_secs_f64() * 1e6,
                "release_error_p99_us": d.error_quantile(0.99).as_secs_f64() * 1e6,
                "release_error_max_us": d.error_quantile(1.0).as_secs_f64() * 1e6,
            })
        };
        json!({
            "seed": self.seed, "valid": self.valid, "invalid_reasons": self.invalid_reasons,
            "max_p99_release_error_us": self.max_p99_error.as_secs_f64() * 1e6,
            "kernel_drops": self.kernel_drops, "timing": self.timing.to_json(),
            "send_calls": self.syscalls.0, "recv_calls": self.syscalls.1,
            "forward": dir(&self.forward), "reverse": dir(&self.reverse),
        })
    }
}

struct Dir {
    errors: Vec<u64>,
    send_errors: u64,
}

/// Writes one `drop` line per frame a shared channel lost on the air (and
/// drains them either way); their `arrive` lines said `queued`.
pub(crate) fn log_air_drops(path: &mut Path<Bytes>, log: &mut Option<&mut dyn Write>) -> io::Result<()> {
    let drops = path.take_air_drops();
    if let Some(w) = log.as_mut() {
        for d in drops {
            let dir = if d.dir == 0 { "forward" } else { "reverse" };
            let line = json!({"t_ns": d.at.as_nanos(), "dir": dir, "event": "drop", "id": d.id,
                "reason": format!("{:?}", d.reason)});
            writeln!(w, "{line}")?;
        }
    }
    Ok(())
}

/// Runs the relay until `cfg.duration` has passed. `log`, if given, gets one
/// JSON line per datagram event.
pub fn run(cfg: &RelayConfig, mut log: Option<&mut dyn Write>) -> io::Result<RelayReport> {
    let sock = UdpSocket::bind(cfg.listen)?;
    run_on(sock, cfg, &mut log)
}

/// As [`run`], on a socket the caller bound (tests bind port 0), with the
/// default [`Pacing`]: `SCHED_FIFO` (granted to root; otherwise the run goes
/// on at normal priority and [`RelayReport::timing`] says why) and a
/// [`pacer::KeepWarm`] spinner.
pub fn run_on(
    sock: UdpSocket,
    cfg: &RelayConfig,
    log: &mut Option<&mut dyn Write>,
) -> io::Result<RelayReport> {
    run_on_with(sock, cfg, Pacing::default(), log)
}

/// As [`run_on`] with the given [`Pacing`] (to measure what each part is
/// worth, or to leave the machine's scheduling alone).
pub fn run_on_with(
    sock: UdpSocket,
    cfg: &RelayConfig,
    pacing: Pacing,
    log: &mut Option<&mut dyn Write>,
) -> io::Result<RelayReport> {
    run_on_captured(sock, cfg, pacing, log, None)
}

/// What a capture sees of each released datagram: the direction (0:
/// client → server), the release time, where it came from, where it went,
/// its bytes.
pub type Capture<'a> = &'a mut dyn FnMut(usize, Instant, SocketAddr, SocketAddr, &[u8]);

/// As [`run_on_with`], handing each released datagram to `capture` (what
/// crossed the emulated link; dropped datagrams are not seen): `xpress
/// emulate --pcap`.
pub fn run_on_captured(
    sock: UdpSocket,
    cfg: &RelayConfig,
    pacing: Pacing,
    log: &mut Option<&mut dyn Write>,
    mut capture: Option<Capture<'_>>,
) -> io::Result<RelayReport> {
    let clock = Clock::new();
    let start = clock.now();
    let mut path: Path<Bytes> =
        Path::new(&cfg.forward, &cfg.reverse, start, cfg.seed, ["forward", "reverse"])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let local = sock.local_addr()?;
    let mut pacer = Pacer::new(&[sock.as_fd()], cfg.spin)?;
    pacer.prepare(pacing);
    // GSO for releases; no GRO: the link model needs every datagram as sent
    // (recv_gro would split them again, but recvmmsg batches small ones).
    let mut sock = BatchSocket::with_offload(sock, true, false)?;
    sock.size_buffers(8 << 20);
    let drops_at_start = socket_drops(local);
    // Room for a while of traffic up front: growing a long vector is a copy
    // of all of it, in the middle of the loop.
    let mut fwd = Dir { errors: Vec::with_capacity(1 << 16), send_errors: 0 };
    let mut rev = Dir { errors: Vec::with_capacity(1 << 16), send_errors: 0 };
    let mut client: Option<SocketAddr> = None;
    let mut arena = vec![0u8; BATCH * MAX_DATAGRAM.min(4096)];
    let mut out: Vec<Outgoing> = Vec::with_capacity(BATCH);
    let mut intended: Vec<(Instant, u64, usize, bool, bool)> = Vec::with_capacity(BATCH);
    let mut arrivals: Vec<(SocketAddr, Bytes)> = Vec::with_capacity(BATCH);
    let end = start + cfg.duration;
    loop {
        let now = clock.now();
        if now >= end || cfg.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        pacer.turn(now);
        // Release everything due, one batch per direction at a time.
        for (dir, d, to, name) in
            [(0, &mut fwd, Some(cfg.server), "forward"), (1, &mut rev, client, "reverse")]
        {
            loop {
                out.clear();
                intended.clear();
                let mut used = 0;
                while out.len() < BATCH {
                    let Some(p) = path.poll(now, dir) else { break };
                    let Some(to) = to else { continue };
                    let len = p.packet.len();
                    if arena.len() < used + len {
                        arena.resize(used + len, 0);
                    }
                    arena[used..used + len].copy_from_slice(&p.packet);
                    out.push(Outgoing { dst: to, start: used, len });
                    intended.push((p.at, p.id, len, p.corrupted, p.duplicate));
                    used += len;
                }
                if out.is_empty() {
                    break;
                }
                let before = sock.counters.send_errors;
                sock.send(&arena, &out)?;
                d.send_errors += sock.counters.send_errors - before;
                // Stamped when the send returns, as the relay always has: the
                // kernel has then handed the datagrams to the receiving
                // socket (loopback delivers inside the call) — for a batch,
                // the time of its last datagram, an upper bound for all.
                let sent_at = clock.now();
                if let (Some(cap), Some(from)) =
                    (capture.as_mut(), if dir == 0 { client } else { Some(cfg.server) })
                {
                    for o in &out {
                        cap(dir, sent_at, from, o.dst, &arena[o.start..o.start + o.len]);
                    }
                }
                for &(at, id, len, corrupted, duplicate) in &intended {
                    trace::instant(Point::EmuRelease, 0, len as u64, dir as u32);
                    let err = sent_at.saturating_since(at);
                    pacer.stats.release(at, now, sent_at);
                    d.errors.push(u64::try_from(err.as_nanos()).unwrap_or(u64::MAX));
                    if let Some(w) = log.as_mut() {
                        let line = json!({"t_ns": sent_at.as_nanos(), "dir": name, "event": "release", "id": id,
                            "len": len, "intended_ns": at.as_nanos(), "corrupted": corrupted, "duplicate": duplicate});
                        writeln!(w, "{line}")?;
                    }
                }
                if out.len() < BATCH {
                    break;
                }
            }
        }
        log_air_drops(&mut path, log)?;
        // Take one batch of what is readable (never blocking); after it the
        // loop looks at the release queue again before reading more, so a
        // burst of arrivals cannot hold up a release that falls due.
        arrivals.clear();
        let mut take = |from: SocketAddr, data: Bytes| arrivals.push((from, data));
        let got = sock.recv_many(false, &mut take)?;
        pacer.stats.read_batch(got);
        let now = clock.now();
        for (from, data) in arrivals.drain(..) {
            let (dir, name) = if from == cfg.server {
                (1, "reverse")
            } else {
                client = Some(from);
                (0, "forward")
            };
            let n = data.len();
            trace::instant(Point::EmuArrive, 0, n as u64, dir as u32);
            let out = path.send(now, dir, data);
            if let Some(w) = log.as_mut() {
                let fate = match out.fate {
                    Fate::Scheduled(at) => json!({"scheduled_ns": at.as_nanos()}),
                    Fate::Dropped(r) => json!({"dropped": format!("{r:?}")}),
                    Fate::Queued => json!({"queued": true}),
                };
                writeln!(
                    w,
                    "{}",
                    json!({"t_ns": now.as_nanos(), "dir": name, "event": "arrive", "len": n, "fate": fate})
                )?;
            }
        }
        if got > 0 {
            continue; // more may be waiting; releases first
        }
        // Nothing readable: sleep until the next release (at most TICK, so
        // the stop flag is seen) or the next arrival.
        let next =
            [path.next_event(), Some(end), Some(now + TICK)].into_iter().flatten().min().unwrap_or(end);
        pacer.wait_until(&clock, next)?;
    }
    pacer.stats.finish(&clock, start);
    let finish = |d: Dir, dir: usize| {
        let mut errors_ns = d.errors;
        errors_ns.sort_unstable();
        DirectionReport { link: path.stats(dir), errors_ns, send_errors: d.send_errors }
    };
    let forward = finish(fwd, 0);
    let reverse = finish(rev, 1);
    let kernel_drops = match (drops_at_start, socket_drops(local)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let timing = pacer.stats;
    Ok(RelayReport::judged(
        forward,
        reverse,
        cfg.seed,
        kernel_drops,
        cfg.max_p99_error,
        (sock.counters.send_calls, sock.counters.recv_calls),
        timing,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(errors_us: &[u64]) -> DirectionReport {
        let mut errors_ns: Vec<u64> = errors_us.iter().map(|u| u * 1000).collect();
        errors_ns.sort_unstable();
        DirectionReport { link: LinkStats::default(), errors_ns, send_errors: 0 }
    }

    #[test]
    fn verdict_names_each_failed_test_with_its_numbers() {
        let ok: Vec<u64> = vec![10; 1000];
        let r = RelayReport::judged(
            dir(&ok),
            dir(&ok),
            1,
            Some(0),
            DEFAULT_MAX_P99_ERROR,
            (0, 0),
            LoopStats::default(),
        );
        assert!(r.valid && r.invalid_reasons.is_empty());
        // 2 % of the reverse releases 5 ms late: p99 is 5 ms.
        let mut bad = vec![10u64; 980];
        bad.extend([5000; 20]);
        let timing = LoopStats {
            scheduling: Some(pacer::Scheduling::Normal("not asked".into())),
            wake_late_ns: vec![1_000, 4_900_000],
            ..LoopStats::default()
        };
        let r = RelayReport::judged(dir(&ok), dir(&bad), 1, Some(3), DEFAULT_MAX_P99_ERROR, (0, 0), timing);
        assert!(!r.valid);
        let text = r.invalid_reasons.join(" | ");
        assert!(text.contains("reverse release error p99 5000.0 µs above the limit of 200.0 µs"), "{text}");
        assert!(!text.contains("forward release"), "{text}");
        assert!(text.contains("4.9 ms after its timer (1 wake-ups later than 1 ms"), "{text}");
        assert!(text.contains("normal priority: not asked"), "{text}");
        assert!(text.contains("dropped 3 packets"), "{text}");
        let j = r.to_json();
        assert_eq!(j["valid"], false);
        assert_eq!(j["max_p99_release_error_us"], 200.0);
        assert_eq!(j["invalid_reasons"].as_array().unwrap().len(), 4);
        assert!(j["timing"]["wake_late_max_us"].as_f64().unwrap() > 4000.0);
    }
}
