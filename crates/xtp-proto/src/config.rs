//! Endpoint and context configuration.

use xk_time::Duration;
use xtp_wire::Service;

/// Which congestion controller a context uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// AIMD with slow start (the default).
    NewReno,
    /// "Pure XTP 4.0": none.
    Disabled,
}

/// Per-association settings, chosen by the initiator (and by a listener for
/// the contexts it accepts).
#[derive(Clone, Debug)]
pub struct ContextConfig {
    /// Service type (digest §5.9); sets the option defaults below.
    pub service: Service,
    /// Send DATA with NOCHECK (checksum over the header only).
    pub nocheck: bool,
    /// Ask the receiver to report gaps at once (FASTNAK).
    pub fastnak: bool,
    /// No error control (NOERR): nothing is retransmitted, gaps are reported.
    pub noerr: bool,
    /// Ignore the peer's `alloc` (NOFLOW).
    pub noflow: bool,
    /// Largest user data per packet.
    pub mss: usize,
    /// Receive buffer in bytes: how far `alloc` runs ahead of what the
    /// application has read.
    pub recv_buffer: usize,
    /// Our outgoing rate limit in bytes/s (0 = none) and burst.
    pub out_rate: u32,
    /// Burst for `out_rate`, bytes.
    pub out_burst: u32,
    /// The rate we accept from the peer (`inrate` of our traffic segment).
    pub in_rate: u32,
    /// Burst for `in_rate`, bytes.
    pub in_burst: u32,
    /// Priority for SORT (larger = more urgent); `None` = SORT not set.
    pub sort: Option<u16>,
    /// Congestion control.
    pub congestion: Congestion,
    /// Ask for a status report at least every this many data packets.
    pub sreq_every: u32,
}

impl ContextConfig {
    /// Defaults for a service type.
    pub fn new(service: Service) -> Self {
        let mut c = ContextConfig {
            service,
            nocheck: false,
            fastnak: true,
            noerr: false,
            noflow: false,
            mss: 1400,
            recv_buffer: 4 << 20,
            out_rate: 0,
            out_burst: 0,
            in_rate: 0,
            in_burst: 0,
            sort: None,
            congestion: Congestion::NewReno,
            sreq_every: 16,
        };
        if service == Service::Datagram {
            c.noerr = true;
            c.noflow = true;
        }
        c
    }

    /// Reliable byte stream.
    pub fn stream() -> Self {
        Self::new(Service::Stream)
    }
}

/// Endpoint-wide settings.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Smallest retransmission timeout.
    pub min_rto: Duration,
    /// Largest retransmission timeout.
    pub max_rto: Duration,
    /// WTIMER expiries without an answer before the context is abandoned.
    pub max_retries: u32,
    /// Idle time after which an active context probes its peer (CTIMER).
    pub keepalive: Duration,
    /// Shortest time an ended context lingers (CTIMEOUT) to absorb late packets.
    pub linger: Duration,
    /// DIAG packets per second we send at most (and burst).
    pub diag_rate: u32,
    /// Most contexts one peer may create with FIRST packets (digest G20).
    pub max_contexts_per_peer: usize,
    /// Largest datagram the path carries (XTP header included).
    pub max_packet: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 8,
            keepalive: Duration::from_secs(30),
            linger: Duration::from_secs(2),
            diag_rate: 20,
            max_contexts_per_peer: 1024,
            max_packet: 1472,
        }
    }
}
