//! The HTML page: tables next to the seeds' historical tables, and SVG plots
//! drawn here (no scripts, no external files).

use serde_json::Value;

use crate::svg::{esc, loglog, plot};

/// Seed 000, Table 3 (processing time, integrated clients), SandiaXTP row:
/// 10 / 1,000 / 10,000 bytes.
const SEED000_T3_SANDIA_MS: [(f64, f64); 3] = [(10.0, 0.80), (1000.0, 1.52), (10_000.0, 2.68)];
/// Seed 000, Table 2 (end-to-end, integrated clients, 0.9 ms simulated link).
const SEED000_T2_SANDIA_MS: [(f64, f64); 3] = [(10.0, 1.70), (1000.0, 2.42), (10_000.0, 3.58)];
/// Seed 003, Table 5.2, 14-byte keys (µs), 100 … 1,000 bindings.
const SEED003_T52_14B_HIT_US: [f64; 10] = [17.0, 17.0, 17.3, 17.2, 17.0, 17.2, 17.0, 17.1, 17.0, 17.2];
const SEED003_T52_14B_MISS_US: [f64; 10] = [19.4, 20.9, 23.1, 25.8, 27.9, 30.5, 32.3, 34.7, 37.9, 41.8];

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// A repeated measurement's median with its range and count when repeated.
fn with_spread(row: &Value, field: &str, prec: usize) -> String {
    let m = f(&row[field]);
    let s = &row[format!("{field}_spread")];
    match s["n"].as_u64() {
        Some(n) if n > 1 => format!(
            "{m:.prec$} <span class=\"src\">({:.prec$}–{:.prec$}, n {n})</span>",
            f(&s["min"]),
            f(&s["max"])
        ),
        _ => format!("{m:.prec$}"),
    }
}

