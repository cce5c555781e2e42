//! E2 (seed 002, Fig. 3): steady-state bulk goodput against round-trip delay
//! on a 45 Mbit/s path (the DS-3 port of seed 002), measured as the seed did:
//! long transfers, time-based, each setting under the same emulated link.
//!
//! Settings:
//! * XTP as the seed ran it: a fixed 1 MB window, rate control at the path
//!   rate, no congestion control, with checksums and with NOCHECK;
//! * XTP as we ship it (CUBIC, a window that grows with the path);
//! * kernel TCP with Linux's defaults, and with a 64 KB socket buffer (the
//!   window of the seed's SunOS TCP).
//!
//! As root every setting runs between two network namespaces joined by
//! `xpress netns` (the same emulator for XTP and TCP); otherwise XTP runs
//! through the in-process relay and the TCP rows are skipped, saying why.

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::netns_run::{self, Outcome, Sender, Timing};
use crate::stats;
use crate::svg::{Series, plot_series};

/// The bottleneck, bytes/s (45 Mbit/s).
const RATE_BYTES: u64 = 5_625_000;

/// A sender setting of the figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Setting {
    /// XTP, 1 MB window, rate control, checksums (seed 002's XTP).
    XtpSeed,
    /// The same with NOCHECK.
    XtpSeedNocheck,
    /// XTP with our defaults.
    XtpDefault,
    /// Kernel TCP, Linux defaults.
    Tcp,
    /// Kernel TCP, 64 KB socket buffer.
    Tcp64k,
}

impl Setting {
    const ALL: [Setting; 5] =
        [Setting::XtpSeed, Setting::XtpSeedNocheck, Setting::XtpDefault, Setting::Tcp, Setting::Tcp64k];

    fn name(self) -> &'static str {
        match self {
            Setting::XtpSeed => "XTP, 1 MB window, rate control, checksums",
            Setting::XtpSeedNocheck => "XTP, 1 MB window, rate control, NOCHECK",
            Setting::XtpDefault => "XTP, defaults (CUBIC)",
            Setting::Tcp => "kernel TCP, defaults",
            Setting::Tcp64k => "kernel TCP, 64 KB window",
        }
    }

    fn sender(self) -> Sender {
        let seed = |nocheck| Sender::Xtp {
            cc: "none".into(),
            window: Some(1 << 20),
            nocheck,
            rate: RATE_BYTES,
            raw: false,
        };
        match self {
            Setting::XtpSeed => seed(false),
            Setting::XtpSeedNocheck => seed(true),
            Setting::XtpDefault => {
                Sender::Xtp { cc: "cubic".into(), window: None, nocheck: false, rate: 0, raw: false }
            }
            Setting::Tcp => Sender::Tcp { cc: None, window: None },
            Setting::Tcp64k => Sender::Tcp { cc: None, window: Some(64 * 1024) },
        }
    }

    fn is_tcp(self) -> bool {
        matches!(self, Setting::Tcp | Setting::Tcp64k)
    }
}

/// E2's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Round-trip delays (half each way).
    pub rtt_ms: Vec<u64>,
    /// Seconds counted per run (each run is one time-based transfer; ten
    /// round trips of slow start, 1-10 s, run first and are left out).
    pub seconds: f64,
    /// Runs per point.
    pub repetitions: u32,
    /// Kernel TCP rows (root).
    pub tcp: bool,
}

/// One run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Round trip.
    pub rtt_ms: u64,
    /// Who sent.
    pub setting: Setting,
    /// Which repetition.
    pub rep: u32,
    /// The kernel's TCP congestion controller (TCP rows).
    pub tcp_cc: Option<String>,
    /// Goodput and the emulator's verdict.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// E2.
pub struct E2(Params);

fn link(rtt_ms: u64) -> String {
    // A queue of 1,000 packets: large enough for a 1 MB window at 0 ms and
    // for TCP's slow-start overshoot at 200 ms, as a router port would be.
    format!("rate 45mbit delay {}us limit 1000", rtt_ms * 500)
}

