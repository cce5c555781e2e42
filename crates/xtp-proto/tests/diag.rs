//! DIAG semantics (docs/PROTOCOL.md G21–G24): which DIAGs end a context,
//! and that our own diagnostics reach an initiator.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::emit;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, ContextId, Endpoint, EndpointConfig, Event};
use xtp_wire::{Body, ControlSegment, HeaderRepr, Options, PacketRepr, PacketType, diag_code};

const A: &str = "10.0.0.1:5000"; // server
const B: &str = "10.0.0.2:6000"; // client

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Moves packets both ways until both endpoints are quiet at `now`;
/// returns the packets B sent to A (for forging).
fn exchange(a: &mut Endpoint, b: &mut Endpoint, now: Instant) -> Vec<Bytes> {
    let mut buf = vec![0u8; 2048];
    let mut b_to_a = Vec::new();
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            assert_eq!(t.dst, addr(B));
            b.handle_datagram(now, addr(A), Bytes::copy_from_slice(&buf[..t.len]));
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            assert_eq!(t.dst, addr(A));
            let d = Bytes::copy_from_slice(&buf[..t.len]);
            b_to_a.push(d.clone());
            a.handle_datagram(now, addr(B), d);
            moved = true;
        }
        if !moved {
            break;
        }
    }
    b_to_a
}

/// Runs both endpoints for `d` of virtual time, jumping between timers.
fn run(a: &mut Endpoint, b: &mut Endpoint, now: Instant, d: Duration) -> Instant {
    run_log(a, b, now, d).0
}

/// As `run`, also returning the packets B sent.
fn run_log(a: &mut Endpoint, b: &mut Endpoint, mut now: Instant, d: Duration) -> (Instant, Vec<Bytes>) {
    let end = now + d;
    let mut log = Vec::new();
    loop {
        log.extend(exchange(a, b, now));
        let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min();
        match next {
            Some(t) if t <= end => {
                now = now.max(t);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
            _ => return (end, log),
        }
    }
}

fn events(ep: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

fn read_all(ep: &mut Endpoint, now: Instant, ctx: ContextId) -> usize {
    std::iter::from_fn(|| ep.read(now, ctx)).map(|c| c.data.len()).sum()
}

fn established() -> (Endpoint, Endpoint, ContextId, ContextId, Instant) {
    let mut a = Endpoint::new(EndpointConfig::default(), 11);
    let mut b = Endpoint::new(EndpointConfig::default(), 12);
    a.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    let cb = b.connect(now, addr(A), 7, ContextConfig::stream()).unwrap();
    b.write(now, cb, Bytes::from(vec![1u8; 10_000]), false, None).unwrap();
    let now = run(&mut a, &mut b, now, Duration::from_millis(10));
    let ca = events(&mut a)
        .into_iter()
        .find_map(|e| match e {
            Event::Incoming { ctx, .. } => Some(ctx),
            _ => None,
        })
        .expect("the server accepted");
    assert_eq!(read_all(&mut a, now, ca), 10_000);
    (a, b, ca, cb, now)
}

#[test]
fn our_invalid_report_diag_does_not_kill_the_peer() {
    let (mut a, mut b, ca, cb, now) = established();
    // A report from "B" acknowledging data A never sent: A answers with
    // DIAG "protocol error / invalid retransmission request" (no END).
    b.write(now, cb, Bytes::from(vec![2u8; 100]), false, None).unwrap();
    let (now, sent) = run_log(&mut a, &mut b, now, Duration::from_millis(10));
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
    a.handle_datagram(now, addr(B), emit(&forged));
    let mut buf = vec![0u8; 2048];
    let t = a.poll_transmit(now, &mut buf).expect("A answers the bad report");
    let diag = PacketRepr::parse(&buf[..t.len]).unwrap();
    assert!(matches!(diag.body, Body::Diag(d) if d.code == diag_code::PROTOCOL_ERROR), "{diag:?}");
    assert!(!diag.header.options.contains(Options::END));
    b.handle_datagram(now, addr(A), Bytes::copy_from_slice(&buf[..t.len]));
    assert_eq!(b.context_stats(cb).unwrap().diags_received, 1);
    // Both sides go on: B's next data arrives and the close is graceful.
    let _ = events(&mut a);
    let _ = events(&mut b);
    b.write(now, cb, Bytes::from(vec![3u8; 5000]), true, None).unwrap();
    b.close(now, cb);
    let mut now = run(&mut a, &mut b, now, Duration::from_millis(100));
    assert_eq!(read_all(&mut a, now, ca), 5100);
    a.close(now, ca);
    now = run(&mut a, &mut b, now, Duration::from_secs(1));
    let closed_b: Vec<CloseReason> = events(&mut b)
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
    let (a, mut b, _ca, cb, now) = established();
    // The server restarts: a fresh endpoint at the same address knows no
    // context. B's next packet carries the responder's key with RTN; the
    // answer (DIAG "invalid context", END) carries that key without RTN and
    // must still find B's context.
    let mut a2 = Endpoint::new(EndpointConfig::default(), 13);
    a2.listen(7, ContextConfig::stream()).unwrap();
    drop(a);
    let _ = events(&mut b);
    b.write(now, cb, Bytes::from(vec![2u8; 3000]), false, None).unwrap();
    let t0 = now;
    let now = run(&mut a2, &mut b, now, Duration::from_millis(50));
    assert!(a2.stats().unknown_context >= 1, "B's data reached the restarted server");
    assert!(a2.stats().diags_sent >= 1);
    let closed: Vec<CloseReason> = events(&mut b)
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
    assert_eq!(b.context_stats(cb).map(|s| s.diags_received), Some(1));
    // Freed after the short linger; the index under the responder's key too.
    run(&mut a2, &mut b, now, Duration::from_secs(10));
    assert_eq!(b.context_count(), 0);
}
