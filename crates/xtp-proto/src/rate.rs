//! Rate control (digest §5.6): a token bucket of depth BURST filled at RATE.
//!
//! The 3.x design refilled BURST bytes every RTIMER tick of BURST/RATE seconds;
//! a continuously filled bucket gives the same long-run rate and the same
//! largest burst without a timer, and tells the caller exactly when the next
//! packet may go.

use xk_time::{Duration, Instant};

/// BURST when the configuration leaves it 0: four packets of `mss`, or one
/// millisecond of `rate` (bytes/s) if that is more. A real driver wakes for
/// the bucket tens of microseconds late; a bucket of four packets refills
/// in 45 µs at 1 Gbit/s, so every late wake-up threw tokens away and
/// `xpress bulk --rate 1gbit` moved 755 Mbit/s (2 Gbit/s: 1.27) on loopback
/// (975 Mbit/s and 1.95 Gbit/s with this rule).
pub(crate) fn default_burst(rate: u64, mss: usize) -> u64 {
    (4 * mss as u64).max(rate / 1000)
}

/// A token bucket in bytes.
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    /// Bytes per second; 0 = unlimited.
    rate: u64,
    /// Bucket depth in bytes.
    burst: u64,
    /// Tokens in nano-bytes (bytes × 10⁹) to keep integer precision.
    tokens_nb: u128,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket. `rate` 0 means no limit.
    pub fn new(rate: u64, burst: u64, now: Instant) -> Self {
        TokenBucket {
            rate,
            burst: burst.max(1),
            tokens_nb: u128::from(burst.max(1)) * 1_000_000_000,
            last: now,
        }
    }

    /// The configured rate (bytes/s, 0 = unlimited).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Changes rate and depth, keeping the tokens (capped by the new depth).
    pub fn set(&mut self, rate: u64, burst: u64, now: Instant) {
        self.refill(now);
        self.rate = rate;
        self.burst = burst.max(1);
        self.tokens_nb = self.tokens_nb.min(u128::from(self.burst) * 1_000_000_000);
    }

    fn refill(&mut self, now: Instant) {
        if now <= self.last {
            return;
        }
        let dt = u128::from(now.saturating_since(self.last).as_nanos() as u64);
        self.last = now;
        let cap = u128::from(self.burst) * 1_000_000_000;
        self.tokens_nb = (self.tokens_nb + dt * u128::from(self.rate)).min(cap);
    }

    /// Whether `bytes` may be sent now; if so, the tokens are taken. A packet
    /// larger than the bucket may go when the bucket is full (and empties it).
    pub fn try_take(&mut self, now: Instant, bytes: usize) -> bool {
        if self.rate == 0 {
            return true;
        }
        self.refill(now);
        let need = (bytes as u128).min(u128::from(self.burst)) * 1_000_000_000;
        if self.tokens_nb >= need {
            self.tokens_nb -= need;
            true
        } else {
            false
        }
    }

    /// Takes `n` tokens, or all there are if fewer: for a cost known only
    /// after the fact (a read of however many datagrams were waiting), after
    /// [`TokenBucket::ready_at`] said the usual cost could be met.
    pub fn spend(&mut self, now: Instant, n: usize) {
        if self.rate == 0 {
            return;
        }
        self.refill(now);
        self.tokens_nb = self.tokens_nb.saturating_sub(n as u128 * 1_000_000_000);
    }

    /// When `bytes` can next be taken (now, if already possible).
    pub fn ready_at(&mut self, now: Instant, bytes: usize) -> Instant {
        if self.rate == 0 {
            return now;
        }
        self.refill(now);
        let need = (bytes as u128).min(u128::from(self.burst)) * 1_000_000_000;
        if self.tokens_nb >= need {
            return now;
        }
        let missing = need - self.tokens_nb;
        let ns = missing.div_ceil(u128::from(self.rate));
        now + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_run_rate_and_burst() {
        let mut b = TokenBucket::new(1_000_000, 10_000, Instant::ZERO);
        // The first burst goes at once.
        assert!((0..10).all(|_| b.try_take(Instant::ZERO, 1000)));
        assert!(!b.try_take(Instant::ZERO, 1000));
        assert_eq!(b.ready_at(Instant::ZERO, 1000), Instant::from_millis(1));
        // Over 10 s exactly 10 MB more pass.
        let mut now = Instant::ZERO;
        let mut sent = 0u64;
        while now < Instant::from_secs(10) {
            now = b.ready_at(now, 1000);
            if now > Instant::from_secs(10) {
                break;
            }
            assert!(b.try_take(now, 1000));
            sent += 1000;
        }
        assert_eq!(sent, 10_000_000);
    }

    /// Bytes a sender moves in one second through `bucket` when it wakes
    /// `late` after each moment the bucket could serve a 1,432-byte packet
    /// and then sends all it may.
    fn late_sender(mut bucket: TokenBucket, late: Duration) -> u64 {
        let (mut now, mut sent) = (Instant::ZERO, 0u64);
        while now < Instant::from_secs(1) {
            now = bucket.ready_at(now, 1432) + late;
            while bucket.try_take(now, 1432) {
                sent += 1432;
            }
        }
        sent
    }

    #[test]
    fn the_default_burst_absorbs_a_late_driver_at_a_gigabit() {
        let rate = 125_000_000; // 1 Gbit/s
        let late = Duration::from_micros(60);
        let default = late_sender(TokenBucket::new(rate, default_burst(rate, 1400), Instant::ZERO), late);
        let four = late_sender(TokenBucket::new(rate, 4 * 1400, Instant::ZERO), late);
        assert!(default as f64 >= 0.99 * rate as f64, "default burst: {default} B/s of {rate}");
        // Four packets alone lose what refills while the driver is late.
        assert!((four as f64) < 0.6 * rate as f64, "four packets: {four} B/s of {rate}");
        // Slow rates keep XTP's four-packet bursts.
        assert_eq!(default_burst(1_000_000, 1400), 5600);
    }
}
