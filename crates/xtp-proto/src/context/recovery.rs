//! Loss recovery: what was sent when, what the peer's reports say about it,
//! and which holes are lost rather than late.
//!
//! Every packet that takes a fresh `sync` (each data packet and each status
//! request, digest G11) gets a [`Sent`] record, in `sync` order — which is
//! send order. `sync` is carried on the wire as 32 bits; we keep 64 and map an
//! echo back to the nearest value at or below the last one sent. Because no
//! `sync` is ever sent twice, an echo names exactly one transmission: every
//! report gives an unambiguous RTT sample (no Karn's rule needed, no bounded
//! history of requests), and a report whose echo predates a retransmission
//! yet shows the data held proves the retransmission spurious (the Eifel idea,
//! RFC 3522, with `sync` in place of the timestamp).
//!
//! Loss detection is time-based, after RACK (RFC 8985): a report echoing
//! `sync` e says the peer received the packet sent with e. A hole that left
//! *before* e is lost once it has been out for longer than an RTT plus a
//! reordering window (`min_rtt/4`, widened each time a retransmission turns
//! out spurious); until then a timer waits for it. Reordering therefore
//! costs a short wait, not a retransmission and a window reduction.
//!
//! Cost: a record is pushed per packet and popped once, from the front, when
//! the peer holds its data or it is declared lost; lookups are binary
//! searches by `sync`; each report touches only the spans it carries.

use std::collections::{BTreeMap, VecDeque};

use xk_time::{Duration, Instant};

use super::send::SendBuf;

/// One transmission.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    sync: u64,
    time: Instant,
    /// Data range; empty for a status request without data.
    seq: u64,
    end: u64,
    /// Delivery-rate state when it left (draft-cheng-iccrg-delivery-rate-estimation).
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: bool,
    /// A status request only for an RTT sample: nothing waits on its answer.
    optional: bool,
}

/// What a report meant, for the context's congestion and timer decisions.
#[derive(Debug, Default)]
pub(crate) struct ReportInfo {
    /// RTT of the echoed transmission.
    pub(crate) rtt: Option<Duration>,
    /// The echoed transmission arrived while data sent before it had not.
    pub(crate) overtook: bool,
    /// When the echoed transmission left.
    pub(crate) echoed_sent_at: Option<Instant>,
    /// The echo is newer than any before: the peer is alive and answering.
    pub(crate) echo_advanced: bool,
    /// A round trip ended.
    pub(crate) round_start: bool,
    /// `(bytes/s, app-limited)` from the echoed transmission.
    pub(crate) delivery_rate: Option<(u64, bool)>,
    /// Retransmitted bytes the report proves were not needed.
    pub(crate) spurious_bytes: u64,
}

/// What loss detection found.
#[derive(Debug, Default)]
pub(crate) struct Lost {
    /// Bytes newly marked for retransmission.
    pub(crate) bytes: u64,
    /// Send time of the earliest transmission declared lost.
    pub(crate) first_sent: Option<Instant>,
}

pub(crate) struct Recovery {
    log: VecDeque<Sent>,
    /// Records in `log` that are optional status requests.
    optional: usize,
    /// Retransmissions in flight: seq → (end, sync), to recognise spurious ones.
    retx_flight: BTreeMap<u64, (u64, u64)>,
    /// The last `sync` handed out (64-bit; the wire carries the low 32).
    pub(crate) sync: u64,
    /// Newest transmission the peer is known to have received, from a
    /// report that lists what it holds (evidence for loss).
    rack_sync: u64,
    /// Newest transmission any report answered (a TCNTL included): status
    /// requests up to it are answered.
    answered_sync: u64,
    /// Its RTT.
    rack_rtt: Duration,
    /// Reordering window in quarters of `min_rtt`.
    reo_quarters: u32,
    pub(crate) min_rtt: Option<Duration>,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// The round ends when a report echoes this `sync` or later.
    round_end: u64,
    /// When the next hole becomes lost if no report says otherwise.
    pub(crate) loss_timer: Option<Instant>,
}