/// Renders the results JSON as one HTML page.
pub(crate) fn render(r: &Value) -> String {
    let e1 = r["experiments"]["E1"]["rows"].as_array().cloned().unwrap_or_default();
    let e4 = r["experiments"]["E4"]["rows"].as_array().cloned().unwrap_or_default();
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>xpress report</title><style>body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}caption{text-align:left;font-weight:bold}.src{color:#666;font-size:90%}</style></head><body>",
    );
    h += "<h1>xpress report</h1>";
    if r["partial"].as_bool() == Some(true) {
        h += "<p style=\"background:#fee;padding:6px\"><b>Partial results:</b> the run was stopped (Ctrl-C) before every experiment finished; what is shown was measured before the stop.</p>";
    }
    h += &format!(
        "<p class=\"src\">seed {} · {} run · machine: {} · every number below is computed from the raw samples in results.json, except the seeds' historical numbers, each labelled with its source.</p>",
        r["seed"],
        if r["quick"].as_bool() == Some(true) { "quick" } else { "full" },
        esc(&r["machine_before"].to_string())
    );

    // E1
    h += "<h2 id=\"e1\">E1 — message ping-pong</h2><table><caption>Measured here: one-way end-to-end and processing time (median)</caption><tr><th>setting</th><th>bytes</th><th>end-to-end µs</th><th>processing µs</th><th>relative</th></tr>";
    let mut base: std::collections::HashMap<String, f64> = Default::default();
    for row in &e1 {
        let set = row["setting"].as_str().unwrap_or("").to_string();
        let p = f(&row["processing_ns"]) / 1e3;
        let b = *base.entry(set.clone()).or_insert(p);
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            esc(&set),
            row["size"],
            f(&row["median_e2e_ns"]) / 1e3,
            p,
            p / b.max(1e-9)
        );
    }
    h += "</table><table><caption>Seed 000 (Thees &amp; Gotzhein 1997), SandiaXTP, integrated clients, 0.9 ms simulated link</caption><tr><th>bytes</th><th>end-to-end ms (Table 2)</th><th>processing ms (Table 3)</th><th>relative (Table 3)</th></tr>";
    for (i, (n, p)) in SEED000_T3_SANDIA_MS.iter().enumerate() {
        h += &format!(
            "<tr><td>{n}</td><td>{:.2}</td><td>{p:.2}</td><td>{:.1}</td></tr>",
            SEED000_T2_SANDIA_MS[i].1,
            p / SEED000_T3_SANDIA_MS[0].1
        );
    }
    h += "</table>";
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in &e1 {
        let set = row["setting"].as_str().unwrap_or("").to_string();
        let pt = (f(&row["size"]), f(&row["processing_ns"]) / 1e3);
        match series.iter_mut().find(|s| s.0 == set) {
            Some(s) => s.1.push(pt),
            None => series.push((set, vec![pt])),
        }
    }
    series.push((
        "SandiaXTP 1997 (seed 000 T3)".into(),
        SEED000_T3_SANDIA_MS.iter().map(|(n, p)| (*n, p * 1e3)).collect(),
    ));
    h += &loglog("E1 processing time vs message size", "message bytes", "µs", &series);
    if let (Some(ours), Some(theirs)) = (e1.first(), SEED000_T3_SANDIA_MS.first()) {
        h += &format!(
            "<p>Reading: a 10-byte message takes {:.1} µs of processing here ({}) against {:.0} µs for SandiaXTP in 1997 — a factor of {:.0}. Going from 10 to 10,000 bytes multiplies our processing time by {:.1} (theirs: {:.1}).</p>",
            f(&ours["processing_ns"]) / 1e3,
            esc(ours["setting"].as_str().unwrap_or("")),
            theirs.1 * 1e3,
            theirs.1 * 1e6 / f(&ours["processing_ns"]).max(1.0),
            e1.get(6).map_or(0.0, |r| f(&r["processing_ns"])) / f(&ours["processing_ns"]).max(1.0),
            SEED000_T3_SANDIA_MS[2].1 / SEED000_T3_SANDIA_MS[0].1
        );
    }

    // E2
    let e2 = r["experiments"]["E2"]["rows"].as_array().cloned().unwrap_or_default();
    h += "<h2 id=\"e2\">E2 — throughput vs round-trip delay</h2><table><caption>Measured here through the real-time emulator (rate 45 Mbit/s, the DS-3 port of seed 002), Mbit/s of goodput</caption><tr><th>RTT ms</th><th>XTP, checksums</th><th>XTP, NOCHECK</th><th>kernel TCP</th><th>kernel TCP, 64 KB window</th><th>relay p99 release error µs (worst run)</th></tr>";
    let tcp = r["experiments"]["E2"]["tcp_rows"].as_array().cloned().unwrap_or_default();
    let tcp_get = |rtt: u64, w: bool| {
        tcp.iter().find(|p| p["rtt_ms"].as_u64() == Some(rtt) && p["window_64k"].as_bool() == Some(w))
    };
    let cell = |p: Option<&Value>| p.map_or("—".to_string(), |p| with_spread(p, "mbit_per_s", 2));
    let mut rtts: Vec<u64> = e2.iter().filter_map(|p| p["rtt_ms"].as_u64()).collect();
    rtts.dedup();
    let get = |rtt: u64, nocheck: bool| {
        e2.iter().find(|p| p["rtt_ms"].as_u64() == Some(rtt) && p["nocheck"].as_bool() == Some(nocheck))
    };
    for &rtt in &rtts {
        let (a, b) = (get(rtt, false), get(rtt, true));
        h += &format!(
            "<tr><td>{rtt}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td></tr>",
            cell(a),
            cell(b),
            cell(tcp_get(rtt, false)),
            cell(tcp_get(rtt, true)),
            a.map_or(0.0, |p| {
                let s =
                    p["samples"].as_array().map(|v| v.iter().map(|x| f(&x["relay_p99_release_error_us"])));
                s.map_or(0.0, |it| it.fold(0.0, f64::max))
            })
        );
    }
    let note = r["experiments"]["E2"]["tcp"].as_str().unwrap_or("");
    h += &if note.is_empty() {
        "</table><p class=\"src\">Kernel TCP: Linux's own stack between two network namespaces joined by `xpress netns` under the same link model (45 Mbit/s, the same delays); \"64 KB window\": the server's receive buffer set to 64 KB, as close as Linux comes to seed 002's SunOS window.</p>".to_string()
    } else {
        format!("</table><p class=\"src\">Kernel TCP: {}.</p>", esc(note))
    };
    h += "<p class=\"src\">Seed 002 (Miyake, Kato, Suzuki), Fig. 3, read from the figure (no table in the source): XTP on the x-kernel with a 1 MB window peaked near 17 Mbit/s and kept its throughput as the round trip grew to 200 ms; SunOS kernel TCP reached about 19 Mbit/s at 0 ms and collapsed with delay (64 KB / 53 KB windows); checksums cost XTP little.</p>";
    let curve = |nocheck: bool| -> Vec<(f64, f64)> {
        rtts.iter()
            .filter(|&&r| r > 0)
            .filter_map(|&r| get(r, nocheck).map(|p| (r as f64, f(&p["mbit_per_s"]))))
            .collect()
    };
    let tcp_curve = |w: bool| -> Vec<(f64, f64)> {
        rtts.iter()
            .filter(|&&r| r > 0)
            .filter_map(|&r| tcp_get(r, w).map(|p| (r as f64, f(&p["mbit_per_s"]))))
            .collect()
    };
    h += &loglog(
        "E2 goodput vs RTT (45 Mbit/s path)",
        "round-trip ms",
        "Mbit/s",
        &[
            ("XTP, checksums".to_string(), curve(false)),
            ("XTP, NOCHECK".to_string(), curve(true)),
            ("kernel TCP".to_string(), tcp_curve(false)),
            ("kernel TCP, 64 KB".to_string(), tcp_curve(true)),
        ],
    );
    if let (Some(first), Some(last)) = (rtts.first(), rtts.last()) {
        let (g0, g1) = (
            get(*first, false).map_or(0.0, |p| f(&p["mbit_per_s"])),
            get(*last, false).map_or(0.0, |p| f(&p["mbit_per_s"])),
        );
        h += &format!(
            "<p>Reading: {:.1} Mbit/s at {first} ms and {:.1} Mbit/s at {last} ms round trip. Each point is one transfer of {} bytes, so at long round trips slow start takes a large share of it — unlike the seed's long transfers.</p>",
            g0,
            g1,
            e2.first().map_or(0, |p| p["bytes"].as_u64().unwrap_or(0))
        );
    }

    h += &e6_section(r);
    h += &plan_plots(r);

    // E4
    h += "<h2 id=\"e4\">E4 — demux map lookup</h2><table><caption>Measured here: ns per lookup (median)</caption><tr><th>bindings</th><th>key bytes</th><th>hit</th><th>miss</th><th>no cache</th></tr>";
    for row in &e4 {
        h += &format!(
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            row["bindings"],
            row["key_bytes"],
            f(&row["hit_ns"]),
            f(&row["miss_ns"]),
            f(&row["nocache_ns"])
        );
    }
    h += "</table><table><caption>Seed 003 (Li 2003), Table 5.2, 14-byte keys, µs per lookup (Pentium III 547 MHz)</caption><tr><th>bindings</th>";
    for i in 1..=10 {
        h += &format!("<th>{}</th>", i * 100);
    }
    h += "</tr><tr><th>hit</th>";
    for v in SEED003_T52_14B_HIT_US {
        h += &format!("<td>{v}</td>");
    }
    h += "</tr><tr><th>miss</th>";
    for v in SEED003_T52_14B_MISS_US {
        h += &format!("<td>{v}</td>");
    }
    h += "</tr></table>";
    let pick = |k: u64, field: &str| -> Vec<(f64, f64)> {
        e4.iter()
            .filter(|r| r["key_bytes"].as_u64() == Some(k))
            .map(|r| (f(&r["bindings"]), f(&r[field])))
            .collect()
    };
    let series = vec![
        ("hit, 14 B".to_string(), pick(14, "hit_ns")),
        ("miss, 14 B".to_string(), pick(14, "miss_ns")),
        ("no cache, 14 B".to_string(), pick(14, "nocache_ns")),
        (
            "hit 2003 (seed 003)".to_string(),
            SEED003_T52_14B_HIT_US
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64 * 100.0, v * 1e3))
                .collect(),
        ),
        (
            "miss 2003 (seed 003)".to_string(),
            SEED003_T52_14B_MISS_US
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64 * 100.0, v * 1e3))
                .collect(),
        ),
    ];
    h += &loglog("E4 lookup time vs bindings (14-byte keys)", "bindings", "ns per lookup", &series);
    h += "<p>Reading: as in the seed, a cache hit costs the same at every table size while a miss grows with the table; the absolute times are four orders of magnitude lower.</p>";

    // E9
    // Goodput vs message size.
    let msg = r["experiments"]["MSG"]["rows"].as_array().cloned().unwrap_or_default();
    h += "<h2 id=\"msg\">Goodput vs message size</h2><table><caption>Measured here on loopback, Mbit/s: XTP messages (each ending with EOM) kernel TCP writes of the same size (Nagle off) and QUIC (quinn) stream writes of the same size, same tools, separate processes; each run moves the plan's byte count or 250,000 messages, whichever is less</caption><tr><th>message bytes</th><th>XTP</th><th>kernel TCP</th><th>QUIC (quinn)</th><th>iperf3 (TCP)</th><th>XTP / TCP</th><th>XTP / QUIC</th></tr>";
    let mut sizes: Vec<u64> = msg.iter().filter_map(|m| m["message_bytes"].as_u64()).collect();
    sizes.dedup();
    let row = |size: u64, t: &str| {
        msg.iter().find(|m| m["message_bytes"].as_u64() == Some(size) && m["transport"].as_str() == Some(t))
    };
    let rate = |size: u64, t: &str| row(size, t).map_or(0.0, |m| f(&m["mbit_per_s"]));
    for &size in &sizes {
        let (x, t, q) = (rate(size, "xtp"), rate(size, "tcp"), rate(size, "quic"));
        let shown = |tr: &str| row(size, tr).map_or("—".to_string(), |m| with_spread(m, "mbit_per_s", 1));
        let i = row(size, "iperf3")
            .map_or("— (not installed)".to_string(), |m| with_spread(m, "mbit_per_s", 1));
        h += &format!(
            "<tr><td>{size}</td><td>{}</td><td>{}</td><td>{}</td><td>{i}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            shown("xtp"),
            shown("tcp"),
            shown("quic"),
            if t > 0.0 { x / t } else { 0.0 },
            if q > 0.0 { x / q } else { 0.0 }
        );
    }
    h += "</table>";
    let series = |t: &str| -> Vec<(f64, f64)> { sizes.iter().map(|&s| (s as f64, rate(s, t))).collect() };
    h += &loglog(
        "Goodput vs message size (loopback)",
        "message bytes",
        "Mbit/s",
        &[
            ("XTP".to_string(), series("xtp")),
            ("kernel TCP".to_string(), series("tcp")),
            ("QUIC (quinn)".to_string(), series("quic")),
            ("iperf3".to_string(), series("iperf3").into_iter().filter(|p| p.1 > 0.0).collect()),
        ],
    );
    if let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) {
        h += &format!(
            "<p>Reading: with {lo}-byte messages XTP moves {:.1} Mbit/s against TCP's {:.1} and QUIC's {:.1}; with {hi}-byte messages {:.1} against {:.1} and {:.1}. QUIC here is quinn in user space like XTP, encrypting every packet (TLS 1.3), with windows raised to 16/32 MiB for loopback; each small write is one async call. Each XTP message is at least one packet with its own EOM (and a status request); TCP, with Nagle off, still coalesces writes into segments when the receiver lags. iperf3 (when installed) runs with its own defaults — Nagle on, its own timing — as an outside check on our TCP numbers, not as the same method.</p>",
            rate(lo, "xtp"),
            rate(lo, "tcp"),
            rate(lo, "quic"),
            rate(hi, "xtp"),
            rate(hi, "tcp"),
            rate(hi, "quic")
        );
    }

    let e9 = r["experiments"]["E9"]["rows"].as_array().cloned().unwrap_or_default();
    h += "<h2 id=\"e9\">E9 — mechanism benchmark</h2><table><caption>Measured here (median ns per operation)</caption><tr><th>mechanism</th><th>parameter</th><th>ns</th><th>payload copies per operation</th></tr>";
    for row in &e9 {
        let copies = row["copies_per_op"].as_f64().map_or("—".to_string(), |c| format!("{c:.2}"));
        h += &format!(
            "<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{:.1}</td><td>{copies}</td></tr>",
            esc(row["mechanism"].as_str().unwrap_or("")),
            esc(row["parameter"].as_str().unwrap_or("")),
            f(&row["ns_per_op"])
        );
    }
    h += "</table><table><caption>Seed 000 §3–4 (1997): copies of a data packet</caption><tr><th>implementation</th><th>copies</th></tr><tr><td>SandiaXTP (central packet buffers)</td><td>4, end to end</td></tr><tr><td>Estelle specification (EC, PET/DINGO)</td><td>7 on the way down, 7 on the way up</td></tr></table>";
    h += "<p>Reading: with the rope form a message crosses both stacks and back without one payload copy; the contiguous form copies once per message (building it behind its headroom). The seed counted copies, not nanoseconds, for these mechanisms.</p>";
    h + "</body></html>"
}

