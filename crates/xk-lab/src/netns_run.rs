//! One bulk transfer under an emulated link, for the path experiments (E2,
//! PATHS, fairness): XTP (`xpress serve` / `xpress bulk -t`) or kernel TCP
//! (iperf3) between two network namespaces joined by `xpress netns` — both
//! through the same emulator — or, without root, XTP through the in-process
//! relay on loopback (kernel TCP cannot be put under the link there).
//!
//! Through `xpress netns` the processes are required, not a choice: each
//! side's command runs inside a network namespace that `xpress netns`
//! creates, so it must be a program (`xpress serve`, `xpress bulk -J`,
//! iperf3) that the namespace's shell starts; the result comes back as the
//! JSON line `bulk -J` prints. Through the relay nothing needs a process:
//! server, relay and client (`xk_apps`) run here, in threads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use serde_json::Value;
use xk_apps::{Amount, BulkConfig, ServeConfig, Server};
use xk_driver::relay::{self, RelayConfig};
use xk_netemu::parse_line;
use xk_time::Duration;
use xtp_proto::Congestion;

/// Who sends.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Sender {
    /// XTP (`xpress bulk`).
    Xtp {
        /// Congestion controller: `cubic`, `bbr`, `newreno`, `none`.
        cc: String,
        /// A fixed window (None: it grows with the path).
        window: Option<u64>,
        /// NOCHECK.
        nocheck: bool,
        /// Rate limit, bytes/s (0: none).
        rate: u64,
        /// Over IP protocol 36 instead of UDP, with the 1,448-byte segment
        /// kernel TCP carries (timestamps on): the same header cost per
        /// packet as TCP. Through `xpress netns` only; the relay carries UDP.
        #[serde(default)]
        raw: bool,
    },
    /// Kernel TCP through iperf3.
    Tcp {
        /// Congestion controller (None: the system's default).
        cc: Option<String>,
        /// Socket buffer (`iperf3 -w`; None: Linux's autotuning).
        window: Option<u64>,
    },
}

/// One transfer's outcome.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// Goodput over the timed part.
    pub mbit_per_s: f64,
    /// Bytes the receiver got (TCP) or acknowledged (XTP) in the timed part.
    pub bytes: u64,
    /// The timed part.
    pub seconds: f64,
    /// Seconds run before the timed part and left out of the count (slow
    /// start; `bulk -O`, `iperf3 -O`).
    #[serde(default)]
    pub omitted_seconds: f64,
    /// Bytes retransmitted (XTP: the context's count over the whole run,
    /// the omitted start included; TCP: segments × MSS is not known, so
    /// iperf3's retransmitted segments in the counted part), if reported.
    pub retransmits: Option<u64>,
    /// XTP: WTIMER expiries.
    pub timeouts: Option<u64>,
    /// How the path was emulated: `netns` or `relay`.
    pub emulator: String,
    /// What carried the data: `udp` or `ip36` (XTP), `tcp`.
    #[serde(default)]
    pub carrier: String,
    /// Whether the emulator judged its own timing good enough.
    pub valid: bool,
    /// Why not, if not.
    pub invalid_reasons: Vec<String>,
    /// p99 release error of each direction, µs.
    pub p99_error_us: [f64; 2],
}

/// The kernel's default TCP congestion controller.
pub fn kernel_default_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map_or("unknown".into(), |s| s.trim().into())
}

/// Whether the kernel offers `cc` (cubic, bbr, reno, …).
pub fn kernel_has_cc(cc: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|s| s.split_whitespace().any(|c| c == cc))
}

/// Whether iperf3 is installed.
pub fn have_iperf3() -> bool {
    Command::new("iperf3").arg("--version").output().is_ok()
}

/// The segment XTP carries over raw IP for a comparison with kernel TCP at
/// equal header cost: TCP's MSS on a 1,500-byte MTU with timestamps
/// (1,500 − 20 IP − 20 TCP − 12 options); XTP's header is 32 bytes, so
/// both send 52 header bytes per 1,448 data bytes.
pub const RAW_MSS: usize = 1448;

fn xtp_args(cc: &str, window: Option<u64>, nocheck: bool, rate: u64) -> String {
    let mut s = format!(" --cc {cc}");
    if let Some(w) = window {
        s += &format!(" --window {w}");
    }
    if nocheck {
        s += " --nocheck";
    }
    if rate > 0 {
        s += &format!(" --rate {}bit", rate * 8);
    }
    s
}

/// A scratch file removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The first line of `text` that parses as a JSON object.
fn json_line(text: &str) -> Option<Value> {
    text.lines().find_map(|l| l.trim_start().starts_with('{').then(|| serde_json::from_str(l).ok()).flatten())
}

