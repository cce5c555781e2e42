//! Two endpoints over a lossless, zero-delay virtual link on one core: the
//! protocol's own processing cost.
//!
//! * `pingpong/N`: one context; the client writes an N-byte message, the
//!   server reads it and writes it back, the client reads the echo. Each
//!   iteration is one round trip, including every control packet the protocol
//!   sends (status reports answer the SREQ on each message).
//! * `pingpong-among-10000/10`: as `pingpong/10`, with 10,000 other
//!   established, idle contexts on both endpoints.
//! * `bulk/checksum|nocheck`: one context streaming 1 MiB per iteration in
//!   1,400-byte packets, the receiver reading and reporting as it goes.
//! * `spoofed-first/full`: what one spoofed FIRST costs a server whose
//!   half-open table is already full (a flood in progress): demux miss,
//!   admission (shedding the oldest half-open context), the new context and
//!   its TCNTL answer — the per-datagram price of issue #13's FLOOD.
//!
//! Virtual time advances 1 µs per delivered datagram, and jumps to the next
//! timer when both endpoints are quiet before the expected bytes arrived.
//! Delivery copies each datagram once into a large receive buffer and splits
//! it off, the way the UDP driver receives (one allocation per 64 KiB, not per
//! datagram).

use std::hint::black_box;
use std::net::SocketAddr;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use xk_core::ArenaId;
use xk_time::{DeltaList, Duration, HeapQueue, Instant, TimerQueue, TimingWheel};
use xtp_proto::{ContextConfig, ContextId, Endpoint, EndpointConfig, Event, NoTrace};
use xtp_testkit::{Delivery, Wire};

/// The benchmark's two endpoints: the test kit's wire (client `a`, server
/// `b`), stepping 1 µs per datagram and receiving through a shared buffer as
/// the UDP driver does.
struct Pair<Q: TimerQueue<ArenaId> = HeapQueue<ArenaId>> {
    w: Wire<Q>,
    client: ContextId,
    server: Option<ContextId>,
}

impl Pair {
    fn new(cfg: ContextConfig) -> Self {
        Pair::with_timers(cfg)
    }
}

impl<Q: TimerQueue<ArenaId> + Default> Pair<Q> {
    fn with_timers(cfg: ContextConfig) -> Self {
        let a_addr: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let b_addr: SocketAddr = "10.0.0.2:1".parse().unwrap();
        // No per-peer context limit: one benchmark opens 10,000 contexts.
        let ep = EndpointConfig { max_contexts_per_peer: usize::MAX, ..EndpointConfig::default() };
        let mut a = Endpoint::<NoTrace, Q>::with_timer_queue(ep.clone(), 1, NoTrace);
        let mut b = Endpoint::<NoTrace, Q>::with_timer_queue(ep, 2, NoTrace);
        b.listen(7, cfg.clone()).unwrap();
        let client = a.connect(Instant::ZERO, b_addr, 7, cfg).unwrap();
        let mut w = Wire::new(a, a_addr, b, b_addr, Instant::ZERO);
        w.step = Duration::from_micros(1);
        w.delivery = Delivery::Arena;
        w.log = false;
        Pair { w, client, server: None }
    }

    /// Moves datagrams both ways until both are quiet; returns bytes the
    /// server read and the client read.
    fn pump(&mut self, echo: bool) -> (usize, usize) {
        let (mut to_server, mut to_client) = (0, 0);
        loop {
            let mut moved = self.w.from_a() > 0;
            let (b, now) = (&mut self.w.b, self.w.now);
            while let Some(ev) = b.poll_event() {
                match ev {
                    Event::Incoming { ctx, .. } => self.server = Some(ctx),
                    Event::Readable { ctx } => {
                        while let Some(c) = b.read(now, ctx) {
                            to_server += c.data.len();
                            if echo {
                                b.write(now, ctx, c.data, c.eom, None).unwrap();
                            }
                        }
                    }
                    _ => {}
                }
            }
            moved |= self.w.from_b() > 0;
            let (a, now) = (&mut self.w.a, self.w.now);
            while let Some(ev) = a.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(c) = a.read(now, ctx) {
                        to_client += c.data.len();
                    }
                }
            }
            if !moved {
                return (to_server, to_client);
            }
        }
    }

    /// Pumps until the server has read `want.0` and the client `want.1`
    /// bytes, firing timers when the endpoints fall quiet first: the pacer,
    /// the tail-loss probe and delayed reports wait for time to pass, as they
    /// would behind a real driver, so virtual time jumps to the next
    /// deadline. Returns the bytes read on each side.
    fn exchange(&mut self, echo: bool, want: (usize, usize)) -> (usize, usize) {
        let (mut s, mut c) = self.pump(echo);
        for _ in 0..10_000 {
            if s >= want.0 && c >= want.1 || !self.w.fire_next_timer(None) {
                break;
            }
            let (ds, dc) = self.pump(echo);
            s += ds;
            c += dc;
        }
        (s, c)
    }

    /// One timed round trip: the client writes `msg` as a message and the
    /// server echoes it back whole.
    fn round_trip(&mut self, msg: &Bytes) -> usize {
        self.w.a.write(self.w.now, self.client, msg.clone(), true, None).unwrap();
        let n = msg.len();
        let (s, c) = self.exchange(true, (n, n));
        assert_eq!((s, c), (n, n));
        c
    }
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine/pingpong");
    for size in [10usize, 1000, 10_000] {
        let mut p = Pair::new(ContextConfig::stream());
        let msg = Bytes::from(vec![0x42u8; size]);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter(size), |b| b.iter(|| black_box(p.round_trip(&msg))));
    }
    group.finish();
}

