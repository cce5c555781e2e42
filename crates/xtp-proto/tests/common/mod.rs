//! Test harness: XTP endpoints as simulator nodes with a small scripted
//! application on top.

// Each test binary uses a different part of the harness.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;

use bytes::Bytes;
use xk_netemu::LinkParams;
use xk_sim::{NodeId, Sim};
use xk_time::Instant;
use xtp_proto::{Chunk, CloseReason, ContextConfig, ContextId, Endpoint, EndpointConfig, Event, Service};
use xtp_testkit::App;
use xtp_wire::{Body, Options, PacketRepr};

/// What the application on a host does.
#[derive(Clone, Debug)]
pub enum Role {
    /// Accept on `port`; read everything; when the peer finishes, write
    /// `reply` (if any) and close.
    Server { port: u16, reply: Option<Vec<u8>> },
    /// Open to `port` at the peer, write `messages` (each with EOM and a BTAG
    /// equal to its index), then close.
    Client { port: u16, messages: Vec<Vec<u8>>, cfg: ContextConfig },
    /// Send one datagram.
    Datagram { port: u16, data: Vec<u8>, acked: bool },
    /// Open to `port` and keep the send queue topped up for ever (a bulk
    /// transfer measured by time, as iperf3 does).
    Bulk { port: u16, cfg: ContextConfig },
    /// Accept on `port` with `cfg` (its receive buffer is the window the
    /// sender sees) and read everything, counting bytes only.
    Sink { port: u16, cfg: ContextConfig },
}

/// A host of the tests: an endpoint in the simulator with a [`Script`] on
/// top (the test kit's adapter; see `xtp-testkit`).
pub type Host = xtp_testkit::Host<Script>;

/// What a host's application does and what it saw.
pub struct Script {
    pub role: Role,
    pub peer: Option<SocketAddr>,
    pub ctx: Option<ContextId>,
    /// Everything read, in order, as (data, eom, btag) chunks.
    pub chunks: Vec<Chunk>,
    pub closed: Vec<(ContextId, CloseReason)>,
    pub events: Vec<Event>,
    pub gaps: u64,
    /// Highest `alloc` the peer advertised (seen on packets we received).
    pub peer_alloc: u64,
    /// The first data packet we sent beyond the peer's `alloc`, if any.
    pub flow_violation: Option<String>,
    /// Bytes read (Sink).
    pub sink_bytes: u64,
    /// Data written by a Bulk sender: one shared 1 MiB pattern.
    bulk_data: Bytes,
    /// A Bulk sender's write size (0: the whole pattern per write).
    pub write_size: usize,
    /// Client messages not yet accepted by `write` (its send buffer was
    /// full), with their BTAGs; the client closes once all are written.
    pending: std::collections::VecDeque<(Bytes, u64)>,
    client_closed: bool,
}

/// A host playing `role` on an endpoint seeded with `seed`.
pub fn host(role: Role, seed: u64, cfg: EndpointConfig) -> Host {
    Host::new(Endpoint::new(cfg, seed), Script::new(role))
}

/// Starts a host's role (listen, or connect and write) at `now`.
pub fn start(h: &mut Host, now: Instant) {
    h.with(|s, ep| s.start(ep, now));
}

impl Script {
    pub fn new(role: Role) -> Self {
        Script {
            peer_alloc: xtp_proto::INITIAL_ALLOC,
            flow_violation: None,
            role,
            peer: None,
            ctx: None,
            sink_bytes: 0,
            bulk_data: Bytes::new(),
            write_size: 0,
            pending: std::collections::VecDeque::new(),
            client_closed: true,
            chunks: Vec::new(),
            closed: Vec::new(),
            events: Vec::new(),
            gaps: 0,
        }
    }

    pub fn start(&mut self, ep: &mut Endpoint, now: Instant) {
        match self.role.clone() {
            Role::Server { port, .. } => {
                ep.listen(port, ContextConfig::stream()).unwrap();
            }
            Role::Sink { port, cfg } => {
                ep.listen(port, cfg).unwrap();
            }
            Role::Bulk { port, cfg } => {
                self.ctx = Some(ep.connect(now, self.peer.unwrap(), port, cfg).unwrap());
                self.bulk_data = Bytes::from(pattern(1 << 20, 9));
                self.top_up(ep, now);
            }
            Role::Client { port, messages, cfg } => {
                let ctx = ep.connect(now, self.peer.unwrap(), port, cfg).unwrap();
                self.ctx = Some(ctx);
                self.pending =
                    messages.into_iter().enumerate().map(|(i, m)| (Bytes::from(m), i as u64)).collect();
                self.client_closed = false;
                self.feed_pending(ep, now);
            }
            Role::Datagram { port, data, acked } => {
                let ctx = ep.send_datagram(now, self.peer.unwrap(), port, Bytes::from(data), acked).unwrap();
                self.ctx = Some(ctx);
            }
        }
    }

