//! CUBIC (RFC 9438), with HyStart++ (RFC 9406) to leave slow start on rising
//! delay instead of a burst of losses at long round trips.
//!
//! The window grows as a cubic function of the time since the last
//! reduction, centred on the window where that loss happened (`w_max`):
//! quickly back towards it, flat around it, then probing beyond. On loss the
//! window is multiplied by β = 0.7. A Reno-friendly estimate (`w_est`) keeps
//! CUBIC at least as aggressive as Reno at short round trips.

use xk_time::{Duration, Instant};

use super::hystart::Phase;
use super::{Ack, CongestionController, HyStart, initial_window, window_pacing};

const C: f64 = 0.4;
const BETA: f64 = 0.7;
/// Smallest window (segments) at which slow start may end on a full pipe
/// (Linux's `hystart_low_window`).
const PIPE_FULL_MIN_SEGMENTS: u64 = 16;

/// CUBIC with HyStart++.
#[derive(Clone, Copy, Debug)]
pub struct Cubic {
    mss: u64,
    s: State,
    saved: Option<State>,
}

#[derive(Clone, Copy, Debug)]
struct State {
    cwnd: u64,
    ssthresh: u64,
    /// Window (bytes) at the last reduction.
    w_max: f64,
    /// Time from the epoch start to reach `w_max` again, seconds.
    k: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch: Option<Instant>,
    /// Reno-friendly window estimate (bytes).
    w_est: f64,
    /// The window just before the last reduction (RFC 9438's cwnd_prior).
    cwnd_prior: f64,
    /// A loss (or timeout) has reduced the window: the path's capacity has
    /// been found once.
    reduced: bool,
    /// When slow start ended on a full pipe (`HyStart::pipe_full`) and the
    /// window then, until a loss or timeout.
    pipe_full: Option<(Instant, u64)>,
    /// A loss ended slow start and the data in flight has not yet grown
    /// back to the new window: pace at the window's own rate, without the
    /// 1.25 headroom (see [`Cubic::pacing_rate`]).
    refill: Refill,
    /// Smallest RTT seen (from the reports).
    min_rtt: Duration,
    hystart: HyStart,
}

/// The refill after a loss ended slow start (see [`Cubic::pacing_rate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refill {
    /// None under way.
    Off,
    /// The window was set at this time; the data in flight may still be
    /// above it (the overshoot and its retransmissions drain first).
    Armed(Instant),
    /// The data in flight fell below the window: it is being refilled.
    Filling,
}

/// Until the first loss, congestion avoidance grows the window by at least
/// this fraction per round trip (Linux CUBIC's `cnt` ≤ 20: 5 % per RTT).
/// After a delay-based slow-start exit the cubic starts flat (K = 0) and
/// adds C·t³ segments: 70 KB in 5 s; a flow that joined a busy bottleneck
/// then stayed at a third of a kernel CUBIC flow's rate, which grew 5 % per
/// round trip until the first loss (FAIR, 45 Mbit/s, 50 ms: 410 KiB against
/// 571 KB → 1.26 MB over 4 s).
const UNPROBED_GROWTH: f64 = 0.05;

impl Cubic {
    /// The segment shrank to `mss` (the peer's `maxdata`, docs/PROTOCOL.md
    /// G28): floors and growth count in the new segment, and a window still
    /// at its initial ten segments becomes ten of the new size (the peer's
    /// answer that brings `maxdata` is the first report, before growth).
    pub fn set_mss(&mut self, mss: u64) {
        let mss = mss.max(1);
        if self.s.cwnd == initial_window(self.mss) {
            self.s.cwnd = initial_window(mss);
        }
        self.mss = mss;
    }

    /// A controller for segments of `mss` bytes.
    pub fn new(mss: u64) -> Self {
        let s = State {
            cwnd: initial_window(mss),
            ssthresh: u64::MAX,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            cwnd_prior: 0.0,
            reduced: false,
            pipe_full: None,
            refill: Refill::Off,
            min_rtt: Duration::ZERO,
            hystart: HyStart::default(),
        };
        Cubic { mss, s, saved: None }
    }

