//! Endpoint-level behaviour: SORT priority, DIAG rate limiting, malformed
//! input, keep-alive, and abandoning a context whose peer vanished.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_netemu::parse_line;
use xk_time::Instant;
use xtp_proto::{CloseReason, ContextConfig, Endpoint, EndpointConfig};
use xtp_wire::{Body, PacketRepr};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn drain(ep: &mut Endpoint, now: Instant) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push((t.dst, buf[..t.len].to_vec()));
    }
    out
}

#[test]
fn sort_sends_the_most_urgent_context_first() {
    let mut ep = Endpoint::new(EndpointConfig::default(), 1);
    let now = Instant::ZERO;
    let mut low = ContextConfig::stream();
    low.sort = Some(1);
    let mut high = ContextConfig::stream();
    high.sort = Some(900);
    let a = ep.connect(now, addr("10.0.0.2:1"), 7, low).unwrap();
    let b = ep.connect(now, addr("10.0.0.3:1"), 7, high).unwrap();
    ep.write(now, a, Bytes::from(vec![1u8; 20_000]), true, None).unwrap();
    ep.write(now, b, Bytes::from(vec![2u8; 20_000]), true, None).unwrap();
    let sent = drain(&mut ep, now);
    let firsts: Vec<SocketAddr> = sent.iter().map(|(d, _)| *d).collect();
    let n_b = firsts.iter().filter(|d| **d == addr("10.0.0.3:1")).count();
    assert!(n_b > 5);
    assert!(firsts[..n_b].iter().all(|d| *d == addr("10.0.0.3:1")), "urgent context first: {firsts:?}");
    // The SORT option and value are on the wire.
    let p = PacketRepr::parse(&sent[0].1).unwrap();
    assert_eq!(p.header.sort, 900);
    assert!(p.header.options.contains(xtp_wire::Options::SORT));
}

#[test]
fn bad_input_is_counted_and_diags_are_rate_limited() {
    let mut ep = Endpoint::new(EndpointConfig { diag_rate: 5, ..EndpointConfig::default() }, 2);
    let now = Instant::from_secs(1);
    // Garbage of every length never panics and is counted.
    for len in 0..200usize {
        ep.handle_datagram(now, addr("10.0.0.9:1"), Bytes::from(vec![0xa5u8; len]));
    }
    assert_eq!(ep.stats().malformed, 200);
    // 50 valid DATA packets for contexts that do not exist.
    for key in 0..50u64 {
        let p = PacketRepr {
            header: xtp_wire::HeaderRepr {
                key: (key << 32) | 0x8000_0000_0000_0001,
                options: xtp_wire::Options::EMPTY,
                ptype: xtp_wire::PacketType::Data,
                sort: 0,
                sync: 1,
                seq: 0,
            },
            body: Body::Data { btag: None, data: b"x" },
        };
        let mut buf = vec![0u8; p.buffer_len()];
        p.emit(&mut buf).unwrap();
        ep.handle_datagram(now, addr("10.0.0.9:1"), Bytes::from(buf));
    }
    assert_eq!(ep.stats().unknown_context, 50);
    let diags = drain(&mut ep, now);
    assert!(diags.len() <= 5, "{} DIAGs in one instant with a limit of 5/s", diags.len());
    assert!(ep.stats().diags_suppressed >= 45);
    for (_, d) in &diags {
        let p = PacketRepr::parse(d).unwrap();
        assert!(matches!(p.body, Body::Diag(xtp_wire::DiagSegment { code: 3, .. })));
    }
}

#[test]
fn peer_killed_mid_transfer_reports_acknowledged_bytes() {
    let dark = parse_line("delay 5ms rate 1mbit blackout 2s-100000s").unwrap().params;
    let client =
        Role::Client { port: 7, messages: vec![pattern(2_000_000, 1)], cfg: ContextConfig::stream() };
    let (mut sim, c, _s) = pair(32, client, Role::Server { port: 7, reply: None }, dark.clone(), dark);
    let r = sim.run_until(Instant::from_secs(7200), 1_000_000, |sim| !sim.node(c).closed.is_empty()).unwrap();
    match &sim.node(c).closed[0].1 {
        CloseReason::Timeout { acked } => {
            assert!(*acked > 100_000 && *acked < 2_000_000, "acked {acked} ({r})");
        }
        other => panic!("expected a timeout, got {other:?} ({r})"),
    }
    // It gave up after the retry limit, well within the hour.
    assert!(r.now < Instant::from_secs(1800), "{r}");
}

