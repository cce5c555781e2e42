//! HyStart++ (RFC 9406): leave slow start when the round trip time starts
//! to grow, before the queue overflows.
//!
//! Each round the smallest RTT sample is kept. Once a round has at least
//! `N_RTT_SAMPLE` samples and its minimum exceeds the previous round's by
//! `clamp(last/8, 4 ms, 16 ms)`, the sender enters *conservative slow start*
//! (growth divided by 4). If the RTT falls back below the level that triggered
//! it, slow start resumes (the increase was noise); after `CSS_ROUNDS` rounds
//! it becomes congestion avoidance — or at once, our deviation from the RFC,
//! when a whole round's minimum has risen again by the threshold above the
//! level that started CSS (the queue keeps growing: not noise).

use xk_time::{Duration, Instant};

use super::Ack;

const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// Shortest pause between reports that breaks a train (Linux: 2 ms).
const TRAIN_GAP_MIN: Duration = Duration::from_millis(2);
/// Bounds of the bucket over which the report rate is measured: long enough
/// that one report delayed by a scheduling hiccup (a millisecond or so on a
/// loaded host) cannot read as a rate much above the bottleneck's, short
/// enough to fit in the busy period of a queue of a few hundred packets.
const ACK_RATE_BUCKET_MIN: Duration = Duration::from_millis(2);
const ACK_RATE_BUCKET_MAX: Duration = Duration::from_millis(10);
/// Reports a bucket must hold besides the one that opened it: a rate read
/// from one or two report gaps is a packet pair, and compressed reports make
/// packet pairs read high.
const ACK_RATE_BUCKET_REPORTS: u32 = 8;

/// What the controller should do after a report.
/// How much a round's minimum RTT must rise to count (RFC 9406 §4.2).
fn threshold(rtt: Duration) -> Duration {
    (rtt / 8).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Ordinary slow start: grow by the bytes acknowledged.
    SlowStart,
    /// Conservative slow start: grow by a quarter of them.
    Conservative,
    /// Leave slow start now (set ssthresh to the window).
    Exit,
}

/// HyStart++ state of one slow start.
#[derive(Clone, Copy, Debug, Default)]
pub struct HyStart {
    last_round_min: Option<Duration>,
    round_min: Option<Duration>,
    samples: u32,
    /// Set in conservative slow start: the round minimum that triggered it.
    css_baseline: Option<Duration>,
    css_rounds: u32,
    /// Start of the current round's unbroken train of reports (None once a
    /// gap broke it).
    train_start: Option<Instant>,
    /// When the last report arrived.
    last_report: Option<Instant>,
    /// The current ack-rate bucket (see [`HyStart::ack_rate`]).
    bucket: Option<Bucket>,
    /// The last three buckets, newest last (rate 0: none yet).
    recent: [Done; 3],
    /// Highest median of three consecutive buckets this slow start saw,
    /// bytes/s.
    peak_ack_rate: u64,
    /// The same over the triples that showed the bottleneck saturated
    /// (see [`HyStart::saturated_rate`]).
    peak_saturated_rate: u64,
    /// The median rate of the last three buckets when each of them showed
    /// the bottleneck saturated, 0 otherwise (see [`HyStart::pipe_full`]).
    saturated_now: u64,
}

/// An ack-rate bucket being filled: when it opened, the bytes and reports
/// since, and the send times of the packets its first and latest reports
/// echoed (the data those reports acknowledge left between them).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    start: Instant,
    bytes: u64,
    reports: u32,
    sent_from: Option<Instant>,
    sent_to: Option<Instant>,
}

/// A completed bucket: its rate (bytes/s), how long its reports took to
/// arrive and how long the data they acknowledge took to leave (ns; 0 when
/// the reports echoed no packet of ours).
#[derive(Clone, Copy, Debug, Default)]
struct Done {
    rate: u64,
    ack_ns: u64,
    send_ns: u64,
}

/// Reports that arrive this much more slowly than the data they acknowledge
/// left show a queue growing at the bottleneck: it was busy all along, so
/// their rate is its rate, not a lower bound on it. A slow-start burst that
/// overruns the bottleneck reads up to 2 (its pacing gain); the pacer's
/// bursts (at most 64 packets, under a millisecond) blur one bucket's
/// 2-10 ms by less than that.
const SATURATED_NUM: u64 = 5;
const SATURATED_DEN: u64 = 4;