impl Experiment for E2 {
    const ID: &'static str = "E2";
    const TITLE: &'static str =
        "Steady-state goodput vs round-trip delay on a 45 Mbit/s path (seed 002, Fig. 3)";
    type Params = Params;
    type Point = (u64, Setting, u32);
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            // The seed's 0-200 ms in 20 ms steps and 15 s runs are
            // plans/e2-seed002.toml; the default keeps the report in budget.
            rtt_ms: if quick { vec![0, 100] } else { vec![0, 50, 100, 200] },
            seconds: if quick { 3.0 } else { 5.0 },
            repetitions: 1,
            tcp: true,
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.rtt_ms.is_empty() || p.rtt_ms.iter().any(|&r| r > 10_000) {
            return Err("rtt_ms: 0 to 10,000 each, at least one".into());
        }
        if !(0.5..=3600.0).contains(&p.seconds) {
            return Err("seconds: 0.5 to 3600".into());
        }
        if !(1..=100).contains(&p.repetitions) {
            return Err("repetitions: 1 to 100".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E2(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, env: &Env) -> Vec<Step<(u64, Setting, u32)>> {
        let tcp = self.0.tcp && env.root && netns_run::have_iperf3();
        let mut out = Vec::new();
        for &rtt in &self.0.rtt_ms {
            for s in Setting::ALL.into_iter().filter(|s| tcp || !s.is_tcp()) {
                for rep in 1..=self.0.repetitions {
                    out.push(Step {
                        label: format!(
                            "RTT {rtt} ms, {}, repetition {rep} of {}",
                            s.name(),
                            self.0.repetitions
                        ),
                        point: (rtt, s, rep),
                    });
                }
            }
        }
        out
    }
    fn notes(&self, env: &Env) -> Vec<String> {
        let mut n = Vec::new();
        if !self.0.tcp {
            n.push("E2: kernel TCP rows not measured: the plan turned them off (E2.tcp = false)".into());
        } else if !env.root {
            n.push("E2: kernel TCP rows skipped: kernel TCP under the same link runs through `xpress netns`, which needs root (network namespaces and TUN devices); XTP ran through the in-process relay instead".into());
        } else if !netns_run::have_iperf3() {
            n.push("E2: kernel TCP rows skipped: iperf3 is not installed".into());
        }
        n
    }
    fn run(&mut self, &(rtt, s, rep): &(u64, Setting, u32), env: &Env) -> Result<Vec<Row>, String> {
        let seed = env.seed.wrapping_mul(7919).wrapping_add(rtt * 10 + u64::from(rep));
        let t = Timing::steady(self.0.seconds, rtt);
        let outcome = netns_run::bulk(&link(rtt), &s.sender(), t, seed, env.root)?;
        Ok(vec![Row {
            rtt_ms: rtt,
            setting: s,
            rep,
            tcp_cc: s.is_tcp().then(netns_run::kernel_default_cc),
            outcome,
        }])
    }
    fn csv_key() -> &'static [&'static str] {
        &["rtt_ms", "setting", "rep"]
    }
    fn render(p: &Params, rows: &[Row], notes: &[String], page: &mut Page) {
        let all = rows;
        let rows = &counted(rows);
        let groups = stats::group(rows, |r| (r.rtt_ms, r.setting), |r| r.outcome.mbit_per_s);
        let get = |rtt: u64, s: Setting| groups.iter().find(|g| g.0 == (rtt, s));
        let mut rtts: Vec<u64> = rows.iter().map(|r| r.rtt_ms).collect();
        rtts.sort_unstable();
        rtts.dedup();
        let present: Vec<Setting> =
            Setting::ALL.into_iter().filter(|s| rows.iter().any(|r| r.setting == *s)).collect();
        let mut invalid = 0;
        let table: Vec<Vec<String>> = rtts
            .iter()
            .map(|&rtt| {
                let mut cells = vec![rtt.to_string()];
                for &s in &present {
                    cells.push(get(rtt, s).map_or("—".into(), |g| {
                        let bad = all
                            .iter()
                            .filter(|r| r.rtt_ms == rtt && r.setting == s && !r.outcome.valid)
                            .count();
                        invalid += bad;
                        let mark = if bad > 0 {
                            " <b title=\"emulator timing not trustworthy in a run\">†</b>"
                        } else {
                            ""
                        };
                        format!("{}{mark}", g.1.html(1))
                    }));
                }
                cells
            })
            .collect();
        let mut header = vec!["RTT ms"];
        header.extend(present.iter().map(|s| s.name()));
        let emulator = rows.first().map_or("—", |r| r.outcome.emulator.as_str());
        let tcp_cc = rows.iter().find_map(|r| r.tcp_cc.clone()).unwrap_or_else(|| "—".into());
        page.table(
            &format!(
                "Measured here: steady-state goodput in Mbit/s over {} s per run after slow start (ten round trips, at least 1 s, left out of the count as iperf3 -O does), median of the valid runs of {} per point, 45 Mbit/s path, emulated by {}; kernel TCP's controller: {tcp_cc}",
                p.seconds,
                p.repetitions,
                if emulator == "netns" { "xpress netns (both ends in network namespaces)" } else { "the in-process relay on loopback" }
            ),
            &header,
            &table,
        );
        if invalid > 0 {
            page.note(&format!("† {invalid} run(s) where the emulator's p99 release error exceeded its bound: their timing is not trustworthy (see results.json, invalid_reasons); a point's median leaves them out when it has a valid run."));
        }
        for n in notes {
            page.note(n);
        }
        page.note("Seed 002 (Miyake, Kato, Suzuki), Fig. 3, read from the figure (no table in the source): XTP on the x-kernel with a 1 MB window peaked near 17 Mbit/s and kept its throughput as the round trip grew to 200 ms; SunOS kernel TCP reached about 19 Mbit/s at 0 ms and collapsed with delay (64 KB / 53 KB windows); checksums cost XTP little. \"64 KB window\" here is iperf3 -w 64K: Linux doubles the buffer asked for (half of it for its own overhead), and about 75 KB are in flight per round trip in steady state (3.0 Mbit/s at 200 ms).");
        let series: Vec<Series> = present
            .iter()
            .map(|&s| {
                let pts: Vec<(f64, stats::Spread)> =
                    rtts.iter().filter_map(|&r| get(r, s).map(|g| (r as f64, g.1))).collect();
                Series::spread(s.name(), &pts)
            })
            .collect();
        page.figure(
            plot_series(
                "E2 goodput vs round-trip delay (45 Mbit/s path)",
                ("round-trip delay (ms)", "goodput (Mbit/s)"),
                &series,
                (false, false),
            ),
            "E2: steady-state goodput against round-trip delay, one line per sender setting (median of the valid runs; bars: their range).",
        );
        page.reading(&reading(rows));
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out =
            vec!["E2 goodput through a 45 Mbit/s emulated path (median of valid runs):".to_string()];
        for ((rtt, s), g, members) in
            stats::group(&counted(rows), |r| (r.rtt_ms, r.setting), |r| r.outcome.mbit_per_s)
        {
            let left_out =
                rows.iter().filter(|r| r.rtt_ms == rtt && r.setting == s && !r.outcome.valid).count();
            let bad = if members.iter().any(|r| !r.outcome.valid) {
                "  (emulator timing invalid)".to_string()
            } else if left_out > 0 {
                format!("  ({left_out} run(s) with emulator timing invalid, left out)")
            } else {
                String::new()
            };
            out.push(format!("  RTT {rtt:>4} ms  {:<44} {} Mbit/s{bad}", s.name(), g.text(1)));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("RTT {} ms {}", r.rtt_ms, r.setting.name()), r.outcome.mbit_per_s, "Mbit/s"))
    }
}

