//! E3 (seed 003, Tables 5.3–5.5, Fig. 5.7): file retrieval 1 B … 100 MB
//! with our FTP (`xk-ftp`) over kernel TCP and over XTP, and a standard
//! pair (vsftpd serving, curl retrieving), on loopback and over the
//! emulated `ethernet-100m` link that stands for the seed's 100 Mbit/s
//! network (two network namespaces joined by `xpress netns`; root).
//!
//! Separate processes are the point here, as in the seed: each server is a
//! process, and each retrieval one client process (`e3_peers` runs them and
//! reads their results), so each side's CPU time and memory are its own.
//! Per retrieval: latency (the client's own timing from connecting to the
//! last byte, login included, process start excluded), throughput as the seed defines it (8S / (1024² L) Mbit/s),
//! the client's user and system CPU time and peak memory (GNU time, when
//! installed; otherwise this process's waited-for children and our
//! client's own VmHWM), the server's CPU (its `/proc/PID/stat` before and
//! after, vsftpd's session children included) and resident and peak
//! memory. Over the emulated link the server runs inside a namespace and
//! only the client side is measured.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::e3_peers::{self as peers, PAIR, Sample};
use crate::serve_proc::Reaped;

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::serve_proc::status_kb;
use crate::stats;
use crate::svg::{Series, plot_series};

/// Seed 003, Table 5.3: latency (s) for 1 B, 100 B, 1 KB, 10 KB, 100 KB,
/// 1 MB, 10 MB, 100 MB.
const SEED003_T53: [(&str, [f64; 8]); 3] = [
    ("PIX", [0.0353, 0.0358, 0.0375, 0.0413, 0.047, 0.118, 0.965, 10.45]),
    ("x-kernel", [0.0348, 0.0353, 0.037, 0.0407, 0.0454, 0.115, 0.937, 10.17]),
    ("NcFTP", [0.0341, 0.0342, 0.0361, 0.0391, 0.0436, 0.11, 0.9, 9.75]),
];
const SEED003_T53_SIZES: [u64; 8] = [1, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];
/// Seed 003, Table 5.5: footprint in KB, (server, client) at initialisation
/// and during a 100 MB transfer.
/// (implementation, (server, client) at initialisation, (server, client) at 100 MB).
type Footprint = (&'static str, (u64, u64), (u64, u64));
const SEED003_T55: [Footprint; 3] = [
    ("PIX", (768, 848), (804, 904)),
    ("x-kernel", (672, 664), (688, 700)),
    ("NcFTP", (1288, 1152), (1288, 1224)),
];

/// E3's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// File sizes on loopback, bytes.
    pub sizes: Vec<u64>,
    /// What serves and retrieves: `tcp` and `xtp` (ours), `vsftpd-curl`
    /// (the standard pair; root).
    pub transports: Vec<String>,
    /// Retrievals per size and transport on loopback.
    pub repetitions: u32,
    /// The emulated link, in tc-netem's words (`docs/NETEM.md`).
    #[serde(default = "default_link")]
    pub link: String,
    /// File sizes over the emulated link (none: no link rows).
    #[serde(default)]
    pub link_sizes: Vec<u64>,
    /// Retrievals per size and transport over the link.
    #[serde(default = "one")]
    pub link_repetitions: u32,
}

fn default_link() -> String {
    "profile ethernet-100m".into()
}

fn one() -> u32 {
    1
}

fn loopback() -> String {
    "loopback".into()
}

/// One retrieval.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// tcp, xtp or vsftpd-curl.
    pub transport: String,
    /// `loopback`, or the emulated link's description.
    #[serde(default = "loopback")]
    pub link: String,
    /// File bytes.
    pub size: u64,
    /// Repetition.
    pub rep: u32,
    /// Connect to last byte (login included), seconds.
    pub latency_s: f64,
    /// 8S / (1024² L), the seed's definition.
    pub mbit_per_s: f64,
    /// Client CPU, user and system, seconds.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub client_user_s: f64,
    /// Client CPU, system.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub client_sys_s: f64,
    /// Server CPU during the retrieval, user.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub server_user_s: f64,
    /// Server CPU during the retrieval, system.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub server_sys_s: f64,
    /// The client's peak resident memory, kB.
    pub client_peak_kb: u64,
    /// The server's resident memory after the retrieval, kB.
    pub server_rss_kb: u64,
    /// The server's peak resident memory so far, kB.
    pub server_peak_kb: u64,
    /// Whether the emulator kept its timing (always true on loopback).
    #[serde(default = "yes")]
    pub valid: bool,
}

