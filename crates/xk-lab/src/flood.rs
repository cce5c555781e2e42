//! FLOOD — spoofed FIRSTs at the highest rate one thread sends through a
//! raw socket, from random 127.16–254.x.y sources, at one `xpress serve`
//! process while a legitimate `xpress bulk --verify` from 127.0.0.1 runs
//! against it — as fast as it can (CPU-bound on this 2-core machine, so it
//! also measures the CPU the flooding thread and the kernel take) or paced
//! at a user's rate (`--rate`: what the protocol keeps for a user whose
//! transfer does not need the whole machine): the server's resident memory
//! before, during (peak) and after; the bulk's goodput against a run of the same bulk without the
//! flood, measured right before (goal ≥ 90 %); what the server sent to
//! spoofed sources per FIRST it accepted, in datagrams and bytes (goal ≤
//! the 3× amplification bound) and after the flood ended (goal 0) — from
//! the server's own counters of packets to unvalidated peers, which the
//! legitimate client leaves after its first round trip. The server runs
//! with its default peer lanes (the validated client on a socket of its
//! own, out of the flood's way) or, as a `peer_lanes = [0]` point, without.
//! Needs root (raw socket); skipped otherwise, saying why.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::serve_proc::ServeProcess;
use crate::spoof::{self, Spoofer};

/// XTP port of the server's verify service.
const VERIFY_PORT: u16 = 10;

/// FLOOD's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Seconds the bulk runs (with and without the flood).
    pub seconds: f64,
    /// Spoofed FIRSTs at most (the flood also stops when the bulk ends).
    pub firsts: u64,
    /// Seconds watched after the flood, for packets still sent to spoofed
    /// sources.
    pub after_s: f64,
    /// Data bytes in each spoofed FIRST.
    pub first_data: usize,
    /// Flood rates, FIRSTs per second; 0: as fast as one thread sends.
    pub rates: Vec<u64>,
    /// The legitimate bulk's rates, Mbit/s (XTP's `--rate`); 0: as fast as
    /// it can. Each flood rate runs with each.
    #[serde(default = "unpaced")]
    pub legit_mbit: Vec<u64>,
    /// The server's `--peer-lanes` (validated clients on sockets of their
    /// own, out of the flood's way; 0: all on the shared socket). Each
    /// setting runs with every flood rate and pace.
    #[serde(default = "default_lanes")]
    pub peer_lanes: Vec<usize>,
    /// The server's `--unvalidated-rate` (datagrams a second read from
    /// unvalidated sources while validated clients have traffic; 0: no
    /// limit). Each setting runs with every other point.
    #[serde(default = "default_intake")]
    pub unvalidated_rate: Vec<u64>,
}

fn unpaced() -> Vec<u64> {
    vec![0]
}

fn default_lanes() -> Vec<usize> {
    vec![xk_apps::server::DEFAULT_PEER_LANES]
}

fn default_intake() -> Vec<u64> {
    vec![xk_driver::intake::DEFAULT_UNVALIDATED_RATE]
}

/// A step: (FIRSTs/s, legitimate Mbit/s, the server's peer lanes, its
/// unvalidated rate).
pub type Point = (u64, u64, usize, u64);

