//! A stateful fuzz target: a client and a server endpoint joined by a
//! scripted network, driven by an arbitrary byte string.
//!
//! Each input byte string is read as a program of small operations:
//! application calls on either side (write, read, close, abort), network
//! actions on the packets in flight (deliver, drop, duplicate, reorder,
//! replay an old packet, flip a bit, truncate, forge a header or control
//! field and re-checksum it, inject a spoofed FIRST) and time advances. After
//! every operation and at the end, [`run`] checks invariants:
//!
//! * no panic (the caller catches it; overflow checks are on in test builds);
//! * what each application reads is exactly the stream the other wrote, in
//!   order, without gaps or duplicates (a prefix of it);
//! * state stays bounded: contexts, half-open memory, unacknowledged and
//!   unread bytes within their limits;
//! * output towards spoofed addresses stays within the amplification bound;
//! * counters agree with what went in and out;
//! * every context ends: after an abort and 1,300 s with a perfect network
//!   (keep-alive + retry span + linger + unread hold), both endpoints hold
//!   nothing.
//!
//! Forged packets never rewrite the sequence number of a data packet into
//! the window or the options of a data packet: without authentication an
//! on-path forger *can* inject data (docs/SECURITY.md), and the delivery
//! check would report the protocol working as designed. Forged data `seq`
//! values lie far beyond any window instead, and must be dropped.
//!
//! Stable Rust only: `xpress fuzz` (crates/xpress/src/fuzz_cmd.rs) generates inputs from a
//! seed and mutates those that reach new states; the corpus under
//! `fuzz/corpus/endpoint` is replayed by `tests/fuzz_corpus.rs`.

use std::collections::VecDeque;
use std::net::SocketAddr;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_wire::{Body, HeaderRepr, Options, PacketRepr, PacketType};

use crate::{ContextConfig, ContextId, Endpoint, EndpointConfig, Event, WriteError};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const PORT: u16 = 7;

/// What one run did (for coverage-like feedback and reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Operations executed.
    pub ops: u64,
    /// Packets delivered to an endpoint.
    pub delivered: u64,
    /// Bytes read by the server and the client applications.
    pub read: [u64; 2],
    /// Contexts the server accepted.
    pub accepted: u64,
    /// A signature of the states reached (which events and counters became
    /// non-zero), for the fuzzer's "new behaviour" feedback.
    pub signature: u64,
}

/// An invariant that did not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The byte at stream offset `i` of side `side`'s data.
fn pattern(side: usize, i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761).wrapping_add(side as u64 * 77) >> 11) as u8
}

struct Packet {
    from: SocketAddr,
    to: SocketAddr,
    data: Bytes,
    /// A bit was flipped: no second flip (two flips can cancel in the
    /// 16-bit Internet checksum, and undetectable corruption is not the
    /// engine's to find).
    flipped: bool,
}

struct Side {
    ep: Endpoint,
    addr: SocketAddr,
    ctx: Option<ContextId>,
    written: u64,
    read: u64,
    closed: bool,
}

struct World {
    sides: [Side; 2],
    now: Instant,
    /// In flight towards each side.
    wire: [VecDeque<Packet>; 2],
    /// Packets seen on the wire (for replay), bounded.
    history: VecDeque<Packet>,
    spoof_rx: u64,
    spoof_tx: u64,
    datagrams_in: [u64; 2],
    datagrams_out: [u64; 2],
    stats: RunStats,
    buf: Vec<u8>,
}

/// Reads the input a byte at a time (zeros once it runs out).
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |a, _| a << 8 | u64::from(self.byte()))
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

fn endpoint_config() -> EndpointConfig {
    // Small limits, so the bounds are reached within a short input.
    EndpointConfig {
        max_half_open: 8,
        half_open_memory: 64 << 10,
        max_contexts: 16,
        max_contexts_per_peer: 4,
        ..EndpointConfig::default()
    }
}

fn context_config() -> ContextConfig {
    let mut c = ContextConfig::stream();
    c.recv_buffer = 16 << 10;
    c.recv_buffer_max = 64 << 10;
    c.send_buffer = 32 << 10;
    c.mss = 600;
    c
}