fn yes() -> bool {
    true
}

/// One step: a retrieval on loopback, or every retrieval of one transport
/// over the emulated link (one `xpress netns` run).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Point {
    /// One retrieval on loopback.
    Loopback {
        /// What serves and retrieves.
        transport: String,
        /// File bytes.
        size: u64,
        /// Repetition.
        rep: u32,
    },
    /// All of `link_sizes` × `link_repetitions` over the link.
    Link {
        /// What serves and retrieves.
        transport: String,
    },
}

struct Server {
    proc: Reaped,
    addr: String,
    init_kb: u64,
}

/// E3.
pub struct E3 {
    p: Params,
    root: Option<PathBuf>,
    servers: Vec<(String, Server)>,
    /// GNU time is installed.
    time: bool,
}

impl Drop for E3 {
    fn drop(&mut self) {
        self.servers.clear();
        if let Some(r) = &self.root {
            let _ = std::fs::remove_dir_all(r);
        }
    }
}

/// (user, system) CPU seconds from a `/proc/.../stat` line: fields `u`, `u+1`
/// (1-based, after the command name), in clock ticks of 1/100 s (Linux's
/// USER_HZ on x86 and ARM).
fn cpu(stat: &str, u: usize) -> Option<(f64, f64)> {
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let get = |i: usize| f.get(i - 3)?.parse::<f64>().ok();
    Some((get(u)? / 100.0, get(u + 1)? / 100.0))
}

impl E3 {
    /// Writes the files (every size of either list) once.
    fn files(&mut self) -> Result<PathBuf, String> {
        if let Some(r) = &self.root {
            return Ok(r.clone());
        }
        let root = std::env::temp_dir().join(format!("xpress-e3-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        // vsftpd serves it to its anonymous user.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        self.root = Some(root.clone());
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut sizes: Vec<u64> = self.p.sizes.iter().chain(&self.p.link_sizes).copied().collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let mut f = std::fs::File::create(root.join(format!("f{size}"))).map_err(|e| e.to_string())?;
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                std::io::Write::write_all(&mut f, &chunk[..n]).map_err(|e| e.to_string())?;
                left -= n as u64;
            }
        }
        Ok(root)
    }

