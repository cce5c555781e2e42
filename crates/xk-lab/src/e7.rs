//! E7 (seed 001): the load generator — P_max per adapter against the
//! system-call floor measured in the same run, the precision (VZ = mean
//! miss time, and the p99) against the specified inter-arrival time with
//! and without real-time measures, one thread against two, and the XTP
//! datagram service's sustained rate to one peer.
//!
//! Every measurement runs on a thread of its own, so the CPU pinning and
//! SCHED_FIFO of a row end with it and do not leak into later experiments.
//! UDP rows send to a loopback socket that is never read, as the floor
//! does (the kernel drops what overflows it; the sender is not slowed by a
//! reader sharing the machine's cores); TCP and XTP rows need a receiver,
//! which runs in the same process.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use xk_loadgen::adapt::{AdapterSpec, Kind};
use xk_loadgen::sched::{Realtime, Wait};
use xk_loadgen::sink::{Proto, Sink, SinkConfig};
use xk_loadgen::{Model, RunConfig, RunReport};

use crate::experiment::{Env, Step};
use crate::html::Page;
use crate::svg::esc;

/// E7's parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Seconds per floor mode and per P_max run.
    pub pmax_seconds: f64,
    /// Adapters whose P_max is measured.
    pub adapters: Vec<String>,
    /// Thread layouts for P_max (1, 2).
    pub threads: Vec<u8>,
    /// Adapters whose P_max is measured again with real-time measures.
    pub pmax_realtime: Vec<String>,
    /// Specified inter-arrival times for the precision rows, ns.
    pub gaps_ns: Vec<u64>,
    /// Waiting strategies for the precision rows (busy, sleep, hybrid).
    pub waits: Vec<String>,
    /// Seconds of model time per precision row (at most `precision_count`).
    pub precision_seconds: f64,
    /// Most requests per precision row.
    pub precision_count: u64,
    /// Inter-arrival times, ns, at which SCHED's own precision is measured:
    /// the null adapter (no system call between release and τ), busy
    /// waiting, with and without real-time measures.
    #[serde(default)]
    pub sched_gaps_ns: Vec<u64>,
    /// Adapters other than udp whose precision is measured too (busy
    /// waiting, no real-time measures), at `adapter_gaps_ns`: their miss
    /// includes their own call (a TCP write, an XTP datagram through our
    /// endpoint).
    #[serde(default)]
    pub precision_adapters: Vec<String>,
    /// Inter-arrival times, ns, for `precision_adapters`.
    #[serde(default)]
    pub adapter_gaps_ns: Vec<u64>,
    /// XTP datagram rates (per second) tried for `xtp_seconds` each.
    pub xtp_rates: Vec<u64>,
    /// Seconds per XTP rate (longer than the 2 s linger to see the cap).
    pub xtp_seconds: f64,
}

/// One step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Point {
    /// The three floors.
    Floor,
    /// P_max of an adapter.
    Pmax {
        /// Adapter name.
        adapter: String,
        /// 1 or 2.
        threads: u8,
        /// With real-time measures (CPU pinning; SCHED_FIFO where permitted).
        #[serde(default)]
        realtime: bool,
    },
    /// Precision at one inter-arrival time.
    Precision {
        /// Specified inter-arrival time, ns.
        gap_ns: u64,
        /// Wait strategy.
        wait: String,
        /// With real-time measures (CPU pinning; SCHED_FIFO where permitted).
        realtime: bool,
        /// The adapter: `udp` (τ is when `sendto` returned) or `null` (τ is
        /// when SCHED released the request: its own precision).
        #[serde(default = "udp")]
        adapter: String,
    },
    /// XTP datagrams at a fixed rate.
    Xtp {
        /// Requests per second.
        rate: u64,
    },
}

fn udp() -> String {
    "udp".into()
}

