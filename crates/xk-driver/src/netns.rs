//! Driver 3 of the link model: two network namespaces joined through TUN
//! devices, this process forwarding IP packets between them through one
//! [`Link`](xk_netemu::Link) per direction — the Mahimahi approach. Any program (kernel TCP,
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
//! marked invalid past the configured p99 limit (by default
//! [`crate::relay::DEFAULT_MAX_P99_ERROR`], 200 µs) or with any drop, saying
//! why in [`RelayReport::invalid_reasons`]; an optional per-packet JSON-lines
//! log records every arrival and release. The forwarding loop's timing is
//! that of the relay ([`crate::pacer`]).
//!
//! Needs root (namespaces, TUN); [`Netns::create`] refuses otherwise, saying
//! why. Names carry the process id, so runs never collide; [`Netns`] deletes
//! both namespaces (and with them the devices) when dropped — on success, on
//! error, and (through the caller's stop flag) on Ctrl-C.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use xk_netemu::{Fate, LinkSpec, Path};
use xk_time::{Duration, Instant, duration_nanos};

use crate::clock::Clock;
use crate::pacer::{Pacer, Pacing};
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
    /// Spin this long before a release instead of sleeping (capped at
    /// [`crate::pacer::MAX_SPIN`]).
    pub spin: Duration,
    /// p99 release error above which the run is marked invalid
    /// ([`crate::relay::DEFAULT_MAX_P99_ERROR`] unless chosen otherwise).
    pub max_p99_error: Duration,
    /// Real-time priority and a warm CPU for the forwarding thread
    /// ([`Pacing::default`] asks for both).
    pub pacing: Pacing,
    /// One JSON line per packet event (arrive / release), if given.
    pub log: Option<&'a mut dyn Write>,
    /// Sees each released IP packet (what crossed the emulated link):
    /// `--pcap`.
    pub capture: Option<PacketTap<'a>>,
}

