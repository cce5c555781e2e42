//! Congestion control, which XTP 4.0 does not have (digest G12).
//!
//! # Contract
//!
//! A [`CongestionController`] turns what status reports say into a window of
//! bytes the sender may have in flight and, optionally, a pacing rate. The
//! context does the bookkeeping every controller needs and calls in with its
//! conclusions:
//!
//! * [`CongestionController::on_ack`] once per status report that
//!   acknowledged something, with an [`Ack`]: bytes newly acknowledged (or
//!   newly known held, from spans), the RTT sample of the echoed packet,
//!   whether a new round trip began, a delivery-rate sample, and whether the
//!   sender was application-limited (a controller does not grow a window the
//!   sender is not using);
//! * [`CongestionController::on_congestion`] once per loss *episode* (losses
//!   of packets sent before the episode began are not new news);
//! * [`CongestionController::on_timeout`] on a WTIMER expiry;
//! * [`CongestionController::on_spurious`] when the last reduction turns out
//!   to have been caused by delay or reordering, not loss (the answer to the
//!   timeout's probe or to a retransmission shows the original arrived):
//!   the controller restores its state from before it.
//!
//! Controllers: [`Cubic`] (RFC 9438 with HyStart++, RFC 9406; the default),
//! [`Bbr`] (a model-based controller after BBR v1), [`NewReno`] (RFC 5681/6582
//! AIMD) and [`Disabled`] (pure XTP 4.0: only flow and rate control).
//! [`Controller`] holds any of them without a heap allocation and dispatches
//! statically.

mod bbr;
mod cubic;
mod hystart;
mod newreno;

pub use bbr::Bbr;
pub use cubic::Cubic;
pub use hystart::HyStart;
pub use newreno::NewReno;
use xk_time::{Duration, Instant};

use crate::config::Congestion;

/// What one status report told the controller.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    /// When the report arrived.
    pub now: Instant,
    /// Bytes newly acknowledged cumulatively or newly known held (spans).
    pub bytes: u64,
    /// RTT of the packet whose `sync` the report echoes, if it was ours.
    pub rtt: Option<Duration>,
    /// When the packet whose `sync` the report echoes was sent, if it was
    /// ours (what `rtt` is measured from).
    pub sent_at: Option<Instant>,
    /// Smoothed RTT (the sample itself before the first smoothing).
    pub srtt: Duration,
    /// Smallest RTT seen.
    pub min_rtt: Duration,
    /// Bytes in flight after the report.
    pub in_flight: u64,
    /// The report ends a round trip: it echoes a packet sent after the
    /// previous round's last packet.
    pub round_start: bool,
    /// Delivery-rate sample in bytes/s and whether the echoed packet left
    /// while the sender was application-limited.
    pub delivery_rate: Option<(u64, bool)>,
    /// In the round that ended, the sender never had half the window in
    /// flight: growth would be unearned.
    pub app_limited: bool,
}

/// The controller interface the context drives (see the module docs).
pub trait CongestionController {
    /// A report acknowledged something.
    fn on_ack(&mut self, ack: &Ack);
    /// A loss episode began at `now` (called once per episode).
    fn on_congestion(&mut self, now: Instant, in_flight: u64);
    /// A retransmission timeout (WTIMER expiry without an answer).
    fn on_timeout(&mut self, now: Instant);
    /// The last reduction was spurious: undo it.
    fn on_spurious(&mut self);
    /// Bytes allowed in flight (`u64::MAX` = unlimited).
    fn window(&self) -> u64;
    /// Slow-start threshold in bytes, for the monitor (`u64::MAX`: none
    /// yet, or a controller without one).
    fn ssthresh(&self) -> u64 {
        u64::MAX
    }
    /// Pacing rate in bytes/s (`None` = send as the window allows).
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<u64>;
    /// Whether the controller is still probing for the path's capacity.
    fn in_slow_start(&self) -> bool;
    /// Short name for traces and tools.
    fn name(&self) -> &'static str;
    /// Whether the context should spread this controller's window
    /// reductions over the recovery round trip (proportional rate
    /// reduction, RFC 6937) — right for the window-halving controllers; a
    /// model-based one sets its own window in recovery.
    fn reduces_proportionally(&self) -> bool {
        false
    }
}

