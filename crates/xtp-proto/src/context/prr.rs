//! Proportional rate reduction (RFC 6937) for the window-based controllers.
//!
//! When a loss episode halves the window, the data in flight is still the
//! old window. Without PRR the sender stops until half the window has been
//! reported and only then sends again: half a round trip of silence per
//! loss, which at random loss is several per cent of goodput (measured in
//! the simulator: 86–98 % of the Reno response function, `tests/paths.rs`).
//! PRR instead spreads the reduction over the recovery round trip: for
//! every byte the peer reports delivered it lets out `ssthresh / flight`
//! bytes (retransmissions first), so the window reaches its new size when
//! recovery ends, with no pause and no burst. Once in flight has fallen
//! below the new window (several losses in one round), it grows back by
//! slow-start reduction bound: at most what was delivered plus one packet.
//!
//! Recovery ends when the cumulative acknowledgement passes everything
//! that was sent before the episode began.

/// One recovery's accounting, in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prr {
    /// Send sequence at the episode's start: recovery ends once the peer
    /// holds everything below it.
    recover: u64,
    /// Data in flight when the episode began (RFC 6937's RecoverFS).
    recover_fs: u64,
    /// Bytes the peer reported delivered since then.
    delivered: u64,
    /// Bytes sent since then (new data and retransmissions).
    out: u64,
    /// Bytes delivered by the latest report.
    last_delivered: u64,
}

impl Prr {
    /// Recovery begins: `nxt` is the send sequence, `flight` the data that
    /// was in flight before the loss was marked.
    pub(crate) fn new(nxt: u64, flight: u64) -> Self {
        Prr { recover: nxt, recover_fs: flight.max(1), delivered: 0, out: 0, last_delivered: 0 }
    }

    /// A report delivered `bytes`; returns false once recovery is over (the
    /// cumulative acknowledgement `una` reached the recovery point).
    pub(crate) fn on_delivered(&mut self, bytes: u64, una: u64) -> bool {
        self.delivered += bytes;
        self.last_delivered = bytes;
        una < self.recover
    }

    /// `bytes` left (data, new or resent).
    pub(crate) fn on_sent(&mut self, bytes: u64) {
        self.out += bytes;
    }

    /// Bytes that may be sent now, for the reduced window `ssthresh`, with
    /// `in_flight` bytes outstanding and packets of `mss` bytes.
    pub(crate) fn allowance(&self, ssthresh: u64, in_flight: u64, mss: u64) -> u64 {
        let room = self.room(ssthresh, in_flight, mss);
        if self.out == 0 {
            // The first retransmission goes out at once, whatever the
            // arithmetic says (a loss found by timer has delivered nothing).
            room.max(mss)
        } else {
            room
        }
    }

    fn room(&self, ssthresh: u64, in_flight: u64, mss: u64) -> u64 {
        if in_flight > ssthresh {
            // Proportional part: out ≈ delivered × ssthresh / RecoverFS.
            let target = (self.delivered as u128 * ssthresh as u128).div_ceil(self.recover_fs as u128);
            (target as u64).saturating_sub(self.out)
        } else {
            // Slow-start reduction bound: rebuild toward ssthresh no faster
            // than the peer drains, plus one packet.
            let bound = self.delivered.saturating_sub(self.out).max(self.last_delivered) + mss;
            (ssthresh - in_flight).min(bound)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    /// A halving from 20 packets: over the round in which the old flight is
    /// reported, about 10 packets go out, evenly — not 0 for half the round
    /// and then a burst.
    #[test]
    fn sends_half_of_what_is_delivered_while_above_the_new_window() {
        let mut p = Prr::new(20 * MSS, 20 * MSS);
        let ssthresh = 10 * MSS;
        let mut flight = 20 * MSS;
        let mut sent_per_report = Vec::new();
        for _ in 0..10 {
            // Each report delivers two packets.
            assert!(p.on_delivered(2 * MSS, 0));
            flight -= 2 * MSS;
            let room = p.allowance(ssthresh, flight, MSS);
            p.on_sent(room);
            flight += room;
            sent_per_report.push(room / MSS);
        }
        // One packet per two delivered while above the new window; the
        // slow-start bound finishes the last step.
        assert_eq!(sent_per_report.iter().sum::<u64>(), 10, "{sent_per_report:?}");
        assert!(sent_per_report.iter().all(|&n| n <= 2), "no burst: {sent_per_report:?}");
        assert_eq!(sent_per_report[..8], [1; 8], "{sent_per_report:?}");
        assert_eq!(flight, ssthresh, "the window reaches ssthresh as the old flight drains");
    }

    #[test]
    fn rebuilds_no_faster_than_delivery_below_the_new_window() {
        let mut p = Prr::new(20 * MSS, 20 * MSS);
        p.on_sent(MSS);
        // Many losses: in flight fell to 4 packets, ssthresh is 10.
        p.on_delivered(MSS, 0);
        assert_eq!(p.allowance(10 * MSS, 4 * MSS, MSS), 2 * MSS, "delivered + one packet");
        assert_eq!(p.allowance(10 * MSS, 10 * MSS, MSS), 0);
    }

    #[test]
    fn ends_when_the_recovery_point_is_acknowledged() {
        let mut p = Prr::new(5000, 5000);
        assert!(p.on_delivered(1000, 4999));
        assert!(!p.on_delivered(1000, 5000));
    }

    #[test]
    fn the_first_retransmission_is_never_held() {
        let p = Prr::new(20 * MSS, 20 * MSS);
        assert_eq!(p.allowance(10 * MSS, 19 * MSS, MSS), MSS);
    }
}
