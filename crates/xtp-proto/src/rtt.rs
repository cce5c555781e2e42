//! Round-trip estimation and the retransmission timeout, RFC 6298 style.
//!
//! XTP 4.0 control segments carry no timestamp (digest §5.3), so samples come
//! from our own send time of the packet whose `sync` a reply echoes. Only
//! replies to a `sync` sent once (not re-sent by the synchronising handshake)
//! give samples, the equivalent of Karn's rule.

use xk_time::Duration;

/// Smoothed RTT, variation and the derived timeout.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rto: Duration,
    max_rto: Duration,
    /// Exponential back-off multiplier exponent (reset on a fresh sample).
    backoff: u32,
    latest: Duration,
    /// A sample from a transmission that did not overtake earlier data
    /// has arrived; until then the timeout stays at least the initial 1 s.
    in_order_seen: bool,
}

impl RttEstimator {
    /// An estimator with the RFC 6298 initial timeout of 1 s, clamped to
    /// `[min_rto, max_rto]`.
    pub fn new(min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            min_rto,
            max_rto,
            backoff: 0,
            latest: Duration::ZERO,
            in_order_seen: false,
        }
    }

    /// Feeds one sample. `overtook`: the echoed transmission arrived while
    /// data sent before it had not (reordered past it, or that data lost).
    pub fn on_sample(&mut self, rtt: Duration, overtook: bool) {
        self.in_order_seen |= !overtook;
        self.latest = rtt;
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// Doubles the timeout (after an expiry), up to `max_rto`.
    pub fn back_off(&mut self) {
        self.backoff = (self.backoff + 1).min(16);
    }

    /// The smoothed RTT, if any sample arrived.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The latest sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The current retransmission timeout (WTIMER).
    pub fn rto(&self) -> Duration {
        let base = match self.srtt {
            None => Duration::from_secs(1),
            // The variation term never below the minimum timeout (Linux's
            // rule, not RFC 6298's floor on the sum): with a sample per
            // report, rttvar collapses on a steady path, and a probing
            // controller that lifts the RTT by a quarter in one round trip
            // (BBR's 1.25 gain at 500 ms: +125 ms) would time out spuriously.
            Some(srtt) => srtt + (self.rttvar * 4).max(self.min_rto),
        };
        // Until one sample came from a packet that did not overtake earlier
        // data, the timeout stays at least the initial 1 s: a packet that
        // skipped a 270 ms delay line (netem-style reordering) answered in
        // 2 ms, and a 200 ms timeout then fired on a 540 ms path (the
        // property sweep's seed 817). Every sample still counts for loss
        // detection, whose mistakes are undone; a timeout is not.
        let base = if self.in_order_seen { base } else { base.max(Duration::from_secs(1)) };
        // Clamp first, then back off: a doubled timeout must really double.
        let rto = base.clamp(self.min_rto, self.max_rto);
        rto.saturating_mul(1 << self.backoff.min(16)).min(self.max_rto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_backs_off() {
        let mut r = RttEstimator::new(Duration::from_millis(200), Duration::from_secs(60));
        assert_eq!(r.rto(), Duration::from_secs(1));
        for _ in 0..50 {
            r.on_sample(Duration::from_millis(100), false);
        }
        let rto = r.rto();
        // A steady path: srtt plus the minimum as the variation term.
        assert!(rto >= Duration::from_millis(300) && rto < Duration::from_millis(350), "{rto:?}");
        r.back_off();
        assert_eq!(r.rto(), rto * 2);
        r.on_sample(Duration::from_millis(100), false);
        assert_eq!(r.rto(), rto);
    }

    #[test]
    fn the_timeout_stays_at_one_second_until_an_in_order_sample() {
        let mut r = RttEstimator::new(Duration::from_millis(200), Duration::from_secs(60));
        r.on_sample(Duration::from_millis(2), true);
        assert_eq!(r.rto(), Duration::from_secs(1), "a packet that overtook: not yet trusted");
        r.on_sample(Duration::from_millis(540), false);
        let rto = r.rto();
        assert!(rto > Duration::from_millis(540) && rto < Duration::from_secs(1), "{rto:?}");
    }
}
