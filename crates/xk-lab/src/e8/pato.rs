//! E8's evaluation like seed 000's PATO (issue #18, item 3), per profile
//! (Session 20): where single round trips' time went (the journeys at the
//! median, the 99th percentile and the longest), the operating system's
//! disturbances on every thread the round trips involve, reported apart
//! from the statistics, and a figure per profile — the distribution of the
//! undisturbed round trips beside the disturbed ones.

use super::ProfileRow;
use super::render::us;
use crate::html::Page;
use crate::svg::plot;

/// The journeys of one profile as a table: one column per journey, one
/// row per phase (its time in that round trip), µs.
pub(super) fn journeys_table(r: &ProfileRow, page: &mut Page) {
    if r.journeys.is_empty() {
        return;
    }
    let mut names: Vec<&str> = Vec::new();
    for j in &r.journeys {
        for (p, _) in &j.parts {
            if !names.contains(&p.as_str()) {
                names.push(p);
            }
        }
    }
    let mut t: Vec<Vec<String>> = vec![
        std::iter::once("round trip".to_string())
            .chain(r.journeys.iter().map(|j| us(j.rtt_ns as f64)))
            .collect(),
    ];
    for n in names {
        let mut row = vec![n.to_string()];
        for j in &r.journeys {
            row.push(j.parts.iter().find(|p| p.0 == n).map_or("—".into(), |p| us(p.1 as f64)));
        }
        t.push(row);
    }
    let header: Vec<String> = std::iter::once("phase".to_string())
        .chain(r.journeys.iter().map(|j| format!("{} round trip", j.which)))
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    page.table(
        &format!(
            "Where single round trips' time went: {} mode, {} B — the undisturbed round trips at the median, the 99th percentile and the longest, each phase's time inside it (summed where it occurs several times: both directions' crossings, every system call), µs",
            r.mode.label(),
            r.size
        ),
        &header,
        &t,
    );
}

/// The operating system's disturbances per thread, every profile: the
/// application thread's (getrusage) and every other thread's (`/proc`),
/// each round trip counted once per thread and cause.
pub(super) fn threads_table(rows: &[&ProfileRow], page: &mut Page) {
    let mut t = Vec::new();
    for r in rows {
        let what = format!("{} {} B", r.mode.label(), r.size);
        t.push(vec![what.clone(), "application".into(), r.disturbed.describe()]);
        for d in &r.threads {
            t.push(vec![what.clone(), d.thread.clone(), d.disturbed.describe()]);
        }
        if r.all_disturbed {
            t.push(vec![
                what.clone(),
                "all threads".into(),
                "every round trip disturbed on some thread: statistics over all".into(),
            ]);
        }
        t.push(vec![
            what,
            "unexplained".into(),
            format!("{} undisturbed round trips over 5× the median", r.outliers),
        ]);
    }
    if t.is_empty() {
        return;
    }
    page.table(
        "The operating system's disturbances, per thread (seed 000's PATO set them apart): each round trip is bracketed by every involved thread's preemption, page-fault and CPU counters — the application thread's by getrusage, the engine thread's, the daemon's and the echo server's threads' from /proc/…/task/<tid>/{stat,status} — and one disturbed on any thread (a preemption included, however often) is kept out of the profile's statistics; minor faults in most round trips of a thread are that thread's own work and kept in. A profile whose every round trip was disturbed on some thread has its statistics over all of them (\"all threads\" row). \"unexplained\": round trips no counter explains that still took over 5× the median",
        &["profile", "thread", "round trips disturbed (per cause)"],
        &t,
    );
}

/// A figure per profile: the undisturbed round trips' times by percentile,
/// beside the disturbed ones' (any thread), µs on a log scale.
pub(super) fn figures(rows: &[&ProfileRow], page: &mut Page) {
    for r in rows.iter().filter(|r| !r.rtt_percentiles.is_empty()) {
        let pts = |v: &[u64]| -> Vec<(f64, f64)> {
            v.iter().enumerate().map(|(p, &ns)| (p as f64, ns as f64 / 1e3)).collect()
        };
        let label =
            if r.all_disturbed { "all (every round trip disturbed on some thread)" } else { "undisturbed" };
        let mut s = vec![(label.to_string(), pts(&r.rtt_percentiles))];
        if !r.disturbed_rtt_percentiles.is_empty() {
            s.push((
                "disturbed by the operating system (any thread)".to_string(),
                pts(&r.disturbed_rtt_percentiles),
            ));
        }
        page.figure(
            plot(
                &format!("Round trips, {} mode, {} B", r.mode.label(), r.size),
                ("percentile", "round-trip time (µs)"),
                &s,
                (false, true),
            ),
            "The profile's round-trip times by percentile: the undisturbed ones (its statistics) and, apart, the ones the operating system disturbed on some thread (the per-thread table counts them).",
        );
    }
}