/// One run: the bulk without and with the flood.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The flood rate asked for (0: as fast as one thread sends).
    pub rate: u64,
    /// The legitimate bulk's pace, Mbit/s (0: unpaced).
    #[serde(default)]
    pub legit_mbit: u64,
    /// The server's `--peer-lanes` (results from before lanes read 0, which
    /// is what those servers did).
    #[serde(default)]
    pub peer_lanes: usize,
    /// The server's `--unvalidated-rate` (results from before it read 0,
    /// which is what those servers did: no limit).
    #[serde(default)]
    pub unvalidated_rate: u64,
    /// Times the server set its shared socket aside, the budget spent.
    #[serde(default)]
    pub unvalidated_deferred: u64,
    /// Goodput of the bulk alone, Mbit/s.
    pub alone_mbit_per_s: f64,
    /// Goodput of the same bulk under the flood, Mbit/s.
    pub flood_mbit_per_s: f64,
    /// Both bulks' hashes matched the server's.
    pub verified: bool,
    /// Why the bulk under the flood gave no result (e.g. its FIRSTs were
    /// lost in the flood and it gave up connecting).
    #[serde(default)]
    pub flood_bulk_error: Option<String>,
    /// Spoofed FIRSTs sent, and their rate.
    pub firsts_sent: u64,
    /// Per second.
    pub firsts_per_s: f64,
    /// Bytes of one FIRST (XTP).
    pub first_bytes: u64,
    /// FIRSTs the server accepted (made a context for; the rest were lost
    /// in the socket buffers).
    pub accepted: u64,
    /// Datagrams the server sent to unvalidated peers during the flood.
    pub spoofed_datagrams: u64,
    /// Their bytes.
    pub spoofed_bytes: u64,
    /// Datagrams to unvalidated peers in the `after_s` after the flood.
    pub spoofed_datagrams_after: u64,
    /// Half-open contexts shed for newer ones.
    pub half_open_evicted: u64,
    /// Contexts held at the end of the flood.
    pub contexts_at_flood_end: u64,
    /// Contexts held `after_s` after it.
    pub contexts_after: u64,
    /// Server RSS before, peak during, after (`after_s` later), kB.
    pub rss_before_kb: u64,
    /// Peak during.
    pub rss_during_kb: u64,
    /// After.
    pub rss_after_kb: u64,
}

impl Row {
    /// Goodput kept under the flood.
    pub fn kept(&self) -> f64 {
        if self.alone_mbit_per_s > 0.0 { self.flood_mbit_per_s / self.alone_mbit_per_s } else { 0.0 }
    }
    /// Bytes sent to spoofed sources per byte of FIRST accepted.
    pub fn amplification(&self) -> f64 {
        self.spoofed_bytes as f64 / (self.accepted * self.first_bytes).max(1) as f64
    }
}

