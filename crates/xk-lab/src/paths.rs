//! PATHS — impaired paths: steady-state goodput over a matrix of round-trip
//! time × random loss, XTP with each congestion controller against kernel
//! TCP (CUBIC, and BBR when the kernel has it), both through the same
//! `xpress netns` emulator (root; without root XTP runs through the
//! in-process relay and the TCP cells are skipped, saying so).
//!
//! Each run counts 50 round trips (50 × BDP at the bottleneck rate), at
//! least `min_seconds` and at most `max_seconds`, after ten round trips
//! (1-10 s) of slow start left out of the count (`bulk -O`, `iperf3 -O`):
//! steady-state goodput. The figure is a heatmap of the
//! XTP/TCP goodput ratio per controller pair, the numbers in the cells.

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::netns_run::{self, Outcome, Sender, Timing};
use crate::stats;
use crate::svg::heatmap;

/// PATHS' parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Bottleneck rates, Mbit/s.
    pub rate_mbit: Vec<u64>,
    /// Round trips (half the delay each way).
    pub rtt_ms: Vec<u64>,
    /// Random loss, per cent, each direction.
    pub loss_pct: Vec<f64>,
    /// XTP's controllers: cubic, bbr, newreno, none.
    pub xtp_cc: Vec<String>,
    /// Kernel TCP's controllers (those the kernel lacks are skipped).
    pub tcp_cc: Vec<String>,
    /// Runs per cell.
    pub repetitions: u32,
    /// Shortest run, seconds.
    pub min_seconds: f64,
    /// Longest run, seconds.
    pub max_seconds: f64,
    /// What carries XTP through `xpress netns`: `raw` (IP protocol 36 with
    /// kernel TCP's 1,448-byte segment, so both pay 52 header bytes per
    /// packet) or `udp` (8 bytes of UDP more, 1,440-byte segments: XTP's
    /// ceiling is then 0.9945 of TCP's at zero loss). Without root XTP runs
    /// over UDP through the relay whatever this says. Results made before
    /// this parameter existed ran over UDP.
    #[serde(default = "over_udp")]
    pub xtp_over: String,
}

/// One cell's point: rate, RTT, loss, sender, repetition.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    rate_mbit: u64,
    rtt_ms: u64,
    loss_pct: f64,
    /// `xtp` or `tcp`.
    transport: String,
    cc: String,
    rep: u32,
}

/// One run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Bottleneck, Mbit/s.
    pub rate_mbit: u64,
    /// Round trip, ms.
    pub rtt_ms: u64,
    /// Loss, per cent.
    pub loss_pct: f64,
    /// `xtp` or `tcp`.
    pub transport: String,
    /// Congestion controller.
    pub cc: String,
    /// Repetition.
    pub rep: u32,
    /// Goodput over the bottleneck rate.
    pub utilisation: f64,
    /// Goodput, the emulator's verdict.
    #[serde(flatten)]
    pub outcome: Outcome,
}

fn over_udp() -> String {
    "udp".into()
}

/// PATHS.
pub struct Paths(Params);

fn link(rate: u64, rtt: u64, loss: f64) -> String {
    let mut l = format!("rate {rate}mbit delay {}us limit 1000", rtt * 500);
    if loss > 0.0 {
        l += &format!(" loss {loss}%");
    }
    l
}

impl Paths {
    /// The counted part: 50 round trips within the plan's bounds, after
    /// slow start (ten round trips, 1-10 s, left out of the count).
    fn timing(&self, rtt_ms: u64) -> Timing {
        Timing::steady((50.0 * rtt_ms as f64 / 1e3).clamp(self.0.min_seconds, self.0.max_seconds), rtt_ms)
    }
}

