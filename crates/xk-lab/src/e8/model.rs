//! E8's model side: the calibration of xk-model's extended form from the
//! sweep's rows (one line per parameter pair), the held-out split, the
//! checks of predictions against measurements, and the baseline every
//! held-out check is read against — a line through the measured quantity
//! itself. Rendering is `render.rs`'s.

use xk_model::{Extended, LineFit, Params as Model, fit_line, fit_line_relative};

use super::CalibRow;

/// The calibrated model and the fits it came from.
pub(crate) struct Calibration {
    /// Seed form + added terms, every value from a fit (NaN where none).
    pub(crate) model: Extended,
    /// (name, what was fitted, the fit), in Table 3's order then the added;
    /// a fit that could not be made is NaN with no residuals.
    pub(crate) fits: Vec<(&'static str, &'static str, LineFit)>,
    /// Parameters a fit made negative and were set to 0.
    pub(crate) clamped: Vec<&'static str>,
    /// Parameters no line could be fitted for (fewer than two lengths
    /// with a usable value; R_a: blocks counted above one per send but no
    /// two-round completion traced): NaN in the model, so every
    /// prediction that uses one is counted a miss, not hidden.
    pub(crate) unfitted: Vec<&'static str>,
    /// Points left out of a fit because the value was not finite (or, for
    /// a relative fit, not positive): (what, length).
    pub(crate) dropped: Vec<(&'static str, usize)>,
    /// Whether some length had sends acknowledged in two rounds or more
    /// (R_a's only source; without them R_a is 0 and unused).
    pub(crate) two_round: bool,
}

/// Whether the pipelined windows ran with the threads pinned (a fixed
/// placement for the stream): every row then has the busier CPU's work.
/// From the rows, the one source for the model and the reading (results
/// written before the rows recorded the placement have this too).
pub(crate) fn stream_pinned(rows: &[&CalibRow]) -> bool {
    !rows.is_empty() && rows.iter().all(|r| r.pipe_busiest_cpu_ns.is_some())
}

/// The placement the rows recorded (one value for all), None when they
/// did not (results written before Session 17) or disagree.
pub(crate) fn placement_of(rows: &[&CalibRow]) -> Option<super::Placement> {
    let first = rows.first()?.placement?;
    rows.iter().all(|r| r.placement == Some(first)).then_some(first)
}

/// The checked quantities' per-round (per-window for τ_a) series in a
/// row's `repeats`, in [`QUANTITIES`]' order.
pub(crate) const REPEATED: [&str; 5] = {
    use crate::e8_calib::series::*;
    [DELAY, SYNC_PERIOD, ASYNC_PERIOD, HOST_SEND, HOST_RECV]
};

/// The measurement's own repeatability at one length: the standard error
/// of the row's value, relative, from the spread of its rounds' (or
/// windows') means — sd / √n / mean — with n and the largest over the
/// smallest of those means. None with fewer than two.
pub(crate) fn repeat_se(r: &CalibRow, name: &str) -> Option<(f64, usize, f64)> {
    let v: Vec<f64> = r.repeats.get(name)?.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    Some((sd / n.sqrt() / mean, v.len(), hi / lo))
}

/// The one-packet regime (l ≤ mss; every length when mss is 0).
fn one_packet(mss: usize, l: usize) -> bool {
    mss == 0 || l <= mss
}

/// A line that is no line: a parameter that could not be fitted.
fn unfit() -> LineFit {
    LineFit { intercept: f64::NAN, slope: f64::NAN, r2: f64::NAN, residuals: Vec::new() }
}

/// Fits every parameter over the calibration lengths: each pair from the
/// measurement of that part alone (see `CalibRow`), by relative-error least
/// squares (xk-model's `fit_line_relative`): the model is judged by its
/// relative error at every length, and an unweighted line would let the
/// 64-KB points set the fixed costs. A length whose value is not usable
/// for a fit is left out of that fit alone (and listed); a parameter with
/// fewer than two usable lengths is NaN and named. None without rows.
pub(crate) fn calibrate(rows: &[&CalibRow]) -> Option<Calibration> {
    let first = rows.first()?;
    let (l_c, l_a) = (first.l_c as f64, first.l_a as f64);
    let mss = first.mss;
    let one = |l: usize| one_packet(mss, l);
    let dropped = std::cell::RefCell::new(Vec::new());
    // (length, seconds) of the rows `keep` selects, the unusable ones
    // recorded as dropped (once per quantity: only the fit over all
    // lengths or the one-packet regime's records them).
    let points =
        |what: &'static str, f: fn(&CalibRow) -> f64, keep: &dyn Fn(usize) -> bool, relative: bool| {
            let mut v = Vec::new();
            for r in rows.iter().filter(|r| keep(r.size)) {
                let y = f(r) * 1e-9;
                if y.is_finite() && (!relative || y > 0.0) {
                    v.push((r.size as f64, y));
                } else if !dropped.borrow().contains(&(what, r.size)) {
                    dropped.borrow_mut().push((what, r.size));
                }
            }
            v
        };
    let fit_over = |what: &'static str, f: fn(&CalibRow) -> f64, keep: &dyn Fn(usize) -> bool| {
        fit_line_relative(&points(what, f, keep, true))
    };
    let fit =
        |what: &'static str, f: fn(&CalibRow) -> f64| fit_over(what, f, &|_| true).unwrap_or_else(unfit);
    // The pipelined quantities per regime: one packet (l ≤ mss) and more;
    // a regime with fewer than two lengths takes the line over all.
    let regime = |what: &'static str, f: fn(&CalibRow) -> f64, multi: bool| {
        fit_over(what, f, &|l| one(l) != multi).or_else(|| fit_over(what, f, &|_| true)).unwrap_or_else(unfit)
    };
    // The write entry's seed line δ_w + ρ_w·(l_c + l) holds up to one
    // packet; beyond, its own line (below): fitted per regime, so the
    // one-packet line is not bent by the step up past the packet.
    let write = regime("write", |r| r.write_ns, false);
    let read = fit("read", |r| r.read_ns);
    let wake = fit("wake", |r| r.wake_ns);
    let delay = fit("processor delay", |r| r.proc_delay_ns);
    let period = regime("processor period", |r| r.proc_period_ns, false);
    let period_m = regime("processor period", |r| r.proc_period_ns, true);
    let ewake = fit("engine wake", |r| r.engine_wake_ns);
    // C_1: the completion of the sends acknowledged in one round (a
    // multi-round send's completion is not on that line: R_a below).
    let complete = fit("one-round completion", |r| r.proc_complete_one_ns);
    let doorbell = fit("doorbell", |r| r.doorbell_ns);
    // With a fixed placement the pipelined work cannot spread over the
    // cores: the busier CPU's pinned threads set the period, no idle time
    // is added and `cores` is 1 (Session 16: the period is that CPU's work
    // per message within 0-9 % at every length, split or hosts).
    let pinned = stream_pinned(rows);
    let (all_cpu, all_cpu_m) = if pinned {
        let busiest = |r: &CalibRow| r.pipe_busiest_cpu_ns.unwrap_or(f64::NAN);
        (regime("busier CPU's work", busiest, false), regime("busier CPU's work", busiest, true))
    } else {
        (
            regime("four threads' CPU", |r| r.all_cpu_ns, false),
            regime("four threads' CPU", |r| r.all_cpu_ns, true),
        )
    };
    // δ_i^cpu, a wait that takes one block: the one-packet lengths (beyond,
    // the message's further blocks are taken inside the wait: below).
    let wake_cpu = regime("wake-up CPU", |r| r.wake_cpu_ns, false);
    // The host's terms that bend where a message needs several packets.
    // The write entry beyond one packet (an empirical step at the packet
    // boundary: the reading says its size), and the receive's wait, which
    // takes the message's data blocks — one per packet — as they come;
    // with no length beyond one packet the write falls back to the line
    // over all lengths and β is 0 (both then unused).
    let write_m = regime("write", |r| r.write_ns, true);
    let wait_block = per_block_fit(rows, wake_cpu.intercept);
    // The receive's read as CPU time outside its waits: the receive's CPU
    // time less the CPU time inside its waits, both summed over the same
    // round trips (so the difference of the means is the mean of the
    // per-round-trip differences). Not the wall-clock read entry, which
    // runs from the first block's pop and so overlaps the wait when the
    // later blocks are taken inside it.
    let read_cpu = fit("read CPU", |r| r.host_recv_ns - r.wake_cpu_ns);
    let sync_wakes = fit("synchronous wake-ups", |r| r.sync_engine_wake_ns + r.sync_wake_ns);
    // The cores' idle time per pipelined message: a small term that can be
    // 0 at a length (`/proc/stat`'s ticks), which has no relative error —
    // an ordinary least-squares line per regime (its values within a
    // regime are of one magnitude).
    let idle_fit = |multi: bool| {
        fit_line(&points("idle", |r| r.pipe_idle_ns, &|l| one(l) != multi, false))
            .or_else(|| fit_line(&points("idle", |r| r.pipe_idle_ns, &|_| true, false)))
            .unwrap_or_else(unfit)
    };
    let none = || LineFit { intercept: 0.0, slope: 0.0, r2: f64::NAN, residuals: Vec::new() };
    let (idle, idle_m) = if pinned { (none(), none()) } else { (idle_fit(false), idle_fit(true)) };
    let (mut clamped, mut unfitted) = (Vec::new(), Vec::new());
    let mut pos = |name: &'static str, v: f64| {
        if v.is_nan() {
            unfitted.push(name);
            v
        } else if v < 0.0 {
            clamped.push(name);
            0.0
        } else {
            v
        }
    };
    let rho_w = pos("rho_w", write.slope);
    let rho_r = pos("rho_r", read.slope);
    let seed = Model {
        // The write entry measured whole: δ_w + ρ_w·(l_c + l).
        delta_w: pos("delta_w", write.intercept - rho_w * l_c),
        // The read entry: δ_r + ρ_r·(l_a + l).
        delta_r: pos("delta_r", read.intercept - rho_r * l_a),
        delta_i: pos("delta_i", wake.intercept),
        l_c,
        l_a,
        rho_w,
        rho_r,
        delta_0: pos("delta_0", delay.intercept),
        rho_delta: pos("rho_delta", delay.slope),
        t_0: pos("t_0", period.intercept),
        rho_t: pos("rho_t", period.slope),
    };
    // R_a: the multi-round sends' completion beyond C_1 at their length,
    // per extra block, pooled over the lengths weighted by those sends.
    let (mut extra, mut blocks) = (0.0, 0.0);
    for r in rows.iter().filter(|r| r.multi_sends > 0) {
        let over = r.proc_complete_multi_ns * 1e-9 - complete.at(r.size as f64);
        let b = r.multi_blocks - 1.0;
        if over.is_finite() && b.is_finite() && b > 0.0 {
            extra += r.multi_sends as f64 * over;
            blocks += r.multi_sends as f64 * b;
        }
    }
    // With no send acknowledged in two rounds or more at any length, no
    // prediction uses R_a (n_a − 1 is 0 at every length): 0, and said
    // (`two_round`), not a miss. Where some length counts more than one
    // block per send but no two-round completion was traced, it stays NaN.
    let two_round = rows.iter().any(|r| r.multi_sends > 0);
    let needed = rows.iter().any(|r| r.sync_blocks > 1.0);
    let ack_round = if blocks > 0.0 {
        extra / blocks
    } else if two_round || needed {
        f64::NAN
    } else {
        0.0
    };
    let rings: Vec<f64> = rows.iter().map(|r| r.sync_rings).filter(|v| v.is_finite()).collect();
    // κ, the monitor's clock read: measured back to back at every length,
    // one cost whatever the length (the mean; NaN in results written
    // before Session 19, which did not measure it).
    let clocks: Vec<f64> = rows.iter().map(|r| r.clock_read_ns * 1e-9).filter(|v| v.is_finite()).collect();
    let clock_read =
        if clocks.is_empty() { f64::NAN } else { clocks.iter().sum::<f64>() / clocks.len() as f64 };
    // Not measured at all (no row has the column) is "not recorded", said
    // where κ is used, not a fit that failed (review of Session 19).
    let clock_recorded = monitor_recorded(rows);
    // Δ_s is a difference of wake-ups and keeps its sign: a synchronous
    // send's wake-ups can be the quicker (review of session 15: a −5 µs
    // Δ_s had been shown as 0).
    let wake_sync = sync_wakes.intercept - ewake.intercept - wake.intercept;
    let model = Extended {
        seed,
        delta_e: pos("delta_e", ewake.intercept),
        c_0: pos("c_0", complete.intercept),
        gamma: pos("gamma", complete.slope),
        delta_i_cpu: pos("delta_i_cpu", wake_cpu.intercept),
        delta_d: pos("delta_d", doorbell.intercept),
        // A count, the mean over the lengths (as the seed's Table 1 counts
        // a send's calls).
        doorbells_send: pos("doorbells_send", rings.iter().sum::<f64>() / rings.len() as f64),
        // A count at the length predicted: `checks` sets it per row.
        acks_send: 1.0,
        ack_round: pos("ack_round", ack_round),
        // Fixed costs, as δ_e and δ_i (their slopes are noise around 0).
        wake_sync: if wake_sync.is_nan() { pos("wake_sync", wake_sync) } else { wake_sync },
        u_0: pos("u_0", all_cpu.intercept),
        upsilon: pos("upsilon", all_cpu.slope),
        cores: if pinned { 1.0 } else { first.cores as f64 },
        mss: mss as f64,
        t_0_multi: pos("t_0_multi", period_m.intercept),
        rho_t_multi: pos("rho_t_multi", period_m.slope),
        u_0_multi: pos("u_0_multi", all_cpu_m.intercept),
        upsilon_multi: pos("upsilon_multi", all_cpu_m.slope),
        i_0: pos("i_0", idle.intercept),
        iota: pos("iota", idle.slope),
        i_0_multi: pos("i_0_multi", idle_m.intercept),
        iota_multi: pos("iota_multi", idle_m.slope),
        delta_w_multi: pos("delta_w_multi", write_m.intercept),
        rho_w_multi: pos("rho_w_multi", write_m.slope),
        wait_block: pos("wait_block", wait_block.slope),
        delta_r_cpu: pos("delta_r_cpu", read_cpu.intercept),
        rho_r_cpu: pos("rho_r_cpu", read_cpu.slope),
        clock_read: if clock_recorded { pos("clock_read", clock_read) } else { clock_read },
        // The calibrated model takes C from the sends themselves, way back
        // included: no separate term.
        wake_back: 0.0,
    };
    let fits = vec![
        ("δ_w, ρ_w", "host write entry (copy in, post the block)", write),
        ("δ_r, ρ_r", "host read entry (woken: pop, copy out)", read),
        ("δ_i", "application wake-up (engine push → application pop)", wake),
        (
            "δ_0, ρ_δ",
            "processor one way: sending engine takes the write block → receiving engine posts the message's last block (engine threads' trace, ping-pong)",
            delay,
        ),
        (
            "T_0, ρ_T",
            "processor period, one packet (l ≤ mss): the engine thread's CPU time per message, pipelined, steady-state window",
            period,
        ),
        ("T_0^m, ρ_T^m (added)", "processor period, several packets (l > mss), fitted separately", period_m),
        ("δ_e (added)", "engine wake-up (application push → engine pop)", ewake),
        (
            "C_0, γ (added)",
            "processor completion of a synchronous send acknowledged in one round (the sends that took one acknowledgment block): engine takes the write block → posts its acknowledgment block (engine thread's trace)",
            complete,
        ),
        (
            "δ_e^s + δ_i^s (for Δ_s, added)",
            "a synchronous send's two wake-ups (application push → engine pop, engine push → application pop; its trace); Δ_s = its intercept − δ_e − δ_i",
            sync_wakes,
        ),
        (
            "δ_i^cpu (added)",
            "host CPU time of waiting for a message (sleep, wake, take its block), one packet (l ≤ mss; its intercept is δ_i^cpu, in H_t and H_r)",
            wake_cpu,
        ),
        (
            "β (added; slope in ns per block)",
            "host CPU time inside a receive's wait, several packets (l > mss): δ_i^cpu (fixed, the intercept) + (⌈l/mss⌉ − 1)·β, β the CPU time of taking one more data block inside the wait (H_r)",
            wait_block,
        ),
        (
            "δ_r^cpu, ρ_r^cpu (added)",
            "a receive's read as CPU time outside its wait: the ping-pong receive's CPU time (write returned → message read whole) less its CPU time inside the waits, same round trips (H_r; replaces the wall-clock read entry, which overlaps the wait)",
            read_cpu,
        ),
        (
            "δ_w^m, ρ_w^m (added)",
            "host write entry, several packets (l > mss), fitted separately (H_t, δ', T_t'; the entry is not one line across the packet boundary: the reading gives the empirical step there)",
            write_m,
        ),
        (
            "δ_d (added)",
            "host doorbell: CPU time of the write call less the post, over the ping-pong writes that rang the sleeping engine",
            doorbell,
        ),
        (
            "U_0, υ (added)",
            if pinned {
                "fixed placement: CPU time of the threads pinned to the busier CPU per pipelined message, steady-state window, one packet (over 1 core; no idle term)"
            } else {
                "CPU time of the four threads of a pipelined transfer per message (both applications, both engines), steady-state window, one packet"
            },
            all_cpu,
        ),
        ("U_0^m, υ^m (added)", "the same, several packets (fitted separately)", all_cpu_m),
        (
            "I_0, ι (added)",
            "the cores' idle time per pipelined message (/proc/stat, 10 ms ticks pooled over the windows; ordinary least squares), one packet",
            idle,
        ),
        ("I_0^m, ι^m (added)", "the same, several packets", idle_m),
    ];
    Some(Calibration { model, fits, clamped, unfitted, dropped: dropped.into_inner(), two_round })
}

