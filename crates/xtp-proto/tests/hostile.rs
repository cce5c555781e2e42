//! Hostile and stale input: forged sequence numbers, stale duplicate FIRSTs.
//! Nothing here may panic (tests run with overflow checks on), and every
//! drop is counted.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_time::Instant;
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event};
use xtp_wire::{Body, HeaderRepr, Options, PacketRepr, PacketType};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn drain(ep: &mut Endpoint, now: Instant) -> Vec<(SocketAddr, Bytes)> {
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push((t.dst, Bytes::copy_from_slice(&buf[..t.len])));
    }
    out
}

#[test]
fn first_with_seq_near_2_pow_64_is_dropped_and_counted() {
    let mut ep = Endpoint::new(EndpointConfig::default(), 7);
    ep.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    let peer = addr("10.0.0.2:9");
    for (i, seq) in [u64::MAX, u64::MAX - 3, u64::MAX - 99].into_iter().enumerate() {
        let key = (i as u64 + 1) << 32 | 5;
        ep.handle_datagram(now, peer, first_packet(key, seq, 7, &[1u8; 100], Options::WCLOSE));
    }
    assert_eq!(ep.stats().sequence_overflow, 3);
    assert_eq!(ep.context_count(), 0, "no context for a forged FIRST");
    // `seq + len` exactly 2^64 - 1 fits: accepted as a context (beyond its
    // window, so its data is dropped, but nothing panics).
    ep.handle_datagram(now, peer, first_packet(9 << 32, u64::MAX - 100, 7, &[1u8; 100], Options::WCLOSE));
    assert_eq!(ep.stats().sequence_overflow, 3);
    let _ = drain(&mut ep, now);
    ep.handle_timeout(Instant::from_secs(1000));
}

#[test]
fn data_with_overflowing_seq_on_a_live_context_is_dropped() {
    let mut ep = Endpoint::new(EndpointConfig::default(), 8);
    ep.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    let peer = addr("10.0.0.2:9");
    let key = 3 << 32 | 77;
    ep.handle_datagram(now, peer, first_packet(key, 0, 7, b"hello", Options::EMPTY));
    assert_eq!(ep.context_count(), 1);
    let ctx = match ep.poll_event() {
        Some(Event::Incoming { ctx, .. }) => ctx,
        e => panic!("{e:?}"),
    };
    for options in [Options::EMPTY, Options::WCLOSE, Options::WCLOSE | Options::EOM] {
        let p = PacketRepr {
            header: HeaderRepr { key, options, ptype: PacketType::Data, sort: 0, sync: 2, seq: u64::MAX - 1 },
            body: Body::Data { btag: None, data: &[0u8; 64] },
        };
        ep.handle_datagram(now, peer, emit(&p));
    }
    assert_eq!(ep.stats().sequence_overflow, 3);
    assert_eq!(ep.read(now, ctx).map(|c| c.data), Some(Bytes::from_static(b"hello")));
    let _ = drain(&mut ep, now);
}

/// A client sends "hello" in its FIRST and closes; the server reads and
/// closes. The client's FIRST is then replayed at 3 s, 60 s, just after the
/// server freed the context and 60 s later: nothing is delivered twice.
#[test]
fn duplicate_first_after_close_delivers_nothing_twice() {
    let (aa, ba) = (addr("10.0.0.1:1"), addr("10.0.0.2:2"));
    let mut server = Endpoint::new(EndpointConfig::default(), 21);
    server.listen(7, ContextConfig::stream()).unwrap();
    let client = Endpoint::new(EndpointConfig::default(), 22);
    let mut w = Wire::new(server, aa, client, ba, Instant::from_secs(1));
    let c = w.b.connect(w.now, aa, 7, ContextConfig::stream()).unwrap();
    w.b.write(w.now, c, Bytes::from_static(b"hello"), true, None).unwrap();
    w.b.close(w.now, c);
    let mut delivered = Vec::new();
    fn step_into(w: &mut Wire, delivered: &mut Vec<u8>, d: u64) {
        w.run(xk_time::Duration::from_millis(d));
        while let Some(ev) = w.a.poll_event() {
            match ev {
                Event::Readable { ctx } | Event::PeerFinished { ctx } => {
                    while let Some(ch) = w.a.read(w.now, ctx) {
                        delivered.extend_from_slice(&ch.data);
                    }
                    if w.a.state(ctx).is_some_and(|s| s.is_live()) {
                        w.a.close(w.now, ctx);
                    }
                }
                _ => {}
            }
        }
        while w.b.poll_event().is_some() {}
    }
    step_into(&mut w, &mut delivered, 100);
    step_into(&mut w, &mut delivered, 100);
    assert_eq!(delivered, b"hello");
    let first = w.b_to_a[0].clone();
    assert_eq!(PacketRepr::parse(&first).unwrap().header.ptype, PacketType::First);
    let closed_at = w.now;
    // At 1 s the server's context lingers and absorbs the copy. Both sides
    // closed on the other's close, so their ENDs crossed and each lingers
    // only the short `linger` (2 s): at 3 s and 60 s the context is gone
    // and the recent-key table refuses the copy as stale.
    for (at, held) in [(1u64, 1), (3, 0), (60, 0)] {
        let wait = (closed_at + xk_time::Duration::from_secs(at)).saturating_since(w.now);
        step_into(&mut w, &mut delivered, wait.as_millis() as u64);
        w.a.handle_datagram(w.now, ba, first.clone());
        assert_eq!(w.a.context_count(), held, "at {at} s");
        step_into(&mut w, &mut delivered, 100);
    }
    // Run until the server freed the context, then replay twice more.
    for _ in 0..400 {
        if w.a.context_count() == 0 {
            break;
        }
        step_into(&mut w, &mut delivered, 1000);
    }
    assert_eq!(w.a.context_count(), 0, "the server's context is freed after its linger");
    for _ in 0..2 {
        w.a.handle_datagram(w.now, ba, first.clone());
        step_into(&mut w, &mut delivered, 100);
        assert_eq!(w.a.context_count(), 0, "a stale FIRST makes no context");
        step_into(&mut w, &mut delivered, 60_000);
    }
    assert_eq!(delivered, b"hello", "delivered exactly once");
    assert_eq!(w.a.stats().stale_first, 4);
}

