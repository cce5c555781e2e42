//! How a client application reaches a server: over UDP (directly or through
//! a running `xpress emulate` relay) or over raw IP protocol 36.

use std::net::{Ipv4Addr, SocketAddr};

use xk_driver::clock::time_seed;
use xk_driver::driver::{Driver, DriverConfig, RawDriver, UdpDriver, WaitMode};

/// The path a client takes to its server.
#[derive(Clone, Debug, Default)]
pub struct PathConfig {
    /// Do not use UDP GSO/GRO.
    pub no_offload: bool,
    /// Send to this `xpress emulate` relay instead of the server itself (the
    /// relay forwards to the server it was started with).
    pub via: Option<SocketAddr>,
    /// XTP over IP protocol 36 from this local address (root only).
    pub raw: Option<Ipv4Addr>,
    /// Spin instead of sleeping while waiting.
    pub busy_poll: bool,
    /// Write every XTP packet sent and received to this pcap file.
    pub pcap: Option<std::path::PathBuf>,
}

/// The driver and wait settings of `busy_poll` and `no_offload`.
pub fn driver_config(busy_poll: bool, no_offload: bool) -> DriverConfig {
    DriverConfig {
        wait: if busy_poll { WaitMode::BusyPoll } else { WaitMode::Blocking },
        offload: !no_offload,
        ..DriverConfig::default()
    }
}

/// The driver a client runs on.
pub(crate) enum ClientDriver {
    Udp(UdpDriver),
    Raw(RawDriver),
}

impl PathConfig {
    /// Refuses what cannot work before anything is opened: port 0 as a
    /// destination (nothing listens there; over raw IP the port is not
    /// used), a relay at port 0, a relay with raw IP.
    pub(crate) fn check(&self, to: SocketAddr) -> Result<(), String> {
        if self.raw.is_some() && self.via.is_some() {
            return Err(
                "--via and --raw: the emulator relays UDP; run raw IP through `xpress netns` instead".into(),
            );
        }
        if self.raw.is_none() && to.port() == 0 {
            return Err(format!("--to {to}: port 0 is not a port anything listens on"));
        }
        if let Some(v) = self.via
            && v.port() == 0
        {
            return Err(format!("--via {v}: port 0 is not a port anything listens on"));
        }
        Ok(())
    }

    /// The largest XTP packet towards `to` (`EndpointConfig::max_packet`:
    /// the route's MTU less IPv4 and UDP, at most the engine's default) and
    /// the route's MTU; the default and `None` when the kernel cannot say.
    /// Through a relay (`--via`) it is the route to the relay: the
    /// emulated link's MTU is the relay's to enforce.
    pub fn max_packet(&self, to: SocketAddr) -> (usize, Option<usize>) {
        let dst = self.via.unwrap_or(to);
        match xk_driver::path_mtu::route_mtu(dst.ip()) {
            Ok(mtu) => (xk_driver::path_mtu::max_packet_for_mtu(mtu), Some(mtu)),
            Err(_) => (crate::bulk::default_packet(), None),
        }
    }

    /// The endpoint settings of a client towards `to`: the driver's client
    /// defaults with the route's packet size. A route whose MTU is below
    /// IPv4's 576-byte minimum is a slow link (packet radio, a serial
    /// line): there the 3 s connect timeout gets 10 s, as kernel TCP's
    /// connect in `bulk`. On packet-radio-9600 the initiator's first
    /// window (13 FIRSTs of 210 bytes: 13 x 238 B at 9,600 bit/s, 2.6 s
    /// before the channel's framing and key-up) holds the half-duplex
    /// channel before the server's answer can key up, and 3 s
    /// ended every XTP run with "no answer" while the answer was queued.
    fn endpoint(&self, to: SocketAddr) -> xtp_proto::EndpointConfig {
        let (max_packet, mtu) = self.max_packet(to);
        let mut ep = xtp_proto::EndpointConfig { max_packet, ..xk_driver::api::client_config() };
        if mtu.is_some_and(|m| m < 576) {
            ep.connect_timeout = Some(xk_time::Duration::from_secs(10));
        }
        ep
    }

    /// The driver and the address to send to for the server `to`.
    pub(crate) fn open(&self, to: SocketAddr) -> Result<(ClientDriver, SocketAddr), String> {
        if self.raw.is_some() && self.via.is_some() {
            return Err(
                "--via and --raw: the emulator relays UDP; run raw IP through `xpress netns` instead".into(),
            );
        }
        let dc = driver_config(self.busy_poll, self.no_offload);
        match self.raw {
            Some(ip) => {
                let to = match to.ip() {
                    std::net::IpAddr::V4(v4) => SocketAddr::from((v4, 0)),
                    std::net::IpAddr::V6(_) => return Err(format!("--to {to}: --raw supports IPv4 only")),
                };
                let mut d = Driver::bind_raw(ip, self.endpoint(to), time_seed(), dc)
                    .map_err(|e| format!("raw IP 36 on {ip}: {e}"))?;
                if let Some(p) = &self.pcap {
                    crate::capture::install(&mut d, p, Some(to))?;
                }
                Ok((ClientDriver::Raw(d), to))
            }
            None => {
                let dst = self.via.unwrap_or(to);
                let local = crate::addr::any_for(dst);
                let mut d =
                    UdpDriver::bind_with(local, self.endpoint(dst), time_seed(), dc).map_err(|e| {
                        let hint = if e.raw_os_error() == Some(nix::libc::EAFNOSUPPORT) {
                            " (IPv6 is disabled on this host)"
                        } else {
                            ""
                        };
                        format!("bind {local} to reach {dst}: {e}{hint}")
                    })?;
                if let Some(p) = &self.pcap {
                    crate::capture::install(&mut d, p, Some(dst))?;
                }
                Ok((ClientDriver::Udp(d), dst))
            }
        }
    }
}

/// After a context of ours closed: sends what the endpoint still has
/// queued (the last acknowledgement of the peer's close) and answers the
/// peer's retransmissions for a while, so the server sees a graceful end
/// even though this process is about to exit (TCP's TIME_WAIT, shortened:
/// at most `max(100 ms, 3 RTT)`, 2 s at most, or until no context is left).
pub(crate) fn linger<X: xk_driver::transport::Transport>(d: &mut Driver<X>, rtt: Option<xk_time::Duration>) {
    use xk_time::Duration;
    let _ = d.flush();
    let span = (rtt.unwrap_or_default() * 3).max(Duration::from_millis(100)).min(Duration::from_secs(2));
    let end = d.now() + span;
    while d.endpoint().context_count() > 0 && d.now() < end {
        if d.turn(Duration::from_millis(10)).is_err() {
            return;
        }
        while d.endpoint().poll_event().is_some() {}
    }
}