    /// Writes client messages while the send buffer takes them (a refused
    /// write is retried on the next event), then closes.
    fn feed_pending(&mut self, ep: &mut Endpoint, now: Instant) {
        let Some(ctx) = self.ctx else { return };
        while let Some((m, tag)) = self.pending.front() {
            match ep.write(now, ctx, m.clone(), true, Some(*tag)) {
                Ok(()) => {
                    self.pending.pop_front();
                }
                Err(xtp_proto::WriteError::WouldBlock) => return,
                Err(e) => panic!("client write: {e}"),
            }
        }
        if !self.client_closed {
            self.client_closed = true;
            ep.close(now, ctx);
        }
    }

    /// Bytes read, concatenated.
    pub fn received(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.data.iter().copied()).collect()
    }

    /// Messages read: (bytes, btag of the message start).
    pub fn messages(&self) -> Vec<(Vec<u8>, Option<u64>)> {
        let mut out = Vec::new();
        let mut cur: Option<(Vec<u8>, Option<u64>)> = None;
        for c in &self.chunks {
            let m = cur.get_or_insert_with(|| (Vec::new(), c.btag));
            m.0.extend_from_slice(&c.data);
            if c.eom {
                out.push(cur.take().unwrap());
            }
        }
        if let Some(m) = cur {
            out.push(m);
        }
        out
    }

    fn is_bulk(&self) -> bool {
        matches!(self.role, Role::Bulk { .. } | Role::Sink { .. })
    }

    /// A Bulk sender keeps twice the send window queued (at least 4 MiB),
    /// so the protocol, not the application, limits the transfer.
    fn top_up(&mut self, ep: &mut Endpoint, now: Instant) {
        let Some(ctx) = self.ctx else { return };
        let Some(stats) = ep.context_stats(ctx) else { return };
        let target = stats.send_window.min(1 << 30).saturating_mul(2).max(4 << 20);
        let piece = match self.write_size {
            0 => self.bulk_data.clone(),
            n => self.bulk_data.slice(..n.min(self.bulk_data.len())),
        };
        while ep.unacked_bytes(ctx) < target {
            if ep.write(now, ctx, piece.clone(), false, None).is_err() {
                return;
            }
        }
    }
}

impl App for Script {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        let sink = matches!(self.role, Role::Sink { .. });
        while let Some(ev) = ep.poll_event() {
            match &ev {
                Event::Incoming { ctx, .. } => self.ctx = Some(*ctx),
                Event::Readable { ctx } if sink => {
                    while let Some(c) = ep.read(now, *ctx) {
                        self.sink_bytes += c.data.len() as u64;
                    }
                }
                Event::Readable { ctx } => {
                    while let Some(c) = ep.read(now, *ctx) {
                        self.chunks.push(c);
                    }
                }
                Event::PeerFinished { ctx } => {
                    while let Some(c) = ep.read(now, *ctx) {
                        self.chunks.push(c);
                    }
                    if let Role::Server { reply, .. } = &self.role {
                        if let Some(r) = reply {
                            let _ = ep.write(now, *ctx, Bytes::from(r.clone()), true, Some(7));
                        }
                        ep.close(now, *ctx);
                    }
                }
                Event::Gap { len, .. } => self.gaps += len,
                Event::Closed { ctx, reason } => {
                    while let Some(c) = ep.read(now, *ctx) {
                        self.chunks.push(c);
                    }
                    self.closed.push((*ctx, reason.clone()));
                }
                Event::Acked { .. } => {}
            }
            if !sink && !matches!(self.role, Role::Bulk { .. }) {
                self.events.push(ev);
            }
        }
        if matches!(self.role, Role::Bulk { .. }) {
            self.top_up(ep, now);
        }
        if !self.client_closed {
            self.feed_pending(ep, now);
        }
    }

    fn on_datagram(&mut self, _now: Instant, _from: SocketAddr, data: &[u8]) {
        // Watch flow control from outside the engine: remember the largest
        // allocation the peer advertised in a packet that verifies. (Not in
        // the long bulk runs, where the second parse would double the cost.)
        if !self.is_bulk()
            && let Ok(p) = PacketRepr::parse(data)
        {
            let alloc = match &p.body {
                Body::Cntl(c) => Some(c.alloc),
                Body::Ecntl(e) => Some(e.control.alloc),
                Body::Tcntl { control, .. } | Body::Jcntl { control, .. } => Some(control.control.alloc),
                _ => None,
            };
            if let Some(a) = alloc {
                self.peer_alloc = self.peer_alloc.max(a);
            }
        }
    }

    fn on_transmit(&mut self, ep: &mut Endpoint, now: Instant, dst: SocketAddr, out: &[u8]) -> bool {
        if !self.is_bulk()
            && let Ok(p) = PacketRepr::parse(out)
            && let Body::Data { data, .. } | Body::First { data, .. } = &p.body
        {
            let end = p.header.seq + data.len() as u64;
            if end > self.peer_alloc
                && !p.header.options.contains(Options::NOFLOW)
                && self.flow_violation.is_none()
            {
                self.flow_violation = Some(format!("sent up to {end}, alloc {}", self.peer_alloc));
            }
        }
        if std::env::var_os("XTP_TRACE").is_some() {
            eprintln!("{now} -> {dst}: {}", xtp_wire::Pretty(out));
        }
        self.poll(ep, now);
        true
    }
}

