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
//! # Batches: the kernel's segmentation offloads
//!
//! At 1 Gbit/s a read and a write per packet (about 130,000 a second both
//! ways, each write running the receiving namespace's stack) is more than
//! this 2-core machine has. So the devices are opened with `IFF_VNET_HDR`
//! and `TUNSETOFFLOAD` (checksum, TSO4/6 and, where the kernel has it, UDP
//! segmentation USO4/6; `tun-rs` does the ioctls): a sending stack hands
//! over GSO super-packets of up to 64 KB, one read each. The link model
//! still sees packets: each read is split into its MTU-sized segments
//! (headers, lengths, sequence numbers and checksums fixed per segment),
//! and each segment is queued, rated, delayed and lost on its own. Releases
//! are coalesced again where that changes nothing the receiver could see
//! ([`crate::tun_batch`]: consecutive in release order, one flow, sequence
//! numbers contiguous and rising, none corrupted or duplicated) and written
//! as one super-packet, which the receiving stack takes in as one, as it
//! would from a NIC with GRO. A lost segment simply is not in the batch:
//! the super-packet is split where it was lost. A reordered, corrupted or
//! duplicated segment is written alone, so the receiver sees the
//! reordering, the corruption or the copy.
//!
//! What a batch costs in timing is bounded and counted: a released segment
//! is held back only while the same direction's next packet is due within
//! [`ForwardOptions::batch_span`] of the batch's first, and only if it could
//! head a super-packet on the device it is written into (TCP with data and
//! no flag but ACK, on a device with TCP segmentation; UDP on one with UDP
//! segmentation). The batch leaves when its last packet is due, one write
//! per super-packet, and every packet's release error is measured from the
//! start of its own write. At 45 Mbit/s a full-size segment takes 267 µs
//! on the link, longer than the default span, so such segments are not
//! held; smaller packets (UDP datagrams under about 450 bytes, whose
//! successor can be due within 80 µs) can be. Without offloads (`--no-offload`,
//! or the kernel refused them: [`Netns::offloads`] says so) nothing is held
//! and every read and write is one packet.
//!
//! Needs root (namespaces, TUN); [`Netns::create`] refuses otherwise, saying
//! why. Names carry the process id, so runs never collide; [`Netns`] deletes
//! both namespaces (and with them the devices) when dropped — on success, on
//! error, and (through the caller's stop flag) on Ctrl-C.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use xk_netemu::{Fate, LinkSpec, Path};
use xk_time::{Duration, Instant, duration_nanos};

use tun_rs::{SyncDevice, VIRTIO_NET_HDR_LEN};

use crate::clock::Clock;
use crate::pacer::{LoopStats, Pacer, Pacing};
use crate::relay::{DirectionReport, RelayReport};
use crate::tun_batch::{Batch, MAX_BATCH, coalescable};

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
    tun: (Arc<SyncDevice>, Arc<SyncDevice>),
    /// TUN device names (A, B).
    devs: (String, String),
    /// The devices' MTU (sizes the segment buffers).
    mtu: u16,
    /// Which segmentation offloads the kernel granted to both devices (the
    /// ends can differ: B is opened like A, and the kernel may refuse it
    /// what it granted A; then this is what they have in common, and its
    /// note says so).
    pub offloads: Offloads,
    /// Each device's own offloads (A, B): a direction's writes coalesce as
    /// the device written into allows.
    pub ends: (Offloads, Offloads),
    created: Vec<String>,
}

/// The segmentation offloads the TUN devices were opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offloads {
    /// TCP segmentation (TSO4/6, with checksum offload): TCP super-packets.
    pub tcp: bool,
    /// UDP segmentation (USO4/6, Linux 6.2+): UDP GSO super-packets.
    pub udp: bool,
    /// Why an offload is off (the kernel's refusal), if one is.
    pub note: Option<String>,
}

impl Offloads {
    /// What ends `a` and `b` both have; the note says which end lacks what.
    fn common(a: &Offloads, b: &Offloads) -> Offloads {
        let (tcp, udp) = (a.tcp && b.tcp, a.udp && b.udp);
        let note = if (a.tcp, a.udp) == (b.tcp, b.udp) {
            a.note.clone()
        } else {
            let end = |o: &Offloads| format!("TCP {}, UDP {}", on(o.tcp), on(o.udp));
            let on_b = b.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            Some(format!("the ends differ: A's device has {}, B's {}{on_b}", end(a), end(b)))
        };
        Offloads { tcp, udp, note }
    }
}