    /// W_cubic(t) in bytes.
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.s.k;
        C * d * d * d * self.mss as f64 + self.s.w_max
    }

    fn reduce(&mut self, to_min: bool) {
        self.saved = Some(self.s);
        let s = &mut self.s;
        let cwnd = s.cwnd as f64;
        // Fast convergence: a flow whose window shrank since its last loss
        // releases bandwidth to newer flows.
        s.w_max = if cwnd < s.w_max { cwnd * (1.0 + BETA) / 2.0 } else { cwnd };
        s.cwnd_prior = cwnd;
        s.reduced = true;
        s.ssthresh = ((cwnd * BETA) as u64).max(2 * self.mss);
        s.cwnd = if to_min { 2 * self.mss } else { s.ssthresh };
        s.epoch = None;
        s.w_est = s.cwnd as f64;
        // A congestion-avoidance loss keeps RFC 9438's and Linux's pacing:
        // proportional rate reduction leaves the data in flight at the new
        // window when recovery ends, so there is no gap to refill.
        s.refill = Refill::Off;
        s.pipe_full = None;
        s.hystart.reset();
    }

    /// A loss ends slow start. The window at detection says little about
    /// the path: it grew for the round trip the loss took to show, and in a
    /// shallow queue the loss came from one paced round's burst at half the
    /// BDP in flight, not from a full pipe. So when the reports measured a
    /// pipe (the bottleneck rate they showed times the minimum RTT: TCP
    /// Westwood+'s ssthresh = BWE × RTTmin) above what RFC 9438's β would
    /// leave, the window becomes that pipe (at most (1 + β)/2 of the window
    /// at detection, so every loss still reduces it), and congestion avoidance starts as after a delay-based
    /// exit (RFC 9438 §4.10: W_max is that window, K = 0) — an overshoot's
    /// window is no saturation point, and as W_max it would make the next
    /// loss look like a shrinking share and cost fast convergence's further
    /// 15 %. Without such a measurement the reduction is RFC 9438's own
    /// (through the emulator at 500 ms the reports showed less than β ×
    /// the window; a flat start from there regrew more slowly than the
    /// RFC's concave one). Either way the refill is paced at the window's
    /// rate.
    fn leave_slow_start_on_loss(&mut self, now: Instant) {
        let rtt = self.s.min_rtt.as_secs_f64();
        let pipe = (self.s.hystart.ack_rate() as f64 * rtt) as u64;
        let saturated = (self.s.hystart.saturated_rate() as f64 * rtt) as u64;
        let floor = (self.s.cwnd as f64 * BETA) as u64;
        if saturated == 0 && pipe <= floor {
            self.reduce(false);
            self.s.refill = Refill::Armed(now);
            return;
        }
        // A pipe measured while the bottleneck was saturated is its size
        // (or this flow's share of it), so it stands even below β × the
        // window: above it, the window overflows the queue again (1 Gbit/s,
        // 50 ms, 1,000 packets: slow start's window grows to 13.6 MB while
        // the receiver's window holds the data in flight at 4-8 MiB; β
        // would leave 9.6 MB against 7.5 MB of pipe and queue, a second
        // loss, and W_max under pipe and queue, where the next
        // congestion-avoidance loss costs another β).
        // But an unsaturated bucket is a lower bound on the bottleneck's
        // rate, so a saturated reading below it is stale (the share of a
        // bottleneck since freed) or not the bottleneck at all (a queue on
        // the return path, a slowed receiver): the window keeps the smaller
        // of β × the window and the unsaturated pipe, whatever the
        // saturated reading says.
        let pipe = if saturated > 0 { saturated.max(pipe.min(floor)) } else { pipe };
        self.saved = Some(self.s);
        let s = &mut self.s;
        // Never the window that overflowed: at least half of RFC 9438's
        // reduction (1 − β)/2 is kept whatever the estimate says, so an
        // estimate inflated by compressed reports, or one that measured the
        // whole link where this flow has only a share, still answers the
        // loss (RFC 5033: respond to every congestion signal).
        let cap = (s.cwnd as f64 * (1.0 + BETA) / 2.0) as u64;
        let w = pipe.min(cap).max(2 * self.mss);
        s.cwnd_prior = s.cwnd as f64;
        s.reduced = true;
        s.cwnd = w;
        s.ssthresh = w;
        s.w_max = w as f64;
        s.epoch = None;
        s.w_est = w as f64;
        s.refill = Refill::Armed(now);
        s.hystart.reset();
    }
}