impl World {
    fn new(seed: u64) -> Self {
        let side = |i: usize| Side {
            ep: Endpoint::new(endpoint_config(), seed ^ i as u64),
            addr: SocketAddr::from(([10, 0, 0, 1 + i as u8], 4000)),
            ctx: None,
            written: 0,
            read: 0,
            closed: false,
        };
        let mut w = World {
            sides: [side(CLIENT), side(SERVER)],
            now: Instant::from_secs(1),
            wire: [VecDeque::new(), VecDeque::new()],
            history: VecDeque::new(),
            spoof_rx: 0,
            spoof_tx: 0,
            datagrams_in: [0; 2],
            datagrams_out: [0; 2],
            stats: RunStats::default(),
            buf: vec![0u8; 2048],
        };
        w.sides[SERVER].ep.listen(PORT, context_config()).expect("a fresh endpoint listens");
        let server = w.sides[SERVER].addr;
        let ctx = w.sides[CLIENT].ep.connect(w.now, server, PORT, context_config()).expect("connect");
        w.sides[CLIENT].ctx = Some(ctx);
        w
    }

    fn mark(&mut self, bit: u32) {
        self.stats.signature |= 1 << (bit % 64);
    }

    /// Moves every packet the endpoints want to send onto the wire.
    fn collect(&mut self) -> Result<(), Failure> {
        for i in 0..2 {
            let mut n = 0;
            while let Some(t) = self.sides[i].ep.poll_transmit(self.now, &mut self.buf) {
                n += 1;
                if n > 100_000 {
                    return Err(Failure(format!("side {i} sends without end")));
                }
                self.datagrams_out[i] += 1;
                let data = Bytes::copy_from_slice(&self.buf[..t.len]);
                let to = t.dst;
                if to == self.sides[1 - i].addr {
                    self.wire[1 - i].push_back(Packet { from: self.sides[i].addr, to, data, flipped: false });
                } else {
                    self.spoof_tx += data.len() as u64; // to a spoofed address: into the void
                    self.mark(1);
                }
            }
        }
        Ok(())
    }

    fn deliver(&mut self, p: Packet) -> Result<(), Failure> {
        let i = if p.to == self.sides[CLIENT].addr { CLIENT } else { SERVER };
        if self.history.len() >= 64 {
            self.history.pop_front();
        }
        self.history.push_back(Packet { from: p.from, to: p.to, data: p.data.clone(), flipped: p.flipped });
        self.datagrams_in[i] += 1;
        self.stats.delivered += 1;
        self.sides[i].ep.handle_datagram(self.now, p.from, p.data);
        self.app(i)
    }

    /// The applications: the server adopts the first context from the
    /// client's address; both read everything and check it.
    fn app(&mut self, i: usize) -> Result<(), Failure> {
        let client_addr = self.sides[CLIENT].addr;
        while let Some(ev) = self.sides[i].ep.poll_event() {
            match ev {
                Event::Incoming { ctx, peer, .. } => {
                    self.stats.accepted += 1;
                    self.mark(2);
                    if i == SERVER && peer == client_addr && self.sides[SERVER].ctx.is_none() {
                        self.sides[SERVER].ctx = Some(ctx);
                    }
                }
                Event::Closed { .. } => self.mark(3),
                Event::PeerFinished { .. } => self.mark(4),
                Event::Gap { .. } => self.mark(5),
                Event::Acked { .. } => self.mark(6),
                Event::Readable { .. } => {}
            }
        }
        self.read_all(i)
    }

    fn read_all(&mut self, i: usize) -> Result<(), Failure> {
        let Some(ctx) = self.sides[i].ctx else { return Ok(()) };
        let other = 1 - i;
        let written = self.sides[other].written;
        while let Some(c) = self.sides[i].ep.read(self.now, ctx) {
            let s = &mut self.sides[i];
            if c.seq != s.read {
                return Err(Failure(format!("side {i} read seq {} after {} bytes", c.seq, s.read)));
            }
            for (k, b) in c.data.iter().enumerate() {
                let at = c.seq + k as u64;
                if *b != pattern(other, at) {
                    return Err(Failure(format!(
                        "side {i}: byte {at} is {b:#x}, was written {:#x}",
                        pattern(other, at)
                    )));
                }
            }
            s.read += c.data.len() as u64;
            self.stats.read[i] = s.read;
            if s.read > written {
                return Err(Failure(format!("side {i} read {} bytes of {written} written", s.read)));
            }
        }
        Ok(())
    }

