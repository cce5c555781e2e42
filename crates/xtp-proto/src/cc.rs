//! Congestion control, which XTP 4.0 does not have (digest G12).
//!
//! A [`CongestionController`] turns acknowledgements and loss reports into a
//! window of bytes the sender may have in flight. [`NewReno`] is an AIMD
//! controller in the style of RFC 6582/5681: slow start, congestion avoidance,
//! one halving per loss episode. [`Disabled`] is "pure 4.0": no limit beyond
//! flow and rate control.

use xk_time::{Duration, Instant};

/// The controller interface the context drives.
pub trait CongestionController: Send {
    /// `bytes` newly acknowledged (cumulatively or by spans) at `now`.
    fn on_ack(&mut self, now: Instant, bytes: u64, srtt: Option<Duration>);
    /// Loss detected at `now` for data sent no later than `sent_before`; only
    /// the first report of an episode reduces the window.
    fn on_loss(&mut self, now: Instant, lost_seq: u64, highest_sent: u64);
    /// A retransmission timeout (WTIMER expiry without an answer).
    fn on_timeout(&mut self, now: Instant);
    /// Bytes allowed in flight (`u64::MAX` = unlimited).
    fn window(&self) -> u64;
    /// Short name for traces.
    fn name(&self) -> &'static str;
}

/// "Pure XTP 4.0": no congestion window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Disabled;

impl CongestionController for Disabled {
    fn on_ack(&mut self, _: Instant, _: u64, _: Option<Duration>) {}
    fn on_loss(&mut self, _: Instant, _: u64, _: u64) {}
    fn on_timeout(&mut self, _: Instant) {}
    fn window(&self) -> u64 {
        u64::MAX
    }
    fn name(&self) -> &'static str {
        "none"
    }
}

/// AIMD with slow start (NewReno-like).
#[derive(Clone, Copy, Debug)]
pub struct NewReno {
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Sequence number that ends the current recovery episode.
    recover: Option<u64>,
    acked_in_ca: u64,
}

impl NewReno {
    /// A controller for segments of `mss` bytes; initial window 10 segments
    /// (RFC 6928).
    pub fn new(mss: usize) -> Self {
        let mss = mss.max(1) as u64;
        NewReno { mss, cwnd: 10 * mss, ssthresh: u64::MAX, recover: None, acked_in_ca: 0 }
    }
}

impl CongestionController for NewReno {
    fn on_ack(&mut self, _now: Instant, bytes: u64, _srtt: Option<Duration>) {
        if self.cwnd < self.ssthresh {
            // Slow start counts acknowledged bytes (RFC 3465). No per-report cap:
            // XTP reports cover many packets (one per status request), so
            // TCP's "2 MSS per ACK" would turn slow start into a linear ramp.
            self.cwnd = self.cwnd.saturating_add(bytes);
        } else {
            self.acked_in_ca += bytes;
            if self.acked_in_ca >= self.cwnd {
                self.acked_in_ca -= self.cwnd;
                self.cwnd += self.mss;
            }
        }
    }

    fn on_loss(&mut self, _now: Instant, lost_seq: u64, highest_sent: u64) {
        if self.recover.is_some_and(|r| lost_seq < r) {
            return; // same episode
        }
        self.recover = Some(highest_sent);
        self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh;
        self.acked_in_ca = 0;
    }

    fn on_timeout(&mut self, _now: Instant) {
        self.ssthresh = (self.cwnd / 2).max(2 * self.mss);
        self.cwnd = 2 * self.mss;
        self.recover = None;
        self.acked_in_ca = 0;
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn name(&self) -> &'static str {
        "newreno"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aimd_shape() {
        let mut c = NewReno::new(1000);
        assert_eq!(c.window(), 10_000);
        c.on_ack(Instant::ZERO, 10_000, None);
        assert_eq!(c.window(), 20_000, "slow start grows by the bytes acknowledged");
        c.on_loss(Instant::ZERO, 5_000, 50_000);
        assert_eq!(c.window(), 10_000);
        c.on_loss(Instant::ZERO, 20_000, 60_000);
        assert_eq!(c.window(), 10_000, "one reduction per episode");
        c.on_ack(Instant::ZERO, 10_000, None);
        assert_eq!(c.window(), 11_000, "congestion avoidance: +1 MSS per window");
        c.on_loss(Instant::ZERO, 50_001, 90_000);
        assert_eq!(c.window(), 5_500);
        c.on_timeout(Instant::ZERO);
        assert_eq!(c.window(), 2_000);
    }
}