/// β, the CPU time of taking one more data block inside a receive's wait:
/// W(l) = δ_i^cpu + (n_b − 1)·β over the multi-packet lengths, n_b =
/// ⌈l/mss⌉, δ_i^cpu fixed (the one-packet wait), relative-error least
/// squares in one unknown: β = Σ k(y − δ)/y² / Σ k²/y², k = n_b − 1. As a
/// LineFit: intercept δ_i^cpu, slope β (s per block), residuals by length.
/// Slope 0 with no multi-packet length (β then unused); NaN when δ_i^cpu is.
fn per_block_fit(rows: &[&CalibRow], delta: f64) -> LineFit {
    let mss = rows.first().map_or(0, |r| r.mss);
    let pts: Vec<(f64, f64, f64)> = rows
        .iter()
        .filter(|r| !one_packet(mss, r.size))
        .map(|r| (r.size as f64, r.size.div_ceil(mss) as f64 - 1.0, r.wake_cpu_ns * 1e-9))
        .filter(|p| p.2.is_finite() && p.2 > 0.0)
        .collect();
    let (num, den) = pts
        .iter()
        .fold((0.0, 0.0), |(n, d), &(_, k, y)| (n + k * (y - delta) / (y * y), d + k * k / (y * y)));
    let beta = if pts.is_empty() {
        0.0
    } else if den > 0.0 {
        num / den
    } else {
        f64::NAN
    };
    let residuals: Vec<(f64, f64, f64, f64)> =
        pts.iter().map(|&(l, k, y)| (l, y, delta + k * beta, y - delta - k * beta)).collect();
    LineFit { intercept: delta, slope: beta, r2: f64::NAN, residuals }
}