impl HyStart {
    /// Feeds one report during slow start; returns the phase to apply.
    pub fn on_ack(&mut self, ack: &Ack) -> Phase {
        self.measure_ack_rate(ack);
        // The report train (Linux's HyStart "ACK train", in its paced form):
        // reports that keep arriving without a pause for a whole minimum RTT
        // since the round began mean the bottleneck was busy all that time —
        // the window has reached the path's BDP. With pacing at twice the
        // window per RTT, an unsaturated round's reports arrive within half an
        // RTT and then pause, so the train breaks; and the queue drains in
        // that pause, which hides the rise in RTT from the delay test until
        // the window is twice the BDP (measured: 3.9 MB on a 1.1 MB path, a
        // 1,000-packet queue overflowed by 1,800 packets).
        let gap = (ack.min_rtt / 8).max(TRAIN_GAP_MIN);
        if ack.round_start {
            self.train_start = Some(ack.now);
        } else if self.last_report.is_some_and(|t| ack.now.saturating_since(t) > gap) {
            self.train_start = None;
        }
        self.last_report = Some(ack.now);
        if let Some(t0) = self.train_start
            && ack.min_rtt > Duration::ZERO
            && ack.now.saturating_since(t0) >= ack.min_rtt
        {
            // The window is kept (ssthresh = cwnd, as Linux does). It may be
            // up to three times the BDP by now, but a cut to what the train
            // delivered (tried: twice it) mistakes a shared bottleneck for
            // our own: a flow joining a busy path delivers only its share
            // per minimum RTT, and the cut left it at a third of a kernel
            // CUBIC flow's rate for the whole of FAIR's 30 s (Jain 0.71 -
            // 0.73 in 3 of 6 runs; without the cut 0.86 - 0.98).
            *self = HyStart::default();
            return Phase::Exit;
        }
        if ack.round_start {
            self.last_round_min = self.round_min;
            self.round_min = None;
            self.samples = 0;
            if let Some(base) = self.css_baseline {
                self.css_rounds += 1;
                // A whole round whose RTT rose again by the threshold above
                // the baseline confirms the queue is growing: leave now. (RFC
                // 9406 waits out CSS_ROUNDS; with a deep buffer its 25 % growth
                // per round overshoots ×3 and overflows it — measured: 1.9 MB
                // window on a 281 KB path with a 1,000-packet queue.)
                let risen = self.last_round_min.is_some_and(|m| m >= base + threshold(base));
                if self.css_rounds >= CSS_ROUNDS || risen {
                    *self = HyStart::default();
                    return Phase::Exit;
                }
            }
        }
        if let Some(rtt) = ack.rtt {
            self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
            self.samples += 1;
        }
        match (self.css_baseline, self.round_min, self.last_round_min) {
            (None, Some(cur), Some(last))
                if self.samples >= N_RTT_SAMPLE && cur >= last + threshold(last) =>
            {
                self.css_baseline = Some(cur);
                self.css_rounds = 0;
            }
            (Some(base), Some(cur), _) if cur < base => {
                // The delay increase went away: back to slow start.
                self.css_baseline = None;
            }
            _ => {}
        }
        if self.css_baseline.is_some() { Phase::Conservative } else { Phase::SlowStart }
    }

    /// Bytes of growth for `acked` bytes in `phase`.
    pub fn growth(phase: Phase, acked: u64) -> u64 {
        match phase {
            Phase::SlowStart => acked,
            Phase::Conservative => acked / CSS_GROWTH_DIVISOR,
            Phase::Exit => 0,
        }
    }