impl Experiment for Paths {
    const ID: &'static str = "PATHS";
    const TITLE: &'static str = "Impaired paths: XTP vs kernel TCP over round-trip time × random loss";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            rate_mbit: vec![45],
            // Issue #12's default matrix (RTT 0/50/200 ms × loss 0/0.5/2 %)
            // with the default controllers, XTP CUBIC against kernel CUBIC,
            // within the report's ten minutes; BBR against the kernel's
            // BBR, the other controllers, 1 Gbit/s and longer cells are
            // plans/paths-full.toml.
            rtt_ms: if quick { vec![0, 50] } else { vec![0, 50, 200] },
            loss_pct: if quick { vec![0.0, 1.0] } else { vec![0.0, 0.5, 2.0] },
            xtp_cc: vec!["cubic".into()],
            tcp_cc: vec!["cubic".into()],
            repetitions: 1,
            min_seconds: 3.0,
            // 50 round trips (50 × BDP, issue #12) at every RTT of the
            // default matrix: 10 s at 200 ms (8 s counted only 40). The
            // full sweep, plans/paths-full.toml, runs 5-25 s per cell.
            max_seconds: if quick { 3.0 } else { 10.0 },
            xtp_over: "raw".into(),
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.rate_mbit.is_empty() || p.rate_mbit.iter().any(|&r| !(1..=10_000).contains(&r)) {
            return Err("rate_mbit: 1 to 10,000 each, at least one".into());
        }
        if p.rtt_ms.is_empty() || p.rtt_ms.iter().any(|&r| r > 10_000) {
            return Err("rtt_ms: 0 to 10,000 each, at least one".into());
        }
        if p.loss_pct.is_empty() || p.loss_pct.iter().any(|&l| !(0.0..=50.0).contains(&l)) {
            return Err("loss_pct: 0 to 50 each, at least one".into());
        }
        if let Some(c) = p.xtp_cc.iter().find(|c| c.parse::<xtp_proto::Congestion>().is_err()) {
            return Err(format!("xtp_cc: {c:?} is not one of cubic, bbr, newreno, none"));
        }
        if p.xtp_over != "raw" && p.xtp_over != "udp" {
            return Err(format!("xtp_over: {:?} is not raw or udp", p.xtp_over));
        }
        if !(1..=100).contains(&p.repetitions)
            || !(0.5..=3600.0).contains(&p.min_seconds)
            || p.max_seconds < p.min_seconds
        {
            return Err("repetitions 1 to 100; 0.5 <= min_seconds <= max_seconds".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        Paths(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, env: &Env) -> Vec<Step<Point>> {
        let p = &self.0;
        let tcp_ok = env.root && netns_run::have_iperf3();
        let mut senders: Vec<(String, String)> =
            p.xtp_cc.iter().map(|c| ("xtp".to_string(), c.clone())).collect();
        if tcp_ok {
            senders.extend(
                p.tcp_cc
                    .iter()
                    .filter(|c| netns_run::kernel_has_cc(c))
                    .map(|c| ("tcp".to_string(), c.clone())),
            );
        }
        let mut out = Vec::new();
        for &rate in &p.rate_mbit {
            for &rtt in &p.rtt_ms {
                for &loss in &p.loss_pct {
                    for (t, cc) in &senders {
                        for rep in 1..=p.repetitions {
                            out.push(Step {
                                label: format!(
                                    "{rate} Mbit/s, RTT {rtt} ms, loss {loss} %: {} {cc}, {:.0} s after {:.0} s omitted, repetition {rep} of {}",
                                    if t == "xtp" { "XTP" } else { "kernel TCP" },
                                    self.timing(rtt).seconds,
                                    self.timing(rtt).omit,
                                    p.repetitions
                                ),
                                point: Point { rate_mbit: rate, rtt_ms: rtt, loss_pct: loss, transport: t.clone(), cc: cc.clone(), rep },
                            });
                        }
                    }
                }
            }
        }
        out
    }
    fn notes(&self, env: &Env) -> Vec<String> {
        let mut n = Vec::new();
        if !env.root {
            n.push("PATHS: kernel TCP cells skipped: TCP under the emulated link needs `xpress netns` (root); XTP ran through the in-process relay".into());
        } else if !netns_run::have_iperf3() {
            n.push("PATHS: kernel TCP cells skipped: iperf3 is not installed".into());
        }
        for c in self.0.tcp_cc.iter().filter(|c| !netns_run::kernel_has_cc(c)) {
            n.push(format!("PATHS: kernel TCP {c} skipped: this kernel does not offer it (net.ipv4.tcp_available_congestion_control)"));
        }
        n
    }
    fn run(&mut self, p: &Point, env: &Env) -> Result<Vec<Row>, String> {
        let sender = if p.transport == "xtp" {
            let raw = self.0.xtp_over == "raw" && env.root;
            Sender::Xtp { cc: p.cc.clone(), window: None, nocheck: false, rate: 0, raw }
        } else {
            Sender::Tcp { cc: Some(p.cc.clone()), window: None }
        };
        let seed = env
            .seed
            .wrapping_mul(104_729)
            .wrapping_add(p.rtt_ms * 1000 + (p.loss_pct * 100.0) as u64 + u64::from(p.rep));
        let outcome = netns_run::bulk(
            &link(p.rate_mbit, p.rtt_ms, p.loss_pct),
            &sender,
            self.timing(p.rtt_ms),
            seed,
            env.root,
        )?;
        Ok(vec![Row {
            rate_mbit: p.rate_mbit,
            rtt_ms: p.rtt_ms,
            loss_pct: p.loss_pct,
            transport: p.transport.clone(),
            cc: p.cc.clone(),
            rep: p.rep,
            utilisation: outcome.mbit_per_s / p.rate_mbit as f64,
            outcome,
        }])
    }
    fn csv_key() -> &'static [&'static str] {
        &["rate_mbit", "rtt_ms", "loss_pct", "transport", "cc", "rep"]
    }
    fn render(p: &Params, rows: &[Row], notes: &[String], page: &mut Page) {
        let key = |r: &Row| {
            (r.rate_mbit, r.rtt_ms, (r.loss_pct * 1000.0) as u64, r.transport.clone(), r.cc.clone())
        };
        let all = rows;
        let rows = &counted(rows);
        let groups = stats::group(rows, key, |r| r.outcome.mbit_per_s);
        let med = |rate: u64, rtt: u64, loss: f64, t: &str, cc: &str| {
            groups
                .iter()
                .find(|g| g.0 == (rate, rtt, (loss * 1000.0) as u64, t.to_string(), cc.to_string()))
                .map(|g| g.1.median)
        };
        let mut invalid = 0;
        for &rate in &p.rate_mbit {
            // Absolute numbers, every sender.
            let senders: Vec<(String, String)> = {
                let mut v: Vec<(String, String)> = rows
                    .iter()
                    .filter(|r| r.rate_mbit == rate)
                    .map(|r| (r.transport.clone(), r.cc.clone()))
                    .collect();
                v.dedup();
                let mut u = Vec::new();
                for s in v {
                    if !u.contains(&s) {
                        u.push(s);
                    }
                }
                u
            };
            let mut header = vec!["RTT ms".to_string(), "loss %".to_string()];
            header.extend(
                senders.iter().map(|(t, c)| format!("{} {c}", if t == "xtp" { "XTP" } else { "TCP" })),
            );
            let mut table = Vec::new();
            for &rtt in &p.rtt_ms {
                for &loss in &p.loss_pct {
                    let mut cells = vec![rtt.to_string(), format!("{loss}")];
                    for (t, cc) in &senders {
                        let g = groups
                            .iter()
                            .find(|g| g.0 == (rate, rtt, (loss * 1000.0) as u64, t.clone(), cc.clone()));
                        cells.push(g.map_or("—".into(), |g| {
                            let bad = all.iter().filter(|r| key(r) == g.0 && !r.outcome.valid).count();
                            invalid += bad;
                            format!("{}{}", g.1.html(1), if bad > 0 { " <b>†</b>" } else { "" })
                        }));
                    }
                    table.push(cells);
                }
            }
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            page.table(
                &format!(
                    "Measured here: goodput in Mbit/s at {rate} Mbit/s (median of {} run(s))",
                    p.repetitions
                ),
                &header,
                &table,
            );
            // One heatmap per XTP controller against each TCP controller.
            for xcc in &p.xtp_cc {
                for tcc in p.tcp_cc.iter().filter(|t| senders.contains(&("tcp".to_string(), (*t).clone()))) {
                    let cells: Vec<Vec<Option<f64>>> = p
                        .rtt_ms
                        .iter()
                        .map(|&rtt| {
                            p.loss_pct
                                .iter()
                                .map(|&loss| {
                                    match (med(rate, rtt, loss, "xtp", xcc), med(rate, rtt, loss, "tcp", tcc))
                                    {
                                        (Some(x), Some(t)) if t > 0.0 => Some(x / t),
                                        _ => None,
                                    }
                                })
                                .collect()
                        })
                        .collect();
                    let rows_l: Vec<String> = p.rtt_ms.iter().map(|r| format!("{r} ms")).collect();
                    let cols_l: Vec<String> = p.loss_pct.iter().map(|l| format!("{l} %")).collect();
                    page.figure(
                        heatmap(
                            &format!("XTP {xcc} / kernel TCP {tcc} goodput, {rate} Mbit/s"),
                            ("random loss", "round trip"),
                            &rows_l,
                            &cols_l,
                            &cells,
                        ),
                        &format!("PATHS: ratio of XTP ({xcc}) to kernel TCP ({tcc}) goodput per cell; ≥ 1 (green) means XTP is at least as fast."),
                    );
                }
            }
        }
        if invalid > 0 {
            page.note(&format!("† {invalid} run(s) where the emulator's p99 release error exceeded its bound: their timing is not trustworthy. A cell with a valid run shows the median of its valid runs only; a cell without one shows its invalid runs."));
        }
        for n in notes {
            page.note(n);
        }
        let mut carriers: Vec<&str> =
            rows.iter().filter(|r| r.transport == "xtp").map(|r| r.outcome.carrier.as_str()).collect();
        carriers.sort_unstable();
        carriers.dedup();
        for c in carriers {
            page.note(match c {
                "ip36" => "XTP ran over raw IP (protocol 36) with 1,448-byte segments: 52 header bytes per packet, as kernel TCP with timestamps pays.",
                _ => "XTP ran over UDP with 1,440-byte segments (the most a 1,500-byte packet carries): 60 header bytes per packet against kernel TCP's 52, so at zero loss XTP's ceiling is 0.9945 of TCP's (1,440 / 1,448).",
            });
        }
        page.note(&format!(
            "Each run counts 50 round trips (clamped to {} to {} s), after ten round trips (1 to 10 s) of slow start left out of the count (bulk -O, iperf3 -O); goodput counts what the receiver got (TCP, iperf3) or acknowledged (XTP) within it. Loss applies to each direction. Queue: 1,000 packets.",
            p.min_seconds, p.max_seconds
        ));
        page.reading(&reading(p, rows));
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["PATHS goodput (Mbit/s, median of valid runs):".to_string()];
        let key = |r: &Row| {
            (r.rate_mbit, r.rtt_ms, (r.loss_pct * 1000.0) as u64, r.transport.clone(), r.cc.clone())
        };
        let all = rows;
        for (k, g, m) in stats::group(&counted(rows), key, |r| r.outcome.mbit_per_s) {
            let bad = all.iter().filter(|r| key(r) == k && !r.outcome.valid).count();
            let bad = match bad {
                0 => String::new(),
                n => format!(
                    "  ({n} run(s) with emulator timing invalid{})",
                    if m.iter().any(|r| !r.outcome.valid) { ", no valid run" } else { ", left out" }
                ),
            };
            let (rate, rtt, loss, t, cc) = k;
            out.push(format!(
                "  {rate} Mbit/s RTT {rtt:>4} ms loss {:>4} %  {t} {cc:<8} {}{bad}",
                loss as f64 / 1000.0,
                g.text(1)
            ));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((
            format!(
                "{} Mbit/s RTT {} ms loss {} % {} {}",
                r.rate_mbit, r.rtt_ms, r.loss_pct, r.transport, r.cc
            ),
            r.outcome.mbit_per_s,
            "Mbit/s",
        ))
    }
}

/// PATHS' reading: the goals (ratio ≥ 1 everywhere, ≥ 90 % of the bottleneck
/// without loss) checked against the cells.
fn reading(p: &Params, rows: &[Row]) -> String {
    let rows = &counted(rows);
    let mut parts = Vec::new();
    for &rate in &p.rate_mbit {
        let m = |rtt: u64, loss: f64, t: &str, cc: &str| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| {
                    r.rate_mbit == rate
                        && r.rtt_ms == rtt
                        && r.loss_pct == loss
                        && r.transport == t
                        && r.cc == cc
                })
                .map(|r| r.outcome.mbit_per_s)
                .collect();
            (!v.is_empty()).then(|| stats::median(v))
        };
        reading_at(p, rate, m, &mut parts);
    }
    if parts.is_empty() {
        return "No XTP/TCP pairs were measured (see the notes).".into();
    }
    parts.join("; ") + "."
}

