//! Kernel TCP buffer limits inside the namespaces of [`crate::netns`], sized
//! for the emulated path.
//!
//! Kernel TCP's window is bounded by its socket buffers, which autotuning
//! grows only up to `net.ipv4.tcp_wmem` / `tcp_rmem`'s maximum. A host's
//! values are sized for its own links (on the lab machine `tcp_wmem`'s is
//! 4 MiB), and a new namespace starts with them: at 1 Gbit/s and 200 ms
//! (25 MB in flight) such a TCP is held at one send buffer per round trip
//! (3.67 MB, 147 Mbit/s) and a comparison against it measures the buffer,
//! not the congestion control. Both sysctls are per network namespace
//! (since Linux 4.15), so they are raised in the two namespaces only; the
//! host's own values are never written.
//!
//! The maximum asked for is twice the path's bandwidth-delay product (the
//! fastest rate of either direction times the round trip, both directions'
//! delay and jitter) plus both directions' queues plus
//! [`HEADROOM`], and never below what the namespace already has: autotuning
//! wants about twice a round trip's data (the send buffer holds what is in
//! flight and what waits behind it; the receive buffer counts the kernel's
//! per-packet overhead and advertises a fraction of itself as window).
//!
//! `net.core.rmem_max` / `wmem_max`, which cap what `SO_RCVBUF` /
//! `SO_SNDBUF` can ask for (XTP's UDP and raw sockets, `iperf3 -w`), are
//! not per namespace on Linux 6.x: a namespace other than the first sees
//! them read-only. They are reported, not changed.

use std::fmt;
use std::io;
use std::process::Command;

use xk_netemu::{LinkParams, LinkSpec};

/// Added to the computed need: room for the kernel's bookkeeping on a path
/// whose bandwidth-delay product is small.
pub const HEADROOM: u64 = 4 << 20;

/// The rate assumed for a direction without a rate limit: above what this
/// forwarder carries (about 1 Gbit/s on the lab machine), so the buffers
/// are not what limits kernel TCP there either.
pub const UNLIMITED_RATE_BPS: u64 = 2_000_000_000;

/// Largest maximum this sets (1 GiB): a multi-second round trip at an
/// unlimited rate would otherwise ask for more than the machine has.
pub const CAP: u64 = 1 << 30;

/// The three numbers of `tcp_rmem` / `tcp_wmem`: min, default, max.
pub type Triple = [u64; 3];

/// What the namespaces' TCP buffer limits are after [`apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpBuffers {
    /// The maximum the path needs ([`need`]).
    pub need: u64,
    /// The round trip and rate it was computed from (ns, bit/s).
    pub rtt_ns: u64,
    /// The fastest rate of either direction (bit/s; [`UNLIMITED_RATE_BPS`]
    /// for an unlimited one).
    pub rate_bps: u64,
    /// `tcp_rmem` before and after.
    pub rmem: (Triple, Triple),
    /// `tcp_wmem` before and after.
    pub wmem: (Triple, Triple),
    /// `net.core.rmem_max`, `wmem_max` (the host's, read-only here).
    pub core_max: (u64, u64),
    /// False: asked to keep the host's values (`--keep-tcp-buffers`).
    pub raised: bool,
}

impl fmt::Display for TcpBuffers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mb = |b: u64| b as f64 / 1e6;
        let (r0, r1) = self.rmem;
        let (w0, w1) = self.wmem;
        if self.raised {
            write!(
                f,
                "TCP buffers in both namespaces: tcp_rmem max {} -> {}, tcp_wmem max {} -> {} (path needs {:.1} MB: \
                 2 x {:.0} Mbit/s x {:.1} ms + queues + 4 MiB; --keep-tcp-buffers keeps the host's)",
                r0[2],
                r1[2],
                w0[2],
                w1[2],
                mb(self.need),
                self.rate_bps as f64 / 1e6,
                self.rtt_ns as f64 / 1e6
            )?;
        } else {
            write!(
                f,
                "TCP buffers: the host's kept (--keep-tcp-buffers): tcp_rmem max {}, tcp_wmem max {}; the path \
                 needs {:.1} MB",
                r1[2],
                w1[2],
                mb(self.need)
            )?;
            if w1[2].min(r1[2]) < self.need {
                write!(f, " (kernel TCP may be held by its buffers, not its congestion control)")?;
            }
        }
        write!(
            f,
            "; net.core.rmem_max {} / wmem_max {} (the host's, not per namespace) cap SO_RCVBUF / SO_SNDBUF",
            self.core_max.0, self.core_max.1
        )
    }
}

/// Fastest rate (bit/s) and longest one-way delay of one direction over
/// its start and its scheduled changes, and its largest queue in bytes.
fn direction(spec: &LinkSpec) -> (u64, u64, u64) {
    let all = std::iter::once(&spec.params).chain(spec.changes.iter().map(|c| &c.params));
    let mut out = (0u64, 0u64, 0u64);
    for p in all {
        let rate = if p.rate_bps == 0 { UNLIMITED_RATE_BPS } else { p.rate_bps };
        let delay = xk_time::duration_nanos(p.delay).saturating_add(xk_time::duration_nanos(p.jitter));
        out = (out.0.max(rate), out.1.max(delay), out.2.max(queue_bytes(p)));
    }
    out
}

/// The most bytes a direction's queue holds (an unlimited one: none
/// counted, its delay is not part of the path's own round trip).
fn queue_bytes(p: &LinkParams) -> u64 {
    let mtu = if p.mtu == 0 { 1500 } else { p.mtu as u64 };
    let by_packets = p.limit_packets as u64 * mtu;
    match (p.limit_packets, p.limit_bytes) {
        (0, 0) => 0,
        (0, b) => b as u64,
        (_, 0) => by_packets,
        (_, b) => by_packets.min(b as u64),
    }
}

