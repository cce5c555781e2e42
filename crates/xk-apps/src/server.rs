//! `xpress serve`: the services the client tools talk to.
//!
//! | service | transport, port | what it does |
//! |---|---|---|
//! | echo | XTP port 7 | sends every message back (`ping`) |
//! | discard | XTP port 9 | counts what arrives; when the client closes, answers the 8-byte count (`bulk`) |
//! | verify | XTP port 10 | as discard, and hashes: answers the count and the SHA-256 (`bulk --verify`) |
//! | source | XTP port 19 | sends what the client's 13-byte request asks for, bytes or time (`bulk -R`) |
//! | tcp | TCP, the XTP port number | first byte `e`: echo, `d`: discard, answering the count |
//! | udp-echo | UDP, `--udp-echo-port` (default XTP port + 1) | echoes datagrams (`ping --transport udp`) |
//! | quic | QUIC, `--quic-port` (default: any free) | discard answering the count (`bulk --transport quic`) |
//!
//! The XTP ports are XTP's own port numbers inside one UDP socket, so one
//! `--listen` address serves all three. Every socket is bound before the
//! services are listed, so the list is exactly what is bound.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant as StdInstant;

use serde::Serialize;
use sha2::{Digest, Sha256};
use xk_driver::clock::time_seed;
use xk_driver::driver::{Driver, RawDriver, UdpDriver};
use xk_driver::transport::Transport as Io;
use xk_time::Duration;
use xtp_proto::{CloseReason, Congestion, ContextConfig, ContextId, EndpointConfig, Event};

use crate::client::driver_config;
use crate::counters::EndpointCounters;
use crate::feed::{COUNTERS_TAG, Feeder, SourceRequest, hex};

/// XTP port of the echo service.
pub const ECHO_PORT: u16 = 7;
/// XTP port of the discard service.
pub const DISCARD_PORT: u16 = 9;
/// XTP port of the discard service that also hashes (SHA-256). Hashing
/// costs more CPU than the protocol itself, so throughput runs use plain
/// discard, like the TCP floor (which never hashes).
pub const VERIFY_PORT: u16 = 10;
/// XTP port of the source service (chargen's number): it sends (`bulk -R`).
pub const SOURCE_PORT: u16 = 19;

/// Clients that get a socket of their own by default (`--peer-lanes`): a
/// descriptor and up to a socket buffer each, for the clients a flood must
/// not crowd out; the rest share the bound socket.
pub const DEFAULT_PEER_LANES: usize = 64;

/// What to serve, where.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The XTP (UDP) and TCP address; port 0: any free port.
    pub listen: SocketAddr,
    /// Spin instead of sleeping.
    pub busy_poll: bool,
    /// Congestion controller of accepted XTP contexts.
    pub cc: Congestion,
    /// Most data bytes per packet the server's XTP contexts send (`-R`);
    /// `None`: the most one packet carries at a 1,500-byte MTU
    /// (`bulk::max_mss`: 1,440 over UDP on IPv4, 1,420 on IPv6, 1,448 raw),
    /// which the engine cuts to each client's advertised `maxdata`.
    pub mss: Option<usize>,
    /// Do not use UDP GSO/GRO.
    pub no_offload: bool,
    /// Most validated clients given a UDP socket of their own, out of a
    /// spoofed flood's way (`DriverConfig::peer_lanes`; 0: none). Not over
    /// `--raw`.
    pub peer_lanes: usize,
    /// With peer lanes: datagrams from unvalidated sources read per second
    /// while validated clients have traffic (`DriverConfig::unvalidated_rate`;
    /// 0: no limit).
    pub unvalidated_rate: u64,
    /// SO_RCVBUF of the TCP floor's connections.
    pub tcp_rcvbuf: Option<usize>,
    /// XTP over IP protocol 36 instead of UDP (root; no floors then).
    pub raw: bool,
    /// UDP echo port; `None`: the XTP port + 1; `Some(0)`: any free port.
    pub udp_echo_port: Option<u16>,
    /// Serve QUIC with a fresh self-signed certificate written to this file.
    pub quic_cert: Option<PathBuf>,
    /// QUIC port (0: any free port).
    pub quic_port: u16,
    /// Stop after this long.
    pub duration: Option<std::time::Duration>,
    /// Write every XTP packet sent and received to this pcap file.
    pub pcap: Option<PathBuf>,
    /// Report the engine's counters this often (to `run_with`'s `on_engine`).
    pub stats_every: Option<std::time::Duration>,
}

