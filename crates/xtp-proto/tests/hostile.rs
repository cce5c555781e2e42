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
