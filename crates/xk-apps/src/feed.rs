//! The data a bulk sender writes, and how much of it to keep queued —
//! shared by the client's sender and the server's source (`bulk -R`).
//!
//! The data is a deterministic 1 MiB pattern, generated once and written
//! as shared slices as the send queue drains (bounded memory, no per-chunk
//! work), hashed as it goes only when asked.

use bytes::Bytes;
use sha2::{Digest, Sha256};
use xk_time::Instant;
use xtp_proto::{ContextId, Endpoint};

const PATTERN_LEN: usize = 1 << 20;

/// The 1 MiB pattern every bulk sender writes (XTP, QUIC, both ways).
pub(crate) fn pattern() -> Bytes {
    (0..PATTERN_LEN as u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect::<Vec<u8>>().into()
}

/// What one sending context has written and may still write.
pub(crate) struct Feeder {
    pattern: Bytes,
    /// Bytes written so far.
    pub(crate) written: u64,
    /// Bytes to write in all (`u64::MAX`: until stopped).
    limit: u64,
    /// Runs against a deadline: keep the queue short (see `feed`).
    timed: bool,
    /// Message size (EOM on each), or an unbroken stream.
    piece: Option<usize>,
    sha: Option<Sha256>,
    /// The last write ends a message (so what the source writes after the
    /// data, its counters, starts one of its own), and whether it has.
    end_message: bool,
    message_ended: bool,
}

impl Feeder {
    pub(crate) fn new(limit: u64, timed: bool, piece: Option<usize>, hash: bool) -> Self {
        Feeder {
            pattern: pattern(),
            written: 0,
            limit,
            timed,
            piece,
            sha: hash.then(Sha256::new),
            end_message: false,
            message_ended: false,
        }
    }

    /// The data ends with an EOM. The engine cannot add one to a byte that
    /// has already left (a message is at least one byte), so the last
    /// write carries it: of a byte count, the write that reaches it; of a
    /// timed run, one more byte written when stopped.
    pub(crate) fn ending_the_message(mut self) -> Self {
        self.end_message = true;
        self
    }

    /// Writes what fits the queue bound. Untimed: twice the send window (at
    /// least 8 MiB) stays written but unacknowledged, so a long fat path is
    /// limited by the protocol, not by the caller's loop. Timed: a quarter
    /// window (at least 64 KiB) waits unsent, so what is queued at the
    /// deadline drains in about a round trip, not in seconds (256 KiB took
    /// longer than the 1 s grace at a lossy 4 Mbit/s). Timed counts unsent
    /// bytes, not unacknowledged ones: during a loss recovery the
    /// cumulative acknowledgement stands still for a queue's delay while the
    /// peer keeps reporting data held, and a bound on unacknowledged bytes
    /// then starved the sender (a 45 Mbit/s, 50 ms path with a 1,000-packet
    /// queue sent no new data for 250 ms after each buffer overflow and the
    /// bottleneck idled: 43.1 Mbit/s where kernel TCP kept 43.4).
    pub(crate) fn feed<S: xtp_proto::Subscriber>(
        &mut self,
        ep: &mut Endpoint<S>,
        now: Instant,
        ctx: ContextId,
    ) -> Result<(), String> {
        let window = ep.context_stats(ctx).map_or(0, |s| s.send_window.min(1 << 30));
        type Queued<S> = fn(&Endpoint<S>, ContextId) -> u64;
        let (bound, queued): (u64, Queued<S>) = if self.timed {
            ((window / 4).max(64 << 10), Endpoint::unsent_bytes)
        } else {
            ((2 * window).max(8 * PATTERN_LEN as u64), Endpoint::unacked_bytes)
        };
        let piece = self.piece.unwrap_or(PATTERN_LEN);
        // Stopped (or the count reached) without an EOM on the last write:
        // one more byte carries it.
        let extra = u64::from(self.end_message && !self.message_ended && self.written >= self.limit);
        let limit = self.limit + extra;
        while self.written < limit && queued(ep, ctx) < bound {
            let mut n = (limit - self.written).min(piece as u64) as usize;
            // Timed, a stream is cut to the room left: a 1 MiB chunk on a
            // path moving a few Mbit/s would outlast the deadline by seconds.
            if self.timed && self.piece.is_none() {
                n = n.min((bound - queued(ep, ctx)) as usize).max(1);
            }
            let start = (self.written % PATTERN_LEN as u64) as usize;
            let start = if start + n > PATTERN_LEN { 0 } else { start };
            let chunk = self.pattern.slice(start..start + n);
            let last = self.written + n as u64 >= limit;
            let eom = self.piece.is_some() || (self.end_message && last);
            match ep.write(now, ctx, chunk.clone(), eom, None) {
                Ok(()) => self.message_ended |= eom,
                // The engine's send buffer is full: feed again next turn
                // (the chunk was not queued, so it is not hashed either).
                Err(xtp_proto::WriteError::WouldBlock) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
            if let Some(sha) = self.sha.as_mut() {
                sha.update(&chunk);
            }
            self.written += n as u64;
        }
        Ok(())
    }

    /// All written (or stopped), the message ended if asked.
    pub(crate) fn done(&self) -> bool {
        self.written >= self.limit && (self.message_ended || !self.end_message)
    }

    /// Writes nothing more (but the byte that ends the message, if one
    /// is owed).
    pub(crate) fn stop(&mut self) {
        self.limit = self.limit.min(self.written);
    }

    /// The SHA-256 of what was written, if hashing.
    pub(crate) fn digest(&mut self) -> Option<[u8; 32]> {
        self.sha.take().map(|s| s.finalize().into())
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request a `bulk -R` client sends to the source service: 13 bytes,
/// `t` (time, milliseconds) or `n` (bytes), the amount, the message size
/// (0: a stream). Upper case (`T`, `N`) also asks for the sender's
/// counters after the data (XTP: a message tagged [`COUNTERS_TAG`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SourceRequest {
    /// Milliseconds (`timed`) or bytes.
    pub(crate) amount: u64,
    /// Send for a time rather than a byte count.
    pub(crate) timed: bool,
    /// Message size, 0 for a stream.
    pub(crate) length: u32,
    /// Send the source's counters once the data is acknowledged.
    pub(crate) counters: bool,
}

/// The BTAG of the message that carries a source's counters (JSON of
/// [`ContextCounters`](crate::bulk::ContextCounters)) after its data:
/// "XTPCNTRS".
pub(crate) const COUNTERS_TAG: u64 = u64::from_be_bytes(*b"XTPCNTRS");

impl SourceRequest {
    pub(crate) const LEN: usize = 13;

    pub(crate) fn encode(&self) -> Vec<u8> {
        let kind = if self.timed { b't' } else { b'n' };
        let mut v = vec![if self.counters { kind.to_ascii_uppercase() } else { kind }];
        v.extend_from_slice(&self.amount.to_be_bytes());
        v.extend_from_slice(&self.length.to_be_bytes());
        v
    }

    pub(crate) fn decode(b: &[u8]) -> Option<SourceRequest> {
        if b.len() != Self::LEN || !matches!(b[0], b't' | b'n' | b'T' | b'N') {
            return None;
        }
        Some(SourceRequest {
            timed: b[0].eq_ignore_ascii_case(&b't'),
            amount: u64::from_be_bytes(b[1..9].try_into().ok()?),
            length: u32::from_be_bytes(b[9..13].try_into().ok()?),
            counters: b[0].is_ascii_uppercase(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_requests_round_trip_and_refuse_garbage() {
        for counters in [false, true] {
            let r = SourceRequest { amount: 3000, timed: true, length: 1400, counters };
            assert_eq!(SourceRequest::decode(&r.encode()), Some(r));
        }
        assert_eq!(SourceRequest::decode(b"x123456789012"), None);
        assert_eq!(SourceRequest::decode(b"n12"), None);
    }

    /// A timed sender through a recovery: a 45 Mbit/s, 50 ms path with a
    /// 1,000-packet queue, which a lone CUBIC flow overflows about once
    /// every five seconds. The queue holds five bandwidth-delay products,
    /// so the window's cut never idles the bottleneck — unless the writer
    /// stops: while the first loss is repaired the cumulative
    /// acknowledgement stands still for the queue's delay (~270 ms), and a
    /// feeder that bounded unacknowledged bytes wrote nothing for 250 ms
    /// and the bottleneck idled (99.0 % over these 8 s; 99.99 % now).
    #[test]
    fn a_timed_feeder_keeps_the_sender_supplied_through_a_recovery() {
        use xk_netemu::LinkParams;
        use xk_time::Duration;
        use xtp_proto::{ContextConfig, EndpointConfig, Event};
        use xtp_testkit::{App, Host, Pair};

        /// The sender's feeder and the receiver's count, on the test kit's host.
        struct Side {
            feeder: Option<(Feeder, ContextId)>,
            delivered: u64,
        }
        impl App for Side {
            fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
                if let Some((f, ctx)) = &mut self.feeder {
                    f.feed(ep, now, *ctx).unwrap();
                }
                while let Some(ev) = ep.poll_event() {
                    if let Event::Readable { ctx } = ev {
                        while let Some(c) = ep.read(now, ctx) {
                            self.delivered += c.data.len() as u64;
                        }
                    }
                }
            }
        }
        let side = |seed| {
            Host::new(Endpoint::new(EndpointConfig::default(), seed), Side { feeder: None, delivered: 0 })
        };
        let rate_bps = 45_000_000;
        let fwd = LinkParams {
            delay: Duration::from_millis(25),
            rate_bps,
            limit_packets: 1000,
            ..LinkParams::default()
        };
        let back = LinkParams { delay: Duration::from_millis(25), rate_bps, ..LinkParams::default() };
        let Pair { mut sim, client: tx, server: rx, server_addr: raddr, .. } =
            xtp_testkit::pair(41, side(2), side(1), fwd, back);
        sim.node_mut(rx).ep.listen(7, ContextConfig::stream()).unwrap();
        let ctx = sim.node_mut(tx).ep.connect(Instant::ZERO, raddr, 7, ContextConfig::stream()).unwrap();
        sim.node_mut(tx).feeder = Some((Feeder::new(u64::MAX, true, None, false), ctx));
        sim.node_mut(tx).with(|side, ep| side.poll(ep, Instant::ZERO));
        // Counted from 2 s (after slow start) to 10 s: the first overflow
        // comes at about 4 s, the second at about 9 s.
        sim.run_until(Instant::from_secs(2), u64::MAX, |_| false).unwrap();
        let from = sim.node(rx).delivered;
        let events_before = sim.node(tx).ep.context_stats(ctx).unwrap().congestion_events;
        sim.run_until(Instant::from_secs(10), u64::MAX, |_| false).unwrap();
        let bits = (sim.node(rx).delivered - from) as f64 * 8.0;
        let stats = sim.node(tx).ep.context_stats(ctx).unwrap();
        // Data's share of the link: 1,400 of each 1,432-byte packet.
        let capacity = rate_bps as f64 * 8.0 * 1400.0 / 1432.0;
        let recoveries = stats.congestion_events - events_before;
        eprintln!(
            "seed 41: {:.2} % of the bottleneck's data capacity, {recoveries} recoveries in the counted 8 s, {} B retransmitted",
            bits / capacity * 100.0,
            stats.retransmitted
        );
        assert!(
            recoveries >= 2,
            "the counted span holds {recoveries} overflows, not the two it is about: {stats:?}"
        );
        assert!(
            bits >= 0.995 * capacity,
            "goodput {:.2} % of the bottleneck's data capacity over 8 s through {recoveries} recoveries (seed 41)",
            bits / capacity * 100.0,
        );
    }
}