    /// The loopback server for `t`, started on first use.
    fn server(&mut self, t: &str) -> Result<&Server, String> {
        if let Some(i) = self.servers.iter().position(|s| s.0 == t) {
            return Ok(&self.servers[i].1);
        }
        let root = self.files()?;
        let (proc, addr) = if t == PAIR {
            peers::vsftpd_loopback(&std::env::temp_dir(), &root)?
        } else {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let mut child = Command::new(&exe)
                .args(["ftp", "serve", "--root"])
                .arg(&root)
                .args(["--listen", "127.0.0.1:0", "--user", "lab", "--password", "lab", "--transport", t])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("start xpress ftp serve: {e}"))?;
            let out = child.stdout.take().ok_or("no stdout")?;
            let proc = Reaped(child);
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).map_err(|e| e.to_string())?;
            let addr = line
                .strip_prefix("ftp on ")
                .and_then(|r| r.split([' ', ',']).next())
                .ok_or_else(|| format!("xpress ftp serve said {line:?}"))?
                .to_string();
            (proc, addr)
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        if t == PAIR {
            // The start-up probe's session, so it is not counted in the
            // first retrieval's CPU time.
            wait_childless(proc.0.id());
        }
        let init_kb = status_kb(proc.0.id(), "VmRSS:");
        self.servers.push((t.to_string(), Server { proc, addr, init_kb }));
        Ok(&self.servers.last().expect("pushed").1)
    }

    fn loopback(&mut self, t: &str, size: u64, rep: u32) -> Result<Row, String> {
        let time = self.time;
        let server = self.server(t)?;
        let (spid, addr, init_kb) = (server.proc.0.id(), server.addr.clone(), server.init_kb);
        // vsftpd's sessions are its children: count them once reaped.
        let server_cpu = |pid: u32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let own = cpu(&stat, 14);
            if t == PAIR { own.zip(cpu(&stat, 16)).map(|(a, b)| (a.0 + b.0, a.1 + b.1)) } else { own }
        };
        let before_s = server_cpu(spid);
        let before_c = cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default(), 16);
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let script = peers::client_script(&exe, t, &addr, &[size], 1, time);
        let out = Command::new("sh").args(["-c", &script]).output().map_err(|e| format!("run sh: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let s = peers::parse(&text)?.pop().ok_or_else(|| format!("no result: {text}"))?;
        // vsftpd's session has ended and been reaped, or its CPU is unknown.
        let reaped = t != PAIR || wait_childless(spid);
        let after_s = if reaped { server_cpu(spid) } else { None };
        let after_c = cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default(), 16);
        let d = |a: Option<(f64, f64)>, b: Option<(f64, f64)>| match (a, b) {
            (Some(a), Some(b)) => (b.0 - a.0, b.1 - a.1),
            _ => (f64::NAN, f64::NAN),
        };
        let (su, ss) = d(before_s, after_s);
        let mut row = row(t, "loopback", rep, &s, d(before_c, after_c))?;
        row.server_user_s = su;
        row.server_sys_s = ss;
        row.server_rss_kb = status_kb(spid, "VmRSS:");
        row.server_peak_kb = status_kb(spid, "VmHWM:").max(init_kb);
        Ok(row)
    }

    /// Every link size and repetition of `t` in one `xpress netns` run:
    /// the server in namespace A, the client script in B.
    fn over_link(&mut self, t: &str, seed: u64) -> Result<Vec<Row>, String> {
        let root = self.files()?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let listen = "10.200.0.1:2121";
        let a = if t == PAIR {
            peers::vsftpd_cmd(&peers::vsftpd_conf(&std::env::temp_dir(), &root, "10.200.0.1", 2121)?)
        } else {
            peers::our_server_cmd(&exe, &root, listen, t)
        };
        let b = peers::client_script(&exe, t, listen, &self.p.link_sizes, self.p.link_repetitions, self.time);
        // At 100 Mbit/s the largest file takes 8·size/1e8 s; generous slack.
        let bytes: u64 = self.p.link_sizes.iter().sum::<u64>() * u64::from(self.p.link_repetitions);
        let limit = 60 + bytes / 1_000_000;
        let report = std::env::temp_dir().join(format!("xpress-e3-netns-{}.json", std::process::id()));
        let out = Command::new(&exe)
            .args(["netns", "--link", &self.p.link, "--a", &a, "--b", &b, "--seed", &seed.to_string()])
            .args(["--settle", "1", "--duration", &limit.to_string(), "--report"])
            .arg(&report)
            .output()
            .map_err(|e| format!("cannot run xpress netns: {e}"))?;
        let rep: serde_json::Value = std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&report);
        let text = String::from_utf8_lossy(&out.stdout);
        let samples = peers::parse(&text).map_err(|e| {
            format!(
                "over {}: {e} (xpress netns: {})",
                self.p.link,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
        let valid = rep["valid"].as_bool().unwrap_or(false);
        samples
            .iter()
            .map(|s| {
                let mut r = row(t, &self.p.link, s.rep, s, (f64::NAN, f64::NAN))?;
                r.valid = valid;
                Ok(r)
            })
            .collect()
    }
}

/// A row from a retrieval's sample; `children` is the client's CPU from
/// this process's waited-for children, used without GNU time.
fn row(t: &str, link: &str, rep: u32, s: &Sample, children: (f64, f64)) -> Result<Row, String> {
    if s.bytes != s.size {
        return Err(format!("over {t} ({link}): got {} of {} bytes", s.bytes, s.size));
    }
    let (cu, cs, peak) = match s.usage {
        Some((u, sys, kb)) => (u, sys, kb),
        None => (children.0, children.1, s.self_peak_kb),
    };
    Ok(Row {
        transport: t.to_string(),
        link: link.to_string(),
        size: s.size,
        rep,
        latency_s: s.latency_s,
        mbit_per_s: s.size as f64 * 8.0 / (1024.0 * 1024.0) / s.latency_s.max(1e-9),
        client_user_s: cu,
        client_sys_s: cs,
        server_user_s: f64::NAN,
        server_sys_s: f64::NAN,
        client_peak_kb: peak,
        server_rss_kb: 0,
        server_peak_kb: 0,
        valid: true,
    })
}

/// How a transport is named in the tables.
fn name(t: &str) -> String {
    if t == PAIR { "vsftpd + curl".to_string() } else { format!("ours over {t}") }
}

/// Latency and throughput per size and transport (medians), seed 003's
/// Table 5.3 beside.
fn latency_table(p: &Params, rows: &[Row], sizes: &[u64], page: &mut Page, caption: &str) {
    let lat = stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.latency_s);
    let thr = stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.mbit_per_s);
    let get = |g: &[((u64, String), stats::Spread, Vec<&Row>)], size: u64, t: &str| {
        g.iter().find(|x| x.0.0 == size && x.0.1 == t).map(|x| x.1)
    };
    let mut body = Vec::new();
    for &size in sizes {
        let mut cells = vec![size.to_string()];
        for t in &p.transports {
            cells.push(get(&lat, size, t).map_or("—".into(), |s| format!("{:.4}", s.median)));
            cells.push(get(&thr, size, t).map_or("—".into(), |s| format!("{:.1}", s.median)));
        }
        let seed = SEED003_T53_SIZES.iter().position(|&s| s == size);
        for (_, v) in SEED003_T53 {
            cells.push(seed.map_or("—".into(), |i| format!("{}", v[i])));
        }
        body.push(cells);
    }
    let mut header = vec!["file bytes".to_string()];
    for t in &p.transports {
        header.push(format!("{}: latency s", name(t)));
        header.push(format!("{}: Mbit/s", name(t)));
    }
    for (n, _) in SEED003_T53 {
        header.push(format!("{n} 2003: latency s"));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    page.table(caption, &header, &body);
}