    fn advance(&mut self, d: Duration) -> Result<(), Failure> {
        let end = self.now + d;
        let mut guard = 0;
        loop {
            let next = [self.sides[0].ep.poll_timeout(), self.sides[1].ep.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    for i in 0..2 {
                        self.sides[i].ep.handle_timeout(self.now);
                        self.app(i)?;
                    }
                    self.collect()?;
                }
                _ => break,
            }
            guard += 1;
            if guard > 1_000_000 {
                return Err(Failure("timers fire without end".into()));
            }
        }
        self.now = end;
        for i in 0..2 {
            self.sides[i].ep.handle_timeout(self.now);
            self.app(i)?;
        }
        self.collect()
    }

    fn write(&mut self, i: usize, n: usize) -> Result<(), Failure> {
        let Some(ctx) = self.sides[i].ctx else { return Ok(()) };
        let s = &mut self.sides[i];
        let data: Vec<u8> = (0..n as u64).map(|k| pattern(i, s.written + k)).collect();
        match s.ep.write(self.now, ctx, Bytes::from(data), false, None) {
            Ok(()) => s.written += n as u64,
            Err(WriteError::WouldBlock) => self.mark(7),
            Err(_) => self.mark(8),
        }
        Ok(())
    }

    /// A header or control field rewritten, with a valid checksum.
    fn forge(&mut self, dir: usize, c: &mut Cursor<'_>) {
        let Some(p) = self.wire[dir].pop_front() else { return };
        let field = c.byte();
        let value = c.u64();
        let Ok(mut repr) = PacketRepr::parse(&p.data) else { return };
        let data_packet = matches!(repr.body, Body::Data { .. } | Body::First { .. });
        match field % 6 {
            0 => repr.header.key = value,
            1 if data_packet => repr.header.seq = value | 1 << 40, // beyond any window
            1 => repr.header.seq = value,
            2 => repr.header.sync = value as u32,
            3 if !data_packet => repr.header.options = Options::from_bits(value as u32),
            4 | 5 => match &mut repr.body {
                Body::Cntl(ctl) => {
                    if field & 8 == 0 {
                        ctl.rseq = value;
                    } else if field & 16 == 0 {
                        ctl.alloc = value;
                    } else {
                        ctl.echo = value as u32;
                    }
                }
                Body::Ecntl(e) => e.control.rseq = value,
                Body::Tcntl { control, .. } if field & 8 == 0 => control.xkey = value,
                // A hostile traffic spec (G28): the peer's maxdata caps our
                // packets and below the floor refuses the context, so a
                // FIRST's, TCNTL's or JCNTL's is rewritten to an edge value
                // or an arbitrary one.
                Body::Tcntl { traffic, .. } | Body::Jcntl { traffic, .. } | Body::First { traffic, .. } => {
                    if forge_maxdata(traffic, value) {
                        self.mark(24);
                    }
                }
                Body::Diag(d) => d.code = (value % 9) as u32,
                _ => repr.header.ptype = PacketType::Cntl,
            },
            _ => {}
        }
        if repr.header.ptype == PacketType::Cntl && !matches!(repr.body, Body::Cntl(_)) {
            return; // the type must match the body: keep it well-formed
        }
        let mut out = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut out).is_ok() {
            self.mark(9);
            self.wire[dir].push_front(Packet {
                from: p.from,
                to: p.to,
                data: Bytes::from(out),
                flipped: p.flipped,
            });
        }
    }

    fn spoofed_first(&mut self, c: &mut Cursor<'_>) -> Result<(), Failure> {
        let r = c.u64();
        let from = SocketAddr::from(([172, 16, (r >> 8) as u8, r as u8], 1024 + (r >> 16) as u16 % 8));
        let mut buf = vec![0u8; 2048];
        let first = PacketRepr {
            header: HeaderRepr {
                key: (r >> 1) & !xtp_wire::RTN | 1 << 32,
                options: Options::SREQ,
                ptype: PacketType::First,
                sort: 0,
                sync: 1,
                seq: 0,
            },
            body: Body::First {
                address: xtp_wire::AddressSegment {
                    domain: 0,
                    addr: xtp_wire::Address::Ipv4 {
                        dst: std::net::Ipv4Addr::new(10, 0, 0, 2),
                        src: std::net::Ipv4Addr::UNSPECIFIED,
                        dport: PORT,
                        sport: 0,
                    },
                },
                traffic: xtp_wire::TrafficSegment {
                    service: xtp_wire::Service::Stream,
                    spec: xtp_wire::TrafficSpec::Explicit {
                        maxdata: 600,
                        inrate: 0,
                        inburst: 0,
                        outrate: 0,
                        outburst: 0,
                    },
                },
                btag: None,
                data: &[0x42; 20],
            },
        };
        let Ok(n) = first.emit(&mut buf) else { return Ok(()) };
        self.spoof_rx += n as u64;
        self.datagrams_in[SERVER] += 1;
        self.sides[SERVER].ep.handle_datagram(self.now, from, Bytes::copy_from_slice(&buf[..n]));
        self.mark(10);
        self.app(SERVER)
    }

    /// Invariants that hold after every operation.
    fn check(&self) -> Result<(), Failure> {
        let cfg = endpoint_config();
        let cc = context_config();
        for (i, s) in self.sides.iter().enumerate() {
            let st = s.ep.stats();
            if s.ep.context_count() > cfg.max_contexts {
                return Err(Failure(format!("side {i}: {} contexts", s.ep.context_count())));
            }
            if st.half_open as usize > cfg.max_half_open || st.half_open_bytes > cfg.half_open_memory as u64 {
                return Err(Failure(format!(
                    "side {i}: half-open {} / {} B",
                    st.half_open, st.half_open_bytes
                )));
            }
            if st.half_open as usize > s.ep.context_count() {
                return Err(Failure(format!("side {i}: half-open gauge {} > contexts", st.half_open)));
            }
            if st.datagrams_in != self.datagrams_in[i] || st.datagrams_out != self.datagrams_out[i] {
                return Err(Failure(format!(
                    "side {i}: counters say {}/{} datagrams in/out, {}/{} were",
                    st.datagrams_in, st.datagrams_out, self.datagrams_in[i], self.datagrams_out[i]
                )));
            }
            if let Some(ctx) = s.ctx {
                // The send window term may lift the limit; 1 GiB caps it.
                if s.ep.unacked_bytes(ctx) > (cc.send_buffer as u64).max(2 << 30) + 10_000 {
                    return Err(Failure(format!("side {i}: {} B unacked", s.ep.unacked_bytes(ctx))));
                }
                if s.ep.readable_bytes(ctx) > cc.recv_buffer_max as u64 {
                    return Err(Failure(format!("side {i}: {} B unread", s.ep.readable_bytes(ctx))));
                }
            }
        }
        if self.spoof_tx > 3 * self.spoof_rx {
            return Err(Failure(format!(
                "{} B sent to spoofed addresses for {} B received",
                self.spoof_tx, self.spoof_rx
            )));
        }
        Ok(())
    }
}

