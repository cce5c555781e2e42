//! What the kernel's TCP knows of a connection (`TCP_INFO`): smoothed RTT,
//! congestion window and retransmissions, for `bulk --transport tcp`'s
//! interval lines, read the way `ss -ti` and iperf3 read them.
//!
//! The option is declared with nix's own declaration macro, so the system
//! call stays inside nix and this crate keeps `unsafe` forbidden; the
//! structure is libc's (the fields every Linux since 2.6 fills).

use std::net::TcpStream;

use nix::sys::socket::getsockopt;
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