/// Measured and predicted values of one quantity over the lengths.
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) scale: f64,
    /// (length, measured, seed form, extended); for a baseline check the
    /// seed form is NaN and "extended" is the baseline's prediction.
    pub(crate) points: Vec<(f64, f64, f64, f64)>,
    /// The prediction needs columns these rows do not have (results
    /// written before they were recorded): shown as "not recorded", not
    /// as an error (its points' predictions are NaN).
    pub(crate) unrecorded: bool,
}

impl Check {
    pub(crate) fn errors(&self, ext: bool) -> Vec<f64> {
        self.points.iter().map(|p| (if ext { p.3 } else { p.2 } - p.1) / p.1).collect()
    }
    /// The largest |error|; infinite when any error is not finite (a NaN
    /// prediction or measurement is a miss, not "within 10 %").
    pub(crate) fn worst(&self, ext: bool) -> f64 {
        self.errors(ext)
            .into_iter()
            .map(|e| if e.is_finite() { e.abs() } else { f64::INFINITY })
            .fold(0.0, f64::max)
    }
    /// Lengths within `bound` (a non-finite error is outside).
    pub(crate) fn within(&self, ext: bool, bound: f64) -> usize {
        self.errors(ext).into_iter().filter(|e| e.abs() <= bound).count()
    }
}

/// The held-out split (issue #18's review: a check whose terms come from
/// the same measurements is a fit, not a prediction), within each regime
/// (one packet, several; the review of session 15: split across them,
/// the one-packet line was fitted on 1 and 256 B and extrapolated 4× to
/// 1 KB): in each regime the first, the third, … and always the last
/// length calibrate, the lengths in between are predicted, so each
/// regime's line spans its own lengths. When no regime has three lengths
/// (`--quick`), the split falls back to every other length over all,
/// across the regimes, and `notes` says so. None with fewer than three
/// lengths.
pub(crate) struct HeldOut<'a> {
    /// Lengths the parameters are fitted on.
    pub(crate) train: Vec<&'a CalibRow>,
    /// Lengths predicted.
    pub(crate) test: Vec<&'a CalibRow>,
    /// The model calibrated on `train`.
    pub(crate) cal: Calibration,
    /// Where the split departs from its rule (a regime's line fitted
    /// across regimes).
    pub(crate) notes: Vec<String>,
}

fn alternate<'a>(rows: &[&'a CalibRow], train: &mut Vec<&'a CalibRow>, test: &mut Vec<&'a CalibRow>) {
    for (i, &r) in rows.iter().enumerate() {
        if i % 2 == 0 || i + 1 == rows.len() { train.push(r) } else { test.push(r) }
    }
}

pub(crate) fn held_out<'a>(rows: &[&'a CalibRow]) -> Option<HeldOut<'a>> {
    if rows.len() < 3 {
        return None;
    }
    let mss = rows[0].mss;
    let (one, multi): (Vec<&CalibRow>, Vec<&CalibRow>) = rows.iter().partition(|r| one_packet(mss, r.size));
    let (mut train, mut test) = (Vec::new(), Vec::new());
    let mut notes = Vec::new();
    for (label, regime) in [("one-packet", &one), ("several-packet", &multi)] {
        if regime.len() >= 3 {
            alternate(regime, &mut train, &mut test);
        } else {
            train.extend(regime.iter().copied());
            if regime.len() == 1 {
                notes.push(format!(
                    "the {label} regime has one length ({} B): its lines are fitted across both regimes",
                    regime[0].size
                ));
            }
        }
    }
    if test.is_empty() {
        (train, test) = (Vec::new(), Vec::new());
        alternate(rows, &mut train, &mut test);
        notes.clear();
        notes.push(
            "no regime has three lengths: every other length over all is held out, across the one- and several-packet regimes, so a held-out length can be an extrapolation of the other regime's line".into(),
        );
    }
    train.sort_by_key(|r| r.size);
    test.sort_by_key(|r| r.size);
    let cal = calibrate(&train)?;
    Some(HeldOut { train, test, cal, notes })
}

/// One checked quantity: its name, unit and display scale, the measured
/// time it is judged on (s), and whether the check is a rate (bits of the
/// message over that time).
struct Quantity {
    name: &'static str,
    unit: &'static str,
    scale: f64,
    time: fn(&CalibRow) -> f64,
    rate: bool,
    /// Whether the extended form's check of it is a prediction from other
    /// operations (every time in it measured elsewhere) rather than a
    /// decomposition: parts measured on the same operation that add up to
    /// the whole by construction (the reading's "how independent").
    prediction: bool,
}

const QUANTITIES: [Quantity; 5] = [
    Quantity {
        name: "latency δ",
        unit: "µs",
        scale: 1e6,
        time: |r| r.delay_ns * 1e-9,
        rate: false,
        prediction: false,
    },
    Quantity {
        name: "synchronous throughput τ_s",
        unit: "Mbit/s",
        scale: 1e-6,
        time: |r| r.sync_period_ns * 1e-9,
        rate: true,
        prediction: false,
    },
    Quantity {
        name: "asynchronous throughput τ_a",
        unit: "Mbit/s",
        scale: 1e-6,
        time: |r| r.async_period_ns * 1e-9,
        rate: true,
        prediction: false,
    },
    Quantity {
        name: "host time per send H_t",
        unit: "µs",
        scale: 1e6,
        time: |r| r.host_send_ns * 1e-9,
        rate: false,
        prediction: true,
    },
    Quantity {
        name: "host time per receive H_r",
        unit: "µs",
        scale: 1e6,
        time: |r| r.host_recv_ns * 1e-9,
        rate: false,
        prediction: false,
    },
];