/// "on" or "off".
fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

impl std::fmt::Display for Offloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.tcp, self.udp) {
            (true, true) => write!(f, "TUN offloads: TCP and UDP segmentation (batched reads and writes)")?,
            (true, false) => write!(f, "TUN offloads: TCP segmentation only (UDP refused by the kernel)")?,
            _ => write!(f, "TUN offloads: none (one packet per read and write)")?,
        }
        if let Some(n) = &self.note {
            write!(f, ": {n}")?;
        }
        Ok(())
    }
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
    /// Longest a released packet is held back so that packets due after it
    /// leave in the same write ([`DEFAULT_BATCH_SPAN`]; zero: never).
    pub batch_span: Duration,
    /// One JSON line per packet event (arrive / release), if given.
    pub log: Option<&'a mut dyn Write>,
    /// Sees each released IP packet (what crossed the emulated link):
    /// `--pcap`.
    pub capture: Option<PacketTap<'a>>,
}

/// Default [`ForwardOptions::batch_span`]: at 1 Gbit/s about eight
/// 1,500-byte segments (12 µs each on the link), which cuts the writes
/// eightfold and leaves most of the 200 µs release-error budget to the loop.
pub const DEFAULT_BATCH_SPAN: Duration = Duration::from_micros(80);

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
        Netns::create_with(prefix, mtu, true)
    }

    /// As [`Netns::create_with_mtu`]; `offload` false opens the devices
    /// without segmentation offloads (one packet per read and write: the
    /// emulator as it was before batching, for comparison).
    pub fn create_with(prefix: &str, mtu: u16, offload: bool) -> io::Result<Netns> {
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
        let off = Offloads { tcp: false, udp: false, note: Some("not asked for".into()) };
        let like = if offload { None } else { Some(&off) };
        let (a, off_a) = make_end(&names.0, &devs.0, (ADDR_A, ADDR_B), mtu, like, &mut guard)?;
        let (b, off_b) = make_end(&names.1, &devs.1, (ADDR_B, ADDR_A), mtu, Some(&off_a), &mut guard)?;
        std::mem::forget(guard);
        let offloads = Offloads::common(&off_a, &off_b);
        let ends = (off_a, off_b);
        Ok(Netns { names, tun: (Arc::new(a), Arc::new(b)), devs, mtu, offloads, ends, created })
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

    /// Raises `tcp_rmem` / `tcp_wmem`'s maximum in both namespaces to what
    /// the path `forward` / `reverse` needs ([`crate::netns_buffers`]), or
    /// with `raise` false only reads what they are.
    pub fn size_tcp_buffers(
        &self,
        forward: &LinkSpec,
        reverse: &LinkSpec,
        raise: bool,
    ) -> io::Result<crate::netns_buffers::TcpBuffers> {
        crate::netns_buffers::apply(&[&self.names.0, &self.names.1], forward, reverse, raise)
    }

    /// Datagrams each namespace's UDP sockets dropped for a full
    /// socket buffer so far, (A, B) as (receive, send) from `/proc/net/snmp`
    /// (`Udp: RcvbufErrors, SndbufErrors`) inside it; None if unreadable.
    pub fn udp_buffer_errors(&self) -> Option<((u64, u64), (u64, u64))> {
        let one = |ns: &str| -> Option<(u64, u64)> {
            let out =
                Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]).output().ok()?;
            udp_buffer_errors(&String::from_utf8_lossy(&out.stdout))
        };
        Some((one(&self.names.0)?, one(&self.names.1)?))
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
        let ForwardOptions { spin, max_p99_error, pacing, batch_span, mut log, mut capture } = opts;
        let drops_at_start = self.tun_drops();
        let clock = Clock::new();
        let start = clock.now();
        let mut path: Path<Bytes> = Path::new(forward, reverse, start, seed, DIRS)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // Room for a while of traffic up front: growing a long vector is a
        // copy of all of it, in the middle of the loop.
        let mut errors: [Vec<u64>; 2] = [Vec::with_capacity(1 << 16), Vec::with_capacity(1 << 16)];
        let mut send_errors = [0u64; 2];
        let mut malformed = [0u64; 2];
        let io_at_start = thread_io();
        let ins = [&self.tun.0, &self.tun.1]; // A's packets go forward, B's reverse
        let outs = [&self.tun.1, &self.tun.0]; // A→B writes into B
        for dev in ins {
            dev.set_nonblocking(true)?;
        }
        let mut pacer = Pacer::new(&[ins[0].as_fd(), ins[1].as_fd()], spin)?;
        pacer.prepare(pacing);
        let mut rx = Segments::new(self.mtu);
        let mut tx = [Batch::default(), Batch::default()];
        // What each direction's writes can coalesce: the device written into.
        let offloads = [&self.ends.1, &self.ends.0];
        let mut buf = BytesMut::new();
        let mut turn = 0u64;
        let end = start + duration;
        while !stop.load(Ordering::Relaxed) {
            let now = clock.now();
            if now >= end {
                break;
            }
            pacer.turn(now);
            for d in 0..2 {
                while let Some(p) = path.poll(now, d) {
                    tx[d].held.push((p, now));
                    if tx[d].held.len() >= MAX_BATCH {
                        break;
                    }
                }
                // Hold the batch for the next packet if it is due within the
                // span and the batch could grow by coalescing (the last
                // packet could head a super-packet on this device);
                // otherwise write it now, at its last packet's release time.
                let hold = tx[d].held.first().is_some_and(|(first, _)| {
                    tx[d].held.len() < MAX_BATCH
                        && tx[d]
                            .held
                            .last()
                            .is_some_and(|(p, _)| coalescable(&p.packet, offloads[d].tcp, offloads[d].udp))
                        && path.next_arrival(d).is_some_and(|t| t <= first.at + batch_span)
                });
                if hold || tx[d].held.is_empty() {
                    continue;
                }
                let out = Out { dev: outs[d], udp: offloads[d].udp, dir: d, let_go: now };
                flush(
                    &mut tx[d],
                    out,
                    &clock,
                    &mut pacer.stats,
                    &mut errors[d],
                    &mut send_errors[d],
                    &mut capture,
                    &mut log,
                )?;
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
                    let segs = match rx.read(dev) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        // No OS error: the read worked and what it gave could
                        // not be split (a GSO header that does not match its
                        // packet). Counted and dropped; the run says so.
                        Err(e) if e.raw_os_error().is_none() => {
                            malformed[dir] += 1;
                            continue;
                        }
                        Err(e) => return Err(io::Error::new(e.kind(), format!("read from TUN device: {e}"))),
                    };
                    got += 1;
                    let t = clock.now();
                    for seg in rx.segments(segs) {
                        if buf.capacity() < seg.len() {
                            buf = BytesMut::with_capacity(1 << 20);
                        }
                        buf.extend_from_slice(seg);
                        let data = buf.split().freeze();
                        let n = data.len();
                        let out = path.send(t, dir, data);
                        if let Some(w) = log.as_mut() {
                            let fate = match out.fate {
                                Fate::Scheduled(at) => serde_json::json!({"scheduled_ns": at.as_nanos()}),
                                Fate::Dropped(r) => serde_json::json!({"dropped": format!("{r:?}")}),
                                Fate::Queued => serde_json::json!({"queued": true}),
                            };
                            let line = serde_json::json!({"t_ns": t.as_nanos(), "dir": DIRS[dir], "event": "arrive",
                                "len": n, "segments": segs, "fate": fate});
                            writeln!(w, "{line}")?;
                        }
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
        // Whatever is still held leaves now (late, and counted so).
        for d in 0..2 {
            let out = Out { dev: outs[d], udp: offloads[d].udp, dir: d, let_go: clock.now() };
            flush(
                &mut tx[d],
                out,
                &clock,
                &mut pacer.stats,
                &mut errors[d],
                &mut send_errors[d],
                &mut capture,
                &mut log,
            )?;
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
        // The forwarding thread's own read and write system calls (TUN
        // reads and writes, the timerfd, log and capture writes).
        let syscalls = match (io_at_start, thread_io()) {
            (Some((r0, w0)), Some((r1, w1))) => (w1.saturating_sub(w0), r1.saturating_sub(r0)),
            _ => (0, 0),
        };
        let mut report = RelayReport::judged(fw, rv, seed, kernel_drops, max_p99_error, syscalls, timing);
        if malformed.iter().any(|&n| n > 0) {
            report.valid = false;
            report.invalid_reasons.push(format!(
                "{} reads from the TUN devices could not be split into packets (forward {}, reverse {}) and were \
                 dropped",
                malformed[0] + malformed[1],
                malformed[0],
                malformed[1]
            ));
        }
        Ok(report)
    }
}

/// `Udp:`'s `RcvbufErrors` and `SndbufErrors` in the text of
/// `/proc/net/snmp` (a header line of names, then one of values).
fn udp_buffer_errors(snmp: &str) -> Option<(u64, u64)> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let field = |want: &str| {
        let i = names.split_whitespace().position(|n| n == want)?;
        values.split_whitespace().nth(i)?.parse::<u64>().ok()
    };
    Some((field("RcvbufErrors")?, field("SndbufErrors")?))
}

