//! `bulk`: a transfer with iperf3's conventions — a byte count (`-n`) or a
//! wall-time bound (`-t`), interval reports (`-i`), parallel contexts
//! (`-P`) with their sum, reverse (`-R`: the server sends) and both
//! directions at once (`--bidir`), the receiver's own count reported back
//! at the end, and a result that says what the protocol did
//! (retransmissions, RTT, window). The types and checks are here, the XTP
//! engine in `bulk_xtp.rs`, the TCP floor in `bulk_tcp.rs`, the QUIC peer
//! in `bulk_quic.rs`.
//!
//! With a time bound the sender stops writing at the deadline and closes;
//! the goodput counts the bytes the receiver acknowledged (or, receiving,
//! got) by then, as iperf3 counts what arrived in time. `omit` (iperf3's
//! `-O`) runs that long first and leaves it out of the count: the result is
//! the steady state, without slow start and without the first round trip in
//! which nothing can have been acknowledged yet.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use xtp_proto::Congestion;

use crate::client::{ClientDriver, PathConfig};
pub use crate::counters::{ContextCounters, EndpointCounters, QuicCounters};
pub use crate::tcp_info::TcpCounters;
use crate::transport::{TCP_VIA_REFUSAL, Transport};

/// How much to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// This many bytes.
    Bytes(u64),
    /// For this long (wall time).
    Time(Duration),
}

/// Which way the data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to server (the default).
    Send,
    /// Server to client (`-R`).
    Receive,
    /// Both at once (`--bidir`): `parallel` contexts each way.
    Both,
}

impl Direction {
    /// The ways a run's contexts go, sending ones first.
    pub(crate) fn ways(self) -> &'static [Direction] {
        match self {
            Direction::Send => &[Direction::Send],
            Direction::Receive => &[Direction::Receive],
            Direction::Both => &[Direction::Send, Direction::Receive],
        }
    }
}

/// A bulk transfer to run.
#[derive(Clone, Debug)]
pub struct BulkConfig {
    /// The server (`xpress serve`; for QUIC its `quic` address).
    pub to: SocketAddr,
    /// What to measure.
    pub transport: Transport,
    /// Bytes (in all, shared by the parallel contexts of a direction) or time.
    pub amount: Amount,
    /// Contexts per direction (`-P`), 1 to 128.
    pub parallel: u32,
    /// Which way.
    pub direction: Direction,
    /// Messages of this many bytes (EOM each) instead of a stream.
    pub length: Option<usize>,
    /// Hash both sides (SHA-256) and compare.
    pub verify: bool,
    /// XTP checksum over headers only.
    pub nocheck: bool,
    /// XTP rate limit, bits per second.
    pub rate_bps: Option<u64>,
    /// XTP congestion controller.
    pub cc: Congestion,
    /// Fixed window (bytes): our receive window (the peer sends within
    /// it) and a cap on what we send beyond the lowest unacknowledged byte.
    pub window: Option<usize>,
    /// Most data bytes per XTP packet this side sends; `None`: the most one
    /// packet carries on the route (`max_mss` of `PathConfig::max_packet`),
    /// as TCP's MSS follows the route's MTU.
    pub mss: Option<usize>,
    /// Report every this long.
    pub interval: Option<Duration>,
    /// With a time bound: run this long first and leave it out of the count
    /// (iperf3's `-O`; XTP and TCP).
    pub omit: Duration,
    /// The path to the server.
    pub path: PathConfig,
    /// QUIC: the server's certificate.
    pub quic_cert: Option<PathBuf>,
}

impl BulkConfig {
    /// An XTP transfer of `bytes` to `to` with every option at its default.
    pub fn new(to: SocketAddr, amount: Amount) -> Self {
        BulkConfig {
            to,
            transport: Transport::Xtp,
            amount,
            parallel: 1,
            direction: Direction::Send,
            length: None,
            verify: false,
            nocheck: false,
            rate_bps: None,
            cc: Congestion::Cubic,
            window: None,
            mss: None,
            interval: None,
            omit: Duration::ZERO,
            path: PathConfig::default(),
            quic_cert: None,
        }
    }
}

impl BulkConfig {
    /// Bytes for a direction's context `i`: a byte count is shared by the
    /// direction's contexts, the first taking the rest; `u64::MAX` timed.
    pub(crate) fn share(&self, i: u64) -> u64 {
        let p = u64::from(self.parallel.max(1));
        match self.amount {
            Amount::Bytes(b) => b / p + if i == 0 { b % p } else { 0 },
            Amount::Time(_) => u64::MAX,
        }
    }
}