/// Whether the check named `name` (one of the quantities') predicts from
/// other operations; false for a decomposition and for an unknown name.
pub(crate) fn is_prediction(name: &str) -> bool {
    QUANTITIES.iter().any(|q| q.name == name && q.prediction)
}

impl Quantity {
    fn value(&self, l: f64, time: f64) -> f64 {
        if self.rate { 8.0 * l / time } else { time }
    }
}

/// The model's time for quantity `k` at length `l`: (seed form, extended).
fn model_time(k: usize, m: &Extended, l: f64) -> (f64, f64) {
    let s = &m.seed;
    match k {
        0 => (s.delay(l), m.delay(l)),
        1 => (l / s.sync_throughput(l), l / m.sync_throughput(l)),
        2 => (l / s.async_throughput(l), l / m.async_throughput(l)),
        3 => (s.host_send(l), m.host_send(l)),
        _ => (s.host_recv(l), m.host_recv(l)),
    }
}

/// Every quantity at `rows`: measured, and predicted by model `m`.
pub(crate) fn checks(rows: &[&CalibRow], m: &Extended) -> Vec<Check> {
    QUANTITIES
        .iter()
        .enumerate()
        .map(|(k, q)| Check {
            name: q.name,
            unit: q.unit,
            scale: q.scale,
            unrecorded: false,
            points: rows
                .iter()
                .map(|r| {
                    let l = r.size as f64;
                    let (seed, ext) = model_time(k, &m.with_acks(r.sync_blocks), l);
                    (l, q.value(l, (q.time)(r)), q.value(l, seed), q.value(l, ext))
                })
                .collect(),
        })
        .collect()
}

/// The baseline a held-out check is read against (review of session 15):
/// no model at all, a line through the measured quantity itself — its
/// time per message (for τ_s and τ_a, the period), relative-error least
/// squares (weights 1/y², as the model's fits), per regime as the model's
/// pipelined terms — fitted on `train` and evaluated at `test`. A model
/// that does no better than this only interpolates its own measurement.
pub(crate) fn baseline(train: &[&CalibRow], test: &[&CalibRow]) -> Vec<Check> {
    QUANTITIES
        .iter()
        .map(|q| {
            let line = regime_lines(train, &|r: &CalibRow| (q.time)(r));
            Check {
                name: q.name,
                unit: q.unit,
                scale: q.scale,
                unrecorded: false,
                points: test
                    .iter()
                    .map(|r| {
                        let l = r.size as f64;
                        (l, q.value(l, (q.time)(r)), f64::NAN, q.value(l, line(l)))
                    })
                    .collect(),
            }
        })
        .collect()
}

/// One relative-error line per regime (one packet, several) through the
/// finite positive values of `f` (s) over `rows`, a regime with fewer than
/// two such lengths taking the line over all; evaluated at a length (NaN
/// where no line can be fitted). The one copy of this rule for the
/// baseline and the cross-operation H_r (`calibrate` applies the same
/// rule but also records the points it leaves out).
pub(crate) fn regime_lines(rows: &[&CalibRow], f: &dyn Fn(&CalibRow) -> f64) -> impl Fn(f64) -> f64 + use<> {
    let mss = rows.first().map_or(0, |r| r.mss);
    let pts = |keep: &dyn Fn(usize) -> bool| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| keep(r.size))
            .map(|r| (r.size as f64, f(r)))
            .filter(|p| p.1.is_finite() && p.1 > 0.0)
            .collect()
    };
    let line = |multi: bool| {
        fit_line_relative(&pts(&|l| one_packet(mss, l) != multi))
            .or_else(|| fit_line_relative(&pts(&|_| true)))
    };
    let (one, multi) = (line(false), line(true));
    move |l: f64| {
        let f = if one_packet(mss, l as usize) { &one } else { &multi };
        f.as_ref().map_or(f64::NAN, |f| f.at(l))
    }
}

/// Whether the rows recorded the monitor's clock read κ (results written
/// before Session 19 did not: the column is absent, read back as NaN).
pub(crate) fn monitor_recorded(rows: &[&CalibRow]) -> bool {
    rows.iter().any(|r| r.clock_read_ns.is_finite())
}

/// Whether the rows recorded the sink application's CPU time per
/// synchronous send, S(l) (absent before Session 19).
pub(crate) fn sink_recorded(rows: &[&CalibRow]) -> bool {
    rows.iter().any(|r| r.sync_sink_cpu_ns.is_finite())
}

/// The waits a ping-pong receive takes, as the prediction of H_r counts
/// them: one, by the ping-pong's structure (one message in flight, the
/// receive sleeps once for it), not the count traced on the very
/// receives it is checked against (review of Session 19: that count,
/// 1.000–1.031 in six runs, would carry the outcome into its prediction).
pub(crate) const RECV_WAITS: f64 = 1.0;

/// The model with the synchronous sends' own terms replaced by the
/// ping-pong's (review of session 15, a real cross-operation prediction):
/// the completion C(l) as the processor's one way out, δ_0 + ρ_δ·l, plus
/// an acknowledgement's way back, a minimum-length one way δ_0; each
/// acknowledgement round beyond the first one more minimum-length round
/// trip, R_a = 2·δ_0 (Session 16); Δ_s = 0. Every time of τ_s is then
/// measured on another operation; [`cross_checks`] sets n_a = 1, as the
/// ping-pong does not say how many rounds a send takes.
pub(crate) fn ping_pong_only(m: &Extended) -> Extended {
    let d0 = m.seed.delta_0;
    Extended { c_0: 2.0 * d0, gamma: m.seed.rho_delta, ack_round: 2.0 * d0, wake_sync: 0.0, ..*m }
}

/// H_r from other operations than the ping-pong's receive loop (Session
/// 16): the wait of a synchronous send per block it took (sleep, wake-up,
/// take a block: the host's wake-up, measured on the sends), W_s, plus
/// the receiving application's CPU per message in the pipelined stream
/// (taking the message's blocks and copying it out, another thread of
/// another operation), R_p(l) = R_0 + ρ_p·l per regime; each a
/// relative-error line over `rows`. (The seed's H_r instead holds a
/// receive command, the wake-up's latency and two reads.) NaN where a
/// line cannot be fitted. Under `hosts_free` the two terms come from
/// different placements (the sends pinned as hosts, the stream free).
pub(crate) fn recv_from_other_ops(rows: &[&CalibRow]) -> impl Fn(f64) -> f64 + use<> {
    let per_block =
        |r: &CalibRow| r.send_wait_cpu_ns * 1e-9 / if r.sync_blocks >= 1.0 { r.sync_blocks } else { 1.0 };
    // W_s is a fixed cost per block (as δ_i^cpu, whose slope is noise
    // around 0): the wait line's value at 0 B, its slope not used.
    let wait = regime_lines(rows, &per_block);
    let w_s = wait(0.0);
    let sink = regime_lines(rows, &|r: &CalibRow| r.pipe_sink_cpu_ns * 1e-9);
    move |l: f64| w_s + sink(l)
}

