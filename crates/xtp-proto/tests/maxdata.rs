//! The peer's `maxdata` (its traffic spec, docs/PROTOCOL.md G28) caps the
//! data we put in one packet: a receiver whose path is smaller than the
//! sender's (a 238-byte packet-radio hop at its end, Ethernet at the
//! sender's) gets no packet larger than it said it takes, and a 238-byte
//! link carries a transfer with zero MTU drops although only one side knows
//! the path. A `maxdata` below the floor refuses the context.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_netemu::{LinkParams, parse_line};
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, Endpoint, EndpointConfig, Event, MIN_MAXDATA};
use xtp_wire::{Body, PacketRepr};

fn link(line: &str) -> LinkParams {
    parse_line(line).unwrap().params
}

/// The client (Ethernet at its end: 1,472-byte packets, segment 1,440)
/// sends 60 KB to a server whose packets may be `server_packet` bytes (its
/// end of the path). Returns the length of every DATA packet the client
/// sent: they all follow the server's TCNTL (before it, the client sends
/// FIRSTs at its own size: it cannot know better yet).
/// Runs the wire until side `a` (the server) has read `total` bytes of the
/// context it accepted (at most 30 s of virtual time).
fn receive_all(w: &mut Wire, total: usize) {
    let (mut got, mut sctx) = (0, None);
    for _ in 0..3000 {
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
    assert_eq!(got, total, "every byte arrived");
}

fn data_packets_towards(a: SocketAddr, b: SocketAddr, server_packet: usize) -> Vec<usize> {
    let small = EndpointConfig { max_packet: server_packet, ..EndpointConfig::default() };
    let mut server = Endpoint::new(small, 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let mut w = Wire::new(server, a, Endpoint::new(EndpointConfig::default(), 42), b, Instant::from_secs(1));
    let mut cfg = ContextConfig::stream();
    cfg.mss = 1440;
    let c = w.b.connect(w.now, a, 7, cfg).unwrap();
    let total = 60_000;
    // Several messages, so BTAGs ride on packets after the first too.
    for (i, len) in [20_000, 1, 39_999].into_iter().enumerate() {
        w.b.write(w.now, c, Bytes::from(vec![7u8; len]), true, Some(i as u64 + 1)).unwrap();
    }
    receive_all(&mut w, total);
    let sizes: Vec<usize> = w
        .b_to_a
        .iter()
        .filter(|p| matches!(PacketRepr::parse(p).unwrap().body, Body::Data { .. }))
        .map(Bytes::len)
        .collect();
    assert!(sizes.len() > 100, "DATA packets followed the TCNTL: {sizes:?}");
    sizes
}

/// 210 bytes: a 238-byte MTU less IPv4 (20) and UDP (8).
#[test]
fn a_receiver_advertising_a_small_maxdata_gets_no_larger_packet_ipv4() {
    let sizes = data_packets_towards("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap(), 210);
    assert_eq!(*sizes.iter().max().unwrap(), 210, "full packets of the peer's size: {sizes:?}");
}

/// The IPv6 header budget: the server's endpoint takes packets of 210
/// bytes as its IPv4 figure; towards an IPv6 peer it cuts 20 bytes more
/// (238 less IPv6's 40 and UDP's 8 = 190) and advertises that, so the
/// client's packets, BTAG included, are at most 190 bytes.
#[test]
fn a_receiver_advertising_a_small_maxdata_gets_no_larger_packet_ipv6() {
    let (a, b) = ("[2001:db8::1]:1".parse().unwrap(), "[2001:db8::2]:2".parse().unwrap());
    let sizes = data_packets_towards(a, b, 210);
    assert_eq!(*sizes.iter().max().unwrap(), 190, "{sizes:?}");
}

/// An endpoint whose `max_packet` leaves an IPv6 FIRST no room (105 bytes
/// of segments and one data byte in 85) refuses to connect there, naming
/// the limit, instead of opening a context that can never send.
#[test]
fn max_packet_too_small_for_an_ipv6_first_is_refused_at_connect() {
    let mut ep = Endpoint::new(EndpointConfig { max_packet: 110, ..EndpointConfig::default() }, 1);
    let v6: SocketAddr = "[2001:db8::1]:1".parse().unwrap();
    let e = ep.connect(Instant::ZERO, v6, 7, ContextConfig::stream()).unwrap_err().to_string();
    assert!(e.contains("125 bytes towards an IPv6 peer"), "{e}");
    ep.connect(Instant::ZERO, "10.0.0.1:1".parse().unwrap(), 7, ContextConfig::stream()).unwrap();
}

/// A FIRST whose `maxdata` is below the floor: the responder answers DIAG
/// code 1 (context refused) value 6 (traffic specification refused) with
/// END, and its application sees why.
#[test]
fn a_maxdata_below_the_floor_refuses_the_context() {
    let mut server = Endpoint::new(EndpointConfig::default(), 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let first = first_with_maxdata(MIN_MAXDATA - 1, false);
    let now = Instant::from_secs(1);
    server.handle_datagram(now, "10.0.0.2:2".parse().unwrap(), first);
    let mut buf = vec![0u8; 2048];
    let mut diag = None;
    while let Some(t) = server.poll_transmit(now, &mut buf) {
        if let Body::Diag(d) = PacketRepr::parse(&buf[..t.len]).unwrap().body {
            diag = Some((d.code, d.value, String::from_utf8_lossy(d.text).into_owned()));
        }
    }
    let (code, value, text) = diag.expect("a DIAG answers the FIRST");
    assert_eq!((code, value), (1, 6), "{text}");
    assert!(text.contains("maxdata below the 73-byte floor"), "{text}");
    let mut reason = None;
    while let Some(e) = server.poll_event() {
        if let Event::Closed { reason: r, .. } = e {
            reason = Some(r);
        }
    }
    let reason = reason.expect("the context closed");
    assert_eq!(reason, CloseReason::SpecRefused { maxdata: 72, floor: 73 });
    assert!(reason.to_string().contains("maxdata 72 is below the 73-byte floor"), "{reason}");
}

/// A server on Ethernet (1,472-byte packets, segment 1,400) answers a
/// client behind a 238-byte packet-radio hop (its packets at most 210 bytes:
/// 238 less IPv4 and UDP). Only the client knows the path; its FIRST says
/// so (`maxdata` 178), and the server's 5 KB reply crosses with no packet
/// dropped for size.
#[test]
fn a_238_byte_link_carries_the_reply_with_zero_mtu_drops() {
    let radio = link("profile packet-radio-9600 mtu 210");
    let reply = pattern(5_000, 4);
    let request = pattern(100, 3);
    let client_ep = EndpointConfig { max_packet: 210, ..EndpointConfig::default() };
    let server = host(Role::Server { port: 21, reply: Some(reply.clone()) }, 7, EndpointConfig::default());
    let client = host(stream_client(21, vec![request.clone()]), 8, client_ep);
    let xtp_testkit::Pair { mut sim, client: c, server: s, client_addr, server_addr } =
        xtp_testkit::pair(5, client, server, radio.clone(), radio);
    sim.node_mut(c).peer = Some(server_addr);
    sim.node_mut(s).peer = Some(client_addr);
    start(sim.node_mut(s), Instant::ZERO);
    start(sim.node_mut(c), Instant::ZERO);
    let r = sim.run_until(Instant::from_secs(600), 1_000_000, |sim| {
        !sim.node(c).closed.is_empty() && !sim.node(s).closed.is_empty()
    });
    let (up, down) = (sim.link_stats(c, s).unwrap(), sim.link_stats(s, c).unwrap());
    assert_eq!(up.drop_mtu + down.drop_mtu, 0, "no packet over 210 B: {up:?} {down:?}");
    let r = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sim.node(s).received(), request, "{r}");
    assert_eq!(sim.node(c).received(), reply, "{r}");
    assert_eq!(sim.node(c).closed[0].1, CloseReason::Graceful, "{r}");
}

/// A FIRST from a hand-made initiator for XTP port 7 whose traffic spec
/// says `maxdata`, from an IPv6 address when `v6` (hostile-input tests).
fn first_with_maxdata(maxdata: u32, v6: bool) -> Bytes {
    use xtp_wire::{
        Address, AddressSegment, HeaderRepr, Options, PacketType, Service, TrafficSegment, TrafficSpec,
    };
    let addr = if v6 {
        Address::Ipv6 {
            dst: std::net::Ipv6Addr::LOCALHOST,
            src: std::net::Ipv6Addr::UNSPECIFIED,
            dport: 7,
            sport: 0,
        }
    } else {
        Address::Ipv4 {
            dst: std::net::Ipv4Addr::LOCALHOST,
            src: std::net::Ipv4Addr::UNSPECIFIED,
            dport: 7,
            sport: 0,
        }
    };
    emit(&PacketRepr {
        header: HeaderRepr {
            key: 0x5eed,
            options: Options::SREQ,
            ptype: PacketType::First,
            sort: 0,
            sync: 1,
            seq: 0,
        },
        body: Body::First {
            address: AddressSegment { domain: 0, addr },
            traffic: TrafficSegment {
                service: Service::Stream,
                spec: TrafficSpec::Explicit { maxdata, inrate: 0, inburst: 0, outrate: 0, outburst: 0 },
            },
            btag: None,
            data: b"hello",
        },
    })
}

/// A responder whose `max_packet` cannot carry its own TCNTL is refused at
/// `listen`, naming the field and the limit, as `connect` refuses it. Before,
/// `listen` took 20 bytes and a FIRST with `maxdata` 73 or more panicked the
/// responder ("attempt to subtract with overflow", debug builds) when it
/// cut its segment to `max_packet - 32`.
#[test]
fn listen_refuses_a_max_packet_below_105() {
    for mp in [0usize, 20, 31, 40, 104] {
        let mut ep = Endpoint::new(EndpointConfig { max_packet: mp, ..EndpointConfig::default() }, 1);
        let e = ep.listen(7, ContextConfig::stream()).expect_err("listen must refuse").to_string();
        assert!(e.contains("max_packet must be at least 105 bytes"), "max_packet {mp}: {e}");
    }
}

/// Hostile `maxdata` in a FIRST, both families, at the smallest endpoints
/// `listen` takes and the default: no panic (debug builds check overflow),
/// every packet parses and none is larger than the endpoint's own path or
/// than 32 + the peer's `maxdata`.
#[test]
fn hostile_maxdata_in_a_first_never_panics_nor_oversizes() {
    for v6 in [false, true] {
        for mp in [105usize, 125, 210, 1472] {
            for maxdata in [0u32, 1, 72, 73, 74, 105, 1440, 65_535, u32::MAX - 1, u32::MAX] {
                let mut server =
                    Endpoint::new(EndpointConfig { max_packet: mp, ..EndpointConfig::default() }, 41);
                server.listen(7, ContextConfig::stream()).unwrap();
                let from: SocketAddr =
                    if v6 { "[2001:db8::2]:2".parse().unwrap() } else { "10.0.0.2:2".parse().unwrap() };
                let mut now = Instant::from_secs(1);
                server.handle_datagram(now, from, first_with_maxdata(maxdata, v6));
                let own = mp - if v6 { 20 } else { 0 };
                let cap = if maxdata == 0 { own } else { own.min(32usize.saturating_add(maxdata as usize)) };
                let mut buf = vec![0u8; 4096];
                for _ in 0..50 {
                    while let Some(e) = server.poll_event() {
                        if let Event::Incoming { ctx, .. } = e {
                            let _ = server.write(now, ctx, Bytes::from(vec![1u8; 5_000]), true, Some(1));
                        }
                    }
                    while let Some(t) = server.poll_transmit(now, &mut buf) {
                        PacketRepr::parse(&buf[..t.len]).unwrap();
                        // A refusal's DIAG (maxdata below the floor) is
                        // small; everything else obeys the cap.
                        assert!(t.len <= own, "v6 {v6} mp {mp} maxdata {maxdata}: {} > {own}", t.len);
                        if maxdata >= MIN_MAXDATA {
                            assert!(t.len <= cap, "v6 {v6} mp {mp} maxdata {maxdata}: {} > {cap}", t.len);
                        }
                    }
                    now += Duration::from_millis(50);
                    server.handle_timeout(now);
                }
            }
        }
    }
}

/// G28's per-family budget on the responder side: an endpoint of 105-byte
/// packets has 85 towards an IPv6 peer, too few for its TCNTL (88 B). It
/// refuses the FIRST with a DIAG naming the limit instead of accepting a
/// context that could never send anything; an IPv4 peer is still served.
#[test]
fn a_responder_too_small_for_an_ipv6_peer_refuses_it() {
    let mut server = Endpoint::new(EndpointConfig { max_packet: 105, ..EndpointConfig::default() }, 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let now = Instant::from_secs(1);
    server.handle_datagram(now, "[2001:db8::2]:2".parse().unwrap(), first_with_maxdata(1440, true));
    let mut buf = vec![0u8; 2048];
    let mut diag = None;
    while let Some(t) = server.poll_transmit(now, &mut buf) {
        assert!(t.len <= 85, "{} bytes towards the IPv6 peer", t.len);
        if let Body::Diag(d) = PacketRepr::parse(&buf[..t.len]).unwrap().body {
            diag = Some((d.code, String::from_utf8_lossy(d.text).into_owned()));
        }
    }
    let (code, text) = diag.expect("a DIAG answers the IPv6 FIRST");
    assert_eq!(code, 1, "context refused: {text}");
    assert!(text.contains("max_packet below 125"), "{text}");
    while let Some(e) = server.poll_event() {
        assert!(!matches!(e, Event::Incoming { .. }), "no context for the IPv6 peer: {e:?}");
    }
    assert_eq!(server.context_count(), 0);
    server.handle_datagram(now, "10.0.0.2:2".parse().unwrap(), first_with_maxdata(1440, false));
    let mut incoming = false;
    while let Some(e) = server.poll_event() {
        incoming |= matches!(e, Event::Incoming { .. });
    }
    assert!(incoming, "an IPv4 peer is accepted at 105 bytes");
}

/// Sends what `from` has queued: control packets are handed to `to`, DATA
/// packets are only counted (their lengths of data returned), so nothing
/// of the data is ever acknowledged.
fn control_only(from: &mut Endpoint, fa: SocketAddr, to: &mut Endpoint, now: Instant) -> Vec<usize> {
    let mut buf = vec![0u8; 2048];
    let mut data_lens = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        assert!(t.len <= 210, "{} B over the client's 210-byte path", t.len);
        match PacketRepr::parse(&buf[..t.len]).unwrap().body {
            Body::Data { data, .. } => data_lens.push(data.len()),
            _ => to.handle_datagram(now, fa, Bytes::copy_from_slice(&buf[..t.len])),
        }
    }
    data_lens
}

/// The congestion controller learns the segment the peer's `maxdata` cut
/// (`Controller::set_mss`): a server on Ethernet answering a client of
/// 210-byte packets (its FIRST says `maxdata` 178) sends a first flight of
/// ten 178-byte segments — the initial window in the new size — not ten
/// of its own 1,400-byte segments (14,000 bytes: 79 packets into a radio
/// hop that carries one per ~0.2 s). The client validates the server's
/// key (G27, so the half-open limit is not what stops the flight) but
/// never sees a DATA packet, so nothing is acknowledged and the flight is
/// all the window lets out.
#[test]
fn the_first_flight_after_a_small_maxdata_is_ten_small_segments() {
    let (sa, ca): (SocketAddr, SocketAddr) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
    let mut server = Endpoint::new(EndpointConfig::default(), 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let mut client = Endpoint::new(EndpointConfig { max_packet: 210, ..EndpointConfig::default() }, 42);
    let mut now = Instant::from_secs(1);
    let c = client.connect(now, sa, 7, ContextConfig::stream()).unwrap();
    client.write(now, c, Bytes::from_static(b"GET"), true, None).unwrap();
    let mut flight = Vec::new();
    for _ in 0..4 {
        assert!(
            control_only(&mut client, ca, &mut server, now).len() <= 1,
            "the client sends only its request"
        );
        while let Some(e) = server.poll_event() {
            if let Event::Incoming { ctx, .. } = e {
                server.write(now, ctx, Bytes::from(vec![7u8; 60_000]), true, None).unwrap();
            }
        }
        flight.extend(control_only(&mut server, sa, &mut client, now));
        now += Duration::from_millis(1);
    }
    let bytes: usize = flight.iter().sum();
    assert!(!flight.is_empty(), "the server sent data");
    assert!(bytes <= 10 * 178, "first flight {bytes} B in {} packets: {flight:?}", flight.len());
    assert!(flight.len() <= 10, "{flight:?}");
}

/// We never send packets larger than our own path because the peer says
/// it takes more: a client of 210-byte packets (a 238-byte radio hop at
/// its end) talking to a server on Ethernet that advertises `maxdata`
/// 1,440 keeps every packet at 210 bytes or less. The peer's `maxdata`
/// only ever lowers `max_packet` (G28).
#[test]
fn a_peer_advertising_more_than_our_path_does_not_raise_our_packets() {
    let (sa, ca): (SocketAddr, SocketAddr) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
    let mut server = Endpoint::new(EndpointConfig::default(), 41);
    server.listen(7, ContextConfig::stream()).unwrap();
    let client = Endpoint::new(EndpointConfig { max_packet: 210, ..EndpointConfig::default() }, 42);
    // `b_to_a` logs what b (the client) sends.
    let mut w = Wire::new(server, sa, client, ca, Instant::from_secs(1));
    let c = w.b.connect(w.now, sa, 7, ContextConfig::stream()).unwrap();
    // Messages with BTAGs after the server's TCNTL too: a BTAG's 8 bytes
    // come out of the packet budget, so a budget the peer raised shows.
    let mut total = 0;
    for i in 0..30 {
        let len = 1_000 + i;
        w.b.write(w.now, c, Bytes::from(vec![7u8; len]), true, Some(i as u64 + 1)).unwrap();
        total += len;
        if i == 0 {
            w.run(Duration::from_millis(10));
        }
    }
    receive_all(&mut w, total);
    let data =
        w.b_to_a.iter().filter(|p| matches!(PacketRepr::parse(p).unwrap().body, Body::Data { .. })).count();
    assert!(data > 100, "DATA packets followed the server's TCNTL: {data}");
    let largest = w.b_to_a.iter().map(Bytes::len).max().unwrap();
    assert!(largest <= 210, "a client packet of {largest} B over its own 210-byte path");
}