/// Initial window: 10 segments (RFC 6928).
pub(crate) fn initial_window(mss: u64) -> u64 {
    10 * mss
}

/// The pacer's burst at `rate` bytes/s for packets of `packet` bytes: about
/// a millisecond of data, at least 10 and at most 64 packets — big enough to
/// keep GSO batches large, small enough that the bottleneck queue absorbs
/// it. A model-based window must leave room for a few of them.
pub(crate) fn send_quantum(rate: u64, packet: u64) -> u64 {
    (rate / 1000).clamp(10 * packet, 64 * packet)
}

/// The pacing rate of a window-based controller: the window spread over one
/// smoothed RTT, doubled in slow start (the window doubles per round trip)
/// and 1.25 times in congestion avoidance, so pacing never holds the window
/// back while still breaking up line-rate bursts. Linux's ratios are 200 %
/// and 120 % (`tcp_pacing_ss_ratio`, `tcp_pacing_ca_ratio`; it uses the
/// slow-start ratio only below half of ssthresh): our slow-start factor is
/// Linux's, the 1.25 a little more headroom than its 1.2, not its value.
pub(crate) fn window_pacing(cwnd: u64, srtt: Option<Duration>, slow_start: bool) -> Option<u64> {
    paced(cwnd, srtt, if slow_start { 2.0 } else { 1.25 })
}

/// `gain` windows of `cwnd` bytes per smoothed RTT, in bytes/s.
pub(crate) fn paced(cwnd: u64, srtt: Option<Duration>, gain: f64) -> Option<u64> {
    let srtt_ns = srtt?.as_nanos().max(1);
    Some(((cwnd as f64) * gain * 1e9 / srtt_ns as f64).max(1.0) as u64)
}

/// "Pure XTP 4.0": no congestion window; rate control alone paces.
#[derive(Clone, Copy, Debug, Default)]
pub struct Disabled;

impl CongestionController for Disabled {
    fn on_ack(&mut self, _: &Ack) {}
    fn on_congestion(&mut self, _: Instant, _: u64) {}
    fn on_timeout(&mut self, _: Instant) {}
    fn on_spurious(&mut self) {}
    fn window(&self) -> u64 {
        u64::MAX
    }
    fn pacing_rate(&self, _: Option<Duration>) -> Option<u64> {
        None
    }
    fn in_slow_start(&self) -> bool {
        false
    }
    fn name(&self) -> &'static str {
        "none"
    }
}

/// Any of the controllers, dispatched without a heap allocation or a
/// virtual call on the per-packet path.
// CUBIC is the largest (its state twice over, for the undo of a spurious
// reduction, and HyStart++'s rate buckets): 680 B in a context that
// holds far more, and boxing it would put an allocation in every context's
// creation and a pointer chase in every report — what this enum avoids.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Controller {
    /// CUBIC with HyStart++.
    Cubic(Cubic),
    /// Model-based (BBR-style).
    Bbr(Bbr),
    /// NewReno AIMD.
    NewReno(NewReno),
    /// None.
    Disabled(Disabled),
}

impl Controller {
    /// The controller `which` for segments of `mss` bytes.
    pub fn new(which: Congestion, mss: usize) -> Self {
        let mss = mss.max(1) as u64;
        match which {
            Congestion::Cubic => Controller::Cubic(Cubic::new(mss)),
            Congestion::Bbr => Controller::Bbr(Bbr::new(mss)),
            Congestion::NewReno => Controller::NewReno(NewReno::new(mss)),
            Congestion::Disabled => Controller::Disabled(Disabled),
        }
    }