/// Direction names in logs and reports: A → B is "forward".
const DIRS: [&str; 2] = ["forward", "reverse"];

/// Longest the forwarding loop waits before looking at the stop flag.
const TICK_MAX: Duration = Duration::from_millis(10);

/// Most reads from one device before the release queue is looked at
/// again: at 45 Mbit/s a packet time is 267 µs and a TUN read a few µs, so
/// a batch of 16 holds a release up by well under the 200 µs limit. (With
/// offloads a read can be a 64 KB super-packet, some tens of µs to split
/// and queue; the loop also stops reading as soon as a release falls due.)
const READ_BATCH: usize = 16;

/// Where one direction's releases go.
#[derive(Clone, Copy)]
struct Out<'a> {
    dev: &'a SyncDevice,
    /// Whether the device takes UDP super-packets.
    udp: bool,
    /// 0: A → B.
    dir: usize,
    /// The time of the loop's turn that let the batch go: its hold ends
    /// there (waiting behind the other direction's write in the same turn
    /// is hand-over, not hold).
    let_go: Instant,
}

/// Writes the held packets of `batch` (if any) and accounts for each: its
/// release error, its timing, the capture and the log.
///
/// One `send_multiple` per run of packets GRO merges into one super-packet
/// (normally one write each, [`crate::tun_batch`]), each stamped as it
/// starts: a write runs the other namespace's stack (receive, and often the
/// transmit an ACK releases) before it returns, and the packets in later
/// writes wait for that, their stamps included. The write times are kept
/// apart (`write_*` in the timing), and so is the hold (`held_*`).
#[allow(clippy::too_many_arguments)]
fn flush(
    batch: &mut Batch,
    out: Out<'_>,
    clock: &Clock,
    stats: &mut LoopStats,
    errors: &mut Vec<u64>,
    send_errors: &mut u64,
    capture: &mut Option<PacketTap<'_>>,
    log: &mut Option<&mut dyn Write>,
) -> io::Result<()> {
    if batch.held.is_empty() {
        return Ok(());
    }
    let flushed = out.let_go;
    batch.write(out.dev, clock, out.udp, &mut stats.write_ns);
    *send_errors += batch.refused;
    let n = batch.held.len();
    let Batch { held, sent, calls, .. } = batch;
    for ((p, seen), &sent_at) in held.drain(..).zip(sent.iter()) {
        if let Some(cap) = capture.as_mut() {
            cap(out.dir, sent_at, &p.packet);
        }
        errors.push(duration_nanos(sent_at.saturating_since(p.at)));
        stats.release_held(p.at, seen, flushed, sent_at);
        if let Some(w) = log.as_mut() {
            let line = serde_json::json!({"t_ns": sent_at.as_nanos(), "dir": DIRS[out.dir], "event": "release",
                "id": p.id, "len": p.packet.len(), "intended_ns": p.at.as_nanos(),
                "corrupted": p.corrupted, "duplicate": p.duplicate, "batch": n, "writes": *calls});
            writeln!(w, "{line}")?;
        }
    }
    Ok(())
}

