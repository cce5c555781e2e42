//! Driver 3 of the link model: two network namespaces joined through TUN
//! devices, this process forwarding IP packets between them through one
//! [`Link`] per direction — the Mahimahi approach. Any program (kernel TCP,
//! iperf3, our own tools) runs in the namespaces under exactly the emulated
//! conditions.
//!
//! Layout: namespace A holds TUN device `<prefix>a` with 10.200.0.1, peer
//! 10.200.0.2; namespace B the mirror image. Both devices are created here,
//! moved into their namespaces and configured with `ip`; the process keeps
//! their file descriptors, so a packet A sends to 10.200.0.2 is read here,
//! delayed/limited/dropped by the forward link, and written into B.
//!
//! The run reports its own release error (p50/p99 of actual minus intended
//! send time) and the packets the kernel dropped on the TUN devices, and is
//! marked invalid past the configured p99 limit or with any drop; an optional
//! per-packet JSON-lines log records every arrival and release.
//!
//! Needs root (namespaces, TUN); [`Netns::create`] refuses otherwise, saying
//! why. Names carry the process id, so runs never collide; [`Netns`] deletes
//! both namespaces (and with them the devices) when dropped — on success, on
//! error, and (through the caller's stop flag) on Ctrl-C.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use bytes::{Bytes, BytesMut};
use xk_netemu::{Fate, LinkSpec, Path};
use xk_time::Duration;

use crate::clock::Clock;
use crate::relay::{DirectionReport, RelayReport};

/// Address of namespace A's end.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// Address of namespace B's end.
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);

/// Runs `ip` with `args`; the error carries what `ip` said.
fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run `ip` (iproute2): {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Two namespaces and the TUN devices between them. Dropping it tears
/// everything down.
pub struct Netns {
    /// Namespace names (A, B).
    pub names: (String, String),
    tun: (Arc<tun::Device>, Arc<tun::Device>),
    /// TUN device names (A, B).
    devs: (String, String),
    created: Vec<String>,
}

/// How a forwarding run is judged and logged.
pub struct ForwardOptions<'a> {
    /// Spin this long before a release instead of sleeping.
    pub spin: Duration,
    /// p99 release error above which the run is marked invalid.
    pub max_p99_error: Duration,
    /// One JSON line per packet event (arrive / release), if given.
    pub log: Option<&'a mut dyn Write>,
}

impl Netns {
    /// Creates namespaces `<prefix><pid>a` / `…b` and their TUN link with
    /// a 1,500-byte MTU.
    pub fn create(prefix: &str) -> io::Result<Netns> {
        Netns::create_with_mtu(prefix, 1500)
    }