impl Recovery {
    pub(crate) fn new() -> Self {
        Recovery {
            log: VecDeque::new(),
            optional: 0,
            retx_flight: BTreeMap::new(),
            sync: 0,
            rack_sync: 0,
            answered_sync: 0,
            rack_rtt: Duration::ZERO,
            reo_quarters: 1,
            min_rtt: None,
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent_time: Instant::ZERO,
            round_end: 0,
            loss_timer: None,
        }
    }

    /// A fresh `sync` (0 is skipped on the wire: it means "no echo").
    pub(crate) fn next_sync(&mut self) -> u32 {
        self.sync += 1;
        if self.sync as u32 == 0 {
            self.sync += 1;
        }
        self.sync as u32
    }

    /// Whether transmissions are outstanding (sent, not yet resolved),
    /// optional status requests aside.
    pub(crate) fn outstanding(&self) -> bool {
        self.log.len() > self.optional
    }

    /// Records a status request sent only for an RTT sample: its answer is
    /// used, but no timer waits for it.
    pub(crate) fn on_optional_request(&mut self, now: Instant, seq: u64) {
        self.on_sent(now, seq, seq, false, false);
        if let Some(r) = self.log.back_mut() {
            r.optional = true;
        }
        self.optional += 1;
    }

    fn pop_front(&mut self) -> Option<Sent> {
        let r = self.log.pop_front()?;
        if r.optional {
            self.optional -= 1;
        }
        Some(r)
    }

    /// Records the transmission that just took `sync` (data `[seq, end)`,
    /// empty for a bare status request).
    pub(crate) fn on_sent(&mut self, now: Instant, seq: u64, end: u64, retransmit: bool, app_limited: bool) {
        if self.log.is_empty() {
            // Nothing in flight: delivery-rate intervals start here.
            self.delivered_time = now;
            self.first_sent_time = now;
        }
        self.log.push_back(Sent {
            sync: self.sync,
            time: now,
            seq,
            end,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited,
            optional: false,
        });
        if retransmit && end > seq {
            self.retx_flight.insert(seq, (end, self.sync));
        }
    }

    /// The 64-bit `sync` an echo names, if it is one we sent (32-bit serial
    /// arithmetic: within 2³¹ below the last one; 0 = no echo).
    pub(crate) fn unwrap_echo(&self, echo: u32) -> Option<u64> {
        let back = (self.sync as u32).wrapping_sub(echo);
        (echo != 0 && back < 1 << 31 && u64::from(back) <= self.sync).then(|| self.sync - u64::from(back))
    }

    fn find(&self, sync: u64) -> Option<&Sent> {
        let i = self.log.partition_point(|s| s.sync < sync);
        self.log.get(i).filter(|s| s.sync == sync)
    }

    /// Takes in a report echoing `echo` that acknowledged `newly_acked` bytes;
    /// `covered` are the ranges it newly showed held (from
    /// [`SendBuf::apply_report`]). A report that could not list spans
    /// (`complete` false: a TCNTL) does not count as evidence of loss.
    /// `held_to` is the report's `rseq`: everything below it is held.
    pub(crate) fn on_report(
        &mut self,
        now: Instant,
        echo: Option<u64>,
        held_to: u64,
        newly_acked: u64,
        covered: &[(u64, u64)],
        complete: bool,
    ) -> ReportInfo {
        let mut info = ReportInfo::default();
        // Retransmissions whose data the report shows held: spurious if the
        // report was triggered by a packet sent before the retransmission.
        for &(a, b) in covered {
            while let Some((&s, &(e, sync))) = self.retx_flight.range(..b).next_back() {
                if e <= a {
                    break;
                }
                self.retx_flight.remove(&s);
                if echo.is_some_and(|x| x < sync) {
                    info.spurious_bytes += e.min(b) - s.max(a);
                }
            }
        }
        if newly_acked > 0 {
            self.delivered += newly_acked;
            self.delivered_time = now;
        }
        let Some(echo) = echo else { return info };
        if let Some(p) = self.find(echo).copied() {
            let rtt = now.saturating_since(p.time);
            info.rtt = Some(rtt);
            // Data sent before the echoed transmission is missing: it
            // overtook that data (or the data was lost). See RttEstimator.
            info.overtook = held_to < p.seq;
            info.echoed_sent_at = Some(p.time);
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
            if newly_acked > 0 {
                self.first_sent_time = p.time;
                let send_elapsed = p.time.saturating_since(p.first_sent_time);
                let ack_elapsed = now.saturating_since(p.delivered_time);
                let interval = send_elapsed.max(ack_elapsed).as_nanos();
                let bytes = u128::from(self.delivered - p.delivered);
                if let Some(rate) = (bytes * 1_000_000_000).checked_div(interval) {
                    info.delivery_rate = Some((u64::try_from(rate).unwrap_or(u64::MAX), p.app_limited));
                }
            }
            if echo > self.rack_sync && complete {
                self.rack_rtt = rtt;
            }
        }
        if echo > self.rack_sync && complete {
            self.rack_sync = echo;
        }
        if echo > self.answered_sync {
            self.answered_sync = echo;
            info.echo_advanced = true;
        }
        if echo >= self.round_end {
            info.round_start = true;
            self.round_end = self.sync + 1;
        }
        info
    }

