//! The intake budget: how many datagrams from unvalidated sources a server
//! with peer lanes reads per second while validated peers have traffic.
//!
//! Peer lanes ([`crate::lanes`]) keep a validated client's datagrams out of
//! the kernel's drops at a flooded shared socket, but not out of the
//! server's CPU: every spoofed FIRST the loop reads is parsed, admitted,
//! answered and later shed, and on a machine with few cores that work is
//! taken from the clients the server already serves. Measured before this
//! budget (issue #13, FLOOD: 292,000 spoofed FIRSTs/s at a server feeding a
//! bulk paced at 1 Gbit/s, two cores): the server read and answered 59,000
//! FIRSTs a second and the bulk kept 78 % of its goodput; at 20,000 FIRSTs/s
//! it kept 100 %.
//!
//! So validated traffic comes first. While some lane has carried a datagram
//! in the last [`BUSY_WINDOW`], the shared socket is read only when the
//! budget holds a whole batch ([`crate::batch::BATCH`]), and each read is
//! charged the datagrams it returned from peers that are not validated
//! (validated peers left on the shared socket at the lane limit share it,
//! uncharged — though under a flood they wait with it); when it does not, the shared socket leaves the
//! epoll set until it does (otherwise its level-triggered readiness would
//! turn the wait into a spin), and the kernel drops what overflows its
//! buffer — in the flooder's time, not ours. With no lane traffic the
//! shared socket is read without limit: a server that serves no one has
//! nothing better to do than to admit newcomers. New clients compete with
//! the flood for the budget, which is the price of not telling them apart
//! (they are told apart once validated).
//!
//! The budget is a token bucket in datagrams ([`xtp_proto::rate::TokenBucket`],
//! the one the protocol paces with). Sans-I/O: the caller passes the time.

use xk_time::{Duration, Instant};
use xtp_proto::rate::TokenBucket;

use crate::batch::BATCH;

/// Default budget, datagrams per second from unvalidated sources while
/// validated peers have traffic: a fifth to a third of what one core here
/// admits under a flood, and above the measured rate at which a flood
/// costs a paced 1 Gbit/s bulk nothing (20,000 FIRSTs/s).
pub const DEFAULT_UNVALIDATED_RATE: u64 = 20_000;

/// How long after a lane's last datagram validated traffic counts as
/// present.
pub const BUSY_WINDOW: Duration = Duration::from_millis(100);

/// What the budget did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntakeCounters {
    /// Datagrams read from the shared socket.
    pub shared_read: u64,
    /// Times the shared socket was set aside because the budget was spent
    /// (the limit named `--unvalidated-rate`).
    pub deferred: u64,
}

/// The budget of one driver.
pub(crate) struct Intake {
    /// None: no limit.
    bucket: Option<TokenBucket>,
    /// Validated traffic counts as present until then.
    busy_until: Option<Instant>,
    /// The shared socket is set aside until then.
    paused_until: Option<Instant>,
    counters: IntakeCounters,
}

impl Intake {
    /// `per_s` datagrams a second while validated peers have traffic; 0: no
    /// limit.
    pub(crate) fn new(per_s: u64) -> Self {
        let depth = (2 * BATCH as u64).max(per_s / 50);
        Intake {
            bucket: (per_s > 0).then(|| TokenBucket::new(per_s, depth, Instant::ZERO)),
            busy_until: None,
            paused_until: None,
            counters: IntakeCounters::default(),
        }
    }

    /// A lane carried `n` datagrams at `now`.
    pub(crate) fn lanes_read(&mut self, now: Instant, n: usize) {
        if n > 0 {
            self.busy_until = Some(now + BUSY_WINDOW);
        }
    }

    /// Whether the shared socket may be read at `now`. When it may not, it
    /// stays set aside until [`Intake::resume_at`].
    pub(crate) fn may_read(&mut self, now: Instant) -> bool {
        let Some(bucket) = self.bucket.as_mut() else { return true };
        if self.busy_until.is_none_or(|t| now >= t) {
            self.paused_until = None;
            return true;
        }
        let at = bucket.ready_at(now, BATCH);
        if at <= now {
            self.paused_until = None;
            true
        } else {
            if self.paused_until.is_none() {
                self.counters.deferred += 1;
            }
            self.paused_until = Some(at);
            false
        }
    }

    /// Charges a read of `read` datagrams, `unvalidated` of them from peers
    /// not validated.
    pub(crate) fn charge(&mut self, now: Instant, read: usize, unvalidated: usize) {
        self.counters.shared_read += read as u64;
        if let Some(b) = self.bucket.as_mut() {
            b.spend(now, unvalidated);
        }
    }

    /// When a set-aside shared socket may be read again (None: it is not
    /// set aside).
    pub(crate) fn resume_at(&self) -> Option<Instant> {
        self.paused_until
    }

    pub(crate) fn counters(&self) -> IntakeCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under a flood that fills every read (a full batch each time) beside
    /// busy lanes, the shared socket is read at the budget's rate over a
    /// second, plus at most the bucket's depth.
    #[test]
    fn a_flood_beside_busy_lanes_is_read_at_the_budget() {
        let mut i = Intake::new(20_000);
        let mut now = Instant::ZERO;
        let mut read = 0u64;
        while now < Instant::from_secs(1) {
            i.lanes_read(now, 1);
            if i.may_read(now) {
                i.charge(now, BATCH, BATCH);
                read += BATCH as u64;
            } else {
                assert!(i.resume_at().unwrap() > now);
            }
            now += Duration::from_micros(20);
        }
        assert!((20_000..=20_000 + 400 + BATCH as u64).contains(&read), "{read}");
        assert!(i.counters().deferred > 100);
    }

    /// Without lane traffic, or with no limit, every read is allowed.
    #[test]
    fn idle_lanes_or_no_limit_read_everything() {
        for (rate, busy) in [(20_000, false), (0, true)] {
            let mut i = Intake::new(rate);
            let mut now = Instant::ZERO;
            for _ in 0..10_000 {
                if busy {
                    i.lanes_read(now, 1);
                }
                assert!(i.may_read(now));
                i.charge(now, BATCH, BATCH);
                now += Duration::from_micros(20);
            }
            assert_eq!(i.counters().deferred, 0);
        }
    }

    /// The budget binds only until the lanes' last datagram is
    /// [`BUSY_WINDOW`] old.
    #[test]
    fn the_budget_ends_with_the_lane_traffic() {
        let mut i = Intake::new(1_000);
        i.lanes_read(Instant::ZERO, 5);
        while i.may_read(Instant::ZERO) {
            i.charge(Instant::ZERO, BATCH, BATCH);
        }
        let later = Instant::ZERO + BUSY_WINDOW;
        assert!(i.may_read(later), "no lane traffic for BUSY_WINDOW: unlimited");
    }
}
