//! Protocol counters as `bulk -J` reports them: a context's (retransmissions,
//! RTT, windows, pacing) and the endpoint's (drops, refusals and every
//! limit that was hit), serialisable mirrors of the engine's
//! [`ContextStats`] and [`EndpointStats`]; and a QUIC connection's, from
//! quinn's path statistics.

use serde::{Deserialize, Serialize};
use xtp_proto::{ContextStats, EndpointStats};

/// A context's protocol counters at the end (XTP). A source server sends
/// its own as JSON after the data (`bulk -R`), hence `Deserialize`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextCounters {
    /// Congestion controller.
    pub congestion: String,
    /// User bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// User bytes retransmitted.
    pub retransmitted: u64,
    /// Retransmitted bytes found spurious afterwards.
    pub spurious_retransmitted: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Timeouts found spurious.
    pub spurious_timeouts: u64,
    /// Reports that revealed loss.
    pub loss_reports: u64,
    /// Window reductions.
    pub congestion_events: u64,
    /// Reductions undone.
    pub undone: u64,
    /// Tail-loss probes.
    pub tail_probes: u64,
    /// RTT samples.
    pub rtt_samples: u64,
    /// Congestion window, bytes (`u64::MAX`: none).
    pub cwnd: u64,
    /// Send window, bytes.
    pub send_window: u64,
    /// Smoothed RTT, ms.
    pub srtt_ms: Option<f64>,
    /// Smallest RTT, ms.
    pub min_rtt_ms: Option<f64>,
    /// Retransmission timeout, ms.
    pub rto_ms: f64,
    /// Receive buffer, bytes.
    pub recv_buffer: u64,
    /// Pacing rate, bits per second (`None`: not paced).
    pub pacing_bits_per_second: Option<f64>,
    /// DIAG packets received.
    pub diags_received: u64,
    /// Received bytes dropped on arrival (beyond the window or the
    /// out-of-order bound).
    pub recv_dropped: u64,
}

impl From<ContextStats> for ContextCounters {
    fn from(s: ContextStats) -> Self {
        let ms = |d: Option<xk_time::Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        ContextCounters {
            congestion: s.congestion.to_string(),
            bytes_sent: s.bytes_sent,
            retransmitted: s.retransmitted,
            spurious_retransmitted: s.spurious_retransmitted,
            packets_sent: s.packets_sent,
            timeouts: s.timeouts,
            spurious_timeouts: s.spurious_timeouts,
            loss_reports: s.loss_reports,
            congestion_events: s.congestion_events,
            undone: s.undone,
            tail_probes: s.tail_probes,
            rtt_samples: s.rtt_samples,
            cwnd: s.cwnd,
            send_window: s.send_window,
            srtt_ms: ms(s.srtt),
            min_rtt_ms: ms(s.min_rtt),
            rto_ms: s.rto.as_secs_f64() * 1e3,
            recv_buffer: s.recv_buffer,
            pacing_bits_per_second: s.pacing_rate.map(|r| r as f64 * 8.0),
            diags_received: s.diags_received,
            recv_dropped: s.recv_dropped,
        }
    }
}

/// The endpoint's counters (XTP), every one of [`EndpointStats::fields`]
/// by its name, so a counter added to the engine appears here (and in `-J`)
/// without a second list to keep in step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct EndpointCounters(pub std::collections::BTreeMap<&'static str, u64>);

/// Gauges and plain traffic counts: everything else is a drop, a refusal or
/// a limit that was hit, and is named in the summary when non-zero.
const NOT_A_LIMIT: &[&str] = &[
    "datagrams_in",
    "datagrams_out",
    "diags_sent",
    "accepted",
    "half_open",
    "half_open_bytes",
    "recent_keys",
    "unvalidated_datagrams_out",
    "unvalidated_bytes_out",
];

impl EndpointCounters {
    /// One counter by its engine name (0 if unknown).
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// One line: datagrams in and out, then each drop, refusal and limit
    /// that was hit (or that none was).
    pub fn summary(&self) -> String {
        let hit: Vec<String> = self
            .0
            .iter()
            .filter(|(k, n)| **n > 0 && !NOT_A_LIMIT.contains(k))
            .map(|(k, n)| format!("{} {n}", k.replace('_', " ")))
            .collect();
        let hit = if hit.is_empty() { "no drops, refusals or limits hit".into() } else { hit.join(", ") };
        format!("{} datagrams in, {} out; {hit}", self.get("datagrams_in"), self.get("datagrams_out"))
    }
}

impl From<EndpointStats> for EndpointCounters {
    fn from(s: EndpointStats) -> Self {
        EndpointCounters(s.fields().into_iter().collect())
    }
}

/// A QUIC connection's counters at the end (quinn's path statistics).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuicCounters {
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
    /// Smallest RTT, ms.
    pub min_rtt_ms: f64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Congestion events (window reductions).
    pub congestion_events: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes declared lost (their frames are sent again).
    pub lost_bytes: u64,
    /// UDP datagrams sent and received.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Path MTU in use, bytes.
    pub mtu: u16,
}

impl From<&quinn::ConnectionStats> for QuicCounters {
    fn from(s: &quinn::ConnectionStats) -> Self {
        QuicCounters {
            srtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            min_rtt_ms: s.path.min_rtt.as_secs_f64() * 1e3,
            cwnd: s.path.cwnd,
            congestion_events: s.path.congestion_events,
            packets_sent: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            datagrams_sent: s.udp_tx.datagrams,
            datagrams_received: s.udp_rx.datagrams,
            mtu: s.path.current_mtu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_summary_names_what_was_hit() {
        let mut e =
            EndpointCounters::from(EndpointStats { datagrams_in: 5, datagrams_out: 7, ..Default::default() });
        assert_eq!(e.summary(), "5 datagrams in, 7 out; no drops, refusals or limits hit");
        e.0.insert("half_open_evicted", 3);
        e.0.insert("stale_first", 1);
        e.0.insert("accepted", 9); // a count, not a limit
        assert_eq!(e.summary(), "5 datagrams in, 7 out; half open evicted 3, stale first 1");
        assert_eq!(e.get("stale_first"), 1);
    }
}