/// The cross prediction's model at one length: [`ping_pong_only`] with
/// n_a = 1 and, in place of Δ_s = 0, the ping-pong's own wake-ups at that
/// length (δ_e + δ_i as a relative line per regime through the ping-pong's
/// two wake-ups) less the model's constants δ_e + δ_i (Session 19): a
/// wake-up ending a message of several packets is shorter — at 64 KB the
/// ping-pong's two measured 14–17 µs against 20–22 µs at 1 B, a
/// synchronous send's 13–17 against 19–20 µs (six runs, docs/PERF.md
/// "Session 19, E8") — where the model's δ_e and δ_i are the intercepts.
///
/// Session 20: the acknowledgement's way back takes the same wake-ups at
/// the length, Δ_b (xk-model `Extended::wake_back`: the sink's application
/// and engine wake-ups, which release the held acknowledgement, shorter at
/// the end of a message of several packets as the echo's are). `back`
/// false leaves Δ_b = 0, Session 19's form (a minimum-length way back).
pub(crate) fn ping_pong_at_with(
    rows: &[&CalibRow],
    m: &Extended,
    back: bool,
) -> impl Fn(f64) -> Extended + use<> {
    let wakes = regime_lines(rows, &|r: &CalibRow| (r.engine_wake_ns + r.wake_ns) * 1e-9);
    let pp = ping_pong_only(m).with_acks(1.0);
    // Δ_b against the wake-ups of a minimum-length message (the one-packet
    // line at 0 B), as δ_0 is a minimum-length one way; Δ_s against the
    // model's constants, which the period already holds.
    let at_min = wakes(0.0);
    move |l: f64| {
        let w = wakes(l);
        Extended {
            wake_sync: w - (pp.delta_e + pp.seed.delta_i),
            wake_back: if back { w - at_min } else { 0.0 },
            ..pp
        }
    }
}

/// [`ping_pong_at_with`] with the way back at the length: the prediction.
pub(crate) fn ping_pong_at(rows: &[&CalibRow], m: &Extended) -> impl Fn(f64) -> Extended + use<> {
    ping_pong_at_with(rows, m, true)
}

/// H_r from a receive on another thread and operation (Session 19): the
/// sink application's CPU time per synchronous send, S(l) — a receive
/// after a sleep (woken, the message's blocks taken, copied out), counted
/// by `schedstat` over a round's sends, so with no clock read inside — a
/// relative-error line per regime; plus, when `monitor`, the reads of the
/// thread's CPU clock that bound the ping-pong's receive, (2·waits + 1)·κ
/// (each wait bracketed by two, the write's return and the echo read
/// whole by one each; waits = [`RECV_WAITS`], the ping-pong's structure,
/// not the count traced on the receive predicted). NaN where a term was
/// not measured (results written before Session 19).
pub(crate) fn recv_from_sink(
    rows: &[&CalibRow],
    m: &Extended,
    monitor: bool,
) -> impl Fn(&CalibRow) -> f64 + use<> {
    let sink = regime_lines(rows, &|r: &CalibRow| r.sync_sink_cpu_ns * 1e-9);
    let m = *m;
    move |r: &CalibRow| {
        let s = sink(r.size as f64);
        if monitor { m.monitored(s, 2.0 * RECV_WAITS + 1.0) } else { s }
    }
}

/// Cross-operation checks, the predictions: τ_s, and its completion C(l)
/// alone, predicted by [`ping_pong_only`] with n_a = 1 (review of session
/// 16: n_a counted on the very sends checked would carry their second
/// acknowledgement rounds into the prediction — at 64 KB (n_a − 1)·2·δ_0
/// is 12–17 % of the measured period; with n_a = 1 a length where sends
/// took more than one round is a miss the prediction owns) and measured
/// on the synchronous sends; and H_r by [`recv_from_sink`] with the
/// monitor's reads, against the ping-pong's receives (in the `ext` slot;
/// the seed slot holds the calibrated model's, for reference).
pub(crate) fn cross_checks(rows: &[&CalibRow], m: &Extended) -> Vec<Check> {
    let at = ping_pong_at(rows, m);
    let tau = Check {
        name: "τ_s from the ping-pong only (n_a = 1)",
        unit: "Mbit/s",
        scale: 1e-6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                let q = &QUANTITIES[1];
                let m = m.with_acks(r.sync_blocks);
                (l, q.value(l, (q.time)(r)), 8.0 * m.sync_throughput(l), 8.0 * at(l).sync_throughput(l))
            })
            .collect(),
    };
    let c = Check {
        name: "completion C(l) from the ping-pong only (n_a = 1)",
        unit: "µs",
        scale: 1e6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                (l, r.proc_complete_ns * 1e-9, m.with_acks(r.sync_blocks).completion(l), at(l).completion(l))
            })
            .collect(),
    };
    let recv = recv_from_sink(rows, m, true);
    let h_r = Check {
        name: "H_r from the sink's receives (synchronous sends) + the monitor's clock reads",
        unit: "µs",
        scale: 1e6,
        unrecorded: !monitor_recorded(rows) || !sink_recorded(rows),
        points: rows
            .iter()
            .map(|r| (r.size as f64, r.host_recv_ns * 1e-9, m.host_recv(r.size as f64), recv(r)))
            .collect(),
    };
    vec![tau, c, h_r, super::predict::delay_from_sends(rows, m), super::predict::async_from_sends(rows, m)]
}