/// A PATHS cell's valid runs (see [`stats::counted`]).
fn counted(rows: &[Row]) -> Vec<Row> {
    let cell = |r: &Row| (r.rate_mbit, r.rtt_ms, r.loss_pct.to_bits(), r.transport.clone(), r.cc.clone());
    stats::counted(rows, cell, |r| r.outcome.valid)
}

/// PATHS' reading at one bottleneck rate, appended to `parts`.
fn reading_at(
    p: &Params,
    rate: u64,
    m: impl Fn(u64, f64, &str, &str) -> Option<f64>,
    parts: &mut Vec<String>,
) {
    for xcc in &p.xtp_cc {
        for tcc in &p.tcp_cc {
            let mut ratios = Vec::new();
            let mut worst: Option<(f64, u64, f64)> = None;
            for &rtt in &p.rtt_ms {
                for &loss in &p.loss_pct {
                    if let (Some(x), Some(t)) = (m(rtt, loss, "xtp", xcc), m(rtt, loss, "tcp", tcc))
                        && t > 0.0
                    {
                        let r = x / t;
                        ratios.push(r);
                        if worst.is_none_or(|w| r < w.0) {
                            worst = Some((r, rtt, loss));
                        }
                    }
                }
            }
            if let Some((w, rtt, loss)) = worst {
                let at_least = ratios.iter().filter(|&&r| r >= 1.0).count();
                parts.push(format!(
                    "{rate} Mbit/s, XTP {xcc} vs TCP {tcc}: ratio ≥ 1 in {at_least} of {} cells, lowest {w:.2} at {rtt} ms and {loss} % loss",
                    ratios.len()
                ));
            }
        }
        let lossless: Vec<(u64, f64)> = p
            .rtt_ms
            .iter()
            .filter_map(|&rtt| m(rtt, 0.0, "xtp", xcc).map(|x| (rtt, x / rate as f64)))
            .collect();
        if !lossless.is_empty() {
            let low: Vec<String> = lossless
                .iter()
                .filter(|(_, u)| *u < 0.9)
                .map(|(r, u)| format!("{r} ms ({:.0} %)", u * 100.0))
                .collect();
            parts.push(if low.is_empty() {
                format!("{rate} Mbit/s: XTP {xcc} without loss reaches ≥ 90 % of the bottleneck at every round trip")
            } else {
                format!("{rate} Mbit/s: XTP {xcc} without loss stays under 90 % of the bottleneck at {}", low.join(", "))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rate: u64, rtt: u64, t: &str, mbit: f64, valid: bool) -> Row {
        Row {
            rate_mbit: rate,
            rtt_ms: rtt,
            loss_pct: 0.0,
            transport: t.into(),
            cc: "cubic".into(),
            rep: 0,
            utilisation: mbit / rate as f64,
            outcome: Outcome { mbit_per_s: mbit, valid, ..Default::default() },
        }
    }

    fn params(rates: Vec<u64>) -> Params {
        Params { rate_mbit: rates, rtt_ms: vec![50], loss_pct: vec![0.0], ..Paths::defaults(true) }
    }

    /// A cell's median leaves out its invalid runs when it has a valid one,
    /// and keeps them when it has none (an invalid run's timing is not
    /// trustworthy; a report that counted it moved a ratio by 0.005).
    #[test]
    fn medians_count_valid_runs_only() {
        let rows = vec![
            row(1000, 50, "xtp", 950.0, true),
            row(1000, 50, "tcp", 700.0, false),
            row(1000, 50, "tcp", 960.0, true),
            row(45, 50, "tcp", 40.0, false),
        ];
        let kept: Vec<f64> = counted(&rows).iter().map(|r| r.outcome.mbit_per_s).collect();
        assert_eq!(kept, [950.0, 960.0, 40.0]);
        let text = Paths::summary(&params(vec![1000]), &rows).join("\n");
        assert!(
            text.contains("960.0") && text.contains("1 run(s) with emulator timing invalid, left out"),
            "{text}"
        );
        assert!(text.contains("no valid run"), "{text}");
    }

    /// The reading judges each bottleneck rate on its own cells: at 45
    /// Mbit/s XTP is ahead, at 1 Gbit/s behind, and a reading that pooled
    /// the rates' runs would report one median ratio for both.
    #[test]
    fn the_reading_is_per_rate() {
        let rows = vec![
            row(45, 50, "xtp", 44.0, true),
            row(45, 50, "tcp", 40.0, true),
            row(1000, 50, "xtp", 930.0, true),
            row(1000, 50, "tcp", 960.0, true),
        ];
        let text = reading(&params(vec![45, 1000]), &rows);
        assert!(text.contains("45 Mbit/s, XTP cubic vs TCP cubic: ratio ≥ 1 in 1 of 1 cells"), "{text}");
        assert!(
            text.contains("1000 Mbit/s, XTP cubic vs TCP cubic: ratio ≥ 1 in 0 of 1 cells, lowest 0.97"),
            "{text}"
        );
    }
}
