//! DIAG semantics (docs/PROTOCOL.md G21–G24): which DIAGs end a context,
//! and that our own diagnostics reach an initiator.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::{Wire, emit};
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, ContextId, Endpoint, EndpointConfig, Event};
use xtp_wire::{Body, ControlSegment, HeaderRepr, Options, PacketRepr, PacketType, diag_code};

const A: &str = "10.0.0.1:5000"; // server
const B: &str = "10.0.0.2:6000"; // client

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Runs the wire (A = `w.a`, B = `w.b`) for `d` of virtual time, jumping
/// between timers; every packet went to the other endpoint.
fn run(w: &mut Wire, d: Duration) -> Instant {
    w.run(d);
    assert_eq!(w.stray, 0, "a packet addressed to neither endpoint");
    w.now
}

/// As `run`, also returning the packets B sent meanwhile.
fn run_log(w: &mut Wire, d: Duration) -> (Instant, Vec<Bytes>) {
    let from = w.b_to_a.len();
    let now = run(w, d);
    (now, w.b_to_a[from..].to_vec())
}

fn events(ep: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

fn read_all(ep: &mut Endpoint, now: Instant, ctx: ContextId) -> usize {
    std::iter::from_fn(|| ep.read(now, ctx)).map(|c| c.data.len()).sum()
}

fn established() -> (Wire, ContextId, ContextId, Instant) {
    let a = Endpoint::new(EndpointConfig::default(), 11);
    let b = Endpoint::new(EndpointConfig::default(), 12);
    let mut w = Wire::new(a, addr(A), b, addr(B), Instant::from_secs(1));
    let Wire { a, b, .. } = &mut w;
    a.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    let cb = b.connect(now, addr(A), 7, ContextConfig::stream()).unwrap();
    b.write(now, cb, Bytes::from(vec![1u8; 10_000]), false, None).unwrap();
    let now = run(&mut w, Duration::from_millis(10));
    let a = &mut w.a;
    let ca = events(a)
        .into_iter()
        .find_map(|e| match e {
            Event::Incoming { ctx, .. } => Some(ctx),
            _ => None,
        })
        .expect("the server accepted");
    assert_eq!(read_all(a, now, ca), 10_000);
    (w, ca, cb, now)
}

#[test]
fn our_invalid_report_diag_does_not_kill_the_peer() {
    let (mut w, ca, cb, now) = established();
    // A report from "B" acknowledging data A never sent: A answers with
    // DIAG "protocol error / invalid retransmission request" (no END).
    w.b.write(now, cb, Bytes::from(vec![2u8; 100]), false, None).unwrap();
    let (now, sent) = run_log(&mut w, Duration::from_millis(10));
    let key = PacketRepr::parse(sent.last().unwrap()).unwrap().header.key;
    let forged = PacketRepr {
        header: HeaderRepr {
            key,
            options: Options::EMPTY,
            ptype: PacketType::Cntl,
            sort: 0,
            sync: 0,
            seq: 10_100,
        },
        body: Body::Cntl(ControlSegment { rseq: 1 << 40, alloc: 1 << 41, echo: 0 }),
    };
    w.a.handle_datagram(now, addr(B), emit(&forged));
    let mut buf = vec![0u8; 2048];
    let t = w.a.poll_transmit(now, &mut buf).expect("A answers the bad report");
    let diag = PacketRepr::parse(&buf[..t.len]).unwrap();
    assert!(matches!(diag.body, Body::Diag(d) if d.code == diag_code::PROTOCOL_ERROR), "{diag:?}");
    assert!(!diag.header.options.contains(Options::END));
    w.b.handle_datagram(now, addr(A), Bytes::copy_from_slice(&buf[..t.len]));
    assert_eq!(w.b.context_stats(cb).unwrap().diags_received, 1);
    // Both sides go on: B's next data arrives and the close is graceful.
    let _ = events(&mut w.a);
    let _ = events(&mut w.b);
    w.b.write(now, cb, Bytes::from(vec![3u8; 5000]), true, None).unwrap();
    w.b.close(now, cb);
    let mut now = run(&mut w, Duration::from_millis(100));
    assert_eq!(read_all(&mut w.a, now, ca), 5100);
    w.a.close(now, ca);
    now = run(&mut w, Duration::from_secs(1));
    let closed_b: Vec<CloseReason> = events(&mut w.b)
        .into_iter()
        .filter_map(|e| match e {
            Event::Closed { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(closed_b, vec![CloseReason::Graceful], "at {now}");
}

#[test]
fn invalid_context_diag_reaches_and_closes_an_initiator() {
    let (mut w, _ca, cb, now) = established();
    // The server restarts: a fresh endpoint at the same address knows no
    // context. B's next packet carries the responder's key with RTN; the
    // answer (DIAG "invalid context", END) carries that key without RTN and
    // must still find B's context.
    w.a = Endpoint::new(EndpointConfig::default(), 13);
    w.a.listen(7, ContextConfig::stream()).unwrap();
    let _ = events(&mut w.b);
    w.b.write(now, cb, Bytes::from(vec![2u8; 3000]), false, None).unwrap();
    let t0 = now;
    let now = run(&mut w, Duration::from_millis(50));
    assert!(w.a.stats().unknown_context >= 1, "B's data reached the restarted server");
    assert!(w.a.stats().diags_sent >= 1);
    let closed: Vec<CloseReason> = events(&mut w.b)
        .into_iter()
        .filter_map(|e| match e {
            Event::Closed { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(
        matches!(closed.as_slice(), [CloseReason::PeerAbort { code: Some(c), .. }] if *c == diag_code::INVALID_CONTEXT),
        "B closed by the DIAG within {:?}: {closed:?}",
        now.saturating_since(t0)
    );
    assert_eq!(w.b.context_stats(cb).map(|s| s.diags_received), Some(1));
    // Freed after the short linger; the index under the responder's key too.
    run(&mut w, Duration::from_secs(10));
    assert_eq!(w.b.context_count(), 0);
}