/// A capture of released packets: the direction (0: A → B), the release
/// time, the IP packet.
pub type PacketTap<'a> = &'a mut dyn FnMut(usize, Instant, &[u8]);

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
    ///
    /// One thread (the caller's) does everything: it asks for `SCHED_FIFO`
    /// and a warm CPU ([`crate::pacer::Pacer::prepare`]), reads both TUN devices without
    /// blocking, and sleeps on them and a `timerfd` together
    /// ([`crate::pacer::Pacer`]). (It used to hand packets over from a
    /// reader thread per device, through a channel: two more threads to
    /// schedule on two cores, and the channel's timed wait carried 50 µs of
    /// timer slack.)
    pub fn forward(
        &self,
        forward: &LinkSpec,
        reverse: &LinkSpec,
        seed: u64,
        duration: Duration,
        opts: ForwardOptions<'_>,
        stop: &Arc<AtomicBool>,
    ) -> io::Result<RelayReport> {
        let ForwardOptions { spin, max_p99_error, pacing, mut log, mut capture } = opts;
        let drops_at_start = self.tun_drops();
        let clock = Clock::new();
        let start = clock.now();
        let mut path: Path<Bytes> = Path::new(forward, reverse, start, seed, DIRS)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // Room for a while of traffic up front: growing a long vector is a
        // copy of all of it, in the middle of the loop.
        let mut errors: [Vec<u64>; 2] = [Vec::with_capacity(1 << 16), Vec::with_capacity(1 << 16)];
        let mut send_errors = [0u64; 2];
        let ins = [&self.tun.0, &self.tun.1]; // A's packets go forward, B's reverse
        let outs = [&self.tun.1, &self.tun.0]; // A→B writes into B
        for dev in ins {
            dev.set_nonblock()?;
        }
        let mut pacer = Pacer::new(&[ins[0].as_raw_fd(), ins[1].as_raw_fd()], spin)?;
        pacer.prepare(pacing);
        let mut buf = BytesMut::new();
        let mut turn = 0u64;
        let end = start + duration;
        while !stop.load(Ordering::Relaxed) {
            let now = clock.now();
            if now >= end {
                break;
            }
            for d in 0..2 {
                while let Some(p) = path.poll(now, d) {
                    // Stamped as the write starts: the packet is handed to
                    // the kernel. The write itself then runs the other
                    // namespace's stack (receive, and often the transmit an
                    // ACK releases) before it returns; that time is kept
                    // apart (`write_*` in the timing) and delays the packets
                    // behind it, whose own stamps show it.
                    let sent_at = clock.now();
                    if let Some(cap) = capture.as_mut() {
                        cap(d, sent_at, &p.packet);
                    }
                    if outs[d].send(&p.packet).is_err() {
                        send_errors[d] += 1;
                    }
                    pacer.stats.write_ns.push(duration_nanos(clock.now().saturating_since(sent_at)));
                    errors[d].push(duration_nanos(sent_at.saturating_since(p.at)));
                    pacer.stats.release(p.at, now, sent_at);
                    if let Some(w) = log.as_mut() {
                        let line = serde_json::json!({"t_ns": sent_at.as_nanos(), "dir": DIRS[d], "event": "release",
                            "id": p.id, "len": p.packet.len(), "intended_ns": p.at.as_nanos(),
                            "corrupted": p.corrupted, "duplicate": p.duplicate});
                        writeln!(w, "{line}")?;
                    }
                }
            }
            crate::relay::log_air_drops(&mut path, &mut log)?;
            // Read what is readable, a bounded batch per device, then look
            // at the release queue again before reading more; stop early
            // when a release falls due meanwhile.
            let mut got = 0;
            // Alternate which device goes first, so neither waits behind the
            // other's bursts turn after turn.
            turn += 1;
            let order = if turn.is_multiple_of(2) { [0, 1] } else { [1, 0] };
            'devices: for dir in order {
                let dev = ins[dir];
                for _ in 0..READ_BATCH {
                    if path.next_event().is_some_and(|t| t <= clock.now()) {
                        break 'devices;
                    }
                    if buf.capacity() < 65_536 {
                        buf = BytesMut::with_capacity(1 << 20);
                    }
                    buf.resize(65_536, 0);
                    let n = match dev.recv(&mut buf[..]) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(io::Error::new(e.kind(), format!("read from TUN device: {e}"))),
                    };
                    got += 1;
                    let data = buf.split_to(n).freeze();
                    let t = clock.now();
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
                }
            }
            pacer.stats.read_batch(got);
            if got > 0 {
                continue;
            }
            let next = [path.next_event(), Some(end), Some(now + TICK_MAX)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            pacer.wait_until(&clock, next)?;
        }
        pacer.stats.finish(&clock, start);
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
        let timing = pacer.stats;
        Ok(RelayReport::judged(fw, rv, seed, kernel_drops, max_p99_error, (0, 0), timing))
    }
}

/// Direction names in logs and reports: A → B is "forward".
const DIRS: [&str; 2] = ["forward", "reverse"];

/// Longest the forwarding loop waits before looking at the stop flag.
const TICK_MAX: Duration = Duration::from_millis(10);

/// Most packets read from one device before the release queue is looked at
/// again: at 45 Mbit/s a packet time is 267 µs and a TUN read a few µs, so
/// a batch of 16 holds a release up by well under the 200 µs limit.
const READ_BATCH: usize = 16;

/// Namespaces created so far while setting up; deleted if setup fails.
struct Partial<'a> {
    created: &'a mut Vec<String>,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        let _ = delete_all(self.created);
    }
}

/// Deletes the named namespaces. `ip netns del` can fail for a moment
/// while the kernel still holds the namespace file busy (a process that
/// `ip netns exec` started is still being torn down in another mount
/// namespace), so each is retried for up to two seconds before the error is
/// returned; every name is tried whatever happened to the others.
fn delete_all(names: &mut Vec<String>) -> io::Result<()> {
    let mut failed = Vec::new();
    for ns in names.drain(..) {
        let mut last = Ok(());
        for attempt in 0..20 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            last = ip(&["netns", "del", &ns]);
            // Gone, whether this call or an earlier half-done one removed it
            // (the name is a file under /run/netns while it exists).
            if last.is_ok() || !std::path::Path::new("/run/netns").join(&ns).exists() {
                last = Ok(());
                break;
            }
        }
        if let Err(e) = last {
            failed.push(e.to_string());
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(io::Error::other(failed.join("; "))) }
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

impl Netns {
    /// Deletes both namespaces now, saying what could not be deleted (and
    /// why); dropping a `Netns` does the same silently.
    pub fn delete(mut self) -> io::Result<()> {
        delete_all(&mut self.created)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = delete_all(&mut self.created);
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
