//! `xpress report`: the seeds' experiments measured here and now, next to the
//! seeds' own tables, as JSON (every raw sample) and a self-contained HTML page
//! with SVG plots.
//!
//! This version covers E1 (message ping-pong, seed 000 Tables 1–3), E2
//! (throughput vs RTT through the emulator, seed 002 Fig. 3, with kernel TCP
//! through `xpress netns` as root), goodput vs message size (the throughput
//! part of E8), E4 (demux map lookup, seed 003 Table 5.2) and E9 (mechanism
//! benchmark, seed 000 §4.2). The other experiments arrive with the parts
//! they need (issue #7).
//!
//! Every step prints a progress line (step k of n, elapsed, time left by the
//! steps so far). Ctrl-C stops after the step under way and still writes the
//! JSON and HTML, marked partial, with every experiment finished by then.

mod e1;
mod e2;
pub mod e4;
mod e9;
mod html;
mod msgsize;
mod plan;
mod progress;

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
    let steps = count("E1", plan.e1_sizes.len())
        + count("E2", plan.e2_rtts.len() * 2 * if tcp_rows { 2 } else { 1 })
        + count("MSG", plan.msg_sizes.len() * 2)
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
            if !p.step(&format!("E2 RTT {rtt} ms, XTP {}", if nocheck { "NOCHECK" } else { "checksums" })) {
                break 'e2;
            }
            e2_points.push(e2::point(rtt, nocheck, e2_bytes)?);
        }
    }
    let mut tcp_points = Vec::new();
    let mut tcp_note = String::new();
    if tcp_rows {
        'tcp: for &rtt in &rtts {
            for window_64k in [false, true] {
                let w = if window_64k { " (64 KB window)" } else { "" };
                if !p.step(&format!("E2 RTT {rtt} ms, kernel TCP{w} through xpress netns")) {
                    break 'tcp;
                }
                tcp_points.push(e2::tcp_point(rtt, window_64k, e2_bytes)?);
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
        msgsize::run(&msg_sizes, msg_bytes, |l| p.step_unchecked(l))?
    };

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
                "tcp_rows": tcp_points.iter().map(|p| json!({"rtt_ms": p.rtt_ms, "window_64k": p.window_64k, "bytes": p.bytes,
                    "seconds": p.seconds, "mbit_per_s": p.mbit()})).collect::<Vec<_>>(),
                "rows": e2_points.iter().map(|p| json!({"rtt_ms": p.rtt_ms, "nocheck": p.nocheck, "bytes": p.bytes,
                    "seconds": p.seconds, "mbit_per_s": p.mbit(), "relay_p99_release_error_us": p.relay_p99_error_us})).collect::<Vec<_>>(),
            },
            "MSG": {
                "title": "Bulk goodput vs message size: XTP messages (EOM) vs kernel TCP writes (Nagle off), loopback",
                "bytes_per_run": msg_bytes,
                "rows": msg_rows.iter().map(|r| json!({"transport": r.transport, "message_bytes": r.message,
                    "bytes": r.bytes, "seconds": r.seconds, "mbit_per_s": r.mbit()})).collect::<Vec<_>>(),
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
                })).collect::<Vec<_>>(),
            },
        },
    });
    let json_path = a.out.join("results.json");
    let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let html_path = a.out.join("report.html");
    fs::write(&html_path, html::render(&results)).map_err(|e| format!("{}: {e}", html_path.display()))?;

    println!("E1 processing time per message (one way, median):");
    for r in &e1_rows {
        println!(
            "  {:>24} {:>6} B  e2e {:>10.1} µs  processing {:>8.1} µs",
            r.setting,
            r.size,
            r.median_e2e() / 1e3,
            r.processing() / 1e3
        );
    }
    println!("  seed 000 Table 3, SandiaXTP (1997): 800 / 1,520 / 2,680 µs for 10 / 1,000 / 10,000 B");
    let hit_max = e4.iter().map(|c| c.hit).fold(0.0, f64::max);
    let miss_max = e4.iter().map(|c| c.miss).fold(0.0, f64::max);
    println!(
        "E4: cache hit ≤ {hit_max:.2} ns, miss ≤ {miss_max:.1} ns up to {} bindings (seed 003: 17 µs hit, 19–42 µs miss)",
        margs.max_bindings
    );
    println!("E2 goodput through a 45 Mbit/s emulated path:");
    for p in &e2_points {
        println!(
            "  RTT {:>3} ms {:>9}: {:>6.2} Mbit/s",
            p.rtt_ms,
            if p.nocheck { "NOCHECK" } else { "checksums" },
            p.mbit()
        );
    }
    for p in &tcp_points {
        println!(
            "  RTT {:>3} ms  kernel TCP{}: {:>6.2} Mbit/s",
            p.rtt_ms,
            if p.window_64k { " 64 KB" } else { "       " },
            p.mbit()
        );
    }
    println!("Goodput vs message size (loopback):");
    for r in &msg_rows {
        println!("  {:>6} B {}: {:>9.1} Mbit/s", r.message, r.transport, r.mbit());
    }
    println!("E9 mechanisms:");
    for m in &e9 {
        let copies = m.copies.map(|c| format!(", {c:.2} payload copies")).unwrap_or_default();
        println!("  {:>44} {:>14}: {:>10.1} ns{copies}", m.name, m.param, m.ns);
    }
    println!(
        "wrote {} and {}{}",
        html_path.display(),
        json_path.display(),
        if partial { " (partial)" } else { "" }
    );
    Ok(())
}