/// The calling thread's read and write system calls so far (`syscr`,
/// `syscw` of `/proc/thread-self/io`), if readable.
fn thread_io() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok());
    Some((field("syscr:")?, field("syscw:")?))
}

/// Receive buffers: one read (a packet, or a GSO super-packet with its
/// virtio-net header) and the segments it splits into.
struct Segments {
    raw: Vec<u8>,
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
}

/// Segment buffers for devices of MTU `mtu`: room for the most segments a
/// 64 KB super-packet can hold at that MTU's full-size segments (`mtu - 40`
/// bytes of TCP data, less with options; UDP GSO makes at most 128), and at
/// least 128. A sender with a smaller MSS (the peer advertised one, or
/// `TCP_MAXSEG`) would cut more: the device's `gso_max_segs` is set to this
/// number, so its stack never hands over more segments than fit.
fn segment_buffers(mtu: u16) -> usize {
    (65_536 / usize::from(mtu).saturating_sub(100).max(64) + 2).max(128)
}

impl Segments {
    /// Buffers for devices of MTU `mtu` ([`segment_buffers`]).
    fn new(mtu: u16) -> Segments {
        let most = segment_buffers(mtu);
        let mtu = usize::from(mtu);
        Segments {
            raw: vec![0; VIRTIO_NET_HDR_LEN + 65_536],
            bufs: vec![vec![0; mtu.max(1_500)]; most],
            sizes: vec![0; most],
        }
    }

