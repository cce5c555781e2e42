//! `xpress emulate`: a real-time UDP relay applying the link model.
//!
//! One UDP socket, bound to the listen address. Datagrams from the server
//! address go toward the client; datagrams from anyone else are from the
//! client (the latest sender is remembered) and go toward the server. Each
//! direction has its own [`Link`], seeded from one master seed.
//!
//! I/O is batched ([`crate::batch`]): up to 32 datagrams per `recvmmsg`, and
//! everything due at one instant leaves in one `sendmmsg` (GSO runs where
//! sizes allow). Datagrams are held as slices of a shared receive buffer, not
//! one allocation each.
//!
//! Timing: the loop sleeps in the kernel until shortly before the next
//! release (exactly, with `ppoll`, when it is near; at most 10 ms at a time,
//! so the stop flag and the end are seen) and spins for the last `spin`
//! microseconds, then sends. For every released datagram it records the
//! release error (actual minus intended send time); the report gives
//! p50/p99/max and the kernel's count of datagrams dropped on the relay's
//! socket (`/proc/net/udp`), and marks the run invalid when p99 exceeds the
//! configured limit or the kernel dropped anything.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use serde_json::json;
use xk_netemu::{Fate, LinkSpec, LinkStats, Path};
use xk_time::{Duration, Instant};

use crate::batch::{BATCH, BatchSocket, MAX_DATAGRAM, Outgoing, TICK, socket_drops};
use crate::clock::Clock;

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
    /// Spin this long before a release instead of sleeping.
    pub spin: Duration,
    /// p99 release error above which the run is marked invalid.
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
        if self.errors_ns.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.errors_ns.len() - 1) as f64 * q).round() as usize;
        Duration::from_nanos(self.errors_ns[i])
    }
}

/// What a relay run did.
#[derive(Clone, Debug)]
pub struct RelayReport {
    /// Client → server.
    pub forward: DirectionReport,
    /// Server → client.
    pub reverse: DirectionReport,
    /// Whether release timing stayed within the limit and the kernel
    /// dropped nothing.
    pub valid: bool,
    /// Seed used.
    pub seed: u64,
    /// Datagrams the kernel dropped on the relay's socket during the run
    /// (receive buffer full); None if the counter could not be read.
    pub kernel_drops: Option<u64>,
    /// System calls: sends, receives.
    pub syscalls: (u64, u64),
}

impl RelayReport {
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
            "seed": self.seed, "valid": self.valid,
            "kernel_drops": self.kernel_drops,
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

/// As [`run`], on a socket the caller bound (tests bind port 0).
pub fn run_on(
    sock: UdpSocket,
    cfg: &RelayConfig,
    log: &mut Option<&mut dyn Write>,
) -> io::Result<RelayReport> {
    let clock = Clock::new();
    let start = clock.now();
    let mut path: Path<Bytes> =
        Path::new(&cfg.forward, &cfg.reverse, start, cfg.seed, ["forward", "reverse"])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let local = sock.local_addr()?;
    // GSO for releases; no GRO: the link model needs every datagram as sent
    // (recv_gro would split them again, but recvmmsg batches small ones).
    let mut sock = BatchSocket::with_offload(sock, true, false)?;
    sock.size_buffers(8 << 20);
    let drops_at_start = socket_drops(local);
    let mut fwd = Dir { errors: Vec::new(), send_errors: 0 };
    let mut rev = Dir { errors: Vec::new(), send_errors: 0 };
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
                let sent_at = clock.now();
                for &(at, id, len, corrupted, duplicate) in &intended {
                    let err = sent_at.saturating_since(at);
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
        // Wait for input until the next release (minus the spin margin).
        let next = path.next_event().map_or(end, |t| t.min(end));
        let now = clock.now();
        let wait = next.saturating_since(now);
        let timeout = if wait > cfg.spin { wait - cfg.spin } else { Duration::ZERO };
        arrivals.clear();
        let mut take = |from: SocketAddr, data: Bytes| arrivals.push((from, data));
        if timeout.is_zero() {
            sock.recv_many(false, &mut take)?;
        } else if timeout >= TICK + Duration::from_millis(5) {
            sock.recv_many(true, &mut take)?; // wakes within TICK
        } else if sock.wait(Some(timeout))? {
            sock.recv_many(false, &mut take)?;
        }
        let now = clock.now();
        for (from, data) in arrivals.drain(..) {
            let (dir, name) = if from == cfg.server {
                (1, "reverse")
            } else {
                client = Some(from);
                (0, "forward")
            };
            let n = data.len();
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
    }
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
    let valid = forward.error_quantile(0.99) <= cfg.max_p99_error
        && reverse.error_quantile(0.99) <= cfg.max_p99_error
        && kernel_drops.unwrap_or(0) == 0;
    Ok(RelayReport {
        forward,
        reverse,
        valid,
        seed: cfg.seed,
        kernel_drops,
        syscalls: (sock.counters.send_calls, sock.counters.recv_calls),
    })
}
