//! Memory bounds per context: the send buffer (write backpressure) and the
//! receive side (out-of-order data within the advertised window).

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event, WriteError};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Writing 100 MB to a peer whose application never reads: the writer is
/// refused with WouldBlock once its send buffer is full, and neither
/// engine holds more than its buffer.
#[test]
fn writing_100_mb_to_a_peer_that_never_reads_stays_bounded() {
    let (aa, ba) = (addr("10.0.0.1:1"), addr("10.0.0.2:2"));
    let mut server = Endpoint::new(EndpointConfig::default(), 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let client = Endpoint::new(EndpointConfig::default(), 42);
    let mut w = Wire::new(server, aa, client, ba, Instant::from_secs(1));
    let cfg = ContextConfig::stream();
    let (send_buffer, recv_buffer) = (cfg.send_buffer as u64, cfg.recv_buffer as u64);
    let c = w.b.connect(w.now, aa, 7, cfg).unwrap();
    let chunk = Bytes::from(vec![9u8; 1 << 20]);
    let (mut written, mut refused) = (0u64, 0u64);
    let mut peak = (0u64, 0u64);
    let mut sctx = None;
    for _ in 0..2000 {
        while written < 100 << 20 {
            match w.b.write(w.now, c, chunk.clone(), false, None) {
                Ok(()) => written += chunk.len() as u64,
                Err(WriteError::WouldBlock) => {
                    refused += 1;
                    assert!(!w.b.can_write(c));
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        w.run(Duration::from_millis(10));
        while let Some(ev) = w.a.poll_event() {
            if let Event::Incoming { ctx, .. } = ev {
                sctx = Some(ctx);
            }
        }
        let held_a = sctx.map_or(0, |s| w.a.readable_bytes(s));
        peak = (peak.0.max(w.b.unacked_bytes(c)), peak.1.max(held_a));
    }
    println!(
        "written {written} B, refused {refused} times, peak unacked {} B, peak unread {} B",
        peak.0, peak.1
    );
    assert!(refused > 0, "the writer was pushed back");
    assert!(written < 100 << 20, "100 MB cannot all be queued");
    assert!(peak.0 <= send_buffer + (1 << 20), "sender holds at most its buffer (+1 write): {}", peak.0);
    assert!(peak.1 <= recv_buffer, "receiver holds at most its window: {}", peak.1);
    assert!(w.b.state(c).is_some_and(|s| s.is_live()), "the context is alive, only blocked");
}

/// A peer that ignores our window: data beyond the advertised `alloc` and
/// tiny out-of-order segments spread over the window are dropped and
/// counted, and what is held stays within the window.
#[test]
fn out_of_order_data_is_bounded_by_the_window() {
    use xtp_wire::{Body, HeaderRepr, Options, PacketRepr, PacketType};
    let mut ep = Endpoint::new(EndpointConfig::default(), 43);
    let mut cfg = ContextConfig::stream();
    cfg.recv_buffer = 64 << 10;
    cfg.recv_buffer_max = 64 << 10;
    ep.listen(7, cfg).unwrap();
    let peer = addr("10.0.0.2:2");
    let now = Instant::from_secs(1);
    let key = 5 << 32 | 1;
    ep.handle_datagram(now, peer, first_packet(key, 0, 7, b"x", Options::EMPTY));
    let ctx = match ep.poll_event() {
        Some(Event::Incoming { ctx, .. }) => ctx,
        e => panic!("{e:?}"),
    };
    let data = |seq: u64, len: usize| {
        emit(&PacketRepr {
            header: HeaderRepr {
                key,
                options: Options::EMPTY,
                ptype: PacketType::Data,
                sort: 0,
                sync: 2,
                seq,
            },
            body: Body::Data { btag: None, data: &vec![1u8; len] },
        })
    };
    // 1,000 packets of 1,000 bytes far beyond the 64 KiB window.
    for i in 0..1000u64 {
        ep.handle_datagram(now, peer, data((1 << 20) + i * 1000, 1000));
    }
    // One-byte segments at every other byte inside the window.
    for i in 0..30_000u64 {
        ep.handle_datagram(now, peer, data(10 + 2 * i, 1));
    }
    let s = ep.context_stats(ctx).unwrap();
    println!("recv_dropped {} bytes", s.recv_dropped);
    assert!(s.recv_dropped >= 1_000_000, "beyond the window: dropped and counted");
    // At most max(64, 64 KiB / 256) = 256 segments held out of order.
    assert!(s.recv_dropped >= 1_000_000 + 30_000 - 256, "{}", s.recv_dropped);
    assert_eq!(ep.readable_bytes(ctx), 1);
}

/// One spoofed FIRST: the server answers at most 3× its size, however long
/// it waits, and frees the context at `half_open_timeout`.
#[test]
fn one_spoofed_first_costs_at_most_three_times_its_size() {
    use xtp_wire::Options;
    let mut ep = Endpoint::new(EndpointConfig::default(), 44);
    ep.listen(7, ContextConfig::stream()).unwrap();
    let from = addr("172.16.0.9:4444");
    let first = first_packet(7 << 32 | 3, 0, 7, &[1u8; 40], Options::SREQ);
    let t0 = Instant::from_secs(1);
    ep.handle_datagram(t0, from, first.clone());
    assert_eq!(ep.stats().half_open, 1);
    let mut buf = vec![0u8; 2048];
    let (mut sent, mut freed_at, mut later) = (0usize, None, 0);
    let mut now = t0;
    while now < Instant::from_secs(200) {
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            assert_eq!(t.dst, from);
            sent += t.len;
            later += usize::from(now > t0);
        }
        if freed_at.is_none() && ep.context_count() == 0 {
            freed_at = Some(now);
        }
        let Some(next) = ep.poll_timeout() else { break };
        now = next;
        ep.handle_timeout(now);
    }
    println!("{sent} B sent for a {} B FIRST; freed after {:?}", first.len(), freed_at.map(|t| t - t0));
    assert!(sent <= 3 * first.len(), "{sent} B for {} B", first.len());
    assert!(sent > 0, "the FIRST was answered");
    // No keep-alive probe and no retries towards an address that never
    // proved itself: the answer to the FIRST is all it gets.
    assert_eq!(later, 0, "packets sent to the spoofed address after the answer");
    assert_eq!(freed_at.map(|t| t - t0), Some(EndpointConfig::default().half_open_timeout));
    assert_eq!((ep.stats().half_open, ep.stats().half_open_bytes, ep.stats().half_open_expired), (0, 0, 1));
}

/// `max_contexts`: our own connect fails with Full naming the limit; a
/// FIRST is refused with a DIAG naming it, and counted.
#[test]
fn max_contexts_is_named_when_refusing() {
    use xtp_wire::{Body, Options, PacketRepr};
    let cfg = EndpointConfig { max_contexts: 2, ..EndpointConfig::default() };
    let mut ep = Endpoint::new(cfg, 45);
    ep.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    ep.connect(now, addr("10.0.0.5:1"), 7, ContextConfig::stream()).unwrap();
    ep.connect(now, addr("10.0.0.6:1"), 7, ContextConfig::stream()).unwrap();
    let err = ep.connect(now, addr("10.0.0.7:1"), 7, ContextConfig::stream()).unwrap_err();
    assert_eq!(err, xtp_proto::ConnectError::Full { limit: "max_contexts", value: 2 });
    assert_eq!(err.to_string(), "the endpoint is full: max_contexts (2) reached");
    let mut buf = vec![0u8; 2048];
    while ep.poll_transmit(now, &mut buf).is_some() {}
    let from = addr("10.0.0.8:1");
    ep.handle_datagram(now, from, first_packet(9 << 32 | 1, 0, 7, b"hi", Options::EMPTY));
    assert_eq!(ep.stats().refused_max_contexts, 1);
    let t = ep.poll_transmit(now, &mut buf).expect("a refusal");
    assert_eq!(t.dst, from);
    let p = PacketRepr::parse(&buf[..t.len]).unwrap();
    match p.body {
        Body::Diag(d) => {
            assert_eq!(d.code, xtp_wire::diag_code::CONTEXT_REFUSED);
            assert!(String::from_utf8_lossy(d.text).contains("max_contexts"));
        }
        b => panic!("{b:?}"),
    }
}