/// One measured row.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Row {
    /// floor, pmax, precision or xtp.
    pub kind: String,
    /// Adapter, or the floor's mode.
    pub adapter: String,
    /// Threads.
    pub threads: u8,
    /// Wait strategy.
    pub wait: String,
    /// What the real-time measures came to.
    pub scheduling: String,
    /// The clock t_i and τ_i were read from (TSC or CLOCK_MONOTONIC).
    #[serde(default)]
    pub clock: String,
    /// Whether real-time measures were asked for.
    pub realtime: bool,
    /// Specified inter-arrival time (0 for P_max), ns.
    pub gap_ns: u64,
    /// Requests executed.
    pub requests: u64,
    /// Refused by the interface.
    pub refused: u64,
    /// First refusal.
    pub first_error: Option<String>,
    /// Seconds.
    pub seconds: f64,
    /// Requests executed per second (P_max at gap 0).
    pub rate_per_s: f64,
    /// Requests the interface took per second.
    pub sent_per_s: f64,
    /// VZ: mean miss, ns.
    pub vz_ns: f64,
    /// Median miss, ns.
    pub median_ns: u64,
    /// p99 miss, ns.
    pub p99_ns: u64,
    /// Max miss, ns.
    pub max_ns: u64,
    /// Share later than 1 µs.
    pub late_share: f64,
    /// Cumulative miss distribution (ns, share).
    pub cdf: Vec<(u64, f64)>,
    /// What the receiver got (TCP: bytes / size; XTP: datagrams).
    pub received: Option<u64>,
}

/// E7 (seed 001): the load generator.
pub struct E7(Params);

fn row(kind: &str, r: &RunReport, gap_ns: u64, realtime: bool) -> Row {
    Row {
        kind: kind.into(),
        adapter: r.adapter.clone(),
        threads: r.threads,
        wait: r.wait.clone(),
        scheduling: r.scheduling.clone(),
        clock: r.clock.clone(),
        realtime,
        gap_ns,
        requests: r.requests,
        refused: r.counts.errors,
        first_error: r.counts.first_error.clone(),
        seconds: r.seconds,
        rate_per_s: r.rate_per_s,
        sent_per_s: if r.seconds > 0.0 { r.counts.sent as f64 / r.seconds } else { 0.0 },
        vz_ns: r.miss.mean_ns,
        median_ns: r.miss.median_ns,
        p99_ns: r.miss.p99_ns,
        max_ns: r.miss.max_ns,
        late_share: r.miss.late_share,
        cdf: r.miss.cdf.clone(),
        received: None,
    }
}

/// A receiver: its address, the thread that counts what it received (TCP:
/// bytes; XTP: requests) and, for UDP, the socket nobody reads (kept open
/// for the run).
type Receiver = (SocketAddr, Option<std::thread::JoinHandle<u64>>, Option<UdpSocket>);

/// A receiver for the adapter, on its own thread where it needs one.
fn receiver(kind: Kind, seconds: f64) -> Result<Receiver, String> {
    match kind {
        Kind::Null | Kind::Null1 | Kind::Udp | Kind::UdpMmsg | Kind::UdpGso => {
            let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            Ok((s.local_addr().map_err(|e| e.to_string())?, None, Some(s)))
        }
        Kind::Tcp => {
            let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            let addr = l.local_addr().map_err(|e| e.to_string())?;
            let h = std::thread::spawn(move || {
                let Ok((mut c, _)) = l.accept() else { return 0 };
                let mut sink = std::io::sink();
                std::io::copy(&mut c, &mut sink).unwrap_or(0)
            });
            Ok((addr, Some(h), None))
        }
        _ => {
            let proto = match kind {
                Kind::Xtp => Proto::Xtp,
                Kind::XtpStream => Proto::XtpStream,
                _ => Proto::XtpTransaction,
            };
            let cfg = SinkConfig {
                proto,
                xtp_port: 9,
                duration: Duration::from_secs_f64(seconds + 5.0),
                idle: Duration::from_secs(2),
                count: 0,
            };
            let (tx, rx) = std::sync::mpsc::channel();
            let h = std::thread::spawn(move || {
                let s = match Sink::bind("127.0.0.1:0".parse().expect("literal"), cfg) {
                    Ok(s) => s,
                    Err(_) => return 0,
                };
                let _ = tx.send(s.local_addr().ok());
                s.run(Arc::new(AtomicBool::new(false))).map_or(0, |r| r.received)
            });
            let addr = rx.recv().ok().flatten().ok_or("the XTP receiver did not start")?;
            Ok((addr, Some(h), None))
        }
    }
}