    /// The rate at which reports acknowledged data, over consecutive
    /// buckets of a sixteenth of the minimum RTT (2-10 ms) holding at least
    /// [`ACK_RATE_BUCKET_REPORTS`] reports.
    fn measure_ack_rate(&mut self, ack: &Ack) {
        let width = (ack.min_rtt / 16).clamp(ACK_RATE_BUCKET_MIN, ACK_RATE_BUCKET_MAX);
        let open = Bucket { start: ack.now, bytes: 0, reports: 0, sent_from: ack.sent_at, sent_to: None };
        let Some(b) = &mut self.bucket else {
            self.bucket = Some(open);
            return;
        };
        b.bytes += ack.bytes;
        b.reports += 1;
        if ack.sent_at.is_some() {
            b.sent_to = ack.sent_at;
        }
        let span = ack.now.saturating_since(b.start);
        if span < width || b.reports < ACK_RATE_BUCKET_REPORTS {
            return;
        }
        let rate = u128::from(b.bytes) * 1_000_000_000 / span.as_nanos().max(1);
        let rate = u64::try_from(rate).unwrap_or(u64::MAX).max(1);
        let send_ns = match (b.sent_from, b.sent_to) {
            (Some(a), Some(z)) => u64::try_from(z.saturating_since(a).as_nanos()).unwrap_or(u64::MAX),
            _ => 0,
        };
        let ack_ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        self.bucket = Some(open);
        self.recent = [self.recent[1], self.recent[2], Done { rate, ack_ns, send_ns }];
        if self.recent[0].rate == 0 {
            return;
        }
        // The median of three: reports held back and released together
        // make one bucket read low and the next high (it starts at the late
        // report and holds the backlog); neither is the bottleneck's rate,
        // and the median of the pair and a neighbour is.
        let mut r = self.recent.map(|d| d.rate);
        r.sort_unstable();
        self.peak_ack_rate = self.peak_ack_rate.max(r[1]);
        // Each of the three, not their sum: a stall on the way back (the
        // receiver or a forwarder descheduled) stretches one bucket as a
        // queue would, and a sum over it and two ordinary buckets reads
        // "saturated" at the rate the sender paced at.
        let saturated = |d: &Done| {
            d.send_ns > 0
                && u128::from(d.ack_ns) * u128::from(SATURATED_DEN)
                    >= u128::from(d.send_ns) * u128::from(SATURATED_NUM)
        };
        if self.recent.iter().all(saturated) {
            self.peak_saturated_rate = self.peak_saturated_rate.max(r[1]);
            self.saturated_now = r[1];
        } else {
            self.saturated_now = 0;
        }
    }

    /// The bottleneck's rate as this slow start's reports showed it,
    /// bytes/s (0 before a bucket completed).
    ///
    /// Reports come back spaced as the bottleneck forwarded the data they
    /// acknowledge; while a queue stands there, at exactly its rate
    /// (packet-pair dispersion, Keshav 1991; the ack-rate estimate of TCP
    /// Westwood). Once a round's paced burst queues at the bottleneck, the
    /// busiest bucket of its reports reads the bottleneck rate. A bucket
    /// can read more only where reports were compressed on the way back
    /// (a delayed report followed by prompt ones); the bucket's width and
    /// report count bound that error, and the caller never lets the
    /// estimate keep a window that overflowed (see `Cubic`). The delivery-rate samples cannot show it: each
    /// spans a round trip, so it reads at most the data in flight per RTT —
    /// and into a queue of a few per cent of the BDP, slow start overflows
    /// with half the BDP in flight or less (a round's burst leaves at twice
    /// the window per RTT; a receive window that opened a round late, less).
    pub fn ack_rate(&self) -> u64 {
        self.peak_ack_rate
    }

    /// The bottleneck's rate from reports that show it saturated, bytes/s
    /// (0 if none did): three consecutive buckets whose reports each arrived
    /// at least 5/4 as slowly as the data they acknowledge had left. The data
    /// queued at the bottleneck all that time, so it was busy and the rate
    /// is its own (or this flow's share of it, on a shared one) — not the
    /// lower bound an unsaturated bucket gives, which reads the rate the
    /// sender paced at.
    pub fn saturated_rate(&self) -> u64 {
        self.peak_saturated_rate
    }

    /// Whether a window of `cwnd` bytes already fills the pipe: the last
    /// three buckets each showed the bottleneck saturated (their reports
    /// arrived at least 5/4 as slowly as the data they acknowledge had
    /// left), and `cwnd` is at least their rate times `min_rtt`. Linux's
    /// HyStart "ACK train" in a form that works under pacing: its train
    /// lasts a minimum RTT only once the window is the BDP *and* the paced
    /// bursts have kept the bottleneck busy for a whole round, by which time
    /// a queue of a quarter of the BDP has overflowed (a round leaves at
    /// twice the window per RTT: its burst queues half the window). The
    /// reports of a burst that overruns the bottleneck show it within a few
    /// buckets, and their rate is the bottleneck's (or this flow's share of
    /// it): a window that holds that rate for a minimum RTT keeps it busy,
    /// and more slow start only builds queue. The caller trims its window to
    /// at most max(pipe, data in flight), not to the pipe alone: on a shared
    /// bottleneck the rate is a share, and a window cut to it keeps a
    /// joining flow at its first share (see the report train above), while
    /// its data in flight is its window in use. Returns that pipe (bytes)
    /// when full; never full without a minimum RTT.
    pub fn pipe_full(&self, cwnd: u64, min_rtt: Duration) -> Option<u64> {
        if self.saturated_now == 0 || min_rtt == Duration::ZERO {
            return None;
        }
        let pipe = u128::from(self.saturated_now) * min_rtt.as_nanos() / 1_000_000_000;
        let pipe = u64::try_from(pipe).unwrap_or(u64::MAX);
        (cwnd >= pipe).then_some(pipe)
    }