/// A client and a server joined by `ab` (client → server) and `ba` links.
pub fn pair(
    seed: u64,
    client: Role,
    server: Role,
    ab: LinkParams,
    ba: LinkParams,
) -> (Sim<Host>, NodeId, NodeId) {
    pair_with(seed, client, server, ab, ba, EndpointConfig::default())
}

/// As [`pair`], with an endpoint configuration for both hosts.
pub fn pair_with(
    seed: u64,
    client: Role,
    server: Role,
    ab: LinkParams,
    ba: LinkParams,
    cfg: EndpointConfig,
) -> (Sim<Host>, NodeId, NodeId) {
    let server = host(server, seed ^ 1, cfg.clone());
    let client = host(client, seed ^ 2, cfg);
    let xtp_testkit::Pair { mut sim, client: c, server: s, client_addr, server_addr } =
        xtp_testkit::pair(seed, client, server, ab, ba);
    sim.node_mut(c).peer = Some(server_addr);
    sim.node_mut(s).peer = Some(client_addr);
    start(sim.node_mut(s), Instant::ZERO);
    start(sim.node_mut(c), Instant::ZERO);
    (sim, c, s)
}

/// A sink on `port` with the default stream configuration (its receive
/// buffer right-sized as it reads).
pub fn sink(port: u16) -> Role {
    Role::Sink { port, cfg: ContextConfig::stream() }
}

pub fn stream_client(port: u16, messages: Vec<Vec<u8>>) -> Role {
    Role::Client { port, messages, cfg: ContextConfig::stream() }
}

pub fn transaction_client(port: u16, request: Vec<u8>) -> Role {
    Role::Client { port, messages: vec![request], cfg: ContextConfig::new(Service::Transaction) }
}

pub fn pattern(len: usize, salt: u64) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761).wrapping_add(salt) >> 7) as u8).collect()
}

/// Emits a packet into a fresh buffer.
pub fn emit(p: &PacketRepr<'_>) -> Bytes {
    let mut buf = vec![0u8; p.buffer_len()];
    p.emit(&mut buf).unwrap();
    Bytes::from(buf)
}

/// A FIRST for XTP `port` with key `key`, `seq` and `data` (a hand-made
/// initiator, for hostile-input tests).
pub fn first_packet(key: u64, seq: u64, port: u16, data: &[u8], options: Options) -> Bytes {
    use xtp_wire::{Address, AddressSegment, HeaderRepr, PacketType, TrafficSegment, TrafficSpec};
    let addr = Address::Ipv4 {
        dst: std::net::Ipv4Addr::LOCALHOST,
        src: std::net::Ipv4Addr::UNSPECIFIED,
        dport: port,
        sport: 0,
    };
    let p = PacketRepr {
        header: HeaderRepr { key, options, ptype: PacketType::First, sort: 0, sync: 1, seq },
        body: Body::First {
            address: AddressSegment { domain: 0, addr },
            traffic: TrafficSegment {
                service: Service::Stream,
                spec: TrafficSpec::Explicit { maxdata: 1400, inrate: 0, inburst: 0, outrate: 0, outburst: 0 },
            },
            btag: None,
            data,
        },
    };
    emit(&p)
}

/// Two endpoints joined by a perfect, instant wire (no simulator); packets
/// b sends to a are logged.
#[allow(unused_imports)]
pub use xtp_testkit::Wire;
