//! A context whose `mss` is the most one packet carries (`max_packet` less
//! the 32-byte header; 20 bytes less to an IPv6 peer) never sends a packet
//! larger than the path takes: the FIRST's address and traffic segments and
//! a BTAG come out of the same packet (the tools' default segment relies on
//! this, as TCP's MSS follows the route's MTU).

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event};

/// `mss`: the segment asked for (none: the most `packet` carries).
fn sends_within_the_packet(aa: SocketAddr, ba: SocketAddr, packet: usize, mss: Option<usize>) {
    let ep = EndpointConfig::default();
    let limit = ep.max_packet - if aa.is_ipv6() { 20 } else { 0 };
    assert_eq!(limit, packet);
    let mut cfg = ContextConfig::stream();
    cfg.mss = mss.unwrap_or(limit - xtp_wire::HEADER_LEN);
    let mut server = Endpoint::new(ep.clone(), 41);
    server.listen(7, cfg.clone()).unwrap();
    let client = Endpoint::new(ep, 42);
    let mut w = Wire::new(server, aa, client, ba, Instant::from_secs(1));
    let c = w.b.connect(w.now, aa, 7, cfg).unwrap();
    // Written before anything left: the FIRST carries the first message's
    // start, its BTAG, the address and the traffic segment together.
    let msgs: [(usize, u64); 3] = [(100_000, 0xb7a6), (1, 0x1), (50_000, 0x2)];
    for (i, &(len, tag)) in msgs.iter().enumerate() {
        w.b.write(w.now, c, Bytes::from(vec![i as u8 + 1; len]), true, Some(tag)).unwrap();
    }
    let total: usize = msgs.iter().map(|m| m.0).sum();
    let (mut got, mut sctx) = (0, None);
    for _ in 0..2000 {
        w.run(Duration::from_millis(10));
        while let Some(e) = w.a.poll_event() {
            if let Event::Incoming { ctx, .. } = e {
                sctx = Some(ctx);
            }
        }
        while let Some(r) = sctx.and_then(|s| w.a.read(w.now, s)) {
            got += r.data.len();
        }
        if got == total {
            break;
        }
    }
    let sizes: Vec<usize> = w.b_to_a.iter().map(Bytes::len).collect();
    let largest = *sizes.iter().max().unwrap();
    assert!(largest <= limit, "a packet of {largest} B on a path of {limit}: {sizes:?}");
    assert_eq!(got, total, "every byte arrived: {sizes:?}");
    assert_eq!(largest, limit, "full segments fill the packet: {sizes:?}");
    // The FIRST carried data too, cut to what its segments leave.
    assert!(sizes[0] > limit / 2, "{sizes:?}");
}

#[test]
fn a_path_sized_segment_fits_the_packet_over_ipv4() {
    sends_within_the_packet("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap(), 1472, None);
}

#[test]
fn a_path_sized_segment_fits_the_packet_over_ipv6() {
    sends_within_the_packet(
        "[2001:db8::1]:1".parse().unwrap(),
        "[2001:db8::2]:2".parse().unwrap(),
        1452,
        None,
    );
}

/// `xpress serve` on a wildcard `[::]` listener serves IPv4 and IPv6 peers
/// alike with the IPv4 segment (1,440): the engine cuts an IPv6 peer's
/// packets to the 20 bytes smaller path by itself (`Context::new` caps the
/// segment at `max_packet` less 20 for an IPv6 peer).
#[test]
fn an_ipv4_sized_segment_still_fits_an_ipv6_peer() {
    let v4_mss = EndpointConfig::default().max_packet - xtp_wire::HEADER_LEN;
    assert_eq!(v4_mss, 1440);
    let (aa, ba) = ("[2001:db8::1]:1".parse().unwrap(), "[2001:db8::2]:2".parse().unwrap());
    sends_within_the_packet(aa, ba, 1452, Some(v4_mss));
}
