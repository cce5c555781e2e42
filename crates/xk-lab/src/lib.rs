//! xk-lab — the laboratory behind `xpress report`: the seeds' experiments
//! measured here and now, next to the seeds' own tables.
//!
//! # Contract
//!
//! [`run`] executes a [`plan`](crate) — the built-in full or quick plan with a
//! TOML plan file on top (experiments, parameters, repetitions) — step by
//! step, and writes `results.json` (plan, machine before and after, every raw
//! sample), one CSV per experiment (scalar columns, key columns first) and a
//! self-contained `report.html` (tables beside the seeds' historical tables,
//! SVG plots, a reading generated from the data). Repeated points become one
//! row: the median, the spread (n, min, quartiles, max) and every run.
//!
//! This crate may read the wall clock, open sockets and start processes (it
//! drives the `xpress` binary it runs in for the multi-process measurements
//! and `xpress netns` for kernel TCP as root); the protocol crates it measures
//! do none of that.
//!
//! Experiments: E1 (message ping-pong, seed 000 Tables 1–3), E2 (throughput
//! vs RTT through the emulator, seed 002 Fig. 3, kernel TCP through `xpress
//! netns` as root), goodput vs message size (the throughput part of E8), E6
//! (file retrieval over packet radio in the simulator, seed 003 Tables
//! 6.1–6.2), E4 (demux map lookup, seed 003 Table 5.2) and E9 (mechanism
//! benchmark, seed 000 §4.2).
//!
//! Every step prints a progress line (step k of n, elapsed, time left by the
//! steps so far). Ctrl-C stops after the step under way and still writes the
//! JSON, CSV and HTML, marked partial, with every experiment finished by then.

mod e1;
mod e2;
pub mod e4;
mod e6;
mod e9;
mod html;
mod msgsize;
mod plan;
mod progress;
mod summary;
mod svg;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};
use xk_time::Duration;

use crate::e4::MapParams as MapArgs;

/// What `xpress report` was asked for.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Small sizes and counts (about 25 s; what CI runs).
    pub quick: bool,
    /// Directory for report.html, results.json and results.csv.
    pub out: PathBuf,
    /// Master seed of the simulated experiments.
    pub seed: u64,
    /// A plan file (TOML) applied on top of the built-in plan.
    pub plan: Option<PathBuf>,
}

fn machine() -> Value {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string());
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "loadavg": read("/proc/loadavg").trim(),
    })
}