impl CongestionController for Cubic {
    fn on_ack(&mut self, ack: &Ack) {
        self.s.min_rtt = ack.min_rtt;
        // The data in flight before this report, within a report's worth:
        // the report after a retransmission filled a hole acknowledges
        // everything held beyond it at once (megabytes at 1 Gbit/s), which
        // says nothing about how full the window is. (After the report the
        // data in flight can be a whole report's worth lower, which at a
        // small window is more than a sixteenth of it.)
        let before = ack.in_flight + ack.bytes.min(self.s.cwnd / 16);
        let full = before >= self.s.cwnd - self.s.cwnd / 16;
        self.s.refill = match (self.s.refill, full) {
            // The refill ends once the data in flight is back within a
            // sixteenth of the window after it first fell below: right
            // after the exit the overshoot can still hold more than the new
            // window while recovery opens a gap under it, and that gap
            // refilled at 1.25 × the window's rate overflows a queue that
            // still stands (1 Gbit/s, 100 ms: a second β). A window that
            // stays full for a round trip after the exit has no gap to
            // refill: the headroom returns then.
            (Refill::Armed(_), false) => Refill::Filling,
            (Refill::Armed(at), true) if ack.now.saturating_since(at) >= ack.srtt => Refill::Off,
            (Refill::Filling, true) => Refill::Off,
            (r, _) => r,
        };
        if ack.app_limited {
            // RFC 9438 §5.8: no growth from a window that is not used; the
            // epoch restarts when the sender uses it again.
            self.s.epoch = None;
            return;
        }
        if self.s.cwnd < self.s.ssthresh {
            let mut phase = self.s.hystart.on_ack(ack);
            // The pipe is full (see `HyStart::pipe_full`): above Linux's
            // `hystart_low_window` (16 segments), where a few packets' worth
            // of pacing bursts cannot read as a saturated bottleneck.
            if phase != Phase::Exit
                && self.s.cwnd >= PIPE_FULL_MIN_SEGMENTS * self.mss
                && let Some(pipe) = self.s.hystart.pipe_full(self.s.cwnd, self.s.min_rtt)
            {
                // The window keeps what is in flight and at least the pipe,
                // not what it grew to while the receiver's window held the
                // data in flight below it (1 Gbit/s × 100 ms: 13.7 MB against
                // 8.4 MB in flight and 12.2 MB of pipe, over pipe and queue).
                // A flow that uses its window (a joiner on a shared
                // bottleneck) keeps it: its data in flight is its window.
                // The 5 %-per-round floor for an unprobed path stays on until
                // a loss, as Linux's (`cnt` ≤ 20 while `last_max_cwnd` is 0):
                // a joiner's saturated reading is its share of a busy
                // bottleneck, and with the floor off it kept that share
                // (FAIR, 45 Mbit/s × 50 ms against kernel CUBIC: Jain
                // 0.78-0.91, XTP 10-15 Mbit/s, against 0.90-0.99 with it).
                // On an empty path it builds queue until a loss, which is
                // then a congestion-avoidance loss (β). HyStart's readings
                // are kept for a loss the last slow-start round may still
                // have caused (see `on_congestion`).
                self.s.pipe_full = Some((ack.now, self.s.cwnd));
                self.s.cwnd = self.s.cwnd.min(pipe.max(ack.in_flight)).max(2 * self.mss);
                self.s.refill = Refill::Armed(ack.now);
                phase = Phase::Exit;
            }
            if phase == Phase::Exit {
                self.s.ssthresh = self.s.cwnd;
            } else {
                self.s.cwnd = self.s.cwnd.saturating_add(HyStart::growth(phase, ack.bytes));
                return;
            }
        }
        let mss = self.mss as f64;
        let cwnd = self.s.cwnd as f64;
        let epoch = match self.s.epoch {
            Some(e) => e,
            None => {
                // A new epoch: K is how long the cubic takes from here back to w_max.
                self.s.epoch = Some(ack.now);
                if self.s.w_max < cwnd {
                    self.s.w_max = cwnd;
                }
                self.s.k = ((self.s.w_max - cwnd) / mss / C).max(0.0).cbrt();
                self.s.w_est = cwnd;
                ack.now
            }
        };
        let t = ack.now.saturating_since(epoch).as_secs_f64();
        let rtt = ack.srtt.as_secs_f64();
        let target = self.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
        // Reno-friendly region: α = 3(1-β)/(1+β) segments per window, so
        // that AIMD(α, β) has Reno's average; once the estimate is back at
        // the window the last loss cut, α = 1, Reno's own rate (RFC 9438
        // §4.3) — without it CUBIC falls short of Reno at short RTTs.
        let alpha = if self.s.w_est >= self.s.cwnd_prior { 1.0 } else { 3.0 * (1.0 - BETA) / (1.0 + BETA) };
        self.s.w_est += alpha * ack.bytes as f64 / cwnd * mss;
        let mut grown = if self.w_cubic(t) < self.s.w_est {
            self.s.w_est.max(cwnd)
        } else {
            cwnd + (target - cwnd) * ack.bytes as f64 / cwnd
        };
        if !self.s.reduced {
            grown = grown.max(cwnd + UNPROBED_GROWTH * ack.bytes as f64);
        }
        self.s.cwnd = (grown as u64).max(self.s.cwnd);
    }