/// Waits (up to 1 s) until `pid` has no child processes left (vsftpd's
/// session process has exited and been reaped, so its CPU time counts).
/// False if it cannot tell (no `/proc/PID/task/PID/children`, a kernel
/// without `CONFIG_PROC_CHILDREN`) or a child is still there after 1 s.
fn wait_childless(pid: u32) -> bool {
    for _ in 0..100 {
        let Ok(kids) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) else {
            return false;
        };
        if kids.trim().is_empty() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// The seed's throughput (8S/(1024² L), Mbit/s) at `size` by Table 5.3, as
/// "PIX a, x-kernel b, NcFTP c", if the table has the size.
fn seed_throughput(size: u64) -> Option<String> {
    let i = SEED003_T53_SIZES.iter().position(|&s| s == size)?;
    let v: Vec<String> = SEED003_T53
        .iter()
        .map(|(n, l)| format!("{n} {:.1}", size as f64 * 8.0 / (1024.0 * 1024.0) / l[i]))
        .collect();
    Some(v.join(", "))
}

impl Experiment for E3 {
    const ID: &'static str = "E3";
    const TITLE: &'static str =
        "File retrieval 1 B – 100 MB with FTP over kernel TCP and over XTP and a standard pair (seed 003)";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            sizes: if quick { vec![1, 1_000, 1_000_000] } else { SEED003_T53_SIZES.to_vec() },
            transports: vec!["tcp".into(), "xtp".into(), PAIR.into()],
            repetitions: if quick { 1 } else { 3 },
            link: default_link(),
            // The seed's sizes up to 10 MB at 100 Mbit/s take about 4 s a
            // transport; plans/e3-full.toml runs all of them, 3 times.
            link_sizes: if quick { vec![1_000, 1_000_000] } else { vec![1, 1_000, 100_000, 10_000_000] },
            link_repetitions: 1,
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        let too_big = |v: &[u64]| v.iter().any(|&s| s > 10_000_000_000);
        if p.sizes.is_empty() || too_big(&p.sizes) || too_big(&p.link_sizes) {
            return Err("sizes: at least one, each at most 10 GB (link_sizes too)".into());
        }
        if let Some(t) = p.transports.iter().find(|t| !matches!(t.as_str(), "tcp" | "xtp" | PAIR)) {
            return Err(format!("transports: {t:?} is not tcp, xtp or {PAIR}"));
        }
        if !(1..=100).contains(&p.repetitions) || !(1..=100).contains(&p.link_repetitions) {
            return Err("repetitions and link_repetitions: 1 to 100".into());
        }
        xk_netemu::parse_line(&p.link).map_err(|e| format!("link {:?}: {e}", p.link))?;
        Ok(())
    }
    fn new(p: Params) -> Self {
        E3 { p, root: None, servers: Vec::new(), time: peers::have_gnu_time() }
    }
    fn params(&self) -> &Params {
        &self.p
    }
    fn steps(&self, env: &Env) -> Vec<Step<Point>> {
        let pair_missing = peers::pair_missing(env.root);
        let runs = |t: &&String| t.as_str() != PAIR || pair_missing.is_none();
        let mut out = Vec::new();
        for &size in &self.p.sizes {
            for t in self.p.transports.iter().filter(runs) {
                for rep in 1..=self.p.repetitions {
                    out.push(Step {
                        label: format!(
                            "FTP over {t}: {size} B file, retrieval {rep} of {}",
                            self.p.repetitions
                        ),
                        point: Point::Loopback { transport: t.clone(), size, rep },
                    });
                }
            }
        }
        if env.root && !self.p.link_sizes.is_empty() {
            for t in self.p.transports.iter().filter(runs) {
                out.push(Step {
                    label: format!(
                        "FTP over {t} through {}: {} file sizes × {}",
                        self.p.link,
                        self.p.link_sizes.len(),
                        self.p.link_repetitions
                    ),
                    point: Point::Link { transport: t.clone() },
                });
            }
        }
        out
    }
    fn notes(&self, env: &Env) -> Vec<String> {
        let mut n = Vec::new();
        if self.p.transports.iter().any(|t| t == PAIR)
            && let Some(why) = peers::pair_missing(env.root)
        {
            n.push(format!("E3: the standard pair (vsftpd + curl) is skipped: {why}"));
        }
        if !env.root && !self.p.link_sizes.is_empty() {
            n.push(format!("E3: the rows over {} are skipped: network namespaces need root", self.p.link));
        }
        if !self.time {
            n.push("E3: GNU time (/usr/bin/time) is not installed: the client's CPU counts this process's waited-for children and curl's memory is not measured".into());
        }
        n
    }
    fn run(&mut self, point: &Point, env: &Env) -> Result<Vec<Row>, String> {
        match point {
            Point::Loopback { transport, size, rep } => Ok(vec![self.loopback(transport, *size, *rep)?]),
            Point::Link { transport } => self.over_link(transport, env.seed),
        }
    }
    fn csv_key() -> &'static [&'static str] {
        &["transport", "link", "size", "rep"]
    }
    fn render(p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        let (looped, linked): (Vec<Row>, Vec<Row>) = rows.iter().cloned().partition(|r| r.link == "loopback");
        latency_table(
            p,
            &looped,
            &p.sizes,
            page,
            &format!(
                "Measured here on loopback: median of {} retrieval(s); throughput 8S/(1024²·L) as in the seed; seed 003 Table 5.3 (a 100 Mbit/s network, 2003) beside",
                p.repetitions
            ),
        );
        if !linked.is_empty() {
            let invalid = linked.iter().any(|r| !r.valid);
            latency_table(
                p,
                &linked,
                &p.link_sizes,
                page,
                &format!(
                    "Over the emulated link `{}` (two network namespaces, `xpress netns`): median of {} retrieval(s) — the situation of the seed's Table 5.3{}",
                    p.link,
                    p.link_repetitions,
                    if invalid {
                        "; the emulator did not keep its timing in some runs (marked invalid in the CSV)"
                    } else {
                        ""
                    }
                ),
            );
        }
        let thr = stats::group(&looped, |r| (r.size, r.transport.clone()), |r| r.mbit_per_s);
        let link_thr = stats::group(&linked, |r| (r.size, r.transport.clone()), |r| r.mbit_per_s);
        // CPU and memory at the largest loopback size.
        if let Some(&big) = p.sizes.iter().max() {
            let res: Vec<Vec<String>> = p
                .transports
                .iter()
                .filter_map(|t| {
                    let r: Vec<&Row> = looped.iter().filter(|r| r.size == big && r.transport == *t).collect();
                    (!r.is_empty()).then(|| {
                        let m = |f: fn(&Row) -> f64| stats::median(r.iter().map(|x| f(x)));
                        vec![
                            name(t),
                            format!("{:.3} / {:.3}", m(|x| x.client_user_s), m(|x| x.client_sys_s)),
                            format!("{:.3} / {:.3}", m(|x| x.server_user_s), m(|x| x.server_sys_s)),
                            format!(
                                "{:.0} / {:.0}",
                                m(|x| x.server_rss_kb as f64),
                                m(|x| x.client_peak_kb as f64)
                            ),
                            format!("{:.0}", m(|x| x.server_peak_kb as f64)),
                        ]
                    })
                })
                .collect();
            page.table(
                &format!("Resources for the {big}-byte retrieval on loopback (median): CPU seconds and memory in KB (vsftpd: its listening process's memory only — each session runs in a child process, whose CPU time is counted once it has exited and whose memory is not measured)"),
                &[
                    "implementation",
                    "client user / system s",
                    "server user / system s",
                    "server resident / client peak KB",
                    "server peak KB",
                ],
                &res,
            );
            let seed: Vec<Vec<String>> = SEED003_T55
                .iter()
                .map(|(n, i, t)| {
                    vec![n.to_string(), format!("{} / {}", i.0, i.1), format!("{} / {}", t.0, t.1)]
                })
                .collect();
            page.table(
                "Seed 003, Table 5.5: footprint in KB, server / client",
                &["implementation", "initialisation", "100 MB transfer"],
                &seed,
            );
        }
        let spread_series = |rows: &[Row], sizes: &[u64], suffix: &str| -> Vec<Series> {
            let g = stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.latency_s);
            p.transports
                .iter()
                .filter_map(|t| {
                    let pts: Vec<(f64, stats::Spread)> = sizes
                        .iter()
                        .filter_map(|&s| {
                            g.iter().find(|x| x.0.0 == s && x.0.1 == *t).map(|x| (s as f64, x.1))
                        })
                        .collect();
                    (!pts.is_empty()).then(|| Series::spread(&format!("{}{suffix}", name(t)), &pts))
                })
                .collect()
        };
        let series: Vec<Series> = spread_series(&looped, &p.sizes, ", loopback")
            .into_iter()
            .chain(spread_series(&linked, &p.link_sizes, &format!(", {}", p.link)))
            .chain(SEED003_T53.iter().map(|(n, v)| {
                let pts: Vec<(f64, f64)> =
                    SEED003_T53_SIZES.iter().zip(v).map(|(&s, &l)| (s as f64, l)).collect();
                Series::plain(&format!("{n} 2003 (seed 003 T5.3)"), &pts)
            }))
            .collect();
        page.figure(
            plot_series("E3 retrieval latency vs file size", ("file size (bytes)", "latency (s)"), &series, (true, true)),
            "E3: time to retrieve a file against its size, ours and the standard pair on loopback and over the emulated link (bars: range of the runs), and seed 003's on a 100 Mbit/s network.",
        );
        let at = |thr: &[((u64, String), stats::Spread, Vec<&Row>)], size: u64| -> Vec<String> {
            p.transports
                .iter()
                .filter_map(|t| {
                    thr.iter()
                        .find(|x| x.0.0 == size && x.0.1 == *t)
                        .map(|x| format!("{} {:.0} Mbit/s", name(t), x.1.median))
                })
                .collect()
        };
        let big = p.sizes.iter().max().copied().unwrap_or(0);
        let seed_at = |size: u64| {
            seed_throughput(size).map_or(String::new(), |s| {
                format!(" (the seed's on its 100 Mbit/s network at that size: {s} Mbit/s)")
            })
        };
        let mut text = format!(
            "On loopback, at {big} bytes: {}{}; loopback says what the software costs here, not what a network allows. Small files are dominated by the per-retrieval round trips (login, EPSV, RETR, the data connection and its close).",
            at(&thr, big).join(", "),
            seed_at(big)
        );
        if let (false, Some(&lbig)) = (link_thr.is_empty(), p.link_sizes.iter().max()) {
            text += &format!(
                " Over `{}`, at {lbig} bytes: {}{} — the network, not the software, is the limit there, as it was for the seed.",
                p.link,
                at(&link_thr, lbig).join(", "),
                seed_at(lbig)
            );
        }
        page.reading(&text);
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["E3 FTP retrieval (median latency, seed's Mbit/s):".to_string()];
        for ((size, t, link), s, m) in
            stats::group(rows, |r| (r.size, r.transport.clone(), r.link.clone()), |r| r.latency_s)
        {
            let thr = stats::median(m.iter().map(|r| r.mbit_per_s));
            out.push(format!("  {size:>10} B, {t} on {link}: {:.4} s, {thr:.1} Mbit/s", s.median));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} B over {} on {}", r.size, r.transport, r.link), r.latency_s, "s"))
    }
}

#[cfg(test)]
mod tests {
    use super::cpu;

    #[test]
    fn cpu_times_come_from_the_right_fields() {
        // pid (comm with spaces) state ppid … utime(14) stime(15) cutime(16) cstime(17)
        let stat = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 250 150 30 20 0";
        assert_eq!(cpu(stat, 14), Some((2.5, 1.5)));
        assert_eq!(cpu(stat, 16), Some((0.3, 0.2)));
    }
}