/// Runs the report. `stop` is set on Ctrl-C (by the caller): the runner
/// finishes the step under way and writes what it has, marked partial.
pub fn run(a: &ReportOptions, stop: Arc<AtomicBool>) -> Result<(), String> {
    fs::create_dir_all(&a.out).map_err(|e| format!("--out {}: {e}", a.out.display()))?;
    let before = machine();
    eprintln!(
        "xpress report: seed {}, {} run, writing to {} (Ctrl-C: stop and keep partial results)",
        a.seed,
        if a.quick { "quick" } else { "full" },
        a.out.display()
    );
    let root = xk_driver::netns::is_root();

    let mut plan = plan::Plan::builtin(a.quick);
    if let Some(path) = &a.plan {
        let text = fs::read_to_string(path).map_err(|e| format!("--plan {}: {e}", path.display()))?;
        plan.apply(&path.display().to_string(), &text)?;
    }
    if let Some(b) = std::env::var("XPRESS_E2_BYTES").ok().and_then(|v| v.parse().ok()) {
        plan.e2_bytes = b;
    }
    let tcp_rows = root && plan.e2_tcp;
    let count = |e: &str, n: usize| if plan.runs(e) { n } else { 0 };
    let e2_reps = plan.e2_reps as usize;
    let steps = count("E1", plan.e1_sizes.len())
        + count("E2", plan.e2_rtts.len() * 2 * e2_reps * if tcp_rows { 2 } else { 1 })
        + count(
            "MSG",
            plan.msg_sizes.len()
                * plan.msg_peers.iter().filter(|p| *p != "iperf3").count()
                * plan.msg_reps as usize,
        )
        + count("E6", plan.e6_rates.len() * plan.e6_sizes.len() * plan.e6_reps as usize)
        + count("E4", 1)
        + count("E9", 1);
    let mut p = progress::Progress::new(steps, stop.clone());

    // E1.
    let mut e1_rows = Vec::new();
    for (i, &size) in plan.e1_sizes.iter().enumerate().filter(|_| plan.runs("E1")) {
        if !p.step(&format!("E1 {size} B: simulator 0.9 ms, simulator 0 ms, UDP loopback, raw UDP floor")) {
            break;
        }
        let (sim_n, udp_n) = (plan.e1_sim_count, plan.e1_udp_count);
        e1_rows.push(e1::simulated(size, Duration::from_micros(900), sim_n, a.seed + i as u64)?);
        e1_rows.push(e1::simulated(size, Duration::ZERO, sim_n, a.seed + 10 + i as u64)?);
        e1_rows.push(e1::udp(size, udp_n)?);
        e1_rows.push(e1::udp_floor(size, udp_n)?);
    }

    // E2.
    let (rtts, e2_bytes) = (if plan.runs("E2") { plan.e2_rtts.clone() } else { Vec::new() }, plan.e2_bytes);
    let mut e2_points = Vec::new();
    'e2: for &rtt in &rtts {
        for nocheck in [false, true] {
            for rep in 1..=e2_reps {
                let what = if nocheck { "NOCHECK" } else { "checksums" };
                if !p.step(&format!("E2 RTT {rtt} ms, XTP {what}, repetition {rep} of {e2_reps}")) {
                    break 'e2;
                }
                e2_points.push(e2::point(rtt, nocheck, e2_bytes)?);
            }
        }
    }
    let mut tcp_points = Vec::new();
    let mut tcp_note = String::new();
    if tcp_rows {
        'tcp: for &rtt in &rtts {
            for window_64k in [false, true] {
                for rep in 1..=e2_reps {
                    let w = if window_64k { " (64 KB window)" } else { "" };
                    if !p.step(&format!(
                        "E2 RTT {rtt} ms, kernel TCP{w} through xpress netns, repetition {rep}"
                    )) {
                        break 'tcp;
                    }
                    tcp_points.push(e2::tcp_point(rtt, window_64k, e2_bytes)?);
                }
            }
        }
    } else if !plan.e2_tcp {
        tcp_note = "not measured: the plan turned the kernel TCP rows off (E2.tcp = false)".into();
    } else {
        tcp_note = "skipped: kernel TCP under the same link runs through `xpress netns`, which needs root \
                    (network namespaces and TUN devices); run the report as root to get these rows"
            .into();
        eprintln!("  E2 kernel TCP rows {tcp_note}");
    }

    // Goodput vs message size.
    let (msg_sizes, msg_bytes) = (plan.msg_sizes.clone(), plan.msg_bytes);
    let msg_rows = if p.stopped() || !plan.runs("MSG") {
        Vec::new()
    } else {
        msgsize::run(&msg_sizes, msg_bytes, plan.msg_reps, &plan.msg_peers, |l| p.step_unchecked(l))?
    };

    // E6.
    let mut e6_rows = Vec::new();
    'e6: for &rate in plan.e6_rates.iter().filter(|_| plan.runs("E6")) {
        for &size in &plan.e6_sizes {
            for rep in 0..plan.e6_reps {
                if !p.step(&format!("E6 packet radio {rate} bit/s, {size} B file, repetition {}", rep + 1)) {
                    break 'e6;
                }
                let seed = a.seed.wrapping_mul(1000).wrapping_add(u64::from(rep));
                e6_rows.push(e6::point(rate, size, plan.e6_transfers, seed)?);
            }
        }
    }
    let e6_rows = summary::group(e6_rows, &["rate_bps", "file_bytes"], "normalised");

    // E4 and E9.
    let margs = MapArgs {
        max_bindings: plan.e4_max_bindings,
        lookups: plan.e4_lookups,
        reps: plan.e4_reps,
        raw_keys: false,
    };
    let e4 =
        if plan.runs("E4") && p.step("E4 demux map lookup") { e4::table(&margs, false)? } else { Vec::new() };
    let e9 = if plan.runs("E9") && p.step("E9 mechanisms") { e9::run(a.quick) } else { Vec::new() };
    let partial = p.stopped();
    if partial {
        eprintln!("xpress report: stopped by Ctrl-C; writing the partial results");
    }

    let after = machine();
    // Repetitions: one row per point, its median and spread, every run kept.
    let tcp_rows = summary::group(
        tcp_points
            .iter()
            .map(|p| {
                json!({"rtt_ms": p.rtt_ms, "window_64k": p.window_64k, "bytes": p.bytes,
                "seconds": p.seconds, "mbit_per_s": p.mbit()})
            })
            .collect(),
        &["rtt_ms", "window_64k", "bytes"],
        "mbit_per_s",
    );
    let e2_rows = summary::group(
        e2_points
            .iter()
            .map(|p| {
                json!({"rtt_ms": p.rtt_ms, "nocheck": p.nocheck, "bytes": p.bytes, "seconds": p.seconds,
                "mbit_per_s": p.mbit(), "relay_p99_release_error_us": p.relay_p99_error_us})
            })
            .collect(),
        &["rtt_ms", "nocheck", "bytes"],
        "mbit_per_s",
    );
    let msg_rows = summary::group(
        msg_rows
            .iter()
            .map(|r| {
                json!({"transport": r.transport, "message_bytes": r.message, "bytes": r.bytes,
                "seconds": r.seconds, "mbit_per_s": r.mbit()})
            })
            .collect(),
        &["transport", "message_bytes"],
        "mbit_per_s",
    );
    let results = json!({
        "xpress": env!("CARGO_PKG_VERSION"),
        "quick": a.quick,
        "partial": partial,
        "plan": plan.to_json(),
        "seed": a.seed,
        "machine_before": before,
        "machine_after": after,
        "experiments": {
            "E1": {
                "title": "Message ping-pong: end-to-end (one-way) and processing time",
                "rows": e1_rows.iter().map(|r| json!({
                    "setting": r.setting, "size": r.size, "link_delay_ns": r.link_delay_ns,
                    "median_e2e_ns": r.median_e2e(), "processing_ns": r.processing(), "samples_e2e_ns": r.e2e_ns,
                })).collect::<Vec<_>>(),
            },
            "E2": {
                "title": "Bulk throughput vs round-trip delay through the emulator (45 Mbit/s)",
                "tcp": tcp_note,
                "repetitions": plan.e2_reps,
                "tcp_rows": tcp_rows,
                "rows": e2_rows,
            },
            "MSG": {
                "title": "Bulk goodput vs message size: XTP messages (EOM) vs kernel TCP writes (Nagle off) vs QUIC (quinn) stream writes, loopback",
                "bytes_per_run": msg_bytes,
                "max_messages_per_run": msgsize::MAX_MESSAGES,
                "repetitions": plan.msg_reps,
                "rows": msg_rows,
            },
            "E6": {
                "title": "File retrieval over packet radio (simulated half-duplex CSMA channel, 255-byte frames)",
                "repetitions": plan.e6_reps,
                "transfers_per_run": plan.e6_transfers,
                "rows": e6_rows,
            },
            "E9": {
                "title": "Mechanism benchmark",
                "rows": e9.iter().map(|m| json!({"mechanism": m.name, "parameter": m.param, "ns_per_op": m.ns, "copies_per_op": m.copies})).collect::<Vec<_>>(),
            },
            "E4": {
                "title": "Demux map lookup time vs bindings and key size",
                "lookups_per_rep": margs.lookups, "reps": margs.reps,
                "rows": e4.iter().map(|c| json!({
                    "key_bytes": c.key, "bindings": c.bindings, "hit_ns": c.hit, "miss_ns": c.miss, "nocache_ns": c.nocache,
                    "samples_hit_ns": c.samples[0], "samples_miss_ns": c.samples[1], "samples_nocache_ns": c.samples[2],
                })).collect::<Vec<_>>(),
            },
        },
    });
    let json_path = a.out.join("results.json");
    let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let html_path = a.out.join("report.html");
    fs::write(&html_path, html::render(&results)).map_err(|e| format!("{}: {e}", html_path.display()))?;
    // CSV: one file per experiment (scalar columns; raw samples stay in the
    // JSON), and the machine before and after.
    let mut csv_files = Vec::new();
    for (name, e) in results["experiments"].as_object().into_iter().flatten() {
        for list in ["rows", "tcp_rows"] {
            let Some(rows) = e[list].as_array().filter(|r| !r.is_empty()) else { continue };
            let suffix = if list == "rows" { String::new() } else { format!("-{list}") };
            let path = a.out.join(format!("results-{name}{suffix}.csv"));
            let first: &[&str] = match name.as_str() {
                "E1" => &["setting", "size"],
                "E2" => &["rtt_ms", "nocheck", "window_64k"],
                "MSG" => &["transport", "message_bytes"],
                "E6" => &["rate_bps", "file_bytes"],
                "E4" => &["key_bytes", "bindings"],
                "E9" => &["mechanism", "parameter"],
                _ => &[],
            };
            fs::write(&path, summary::csv(rows, first)).map_err(|e| format!("{}: {e}", path.display()))?;
            csv_files.push(path);
        }
    }
    let machine_rows: Vec<Value> = ["before", "after"]
        .iter()
        .map(|w| {
            let mut m = results[format!("machine_{w}")].clone();
            m["when"] = json!(w);
            m
        })
        .collect();
    let machine_csv = a.out.join("results-machine.csv");
    fs::write(&machine_csv, summary::csv(&machine_rows, &["when"]))
        .map_err(|e| format!("{}: {e}", machine_csv.display()))?;

    if !e1_rows.is_empty() {
        println!("E1 processing time per message (one way, median):");
    }
    for r in &e1_rows {
        println!(
            "  {:>24} {:>6} B  e2e {:>10.1} µs  processing {:>8.1} µs",
            r.setting,
            r.size,
            r.median_e2e() / 1e3,
            r.processing() / 1e3
        );
    }
    if !e1_rows.is_empty() {
        println!("  seed 000 Table 3, SandiaXTP (1997): 800 / 1,520 / 2,680 µs for 10 / 1,000 / 10,000 B");
    }
    if !e4.is_empty() {
        let hit_max = e4.iter().map(|c| c.hit).fold(0.0, f64::max);
        let miss_max = e4.iter().map(|c| c.miss).fold(0.0, f64::max);
        println!(
            "E4: cache hit ≤ {hit_max:.2} ns, miss ≤ {miss_max:.1} ns up to {} bindings (seed 003: 17 µs hit, 19–42 µs miss)",
            margs.max_bindings
        );
    }
    let range = |r: &Value, v: &str| {
        let s = &r[format!("{v}_spread")];
        format!(
            "(n {}, {:.2}–{:.2})",
            s["n"],
            s["min"].as_f64().unwrap_or(0.0),
            s["max"].as_f64().unwrap_or(0.0)
        )
    };
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    if !e2_rows.is_empty() {
        println!("E2 goodput through a 45 Mbit/s emulated path (median of repetitions, range):");
    }
    for r in &e2_rows {
        let what = if r["nocheck"] == true { "NOCHECK" } else { "checksums" };
        let m = num(&r["mbit_per_s"]);
        println!("  RTT {:>3} ms {what:>9}: {m:>6.2} Mbit/s {}", r["rtt_ms"], range(r, "mbit_per_s"));
    }
    for r in &tcp_rows {
        let w = if r["window_64k"] == true { " 64 KB" } else { "       " };
        let m = num(&r["mbit_per_s"]);
        println!("  RTT {:>3} ms  kernel TCP{w}: {m:>6.2} Mbit/s {}", r["rtt_ms"], range(r, "mbit_per_s"));
    }
    if !msg_rows.is_empty() {
        println!("Goodput vs message size (loopback; median, range):");
    }
    for r in &msg_rows {
        let (m, t) = (num(&r["mbit_per_s"]), r["transport"].as_str().unwrap_or(""));
        println!("  {:>6} B {t}: {m:>9.1} Mbit/s {}", r["message_bytes"], range(r, "mbit_per_s"));
    }
    if !e6_rows.is_empty() {
        println!("E6 file retrieval over packet radio (simulated; normalised throughput, median):");
    }
    for r in &e6_rows {
        let n = num(&r["normalised"]);
        println!("  {:>5} bit/s {:>6} B: {n:.3} {}", r["rate_bps"], r["file_bytes"], range(r, "normalised"));
    }
    if !e6_rows.is_empty() {
        println!(
            "  seed 003 Table 6.2 (real radios, 2003): 0.18–0.31 at 1,200 bit/s, 0.03–0.08 at 9,600 bit/s"
        );
    }
    if !e9.is_empty() {
        println!("E9 mechanisms:");
    }
    for m in &e9 {
        let copies = m.copies.map(|c| format!(", {c:.2} payload copies")).unwrap_or_default();
        println!("  {:>44} {:>14}: {:>10.1} ns{copies}", m.name, m.param, m.ns);
    }
    println!(
        "wrote {}, {} and {} CSV files in {}{}",
        html_path.display(),
        json_path.display(),
        csv_files.len() + 1,
        a.out.display(),
        if partial { " (partial)" } else { "" }
    );
    Ok(())
}