/// The same predictions without the terms Session 19 added, shown beside
/// them and judged by no verdict: τ_s as Session 18 predicted it (the
/// seed's two read entries 2δ_r + ρ_r·l_a in T_t, the wake-ups the
/// constants δ_e + δ_i), H_r from the sink's receives without the
/// monitor's reads, Session 16's H_r from the synchronous sends' wait
/// per block and the pipelined receiver ([`recv_from_other_ops`]), and
/// that form with the two reads the ping-pong's receive holds outside its
/// wait (W_s holds the one inside), W_s + R_p(l) + 2κ: the structural
/// split (a wait, then the receive's work) with the monitor's reads, to
/// show where it holds and where it fails (review of Session 19).
pub(crate) fn cross_references(rows: &[&CalibRow], m: &Extended) -> Vec<Check> {
    let pp = ping_pong_only(m).with_acks(1.0);
    let reads = 2.0 * m.seed.delta_r + m.seed.rho_r * m.seed.l_a;
    let tau = Check {
        name: "τ_s from the ping-pong only, with the seed's two reads in T_t and constant wake-ups",
        unit: "Mbit/s",
        scale: 1e-6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                let q = &QUANTITIES[1];
                let period = (pp.period_send(l) + reads).max(pp.period_recv(l));
                (l, q.value(l, (q.time)(r)), f64::NAN, q.value(l, period))
            })
            .collect(),
    };
    let bare = recv_from_sink(rows, m, false);
    let sink = Check {
        name: "H_r from the sink's receives, without the monitor's reads",
        unit: "µs",
        scale: 1e6,
        unrecorded: !sink_recorded(rows),
        points: rows.iter().map(|r| (r.size as f64, r.host_recv_ns * 1e-9, f64::NAN, bare(r))).collect(),
    };
    let other = recv_from_other_ops(rows);
    let structural = Check {
        name: "H_r from the synchronous sends' wait and the pipelined receiver + 2κ (W_s + R_p(l) + 2κ)",
        unit: "µs",
        scale: 1e6,
        unrecorded: !monitor_recorded(rows),
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                (l, r.host_recv_ns * 1e-9, f64::NAN, m.monitored(other(l), 2.0))
            })
            .collect(),
    };
    let s16 = Check {
        name: "H_r from the synchronous sends' wait and the pipelined receiver (Session 16)",
        unit: "µs",
        scale: 1e6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                (l, r.host_recv_ns * 1e-9, f64::NAN, other(l))
            })
            .collect(),
    };
    let s19 = ping_pong_at_with(rows, m, false);
    let tau19 = Check {
        name: "τ_s from the ping-pong only, with a minimum-length way back (Session 19, Δ_b = 0)",
        unit: "Mbit/s",
        scale: 1e-6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                let q = &QUANTITIES[1];
                (l, q.value(l, (q.time)(r)), f64::NAN, 8.0 * s19(l).sync_throughput(l))
            })
            .collect(),
    };
    let c19 = Check {
        name: "completion C(l) from the ping-pong only, the seed's structure (δ_0 + ρ_δ·l) + δ_0 (Session 19, Δ_b = 0)",
        unit: "µs",
        scale: 1e6,
        unrecorded: false,
        points: rows
            .iter()
            .map(|r| {
                let l = r.size as f64;
                (l, r.proc_complete_ns * 1e-9, f64::NAN, s19(l).completion(l))
            })
            .collect(),
    };
    let mut v = vec![tau, sink, s16, structural, tau19, c19];
    v.extend(super::predict::delay_references(rows));
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::e8::Disturbed;

    /// A model with every term non-zero, as a machine to measure.
    pub(crate) fn exact_model() -> Extended {
        let seed = Model { l_c: 128.0, l_a: 72.0, ..Model::SEED_004 };
        Extended {
            seed,
            delta_e: 9e-6,
            c_0: 30e-6,
            gamma: 0.3e-9,
            delta_i_cpu: 2e-6,
            delta_d: 3e-6,
            doorbells_send: 1.0,
            acks_send: 1.0,
            ack_round: 70e-6,
            wake_sync: 4e-6,
            u_0: 5e-3,
            upsilon: 1e-6,
            cores: 2.0,
            mss: 0.0,
            t_0_multi: seed.t_0,
            rho_t_multi: seed.rho_t,
            u_0_multi: 5e-3,
            upsilon_multi: 1e-6,
            i_0: 1e-3,
            iota: 0.0,
            i_0_multi: 1e-3,
            iota_multi: 0.0,
            // One regime: the lines beyond one packet are the first's.
            delta_w_multi: seed.delta_w + seed.rho_w * seed.l_c,
            rho_w_multi: seed.rho_w,
            wait_block: 0.0,
            delta_r_cpu: 1.5e-6,
            rho_r_cpu: 0.05e-9,
            clock_read: 0.5e-6,
            wake_back: 0.0,
        }
    }

    /// Rows measured on a machine that is exactly the extended model `x`;
    /// from 64 KB on, a quarter of the synchronous sends take a second
    /// acknowledgement round.
    pub(crate) fn rows_of(x: &Extended, sizes: &[usize], mss: usize) -> Vec<CalibRow> {
        let seed = x.seed;
        let ns = |v: f64| v * 1e9;
        sizes
            .iter()
            .map(|&size| {
                let l = size as f64;
                let (n_a, multi) = if size >= 65_536 { (1.25, 25) } else { (1.0, 0) };
                let xa = x.with_acks(n_a);
                CalibRow {
                    kind: "calibration".into(),
                    size,
                    l_c: 128,
                    l_a: 72,
                    proc_delay_ns: ns(seed.delta_0 + seed.rho_delta * l),
                    proc_period_ns: ns(seed.t_0 + seed.rho_t * l),
                    proc_complete_ns: ns(xa.completion(l)),
                    proc_complete_one_ns: ns(x.completion(l)),
                    proc_complete_multi_ns: if multi > 0 {
                        ns(x.with_acks(2.0).completion(l))
                    } else {
                        f64::NAN
                    },
                    multi_blocks: if multi > 0 { 2.0 } else { f64::NAN },
                    multi_sends: multi,
                    write_ns: ns(x.write_entry(l)),
                    doorbell_ns: ns(x.delta_d),
                    all_cpu_ns: ns(x.u_0 + x.upsilon * l),
                    cores: 2,
                    mss,
                    read_ns: ns(seed.delta_r + seed.rho_r * (seed.l_a + l)),
                    wake_ns: ns(seed.delta_i),
                    wake_cpu_ns: ns(x.recv_wait(l)),
                    engine_wake_ns: ns(x.delta_e),
                    delay_ns: ns(x.delay(l)),
                    sync_period_ns: ns(xa.period_send(l).max(xa.period_recv(l))),
                    async_period_ns: ns(l / x.async_throughput(l)),
                    host_send_ns: ns(xa.host_send(l)),
                    sync_wakeups: 1.0,
                    host_recv_ns: ns(x.host_recv(l)),
                    send_write_cpu_ns: 0.0,
                    // One block per round, each δ_i^cpu.
                    send_wait_cpu_ns: ns(n_a * x.delta_i_cpu),
                    pp_sleeps: 1.0,
                    sync_blocks: n_a,
                    probe_pp_local_ns: None,
                    probe_pp_remote_ns: None,
                    probe_pp_local: None,
                    probe_sync_local_ns: None,
                    probe_sync_remote_ns: None,
                    probe_sync_local: None,
                    sync_engine_wake_ns: ns(x.delta_e + x.wake_sync),
                    sync_wake_ns: ns(seed.delta_i),
                    pp_rings: 1.0,
                    sync_rings: 1.0,
                    pipe_host_cpu_ns: 0.0,
                    // The receive's work without its wake-up: H_r less the
                    // wait (δ_i^cpu) and the two reads of the monitor the
                    // ping-pong's receive holds outside its wait (the
                    // pipelined receiver is counted by schedstat).
                    pipe_sink_cpu_ns: ns(x.host_recv(l) - x.delta_i_cpu - 2.0 * x.clock_read),
                    // One data block per packet (the model's count).
                    pp_blocks: x.blocks(l),
                    // The monitor: the ping-pong's receive is bounded by
                    // three clock reads (one wait), the sink's by none.
                    clock_read_ns: ns(x.clock_read),
                    pp_waits: 1.0,
                    sync_sink_cpu_ns: ns(x.host_recv(l) - 3.0 * x.clock_read),
                    // The synchronous sends' one way is the ping-pong's δ
                    // on this machine; their four threads' work is not
                    // modelled here (τ_a from the sends: its own test).
                    sync_oneway_ns: ns(x.delay(l)),
                    sync_engines_cpu_ns: f64::NAN,
                    sync_mid_wake: 0.0,
                    pp_mid_wake: 0.0,
                    // The sink wakes as the ping-pong's application does.
                    sync_sink_wake_ns: ns(seed.delta_i),
                    sync_proc_oneway_ns: ns(seed.delta_0 + seed.rho_delta * l),
                    pp_cross_out_ns: f64::NAN,
                    pp_cross_back_ns: f64::NAN,
                    sync_cross_ns: f64::NAN,
                    pipe_runq_ns: 0.0,
                    pipe_slices: 0.0,
                    pipe_other_cpu_ns: 0.0,
                    pipe_idle_ns: ns(x.i_0 + x.iota * l),
                    pipe_busiest_cpu_ns: None,
                    sink_reply_hold_us: Some(50),
                    pipe_steal_ns: 0.0,
                    pipe_tick_ns: 0.0,
                    count: 1,
                    stream: 1,
                    stream_ms: 50.0,
                    disturbed: Disturbed::default(),
                    repeats: Default::default(),
                    placement: None,
                }
            })
            .collect()
    }

    fn sizes_of(v: &[&CalibRow]) -> Vec<usize> {
        v.iter().map(|r| r.size).collect()
    }

    #[test]
    fn held_out_splits_within_each_regime() {
        let x = exact_model();
        let full = [1, 64, 256, 1024, 4096, 8192, 16_384, 32_768, 65_536];
        let rows = rows_of(&x, &full, 1400);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let h = held_out(&refs).unwrap();
        // One packet: 1, 64, 256, 1,024 — 64 predicted, 1,024 (the
        // regime's last) calibrates; several: 4,096 … 65,536.
        assert_eq!(sizes_of(&h.train), [1, 256, 1024, 4096, 16_384, 65_536]);
        assert_eq!(sizes_of(&h.test), [64, 8192, 32_768]);
        assert!(h.notes.is_empty());
        // --quick's three lengths: no regime has three, the split falls
        // back across the regimes and says so.
        let quick = rows_of(&x, &[1, 4096, 65_536], 1400);
        let q: Vec<&CalibRow> = quick.iter().collect();
        let h = held_out(&q).unwrap();
        assert_eq!(sizes_of(&h.test), [4096]);
        assert_eq!(h.notes.len(), 1);
        // Baseline on exact lines within a regime: exact too — but not
        // for the host's send time, which the second acknowledgement round
        // at 64 KB bends (the model, with n_a and R_a, stays exact; here
        // the receive period sets τ_s, which the round does not touch).
        let h = held_out(&refs).unwrap();
        for b in baseline(&h.train, &h.test) {
            if b.name.contains("latency") || b.name.contains("H_r") {
                assert!(b.worst(true) < 1e-6, "{}: {}", b.name, b.worst(true));
            }
            if b.name.contains("H_t") {
                // (a quarter of δ_i^cpu at 64 KB: small, but not a line)
                assert!(b.worst(true) > 1e-6, "{}: {}", b.name, b.worst(true));
            }
            assert_eq!(b.points.len(), 3);
        }
        for c in checks(&h.test, &h.cal.model) {
            if !c.name.contains("throughput") {
                assert!(c.worst(true) < 1e-6, "held out {}: {}", c.name, c.worst(true));
            }
        }
        assert!((h.cal.model.ack_round - x.ack_round).abs() < 1e-12, "{}", h.cal.model.ack_round);
    }

    #[test]
    fn ping_pong_only_predicts_a_machine_whose_completion_is_two_one_ways() {
        let m = exact_model();
        let d0 = m.seed.delta_0;
        let x = Extended { c_0: 2.0 * d0, gamma: m.seed.rho_delta, ack_round: 2.0 * d0, wake_sync: 0.0, ..m };
        let rows = rows_of(&x, &[1, 1024, 16_384], 0);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        // No send took two rounds: R_a is 0 and unused, not a miss.
        assert!(!cal.two_round && cal.unfitted.is_empty(), "{:?}", cal.unfitted);
        // (τ_a from the sends' work is not modelled by `rows_of`: its own
        // test in `predict.rs`.)
        for c in cross_checks(&refs, &cal.model).into_iter().filter(|c| !c.unrecorded) {
            assert!(c.worst(true) < 1e-6, "{}: {}", c.name, c.worst(true));
        }
        // At 64 KB a quarter of the sends take a second round, which the
        // cross prediction (n_a = 1) does not hold: C(l) under-predicted
        // by exactly 0.25·R_a.
        let rows = rows_of(&x, &[1, 1024, 16_384, 65_536], 0);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        let c = &cross_checks(&refs, &cal.model)[1];
        let p = c.points[3];
        assert!(((p.1 - p.3) - 0.25 * x.ack_round).abs() < 1e-12, "{p:?}");
        // On the default machine (C_0 = 30 µs, Δ_s = 4 µs) it misses.
        let rows = rows_of(&m, &[1, 1024, 65_536], 0);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!(cross_checks(&refs, &cal.model)[1].worst(true) > 0.1);
    }

    #[test]
    fn h_r_from_the_sinks_receives_holds_the_monitors_clock_reads() {
        // A machine whose ping-pong receive is bounded by three reads of
        // the thread's CPU clock (κ = 0.5 µs each) and whose sink's
        // receives, counted by schedstat, by none; one packet and several.
        let x = Extended { mss: 1400.0, wait_block: 0.1e-6, ..exact_model() };
        // Multiples of the mss beyond one packet: ⌈l/mss⌉ is then a line in l.
        let rows = rows_of(&x, &[1, 256, 1024, 2800, 14_000, 56_000], 1400);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!((cal.model.clock_read - 0.5e-6).abs() < 1e-15, "κ {}", cal.model.clock_read);
        let cross = cross_checks(&refs, &cal.model);
        let h_r = cross.iter().find(|c| c.name.starts_with("H_r")).unwrap();
        assert!(h_r.worst(true) < 1e-9, "H_r from the sink + the monitor: {}", h_r.worst(true));
        // Without the reads it misses by 3κ at every length; Session 16's
        // (the sends' wait holds one read, the pipelined receiver none) by 2κ.
        let others = cross_references(&refs, &cal.model);
        let find = |start: &str| others.iter().find(|c| c.name.starts_with(start)).unwrap();
        for (name, reads) in
            [("H_r from the sink's receives, without", 3.0), ("H_r from the synchronous sends' wait", 2.0)]
        {
            for p in &find(name).points {
                assert!(((p.1 - p.3) - reads * x.clock_read).abs() < 1e-12, "{name}: {p:?}");
            }
        }
        // The structural split with the reads, W_s + R_p(l) + 2κ: exact on
        // this machine (its pipelined receiver is the ping-pong's receive
        // less its wait and two reads).
        let s = find("H_r from the synchronous sends' wait and the pipelined receiver + 2κ");
        assert!(s.worst(true) < 1e-9 && !s.unrecorded, "structural: {}", s.worst(true));
        // Two waits per receive: two reads more in the measured receive,
        // but the prediction counts the ping-pong's one wait (its
        // structure), not the waits traced on the receives it predicts:
        // it misses by exactly those 2κ.
        let mut two = rows.clone();
        for r in &mut two {
            r.host_recv_ns += 2.0 * x.clock_read * 1e9;
            r.pp_waits = 2.0;
        }
        let refs: Vec<&CalibRow> = two.iter().collect();
        let h_r = cross_checks(&refs, &cal.model).remove(2);
        for p in &h_r.points {
            assert!(((p.1 - p.3) - 2.0 * x.clock_read).abs() < 1e-12, "two waits: {p:?}");
        }
        // Results written before the sink's receives were recorded: NaN,
        // a miss, not a number from another term.
        let mut old = rows.clone();
        for r in &mut old {
            r.sync_sink_cpu_ns = f64::NAN;
        }
        let refs: Vec<&CalibRow> = old.iter().collect();
        let h_r = cross_checks(&refs, &cal.model).remove(2);
        assert!(h_r.unrecorded && h_r.points.iter().all(|p| p.3.is_nan()));
    }

    #[test]
    fn results_without_the_monitors_columns_are_not_recorded_not_unfitted() {
        // Rows written before Session 19: no κ, no sink's receives.
        let x = exact_model();
        let mut rows = rows_of(&x, &[1, 1024, 16_384], 0);
        for r in &mut rows {
            r.clock_read_ns = f64::NAN;
            r.sync_sink_cpu_ns = f64::NAN;
        }
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!(cal.model.clock_read.is_nan());
        assert!(!cal.unfitted.contains(&"clock_read"), "{:?}", cal.unfitted);
        let cross = cross_checks(&refs, &cal.model);
        assert!(cross[2].unrecorded && !cross[0].unrecorded && !cross[1].unrecorded);
        let others = cross_references(&refs, &cal.model);
        let flags: Vec<bool> = others.iter().map(|c| c.unrecorded).collect();
        // τ_s (Session 18), the sink without reads, Session 16's, + 2κ,
        // τ_s and C with Δ_b = 0 (Session 19), δ as the sends' one way at
        // the length.
        assert_eq!(flags, [false, true, false, true, false, false, false]);
        // A row with the column but no finite value where others have it:
        // κ is still fitted from the rest.
        rows[0].clock_read_ns = 500.0;
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!((cal.model.clock_read - 0.5e-6).abs() < 1e-15);
    }

    #[test]
    fn tau_s_from_the_ping_pong_holds_no_read_entry() {
        // A machine whose completion is two one ways and whose sends take
        // their block inside the wait: the cross τ_s is exact; with the
        // seed's two reads in T_t (Table 4's δ_r, 382 µs) it is not.
        let m = exact_model();
        let d0 = m.seed.delta_0;
        let x = Extended { c_0: 2.0 * d0, gamma: m.seed.rho_delta, wake_sync: 0.0, ..m };
        let rows = rows_of(&x, &[1, 1024, 16_384], 0);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!(cross_checks(&refs, &cal.model)[0].worst(true) < 1e-9);
        let with_reads = cross_references(&refs, &cal.model).remove(0);
        assert!(with_reads.name.starts_with("τ_s"));
        assert!(with_reads.worst(true) > 0.1, "{}", with_reads.worst(true));
    }

    #[test]
    fn tau_s_from_the_ping_pong_takes_its_wake_ups_at_the_length() {
        // A machine whose wake-ups ending a message of several packets are
        // shorter, by d(l) = 100 µs·l/56,000 (of δ_i's 143 µs), in the
        // ping-pong and the synchronous sends alike — and in the
        // acknowledgement's way back (the sink's wake-ups, Δ_b; Session
        // 20), so a send's completion is d(l) shorter too.
        let m = exact_model();
        let d0 = m.seed.delta_0;
        let x = Extended { c_0: 2.0 * d0, gamma: m.seed.rho_delta, wake_sync: 0.0, ..m };
        let mut rows = rows_of(&x, &[1, 256, 1024, 2800, 14_000, 56_000], 1400);
        for r in rows.iter_mut().filter(|r| r.size > 1400) {
            let d = 100e3 * r.size as f64 / 56_000.0;
            r.wake_ns -= d;
            r.sync_wake_ns -= d;
            r.proc_complete_ns -= d;
            r.proc_complete_one_ns -= d;
            r.sync_period_ns -= 2.0 * d;
        }
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        let cross = cross_checks(&refs, &cal.model);
        assert!(cross[0].worst(true) < 1e-9, "τ_s {}", cross[0].worst(true));
        assert!(cross[1].worst(true) < 1e-9, "C {}", cross[1].worst(true));
        // Session 19's form (a minimum-length way back, Δ_b = 0) is d(l)
        // long of the completion beyond one packet, exact up to it.
        let c19 = cross_references(&refs, &cal.model)
            .into_iter()
            .find(|c| c.name.starts_with("completion"))
            .unwrap();
        for p in &c19.points {
            let d = if p.0 > 1400.0 { 100e-6 * p.0 / 56_000.0 } else { 0.0 };
            assert!(((p.3 - p.1) - d).abs() < 1e-12, "{p:?}");
        }
        // The synchronous sends' wake-ups shortened by 2·d(l) while the
        // ping-pong's stay at d(l): the cross τ_s takes the ping-pong's, so
        // it is d(l) long of the sends' period, not exact (review of
        // Session 19: the sends' own wake-ups would be exact here).
        let mut sends = rows.clone();
        for r in sends.iter_mut().filter(|r| r.size > 1400) {
            let d = 100e3 * r.size as f64 / 56_000.0;
            r.sync_wake_ns -= d;
            r.sync_period_ns -= d;
        }
        let refs2: Vec<&CalibRow> = sends.iter().collect();
        let cal2 = calibrate(&refs2).unwrap();
        let at = ping_pong_at(&refs2, &cal2.model);
        for r in &refs2 {
            let l = r.size as f64;
            let d = if r.size > 1400 { 100e-6 * l / 56_000.0 } else { 0.0 };
            let period = l / at(l).sync_throughput(l);
            assert!((period - r.sync_period_ns * 1e-9 - d).abs() < 1e-12, "{} B: {period}", r.size);
        }
        // With the model's constant wake-ups (Δ_s = 0) it misses at 56 KB.
        let pp = ping_pong_only(&cal.model).with_acks(1.0);
        let r = refs.last().unwrap();
        let l = r.size as f64;
        let e = l / pp.sync_throughput(l) / (r.sync_period_ns * 1e-9) - 1.0;
        // (Table 4's periods are milliseconds: 0.24 % here.)
        assert!(e > 1e-3, "constant wake-ups: {e}");
    }

    #[test]
    fn repeatability_is_the_standard_error_of_the_rounds() {
        let mut rows = rows_of(&exact_model(), &[1], 0);
        assert_eq!(repeat_se(&rows[0], "delay"), None);
        rows[0].repeats.insert("delay".into(), vec![10.0, 12.0, 14.0, 12.0]);
        rows[0].repeats.insert("host_send".into(), vec![5.0]);
        let (se, n, spread) = repeat_se(&rows[0], "delay").unwrap();
        // sd = √(8/3), over √4 and the mean 12.
        assert!((se - (8.0f64 / 3.0).sqrt() / 2.0 / 12.0).abs() < 1e-12, "{se}");
        assert_eq!(n, 4);
        assert!((spread - 1.4).abs() < 1e-12);
        assert_eq!(repeat_se(&rows[0], "host_send"), None);
        // Survives results.json.
        let back: CalibRow = serde_json::from_str(&serde_json::to_string(&rows[0]).unwrap()).unwrap();
        assert_eq!(back.repeats, rows[0].repeats);
    }

    #[test]
    fn a_nan_value_survives_results_json() {
        // A mean over no samples (a doorbell no write rang) is NaN, which
        // JSON writes as null; `--replot` must read it back as NaN.
        let mut rows = rows_of(&exact_model(), &[1], 0);
        rows[0].doorbell_ns = f64::NAN;
        let json = serde_json::to_string(&rows[0]).unwrap();
        let back: CalibRow = serde_json::from_str(&json).unwrap();
        assert!(back.doorbell_ns.is_nan());
        assert_eq!(back.write_ns, rows[0].write_ns);
    }

    #[test]
    fn a_bad_length_is_left_out_not_the_whole_model() {
        let x = Extended { wake_sync: -5e-6, ..exact_model() };
        let mut rows = rows_of(&x, &[1, 1024, 16_384, 65_536], 0);
        rows[1].doorbell_ns = f64::NAN;
        rows[2].read_ns = 0.0;
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert!(cal.unfitted.is_empty(), "{:?}", cal.unfitted);
        assert_eq!(cal.dropped, [("read", 16_384), ("doorbell", 1024)]);
        assert!((cal.model.delta_d - x.delta_d).abs() < 1e-12);
        // Δ_s keeps its sign.
        assert!((cal.model.wake_sync + 5e-6).abs() < 1e-12, "{}", cal.model.wake_sync);
        cal.model.validate().unwrap();
        // A parameter with fewer than two usable lengths is named, NaN,
        // and the checks that use it count as misses.
        for r in &mut rows[1..] {
            r.doorbell_ns = f64::NAN;
        }
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let cal = calibrate(&refs).unwrap();
        assert_eq!(cal.unfitted, ["delta_d"]);
        let cs = checks(&refs, &cal.model);
        let h_t = cs.iter().find(|c| c.name.contains("H_t")).unwrap();
        assert_eq!(h_t.worst(true), f64::INFINITY);
        assert_eq!(h_t.within(true, 0.10), 0);
        let lat = cs.iter().find(|c| c.name.contains("latency")).unwrap();
        assert!(lat.worst(true) < 1e-6);
    }

    #[test]
    fn host_terms_beyond_one_packet_are_calibrated_and_checked_held_out() {
        // A machine whose write entry steps up beyond one packet and whose
        // receive wait takes a block per packet.
        let base = exact_model();
        let x = Extended {
            mss: 1400.0,
            delta_w_multi: 2.0e-6,
            rho_w_multi: 0.05e-9,
            wait_block: 0.1e-6,
            delta_r_cpu: 1.4e-6,
            rho_r_cpu: 0.05e-9,
            delta_i_cpu: 5.3e-6,
            // Write and read entries of this machine's size (the seed's
            // Table 4 ones are 300 times longer); the wall-clock read entry
            // grows faster than the read's CPU (it overlaps the wait).
            seed: Model { delta_w: 0.7e-6, rho_w: 0.1e-9, delta_r: 1.0e-6, rho_r: 0.09e-9, ..base.seed },
            ..base
        };
        let full = [1, 64, 256, 1024, 4096, 8192, 16_384, 32_768, 65_536];
        let rows = rows_of(&x, &full, 1400);
        let refs: Vec<&CalibRow> = rows.iter().collect();
        let h = held_out(&refs).unwrap();
        let m = &h.cal.model;
        for (name, got, want) in [
            ("delta_w_multi", m.delta_w_multi, x.delta_w_multi),
            ("rho_w_multi", m.rho_w_multi, x.rho_w_multi),
            ("wait_block", m.wait_block, x.wait_block),
            ("delta_w", m.seed.delta_w, x.seed.delta_w),
            ("rho_w", m.seed.rho_w, x.seed.rho_w),
            ("delta_r_cpu", m.delta_r_cpu, x.delta_r_cpu),
            ("rho_r_cpu", m.rho_r_cpu, x.rho_r_cpu),
        ] {
            assert!((got - want).abs() <= 1e-9 * want.abs() + 1e-18, "{name}: {got} against {want}");
        }
        let cs = checks(&h.test, m);
        let h_r = cs.iter().find(|c| c.name.contains("H_r")).unwrap();
        assert!(h_r.worst(true) < 1e-9, "H_r held out: {}", h_r.worst(true));
        // H_t at every held-out length, 64 B on the one-packet line (fitted
        // over the one-packet lengths, so the step beyond does not bend
        // it), 8 and 32 KB on the entry's second line; δ' too, which holds
        // the same entry.
        for name in ["H_t", "latency"] {
            let c = cs.iter().find(|c| c.name.contains(name)).unwrap();
            assert_eq!(c.points.len(), 3);
            for p in &c.points {
                assert!(((p.3 - p.1) / p.1).abs() < 1e-9, "{name} held out {p:?}");
            }
        }
        // Without the terms (the wait at δ_i^cpu, the read at the seed's
        // wall-clock entry, one write line) both miss by more than 5 %
        // (H_r 14 %, H_t 9 % here).
        let old = Extended { mss: 0.0, delta_r_cpu: m.seed.delta_r, rho_r_cpu: m.seed.rho_r, ..*m };
        let cs = checks(&h.test, &old);
        for name in ["H_r", "H_t"] {
            let c = cs.iter().find(|c| c.name.contains(name)).unwrap();
            assert!(c.worst(true) > 0.05, "{name} without the terms: {}", c.worst(true));
        }
    }
}