/// The buffer maximum the path `forward` / `reverse` needs, with the round
/// trip (ns) and rate (bit/s) it rests on: 2 × BDP + both queues +
/// [`HEADROOM`], at most [`CAP`].
pub fn need(forward: &LinkSpec, reverse: &LinkSpec) -> (u64, u64, u64) {
    let (rf, df, qf) = direction(forward);
    let (rr, dr, qr) = direction(reverse);
    let rate = rf.max(rr);
    let rtt = df.saturating_add(dr);
    let bdp = (u128::from(rate) * u128::from(rtt) / 8 / 1_000_000_000) as u64;
    let need = bdp.saturating_mul(2).saturating_add(qf).saturating_add(qr).saturating_add(HEADROOM).min(CAP);
    (need, rtt, rate)
}

/// Parses a sysctl's numbers.
fn parse_triple(name: &str, text: &str) -> io::Result<Triple> {
    let v: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    <[u64; 3]>::try_from(v.as_slice())
        .map_err(|_| io::Error::other(format!("{name}: expected three numbers, read {text:?}")))
}

/// Reads `/proc/sys/<path>` inside namespace `ns` (this process's own with
/// `ns` None).
pub fn read(ns: Option<&str>, path: &str) -> io::Result<String> {
    let file = format!("/proc/sys/{path}");
    match ns {
        None => std::fs::read_to_string(&file).map_err(|e| io::Error::new(e.kind(), format!("{file}: {e}"))),
        Some(ns) => {
            let out = Command::new("ip").args(["netns", "exec", ns, "cat", &file]).output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "read {file} in {ns}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    }
}

/// Writes `value` to sysctl `key` inside namespace `ns` only (through `ip
/// netns exec`, so the host's value cannot be the one written).
fn write(ns: &str, key: &str, value: &str) -> io::Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-q", "-w", &format!("{key}={value}")])
        .output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "sysctl -w {key}={value:?} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// Sets `tcp_rmem` and `tcp_wmem`'s maximum in each of `namespaces` to what
/// the path needs, never below the host's or the namespace's own (`raise`
/// false: only reads them). Min and default stay as they are.
pub fn apply(
    namespaces: &[&str],
    forward: &LinkSpec,
    reverse: &LinkSpec,
    raise: bool,
) -> io::Result<TcpBuffers> {
    let (need, rtt_ns, rate_bps) = need(forward, reverse);
    let host_r = parse_triple("tcp_rmem", &read(None, "net/ipv4/tcp_rmem")?)?;
    let host_w = parse_triple("tcp_wmem", &read(None, "net/ipv4/tcp_wmem")?)?;
    let core = |k: &str| read(None, k).ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0);
    let core_max = (core("net/core/rmem_max"), core("net/core/wmem_max"));
    let mut rmem = (host_r, host_r);
    let mut wmem = (host_w, host_w);
    for ns in namespaces {
        for (key, path, host, slot) in [
            ("net.ipv4.tcp_rmem", "net/ipv4/tcp_rmem", host_r, &mut rmem),
            ("net.ipv4.tcp_wmem", "net/ipv4/tcp_wmem", host_w, &mut wmem),
        ] {
            let mut now = parse_triple(key, &read(Some(ns), path)?)?;
            if raise {
                let max = need.max(host[2]).max(now[2]);
                if max != now[2] {
                    write(ns, key, &format!("{} {} {max}", now[0], now[1]))?;
                    now = parse_triple(key, &read(Some(ns), path)?)?;
                    if now[2] != max {
                        return Err(io::Error::other(format!(
                            "{key} in {ns}: wrote max {max}, reads {now:?}"
                        )));
                    }
                }
            }
            slot.1 = now;
        }
    }
    Ok(TcpBuffers { need, rtt_ns, rate_bps, rmem, wmem, core_max, raised: raise })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> LinkSpec {
        xk_netemu::parse_line(s).unwrap()
    }

    #[test]
    fn need_is_twice_the_bdp_plus_queues_and_headroom() {
        // 1 Gbit/s, 100 ms each way: BDP 25 MB; 1,000 packets of 1,500 B
        // each way.
        let l = spec("rate 1000mbit delay 100ms limit 1000");
        let (n, rtt, rate) = need(&l, &l);
        assert_eq!((rtt, rate), (200_000_000, 1_000_000_000));
        assert_eq!(n, 50_000_000 + 3_000_000 + HEADROOM);
        // The faster direction and both delays count.
        let (n, rtt, rate) = need(&spec("rate 45mbit delay 10ms"), &spec("rate 100mbit delay 40ms"));
        assert_eq!((rtt, rate), (50_000_000, 100_000_000));
        assert_eq!(n, 2 * 625_000 + HEADROOM);
        // Unlimited rate: sized as UNLIMITED_RATE_BPS; capped.
        let (n, _, rate) = need(&spec("delay 5s"), &spec("delay 5s"));
        assert_eq!((n, rate), (CAP, UNLIMITED_RATE_BPS));
    }

    #[test]
    fn triples_parse_or_name_the_sysctl() {
        assert_eq!(parse_triple("x", "4096\t131072\t33554432\n").unwrap(), [4096, 131072, 33554432]);
        let e = parse_triple("tcp_wmem", "4096 16384").unwrap_err().to_string();
        assert!(e.contains("tcp_wmem"), "{e}");
    }
}