impl ServeConfig {
    /// Defaults on `listen`: XTP with CUBIC, the TCP and UDP floors, no QUIC.
    pub fn new(listen: SocketAddr) -> Self {
        ServeConfig {
            listen,
            busy_poll: false,
            cc: Congestion::Cubic,
            mss: None,
            no_offload: false,
            peer_lanes: DEFAULT_PEER_LANES,
            unvalidated_rate: xk_driver::intake::DEFAULT_UNVALIDATED_RATE,
            tcp_rcvbuf: None,
            raw: false,
            udp_echo_port: None,
            quic_cert: None,
            quic_port: 0,
            duration: None,
            pcap: None,
            stats_every: None,
        }
    }
}

/// One bound service, as `serve` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct Service {
    /// `xtp`, `tcp`, `udp-echo` or `quic`.
    pub name: &'static str,
    /// The address it is bound to.
    pub addr: SocketAddr,
    /// What it serves, in a few words.
    pub what: &'static str,
}

/// What one XTP discard, verify or source context carried.
#[derive(Clone, Debug, Serialize)]
pub struct Received {
    /// `discard`, `verify` or `source`.
    pub service: &'static str,
    /// The client.
    pub peer: SocketAddr,
    /// Bytes delivered to us (discard, verify) or written by us (source).
    pub bytes: u64,
    /// Seconds from the context's arrival to its end.
    pub seconds: f64,
    /// SHA-256 of the data (verify only).
    pub sha256: Option<String>,
    /// Ended by a graceful close.
    pub graceful: bool,
    /// How it ended, as a sentence.
    pub reason: String,
}

enum AnyDriver {
    Udp(UdpDriver),
    Raw(RawDriver),
}

/// The bound services; [`Server::run`] serves them.
pub struct Server {
    driver: AnyDriver,
    services: Vec<Service>,
    cfg: ServeConfig,
    /// Set when the server ends: the floor threads then stop.
    done: Arc<AtomicBool>,
}

impl Server {
    /// Binds every service of `cfg` (the XTP socket first, then TCP on the
    /// same port number, the UDP echo, QUIC), or says which one failed.
    pub fn bind(cfg: &ServeConfig) -> Result<Server, String> {
        let mut dc = driver_config(cfg.busy_poll, cfg.no_offload);
        let done = Arc::new(AtomicBool::new(false));
        if cfg.raw {
            let std::net::IpAddr::V4(ip) = cfg.listen.ip() else {
                return Err(format!("--listen {}: --raw supports IPv4 only", cfg.listen));
            };
            if cfg.quic_cert.is_some() || cfg.udp_echo_port.is_some() {
                return Err("--raw serves XTP only: leave out --quic-cert and --udp-echo-port".into());
            }
            // Raw IP sockets cannot be steered by peer: no lanes.
            let mut d = Driver::bind_raw(ip, EndpointConfig::default(), time_seed(), dc)
                .map_err(|e| format!("raw IP 36 on {ip}: {e}"))?;
            if let Some(p) = &cfg.pcap {
                crate::capture::install(&mut d, p, None)?;
            }
            let services =
                vec![Service { name: "xtp", addr: SocketAddr::new(ip.into(), 0), what: XTP_WHAT_RAW }];
            return Ok(Server { driver: AnyDriver::Raw(d), services, cfg: cfg.clone(), done });
        }
        dc.peer_lanes = cfg.peer_lanes;
        dc.unvalidated_rate = cfg.unvalidated_rate;
        let (mut d, tcp, udp) = bind_ports(cfg, dc)?;
        if let Some(p) = &cfg.pcap {
            crate::capture::install(&mut d, p, None)?;
        }
        let local = d.local_addr().map_err(|e| e.to_string())?;
        let echo_addr = udp.local_addr().map_err(|e| e.to_string())?;
        let mut services = vec![
            Service { name: "xtp", addr: local, what: XTP_WHAT },
            Service { name: "tcp", addr: local, what: "kernel TCP: first byte e echoes, d discards" },
            Service { name: "udp-echo", addr: echo_addr, what: "raw UDP echo (ping --transport udp)" },
        ];
        if let Some(cert) = &cfg.quic_cert {
            let q =
                crate::quic::spawn_server(SocketAddr::new(local.ip(), cfg.quic_port), cert, done.clone())?;
            services.push(Service { name: "quic", addr: q, what: "QUIC discard (bulk --transport quic)" });
        }
        let busy = cfg.busy_poll;
        {
            let done = done.clone();
            std::thread::spawn(move || crate::floors::tcp_server(tcp, busy, &done));
        }
        {
            let done = done.clone();
            std::thread::spawn(move || crate::floors::udp_echo(udp, busy, &done));
        }
        Ok(Server { driver: AnyDriver::Udp(d), services, cfg: cfg.clone(), done })
    }

