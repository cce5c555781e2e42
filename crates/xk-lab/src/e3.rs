//! E3 (seed 003, Tables 5.3–5.5, Fig. 5.7): file retrieval 1 B … 100 MB
//! with our FTP (`xk-ftp`) over kernel TCP and over XTP, on loopback.
//!
//! Separate processes are the point here, as in the seed: the server is
//! `xpress ftp serve` and each retrieval one `xpress ftp get` process, so
//! each side's CPU time and memory are its own. Per retrieval: latency (the
//! client's own timing of RETR, from the command to the last byte written;
//! login and process start excluded), throughput as the seed defines it
//! (8S / (1024² L) Mbit/s), the client's user and system CPU time (this
//! process's waited-for children, `/proc/self/stat`), the server's (its
//! `/proc/PID/stat`, before and after), the client's peak memory (its own
//! VmHWM) and the server's resident and peak memory.
//!
//! Not yet: a standard pair (vsftpd with curl) beside ours, and the
//! emulated `ethernet-100m` link the seed's 100 Mbit/s network stands for.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

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
    /// File sizes, bytes.
    pub sizes: Vec<u64>,
    /// Transports: tcp, xtp.
    pub transports: Vec<String>,
    /// Retrievals per size and transport.
    pub repetitions: u32,
}

/// One retrieval.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// tcp or xtp.
    pub transport: String,
    /// File bytes.
    pub size: u64,
    /// Repetition.
    pub rep: u32,
    /// RETR to last byte, seconds.
    pub latency_s: f64,
    /// 8S / (1024² L), the seed's definition.
    pub mbit_per_s: f64,
    /// Client CPU, user and system, seconds.
    pub client_user_s: f64,
    /// Client CPU, system.
    pub client_sys_s: f64,
    /// Server CPU during the retrieval, user.
    pub server_user_s: f64,
    /// Server CPU during the retrieval, system.
    pub server_sys_s: f64,
    /// The client's peak resident memory, kB.
    pub client_peak_kb: u64,
    /// The server's resident memory after the retrieval, kB.
    pub server_rss_kb: u64,
    /// The server's peak resident memory so far, kB.
    pub server_peak_kb: u64,
}

struct Server {
    child: Child,
    addr: String,
    init_kb: u64,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// E3.
pub struct E3 {
    p: Params,
    root: Option<PathBuf>,
    servers: Vec<(String, Server)>,
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
    fn setup(&mut self) -> Result<(), String> {
        if self.root.is_some() {
            return Ok(());
        }
        let root = std::env::temp_dir().join(format!("xpress-e3-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        self.root = Some(root.clone());
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for &size in &self.p.sizes {
            let mut f = std::fs::File::create(root.join(format!("f{size}"))).map_err(|e| e.to_string())?;
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                std::io::Write::write_all(&mut f, &chunk[..n]).map_err(|e| e.to_string())?;
                left -= n as u64;
            }
        }
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        for t in &self.p.transports {
            let mut child = Command::new(&exe)
                .args(["ftp", "serve", "--root"])
                .arg(&root)
                .args(["--listen", "127.0.0.1:0", "--user", "lab", "--password", "lab", "--transport", t])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("start xpress ftp serve: {e}"))?;
            let out = child.stdout.take().ok_or("no stdout")?;
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).map_err(|e| e.to_string())?;
            let addr = line
                .strip_prefix("ftp on ")
                .and_then(|r| r.split([' ', ',']).next())
                .ok_or_else(|| format!("xpress ftp serve said {line:?}"))?
                .to_string();
            std::thread::sleep(std::time::Duration::from_millis(200));
            let init_kb = status_kb(child.id(), "VmRSS:");
            self.servers.push((t.clone(), Server { child, addr, init_kb }));
        }
        Ok(())
    }
}

