//! What the kernel's TCP knows of a connection (`TCP_INFO`): smoothed RTT,
//! congestion window and retransmissions, for `bulk --transport tcp`'s
//! interval lines and end counters, read the way `ss -ti` and iperf3 read
//! them; and the trailer in which the server's source sends its own after
//! the data (`bulk -R`), since a TCP stream has no other place for them.
//!
//! The option is declared with nix's own declaration macro, so the system
//! call stays inside nix and this crate keeps `unsafe` forbidden; the
//! structure is libc's (the fields every Linux since 2.6 fills).

use std::net::TcpStream;

use nix::sys::socket::{getsockopt, sockopt};
use serde::{Deserialize, Serialize};
// The macro calls itself and its helper by their bare names.
use nix::{getsockopt_impl, sockopt_impl};

sockopt_impl!(
    /// `getsockopt(SOL_TCP, TCP_INFO)`.
    TcpInfoOpt,
    GetOnly,
    libc::SOL_TCP,
    libc::TCP_INFO,
    libc::tcp_info
);

/// A connection's state at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct TcpInfo {
    /// Smoothed round-trip time, ms.
    pub srtt_ms: f64,
    /// Congestion window, bytes (segments times the sending MSS).
    pub cwnd: u64,
    /// Segments retransmitted since the connection opened.
    pub total_retrans: u64,
    /// The sending MSS, bytes.
    pub mss: u64,
}

/// A sending connection's counters at the end (kernel TCP).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// The kernel's congestion controller (`cubic`, `bbr`, …).
    pub congestion: String,
    /// Bytes the application wrote.
    pub bytes_written: u64,
    /// Segments retransmitted.
    pub retransmitted_segments: u64,
    /// Sending MSS, bytes.
    pub mss: u64,
    /// Smoothed RTT, ms.
    pub srtt_ms: f64,
    /// Congestion window, bytes.
    pub cwnd: u64,
}

impl TcpCounters {
    /// `s`'s counters now, `written` bytes having been written to it.
    pub(crate) fn of(s: &TcpStream, written: u64) -> Option<TcpCounters> {
        let i = read(s)?;
        let congestion = getsockopt(s, sockopt::TcpCongestion)
            .map_or_else(|_| "?".into(), |c| c.to_string_lossy().into_owned());
        Some(TcpCounters {
            congestion,
            bytes_written: written,
            retransmitted_segments: i.total_retrans,
            mss: i.mss,
            srtt_ms: i.srtt_ms,
            cwnd: i.cwnd,
        })
    }
}

/// The end of a source's stream when the client asked for its counters:
/// the counters' JSON, its length (4 bytes, big-endian), then this.
pub(crate) const TRAILER_MAGIC: &[u8; 8] = b"XTPCNTRS";

/// Most bytes a trailer takes (the JSON is a few hundred).
pub(crate) const TRAILER_MAX: usize = 4096;

/// `c` as a trailer, for the end of the stream.
pub(crate) fn trailer(c: &TcpCounters) -> Vec<u8> {
    let mut v = serde_json::to_vec(c).unwrap_or_default();
    v.truncate(TRAILER_MAX - 12);
    let len = v.len() as u32;
    v.extend_from_slice(&len.to_be_bytes());
    v.extend_from_slice(TRAILER_MAGIC);
    v
}

/// A trailer at the end of `tail` (the stream's last bytes): the counters
/// and the trailer's length, to take off the data count.
pub(crate) fn split_trailer(tail: &[u8]) -> Option<(TcpCounters, usize)> {
    let body = tail.strip_suffix(TRAILER_MAGIC)?;
    let (rest, len) = body.split_at_checked(body.len().checked_sub(4)?)?;
    let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
    let json = rest.get(rest.len().checked_sub(len)?..)?;
    Some((serde_json::from_slice(json).ok()?, len + 12))
}

/// The kernel's view of `s`; `None` where it cannot be read.
pub(crate) fn read(s: &TcpStream) -> Option<TcpInfo> {
    let i = getsockopt(s, TcpInfoOpt).ok()?;
    let mss = u64::from(i.tcpi_snd_mss);
    Some(TcpInfo {
        srtt_ms: f64::from(i.tcpi_rtt) / 1000.0,
        cwnd: u64::from(i.tcpi_snd_cwnd) * mss,
        total_retrans: u64::from(i.tcpi_total_retrans),
        mss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailer_is_found_at_the_end_of_the_stream_and_only_there() {
        let c = TcpCounters {
            congestion: "cubic".into(),
            bytes_written: 5,
            retransmitted_segments: 2,
            mss: 1448,
            srtt_ms: 1.5,
            cwnd: 14480,
        };
        let mut stream = vec![0x5au8; 100];
        let t = trailer(&c);
        stream.extend_from_slice(&t);
        assert_eq!(split_trailer(&stream), Some((c, t.len())));
        assert_eq!(split_trailer(&stream[..stream.len() - 1]), None);
        assert_eq!(split_trailer(&[0x5a; 50]), None);
        assert_eq!(split_trailer(b"XTPCNTRS"), None, "too short for a length");
    }

    #[test]
    fn a_loopback_connection_has_an_rtt_and_a_window() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let i = read(&c).expect("TCP_INFO on a connected socket");
        assert!(i.mss > 0 && i.cwnd >= i.mss, "{i:?}");
        assert!(i.srtt_ms >= 0.0 && i.srtt_ms < 1000.0, "{i:?}");
        assert_eq!(i.total_retrans, 0);
    }
}
