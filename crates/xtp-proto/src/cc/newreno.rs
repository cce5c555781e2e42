//! NewReno: AIMD with slow start (RFC 5681, RFC 6582), for comparison.

use xk_time::{Duration, Instant};

use super::{Ack, CongestionController, initial_window, window_pacing};

/// AIMD with slow start.
#[derive(Clone, Copy, Debug)]
pub struct NewReno {
    mss: u64,
    s: State,
    /// The state before the last reduction, for [`CongestionController::on_spurious`].
    saved: Option<State>,
}

#[derive(Clone, Copy, Debug)]
struct State {
    cwnd: u64,
    ssthresh: u64,
    acked_in_ca: u64,
}

impl NewReno {
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
        NewReno {
            mss,
            s: State { cwnd: initial_window(mss), ssthresh: u64::MAX, acked_in_ca: 0 },
            saved: None,
        }
    }
}

impl CongestionController for NewReno {
    fn on_ack(&mut self, ack: &Ack) {
        if ack.app_limited {
            return;
        }
        let s = &mut self.s;
        if s.cwnd < s.ssthresh {
            // Slow start counts acknowledged bytes (RFC 3465). No per-report
            // cap: one XTP report covers many packets (one per status
            // request), so TCP's "2 MSS per ACK" would make the ramp linear.
            s.cwnd = s.cwnd.saturating_add(ack.bytes);
        } else {
            s.acked_in_ca += ack.bytes;
            while s.acked_in_ca >= s.cwnd {
                s.acked_in_ca -= s.cwnd;
                s.cwnd += self.mss;
            }
        }
    }

    fn on_congestion(&mut self, _now: Instant, _in_flight: u64) {
        self.saved = Some(self.s);
        let s = &mut self.s;
        s.ssthresh = (s.cwnd / 2).max(2 * self.mss);
        s.cwnd = s.ssthresh;
        s.acked_in_ca = 0;
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.saved = Some(self.s);
        let s = &mut self.s;
        s.ssthresh = (s.cwnd / 2).max(2 * self.mss);
        s.cwnd = 2 * self.mss;
        s.acked_in_ca = 0;
    }

    fn on_spurious(&mut self) {
        if let Some(old) = self.saved.take() {
            self.s.cwnd = self.s.cwnd.max(old.cwnd);
            self.s.ssthresh = self.s.ssthresh.max(old.ssthresh);
        }
    }

    fn window(&self) -> u64 {
        self.s.cwnd
    }
    fn ssthresh(&self) -> u64 {
        self.s.ssthresh
    }

    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<u64> {
        window_pacing(self.s.cwnd, srtt, self.in_slow_start())
    }

    fn in_slow_start(&self) -> bool {
        self.s.cwnd < self.s.ssthresh
    }

    fn reduces_proportionally(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "newreno"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::tests::ack;

    #[test]
    fn aimd_shape_and_undo() {
        let mut c = NewReno::new(1000);
        assert_eq!(c.window(), 10_000);
        c.on_ack(&ack(0, 10_000, 100, false));
        assert_eq!(c.window(), 20_000, "slow start grows by the bytes acknowledged");
        c.on_congestion(Instant::ZERO, 0);
        assert_eq!(c.window(), 10_000);
        c.on_ack(&ack(0, 10_000, 100, false));
        assert_eq!(c.window(), 11_000, "congestion avoidance: +1 MSS per window");
        c.on_timeout(Instant::ZERO);
        assert_eq!(c.window(), 2_000);
        c.on_spurious();
        assert_eq!(c.window(), 11_000, "a spurious timeout is undone");
        let mut limited = ack(0, 50_000, 100, false);
        limited.app_limited = true;
        c.on_ack(&limited);
        assert_eq!(c.window(), 11_000, "no growth while application-limited");
    }
}