/// Ping-pong on one context while 10,000 other established contexts sit idle
/// on both endpoints: lookup and timer costs must not grow with their number.
fn pingpong_among_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine/pingpong-among-10000");
    group.throughput(Throughput::Elements(1));
    among_many::<HeapQueue<ArenaId>>(&mut group, "10");
    group.finish();
}

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn among_many<Q: TimerQueue<ArenaId> + Default>(group: &mut Group<'_>, name: &str) {
    let mut p = Pair::<Q>::with_timers(ContextConfig::stream());
    let others: Vec<ContextId> = (0..10_000)
        .map(|_| {
            let id = p.w.a.connect(p.w.now, p.w.ba, 7, ContextConfig::stream()).unwrap();
            p.w.a.write(p.w.now, id, Bytes::from_static(b"x"), true, None).unwrap();
            id
        })
        .collect();
    p.exchange(false, (10_000, 0));
    assert_eq!(p.w.a.context_count(), 10_001);
    assert_eq!(p.w.b.context_count(), 10_001);
    let msg = Bytes::from(vec![0x42u8; 10]);
    group.bench_function(name, |b| b.iter(|| black_box(p.round_trip(&msg))));
    black_box(others);
}

fn bulk(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine/bulk");
    let chunk = Bytes::from(vec![0x5au8; 1 << 20]);
    for nocheck in [false, true] {
        let mut cfg = ContextConfig::stream();
        cfg.nocheck = nocheck;
        let mut p = Pair::new(cfg);
        group.throughput(Throughput::Bytes(chunk.len() as u64));
        let name = if nocheck { "nocheck" } else { "checksum" };
        group.bench_function(name, |b| {
            b.iter(|| {
                p.w.a.write(p.w.now, p.client, chunk.clone(), false, None).unwrap();
                let (s, _) = p.exchange(false, (chunk.len(), 0));
                assert_eq!(s, chunk.len());
                black_box(s)
            })
        });
    }
    group.finish();
}

/// A server under a spoofed-FIRST flood: each iteration hands it one more
/// FIRST (a real one, made by a client endpoint) from a new address and
/// takes its answer, with `max_half_open` contexts already held so every
/// FIRST also sheds the oldest.
fn spoofed_first(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine/spoofed-first");
    let cfg = EndpointConfig { max_half_open: 16_384, ..EndpointConfig::default() };
    let mut server = Endpoint::new(cfg.clone(), 2);
    server.listen(7, ContextConfig::stream()).unwrap();
    let server_addr: SocketAddr = "10.0.0.2:1".parse().unwrap();
    let mut client = Endpoint::new(cfg, 1);
    let ctx = client.connect(Instant::ZERO, server_addr, 7, ContextConfig::stream()).unwrap();
    client.write(Instant::ZERO, ctx, Bytes::from(vec![0x5a; 64]), true, None).unwrap();
    let mut buf = vec![0u8; 2048];
    let t = client.poll_transmit(Instant::ZERO, &mut buf).expect("the client's FIRST");
    let first = Bytes::copy_from_slice(&buf[..t.len]);
    let mut n: u32 = 0;
    let mut now = Instant::ZERO;
    let flood = |server: &mut Endpoint, now: Instant, n: &mut u32, buf: &mut [u8]| {
        *n = n.wrapping_add(1);
        let from = SocketAddr::from((
            [172, 16 + (*n >> 24) as u8 % 16, (*n >> 8) as u8, *n as u8],
            1024 + (*n >> 16) as u16,
        ));
        server.handle_datagram(now, from, first.clone());
        let mut sent = 0;
        while server.poll_transmit(now, buf).is_some() {
            sent += 1;
        }
        while server.poll_event().is_some() {}
        sent
    };
    for _ in 0..20_000 {
        now += Duration::from_micros(5);
        flood(&mut server, now, &mut n, &mut buf);
    }
    assert_eq!(server.stats().half_open, 16_384, "the half-open table is full before timing");
    group.throughput(Throughput::Elements(1));
    group.bench_function("full", |b| {
        b.iter(|| {
            now += Duration::from_micros(5);
            black_box(flood(&mut server, now, &mut n, &mut buf))
        })
    });
    group.finish();
}

/// The same ping-pong with each of `xk-time`'s timer queues in the endpoint
/// (issue #16: the queue is a type parameter).
fn pingpong_timers(c: &mut Criterion) {
    fn one<Q: TimerQueue<ArenaId> + Default>(group: &mut Group<'_>, name: &str) {
        let mut p = Pair::<Q>::with_timers(ContextConfig::stream());
        let msg = Bytes::from(vec![0x42u8; 10]);
        group.bench_function(name, |b| b.iter(|| black_box(p.round_trip(&msg))));
    }
    let mut group = c.benchmark_group("engine/pingpong-timers");
    group.throughput(Throughput::Elements(1));
    one::<HeapQueue<ArenaId>>(&mut group, "heap");
    one::<TimingWheel<ArenaId>>(&mut group, "wheel");
    one::<DeltaList<ArenaId>>(&mut group, "delta-list");
    among_many::<HeapQueue<ArenaId>>(&mut group, "heap-among-10000");
    among_many::<TimingWheel<ArenaId>>(&mut group, "wheel-among-10000");
    group.finish();
}

criterion_group!(benches, pingpong, pingpong_among_many, bulk, spoofed_first, pingpong_timers);
criterion_main!(benches);