    /// The bound services, XTP first.
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// A warning about the socket buffers, if the system keeps them small.
    pub fn warning(&self) -> Option<String> {
        match &self.driver {
            AnyDriver::Udp(d) => d.buffer_warning(),
            AnyDriver::Raw(d) => d.buffer_warning(),
        }
    }

    /// Serves until `stop` is set or the configured duration passes,
    /// calling `on_received` as each discard or verify context ends.
    /// The floors stop with the server (when this returns or it is dropped).
    pub fn run(self, stop: &AtomicBool, on_received: impl FnMut(&Received)) -> Result<EngineReport, String> {
        self.run_with(stop, on_received, |_| {})
    }

    /// As [`Server::run`], also calling `on_engine` every
    /// `ServeConfig::stats_every`. Returns the engine's final report.
    pub fn run_with(
        mut self,
        stop: &AtomicBool,
        on_received: impl FnMut(&Received),
        on_engine: impl FnMut(&EngineReport),
    ) -> Result<EngineReport, String> {
        let cfg = self.cfg.clone();
        match &mut self.driver {
            AnyDriver::Udp(d) => serve_xtp(d, &cfg, stop, on_received, on_engine),
            AnyDriver::Raw(d) => serve_xtp(d, &cfg, stop, on_received, on_engine),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

const XTP_WHAT: &str = "XTP over UDP: echo on XTP port 7, discard 9, verify 10, source 19";
const XTP_WHAT_RAW: &str = "XTP over IP protocol 36: echo on XTP port 7, discard 9, verify 10, source 19";

/// Binds the XTP (UDP) socket, the TCP floor on the same port and the UDP
/// echo (next port up unless given). With `--listen` port 0 the kernel
/// picks the UDP port, and the same number may already be taken for TCP
/// or the next one for the echo (by any program's ephemeral port: a CI
/// run hit it): then the three are tried again on a fresh port, up to 32
/// times, before the error is reported.
fn bind_ports(
    cfg: &ServeConfig,
    dc: xk_driver::driver::DriverConfig,
) -> Result<(UdpDriver, TcpListener, UdpSocket), String> {
    let retry = |e: &std::io::Error, attempt: u32| {
        cfg.listen.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse && attempt < 32
    };
    let mut attempt = 0;
    loop {
        let d = UdpDriver::bind_with(cfg.listen, EndpointConfig::default(), time_seed(), dc)
            .map_err(|e| bind_error("--listen", "XTP (UDP)", cfg.listen, &e))?;
        let local = d.local_addr().map_err(|e| e.to_string())?;
        attempt += 1;
        let tcp = match TcpListener::bind(local) {
            Ok(t) => t,
            Err(e) if retry(&e, attempt) => continue,
            Err(e) => return Err(bind_error("--listen", "TCP", local, &e)),
        };
        if let Some(b) = cfg.tcp_rcvbuf {
            // Accepted connections inherit the listener's buffer size.
            nix::sys::socket::setsockopt(&tcp, nix::sys::socket::sockopt::RcvBuf, &b)
                .map_err(|e| format!("--tcp-rcvbuf {b}: {e}"))?;
        }
        let echo_port = match cfg.udp_echo_port {
            Some(p) => p,
            None => crate::floors::default_udp_echo_port(local.port()).ok_or_else(|| {
                format!("--listen {local}: the UDP echo goes on the next port up, and {} has none; give --udp-echo-port", local.port())
            })?,
        };
        let echo_addr = SocketAddr::new(local.ip(), echo_port);
        match UdpSocket::bind(echo_addr) {
            Ok(udp) => return Ok((d, tcp, udp)),
            Err(e) if cfg.udp_echo_port.is_none() && retry(&e, attempt) => continue,
            Err(e) => return Err(bind_error("--udp-echo-port", "UDP echo", echo_addr, &e)),
        }
    }
}

/// A bind failure in words, with the likely cause where it is a common one.
fn bind_error(flag: &str, what: &str, addr: SocketAddr, e: &std::io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(nix::libc::EADDRINUSE) => " (another program has this port: choose another)",
        Some(nix::libc::EADDRNOTAVAIL) => " (no interface of this host has that address)",
        Some(nix::libc::EAFNOSUPPORT) => " (IPv6 is disabled on this host)",
        _ => "",
    };
    format!("{flag}: cannot bind {what} on {addr}: {e}{hint}")
}

/// The XTP engine's state as the server reports it: periodically with
/// `stats_every`, and once when it stops (the soak and flood experiments
/// read the contexts left and the admission counters from it).
#[derive(Clone, Debug, Serialize)]
pub struct EngineReport {
    /// Seconds since the server started serving.
    pub seconds: f64,
    /// Contexts held (live and lingering).
    pub contexts: usize,
    /// Contexts of the services still open in the application (not yet
    /// reported closed by the engine).
    pub open_in_app: usize,
    /// Every counter of `xtp_proto::EndpointStats`, by name.
    pub counters: EndpointCounters,
    /// Validated clients' own sockets (`--peer-lanes`).
    pub peer_lanes: PeerLanes,
}

/// What `--peer-lanes` did ([`xk_driver::lanes::LaneCounters`]).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PeerLanes {
    /// Lanes open now.
    pub open: u64,
    /// Lanes opened in total.
    pub opened: u64,
    /// Validated clients left on the shared socket: `--peer-lanes` were open.
    pub at_limit: u64,
    /// Lanes the system refused.
    pub failed: u64,
    /// Datagrams read from the shared socket (unvalidated sources, and
    /// validated clients beyond `--peer-lanes`).
    pub shared_read: u64,
    /// Times the shared socket was set aside because `--unvalidated-rate`
    /// was spent beside busy lanes.
    pub unvalidated_deferred: u64,
}

impl EngineReport {
    fn of<T: Io>(d: &mut Driver<T>, start: StdInstant, open_in_app: usize) -> Self {
        let l = d.lane_counters();
        let i = d.intake_counters();
        let ep = d.endpoint();
        EngineReport {
            seconds: start.elapsed().as_secs_f64(),
            contexts: ep.context_count(),
            open_in_app,
            counters: ep.stats().into(),
            peer_lanes: PeerLanes {
                open: l.open,
                opened: l.opened,
                at_limit: l.at_limit,
                failed: l.failed,
                shared_read: i.shared_read,
                unvalidated_deferred: i.deferred,
            },
        }
    }
}

/// Per-context state of the XTP services.
struct Conn {
    port: u16,
    peer: SocketAddr,
    start: StdInstant,
    bytes: u64,
    sha: Option<Sha256>,
    digest: Option<String>,
    /// Source: the request as it arrives, then what we send.
    request: Vec<u8>,
    source: Option<Source>,
}

/// A source context's sending.
struct Source {
    feeder: Feeder,
    /// The end of a timed request.
    deadline: Option<StdInstant>,
    /// The client asked for our counters after the data.
    counters: bool,
    /// All written: waiting (until then at most) for the data to be
    /// acknowledged, so the counters cover it.
    drain_until: Option<StdInstant>,
}

/// How long a source waits for its data to be acknowledged before it
/// sends its counters anyway.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

fn serve_xtp<T: Io>(
    d: &mut Driver<T>,
    cfg: &ServeConfig,
    stop: &AtomicBool,
    mut on_received: impl FnMut(&Received),
    mut on_engine: impl FnMut(&EngineReport),
) -> Result<EngineReport, String> {
    let ep = d.endpoint();
    let mut ccfg = ContextConfig::stream();
    ccfg.congestion = cfg.cc;
    // As `bulk`: the most one packet carries on this path unless --mss. A
    // wildcard IPv6 listener also serves IPv4 peers; the engine cuts an
    // IPv6 peer's packets 20 bytes shorter by itself.
    let v6_only = cfg.listen.is_ipv6() && !cfg.listen.ip().is_unspecified();
    // A server does not know its clients' routes: each client's FIRST
    // says how much data one packet may carry to it (`maxdata`, G28), and
    // the engine cuts this segment to that.
    ccfg.mss =
        cfg.mss.unwrap_or_else(|| crate::bulk::max_mss(crate::bulk::default_packet(), cfg.raw, v6_only));
    for port in [ECHO_PORT, DISCARD_PORT, VERIFY_PORT, SOURCE_PORT] {
        ep.listen(port, ccfg.clone()).map_err(|e| format!("XTP port {port}: {e}"))?;
    }
    let started = StdInstant::now();
    let end = cfg.duration.map(|s| started + s);
    let mut next_stats = cfg.stats_every.map(|e| started + e);
    let mut conns: HashMap<ContextId, Conn> = HashMap::new();
    // Source contexts still writing, in arrival order.
    let mut sources: Vec<ContextId> = Vec::new();
    // Echo contexts whose answers wait for room in the send buffer (their
    // input is left unread meanwhile, so the client is flow-controlled),
    // and whether the client has finished (close once all is echoed).
    let mut echo_stalled: HashMap<ContextId, bool> = HashMap::new();
    loop {
        if end.is_some_and(|e| StdInstant::now() >= e) || stop.load(Ordering::Relaxed) {
            return Ok(EngineReport::of(d, started, conns.len()));
        }
        if let (Some(t), Some(every)) = (next_stats, cfg.stats_every)
            && StdInstant::now() >= t
        {
            on_engine(&EngineReport::of(d, started, conns.len()));
            next_stats = Some(t + every);
        }
        // Sources are fed as the queue drains: look again soon.
        let wait = if sources.is_empty() && echo_stalled.is_empty() { 100 } else { 5 };
        d.turn(Duration::from_millis(wait)).map_err(|e| format!("socket: {e}"))?;
        let now = d.now();
        let ep = d.endpoint();
        sources.retain(|ctx| {
            let Some(src) = conns.get_mut(ctx).and_then(|c| c.source.as_mut()) else {
                return false;
            };
            if src.deadline.is_some_and(|d| StdInstant::now() >= d) {
                src.feeder.stop();
            }
            if src.feeder.feed(ep, now, *ctx).is_err() {
                ep.close(now, *ctx);
                return false;
            }
            if !src.feeder.done() {
                return true;
            }
            if src.counters {
                let until = *src.drain_until.get_or_insert_with(|| StdInstant::now() + DRAIN_WAIT);
                if ep.unacked_bytes(*ctx) > 0 && StdInstant::now() < until {
                    return true;
                }
                // The data's message has ended (the feeder's last write);
                // the counters follow as a message of their own, tagged so
                // the client tells them from the data.
                if let Some(c) = ep.context_stats(*ctx).map(crate::counters::ContextCounters::from)
                    && let Ok(json) = serde_json::to_vec(&c)
                {
                    let _ = ep.write(now, *ctx, json.into(), true, Some(COUNTERS_TAG));
                }
            }
            ep.close(now, *ctx);
            false
        });
        echo_stalled.retain(|ctx, finished| {
            if echo(ep, now, *ctx) {
                return true;
            }
            if *finished {
                ep.close(now, *ctx);
            }
            false
        });
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Readable { ctx } if conns.get(&ctx).is_some_and(|c| c.port == ECHO_PORT) => {
                    let stalled = echo(ep, now, ctx);
                    if stalled {
                        echo_stalled.entry(ctx).or_insert(false);
                    }
                }
                Event::PeerFinished { ctx } if echo_stalled.contains_key(&ctx) => {
                    echo_stalled.insert(ctx, true);
                }
                Event::Incoming { ctx, port, peer, .. } => {
                    let sha = (port == VERIFY_PORT).then(Sha256::new);
                    conns.insert(
                        ctx,
                        Conn {
                            port,
                            peer,
                            start: StdInstant::now(),
                            bytes: 0,
                            sha,
                            digest: None,
                            request: Vec::new(),
                            source: None,
                        },
                    );
                }
                Event::Readable { ctx } => {
                    while let Some(c) = ep.read(now, ctx) {
                        let Some(conn) = conns.get_mut(&ctx) else { continue };
                        if conn.port == SOURCE_PORT {
                            if conn.source.is_some() || conn.request.len() + c.data.len() > SourceRequest::LEN
                            {
                                ep.abort(now, ctx);
                                continue;
                            }
                            conn.request.extend_from_slice(&c.data);
                            if conn.request.len() == SourceRequest::LEN {
                                let Some(r) = SourceRequest::decode(&conn.request) else {
                                    ep.abort(now, ctx);
                                    continue;
                                };
                                let length = (r.length > 0).then_some(r.length as usize);
                                let (limit, deadline) = if r.timed {
                                    let t = std::time::Duration::from_millis(r.amount.min(3_600_000));
                                    (u64::MAX, Some(StdInstant::now() + t))
                                } else {
                                    (r.amount, None)
                                };
                                let feeder = Feeder::new(limit, r.timed, length, false);
                                conn.source = Some(Source {
                                    feeder: if r.counters { feeder.ending_the_message() } else { feeder },
                                    deadline,
                                    counters: r.counters,
                                    drain_until: None,
                                });
                                sources.push(ctx);
                            }
                        } else {
                            conn.bytes += c.data.len() as u64;
                            if let Some(h) = conn.sha.as_mut() {
                                h.update(&c.data);
                            }
                        }
                    }
                }
                Event::PeerFinished { ctx } => {
                    // The receiver's own count (and hash) goes back before
                    // our close, so the client reports both sides.
                    if let Some(conn) = conns.get_mut(&ctx)
                        && (conn.port == DISCARD_PORT || conn.port == VERIFY_PORT)
                    {
                        let mut answer = conn.bytes.to_be_bytes().to_vec();
                        if let Some(h) = conn.sha.take() {
                            let digest = h.finalize();
                            answer.extend_from_slice(&digest);
                            conn.digest = Some(hex(&digest));
                        }
                        let _ = ep.write(now, ctx, answer.into(), true, None);
                    }
                    // A source still writing closes when it is done.
                    if !sources.contains(&ctx) {
                        ep.close(now, ctx);
                    }
                }
                Event::Closed { ctx, reason } => {
                    echo_stalled.remove(&ctx);
                    // A context whose peer never proved its address (shed or
                    // expired half-open: most likely a spoofed FIRST) is not
                    // a transfer: reporting each one would print a line per
                    // spoofed packet under a flood. The engine counts them
                    // (`half_open_evicted`, `half_open_expired`).
                    let unvalidated = matches!(reason, CloseReason::Unvalidated { .. });
                    if let Some(mut c) = conns.remove(&ctx)
                        && c.port != ECHO_PORT
                        && !unvalidated
                    {
                        if let Some(h) = c.sha.take() {
                            c.digest = Some(hex(&h.finalize()));
                        }
                        let service = match c.port {
                            VERIFY_PORT => "verify",
                            SOURCE_PORT => "source",
                            _ => "discard",
                        };
                        let bytes = c.source.as_ref().map_or(c.bytes, |s| s.feeder.written);
                        on_received(&Received {
                            service,
                            peer: c.peer,
                            bytes,
                            seconds: c.start.elapsed().as_secs_f64(),
                            sha256: c.digest,
                            graceful: reason == CloseReason::Graceful,
                            reason: crate::close::describe(&reason),
                        });
                    }
                }
                _ => {}
            }
        }
    }
}

/// Echoes what `ctx` has received while its send buffer has room; returns
/// true when it stopped for room (data left unread), false when drained.
fn echo<S: xtp_proto::Subscriber>(
    ep: &mut xtp_proto::Endpoint<S>,
    now: xk_time::Instant,
    ctx: ContextId,
) -> bool {
    loop {
        if ep.readable_bytes(ctx) == 0 {
            return false;
        }
        if !ep.can_write(ctx) {
            return ep.state(ctx).is_some_and(|s| s.is_live());
        }
        let Some(c) = ep.read(now, ctx) else { return false };
        // can_write held, so this is not refused for room; a context that
        // just ended refuses, and then there is no one to echo to.
        let _ = ep.write(now, ctx, c.data, c.eom, c.btag);
    }
}