    /// The segment shrank to `mss` bytes (the peer's `maxdata`, G28).
    pub fn set_mss(&mut self, mss: usize) {
        let mss = mss as u64;
        match self {
            Controller::Cubic(c) => c.set_mss(mss),
            Controller::Bbr(c) => c.set_mss(mss),
            Controller::NewReno(c) => c.set_mss(mss),
            Controller::Disabled(_) => {}
        }
    }
}

/// Runs `$e` with `$c` bound to the concrete controller.
macro_rules! each {
    ($self:expr, $c:ident => $e:expr) => {
        match $self {
            Controller::Cubic($c) => $e,
            Controller::Bbr($c) => $e,
            Controller::NewReno($c) => $e,
            Controller::Disabled($c) => $e,
        }
    };
}

impl CongestionController for Controller {
    fn on_ack(&mut self, ack: &Ack) {
        each!(self, c => c.on_ack(ack))
    }
    fn on_congestion(&mut self, now: Instant, in_flight: u64) {
        each!(self, c => c.on_congestion(now, in_flight))
    }
    fn on_timeout(&mut self, now: Instant) {
        each!(self, c => c.on_timeout(now))
    }
    fn on_spurious(&mut self) {
        each!(self, c => c.on_spurious())
    }
    fn window(&self) -> u64 {
        each!(self, c => c.window())
    }
    fn ssthresh(&self) -> u64 {
        each!(self, c => c.ssthresh())
    }
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<u64> {
        each!(self, c => c.pacing_rate(srtt))
    }
    fn in_slow_start(&self) -> bool {
        each!(self, c => c.in_slow_start())
    }
    fn name(&self) -> &'static str {
        each!(self, c => c.name())
    }
    fn reduces_proportionally(&self) -> bool {
        each!(self, c => c.reduces_proportionally())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A report acknowledging `bytes` at `ms` milliseconds with RTT `rtt_ms`.
    pub(crate) fn ack(ms: u64, bytes: u64, rtt_ms: u64, round_start: bool) -> Ack {
        let rtt = Duration::from_millis(rtt_ms);
        Ack {
            now: Instant::from_millis(ms),
            bytes,
            rtt: Some(rtt),
            sent_at: Some(Instant::from_millis(ms.saturating_sub(rtt_ms))),
            srtt: rtt,
            min_rtt: rtt,
            in_flight: 0,
            round_start,
            delivery_rate: None,
            app_limited: false,
        }
    }

    #[test]
    fn dispatch_and_names() {
        for (which, name) in [
            (Congestion::Cubic, "cubic"),
            (Congestion::Bbr, "bbr"),
            (Congestion::NewReno, "newreno"),
            (Congestion::Disabled, "none"),
        ] {
            let c = Controller::new(which, 1000);
            assert_eq!(c.name(), name);
            if which == Congestion::Disabled {
                assert_eq!(c.window(), u64::MAX);
            } else {
                assert_eq!(c.window(), 10_000, "{name}: initial window of 10 segments");
            }
        }
    }

    /// The peer's smaller `maxdata` (G28) reaches the controller: the
    /// initial window is ten of the new segments and the floor after a
    /// timeout counts in them too (a 1,400-byte floor on a 178-byte path
    /// would be eight packets, not two).
    #[test]
    fn a_smaller_segment_rescales_the_window() {
        for which in [Congestion::Cubic, Congestion::Bbr, Congestion::NewReno] {
            let mut c = Controller::new(which, 1400);
            c.set_mss(178);
            assert_eq!(c.window(), 1780, "{}: ten segments of 178", c.name());
            c.on_timeout(Instant::from_secs(1));
            let floor = if which == Congestion::Bbr { 4 * 178 } else { 2 * 178 };
            assert_eq!(c.window(), floor, "{}: the floor counts in the new segment", c.name());
        }
    }
}