/// One interval report, of one context or (`stream: None`) the sum of a
/// direction's contexts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The context's index; `None`: the sum over the direction (the only
    /// line when one context goes that way).
    pub stream: Option<usize>,
    /// `send` or `receive`.
    pub direction: Direction,
    /// Start, seconds since the first byte.
    pub start: f64,
    /// End, seconds since the first byte.
    pub end: f64,
    /// Bytes the sender put on the wire (retransmissions included; TCP:
    /// bytes written to the socket); `None` where the sender is the server.
    pub sent_bytes: Option<u64>,
    /// Sender's rate, bits per second.
    pub sent_bits_per_second: Option<f64>,
    /// Bytes the receiver got: acknowledged (sending) or delivered to us
    /// (receiving); `None` for TCP.
    pub receiver_bytes: Option<u64>,
    /// Receiver's goodput, bits per second.
    pub receiver_bits_per_second: Option<f64>,
    /// Bytes retransmitted in the interval (XTP sender; QUIC: bytes quinn
    /// declared lost, which it sends again; TCP sender: the kernel's
    /// retransmitted segments times its MSS).
    pub retransmitted: Option<u64>,
    /// Smoothed RTT at the end, ms (XTP, QUIC, TCP sender).
    pub srtt_ms: Option<f64>,
    /// Congestion window at the end, bytes (XTP sender with a controller;
    /// QUIC and TCP senders).
    pub cwnd: Option<u64>,
    /// Send window (the smaller of cwnd and the peer's allocation).
    pub send_window: Option<u64>,
    /// Pacing rate at the end, bits per second: the congestion controller's
    /// or XTP's RATE, whichever is lower (XTP sender; `None`: not paced).
    pub pacing_bits_per_second: Option<f64>,
    /// The interval lies in the omitted start (`omit`), outside the count.
    pub omitted: bool,
}

/// The sum of a direction's interval reports (RTT: the mean; rates,
/// bytes and windows: the sum; `None` where no part knows).
pub(crate) fn sum_intervals(parts: &[Interval], dir: Direction) -> Interval {
    let add = |f: fn(&Interval) -> Option<u64>| parts.iter().map(f).sum::<Option<u64>>();
    let addf = |f: fn(&Interval) -> Option<f64>| parts.iter().map(f).sum::<Option<f64>>();
    let rtts: Vec<f64> = parts.iter().filter_map(|i| i.srtt_ms).collect();
    Interval {
        stream: None,
        direction: dir,
        start: parts[0].start,
        end: parts[0].end,
        sent_bytes: add(|i| i.sent_bytes),
        sent_bits_per_second: addf(|i| i.sent_bits_per_second),
        receiver_bytes: add(|i| i.receiver_bytes),
        receiver_bits_per_second: addf(|i| i.receiver_bits_per_second),
        retransmitted: add(|i| i.retransmitted),
        srtt_ms: (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
        cwnd: add(|i| i.cwnd),
        send_window: add(|i| i.send_window),
        pacing_bits_per_second: addf(|i| i.pacing_bits_per_second),
        omitted: parts[0].omitted,
    }
}

/// One context's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamResult {
    /// Index, from 0, in the order opened (sending contexts first).
    pub stream: usize,
    /// `send` or `receive`.
    pub direction: Direction,
    /// Bytes counted (as [`BulkResult::bytes`]).
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Goodput, bits per second.
    pub bits_per_second: f64,
    /// Bytes written by the sender (`None`: the sender is the server).
    pub sent_bytes: Option<u64>,
    /// What the receiver counted (sending: the server's answer).
    pub receiver_bytes: Option<u64>,
    /// SHA-256 of what we sent (`--verify`).
    pub sha256: Option<String>,
    /// SHA-256 the server computed (`--verify`).
    pub receiver_sha256: Option<String>,
    /// The context's counters at the end (XTP).
    pub context: Option<ContextCounters>,
    /// Receiving (`-R`, XTP): the server's counters as its sending context
    /// reported them once its data was acknowledged; `None` when they did
    /// not come (the run was cut short).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<ContextCounters>,
    /// The connection's counters at the end (QUIC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicCounters>,
    /// Kernel TCP: the sending connection's counters at the end — ours
    /// when sending, the server's (sent after its data) with `-R`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpCounters>,
}

/// A direction's total, for `--bidir`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Sum {
    /// Bytes counted.
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Goodput, bits per second.
    pub bits_per_second: f64,
}