/// Runs on a fresh thread (its pinning and priority die with it).
fn isolated(model: Model, cfg: RunConfig) -> Result<RunReport, String> {
    // Hybrid spins too (its last `margin` before each request: all of it at
    // short gaps); only sleep leaves the budget alone.
    let spins_fifo = cfg.rt.fifo && !matches!(cfg.wait, Wait::Sleep);
    let started = std::time::Instant::now();
    let r = std::thread::spawn(move || xk_loadgen::run(&model, &cfg, Arc::new(AtomicBool::new(false)), None))
        .join()
        .map_err(|_| "the run panicked".to_string())?;
    if spins_fifo {
        // A thread spinning under SCHED_FIFO spends Linux's real-time
        // budget (950 ms of every 1 s period, sched_rt_runtime_us); two
        // such rows back to back can exhaust one period's, and the second
        // is then stopped for up to 50 ms — a 44 ms max miss that is the
        // budget, not the scheduler. Resting as long as the row ran (at
        // most 1 s) leaves every period no more than one row's spin.
        std::thread::sleep(started.elapsed().min(Duration::from_secs(1)));
    }
    r
}

fn last_cpu() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get() - 1)
}

impl crate::experiment::Experiment for E7 {
    const ID: &'static str = "E7";
    const TITLE: &'static str = "Load generator: P_max and miss time (seed 001)";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        let adapters =
            ["null", "null-1", "udp", "udp-mmsg", "udp-gso", "tcp", "xtp", "xtp-stream", "xtp-transaction"];
        if quick {
            Params {
                pmax_seconds: 0.3,
                adapters: adapters.iter().map(|s| s.to_string()).collect(),
                threads: vec![1, 2],
                pmax_realtime: vec!["udp".into(), "udp-gso".into()],
                gaps_ns: vec![1_000, 10_000, 100_000, 1_000_000],
                waits: vec!["busy".into(), "hybrid".into()],
                precision_seconds: 0.3,
                precision_count: 20_000,
                sched_gaps_ns: vec![10_000],
                precision_adapters: vec!["tcp".into(), "xtp".into()],
                adapter_gaps_ns: vec![100_000],
                xtp_rates: vec![400, 1_000],
                xtp_seconds: 2.5,
            }
        } else {
            // Within the report's budget: a decade of gaps per point;
            // plans/e7-full.toml takes the half-decades and longer runs.
            Params {
                pmax_seconds: 1.0,
                adapters: adapters.iter().map(|s| s.to_string()).collect(),
                threads: vec![1, 2],
                pmax_realtime: vec!["udp".into(), "udp-mmsg".into(), "udp-gso".into()],
                gaps_ns: vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000],
                waits: vec!["busy".into(), "hybrid".into(), "sleep".into()],
                precision_seconds: 0.5,
                precision_count: 100_000,
                sched_gaps_ns: vec![10_000, 100_000, 1_000_000],
                precision_adapters: vec!["tcp".into(), "xtp".into()],
                adapter_gaps_ns: vec![10_000, 100_000, 1_000_000],
                xtp_rates: vec![500, 2_000],
                xtp_seconds: 3.0,
            }
        }
    }

    fn check(p: &Params) -> Result<(), String> {
        for a in &p.adapters {
            Kind::parse(a).map_err(|e| format!("adapters: {e}"))?;
        }
        for a in &p.pmax_realtime {
            Kind::parse(a).map_err(|e| format!("pmax_realtime: {e}"))?;
        }
        for w in &p.waits {
            Wait::parse(w).map_err(|e| format!("waits: {e}"))?;
        }
        if p.threads.iter().any(|t| !(1..=2).contains(t)) {
            return Err("threads: 1 or 2".into());
        }
        for (name, s) in [
            ("pmax_seconds", p.pmax_seconds),
            ("precision_seconds", p.precision_seconds),
            ("xtp_seconds", p.xtp_seconds),
        ] {
            if !(s > 0.0 && s <= 600.0) {
                return Err(format!("{name} = {s}: above 0, at most 600"));
            }
        }
        for a in &p.precision_adapters {
            Kind::parse(a).map_err(|e| format!("precision_adapters: {e}"))?;
        }
        for (name, gaps) in [
            ("gaps_ns", &p.gaps_ns),
            ("sched_gaps_ns", &p.sched_gaps_ns),
            ("adapter_gaps_ns", &p.adapter_gaps_ns),
        ] {
            if gaps.iter().any(|g| *g == 0 || *g > 1_000_000_000) {
                return Err(format!("{name}: 1 ns to 1 s (gap 0 is the P_max rows)"));
            }
        }
        if p.xtp_rates.iter().any(|r| *r == 0 || *r > 1_000_000) {
            return Err("xtp_rates: 1 to 1,000,000 per second".into());
        }
        Ok(())
    }

    fn new(p: Params) -> Self {
        E7(p)
    }

    fn params(&self) -> &Params {
        &self.0
    }

    fn steps(&self, _env: &Env) -> Vec<Step<Point>> {
        let p = &self.0;
        let mut out = vec![Step { label: "floor: sendto, sendmmsg, GSO".into(), point: Point::Floor }];
        for a in &p.adapters {
            for &t in &p.threads {
                out.push(Step {
                    label: format!("P_max {a}, {t} thread(s)"),
                    point: Point::Pmax { adapter: a.clone(), threads: t, realtime: false },
                });
            }
        }
        for a in &p.pmax_realtime {
            out.push(Step {
                label: format!("P_max {a}, 1 thread, real-time"),
                point: Point::Pmax { adapter: a.clone(), threads: 1, realtime: true },
            });
        }
        for &g in &p.gaps_ns {
            for w in &p.waits {
                for rt in [false, true] {
                    out.push(Step {
                        label: format!("precision {g} ns, {w}{}", if rt { ", real-time" } else { "" }),
                        point: Point::Precision { gap_ns: g, wait: w.clone(), realtime: rt, adapter: udp() },
                    });
                }
            }
        }
        for a in &p.precision_adapters {
            for &g in &p.adapter_gaps_ns {
                out.push(Step {
                    label: format!("precision {a} {g} ns, busy"),
                    point: Point::Precision {
                        gap_ns: g,
                        wait: "busy".into(),
                        realtime: false,
                        adapter: a.clone(),
                    },
                });
            }
        }
        for &g in &p.sched_gaps_ns {
            for rt in [false, true] {
                out.push(Step {
                    label: format!("SCHED precision {g} ns, busy{}", if rt { ", real-time" } else { "" }),
                    point: Point::Precision {
                        gap_ns: g,
                        wait: "busy".into(),
                        realtime: rt,
                        adapter: "null".into(),
                    },
                });
            }
        }
        for &r in &p.xtp_rates {
            out.push(Step { label: format!("XTP datagrams at {r}/s"), point: Point::Xtp { rate: r } });
        }
        out
    }

    fn notes(&self, env: &Env) -> Vec<String> {
        if env.root {
            vec![]
        } else {
            vec!["Not root: the real-time rows pin the sending thread to a CPU but run without SCHED_FIFO (not permitted).".into()]
        }
    }

    fn run(&mut self, point: &Point, env: &Env) -> Result<Vec<Row>, String> {
        let p = &self.0;
        match point {
            Point::Floor => {
                let f = xk_loadgen::floor::measure(64, Duration::from_secs_f64(p.pmax_seconds), 100_000_000)
                    .map_err(|e| e.to_string())?;
                Ok(f.into_iter()
                    .map(|f| Row {
                        kind: "floor".into(),
                        adapter: f.mode,
                        threads: 1,
                        requests: f.datagrams,
                        refused: f.errors,
                        seconds: f.seconds,
                        rate_per_s: f.rate_per_s,
                        sent_per_s: f.rate_per_s,
                        ..Row::default()
                    })
                    .collect())
            }
            Point::Pmax { adapter, threads, realtime } => {
                let kind = Kind::parse(adapter)?;
                let (to, rx, _keep) = receiver(kind, p.pmax_seconds)?;
                let mut cfg =
                    RunConfig::new(AdapterSpec { kind, to: Some(to), xtp_port: 9, tx_timestamps: false });
                cfg.threads = *threads;
                cfg.count = 200_000_000;
                cfg.duration_ns = (p.pmax_seconds * 1e9) as u64;
                cfg.seed = env.seed;
                if *realtime {
                    cfg.rt = Realtime { fifo: env.root, cpu: Some(last_cpu()) };
                    // A P_max run spins from start to end, and runs 10 % +
                    // 100 ms past its duration: kept under the real-time
                    // budget of 950 ms a second, so SCHED_FIFO rows are not
                    // throttled inside themselves.
                    cfg.duration_ns = cfg.duration_ns.min(700_000_000);
                }
                let r = match isolated(Model::constant(0, 64), cfg.clone()) {
                    Err(e) if e.contains("--fifo") => {
                        cfg.rt.fifo = false;
                        isolated(Model::constant(0, 64), cfg)
                    }
                    r => r,
                };
                let received = rx.map(|h| h.join().unwrap_or(0));
                let r = r?;
                let mut row = row("pmax", &r, 0, *realtime);
                row.received = received.map(|b| if kind == Kind::Tcp { b / 64 } else { b });
                Ok(vec![row])
            }
            Point::Precision { gap_ns, wait, realtime, adapter } => {
                let kind = Kind::parse(adapter)?;
                let (to, rx, _keep) = receiver(kind, p.precision_seconds)?;
                let mut cfg =
                    RunConfig::new(AdapterSpec { kind, to: Some(to), xtp_port: 9, tx_timestamps: false });
                cfg.wait = Wait::parse(wait)?;
                cfg.count = p.precision_count;
                cfg.duration_ns = (p.precision_seconds * 1e9) as u64;
                cfg.seed = env.seed;
                if *realtime {
                    cfg.rt = Realtime { fifo: env.root, cpu: Some(last_cpu()) };
                }
                let r = match isolated(Model::constant(*gap_ns, 64), cfg.clone()) {
                    Err(e) if e.contains("--fifo") => {
                        cfg.rt.fifo = false;
                        isolated(Model::constant(*gap_ns, 64), cfg)
                    }
                    r => r,
                };
                // The receiver ends before the next row starts (a TCP
                // reader at the connection's close, an XTP sink after 2 s
                // idle), so no row measures another's leftovers.
                let received = rx.map(|h| h.join().unwrap_or(0));
                let mut row = row("precision", &r?, *gap_ns, *realtime);
                row.received = received.map(|b| if kind == Kind::Tcp { b / 64 } else { b });
                Ok(vec![row])
            }
            Point::Xtp { rate } => {
                let (to, rx, _) = receiver(Kind::Xtp, p.xtp_seconds)?;
                let mut cfg = RunConfig::new(AdapterSpec {
                    kind: Kind::Xtp,
                    to: Some(to),
                    xtp_port: 9,
                    tx_timestamps: false,
                });
                cfg.wait = Wait::parse("hybrid").expect("valid");
                cfg.duration_ns = (p.xtp_seconds * 1e9) as u64;
                cfg.seed = env.seed;
                let r = isolated(Model::constant(1_000_000_000 / rate, 64), cfg);
                let received = rx.map(|h| h.join().unwrap_or(0));
                let mut row = row("xtp", &r?, 1_000_000_000 / rate, false);
                row.received = received;
                Ok(vec![row])
            }
        }
    }

    fn csv_key() -> &'static [&'static str] {
        &["kind", "adapter", "threads", "wait", "realtime", "gap_ns"]
    }

    fn render(_p: &Params, rows: &[Row], notes: &[String], page: &mut Page) {
        let floor =
            |mode: &str| rows.iter().find(|r| r.kind == "floor" && r.adapter == mode).map(|r| r.rate_per_s);
        let matching = |adapter: &str| match adapter {
            "udp" => Some("sendto"),
            "udp-mmsg" => Some("sendmmsg"),
            "udp-gso" => Some("gso"),
            _ => None,
        };
        let mut t = Vec::new();
        for r in rows.iter().filter(|r| r.kind == "floor") {
            t.push(vec![
                format!("floor: {}", esc(&r.adapter)),
                "1".into(),
                format!("{:.0}", r.rate_per_s),
                "—".into(),
                "—".into(),
            ]);
        }
        for r in rows.iter().filter(|r| r.kind == "pmax") {
            let ratio = matching(&r.adapter)
                .and_then(floor)
                .map_or("—".to_string(), |f| format!("{:.0} %", 100.0 * r.sent_per_s / f));
            let refused = if r.refused > 0 {
                format!("{} ({})", r.refused, esc(r.first_error.as_deref().unwrap_or("")))
            } else {
                "0".into()
            };
            let name = if r.realtime {
                format!("{} ({})", esc(&r.adapter), esc(&r.scheduling))
            } else {
                esc(&r.adapter)
            };
            t.push(vec![name, r.threads.to_string(), format!("{:.0}", r.rate_per_s), ratio, refused]);
        }
        page.table(
            "P_max: 64-byte requests at specified inter-arrival time 0 (requests per second; the ratio is what the interface accepted against the matching floor)",
            &["adapter", "threads", "P_max (/s)", "of the floor", "refused"],
            &t,
        );
        let all_prec: Vec<&Row> = rows.iter().filter(|r| r.kind == "precision").collect();
        let t: Vec<Vec<String>> = all_prec
            .iter()
            .map(|r| {
                vec![
                    esc(&r.adapter),
                    format!("{}", r.gap_ns),
                    esc(&r.wait),
                    esc(&r.scheduling),
                    r.requests.to_string(),
                    format!("{:.0}", r.vz_ns),
                    r.median_ns.to_string(),
                    r.p99_ns.to_string(),
                    r.max_ns.to_string(),
                    format!("{:.1} %", 100.0 * r.late_share),
                    r.received.map_or("—".into(), |x| x.to_string()),
                ]
            })
            .collect();
        page.table(
            "Precision: miss time τ − t in ns against the specified inter-arrival time (udp: τ is when sendto returned, so each miss includes the system call; null: τ is when SCHED released the request, its own precision)",
            &[
                "adapter",
                "gap (ns)",
                "wait",
                "scheduling",
                "requests",
                "VZ (mean)",
                "median",
                "p99",
                "max",
                "> 1 µs late",
                "received",
            ],
            &t,
        );
        // The figures are the udp adapter's, as the seed's (its ADAPT sent UDP).
        let prec: Vec<&Row> = all_prec.iter().copied().filter(|r| r.adapter == "udp").collect();
        let mut series = Vec::new();
        for w in prec.iter().map(|r| (r.wait.clone(), r.realtime)).fold(Vec::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        }) {
            let name = format!("{}{}", w.0, if w.1 { ", real-time" } else { "" });
            let vz: Vec<(f64, f64)> = prec
                .iter()
                .filter(|r| r.wait == w.0 && r.realtime == w.1)
                .map(|r| (r.gap_ns as f64 / 1e3, r.vz_ns.max(1.0)))
                .collect();
            let p99: Vec<(f64, f64)> = prec
                .iter()
                .filter(|r| r.wait == w.0 && r.realtime == w.1)
                .map(|r| (r.gap_ns as f64 / 1e3, (r.p99_ns as f64).max(1.0)))
                .collect();
            series.push((format!("VZ {name}"), vz));
            series.push((format!("p99 {name}"), p99));
        }
        page.figure(
            crate::svg::loglog("Miss time vs specified inter-arrival time (udp adapter)", "inter-arrival time (µs)", "miss time (ns)", &series),
            "VZ (mean) and p99 miss time against the specified inter-arrival time, as in the seed's precision plot.",
        );
        let cdfs: Vec<(String, Vec<(f64, f64)>)> = prec
            .iter()
            .filter(|r| {
                r.gap_ns == 10_000
                    || (r.gap_ns == prec.first().map_or(0, |f| f.gap_ns)
                        && !prec.iter().any(|x| x.gap_ns == 10_000))
            })
            .map(|r| {
                (
                    format!("{}{}", r.wait, if r.realtime { ", real-time" } else { "" }),
                    r.cdf.iter().map(|&(ns, p)| ((ns as f64).max(1.0), p)).collect(),
                )
            })
            .collect();
        page.figure(
            crate::svg::plot(
                "Cumulative miss time at 10 µs inter-arrival",
                ("miss time (ns)", "share of requests"),
                &cdfs,
                (true, false),
            ),
            "Cumulative distribution of the miss time, as in the seed's cumulative plot.",
        );
        let xtp: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| r.kind == "xtp")
            .map(|r| {
                vec![
                    format!("{:.0}", 1e9 / r.gap_ns as f64),
                    r.requests.to_string(),
                    format!("{:.0}", r.sent_per_s),
                    r.refused.to_string(),
                    r.received.map_or("—".into(), |x| x.to_string()),
                ]
            })
            .collect();
        page.table(
            "XTP datagram service (service 1) from one peer, sustained for the run (each datagram is a context of its own; the receiver holds at most 1,024 per peer, each for its linger)",
            &["specified /s", "requests", "accepted /s", "refused", "received"],
            &xtp,
        );
        page.table(
            "Seed 001 (UniLoG, slides): findings",
            &["finding", "value"],
            &[
                vec!["P_max under RTOS-32 against Windows".into(), "about 30 % higher".into()],
                vec![
                    "VZ with real-time measures (priorities, affinity, RTOS)".into(),
                    "up to 100 × smaller".into(),
                ],
                vec![
                    "Gigabit Ethernet line rate, 64-byte frames".into(),
                    "1.49 M frames/s (672 ns each)".into(),
                ],
                vec![
                    "future work".into(),
                    "GAR and ADAPT in parallel over lock-free queues, SCHED_FIFO, isolated cores".into(),
                ],
            ],
        );
        for n in notes {
            page.note(n);
        }
        page.reading(&reading(rows));
    }

    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["E7 load generator:".to_string()];
        for r in rows {
            out.push(match r.kind.as_str() {
                "floor" => format!("  floor {:>9}: {:>12.0}/s", r.adapter, r.rate_per_s),
                "pmax" => format!(
                    "  P_max {:>15} {}t{}: {:>12.0}/s ({} refused)",
                    r.adapter,
                    r.threads,
                    if r.realtime { " rt" } else { "" },
                    r.rate_per_s,
                    r.refused
                ),
                "precision" => format!(
                    "  {:>4} gap {:>9} ns {:>9} {:>5}: VZ {:>9.0} ns, median {:>7} ns, p99 {:>9} ns",
                    r.adapter,
                    r.gap_ns,
                    r.wait,
                    if r.realtime { "rt" } else { "" },
                    r.vz_ns,
                    r.median_ns,
                    r.p99_ns
                ),
                _ => format!(
                    "  XTP datagrams at {:.0}/s: {:.0}/s accepted, {} refused, {} received",
                    1e9 / r.gap_ns as f64,
                    r.sent_per_s,
                    r.refused,
                    r.received.unwrap_or(0)
                ),
            });
        }
        out
    }

    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some(match r.kind.as_str() {
            "floor" => (format!("floor {}", r.adapter), r.rate_per_s, "/s"),
            "pmax" => (
                format!("P_max {} {}t{}", r.adapter, r.threads, if r.realtime { " rt" } else { "" }),
                r.rate_per_s,
                "/s",
            ),
            "precision" => (
                format!(
                    "VZ {}{} ns {}{}",
                    if r.adapter == "udp" { String::new() } else { format!("{} ", r.adapter) },
                    r.gap_ns,
                    r.wait,
                    if r.realtime { " rt" } else { "" }
                ),
                r.vz_ns,
                "ns",
            ),
            _ => (format!("XTP datagrams {:.0}/s", 1e9 / r.gap_ns as f64), r.sent_per_s, "/s"),
        })
    }
}

