//! `xpress emulate`: a real-time UDP relay applying the link model.
//!
//! One UDP socket, bound to the listen address. Datagrams from the server
//! address go toward the client; datagrams from anyone else are from the
//! client (the latest sender is remembered) and go toward the server. Each
//! direction has its own [`Link`], seeded from one master seed.
//!
//! Timing: the loop sleeps in `recv` until shortly before the next release and
//! spins for the last `spin` microseconds, then sends. For every released
//! datagram it records the release error (actual minus intended send time);
//! the report gives p50/p99/max and marks the run invalid when p99 exceeds the
//! configured limit. Kernel drops are not visible through std sockets; the
//! report says so rather than printing zeros.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use serde_json::json;
use xk_netemu::{Delivery, Fate, Link, LinkSpec, LinkStats};
use xk_time::Duration;

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
    /// Whether release timing stayed within the limit.
    pub valid: bool,
    /// Seed used.
    pub seed: u64,
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
                "release_error_p50_us": d.error_quantile(0.5).as_secs_f64() * 1e6,
                "release_error_p99_us": d.error_quantile(0.99).as_secs_f64() * 1e6,
                "release_error_max_us": d.error_quantile(1.0).as_secs_f64() * 1e6,
            })
        };
        json!({
            "seed": self.seed, "valid": self.valid,
            "kernel_drops": "not visible through portable sockets (not measured)",
            "forward": dir(&self.forward), "reverse": dir(&self.reverse),
        })
    }
}

struct Dir {
    link: Link<Vec<u8>>,
    errors: Vec<u64>,
    send_errors: u64,
    ready: VecDeque<Delivery<Vec<u8>>>,
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
    let mk = |spec: &LinkSpec, label: &str| {
        Link::new(spec.params.clone(), spec.changes.clone(), start, cfg.seed, label)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    };
    let mut fwd = Dir {
        link: mk(&cfg.forward, "forward")?,
        errors: Vec::new(),
        send_errors: 0,
        ready: VecDeque::new(),
    };
    let mut rev = Dir {
        link: mk(&cfg.reverse, "reverse")?,
        errors: Vec::new(),
        send_errors: 0,
        ready: VecDeque::new(),
    };
    let mut client: Option<SocketAddr> = None;
    let mut buf = vec![0u8; 65_536];
    let end = start + cfg.duration;
    loop {
        let now = clock.now();
        if now >= end || cfg.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        // Release everything due.
        for (d, to, name) in [(&mut fwd, Some(cfg.server), "forward"), (&mut rev, client, "reverse")] {
            while let Some(p) = d.link.poll(now) {
                d.ready.push_back(p);
            }
            while let Some(p) = d.ready.pop_front() {
                let Some(to) = to else { continue };
                let sent_at = clock.now();
                if sock.send_to(&p.packet, to).is_err() {
                    d.send_errors += 1;
                }
                let err = sent_at.saturating_since(p.at);
                d.errors.push(u64::try_from(err.as_nanos()).unwrap_or(u64::MAX));
                if let Some(w) = log.as_mut() {
                    let line = json!({"t_ns": sent_at.as_nanos(), "dir": name, "event": "release", "id": p.id,
                        "len": p.packet.len(), "intended_ns": p.at.as_nanos(), "corrupted": p.corrupted, "duplicate": p.duplicate});
                    writeln!(w, "{line}")?;
                }
            }
        }
        // Wait for input until the next release (minus the spin margin).
        let next = [fwd.link.next_arrival(), rev.link.next_arrival(), Some(end)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
        let now = clock.now();
        let wait = next.saturating_since(now);
        let timeout = if wait > cfg.spin { wait - cfg.spin } else { Duration::ZERO };
        if timeout.is_zero() {
            sock.set_nonblocking(true)?;
        } else {
            sock.set_nonblocking(false)?;
            sock.set_read_timeout(Some(
                StdDuration::from_nanos(timeout.as_nanos() as u64).max(StdDuration::from_micros(1)),
            ))?;
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let now = clock.now();
                let (d, name) = if from == cfg.server {
                    (&mut rev, "reverse")
                } else {
                    client = Some(from);
                    (&mut fwd, "forward")
                };
                let out = d.link.send(now, buf[..n].to_vec());
                if let Some(w) = log.as_mut() {
                    let fate = match out.fate {
                        Fate::Scheduled(at) => json!({"scheduled_ns": at.as_nanos()}),
                        Fate::Dropped(r) => json!({"dropped": format!("{r:?}")}),
                    };
                    writeln!(
                        w,
                        "{}",
                        json!({"t_ns": now.as_nanos(), "dir": name, "event": "arrive", "len": n, "fate": fate})
                    )?;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {} // ICMP from a closed port
            Err(e) => return Err(e),
        }
    }
    let finish = |d: Dir| {
        let mut errors_ns = d.errors;
        errors_ns.sort_unstable();
        DirectionReport { link: d.link.stats(), errors_ns, send_errors: d.send_errors }
    };
    let forward = finish(fwd);
    let reverse = finish(rev);
    let valid = forward.error_quantile(0.99) <= cfg.max_p99_error
        && reverse.error_quantile(0.99) <= cfg.max_p99_error;
    Ok(RelayReport { forward, reverse, valid, seed: cfg.seed })
}