/// Rewrites an explicit traffic spec's `maxdata`: the edges around
/// "no constraint" (0), the floor (72, 73, 74: `MIN_MAXDATA` is 73), the
/// header arithmetic's limits (1, u32::MAX − 1, u32::MAX) half the time,
/// any value otherwise. Returns whether there was a spec to rewrite.
fn forge_maxdata(traffic: &mut xtp_wire::TrafficSegment, value: u64) -> bool {
    const EDGES: [u32; 8] = [0, 1, 72, 73, 74, 105, u32::MAX - 1, u32::MAX];
    let xtp_wire::TrafficSpec::Explicit { maxdata, .. } = &mut traffic.spec else { return false };
    *maxdata = if value & 1 == 0 { EDGES[(value >> 1) as usize % EDGES.len()] } else { (value >> 1) as u32 };
    true
}

/// Runs one input. `Err` names the invariant that failed; a panic is a
/// failure too (the caller catches it).
pub fn run(input: &[u8]) -> Result<RunStats, Failure> {
    let mut c = Cursor(input);
    let seed = u64::from(c.byte()) << 8 | u64::from(c.byte());
    let mut w = World::new(seed);
    w.collect()?;
    while !c.done() && w.stats.ops < 4096 {
        w.stats.ops += 1;
        let op = c.byte();
        let dir = usize::from(op >> 7); // which way the network op acts
        match op & 0x1f {
            0..=3 => w.write(CLIENT, 1 + usize::from(c.byte()) * 37)?,
            4 => w.write(SERVER, 1 + usize::from(c.byte()) * 37)?,
            5 | 6 => w.read_all(usize::from(op & 1 == 0))?,
            7 => {
                let i = usize::from(c.byte() & 1);
                if let Some(ctx) = w.sides[i].ctx
                    && !w.sides[i].closed
                {
                    w.sides[i].closed = true;
                    w.sides[i].ep.close(w.now, ctx);
                }
            }
            8..=13 => {
                if let Some(p) = w.wire[dir].pop_front() {
                    w.deliver(p)?;
                }
            }
            14 => {
                w.wire[dir].pop_front();
                w.mark(11);
            }
            15 => {
                if let Some(p) = w.wire[dir].front() {
                    let copy = Packet { from: p.from, to: p.to, data: p.data.clone(), flipped: p.flipped };
                    w.wire[dir].push_back(copy);
                }
            }
            16 => {
                if w.wire[dir].len() >= 2 {
                    w.wire[dir].swap(0, 1);
                    w.mark(12);
                }
            }
            17 => {
                let k = usize::from(c.byte());
                if !w.history.is_empty() {
                    let p = &w.history[k % w.history.len()];
                    let copy = Packet { from: p.from, to: p.to, data: p.data.clone(), flipped: p.flipped };
                    w.deliver(copy)?;
                    w.mark(13);
                }
            }
            18 => {
                let (at, bit) = (usize::from(c.byte()), c.byte() % 8);
                if let Some(p) = w.wire[dir].front_mut()
                    && !p.flipped
                {
                    let mut v = p.data.to_vec();
                    if !v.is_empty() {
                        let at = at % v.len();
                        v[at] ^= 1 << bit;
                        p.data = Bytes::from(v);
                        p.flipped = true;
                    }
                }
            }
            19 => {
                let keep = usize::from(c.byte());
                if let Some(p) = w.wire[dir].front_mut() {
                    p.data.truncate(keep % (p.data.len() + 1));
                }
            }
            20 | 21 => w.forge(dir, &mut c),
            22 => w.spoofed_first(&mut c)?,
            23 => {
                let i = usize::from(c.byte() & 1);
                if let Some(ctx) = w.sides[i].ctx {
                    w.sides[i].ep.abort(w.now, ctx);
                }
            }
            24..=27 => w.advance(Duration::from_millis(u64::from(c.byte()) * 10))?,
            28 => w.advance(Duration::from_secs(u64::from(c.byte())))?,
            _ => {
                // Deliver everything in flight, in order.
                for d in 0..2 {
                    while let Some(p) = w.wire[d].pop_front() {
                        w.deliver(p)?;
                        w.collect()?;
                    }
                }
            }
        }
        w.collect()?;
        w.check()?;
    }
    // Every context ends: abort what is open, then run a long while with a
    // perfect network. Nothing may be left (linger, unread data and
    // half-open contexts are all bounded in time).
    for i in 0..2 {
        if let Some(ctx) = w.sides[i].ctx {
            w.sides[i].ep.abort(w.now, ctx);
        }
    }
    // The longest a context may stay once its peer is silent: a keep-alive
    // (30 s), the retry span before abandoning ((max_retries + 1) x max_rto
    // = 540 s at worst), the linger (as long again) and `unread_hold`
    // (60 s): under 1,300 s.
    for _ in 0..130 {
        for d in 0..2 {
            while let Some(p) = w.wire[d].pop_front() {
                w.deliver(p)?;
                w.collect()?;
            }
        }
        w.advance(Duration::from_secs(10))?;
        w.check()?;
    }
    for (i, s) in w.sides.iter().enumerate() {
        if s.ep.context_count() != 0 {
            return Err(Failure(format!(
                "side {i} still holds {} contexts after 1,300 s",
                s.ep.context_count()
            )));
        }
    }
    let st = w.sides[SERVER].ep.stats();
    for (bit, v) in [
        (14, st.malformed),
        (15, st.unknown_context),
        (16, st.half_open_evicted),
        (17, st.refused_max_contexts),
        (18, st.refused_peer_limit),
        (19, st.amplification_blocked),
        (20, st.stale_first),
        (21, st.sequence_overflow),
        (22, st.unread_dropped),
        (23, st.diags_sent),
    ] {
        if v > 0 {
            w.mark(bit);
        }
    }
    w.stats.signature ^= (w.stats.read[0].min(64) << 32) ^ (w.stats.read[1].min(64) << 40);
    Ok(w.stats)
}