    /// Starts over (after a loss ends slow start, or a timeout restarts it).
    pub fn reset(&mut self) {
        *self = HyStart::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::tests::ack;

    #[test]
    fn a_report_train_of_one_min_rtt_ends_slow_start() {
        let mut h = HyStart::default();
        // Paced, unsaturated rounds: reports for half the 100 ms RTT, then a
        // pause: the train breaks, slow start goes on.
        for round in 0..3u64 {
            for i in 0..25u64 {
                let t = round * 100 + i * 2;
                assert_eq!(h.on_ack(&ack(t, 1000, 100, i == 0)), Phase::SlowStart, "t {t}");
            }
        }
        // Saturated: reports every 2 ms for a whole min_rtt since the round
        // began: slow start ends after 50 of them.
        let mut exit = None;
        for i in 0..=60u64 {
            if h.on_ack(&ack(300 + i * 2, 1000, 100, i == 0)) == Phase::Exit {
                exit = Some(i);
                break;
            }
        }
        assert_eq!(exit, Some(50));
    }

    #[test]
    fn rising_rtt_leads_to_exit_after_css_rounds() {
        let mut h = HyStart::default();
        // Round 1: 100 ms. Round 2: still 100 ms.
        for round in 0..2 {
            for i in 0..10 {
                assert_eq!(h.on_ack(&ack(0, 1000, 100, i == 0 && round > 0)), Phase::SlowStart);
            }
        }
        // Round 3: 112 ms ≥ 100 + 12.5? No: threshold is 100/8 = 12.5 ms.
        for i in 0..10 {
            assert_eq!(h.on_ack(&ack(0, 1000, 112, i == 0)), Phase::SlowStart);
        }
        // Round 4: 130 ms ≥ 112 + 14 → conservative after the 8th sample.
        let phases: Vec<Phase> = (0..10).map(|i| h.on_ack(&ack(0, 1000, 130, i == 0))).collect();
        assert_eq!(phases[6], Phase::SlowStart);
        assert_eq!(phases[7], Phase::Conservative);
        // Four more rounds of conservative growth, then exit at the fifth.
        for _ in 0..4 {
            assert_eq!(h.on_ack(&ack(0, 1000, 131, true)), Phase::Conservative);
        }
        assert_eq!(h.on_ack(&ack(0, 1000, 131, true)), Phase::Exit);
    }

    /// Reports acknowledging 10 KB every 200 µs (50 MB/s). One is held back
    /// 1.5 ms on the way, and those behind it queue and arrive together
    /// with it (a FIFO return path): the bucket after the hold reads the
    /// backlog at 1.7 times the rate. The estimate stays within 10 % of
    /// the true rate.
    #[test]
    fn compressed_reports_do_not_inflate_the_ack_rate() {
        let mut h = HyStart::default();
        let held_until = 100 * 200 + 200 + 1_500;
        for i in 0..400u64 {
            let nominal = (i + 1) * 200;
            let at = if i >= 100 { nominal.max(held_until + (i - 100)) } else { nominal };
            // A 20 ms minimum RTT: buckets of 2 ms, ten reports each.
            let mut a = ack(0, 10_000, 20, i == 0);
            a.now = Instant::from_micros(at);
            h.on_ack(&a);
        }
        let true_rate = 50_000_000u64;
        let r = h.ack_rate();
        assert!(r > true_rate * 9 / 10 && r < true_rate * 11 / 10, "estimate {r} B/s against {true_rate}");
    }

    /// Reports 200 µs apart acknowledging 10 KB each (50 MB/s) for data
    /// that left 100 µs apart: a queue grew at the bottleneck all along, so
    /// 50 MB/s is its rate. The same reports for data that left 200 µs apart
    /// (the pacer's rate, nothing queued) are no such measurement.
    #[test]
    fn reports_slower_than_the_sends_measure_a_saturated_bottleneck() {
        for (send_gap_us, saturated) in [(100u64, true), (200, false), (190, false)] {
            let mut h = HyStart::default();
            for i in 0..200u64 {
                let mut a = ack(0, 10_000, 20, i == 0);
                a.now = Instant::from_micros(20_000 + i * 200);
                a.sent_at = Some(Instant::from_micros(i * send_gap_us));
                h.on_ack(&a);
            }
            let r = h.saturated_rate();
            if saturated {
                assert!((49_000_000..=51_000_000).contains(&r), "sent every {send_gap_us} µs: {r} B/s");
            } else {
                assert_eq!(r, 0, "sent every {send_gap_us} µs");
            }
            assert!((49_000_000..=51_000_000).contains(&h.ack_rate()));
        }
    }

    /// Unsaturated reports (spaced as the data left, 200 µs) and one 6 ms
    /// stall on the way back, the backlog released at once behind it: the
    /// stalled bucket reads 4 times slower than its data left, the one
    /// after it faster — not a saturated bottleneck, and the rate the
    /// sender paced at must not pass for the bottleneck's.
    #[test]
    fn a_stall_on_the_way_back_is_not_saturation() {
        let mut h = HyStart::default();
        let stall = (20_000 + 100 * 200, 6_000);
        for i in 0..300u64 {
            let nominal = 20_000 + i * 200;
            let at = if (stall.0..stall.0 + stall.1).contains(&nominal) {
                stall.0 + stall.1 + i % 50
            } else {
                nominal
            };
            let mut a = ack(0, 10_000, 20, i == 0);
            a.now = Instant::from_micros(at);
            a.sent_at = Some(Instant::from_micros(i * 200));
            h.on_ack(&a);
        }
        assert_eq!(h.saturated_rate(), 0);
    }

    /// The full-pipe signal: reports 200 µs apart acknowledging 10 KB each
    /// (50 MB/s) for data that left 100 µs apart — a queue growing at the
    /// bottleneck — with a 20 ms minimum RTT: a 1 MB pipe. A window of
    /// 1.1 MB fills it, one of 0.9 MB does not. It must NOT fire for the
    /// same reports of data that left as they came back (an unsaturated
    /// round: the rate is the pacer's, a lower bound), nor once the reports
    /// that follow a saturated stretch are unsaturated again (stale), nor
    /// without a minimum RTT.
    #[test]
    fn saturated_reports_and_a_window_over_their_pipe_mean_the_pipe_is_full() {
        let feed = |h: &mut HyStart, from: u64, n: u64, send_gap_us: u64| {
            for i in from..from + n {
                // A round every 10 ms: the report train (a whole 20 ms
                // minimum RTT of reports since a round began) never ends
                // slow start here, so it cannot reset what is read.
                let mut a = ack(0, 10_000, 20, i % 50 == 0);
                a.now = Instant::from_micros(20_000 + i * 200);
                a.sent_at = Some(Instant::from_micros(i * send_gap_us));
                h.on_ack(&a);
            }
        };
        let rtt = Duration::from_millis(20);
        let mut h = HyStart::default();
        feed(&mut h, 0, 100, 100);
        let pipe = h.pipe_full(1_100_000, rtt).expect("saturated, window over the pipe");
        assert!((980_000..=1_020_000).contains(&pipe), "pipe {pipe} B");
        assert_eq!(h.pipe_full(900_000, rtt), None, "window under the pipe");
        assert_eq!(h.pipe_full(1_100_000, Duration::ZERO), None, "no minimum RTT");
        // Unsaturated again: the saturated stretch is history.
        feed(&mut h, 100, 100, 200);
        assert_eq!(h.pipe_full(u64::MAX, rtt), None, "stale saturation");
        let mut u = HyStart::default();
        feed(&mut u, 0, 200, 200);
        assert_eq!(u.pipe_full(u64::MAX, rtt), None, "reports spaced as the sends: not saturated");
    }

    #[test]
    fn falling_rtt_resumes_slow_start() {
        let mut h = HyStart::default();
        for i in 0..10 {
            h.on_ack(&ack(0, 1000, 50, i == 0));
        }
        let p: Vec<Phase> = (0..10).map(|i| h.on_ack(&ack(0, 1000, 60, i == 0))).collect();
        assert_eq!(p[9], Phase::Conservative);
        assert_eq!(h.on_ack(&ack(0, 1000, 51, true)), Phase::SlowStart, "RTT back below the baseline");
    }
}