/// E6: file retrieval over packet radio, next to seed 003 Tables 6.1–6.2.
fn e6_section(r: &Value) -> String {
    use crate::e6::{SEED003_SIZES, SEED003_T61_BPS, SEED003_T62_NORM};
    let rows = r["experiments"]["E6"]["rows"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h2 id=\"e6\">E6 — file retrieval over packet radio</h2><table><caption>Measured here in the simulator: XTP over one half-duplex radio channel (p-persistent CSMA, KISS default timing, 255-byte frames); median of the repetitions</caption><tr><th>bit/s</th><th>file bytes</th><th>latency s</th><th>throughput bit/s</th><th>normalised</th><th>seed 003 T6.1 bit/s</th><th>seed 003 T6.2</th><th>collisions / key-ups (all runs)</th></tr>",
    );
    let seed = |table: &[(u64, [f64; 4]); 2], rate: u64, size: u64| {
        let col = SEED003_SIZES.iter().position(|&s| s as u64 == size)?;
        table.iter().find(|(r, _)| *r == rate).map(|(_, v)| v[col])
    };
    for row in &rows {
        let (rate, size) = (row["rate_bps"].as_u64().unwrap_or(0), row["file_bytes"].as_u64().unwrap_or(0));
        let samples = row["samples"].as_array().cloned().unwrap_or_default();
        let med = |field: &str| {
            let mut v: Vec<f64> = samples.iter().map(|s| f(&s[field])).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let sum = |field: &str| samples.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum::<u64>();
        let show = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v}"));
        h += &format!(
            "<tr><td>{rate}</td><td>{size}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
            med("latency_s"),
            med("bit_per_s"),
            with_spread(row, "normalised", 3),
            show(seed(&SEED003_T61_BPS, rate, size)),
            show(seed(&SEED003_T62_NORM, rate, size)),
            sum("collisions"),
            sum("key_ups"),
        );
    }
    h += "</table><p class=\"src\">Seed 003 (Li 2003), Tables 6.1 and 6.2: FTP over XSTP / IPv4+DSR / AX.25 (KISS) between two Kenwood TM-D700 radios in a noisy room, 20–30 runs each, runs spoiled by noise discarded. The seed does not define its throughput for 1-byte files (1 byte in one 255-byte frame cannot give 334 bit/s as file bits over latency), so compare the trend and the normalised values, not single cells.</p>";
    let curve = |rate: u64| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r["rate_bps"].as_u64() == Some(rate))
            .map(|r| {
                let lat: Vec<f64> =
                    r["samples"].as_array().into_iter().flatten().map(|s| f(&s["latency_s"])).collect();
                let mut lat = lat;
                lat.sort_by(f64::total_cmp);
                (f(&r["file_bytes"]), lat.get(lat.len() / 2).copied().unwrap_or(0.0))
            })
            .collect()
    };
    h += &loglog(
        "E6 latency vs file size over packet radio (cf. seed 003 Fig. 6.4)",
        "file bytes",
        "seconds",
        &[("1,200 bit/s".to_string(), curve(1200)), ("9,600 bit/s".to_string(), curve(9600))],
    );
    let norm = |rate: u64| {
        rows.iter()
            .filter(|r| r["rate_bps"].as_u64() == Some(rate))
            .map(|r| f(&r["normalised"]))
            .fold(0.0, f64::max)
    };
    h += &format!(
        "<p>Reading: the best normalised throughput is {:.2} at 1,200 bit/s and {:.2} at 9,600 bit/s. As in the seed, the faster channel uses its capacity worse: the fixed costs of every transmission (500 ms key-up, persistence waits, the half-duplex turn-around for acknowledgements) do not shrink with the bit rate.</p>",
        norm(1200),
        norm(9600)
    );
    h
}