    /// One read from `dev`: the number of segments it gave.
    fn read(&mut self, dev: &SyncDevice) -> io::Result<usize> {
        dev.recv_multiple(&mut self.raw, &mut self.bufs, &mut self.sizes, 0)
    }

    /// The first `n` segments of the last read.
    fn segments(&self, n: usize) -> impl Iterator<Item = &[u8]> {
        self.bufs.iter().zip(&self.sizes).take(n).map(|(b, &len)| &b[..len])
    }
}

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

/// Creates one end: namespace `ns` with TUN device `dev` in it. The device is
/// opened with segmentation offloads unless `like` (the other end's outcome)
/// says the kernel refused them; a refusal falls back to no offloads and is
/// said in the answer.
fn make_end(
    ns: &str,
    dev: &str,
    (local, peer): (Ipv4Addr, Ipv4Addr),
    mtu: u16,
    like: Option<&Offloads>,
    guard: &mut Partial<'_>,
) -> io::Result<(SyncDevice, Offloads)> {
    ip(&["netns", "add", ns])?;
    guard.created.push(ns.to_string());
    let open = |offload: bool| tun_rs::DeviceBuilder::new().name(dev).mtu(mtu).offload(offload).build_sync();
    let want = like.is_none_or(|o| o.tcp);
    // Asked not to, or the first end was refused: the same for both ends.
    let (device, offloads) = match open(want) {
        Ok(d) if want => {
            let (tcp, udp) = (d.tcp_gso(), d.udp_gso());
            let note = match (like, udp) {
                (Some(o), _) => o.note.clone(),
                (None, false) => {
                    Some("TUNSETOFFLOAD refused TUN_F_USO4 | TUN_F_USO6 (UDP segmentation)".into())
                }
                (None, true) => None,
            };
            (d, Offloads { tcp, udp, note })
        }
        Ok(d) => (d, like.cloned().unwrap_or(Offloads { tcp: false, udp: false, note: None })),
        Err(e) if want => {
            let d = open(false).map_err(|e| io::Error::other(format!("create TUN device {dev}: {e}")))?;
            let note =
                format!("IFF_VNET_HDR / TUNSETOFFLOAD (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) refused: {e}");
            (d, Offloads { tcp: false, udp: false, note: Some(note) })
        }
        Err(e) => return Err(io::Error::other(format!("create TUN device {dev}: {e}"))),
    };
    ip(&["link", "set", dev, "netns", ns])?;
    let (l, p) = (local.to_string(), peer.to_string());
    ip(&["-n", ns, "addr", "add", &l, "peer", &p, "dev", dev])?;
    // No more segments per super-packet than there are buffers to split
    // one into (a small MSS would otherwise make reads fail as malformed,
    // and the flow stall on refused retransmissions).
    let segs = segment_buffers(mtu).to_string();
    ip(&["-n", ns, "link", "set", dev, "gso_max_segs", &segs])?;
    // The device's queue holds what the kernel sends while the forwarder
    // is busy; the emulated link's queue is the link model's, so this one
    // must not drop first. TUN's default of 500 packets overflowed (one
    // drop in a run) once kernel TCP had buffers sized to a gigabit path.
    ip(&["-n", ns, "link", "set", dev, "txqueuelen", "10000"])?;
    ip(&["-n", ns, "link", "set", dev, "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok((device, offloads))
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

#[cfg(test)]
mod tests {
    #[test]
    fn udp_buffer_errors_are_read_by_name() {
        let snmp = "Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\nUdp: InDatagrams NoPorts InErrors OutDatagrams \
                    RcvbufErrors SndbufErrors InCsumErrors\nUdp: 10 0 7 12 5 2 0\n";
        assert_eq!(super::udp_buffer_errors(snmp), Some((5, 2)));
        assert_eq!(super::udp_buffer_errors("Tcp: A\nTcp: 1\n"), None);
    }
}