    fn on_congestion(&mut self, now: Instant, _in_flight: u64) {
        // A loss within two minimum RTTs of a full-pipe exit is of data the
        // last slow-start round sent (the reports that showed the pipe full
        // came back a round trip after it left, and its burst may already
        // have overflowed the queue — at 1 Gbit/s × 50 ms the receiver's
        // window opening lets 3 MB out at twice the window's rate before any
        // report of it returns): it ends slow start as a slow-start loss does.
        // A later loss, still the first since the exit, is the 5 %-per-round
        // probe for an unprobed path (kept on after the exit, see `on_ack`)
        // meeting pipe + queue: the capacity found, as a slow-start loss
        // finds it, so it is answered the same way, from the pipe the
        // reports measured at the exit (at most (1 + β)/2 of the window).
        // With RFC 9438's β a shallow queue then waited for the cubic to
        // regrow 30 % of the window (1 Gbit/s × 100 ms, 1,000 packets: 91.3
        // % over the counted 10 s, against 96.6 % with the floor off).
        // Never below β × the window, though: the readings are the exit's,
        // and a joiner read its share of a busy bottleneck there, which it
        // has since outgrown (FAIR: Jain 0.87 when that share was taken).
        // An undo (`on_spurious`) returns to the state before this loss —
        // the exit's trimmed window, its readings and `pipe_full` — not to
        // the window slow start grew to before the exit trimmed it.
        let pre = self.s;
        let exit = self.s.pipe_full.take();
        if let Some((at, cwnd)) = exit {
            if now.saturating_since(at) <= self.s.min_rtt * 2 {
                // Answered from the window the loss grew from, as if slow
                // start had gone on (the exit's own trim is no reduction);
                // but never above the window at the loss: the answer from
                // the grown window (the pipe, at most (1 + β)/2 of it) can
                // exceed the exit's trim, and a loss must not raise it.
                let cur = self.s.cwnd;
                self.s.cwnd = self.s.cwnd.max(cwnd);
                self.leave_slow_start_on_loss(now);
                let s = &mut self.s;
                s.cwnd = s.cwnd.min(cur);
                s.ssthresh = s.ssthresh.min(cur);
                s.w_max = s.w_max.min(cur as f64);
                s.w_est = s.w_est.min(cur as f64);
            } else {
                let before = self.s;
                self.leave_slow_start_on_loss(now);
                if self.s.cwnd < (before.cwnd as f64 * BETA) as u64 {
                    self.s = before;
                    self.reduce(false);
                }
            }
            self.saved = Some(pre);
        } else if self.in_slow_start() {
            self.leave_slow_start_on_loss(now);
        } else {
            self.reduce(false);
        }
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.reduce(true);
    }

    fn on_spurious(&mut self) {
        if let Some(old) = self.saved.take() {
            let cwnd = self.s.cwnd.max(old.cwnd);
            self.s = old;
            self.s.cwnd = cwnd;
        }
    }

    fn window(&self) -> u64 {
        self.s.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.s.ssthresh
    }

    /// As [`window_pacing`], except while refilling after a loss ended slow
    /// start: the data in flight is far below the window (the overshoot's
    /// losses took much of it, and the window is now the pipe), and 1.25 × the window per RTT would send
    /// the gap at a quarter above the bottleneck rate when the window is
    /// about the BDP — more than a queue of a few per cent of the BDP holds
    /// (1 Gbit/s, 200 ms, 1,000 packets: a second loss 0.5 s after the
    /// first, in congestion avoidance). At the window's own rate the gap
    /// fills in one round trip without a queue; the headroom returns once
    /// the window is full, where the window, not the pacer, binds.
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<u64> {
        if self.s.refill != Refill::Off && !self.in_slow_start() {
            return super::paced(self.s.cwnd, srtt, 1.0);
        }
        window_pacing(self.s.cwnd, srtt, self.in_slow_start())
    }

    fn in_slow_start(&self) -> bool {
        self.s.cwnd < self.s.ssthresh
    }