    /// A retransmission turned out spurious: reordering is deeper than the
    /// window assumed. Double it (RFC 8985 steps by one quarter of
    /// `min_rtt` per round; doubling reaches a path whose `min_rtt` is an
    /// outlier — a packet that skipped the queue — in a few episodes); it
    /// never exceeds SRTT.
    pub(crate) fn widen_reordering_window(&mut self) {
        self.reo_quarters = (self.reo_quarters * 2).min(1 << 12);
    }

    /// Resolves transmissions from the oldest: held ones are forgotten, holes
    /// sent before the newest acknowledged transmission and out for longer
    /// than `max(srtt, rack_rtt) + reordering window` are marked for
    /// retransmission. Arms `loss_timer` for the next candidate.
    pub(crate) fn detect_lost(&mut self, now: Instant, srtt: Duration, send: &mut SendBuf) -> Lost {
        let mut lost = Lost::default();
        let reo = (self.min_rtt.unwrap_or(srtt) / 4 * self.reo_quarters).min(srtt);
        let wait = srtt.max(self.rack_rtt) + reo;
        self.loss_timer = None;
        while let Some(&r) = self.log.front() {
            let held = if r.end > r.seq { send.holds(r.seq, r.end) } else { r.sync <= self.answered_sync };
            if held {
                self.pop_front();
                continue;
            }
            if r.sync >= self.rack_sync {
                break; // nothing sent after it is known to have arrived
            }
            let deadline = r.time + wait;
            if now < deadline {
                self.loss_timer = Some(deadline);
                break;
            }
            self.pop_front();
            if let Some(&(_, sync)) = self.retx_flight.get(&r.seq)
                && sync == r.sync
            {
                self.retx_flight.remove(&r.seq);
            }
            let n = send.mark_lost(r.seq, r.end);
            if n > 0 {
                lost.bytes += n;
                lost.first_sent = Some(lost.first_sent.map_or(r.time, |t: Instant| t.min(r.time)));
            }
        }
        lost
    }

    /// Forgets everything (the context ended).
    pub(crate) fn clear(&mut self) {
        self.log.clear();
        self.optional = 0;
        self.retx_flight.clear();
        self.loss_timer = None;
    }

    /// Transmissions remembered (for tests of the memory envelope).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.log.len()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use xtp_wire::Span;

    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// Sends `n` packets of 1000 bytes, one per millisecond from `t0`.
    fn send(r: &mut Recovery, b: &mut SendBuf, n: usize, t0: u64) {
        for i in 0..n {
            let seg = b.next_segment(1000, usize::MAX, u64::MAX, true).unwrap();
            r.next_sync();
            b.on_sent(&seg);
            r.on_sent(ms(t0 + i as u64), seg.seq, seg.seq + seg.data.len() as u64, seg.retransmit, false);
        }
    }