/// The outcome of a bulk run; `-J` prints it as one line of JSON. The
/// top-level numbers are the sum over the sending contexts (over the
/// receiving ones with `-R`); with `--bidir`, `receive_sum` has the other way.
#[derive(Clone, Debug, Serialize)]
pub struct BulkResult {
    /// `xtp`, `tcp` or `quic`.
    pub transport: &'static str,
    /// `send`, `receive` (`-R`) or `both` (`--bidir`).
    pub direction: Direction,
    /// Contexts per direction.
    pub parallel: u32,
    /// Bytes counted: sent (`-n`, all of them delivered) or acknowledged
    /// by the receiver within the time (`-t`, XTP; TCP and QUIC: what the
    /// receiver counted); receiving, what arrived (within the time).
    pub bytes: u64,
    /// Seconds those bytes took.
    pub seconds: f64,
    /// `bytes` over `seconds`, Gbit/s.
    pub gbit_per_s: f64,
    /// The same in bits per second.
    pub bits_per_second: f64,
    /// Ran for a time (`-t`) rather than a byte count.
    pub timed: bool,
    /// Seconds run before the counted part and left out of it (`omit`).
    pub omitted_seconds: f64,
    /// Bytes the application wrote.
    pub sent_bytes: u64,
    /// What the server said it received (`None`: no answer, e.g. aborted).
    pub receiver_bytes: Option<u64>,
    /// SHA-256 of what was sent (`--verify`).
    pub sha256: Option<String>,
    /// SHA-256 the server computed (`--verify`).
    pub receiver_sha256: Option<String>,
    /// Checksum over headers only.
    pub nocheck: bool,
    /// Message size, if messages were sent.
    pub message_bytes: Option<usize>,
    /// Datagrams sent by the driver (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_sent: Option<u64>,
    /// Send system calls (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_calls: Option<u64>,
    /// Send errors (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_errors: Option<u64>,
    /// UDP GSO in use (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// UDP GRO in use (XTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    /// The first context's counters at the end (XTP; all of them are in
    /// `streams`).
    pub context: Option<ContextCounters>,
    /// Receiving (`-R`, XTP): the first sending server context's counters
    /// (all of them are in `streams`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<ContextCounters>,
    /// The client endpoint's counters at the end: what it dropped, refused
    /// and held back, every limit's count (XTP).
    pub endpoint: Option<EndpointCounters>,
    /// The first connection's counters at the end (QUIC; all of them are
    /// in `streams`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicCounters>,
    /// Kernel TCP: the first sending connection's counters (all of them
    /// are in `streams`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpCounters>,
    /// Interval reports (`-i`): each context's (with several) and the sums.
    pub intervals: Vec<Interval>,
    /// Each context's result.
    pub streams: Vec<StreamResult>,
    /// `--bidir`: the receiving direction's total.
    pub receive_sum: Option<Sum>,
    /// Stopped early (Ctrl-C): the numbers are what was done by then.
    pub interrupted: bool,
    /// Warnings about the set-up (small socket buffers, …).
    pub warnings: Vec<String>,
}

impl BulkResult {
    /// Stopped (Ctrl-C) before the omitted start ended: the count runs from
    /// the start, and nothing was left out.
    pub(crate) fn counted_from_start(&mut self) {
        self.omitted_seconds = 0.0;
        for iv in &mut self.intervals {
            iv.omitted = false;
        }
    }