impl Experiment for E3 {
    const ID: &'static str = "E3";
    const TITLE: &'static str =
        "File retrieval 1 B – 100 MB with FTP over kernel TCP and over XTP (seed 003)";
    type Params = Params;
    type Point = (String, u64, u32);
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            sizes: if quick { vec![1, 1_000, 1_000_000] } else { SEED003_T53_SIZES.to_vec() },
            transports: vec!["tcp".into(), "xtp".into()],
            repetitions: if quick { 1 } else { 3 },
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.sizes.is_empty() || p.sizes.iter().any(|&s| s > 10_000_000_000) {
            return Err("sizes: at least one, each at most 10 GB".into());
        }
        if let Some(t) = p.transports.iter().find(|t| !matches!(t.as_str(), "tcp" | "xtp")) {
            return Err(format!("transports: {t:?} is not tcp or xtp"));
        }
        if !(1..=100).contains(&p.repetitions) {
            return Err("repetitions: 1 to 100".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E3 { p, root: None, servers: Vec::new() }
    }
    fn params(&self) -> &Params {
        &self.p
    }
    fn steps(&self, _env: &Env) -> Vec<Step<(String, u64, u32)>> {
        let mut out = Vec::new();
        for &size in &self.p.sizes {
            for t in &self.p.transports {
                for rep in 1..=self.p.repetitions {
                    out.push(Step {
                        label: format!(
                            "FTP over {t}: {size} B file, retrieval {rep} of {}",
                            self.p.repetitions
                        ),
                        point: (t.clone(), size, rep),
                    });
                }
            }
        }
        out
    }
    fn run(&mut self, (t, size, rep): &(String, u64, u32), _env: &Env) -> Result<Vec<Row>, String> {
        self.setup()?;
        let server = &self.servers.iter().find(|s| s.0 == *t).ok_or("no server")?.1;
        let spid = server.child.id();
        let before_s = cpu(&std::fs::read_to_string(format!("/proc/{spid}/stat")).unwrap_or_default(), 14);
        let before_c = cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default(), 16);
        // The client is a process of its own on purpose: E3 reports the
        // client's CPU time (this process's children's, /proc/self/stat
        // fields 16-17) and its peak memory (its own VmHWM, printed by
        // `xpress ftp get`), which an in-process call would mix with the
        // lab's own. The server is a process for the same reason.
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let out = Command::new(exe)
            .args([
                "ftp",
                "get",
                &format!("ftp://lab:lab@{}/f{size}", server.addr),
                "/dev/null",
                "--transport",
                t,
            ])
            .output()
            .map_err(|e| format!("run xpress ftp get: {e}"))?;
        let text = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("xpress ftp get over {t}, {size} B: {}", text.trim()));
        }
        // "got N bytes in S s (R Mbit/s), peak memory K kB"
        let line =
            text.lines().find(|l| l.starts_with("got ")).ok_or_else(|| format!("no result: {text}"))?;
        let w: Vec<&str> = line.split_whitespace().collect();
        let got: u64 = w.get(1).and_then(|v| v.parse().ok()).ok_or("bad result line")?;
        let secs: f64 = w.get(4).and_then(|v| v.parse().ok()).ok_or("bad result line")?;
        let peak: u64 =
            w.iter().position(|x| *x == "memory").and_then(|i| w.get(i + 1)?.parse().ok()).unwrap_or(0);
        if got != *size {
            return Err(format!("over {t}: got {got} of {size} bytes"));
        }
        let after_s = cpu(&std::fs::read_to_string(format!("/proc/{spid}/stat")).unwrap_or_default(), 14);
        let after_c = cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default(), 16);
        let d = |a: Option<(f64, f64)>, b: Option<(f64, f64)>| match (a, b) {
            (Some(a), Some(b)) => (b.0 - a.0, b.1 - a.1),
            _ => (f64::NAN, f64::NAN),
        };
        let (su, ss) = d(before_s, after_s);
        let (cu, cs) = d(before_c, after_c);
        Ok(vec![Row {
            transport: t.clone(),
            size: *size,
            rep: *rep,
            latency_s: secs,
            mbit_per_s: *size as f64 * 8.0 / (1024.0 * 1024.0) / secs.max(1e-9),
            client_user_s: cu,
            client_sys_s: cs,
            server_user_s: su,
            server_sys_s: ss,
            client_peak_kb: peak,
            server_rss_kb: status_kb(spid, "VmRSS:"),
            server_peak_kb: status_kb(spid, "VmHWM:").max(server.init_kb),
        }])
    }
    fn csv_key() -> &'static [&'static str] {
        &["transport", "size", "rep"]
    }
    fn render(p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        let lat = stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.latency_s);
        let thr = stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.mbit_per_s);
        let get = |g: &[((u64, String), stats::Spread, Vec<&Row>)], size: u64, t: &str| {
            g.iter().find(|x| x.0.0 == size && x.0.1 == t).map(|x| x.1)
        };
        let mut table = Vec::new();
        for &size in &p.sizes {
            let mut cells = vec![size.to_string()];
            for t in &p.transports {
                cells.push(get(&lat, size, t).map_or("—".into(), |s| format!("{:.4}", s.median)));
                cells.push(get(&thr, size, t).map_or("—".into(), |s| format!("{:.1}", s.median)));
            }
            let seed = SEED003_T53_SIZES.iter().position(|&s| s == size);
            for (_, v) in SEED003_T53 {
                cells.push(seed.map_or("—".into(), |i| format!("{}", v[i])));
            }
            table.push(cells);
        }
        let mut header = vec!["file bytes".to_string()];
        for t in &p.transports {
            header.push(format!("{t}: latency s"));
            header.push(format!("{t}: Mbit/s"));
        }
        for (n, _) in SEED003_T53 {
            header.push(format!("{n} 2003: latency s"));
        }
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        page.table(
            &format!("Measured here on loopback: median of {} retrieval(s); throughput 8S/(1024²·L) as in the seed; seed 003 Table 5.3 (a 100 Mbit/s network, 2003) beside", p.repetitions),
            &header,
            &table,
        );
        // CPU and memory at the largest size.
        if let Some(&big) = p.sizes.iter().max() {
            let res: Vec<Vec<String>> = p
                .transports
                .iter()
                .filter_map(|t| {
                    let r: Vec<&Row> = rows.iter().filter(|r| r.size == big && r.transport == *t).collect();
                    (!r.is_empty()).then(|| {
                        let m = |f: fn(&Row) -> f64| stats::median(r.iter().map(|x| f(x)));
                        vec![
                            format!("FTP over {t} (ours)"),
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
                &format!("Resources for the {big}-byte retrieval (median): CPU seconds and memory in KB"),
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
        let series: Vec<Series> = p
            .transports
            .iter()
            .map(|t| {
                let pts: Vec<(f64, stats::Spread)> =
                    p.sizes.iter().filter_map(|&s| get(&lat, s, t).map(|x| (s as f64, x))).collect();
                Series::spread(&format!("FTP over {t} (ours)"), &pts)
            })
            .chain(SEED003_T53.iter().map(|(n, v)| {
                let pts: Vec<(f64, f64)> =
                    SEED003_T53_SIZES.iter().zip(v).map(|(&s, &l)| (s as f64, l)).collect();
                Series::plain(&format!("{n} 2003 (seed 003 T5.3)"), &pts)
            }))
            .collect();
        page.figure(
            plot_series("E3 retrieval latency vs file size", ("file size (bytes)", "latency (s)"), &series, (true, true)),
            "E3: time to retrieve a file against its size, ours on loopback (bars: range of the runs) and seed 003's on a 100 Mbit/s network.",
        );
        let big = p.sizes.iter().max().copied().unwrap_or(0);
        let parts: Vec<String> = p
            .transports
            .iter()
            .filter_map(|t| get(&thr, big, t).map(|s| format!("over {t} {:.0} Mbit/s", s.median)))
            .collect();
        page.reading(&format!(
            "At {big} bytes our FTP moves {} on loopback; the seed's three FTPs reached 77–89 Mbit/s on a 100 Mbit/s network, so this table says what the software costs here, not what a network allows. Small files are dominated by the per-retrieval round trips (EPSV, RETR, the data connection and its close).",
            parts.join(" and ")
        ));
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["E3 FTP retrieval (loopback; median latency, seed's Mbit/s):".to_string()];
        for ((size, t), s, m) in stats::group(rows, |r| (r.size, r.transport.clone()), |r| r.latency_s) {
            let thr = stats::median(m.iter().map(|r| r.mbit_per_s));
            out.push(format!("  {size:>10} B over {t}: {:.4} s, {thr:.1} Mbit/s", s.median));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} B over {}", r.size, r.transport), r.latency_s, "s"))
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