/// An E2 point's valid runs (see [`stats::counted`]).
fn counted(rows: &[Row]) -> Vec<Row> {
    stats::counted(rows, |r| (r.rtt_ms, r.setting), |r| r.outcome.valid)
}

/// Whether seed 002's finding holds here, in numbers: XTP with a 1 MB
/// window flat until the window limits it (1 MB per RTT), 64 KB TCP
/// collapsing with delay.
pub(crate) fn reading(rows: &[Row]) -> String {
    let rows = &counted(rows);
    let med = |rtt: u64, s: Setting| {
        let v: Vec<f64> =
            rows.iter().filter(|r| r.rtt_ms == rtt && r.setting == s).map(|r| r.outcome.mbit_per_s).collect();
        (!v.is_empty()).then(|| stats::median(v))
    };
    let mut rtts: Vec<u64> = rows.iter().map(|r| r.rtt_ms).collect();
    rtts.sort_unstable();
    rtts.dedup();
    let (Some(&lo), Some(&hi)) = (rtts.first(), rtts.last()) else { return "No runs.".into() };
    let mut parts = Vec::new();
    // The window limit of the seed's XTP: 1 MB per round trip, or the path.
    let limit =
        |rtt: u64| if rtt == 0 { 45.0 } else { (8.0 * 1_048_576.0 / (rtt as f64 / 1e3) / 1e6).min(45.0) };
    if let (Some(a), Some(b)) = (med(lo, Setting::XtpSeed), med(hi, Setting::XtpSeed)) {
        let at_limit = b >= 0.8 * limit(hi);
        parts.push(format!(
            "XTP with the seed's 1 MB window: {a:.1} Mbit/s at {lo} ms, {b:.1} at {hi} ms, where its window allows {:.1} — {}",
            limit(hi),
            if at_limit { "flat until the window limits it, as in the seed" } else { "below its window limit, unlike the seed" }
        ));
    }
    if let (Some(a), Some(b)) = (med(lo, Setting::Tcp64k), med(hi, Setting::Tcp64k)) {
        parts.push(format!(
            "kernel TCP with a 64 KB window: {a:.1} Mbit/s at {lo} ms, {b:.1} at {hi} ms — {}",
            if b < 0.5 * a {
                "it collapses with delay, as in the seed"
            } else {
                "no collapse, unlike the seed"
            }
        ));
    }
    if let (Some(x), Some(t)) = (med(hi, Setting::XtpDefault), med(hi, Setting::Tcp)) {
        parts.push(format!(
            "at {hi} ms our default XTP moves {x:.1} Mbit/s and default kernel TCP {t:.1} (ratio {:.2})",
            x / t.max(1e-9)
        ));
    }
    if let (Some(c), Some(n)) = (med(lo, Setting::XtpSeed), med(lo, Setting::XtpSeedNocheck)) {
        parts.push(format!(
            "checksums change XTP's goodput at {lo} ms by {:+.1} %",
            (c / n.max(1e-9) - 1.0) * 100.0
        ));
    }
    let verdict = match (med(hi, Setting::XtpSeed), med(hi, Setting::Tcp64k), med(lo, Setting::Tcp64k)) {
        (Some(x), Some(t), Some(t0)) if x >= 0.8 * limit(hi) && t < 0.5 * t0 => {
            "The seed's finding holds here."
        }
        (Some(_), Some(_), Some(_)) => "The seed's finding does not hold in full here.",
        _ => "Without the kernel TCP rows the comparison is half made.",
    };
    format!("{}. {verdict}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rtt_ms: u64, setting: Setting, mbit: f64) -> Row {
        let outcome = Outcome { mbit_per_s: mbit, valid: true, ..Outcome::default() };
        Row { rtt_ms, setting, rep: 1, tcp_cc: None, outcome }
    }

    #[test]
    fn the_reading_quotes_the_rows_and_judges_the_finding() {
        let mut rows = vec![
            row(0, Setting::XtpSeed, 43.1),
            row(200, Setting::XtpSeed, 40.0),
            row(0, Setting::XtpSeedNocheck, 43.3),
            row(0, Setting::Tcp64k, 43.0),
            row(200, Setting::Tcp64k, 2.5),
            row(200, Setting::XtpDefault, 42.0),
            row(200, Setting::Tcp, 39.0),
        ];
        let text = reading(&rows);
        // 1 MB per 200 ms = 41.9 Mbit/s: the window limit at 200 ms.
        assert!(text.contains("43.1 Mbit/s at 0 ms, 40.0 at 200 ms, where its window allows 41.9"), "{text}");
        assert!(text.contains("43.0 Mbit/s at 0 ms, 2.5 at 200 ms — it collapses"), "{text}");
        assert!(text.contains("42.0 Mbit/s and default kernel TCP 39.0 (ratio 1.08)"), "{text}");
        assert!(text.contains("by -0.5 %"), "{text}");
        assert!(text.ends_with("The seed's finding holds here."), "{text}");
        rows[1].outcome.mbit_per_s = 20.0;
        assert!(reading(&rows).ends_with("does not hold in full here."));
    }

    /// A point's median leaves out a run whose emulator timing was invalid
    /// when the point has a valid one, and says so; with none valid it
    /// keeps them and marks the point.
    #[test]
    fn medians_leave_out_invalid_runs() {
        let mut bad = row(200, Setting::Tcp64k, 30.0);
        bad.outcome.valid = false;
        let mut alone = row(100, Setting::Tcp64k, 5.0);
        alone.outcome.valid = false;
        let rows = vec![row(0, Setting::Tcp64k, 43.0), row(200, Setting::Tcp64k, 2.5), bad, alone];
        let text = reading(&rows);
        assert!(text.contains("43.0 Mbit/s at 0 ms, 2.5 at 200 ms"), "{text}");
        let p = E2::defaults(true);
        let lines = E2::summary(&p, &rows).join("\n");
        assert!(
            lines.contains("2.5 (n 1, 2.5–2.5) Mbit/s  (1 run(s) with emulator timing invalid, left out)"),
            "{lines}"
        );
        assert!(lines.contains("5.0 (n 1, 5.0–5.0) Mbit/s  (emulator timing invalid)"), "{lines}");
    }
}