    pub(crate) fn new(transport: Transport, cfg: &BulkConfig) -> Self {
        BulkResult {
            transport: transport.name(),
            direction: cfg.direction,
            parallel: cfg.parallel,
            bytes: 0,
            seconds: 0.0,
            gbit_per_s: 0.0,
            bits_per_second: 0.0,
            timed: matches!(cfg.amount, Amount::Time(_)),
            omitted_seconds: cfg.omit.as_secs_f64(),
            sent_bytes: 0,
            receiver_bytes: None,
            sha256: None,
            receiver_sha256: None,
            nocheck: cfg.nocheck,
            message_bytes: cfg.length,
            datagrams_sent: None,
            send_calls: None,
            send_errors: None,
            gso: None,
            gro: None,
            context: None,
            sender: None,
            endpoint: None,
            quic: None,
            tcp: None,
            intervals: Vec::new(),
            streams: Vec::new(),
            receive_sum: None,
            interrupted: false,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn set_rate(&mut self, bytes: u64, seconds: f64) {
        self.bytes = bytes;
        self.seconds = seconds;
        self.bits_per_second = if seconds > 0.0 { bytes as f64 * 8.0 / seconds } else { 0.0 };
        self.gbit_per_s = self.bits_per_second / 1e9;
    }
}

/// Checks `cfg` and names the flag at fault.
pub fn check(cfg: &BulkConfig) -> Result<(), String> {
    match cfg.amount {
        Amount::Time(t) if !(0.1..=3600.0).contains(&t.as_secs_f64()) => {
            return Err(format!("-t {}: must be between 0.1 and 3600 seconds", t.as_secs_f64()));
        }
        Amount::Bytes(0) => return Err("-n 0: send at least one byte".into()),
        _ => {}
    }
    if let Some(l) = cfg.length
        && !(1..=1 << 20).contains(&l)
    {
        return Err(format!("-l {l}: a message must be 1 B to 1 MiB"));
    }
    if !(1..=128).contains(&cfg.parallel) {
        return Err(format!("-P {}: from 1 to 128 parallel contexts", cfg.parallel));
    }
    if cfg.verify && cfg.transport != Transport::Xtp {
        return Err(format!(
            "--verify: XTP only (the {} server counts what it reads, it does not hash it)",
            cfg.transport.name().to_uppercase()
        ));
    }
    if cfg.transport != Transport::Xtp {
        let t = cfg.transport.name();
        if cfg.nocheck {
            return Err(format!("--nocheck: XTP only (its checksum option); {t} has no such switch"));
        }
        if cfg.window.is_some() {
            return Err(format!(
                "--window: XTP only; {t} sizes its own buffers (for kernel TCP, iperf3 -w sets SO_SNDBUF/SO_RCVBUF)"
            ));
        }
    }
    if cfg.quic_cert.is_some() && cfg.transport != Transport::Quic {
        return Err("--quic-cert: with --transport quic only".into());
    }
    if cfg.transport == Transport::Quic && cfg.path.via.is_some() {
        return Err("--via: XTP only; for QUIC under an emulated link start \
                    `xpress emulate --server QUIC_ADDR` and give the relay's address as --to"
            .into());
    }
    if cfg.verify && cfg.direction != Direction::Send {
        return Err("--verify with -R or --bidir: the server hashes what it receives only".into());
    }
    if let Amount::Bytes(b) = cfg.amount
        && b < u64::from(cfg.parallel)
    {
        return Err(format!("-n {b} with -P {}: at least one byte per context", cfg.parallel));
    }
    if let Some(w) = cfg.window
        && w < 1500
    {
        return Err(format!("--window {w}: at least 1500 bytes (one full packet)"));
    }
    if !cfg.omit.is_zero() {
        if !matches!(cfg.amount, Amount::Time(_)) {
            return Err("--omit: only with -t (a time-bounded run leaves its start out of the count)".into());
        }
        if let Amount::Time(t) = cfg.amount
            && (cfg.omit + t).as_secs_f64() > 3600.0
        {
            return Err(format!(
                "--omit {} with -t {}: at most 3600 seconds in all",
                cfg.omit.as_secs_f64(),
                t.as_secs_f64()
            ));
        }
        if cfg.transport == Transport::Quic {
            return Err(
                "--omit: XTP and TCP only for now (the QUIC run counts its streams at the end)".into()
            );
        }
    }
    if let Some(i) = cfg.interval
        && i < Duration::from_millis(10)
    {
        return Err(format!("-i {}: report at most every 10 ms (0.01)", i.as_secs_f64()));
    }
    if let Some(r) = cfg.rate_bps
        && r / 8 > u64::from(u32::MAX)
    {
        return Err(format!(
            "--rate {r} bit/s: XTP's rate field holds at most {} bit/s",
            u64::from(u32::MAX) * 8
        ));
    }
    if cfg.rate_bps.is_some() && cfg.transport != Transport::Xtp {
        return Err("--rate: XTP only (its rate control); TCP and QUIC are not paced by this tool".into());
    }
    if cfg.path.pcap.is_some() && cfg.transport != Transport::Xtp {
        return Err("--pcap: XTP only (capture kernel TCP or QUIC with tcpdump)".into());
    }
    if cfg.path.via.is_some() && cfg.transport == Transport::Tcp {
        return Err(TCP_VIA_REFUSAL.into());
    }
    if cfg.path.raw.is_some() && cfg.transport != Transport::Xtp {
        return Err(format!("--raw: raw IP 36 carries XTP only, not {}", cfg.transport.name()));
    }
    if let Some(m) = cfg.mss {
        if cfg.transport != Transport::Xtp {
            return Err(format!("--mss: XTP only; {} takes its segment from the path", cfg.transport.name()));
        }
        if cfg.direction == Direction::Receive {
            return Err("--mss sets what this side sends; with -R the server sends \
                        (start it with `xpress serve --mss`)"
                .into());
        }
        let (packet, mtu) = cfg.path.max_packet(cfg.to);
        check_mss(m, packet, mtu, cfg.path.raw.is_some(), cfg.to.is_ipv6())?;
    }
    if cfg.transport == Transport::Udp {
        return Err(UDP_BULK_REFUSAL.into());
    }
    cfg.path.check(cfg.to)
}

/// The smallest segment `--mss` accepts.
pub const MIN_MSS: usize = 16;

/// The most data one XTP packet carries when the endpoint's packets may be
/// `packet` bytes (`EndpointConfig::max_packet`, measured over IPv4 and
/// UDP: `PathConfig::max_packet` from the route's MTU, or the engine's
/// default 1,472 for a 1,500-byte MTU): the packet less XTP's 32-byte
/// header, 20 bytes less on IPv6, 8 more over raw IP (no UDP header). At
/// 1,472: 1,440 over UDP on IPv4, 1,420 on IPv6, 1,448 raw (kernel TCP's
/// segment with timestamps); on packet-radio-9600's 238-byte MTU: 178.
pub fn max_mss(packet: usize, raw: bool, ipv6: bool) -> usize {
    (packet + if raw { xk_driver::driver::UDP_HEADER } else { 0 })
        .saturating_sub(if ipv6 { 20 } else { 0 })
        .saturating_sub(xtp_wire::HEADER_LEN)
}

/// The engine's default packet (a 1,500-byte MTU), for a side that does not
/// know its route (a server: it learns each client's from its FIRST).
pub fn default_packet() -> usize {
    xtp_proto::EndpointConfig::default().max_packet
}

/// Refuses a `--mss` the path cannot carry (it would be cut without a word,
/// or dropped on a smaller link) or too small to be useful, naming the
/// limit and where it comes from (`mtu`: the route's, when known). An error
/// rather than a silent clamp: a user who asks for a segment size measures
/// with it, and a clamped run would report numbers for another one.
pub fn check_mss(mss: usize, packet: usize, mtu: Option<usize>, raw: bool, ipv6: bool) -> Result<(), String> {
    let max = max_mss(packet, raw, ipv6);
    if (MIN_MSS..=max).contains(&mss) {
        return Ok(());
    }
    // `packet` is the route's MTU less IPv4 and UDP, or the 1,500-byte cap
    // (`path_mtu::max_packet_for_mtu`) when the route is larger (loopback's
    // 65,536): then the limit comes from the cap, and the message says so.
    let route = match mtu {
        Some(m) if xk_driver::path_mtu::is_capped(m) => {
            format!(" with packets capped at {packet} bytes, a 1,500-byte MTU's (this route's MTU is {m})")
        }
        Some(m) => format!(" on this route (MTU {m})"),
        None => String::new(),
    };
    let path = match (raw, ipv6) {
        (true, _) => format!("over raw IP{route}"),
        (false, true) => format!("over UDP on IPv6{route}"),
        (false, false) => format!("over UDP on IPv4{route}; {} with --raw", max_mss(packet, true, false)),
    };
    Err(format!("--mss {mss}: must be {MIN_MSS} to {max} bytes (the most data one packet carries {path})"))
}

const UDP_BULK_REFUSAL: &str =
    "--transport udp: bulk over raw UDP has no reliability to compare; use tcp or xtp";

/// Runs `cfg`, calling `on_interval` with each interval report as it is
/// made. Stopping (`stop`) ends the run early with the numbers so far.
pub fn run(
    cfg: &BulkConfig,
    stop: &AtomicBool,
    on_interval: impl FnMut(&Interval),
) -> Result<BulkResult, String> {
    check(cfg)?;
    match cfg.transport {
        Transport::Xtp => match cfg.path.open(cfg.to)? {
            (ClientDriver::Udp(d), to) => crate::bulk_xtp::run(d, cfg, to, stop, on_interval),
            (ClientDriver::Raw(d), to) => crate::bulk_xtp::run(d, cfg, to, stop, on_interval),
        },
        Transport::Tcp => crate::bulk_tcp::run(cfg, stop, on_interval),
        Transport::Udp => Err(UDP_BULK_REFUSAL.into()),
        Transport::Quic => crate::bulk_quic::run(cfg, stop, on_interval),
    }
}