    fn report(r: &mut Recovery, b: &mut SendBuf, now: u64, rseq: u64, spans: &[Span], echo: u64) -> Lost {
        let mut covered = Vec::new();
        let (acked, _) = b.apply_report(rseq, spans, |a, z| covered.push((a, z))).unwrap();
        r.on_report(ms(now), Some(echo), rseq, acked, &covered, true);
        r.detect_lost(ms(now), Duration::from_millis(100), b)
    }

    #[test]
    fn reordered_data_waits_lost_data_is_retransmitted() {
        let mut b = SendBuf::new(false);
        b.write(Bytes::from(vec![0u8; 20_000]), true, None);
        let mut r = Recovery::new();
        send(&mut r, &mut b, 10, 0);
        // At 105 ms a report echoes packet 10 (sync 10): [0, 3000) missing.
        let l = report(&mut r, &mut b, 105, 0, &[Span { left: 3000, right: 10_000 }], 10);
        assert_eq!(l.bytes, 0, "not yet out for an RTT plus the reordering window");
        assert_eq!(
            r.loss_timer,
            Some(ms(124)),
            "100 ms + min_rtt/4 (min_rtt 96 ms: 24 ms) after packet 1 left"
        );
        // Packets 1 and 2 turn up (reordered); 3 does not.
        let l = report(&mut r, &mut b, 110, 2000, &[Span { left: 3000, right: 10_000 }], 10);
        assert_eq!(l.bytes, 0);
        assert_eq!(r.loss_timer, Some(ms(2 + 124)));
        let l = r.detect_lost(ms(126), Duration::from_millis(100), &mut b);
        assert_eq!((l.bytes, l.first_sent), (1000, Some(ms(2))));
        assert_eq!(r.len(), 0, "every record resolved");
        // Retransmit [2000, 3000) as sync 11; a later report echoing 10 that
        // shows it held proves the retransmission spurious.
        send(&mut r, &mut b, 1, 130);
        let mut covered = Vec::new();
        let (acked, _) = b.apply_report(10_000, &[], |a, z| covered.push((a, z))).unwrap();
        let info = r.on_report(ms(140), Some(10), 10_000, acked, &covered, true);
        assert_eq!(info.spurious_bytes, 1000);
    }

    #[test]
    fn a_sample_says_whether_its_packet_overtook_earlier_data() {
        let mut b = SendBuf::new(false);
        b.write(Bytes::from(vec![0u8; 20_000]), true, None);
        let mut r = Recovery::new();
        send(&mut r, &mut b, 10, 0);
        // Packet 10 skipped a delay line: answered at 11 ms, nothing before
        // it held.
        let mut covered = Vec::new();
        let (acked, _) =
            b.apply_report(0, &[Span { left: 9000, right: 10_000 }], |a, z| covered.push((a, z))).unwrap();
        let info = r.on_report(ms(11), Some(10), 0, acked, &covered, true);
        assert_eq!((info.rtt, info.overtook), (Some(Duration::from_millis(2)), true));
        // The rest arrives in order: packet 9 (sent at 8 ms) answers at 548 ms.
        covered.clear();
        let (acked, _) = b.apply_report(10_000, &[], |a, z| covered.push((a, z))).unwrap();
        let info = r.on_report(ms(548), Some(9), 10_000, acked, &covered, true);
        assert_eq!((info.rtt, info.overtook), (Some(Duration::from_millis(540)), false));
    }

    #[test]
    fn echo_unwraps_across_the_32_bit_boundary() {
        let mut r = Recovery::new();
        r.sync = (1 << 32) + 5;
        assert_eq!(r.unwrap_echo(3), Some((1 << 32) + 3));
        assert_eq!(r.unwrap_echo(u32::MAX), Some((1 << 32) - 1));
        assert_eq!(r.unwrap_echo(6), None, "newer than anything sent");
        assert_eq!(r.unwrap_echo(0), None);
        r.sync = 2;
        assert_eq!(r.unwrap_echo(u32::MAX), None, "before the first sync");
    }
}