/// The plots the plan asks for, drawn from the results' rows.
fn plan_plots(r: &Value) -> String {
    let specs = r["plan"]["plots"].as_array().cloned().unwrap_or_default();
    if specs.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2 id=\"plots\">Plots from the plan</h2>");
    for spec in &specs {
        let s = |k: &str| spec[k].as_str().unwrap_or("").to_string();
        let (exp, x, y) = (s("experiment"), s("x"), s("y"));
        let rows = r["experiments"][&exp][s("rows")].as_array().cloned().unwrap_or_default();
        let label = |v: &Value| match v {
            Value::String(t) => t.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for row in &rows {
            let (Some(px), Some(py)) = (row[&x].as_f64(), row[&y].as_f64()) else { continue };
            let name = match spec["series"].as_str() {
                Some(col) => format!("{col} = {}", label(&row[col])),
                None => y.clone(),
            };
            match series.iter_mut().find(|(n, _)| *n == name) {
                Some((_, pts)) => pts.push((px, py)),
                None => series.push((name, vec![(px, py)])),
            }
        }
        for (_, pts) in &mut series {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let log = (spec["log_x"].as_bool() == Some(true), spec["log_y"].as_bool() == Some(true));
        let svg = plot(&s("title"), (&x, &y), &series, log);
        h += &if svg.is_empty() {
            format!(
                "<p class=\"src\">{}: nothing to draw — no {exp} row has numbers in both {x:?} and {y:?} (not run, or not columns of these rows).</p>",
                esc(&s("title"))
            )
        } else {
            svg
        };
    }
    h
}