/// Runs two endpoints joined directly (zero delay) until `until`, jumping
/// time to the next timeout; returns every packet as (time, sender, packet).
fn shuttle(a: &mut Endpoint, b: &mut Endpoint, until: Instant) -> Vec<(Instant, char, Vec<u8>)> {
    let (aa, ba) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut now = Instant::ZERO;
    let mut log = Vec::new();
    loop {
        let mut moved = true;
        while moved {
            moved = false;
            for dir in 0..2 {
                let (from, to, name, from_addr) =
                    if dir == 0 { (&mut *a, &mut *b, 'a', aa) } else { (&mut *b, &mut *a, 'b', ba) };
                for (_, p) in drain(from, now) {
                    log.push((now, name, p.clone()));
                    to.handle_datagram(now, from_addr, Bytes::from(p));
                    moved = true;
                }
                while let Some(ev) = to.poll_event() {
                    if let xtp_proto::Event::Readable { ctx } = ev {
                        while to.read(now, ctx).is_some() {}
                    }
                }
            }
        }
        let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min();
        match next {
            Some(t) if t <= until => {
                now = now.max(t);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
            _ => return log,
        }
    }
}

#[test]
fn keepalive_probes_an_idle_context() {
    let mut a = Endpoint::new(EndpointConfig::default(), 3);
    let mut b = Endpoint::new(EndpointConfig::default(), 4);
    b.listen(7, ContextConfig::stream()).unwrap();
    let ctx = a.connect(Instant::ZERO, addr("10.0.0.2:1"), 7, ContextConfig::stream()).unwrap();
    a.write(Instant::ZERO, ctx, Bytes::from_static(b"hello"), true, None).unwrap();
    // The context stays open and idle: after the exchange, nothing until the
    // 30 s keep-alive, when a status request goes out and is answered.
    let log = shuttle(&mut a, &mut b, Instant::from_secs(100));
    let probes: Vec<&(Instant, char, Vec<u8>)> =
        log.iter().filter(|(t, _, _)| *t >= Instant::from_secs(1)).collect();
    assert!(!probes.is_empty(), "no keep-alive: {} packets, all in the first second", log.len());
    let (t, who, p) = probes[0];
    assert!(*t >= Instant::from_secs(30) && *t < Instant::from_secs(31), "first probe at {t}");
    let p = PacketRepr::parse(p).unwrap();
    assert!(p.header.options.contains(xtp_wire::Options::SREQ), "probe {who}: {p}");
    // Answered: the context is still there and healthy afterwards.
    assert_eq!(a.state(ctx), Some(xtp_proto::State::Active));
    assert_eq!(a.context_stats(ctx).unwrap().timeouts, 0);
}

#[test]
fn pacing_rate_reports_the_lower_of_rate_control_and_the_controller() {
    let mut ep = Endpoint::new(EndpointConfig::default(), 7);
    let now = Instant::ZERO;
    // No controller, no RATE: nothing paces.
    let mut plain = ContextConfig::stream();
    plain.congestion = xtp_proto::Congestion::Disabled;
    let a = ep.connect(now, addr("10.0.0.2:1"), 7, plain.clone()).unwrap();
    assert_eq!(ep.context_stats(a).unwrap().pacing_rate, None);
    // RATE alone: exactly the rate asked for.
    let mut rated = plain;
    rated.out_rate = 125_000;
    let b = ep.connect(now, addr("10.0.0.3:1"), 7, rated.clone()).unwrap();
    assert_eq!(ep.context_stats(b).unwrap().pacing_rate, Some(125_000));
    // A controller too: never above RATE.
    rated.congestion = xtp_proto::Congestion::Bbr;
    let c = ep.connect(now, addr("10.0.0.4:1"), 7, rated).unwrap();
    let p = ep.context_stats(c).unwrap().pacing_rate;
    assert!(p.is_some_and(|p| p <= 125_000), "{p:?}");
}

/// A context whose deadline moves later keeps its earlier timer entry
/// (`poll_timeout` may be early; issue #13's idle-context cost): here the
/// first write armed WTIMER at the initial 1 s, the acknowledgement left
/// only the keep-alive probe due later, and the 1 s entry stayed. Calling
/// `handle_timeout` at it sends nothing and files the real deadline, which
/// then fires as it would have.
#[test]
fn a_deadline_that_moved_later_fires_early_harmlessly() {
    let (aa, ba) = (addr("10.0.0.1:4000"), addr("10.0.0.2:3636"));
    let client = Endpoint::new(EndpointConfig::default(), 1);
    let mut server = Endpoint::new(EndpointConfig::default(), 2);
    server.listen(7, ContextConfig::stream()).unwrap();
    let mut w = Wire::new(client, aa, server, ba, Instant::ZERO);
    let ctx = w.a.connect(w.now, ba, 7, ContextConfig::stream()).unwrap();
    w.a.write(w.now, ctx, Bytes::from_static(b"x"), true, None).unwrap();
    w.exchange();
    while let Some(ev) = w.b.poll_event() {
        if let xtp_proto::Event::Readable { ctx } = ev {
            while w.b.read(w.now, ctx).is_some() {}
        }
    }
    w.exchange();
    assert_eq!(w.a.context_stats(ctx).unwrap().in_flight, 0, "everything acknowledged");
    let early = w.a.poll_timeout().expect("a timer entry");
    assert_eq!(early, Instant::from_secs(1), "the initial WTIMER's entry is kept");
    w.now = early;
    w.a.handle_timeout(w.now);
    assert!(drain(&mut w.a, w.now).is_empty(), "an early wake-up sent something");
    let real = w.a.poll_timeout().expect("the real deadline filed");
    assert!(real >= Instant::from_secs(30), "the keep-alive at {real:?}");
    w.now = real;
    w.a.handle_timeout(w.now);
    assert!(!drain(&mut w.a, w.now).is_empty(), "the keep-alive probe at its real deadline");
}

/// A writer's bound counts bytes still waiting to be sent, not bytes in
/// flight: during a recovery the cumulative acknowledgement stands still for
/// a round trip and a bound on unacknowledged bytes stops the writer while
/// the sender has room (issue #12's feeder bug; `XtpStream` and
/// `AsyncXtpStream` wait on `writable`).
#[test]
fn a_writers_bound_counts_unsent_bytes_not_bytes_in_flight() {
    let mut ep = Endpoint::new(EndpointConfig::default(), 3);
    let now = Instant::ZERO;
    let c = ep.connect(now, addr("10.0.0.2:1"), 7, ContextConfig::stream()).unwrap();
    ep.write(now, c, Bytes::from(vec![7u8; 64 << 10]), false, None).unwrap();
    // The silent peer never acknowledges: what left is in flight.
    assert!(!drain(&mut ep, now).is_empty());
    let (unacked, unsent) = (ep.unacked_bytes(c), ep.unsent_bytes(c));
    assert_eq!(unacked, 64 << 10);
    assert!(unacked - unsent >= 4 << 10, "the initial window left: {unacked} unacked, {unsent} unsent");
    assert!(ep.can_write(c));
    // A bound above what waits admits a write although more than it is
    // unacknowledged; a bound at what waits does not.
    assert!(ep.writable(c, unsent + 1) && unacked > unsent + 1);
    assert!(!ep.writable(c, unsent));
}

/// A watching server hears once that a peer which answered it is validated,
/// never about a spoofed source that only sent a FIRST, and that the peer
/// is gone once its last context is freed (what `DriverConfig::peer_lanes`
/// opens and closes a socket on).
#[test]
fn a_watching_server_hears_of_validated_peers_and_not_of_spoofed_ones() {
    use xtp_proto::PeerChange;
    let (client_addr, server_addr, spoofed) = (addr("10.0.0.1:1"), addr("10.0.0.2:2"), addr("10.9.9.9:9"));
    let mut server = Endpoint::new(EndpointConfig::default(), 51);
    server.listen(7, ContextConfig::stream()).unwrap();
    server.watch_peers(true);
    let client = Endpoint::new(EndpointConfig::default(), 52);
    let mut w = Wire::new(client, client_addr, server, server_addr, Instant::ZERO);
    // A spoofed FIRST makes a half-open context, never a validated peer.
    let first = first_packet(0x1234_5678, 0, 7, b"spoofed", xtp_wire::Options::EMPTY);
    w.b.handle_datagram(w.now, spoofed, first);
    assert_eq!(w.b.poll_peer_change(), None);
    let c = w.a.connect(w.now, server_addr, 7, ContextConfig::stream()).unwrap();
    w.a.write(w.now, c, Bytes::from_static(b"hello"), true, None).unwrap();
    w.a.close(w.now, c);
    w.run(xk_time::Duration::from_millis(50));
    assert_eq!(w.b.poll_peer_change(), Some(PeerChange::Validated(client_addr)));
    assert_eq!(w.b.poll_peer_change(), None, "announced once");
    while let Some(ev) = w.b.poll_event() {
        if let xtp_proto::Event::Incoming { ctx, peer, .. } = ev
            && peer == client_addr
        {
            while w.b.read(w.now, ctx).is_some() {}
            w.b.close(w.now, ctx);
        }
    }
    // Past every linger and the spoofed context's half-open timeout.
    w.run(xk_time::Duration::from_secs(300));
    assert_eq!(w.b.context_count(), 0);
    assert_eq!(w.b.poll_peer_change(), Some(PeerChange::Gone(client_addr)));
    assert_eq!(w.b.poll_peer_change(), None, "nothing of the spoofed source");
}