/// How long a run lasts: `omit` seconds left out of the count (slow start),
/// then `seconds` counted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// The counted part.
    pub seconds: f64,
    /// Run first, not counted.
    pub omit: f64,
}

impl Timing {
    /// Steady state after slow start: ten round trips left out (at least
    /// one second, at most ten), then `seconds` counted — both in whole
    /// seconds, as iperf3 reads `-t` and `-O`, so XTP and kernel TCP run
    /// the same spans.
    pub fn steady(seconds: f64, rtt_ms: u64) -> Timing {
        Timing {
            seconds: seconds.ceil().max(1.0),
            omit: (rtt_ms as f64 * 10.0 / 1e3).ceil().clamp(1.0, 10.0),
        }
    }
}

/// Runs `sender` for `t` under `link` (netem-like, each direction)
/// through `xpress netns` (root).
pub fn through_netns(link: &str, sender: &Sender, t: Timing, seed: u64) -> Result<Outcome, String> {
    let Timing { seconds, omit } = t;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?.display().to_string();
    let report =
        Scratch(std::env::temp_dir().join(format!("xpress-netns-{}-{seed}.json", std::process::id())));
    let limit = (omit + seconds + 90.0).ceil();
    let (a, b) = match sender {
        Sender::Xtp { cc, window, nocheck, rate, raw } => {
            let (serve_raw, bulk_raw) = if *raw {
                (format!(" --raw --mss {RAW_MSS}"), format!(" --raw 10.200.0.2 --mss {RAW_MSS}"))
            } else {
                Default::default()
            };
            (
                format!("exec {exe} serve --listen 10.200.0.1:3636{serve_raw} --duration {limit} >/dev/null"),
                format!(
                    "{exe} bulk --to 10.200.0.1:3636{bulk_raw} -t {seconds} -O {omit} -J{}",
                    xtp_args(cc, *window, *nocheck, *rate)
                ),
            )
        }
        Sender::Tcp { cc, window } => {
            let mut b = format!("iperf3 -c $XPRESS_PEER -t {seconds} -O {omit} -J");
            if let Some(cc) = cc {
                b += &format!(" -C {cc}");
            }
            if let Some(w) = window {
                b += &format!(" -w {w}");
            }
            // The server's own lines would share B's stdout and could land
            // inside the client's JSON (seen once: a CI run's E2 step had
            // "no result" from an iperf3 that had finished).
            ("exec iperf3 -s -1 >/dev/null".to_string(), b)
        }
    };
    let out = Command::new(&exe)
        .args(["netns", "--link", link, "--a", &a, "--b", &b, "--seed", &seed.to_string()])
        .args(["--duration", &limit.to_string(), "--report"])
        .arg(&report.0)
        .output()
        .map_err(|e| format!("cannot run xpress netns: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let fail = || {
        format!(
            "xpress netns --link {link:?} --b {b:?}: no result (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).lines().rev().take(4).collect::<Vec<_>>().join(" / ")
        )
    };
    let mut o = match sender {
        Sender::Xtp { .. } => {
            let v = json_line(&stdout).ok_or_else(fail)?;
            let ctx = &v["context"];
            Outcome {
                bytes: v["bytes"].as_u64().ok_or_else(fail)?,
                seconds: v["seconds"].as_f64().ok_or_else(fail)?,
                retransmits: ctx["retransmitted"].as_u64(),
                timeouts: ctx["timeouts"].as_u64(),
                ..Outcome::default()
            }
        }
        Sender::Tcp { .. } => {
            // iperf3's JSON is one multi-line object; other lines may
            // surround it.
            let start = stdout.find("\n{").map_or(0, |i| i + 1);
            let end = stdout.rfind("\n}").map_or(stdout.len(), |i| i + 2);
            let v: Value = serde_json::from_str(&stdout[start.min(end)..end]).map_err(|_| fail())?;
            if let Some(e) = v["error"].as_str() {
                return Err(format!("iperf3 under xpress netns: {e}"));
            }
            let r = &v["end"]["sum_received"];
            Outcome {
                bytes: r["bytes"].as_u64().ok_or_else(fail)?,
                seconds: r["seconds"].as_f64().ok_or_else(fail)?,
                retransmits: v["end"]["sum_sent"]["retransmits"].as_u64(),
                ..Outcome::default()
            }
        }
    };
    o.mbit_per_s = o.bytes as f64 * 8.0 / o.seconds.max(1e-9) / 1e6;
    o.omitted_seconds = omit;
    o.emulator = "netns".into();
    o.carrier = match sender {
        Sender::Xtp { raw: true, .. } => "ip36",
        Sender::Xtp { .. } => "udp",
        Sender::Tcp { .. } => "tcp",
    }
    .into();
    let rep: Value = std::fs::read_to_string(&report.0)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or("xpress netns wrote no emulator report")?;
    o.valid = rep["valid"].as_bool().unwrap_or(false);
    o.invalid_reasons = rep["invalid_reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(String::from))
        .collect();
    o.p99_error_us = [
        rep["forward"]["release_error_p99_us"].as_f64().unwrap_or(f64::NAN),
        rep["reverse"]["release_error_p99_us"].as_f64().unwrap_or(f64::NAN),
    ];
    Ok(o)
}

/// XTP for `t` under `link` through the in-process relay on loopback
/// (no root needed): the applications library's server and `bulk -t -O`
/// (`xk_apps`), all in this process. Goodput counts bytes acknowledged
/// within the counted time.
pub fn through_relay(
    link: &str,
    cc: &str,
    window: Option<u64>,
    nocheck: bool,
    rate: u64,
    t: Timing,
    seed: u64,
) -> Result<Outcome, String> {
    let Timing { seconds, omit } = t;
    let spec = parse_line(link).map_err(|e| format!("{link:?}: {e}"))?;
    let congestion: Congestion = cc.parse().map_err(|e| format!("--cc {cc}: {e}"))?;
    let server = Server::bind(&ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))?;
    let saddr = server.services()[0].addr; // XTP comes first
    let relay_sock = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let raddr = relay_sock.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = RelayConfig {
        listen: raddr,
        server: saddr,
        forward: spec.clone(),
        reverse: spec,
        seed,
        duration: Duration::from_secs_f64(omit + seconds + 120.0),
        spin: xk_driver::pacer::DEFAULT_SPIN,
        max_p99_error: relay::DEFAULT_MAX_P99_ERROR,
        stop: Some(stop.clone()),
    };
    let relay = thread::spawn(move || relay::run_on(relay_sock, &cfg, &mut None));
    let server_stop = stop.clone();
    let srv = thread::spawn(move || server.run(&server_stop, |_| {}));
    let mut b = BulkConfig::new(raddr, Amount::Time(std::time::Duration::from_secs_f64(seconds)));
    b.cc = congestion;
    b.nocheck = nocheck;
    b.rate_bps = (rate > 0).then_some(rate * 8);
    b.window = window.map(|w| w as usize);
    b.omit = std::time::Duration::from_secs_f64(omit);
    let result = xk_apps::bulk::run(&b, &AtomicBool::new(false), |_| {});
    stop.store(true, Ordering::Relaxed);
    let report = relay.join().map_err(|_| "relay thread panicked".to_string())?.map_err(|e| e.to_string())?;
    let _ = srv.join();
    let r = result?;
    let ctx = r.context.as_ref();
    Ok(Outcome {
        mbit_per_s: r.bits_per_second / 1e6,
        bytes: r.bytes,
        seconds: r.seconds,
        omitted_seconds: omit,
        retransmits: ctx.map(|c| c.retransmitted),
        timeouts: ctx.map(|c| c.timeouts),
        emulator: "relay".into(),
        carrier: "udp".into(),
        valid: report.valid,
        invalid_reasons: report.invalid_reasons.clone(),
        p99_error_us: [
            report.forward.error_quantile(0.99).as_secs_f64() * 1e6,
            report.reverse.error_quantile(0.99).as_secs_f64() * 1e6,
        ],
    })
}

/// Runs `sender` under `link`: through `xpress netns` as root, else XTP
/// through the relay (Err for TCP without root: the caller skips the row).
pub fn bulk(link: &str, sender: &Sender, t: Timing, seed: u64, root: bool) -> Result<Outcome, String> {
    match (sender, root) {
        (_, true) => through_netns(link, sender, t, seed),
        // The relay forwards UDP: raw IP is not possible there.
        (Sender::Xtp { cc, window, nocheck, rate, .. }, false) => {
            through_relay(link, cc, *window, *nocheck, *rate, t, seed)
        }
        (Sender::Tcp { .. }, false) => {
            Err("kernel TCP under the emulated link needs root (xpress netns)".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xtp_through_the_relay_counts_what_the_receiver_acknowledged_in_time() {
        let t = Timing { seconds: 0.5, omit: 0.3 };
        let o = through_relay("delay 5ms rate 20mbit", "cubic", None, false, 0, t, 7).unwrap();
        assert_eq!((o.emulator.as_str(), o.seconds, o.omitted_seconds), ("relay", 0.5, 0.3), "{o:?}");
        // Something got through, and no more than the link carries.
        assert!(o.bytes > 10_000 && o.mbit_per_s <= 20.0 * 1.05, "{o:?}");
        assert!(o.retransmits.is_some() && o.timeouts.is_some(), "{o:?}");
        assert!(
            through_relay("delay 5ms", "vegas", None, false, 0, t, 7).unwrap_err().contains("--cc vegas")
        );
    }
}
