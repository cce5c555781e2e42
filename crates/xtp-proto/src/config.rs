//! Endpoint and context configuration.

use xk_time::Duration;
use xtp_wire::Service;

/// Which congestion controller a context uses (see [`crate::cc`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Congestion {
    /// CUBIC (RFC 9438) with HyStart++ (RFC 9406): the default.
    #[default]
    Cubic,
    /// Model-based, after BBR v1: paces at the measured bottleneck rate.
    Bbr,
    /// AIMD with slow start (RFC 5681/6582).
    NewReno,
    /// "Pure XTP 4.0": no congestion window; only flow and rate control.
    Disabled,
}

impl Congestion {
    /// Every controller, in the order tools list them.
    pub const ALL: [Congestion; 4] =
        [Congestion::Cubic, Congestion::Bbr, Congestion::NewReno, Congestion::Disabled];

    /// The name tools use (`--cc NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Congestion::Cubic => "cubic",
            Congestion::Bbr => "bbr",
            Congestion::NewReno => "newreno",
            Congestion::Disabled => "none",
        }
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Congestion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.to_ascii_lowercase();
        Congestion::ALL
            .into_iter()
            .find(|c| c.name() == s || (s == "disabled" && *c == Congestion::Disabled))
            .ok_or_else(|| {
                let names: Vec<&str> = Congestion::ALL.iter().map(|c| c.name()).collect();
                format!("unknown congestion controller {s:?}: one of {}", names.join(", "))
            })
    }
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
    /// application has read, at first.
    pub recv_buffer: usize,
    /// Largest the receive buffer grows to. While the application reads as
    /// fast as data arrives and reads at least half a buffer per round trip
    /// (the buffer, not the reader, limits the transfer), the buffer doubles
    /// per round trip up to this (dynamic right-sizing, as Linux TCP's
    /// receive autotuning). Memory is only used by data the application has
    /// not read. Equal to `recv_buffer`: a fixed window.
    pub recv_buffer_max: usize,
    /// Most bytes written but not yet acknowledged (queued and in flight)
    /// before `write` refuses with `WriteError::WouldBlock`; never less than
    /// twice the send window, so it does not cap throughput.
    pub send_buffer: usize,
    /// Our outgoing rate limit in bytes/s (0 = none) and burst.
    pub out_rate: u32,
    /// Burst for `out_rate`, bytes; 0: four packets or 1 ms of the rate,
    /// whichever is more (`rate::default_burst`).
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
    /// Most bytes the sender lets out beyond the lowest unacknowledged one
    /// (a fixed send window, as seed 002 ran XTP with 1 MB); `None`: the
    /// peer's allocation and the congestion window alone decide.
    pub send_window: Option<u64>,
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
            recv_buffer_max: 256 << 20,
            send_buffer: 8 << 20,
            out_rate: 0,
            out_burst: 0,
            in_rate: 0,
            in_burst: 0,
            sort: None,
            congestion: Congestion::Cubic,
            sreq_every: 16,
            send_window: None,
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
    /// How long an ended context keeps received data the application has
    /// not read before it is freed anyway (counted in `unread_dropped`).
    pub unread_hold: Duration,
    /// DIAG packets per second we send at most (and burst).
    pub diag_rate: u32,
    /// Give up on a context we opened if the peer has not completed the key
    /// exchange in this time (`CloseReason::NoAnswer` when nothing came back,
    /// `Unconfirmed` when something did). `None` (the default): only XTP's own
    /// retries (`max_retries` WTIMER expiries) end it.
    pub connect_timeout: Option<Duration>,
    /// Most contexts held in all (live and lingering); FIRSTs beyond are
    /// refused and `connect` fails with `ConnectError::Full`.
    pub max_contexts: usize,
    /// Most half-open contexts (responders whose peer has not yet addressed
    /// us by our key, G27); beyond, the oldest is shed for a new one.
    pub max_half_open: usize,
    /// Memory budget for half-open contexts: their state plus the datagrams
    /// received for them; beyond, the oldest are shed.
    pub half_open_memory: usize,
    /// A half-open context is freed after this long.
    pub half_open_timeout: Duration,
    /// Towards a peer that has not proved its address we send at most this
    /// many times the bytes received from it (QUIC's anti-amplification).
    pub amplification: u32,
    /// DIAG refusals (context refused by a limit) per second at most.
    pub refusal_rate: u32,
    /// Most contexts one peer may create with FIRST packets (digest G20).
    pub max_contexts_per_peer: usize,
    /// Largest XTP packet (header included) the path carries over IPv4; over
    /// IPv6 the engine uses 20 bytes less (the larger IP header). Every
    /// header, segment and BTAG is counted against it.
    pub max_packet: usize,
    /// How long the `(peer, key)` of a freed responder context is remembered
    /// so a stale duplicate FIRST carrying it is refused instead of opening
    /// a new context and delivering old data again (G25). It must outlast
    /// the initiator's retry schedule, measured from the earliest free: a
    /// half-open context is freed `half_open_timeout` after its FIRST while
    /// an initiator that never heard our TCNTL keeps sending FIRSTs for up
    /// to `(max_retries + 1) × max_rto` (540 s by default).
    pub recent_key_hold: Duration,
    /// Most keys remembered that way (oldest forgotten first).
    pub recent_keys_max: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 8,
            keepalive: Duration::from_secs(30),
            linger: Duration::from_secs(2),
            unread_hold: Duration::from_secs(60),
            diag_rate: 20,
            connect_timeout: None,
            max_contexts: 1 << 20,
            max_half_open: 16_384,
            half_open_memory: 64 << 20,
            half_open_timeout: Duration::from_secs(60),
            amplification: 3,
            refusal_rate: 1000,
            max_contexts_per_peer: 1024,
            max_packet: 1472,
            recent_key_hold: Duration::from_secs(600),
            recent_keys_max: 1 << 16,
        }
    }
}