/// Runs `exe bulk --verify -t seconds` (paced at `mbit` if not 0)
/// against `to`; (Mbit/s, verified).
fn bulk(exe: &Path, to: SocketAddr, seconds: f64, mbit: u64) -> Result<(f64, bool), String> {
    let mut cmd = Command::new(exe);
    cmd.args(["bulk", "--to", &to.to_string(), "--verify", "-J", "-t", &seconds.to_string()]);
    if mbit > 0 {
        cmd.args(["--rate", &format!("{mbit}mbit")]);
    }
    let out = cmd.output().map_err(|e| format!("xpress bulk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = text.lines().rev().find_map(|l| serde_json::from_str(l).ok()).ok_or_else(|| {
        format!("xpress bulk printed no result: {}", String::from_utf8_lossy(&out.stderr).trim())
    })?;
    let verified = v["sha256"].is_string() && v["sha256"] == v["receiver_sha256"];
    Ok((v["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6, verified))
}

/// One flood run against a fresh `exe serve`.
pub fn flood(
    exe: &Path,
    p: &Params,
    (rate, legit_mbit, peer_lanes, unvalidated_rate): Point,
    seed: u64,
) -> Result<Row, String> {
    let mut spoofer = Spoofer::new(seed)?;
    let lanes = [
        "--peer-lanes".to_string(),
        peer_lanes.to_string(),
        "--unvalidated-rate".to_string(),
        unvalidated_rate.to_string(),
    ];
    let server = ServeProcess::start(exe, 0.25, p.seconds * 2.0 + p.after_s + 60.0, &lanes)?;
    let addr = server.addr();
    let SocketAddr::V4(to) = addr else { return Err("the server is not on IPv4".into()) };
    std::thread::sleep(Duration::from_millis(300));
    let mut row = Row {
        rate,
        legit_mbit,
        peer_lanes,
        unvalidated_rate,
        rss_before_kb: server.rss_kb(),
        ..Row::default()
    };
    let (alone, ok1) = bulk(exe, addr, p.seconds, legit_mbit)?;
    row.alone_mbit_per_s = alone;
    let first = spoof::first_packet(addr, VERIFY_PORT, p.first_data);
    row.first_bytes = first.len() as u64;
    let e0 = server.engine().ok_or("no engine report")?;
    let limit = Duration::from_secs_f64(p.seconds);
    let (sent, flooded, peak) = std::thread::scope(|s| {
        let b = s.spawn(|| bulk(exe, addr, p.seconds, legit_mbit));
        let sent = spoofer.flood(to, &first, p.firsts, rate, limit);
        let mut peak = server.rss_kb();
        while !b.is_finished() {
            peak = peak.max(server.rss_kb());
            std::thread::sleep(Duration::from_millis(20));
        }
        (sent, b.join().unwrap_or_else(|_| Err("bulk thread panicked".into())), peak)
    });
    // A bulk that could not get through is the flood's result, not a
    // failure of the experiment.
    let (with, ok2) = flooded.unwrap_or_else(|e| {
        row.flood_bulk_error = Some(e);
        (0.0, false)
    });
    // The flood ends when the server has read its last FIRST: at full
    // speed its socket still holds a backlog when the sender stops, and
    // answers to those FIRSTs are the flood's, not sent "after" it (a CI
    // run counted 983 such). Drained: two fresh reports with no datagram
    // read between them (at most 5 s).
    let mut e1 = server.engine().ok_or("no engine report")?;
    for _ in 0..20 {
        let next = server.engine().ok_or("no engine report")?;
        let drained = next.get("datagrams_in") == e1.get("datagrams_in");
        e1 = next;
        if drained {
            break;
        }
    }
    let flood_end = Instant::now();
    row.rss_during_kb = peak.max(server.rss_kb());
    std::thread::sleep(Duration::from_secs_f64(p.after_s).saturating_sub(flood_end.elapsed()));
    let e2 = server.engine().ok_or("no engine report")?;
    row.rss_after_kb = server.rss_kb();
    drop(server.stop());
    row.flood_mbit_per_s = with;
    row.verified = ok1 && ok2;
    row.firsts_sent = sent.datagrams;
    row.firsts_per_s = sent.datagrams as f64 / sent.seconds.max(1e-9);
    // The legitimate bulk's own context counts once in each: its FIRST is
    // accepted and answered before it validates.
    row.accepted = (e1.get("accepted") - e0.get("accepted")).saturating_sub(1);
    row.spoofed_datagrams =
        (e1.get("unvalidated_datagrams_out") - e0.get("unvalidated_datagrams_out")).saturating_sub(1);
    row.spoofed_bytes = e1.get("unvalidated_bytes_out") - e0.get("unvalidated_bytes_out");
    row.spoofed_datagrams_after = e2.get("unvalidated_datagrams_out") - e1.get("unvalidated_datagrams_out");
    row.half_open_evicted = e1.get("half_open_evicted") - e0.get("half_open_evicted");
    row.unvalidated_deferred = e1.deferred.saturating_sub(e0.deferred);
    row.contexts_at_flood_end = e1.contexts;
    row.contexts_after = e2.contexts;
    Ok(row)
}

/// FLOOD.
pub struct Flood(Params);

impl Experiment for Flood {
    const ID: &'static str = "FLOOD";
    const TITLE: &'static str = "Flood: spoofed FIRSTs while a legitimate transfer runs";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        if quick {
            Params {
                seconds: 2.0,
                firsts: 1_000_000,
                after_s: 2.0,
                first_data: 64,
                rates: vec![20_000, 0],
                legit_mbit: vec![0],
                peer_lanes: default_lanes(),
                unvalidated_rate: default_intake(),
            }
        } else {
            // A transfer at 1 Gbit/s (one that leaves the machine room)
            // under a paced and a full-speed flood, watched 5 s after.
            // plans/flood.toml sweeps rates, transfer speeds and lanes and
            // watches 65 s after (every half-open context expires at 60 s).
            Params {
                seconds: 5.0,
                firsts: 20_000_000,
                after_s: 5.0,
                first_data: 64,
                rates: vec![20_000, 0],
                legit_mbit: vec![1000],
                peer_lanes: default_lanes(),
                unvalidated_rate: default_intake(),
            }
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if !(0.5..=600.0).contains(&p.seconds) || !(0.0..=600.0).contains(&p.after_s) || p.first_data > 1000 {
            return Err("seconds 0.5 to 600, after_s 0 to 600, first_data at most 1000".into());
        }
        // XTP's rate field holds 2^32 - 1 bytes/s (34,359 Mbit/s).
        if p.legit_mbit.is_empty() || p.legit_mbit.iter().any(|&m| m > 34_000) {
            return Err("legit_mbit: at least one, each 0 (unpaced) to 34,000 Mbit/s".into());
        }
        if p.peer_lanes.is_empty() || p.peer_lanes.iter().any(|&l| l > 4096) {
            return Err("peer_lanes: at least one, each 0 (none) to 4,096".into());
        }
        if p.unvalidated_rate.is_empty() {
            return Err("unvalidated_rate: at least one (0: no limit)".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        Flood(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, env: &Env) -> Vec<Step<Point>> {
        if !env.root {
            return Vec::new();
        }
        let p = &self.0;
        p.unvalidated_rate
            .iter()
            .flat_map(|&u| p.peer_lanes.iter().map(move |&l| (l, u)))
            .flat_map(|(l, u)| p.legit_mbit.iter().map(move |&m| (m, l, u)))
            .flat_map(|(m, l, u)| p.rates.iter().map(move |&r| (r, m, l, u)))
            .map(|(r, m, l, u)| Step {
                label: format!(
                    "bulk --verify {} s{} alone, then under spoofed FIRSTs at {}{}{}",
                    p.seconds,
                    legit_text(m),
                    rate_text(r),
                    lanes_text(l),
                    intake_text(u)
                ),
                point: (r, m, l, u),
            })
            .collect()
    }
    fn notes(&self, env: &Env) -> Vec<String> {
        if env.root {
            Vec::new()
        } else {
            vec!["FLOOD: skipped: spoofing source addresses needs a raw socket with IP_HDRINCL (root)".into()]
        }
    }
    fn run(&mut self, &point: &Point, env: &Env) -> Result<Vec<Row>, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        Ok(vec![flood(&exe, &self.0, point, env.seed)?])
    }
    fn csv_key() -> &'static [&'static str] {
        &["unvalidated_rate", "peer_lanes", "legit_mbit", "rate"]
    }
    fn render(p: &Params, rows: &[Row], notes: &[String], page: &mut Page) {
        let t: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    rate_text(r.rate),
                    if r.peer_lanes == 0 {
                        "shared socket".into()
                    } else if r.unvalidated_rate == 0 {
                        format!("{} lanes, unvalidated input unlimited", r.peer_lanes)
                    } else {
                        format!(
                            "{} lanes, unvalidated input ≤ {}/s beside them (set aside {} times)",
                            r.peer_lanes, r.unvalidated_rate, r.unvalidated_deferred
                        )
                    },
                    if r.legit_mbit == 0 { "unpaced".into() } else { format!("{} Mbit/s", r.legit_mbit) },
                    format!("{} ({:.0}/s, {} B each)", r.firsts_sent, r.firsts_per_s, r.first_bytes),
                    r.accepted.to_string(),
                    format!(
                        "{:.0} → {:.0} ({:.0} %){}",
                        r.alone_mbit_per_s,
                        r.flood_mbit_per_s,
                        r.kept() * 100.0,
                        match (&r.flood_bulk_error, r.verified) {
                            (Some(e), _) => format!(" — {e}"),
                            (None, false) => " NOT VERIFIED".into(),
                            _ => String::new(),
                        }
                    ),
                    format!("{} / {} / {}", r.rss_before_kb, r.rss_during_kb, r.rss_after_kb),
                    format!(
                        "{} dgrams, {} B = {:.2}× the FIRST bytes",
                        r.spoofed_datagrams,
                        r.spoofed_bytes,
                        r.amplification()
                    ),
                    r.spoofed_datagrams_after.to_string(),
                    format!(
                        "{} ({} → {} held)",
                        r.half_open_evicted, r.contexts_at_flood_end, r.contexts_after
                    ),
                ]
            })
            .collect();
        page.table(
            &format!(
                "Measured here: `xpress bulk --verify -t {}` from 127.0.0.1 against `xpress serve`, alone and then while one thread sends spoofed FIRSTs (to the verify port, {} B of data, no close) from random 127.16–254.x.y sources through a raw socket as fast as it can; watched {} s after",
                p.seconds, p.first_data, p.after_s
            ),
            &[
                "flood asked",
                "server's clients",
                "bulk paced at",
                "spoofed FIRSTs sent",
                "accepted by the server",
                "bulk Mbit/s: alone → under flood (kept)",
                "server RSS kB before / peak / after",
                "sent to spoofed sources",
                "datagrams to spoofed sources after the flood",
                "half-open evicted (contexts at the flood's end → after)",
            ],
            &t,
        );
        for n in notes {
            page.note(n);
        }
        for r in rows {
            page.reading(&format!(
                "At {}: goals: legitimate goodput ≥ 90 % of the run without the flood — {:.0} %, {}; sent to spoofed sources ≤ 3× the bytes received from them — {:.2}×, {} ({:.2} datagrams per FIRST accepted); nothing sent to them after the flood — {} datagrams, {}. Server memory {} kB before, {} kB at the peak (the half-open table is bounded: 16,384 contexts, 64 MiB), {} kB after. The flood and the bulk share this machine's two cores with the server, so part of any goodput lost is CPU taken by the flooding thread, not the protocol{}.",
                case(r),
                r.kept() * 100.0,
                if r.kept() >= 0.9 { "met" } else { "not met" },
                r.amplification(),
                if r.amplification() <= 3.0 { "met" } else { "not met" },
                r.spoofed_datagrams as f64 / r.accepted.max(1) as f64,
                r.spoofed_datagrams_after,
                if r.spoofed_datagrams_after == 0 { "met" } else { "not met" },
                r.rss_before_kb,
                r.rss_during_kb,
                r.rss_after_kb,
                if r.legit_mbit == 0 {
                    " (the unpaced bulk used both cores without the flood; the flooding thread and the kernel's delivery of its datagrams take one of them, so this row measures the machine as much as the protocol)"
                } else {
                    ""
                }
            ));
            if let Some(e) = &r.flood_bulk_error {
                page.reading(&format!(
                    "At {}: the legitimate bulk started during the flood gave no result ({e}): its FIRST and retries were lost with the flood's datagrams in the server's socket buffer before the engine saw them — below the protocol, where admission control cannot help.",
                    case(r)
                ));
            }
        }
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        rows.iter()
            .map(|r| {
                format!(
                    "FLOOD at {}: {} spoofed FIRSTs ({:.0}/s), {} accepted; bulk {:.0} → {:.0} Mbit/s ({:.0} % kept); to spoofed sources {:.2}× bytes, {} datagrams after; RSS {} / {} / {} kB",
                    case(r),
                    r.firsts_sent,
                    r.firsts_per_s,
                    r.accepted,
                    r.alone_mbit_per_s,
                    r.flood_mbit_per_s,
                    r.kept() * 100.0,
                    r.amplification(),
                    r.spoofed_datagrams_after,
                    r.rss_before_kb,
                    r.rss_during_kb,
                    r.rss_after_kb
                )
            })
            .collect()
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("goodput kept under flood at {}", case(r)), r.kept(), ""))
    }
}

/// ` (bulk paced at M Mbit/s)` for a paced legitimate bulk.
fn legit_text(m: u64) -> String {
    if m == 0 { String::new() } else { format!(" (bulk paced at {m} Mbit/s)") }
}

/// A row's flood rate, the bulk's pace and the server's lanes, for readings.
fn case(r: &Row) -> String {
    format!(
        "{}{}{}{}",
        rate_text(r.rate),
        legit_text(r.legit_mbit),
        lanes_text(r.peer_lanes),
        intake_text(r.unvalidated_rate)
    )
}

/// ` (unvalidated input unlimited)` when the server ran without the
/// budget.
fn intake_text(u: u64) -> String {
    if u == 0 { " (unvalidated input unlimited)".into() } else { String::new() }
}

/// ` (no peer lanes)` when the server ran without them.
fn lanes_text(l: usize) -> String {
    if l == 0 { " (no peer lanes)".into() } else { String::new() }
}

fn rate_text(r: u64) -> String {
    if r == 0 { "full speed".into() } else { format!("{r}/s") }
}