/// A server application that never reads: once its context has ended, the
/// unread data is kept `unread_hold` (60 s) and then freed and counted,
/// instead of CTIMEOUT re-arming for ever.
#[test]
fn unread_data_is_freed_after_the_hold() {
    let (aa, ba) = (addr("10.0.0.1:1"), addr("10.0.0.2:2"));
    let mut server = Endpoint::new(EndpointConfig::default(), 31);
    server.listen(7, ContextConfig::stream()).unwrap();
    let client = Endpoint::new(EndpointConfig::default(), 32);
    let mut w = Wire::new(server, aa, client, ba, Instant::from_secs(1));
    let c = w.b.connect(w.now, aa, 7, ContextConfig::stream()).unwrap();
    w.b.write(w.now, c, Bytes::from(vec![5u8; 50_000]), false, None).unwrap();
    w.run(xk_time::Duration::from_millis(200));
    assert_eq!(w.a.context_count(), 1);
    // The client aborts: the server's context ends with 50 kB unread.
    w.b.abort(w.now, c);
    w.run(xk_time::Duration::from_millis(10));
    let ended = w.now;
    let mut freed_at = None;
    for _ in 0..200 {
        w.run(xk_time::Duration::from_secs(1));
        while w.a.poll_event().is_some() {}
        while w.b.poll_event().is_some() {}
        if w.a.context_count() == 0 {
            freed_at = Some(w.now);
            break;
        }
    }
    let held = freed_at.expect("the unread context is freed").saturating_since(ended);
    println!("unread context held {held:?}");
    assert!(held >= xk_time::Duration::from_secs(60) && held <= xk_time::Duration::from_secs(64), "{held:?}");
    assert_eq!(w.a.stats().unread_dropped, 1);
}

/// With `connect_timeout`, a context towards an address where nothing
/// answers closes with NoAnswer at the timeout, naming the address.
#[test]
fn connect_timeout_reports_no_answer() {
    let cfg = EndpointConfig { connect_timeout: Some(xk_time::Duration::from_secs(3)), ..Default::default() };
    let mut ep = Endpoint::new(cfg, 51);
    let to = addr("10.0.0.9:7999");
    let t0 = Instant::from_secs(1);
    let c = ep.connect(t0, to, 7, ContextConfig::stream()).unwrap();
    let mut now = t0;
    let mut closed = None;
    while closed.is_none() {
        let _ = drain(&mut ep, now); // into the void
        now = ep.poll_timeout().expect("a timer runs");
        assert!(now <= t0 + xk_time::Duration::from_secs(3), "closed by the timeout, not later");
        ep.handle_timeout(now);
        while let Some(ev) = ep.poll_event() {
            if let Event::Closed { ctx, reason } = ev {
                assert_eq!(ctx, c);
                closed = Some((now, reason));
            }
        }
    }
    let (at, reason) = closed.unwrap();
    assert_eq!(at, t0 + xk_time::Duration::from_secs(3));
    assert_eq!(reason, xtp_proto::CloseReason::NoAnswer { peer: to, after: xk_time::Duration::from_secs(3) });
    assert_eq!(
        reason.to_string(),
        "no answer from 10.0.0.9:7999 after 3 s (is `xpress serve` running there?)"
    );
    // Freed after the short linger.
    ep.handle_timeout(at + xk_time::Duration::from_secs(3));
    assert_eq!(ep.context_count(), 0);
}
