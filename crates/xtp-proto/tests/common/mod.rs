//! Test harness: XTP endpoints as simulator nodes with a small scripted
//! application on top.

// Each test binary uses a different part of the harness.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;

use bytes::Bytes;
use xk_netemu::LinkParams;
use xk_sim::{Node, NodeId, Sim};
use xk_time::Instant;
use xtp_proto::{Chunk, CloseReason, ContextConfig, ContextId, Endpoint, EndpointConfig, Event, Service};
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
    /// Accept on `port` and read everything, counting bytes only.
    Sink { port: u16 },
}

pub struct Host {
    pub ep: Endpoint,
    pub role: Role,
    pub peer: Option<SocketAddr>,
    buf: Vec<u8>,
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

impl Host {
    pub fn new(role: Role, seed: u64) -> Self {
        Self::with_config(role, seed, EndpointConfig::default())
    }

    pub fn with_config(role: Role, seed: u64, cfg: EndpointConfig) -> Self {
        Host {
            peer_alloc: xtp_proto::INITIAL_ALLOC,
            flow_violation: None,
            ep: Endpoint::new(cfg, seed),
            role,
            peer: None,
            buf: vec![0u8; 2048],
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

    pub fn start(&mut self, now: Instant) {
        match self.role.clone() {
            Role::Server { port, .. } | Role::Sink { port } => {
                self.ep.listen(port, ContextConfig::stream()).unwrap();
            }
            Role::Bulk { port, cfg } => {
                self.ctx = Some(self.ep.connect(now, self.peer.unwrap(), port, cfg).unwrap());
                self.bulk_data = Bytes::from(pattern(1 << 20, 9));
                self.top_up(now);
            }
            Role::Client { port, messages, cfg } => {
                let ctx = self.ep.connect(now, self.peer.unwrap(), port, cfg).unwrap();
                self.ctx = Some(ctx);
                self.pending =
                    messages.into_iter().enumerate().map(|(i, m)| (Bytes::from(m), i as u64)).collect();
                self.client_closed = false;
                self.feed_pending(now);
            }
            Role::Datagram { port, data, acked } => {
                let ctx =
                    self.ep.send_datagram(now, self.peer.unwrap(), port, Bytes::from(data), acked).unwrap();
                self.ctx = Some(ctx);
            }
        }
    }

    /// Writes client messages while the send buffer takes them (a refused
    /// write is retried on the next event), then closes.
    fn feed_pending(&mut self, now: Instant) {
        let Some(ctx) = self.ctx else { return };
        while let Some((m, tag)) = self.pending.front() {
            match self.ep.write(now, ctx, m.clone(), true, Some(*tag)) {
                Ok(()) => {
                    self.pending.pop_front();
                }
                Err(xtp_proto::WriteError::WouldBlock) => return,
                Err(e) => panic!("client write: {e}"),
            }
        }
        if !self.client_closed {
            self.client_closed = true;
            self.ep.close(now, ctx);
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
    fn top_up(&mut self, now: Instant) {
        let Some(ctx) = self.ctx else { return };
        let Some(stats) = self.ep.context_stats(ctx) else { return };
        let target = stats.send_window.min(1 << 30).saturating_mul(2).max(4 << 20);
        let piece = match self.write_size {
            0 => self.bulk_data.clone(),
            n => self.bulk_data.slice(..n.min(self.bulk_data.len())),
        };
        while self.ep.unacked_bytes(ctx) < target {
            if self.ep.write(now, ctx, piece.clone(), false, None).is_err() {
                return;
            }
        }
    }

    fn app(&mut self, now: Instant) {
        let sink = matches!(self.role, Role::Sink { .. });
        while let Some(ev) = self.ep.poll_event() {
            match &ev {
                Event::Incoming { ctx, .. } => self.ctx = Some(*ctx),
                Event::Readable { ctx } if sink => {
                    while let Some(c) = self.ep.read(now, *ctx) {
                        self.sink_bytes += c.data.len() as u64;
                    }
                }
                Event::Readable { ctx } => {
                    while let Some(c) = self.ep.read(now, *ctx) {
                        self.chunks.push(c);
                    }
                }
                Event::PeerFinished { ctx } => {
                    while let Some(c) = self.ep.read(now, *ctx) {
                        self.chunks.push(c);
                    }
                    if let Role::Server { reply, .. } = &self.role {
                        if let Some(r) = reply {
                            let _ = self.ep.write(now, *ctx, Bytes::from(r.clone()), true, Some(7));
                        }
                        self.ep.close(now, *ctx);
                    }
                }
                Event::Gap { len, .. } => self.gaps += len,
                Event::Closed { ctx, reason } => {
                    while let Some(c) = self.ep.read(now, *ctx) {
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
            self.top_up(now);
        }
        if !self.client_closed {
            self.feed_pending(now);
        }
    }
}

impl Node for Host {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: Vec<u8>) {
        // Watch flow control from outside the engine: remember the largest
        // allocation the peer advertised in a packet that verifies. (Not in
        // the long bulk runs, where the second parse would double the cost.)
        if !self.is_bulk()
            && let Ok(p) = PacketRepr::parse(&data)
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
        self.ep.handle_datagram(now, from, Bytes::from(data));
        self.app(now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now);
        self.app(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        let t = self.ep.poll_transmit(now, &mut self.buf)?;
        let out = self.buf[..t.len].to_vec();
        if !self.is_bulk()
            && let Ok(p) = PacketRepr::parse(&out)
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
            eprintln!("{now} -> {}: {}", t.dst, xtp_wire::Pretty(&out));
        }
        self.app(now);
        Some((t.dst, out))
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.ep.poll_timeout()
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
    let mut sim = Sim::new(seed);
    let (s, saddr) = sim.add_node(Host::with_config(server, seed ^ 1, cfg.clone()));
    let (c, caddr) = sim.add_node(Host::with_config(client, seed ^ 2, cfg));
    sim.node_mut(c).peer = Some(saddr);
    sim.node_mut(s).peer = Some(caddr);
    sim.connect(c, s, ab, ba).unwrap();
    sim.node_mut(s).start(Instant::ZERO);
    sim.node_mut(c).start(Instant::ZERO);
    (sim, c, s)
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

/// Two endpoints joined by a perfect, instant wire (no simulator): `a` at
/// `aa`, `b` at `ba`. Packets b sends to a pass through `filter` (false
/// drops them) and are logged.
pub struct Wire {
    pub a: Endpoint,
    pub aa: SocketAddr,
    pub b: Endpoint,
    pub ba: SocketAddr,
    pub now: Instant,
    /// Every packet b sent to a.
    pub b_to_a: Vec<Bytes>,
    buf: Vec<u8>,
}

impl Wire {
    pub fn new(a: Endpoint, aa: SocketAddr, b: Endpoint, ba: SocketAddr, now: Instant) -> Self {
        Wire { a, aa, b, ba, now, b_to_a: Vec::new(), buf: vec![0u8; 2048] }
    }

    /// Moves packets both ways until both are quiet at `now`.
    pub fn exchange(&mut self) {
        for _ in 0..1_000_000 {
            let mut moved = false;
            while let Some(t) = self.a.poll_transmit(self.now, &mut self.buf) {
                if t.dst == self.ba {
                    self.b.handle_datagram(self.now, self.aa, Bytes::copy_from_slice(&self.buf[..t.len]));
                }
                moved = true;
            }
            while let Some(t) = self.b.poll_transmit(self.now, &mut self.buf) {
                let d = Bytes::copy_from_slice(&self.buf[..t.len]);
                if t.dst == self.aa {
                    self.b_to_a.push(d.clone());
                    self.a.handle_datagram(self.now, self.ba, d);
                }
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    /// Runs for `d` of virtual time, jumping between timers.
    pub fn run(&mut self, d: xk_time::Duration) {
        let end = self.now + d;
        loop {
            self.exchange();
            let next = [self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => {
                    self.now = end;
                    return;
                }
            }
        }
    }
}