    fn reduces_proportionally(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "cubic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::tests::ack;

    #[test]
    fn reduction_then_cubic_recovery_to_w_max() {
        let mss = 1000;
        let mut c = Cubic::new(mss);
        c.on_ack(&ack(0, 90_000, 100, false));
        assert_eq!(c.window(), 100_000);
        // A loss in congestion avoidance (slow start left by delay), where
        // RFC 9438's reduction applies.
        c.s.ssthresh = c.s.cwnd;
        c.on_congestion(Instant::ZERO, 0);
        assert_eq!(c.window(), 70_000, "β = 0.7");
        // K = cbrt(30 segments / 0.4) = 4.2 s: after K the window is back near w_max.
        let k = (30.0f64 / C).cbrt();
        let mut ms = 0;
        let mut at_k = 0;
        while ms < 8_000 {
            c.on_ack(&ack(ms, 10_000, 100, false));
            if ms == (k * 1000.0) as u64 / 100 * 100 {
                at_k = c.window();
            }
            ms += 100;
        }
        assert!((95_000..=102_000).contains(&at_k), "window at K: {at_k}");
        assert!(c.window() > 110_000, "probes beyond w_max after K: {}", c.window());
        c.on_timeout(Instant::ZERO);
        assert_eq!(c.window(), 2 * mss);
        c.on_spurious();
        assert!(c.window() > 110_000, "spurious timeout undone");
    }

    /// Slow start's reports arrive 1 ms apart acknowledging 100 KB each
    /// (a 100 MB/s bottleneck, 100 ms RTT: a 10 MB pipe) while the window
    /// overshoots to 12 MB; the loss that ends slow start leaves the pipe,
    /// not β × 12 MB, starts congestion avoidance flat there (K = 0), and
    /// the refill is paced at the window's rate, not 1.25 times it.
    #[test]
    fn a_loss_in_slow_start_leaves_the_pipe_the_reports_measured() {
        let mut c = Cubic::new(1000);
        for i in 0..120u64 {
            // Paced rounds of 50 reports: no report train lasts a min RTT.
            c.on_ack(&ack(i, 100_000, 100, i % 50 == 0));
        }
        assert!(c.in_slow_start());
        assert_eq!(c.window(), 12_010_000);
        c.on_congestion(Instant::from_millis(120), 6_000_000);
        assert!(!c.in_slow_start());
        let w = c.window();
        assert!((9_900_000..=10_100_000).contains(&w), "the pipe, 10 MB: {w}");
        assert_eq!(c.s.w_max, w as f64, "W_max is the pipe, not the overshoot");
        let srtt = Some(Duration::from_millis(100));
        assert_eq!(c.pacing_rate(srtt), Some(w * 10), "refill at the window's rate");
        // The overshoot still holds more than the new window: the refill
        // waits for the data in flight to fall below it, then for it to
        // come back.
        let mut over = ack(121, 10_000, 100, false);
        over.in_flight = 11_000_000;
        c.on_ack(&over);
        assert_eq!(c.pacing_rate(srtt), Some(c.window() * 10), "still armed while the overshoot drains");
        let mut dip = ack(200, 10_000, 100, true);
        dip.in_flight = w / 2;
        c.on_ack(&dip);
        assert_eq!(c.pacing_rate(srtt), Some(c.window() * 10), "refilling");
        // The report after a repaired hole acknowledges megabytes at once:
        // that is not a full window.
        let mut jump = ack(210, 5_000_000, 100, false);
        jump.in_flight = w / 2;
        c.on_ack(&jump);
        assert_eq!(c.pacing_rate(srtt), Some(c.window() * 10), "a cumulative jump does not end the refill");
        let mut full = ack(220, 10_000, 100, true);
        full.in_flight = w;
        c.on_ack(&full);
        let w2 = c.window();
        assert!(w2 - w < 1000, "flat at first (K = 0): {w} -> {w2}");
        assert_eq!(c.pacing_rate(srtt), Some(w2 * 10 * 5 / 4), "window full: headroom back");
        // An estimate above the window (the link measured where the flow
        // has a share, or reports compressed) still reduces it, by half of
        // RFC 9438's reduction.
        let mut e = Cubic::new(1000);
        for i in 0..60u64 {
            e.on_ack(&ack(i, 100_000, 100, i % 50 == 0));
        }
        let before = e.window();
        e.on_congestion(Instant::from_millis(60), 3_000_000);
        assert_eq!(e.window(), (before as f64 * 0.85) as u64, "a 10 MB pipe, a {before} B window");
        // A pipe measured while the bottleneck was saturated stands even
        // below β × the window: unsaturated reports at 40 MB/s while the
        // window grew to 9.6 MB, then reports 1 ms apart acknowledging 60 KB
        // of data that left 0.5 ms apart (60 MB/s, a 6 MB pipe at 100 ms).
        // Slow start ends on the full pipe before the loss shows (Session
        // 19), and a loss within two round trips of that is answered from
        // the window slow start grew to. (Before Session 19 the window grew
        // on under saturated reports and the loss ended slow start itself.)
        let mut f = Cubic::new(1000);
        for i in 0..300u64 {
            let mut a = ack(i, 40_000, 100, i % 50 == 0);
            if i >= 240 {
                a.bytes = 60_000;
                a.sent_at = Some(Instant::from_micros(120_000 + (i - 240) * 500));
            }
            f.on_ack(&a);
        }
        assert!(f.s.hystart.saturated_rate() > 0);
        let before = f.s.pipe_full.expect("slow start ended on the full pipe").1;
        assert!(before > 9_600_000, "{before}");
        f.on_congestion(Instant::from_millis(300), 3_000_000);
        let w = f.window();
        assert!(w < (before as f64 * BETA) as u64, "below β × {before}: {w}");
        assert!((5_900_000..=6_100_000).contains(&w), "the saturated pipe, 6 MB: {w}");
        // Without a rate measured the reduction is RFC 9438's: β × the
        // window, W_max the window at detection.
        let mut d = Cubic::new(1000);
        d.on_ack(&ack(0, 90_000, 100, false));
        d.on_congestion(Instant::ZERO, 0);
        assert_eq!(d.window(), 70_000);
        assert_eq!(d.s.w_max, 100_000.0);
    }

    /// A saturated reading below what unsaturated reports later showed is
    /// no bound on the pipe: 40 reports 1 ms apart saturated at 10 MB/s (a
    /// 1 MB pipe at 100 ms), then 160 unsaturated ones at 100 MB/s (a
    /// 10 MB pipe) while the window grew to 16.41 MB. The window keeps the
    /// 10 MB the unsaturated reports showed, not the stale 1 MB.
    #[test]
    fn a_stale_saturated_reading_does_not_undercut_the_unsaturated_pipe() {
        let mut c = Cubic::new(1000);
        for i in 0..200u64 {
            let mut a = ack(i, 100_000, 100, i % 50 == 0);
            if i < 40 {
                a.bytes = 10_000;
                a.sent_at = Some(Instant::from_micros(i * 500));
            }
            c.on_ack(&a);
        }
        assert!(c.in_slow_start());
        assert_eq!(c.window(), 16_410_000);
        let sat = c.s.hystart.saturated_rate();
        assert!((9_000_000..=11_000_000).contains(&sat), "saturated at 10 MB/s: {sat}");
        c.on_congestion(Instant::from_millis(200), 8_000_000);
        let w = c.window();
        assert!((9_900_000..=10_100_000).contains(&w), "the unsaturated pipe, 10 MB: {w}");
    }

    /// Reports 1 ms apart acknowledging 60 KB of data that left 0.5 ms
    /// apart (a queue growing at a 60 MB/s bottleneck), RTT 100 ms: a 6 MB
    /// pipe, while the receiver's window holds 4 MB in flight. Slow start
    /// ends without a loss once the window passes the pipe, at the pipe
    /// (not what it grew to unused, nor the 4 MB in flight), with no
    /// reduction counted; a loss of the last slow-start round's data
    /// (within two minimum RTTs) is answered as a slow-start loss from the
    /// window it grew from; a later first loss since the exit (the 5 %
    /// floor's probe meeting pipe + queue) from the pipe the exit measured,
    /// never below β × the window; the loss after that with RFC 9438's β.
    /// Below 16 segments the window does not end slow start on the signal.
    #[test]
    fn slow_start_ends_when_the_window_fills_the_saturated_pipe() {
        let feed = |c: &mut Cubic| {
            let mut exit = None;
            for i in 0..200u64 {
                let before = c.window();
                let mut a = ack(100 + i, 60_000, 100, i % 50 == 0);
                a.sent_at = Some(Instant::from_micros(i * 500));
                a.in_flight = 4_000_000;
                c.on_ack(&a);
                if !c.in_slow_start() {
                    exit = Some((i, before));
                    break;
                }
            }
            exit
        };
        let mut c = Cubic::new(1000);
        let (at, grown) = feed(&mut c).expect("slow start ended");
        let w = c.window();
        assert!(
            (5_900_000..=6_100_000).contains(&w),
            "the pipe, 6 MB: {w} (grown to {grown}, at report {at})"
        );
        assert!(c.s.pipe_full.is_some());
        // Until a loss the path is unprobed: the window still grows by at
        // least 5 % per round (Linux's `cnt` ≤ 20 while `last_max_cwnd` is
        // 0), or a flow that joined a busy bottleneck keeps the share it
        // read at the exit (FAIR, Session 20: Jain 0.78-0.91 with the floor
        // off, 0.90-0.99 on).
        let mut probe = c;
        let (w0, mut ms) = (probe.window(), 400);
        for _ in 0..60 {
            let mut a = ack(ms, w0 / 60, 100, false);
            a.in_flight = probe.window();
            probe.on_ack(&a);
            ms += 1;
        }
        assert!(probe.window() >= w0 + w0 / 20 - 1000, "a round after the exit: {w0} -> {}", probe.window());
        let mut early = c;
        early.on_congestion(Instant::from_millis(100 + at + 150), 4_000_000);
        let pre = c.s.pipe_full.unwrap().1;
        let e = early.window();
        let floor = ((pre as f64 * (1.0 + BETA) / 2.0) as u64).min(5_900_000);
        assert!((floor..=6_100_000).contains(&e), "a slow-start loss from {pre}: the saturated pipe, {e}");
        // Later, the first loss since the exit is the floor's probe finding
        // pipe + queue: answered from the pipe, not with β; the next with β.
        let mut late = probe;
        late.on_congestion(Instant::from_millis(100 + at + 250), 4_000_000);
        let l = late.window();
        let cap = (probe.window() as f64 * (1.0 + BETA) / 2.0) as u64;
        assert!(
            (5_900_000.min(cap)..=6_100_000).contains(&l),
            "the first loss after the exit: the pipe, {l}"
        );
        assert!(!late.in_slow_start());
        late.on_congestion(Instant::from_millis(100 + at + 900), 4_000_000);
        assert_eq!(late.window(), (l as f64 * BETA) as u64, "then congestion avoidance: β");
        // A joiner's exit read its share (6 MB); grown to 10 MB since, its
        // first loss takes β, not that share.
        let mut joiner = probe;
        joiner.s.cwnd = 10_000_000;
        joiner.on_congestion(Instant::from_millis(100 + at + 250), 4_000_000);
        assert_eq!(joiner.window(), 7_000_000, "never under β × the window");
        // 1 MB segments: the 10 MB initial window is over the pipe at once,
        // but under 16 segments.
        let mut big = Cubic::new(1_000_000);
        let exit = feed(&mut big);
        assert!(exit.is_none_or(|(_, grown)| grown >= 16_000_000), "{exit:?}");
    }

    /// Unsaturated reports at 100 MB/s (a 10 MB pipe at 100 ms) grow the
    /// window past 10 MB, then reports 1 ms apart acknowledging 60 KB of
    /// data that left 0.5 ms apart (a saturated 60 MB/s, a 6 MB pipe): the
    /// exit trims the grown window to the 6 MB pipe. Returns the controller
    /// at the exit and the report after which it left slow start.
    fn exit_trimmed_below_the_unsaturated_pipe() -> (Cubic, u64) {
        let mut c = Cubic::new(1000);
        let at = saturate(&mut c, 100, 60_000, 0)
            .unwrap_or_else(|| panic!("slow start did not end: {}", c.window()));
        (c, at)
    }

    /// Feeds `c` unsaturated reports (100 KB each, 1 ms apart, 100 ms RTT)
    /// until report `from`, then saturated ones acknowledging `bytes` of
    /// data that left 0.5 ms apart, every report saying `in_flight`, until
    /// slow start ends (at most 400 reports).
    /// Returns the report after which it ended.
    fn saturate(c: &mut Cubic, from: u64, bytes: u64, in_flight: u64) -> Option<u64> {
        for i in 0..400u64 {
            let mut a = ack(i, 100_000, 100, i % 50 == 0);
            if i >= from {
                a.bytes = bytes;
                a.sent_at = Some(Instant::from_micros(100_000 + (i - from) * 500));
            }
            a.in_flight = in_flight;
            c.on_ack(&a);
            if !c.in_slow_start() {
                return Some(i);
            }
        }
        None
    }

    /// A loss of the last slow-start round's data (within two minimum RTTs
    /// of the exit) is answered from the window slow start grew to, but
    /// never leaves the window above what it was at the loss: from 11 MB
    /// the answer is min(10 MB unsaturated pipe, β × 11 MB) = 7.7 MB, above
    /// the exit's 6 MB trim.
    #[test]
    fn a_loss_right_after_the_full_pipe_exit_never_raises_the_window() {
        let (c, at) = exit_trimmed_below_the_unsaturated_pipe();
        let grown = c.s.pipe_full.expect("ended on the full pipe").1;
        let trimmed = c.window();
        assert!(grown > 10_000_000 && (5_900_000..=6_100_000).contains(&trimmed), "{grown} -> {trimmed}");
        let mut l = c;
        l.on_congestion(Instant::from_millis(at + 50), 4_000_000);
        assert!(l.window() <= trimmed, "a loss raised the window: {trimmed} -> {}", l.window());
        assert!(l.s.ssthresh <= trimmed && l.s.w_max <= trimmed as f64 && l.s.w_est <= trimmed as f64);
        assert!(!l.in_slow_start());
    }

    /// Undoing that loss returns to the exit's state (its trimmed window,
    /// still marked as a full-pipe exit), not to the window the exit trimmed.
    #[test]
    fn undoing_a_loss_right_after_the_exit_keeps_the_exit_trim() {
        let (c, at) = exit_trimmed_below_the_unsaturated_pipe();
        let trimmed = c.window();
        let mut l = c;
        l.on_congestion(Instant::from_millis(at + 50), 4_000_000);
        l.on_spurious();
        assert_eq!(l.window(), trimmed, "undone to the exit's window");
        assert_eq!(l.s.pipe_full, c.s.pipe_full, "the exit's mark is back");
        // Likewise for a later first loss since the exit.
        let mut late = c;
        late.on_congestion(Instant::from_millis(at + 500), 4_000_000);
        late.on_spurious();
        assert_eq!(late.window(), trimmed);
        assert_eq!(late.s.pipe_full, c.s.pipe_full);
    }

    /// The exit keeps the data in flight when it is above the pipe: a
    /// flow that joined a busy bottleneck reads only its share there, but
    /// its window is in use (FAIR depends on it keeping that window).
    /// Reports as in `exit_trimmed_below_the_unsaturated_pipe` (a 6 MB
    /// saturated pipe, the window grown past 10 MB) with 8 MB in flight.
    #[test]
    fn a_joiner_keeps_the_window_it_has_in_flight_at_the_exit() {
        let mut c = Cubic::new(1000);
        assert!(saturate(&mut c, 100, 60_000, 8_000_000).is_some());
        let grown = c.s.pipe_full.expect("ended on the full pipe").1;
        assert!(grown > 10_000_000, "{grown}");
        // (The exit's report also grows the window by the 5 %-per-round
        // floor: 5 % of its 60 KB.)
        let w = c.window();
        assert!((8_000_000..=8_003_000).contains(&w), "the data in flight, not the 6 MB pipe: {w}");
    }

    /// A saturated reading far below the window (reports of 1 B each, 1 ms
    /// apart, for data that left 0.5 ms apart: about 1 kB/s, a pipe of a
    /// few hundred bytes at 100 ms) with nothing reported in flight: the exit's trim keeps two
    /// segments, as every reduction does.
    #[test]
    fn the_exit_trim_keeps_two_segments() {
        let mut c = Cubic::new(1000);
        saturate(&mut c, 10, 1, 0);
        assert!(c.s.pipe_full.is_some(), "ended on the full pipe: {}", c.window());
        assert_eq!(c.window(), 2000);
        assert_eq!(c.ssthresh(), 2000);
    }

    /// Data in flight that comes down to the new window from above and
    /// stays within a sixteenth of it never opens a gap: the ×1 pacing of
    /// the refill ends a round trip after the exit.
    #[test]
    fn a_window_that_stays_full_ends_the_refill_after_a_round_trip() {
        let mut c = Cubic::new(1000);
        for i in 0..120u64 {
            c.on_ack(&ack(i, 100_000, 100, i % 50 == 0));
        }
        c.on_congestion(Instant::from_millis(120), 6_000_000);
        let w = c.window();
        let srtt = Some(Duration::from_millis(100));
        let mut ms = 121;
        let paced = |c: &mut Cubic, ms: u64, in_flight: u64| {
            let mut a = ack(ms, 10_000, 100, false);
            a.in_flight = in_flight;
            c.on_ack(&a);
            c.pacing_rate(srtt)
        };
        assert_eq!(paced(&mut c, ms, 11_000_000), Some(c.window() * 10), "armed while above the window");
        while ms < 210 {
            ms += 10;
            assert_eq!(paced(&mut c, ms, w), Some(c.window() * 10), "full, {ms} ms: within the round trip");
        }
        assert_eq!(paced(&mut c, 221, w), Some(c.window() * 10 * 5 / 4), "a round trip full: headroom back");
    }

    #[test]
    fn slow_start_ends_on_rising_rtt_without_loss() {
        let mut c = Cubic::new(1000);
        let mut rtt = 100;
        for round in 0..40 {
            for i in 0..10 {
                c.on_ack(&ack(round * 100, 2_000, rtt, i == 0));
            }
            if round >= 5 {
                rtt += 20; // the queue builds
            }
        }
        assert!(!c.in_slow_start(), "HyStart++ left slow start; window {}", c.window());
    }

    /// A window's worth of reports per 100 ms round for `rounds` rounds
    /// from `start` ms; returns the window at the end.
    fn rounds(c: &mut Cubic, start: u64, rounds: u64) -> u64 {
        for r in 0..rounds {
            let w = c.window();
            for i in 0..10 {
                c.on_ack(&ack(start + r * 100 + i * 10, w / 10, 100, i == 0));
            }
        }
        c.window()
    }

    #[test]
    fn before_the_first_loss_avoidance_grows_five_percent_a_round() {
        let mut c = Cubic::new(1000);
        c.s.cwnd = 400_000;
        c.s.ssthresh = 400_000; // as a delay-based slow-start exit leaves it
        let w = rounds(&mut c, 0, 10);
        // 1.05^10 = 1.63; the cubic alone (K = 0, 2 s since the epoch)
        // adds 0.4 · 1^3 segments: nothing to speak of.
        assert!(w >= 640_000, "10 rounds without a loss: {w}");
        // Once a loss has found the path's capacity, the cubic alone
        // decides: back towards w_max (K = 7.9 s here), slower.
        c.on_congestion(Instant::from_millis(1000), 0);
        let after = c.window();
        let w = rounds(&mut c, 1000, 10);
        assert!(w < after * 5 / 4, "after a loss: {after} -> {w} in 10 rounds");
    }
}