/// What the rows say, next to the seed.
fn reading(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    let pmax = |a: &str, t: u8| {
        rows.iter().find(|r| r.kind == "pmax" && r.adapter == a && r.threads == t && !r.realtime)
    };
    let floor = |m: &str| rows.iter().find(|r| r.kind == "floor" && r.adapter == m).map(|r| r.rate_per_s);
    for (a, m) in [("udp", "sendto"), ("udp-mmsg", "sendmmsg"), ("udp-gso", "gso")] {
        if let (Some(r), Some(f)) = (pmax(a, 1), floor(m)) {
            parts.push(format!(
                "{a} reaches P_max {:.0}/s, {:.0} % of the {m} floor ({f:.0}/s)",
                r.sent_per_s,
                100.0 * r.sent_per_s / f
            ));
        }
    }
    if let Some(n) = pmax("null", 1) {
        parts.push(format!(
            "GAR + SCHED alone (null adapter) run at {:.2} M requests/s on one core",
            n.rate_per_s / 1e6
        ));
    }
    if let (Some(one), Some(two)) = (pmax("udp-gso", 1), pmax("udp-gso", 2)) {
        parts.push(format!(
            "with GAR on a second thread udp-gso goes from {:.0}/s to {:.0}/s ({:+.0} %)",
            one.rate_per_s,
            two.rate_per_s,
            100.0 * (two.rate_per_s / one.rate_per_s - 1.0)
        ));
    }
    for rt in rows.iter().filter(|r| r.kind == "pmax" && r.realtime) {
        if let Some(plain) = pmax(&rt.adapter, 1) {
            parts.push(format!(
                "with real-time measures ({}) {} goes from {:.0}/s to {:.0}/s ({:+.0} %; the seed saw about +30 % under an RTOS)",
                rt.scheduling,
                rt.adapter,
                plain.rate_per_s,
                rt.rate_per_s,
                100.0 * (rt.rate_per_s / plain.rate_per_s - 1.0)
            ));
        }
    }
    if let Some(g) = pmax("udp-gso", 1).or(pmax("udp-gso", 2)) {
        let line = 1_488_095.0;
        parts.push(format!(
            "against Gigabit Ethernet's 1.49 M 64-byte frames/s the GSO adapter is at {:.0} % (loopback, no wire)",
            100.0 * g.sent_per_s / line
        ));
    }
    if let Some(m) = rows
        .iter()
        .filter(|r| r.kind == "precision" && r.adapter == "null" && r.gap_ns >= 10_000)
        .max_by(|a, b| a.vz_ns.total_cmp(&b.vz_ns))
    {
        parts.push(format!(
            "SCHED alone (null adapter, busy waiting, τ taken when the request is released, both times read from the {}) misses by a median of at most {} ns and a VZ of at most {:.0} ns at inter-arrival times of 10 µs and more (goal: 50 ns and 1 µs on a quiet core; the worst row is {} ns, {}, p99 {} ns)",
            esc(&m.clock),
            rows.iter()
                .filter(|r| r.kind == "precision" && r.adapter == "null" && r.gap_ns >= 10_000)
                .map(|r| r.median_ns)
                .max()
                .unwrap_or(0),
            m.vz_ns,
            m.gap_ns,
            if m.realtime { esc(&m.scheduling) } else { "no real-time measures".into() },
            m.p99_ns
        ));
    }
    let prec: Vec<&Row> = rows.iter().filter(|r| r.kind == "precision" && r.adapter == "udp").collect();
    let pick = |rt: bool| {
        prec.iter()
            .filter(|r| r.realtime == rt && r.wait == "busy" && r.gap_ns >= 10_000)
            .map(|r| r.vz_ns)
            .fold(f64::NAN, f64::max)
    };
    let (plain, rt) = (pick(false), pick(true));
    if plain.is_finite() && rt.is_finite() && rt > 0.0 {
        parts.push(format!(
            "at inter-arrival times of 10 µs and more, the worst VZ with busy waiting is {plain:.0} ns without and {rt:.0} ns with the real-time measures ({:.1} ×; the seed reports up to 100 × with an RTOS)",
            plain / rt
        ));
    }
    if let Some(m) = prec.iter().filter(|r| r.gap_ns >= 10_000 && r.wait == "busy").map(|r| r.median_ns).min()
    {
        parts.push(format!(
            "the best median miss with the udp adapter is {m} ns (it includes the sendto call)"
        ));
    }
    let others: Vec<String> = rows
        .iter()
        .filter(|r| r.kind == "precision" && r.adapter != "udp" && r.adapter != "null")
        .map(|r| {
            format!(
                "{} at {} µs: median {} ns, VZ {:.0} ns",
                r.adapter,
                r.gap_ns / 1000,
                r.median_ns,
                r.vz_ns
            )
        })
        .collect();
    if !others.is_empty() {
        parts.push(format!(
            "through the other adapters, whose call is part of each miss: {}",
            others.join("; ")
        ));
    }
    if let Some(x) = rows.iter().filter(|r| r.kind == "xtp").max_by(|a, b| a.gap_ns.cmp(&b.gap_ns).reverse())
    {
        parts.push(format!(
            "the XTP datagram service asked for {:.0}/s took {} requests at the sender ({} refused) and the receiver got {} — a receiving endpoint keeps each datagram context for its 2 s linger and at most 1,024 per peer, so one sending socket is capped near 500 datagrams/s (docs/LOADGEN.md)",
            1e9 / x.gap_ns as f64,
            x.requests,
            x.refused,
            x.received.map_or("—".to_string(), |r| r.to_string())
        ));
    }
    if parts.is_empty() {
        return "No rows.".into();
    }
    let mut s = parts.join("; ");
    s.push('.');
    s[..1].to_uppercase() + &s[1..]
}