    /// As [`Netns::create`], with the TUN devices' MTU set to `mtu` (the
    /// emulated link's, so the kernel sizes its packets to fit it).
    pub fn create_with_mtu(prefix: &str, mtu: u16) -> io::Result<Netns> {
        if mtu < 68 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("mtu {mtu}: below IPv4's minimum of 68 bytes, the kernel cannot use it"),
            ));
        }
        if !is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "xpress netns needs root: creating network namespaces and TUN devices requires \
                 CAP_SYS_ADMIN and CAP_NET_ADMIN (run it as root, or use `xpress emulate`, the UDP relay, \
                 which needs no privileges)",
            ));
        }
        let base = format!("{prefix}{}", std::process::id());
        let names = (format!("{base}a"), format!("{base}b"));
        let mut created = Vec::new();
        // Build into a half-made value whose Drop cleans up on any error.
        let mut guard = Partial { created: &mut created };
        let devs = (format!("{base}ta"), format!("{base}tb"));
        let a = make_end(&names.0, &devs.0, (ADDR_A, ADDR_B), mtu, &mut guard)?;
        let b = make_end(&names.1, &devs.1, (ADDR_B, ADDR_A), mtu, &mut guard)?;
        std::mem::forget(guard);
        Ok(Netns { names, tun: (Arc::new(a), Arc::new(b)), devs, created })
    }

    /// Packets the kernel dropped on the two TUN devices so far (receive and
    /// transmit queues, from `ip -s link`); None if they cannot be read.
    pub fn tun_drops(&self) -> Option<u64> {
        let one = |ns: &str, dev: &str| -> Option<u64> {
            let out = Command::new("ip").args(["-n", ns, "-j", "-s", "link", "show", dev]).output().ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let s = &v[0]["stats64"];
            Some(s["rx"]["dropped"].as_u64()? + s["tx"]["dropped"].as_u64()?)
        };
        Some(one(&self.names.0, &self.devs.0)? + one(&self.names.1, &self.devs.1)?)
    }

    /// A command that runs `sh -c script` inside namespace A (`false`) or B
    /// (`true`), with `XPRESS_PEER` set to the other end's address.
    pub fn command(&self, in_b: bool, script: &str) -> Command {
        let (ns, peer) = if in_b { (&self.names.1, ADDR_A) } else { (&self.names.0, ADDR_B) };
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "sh", "-c", script]).env("XPRESS_PEER", peer.to_string());
        c
    }

    /// Forwards packets between the namespaces until `stop` is set or
    /// `duration` passes. `forward` applies A → B, `reverse` B → A.
    pub fn forward(
        &self,
        forward: &LinkSpec,
        reverse: &LinkSpec,
        seed: u64,
        duration: Duration,
        opts: ForwardOptions<'_>,
        stop: &Arc<AtomicBool>,
    ) -> io::Result<RelayReport> {
        let ForwardOptions { spin, max_p99_error, mut log } = opts;
        let drops_at_start = self.tun_drops();
        let clock = Clock::new();
        let start = clock.now();
        let mut path: Path<Bytes> = Path::new(forward, reverse, start, seed, DIRS)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut errors: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let mut send_errors = [0u64; 2];
        let (tx, rx) = mpsc::channel::<(usize, Bytes)>();
        let readers: Vec<_> = [(0usize, self.tun.0.clone()), (1, self.tun.1.clone())]
            .into_iter()
            .map(|(dir, dev)| {
                let (tx, stop) = (tx.clone(), stop.clone());
                std::thread::spawn(move || read_loop(dir, &dev, &tx, &stop))
            })
            .collect();
        drop(tx);
        let outs = [self.tun.1.clone(), self.tun.0.clone()]; // A→B writes into B
        let end = start + duration;
        let mut last = start;
        while !stop.load(Ordering::Relaxed) {
            let now = clock.now();
            if now >= end {
                break;
            }
            for d in 0..2 {
                while let Some(p) = path.poll(now, d) {
                    let sent_at = clock.now();
                    if outs[d].send(&p.packet).is_err() {
                        send_errors[d] += 1;
                    }
                    errors[d]
                        .push(u64::try_from(sent_at.saturating_since(p.at).as_nanos()).unwrap_or(u64::MAX));
                    if let Some(w) = log.as_mut() {
                        let line = serde_json::json!({"t_ns": sent_at.as_nanos(), "dir": DIRS[d], "event": "release",
                            "id": p.id, "len": p.packet.len(), "intended_ns": p.at.as_nanos(),
                            "corrupted": p.corrupted, "duplicate": p.duplicate});
                        writeln!(w, "{line}")?;
                    }
                }
            }
            crate::relay::log_air_drops(&mut path, &mut log)?;
            let next = [path.next_event(), Some(end), Some(now + TICK_MAX)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            let wait = next.saturating_since(clock.now());
            let got = if wait > spin {
                let w = wait - spin;
                rx.recv_timeout(std::time::Duration::from_nanos(w.as_nanos() as u64)).ok()
            } else {
                rx.try_recv().ok()
            };
            let mut take = |(dir, data): (usize, Bytes)| -> io::Result<()> {
                // Arrivals from two threads: keep the link's clock monotonic.
                let t = clock.now().max(last);
                last = t;
                let n = data.len();
                let out = path.send(t, dir, data);
                if let Some(w) = log.as_mut() {
                    let fate = match out.fate {
                        Fate::Scheduled(at) => serde_json::json!({"scheduled_ns": at.as_nanos()}),
                        Fate::Dropped(r) => serde_json::json!({"dropped": format!("{r:?}")}),
                        Fate::Queued => serde_json::json!({"queued": true}),
                    };
                    let line = serde_json::json!({"t_ns": t.as_nanos(), "dir": DIRS[dir], "event": "arrive",
                        "len": n, "fate": fate});
                    writeln!(w, "{line}")?;
                }
                Ok(())
            };
            if let Some(a) = got {
                take(a)?;
                while let Ok(a) = rx.try_recv() {
                    take(a)?;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            let _ = r.join();
        }
        let mut report = |d: usize| {
            let mut errors_ns = std::mem::take(&mut errors[d]);
            errors_ns.sort_unstable();
            DirectionReport { link: path.stats(d), errors_ns, send_errors: send_errors[d] }
        };
        let (fw, rv) = (report(0), report(1));
        let kernel_drops = match (drops_at_start, self.tun_drops()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let valid = fw.error_quantile(0.99) <= max_p99_error
            && rv.error_quantile(0.99) <= max_p99_error
            && kernel_drops.unwrap_or(0) == 0;
        Ok(RelayReport { forward: fw, reverse: rv, valid, seed, kernel_drops, syscalls: (0, 0) })
    }
}

/// Direction names in logs and reports: A → B is "forward".
const DIRS: [&str; 2] = ["forward", "reverse"];

/// Longest the forwarding loop waits before looking at the stop flag.
const TICK_MAX: Duration = Duration::from_millis(10);

fn read_loop(dir: usize, dev: &tun::Device, tx: &mpsc::Sender<(usize, Bytes)>, stop: &AtomicBool) {
    let mut buf = BytesMut::new();
    while !stop.load(Ordering::Relaxed) {
        if buf.capacity() < 65_536 {
            buf = BytesMut::with_capacity(1 << 20);
        }
        buf.resize(65_536, 0);
        match dev.recv_timeout(&mut buf[..], std::time::Duration::from_millis(20)) {
            Ok(n) => {
                let packet = buf.split_to(n).freeze();
                if tx.send((dir, packet)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Namespaces created so far while setting up; deleted if setup fails.
struct Partial<'a> {
    created: &'a mut Vec<String>,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        for ns in self.created.drain(..) {
            let _ = ip(&["netns", "del", &ns]);
        }
    }
}

fn make_end(
    ns: &str,
    dev: &str,
    (local, peer): (Ipv4Addr, Ipv4Addr),
    mtu: u16,
    guard: &mut Partial<'_>,
) -> io::Result<tun::Device> {
    ip(&["netns", "add", ns])?;
    guard.created.push(ns.to_string());
    let mut cfg = tun::Configuration::default();
    cfg.tun_name(dev).layer(tun::Layer::L3).mtu(mtu);
    let device = tun::create(&cfg).map_err(|e| io::Error::other(format!("create TUN device {dev}: {e}")))?;
    ip(&["link", "set", dev, "netns", ns])?;
    let (l, p) = (local.to_string(), peer.to_string());
    ip(&["-n", ns, "addr", "add", &l, "peer", &p, "dev", dev])?;
    ip(&["-n", ns, "link", "set", dev, "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(device)
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in self.created.drain(..) {
            let _ = ip(&["netns", "del", &ns]);
        }
    }
}

/// Namespaces whose names start with `prefix` (to check nothing is left).
pub fn leftover(prefix: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
