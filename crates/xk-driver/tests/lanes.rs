//! Peer lanes over real UDP sockets on loopback: a validated client's
//! datagrams reach the server on a socket of their own, out of the way of
//! junk flooding the shared socket; the lane closes with the client's last
//! context and goes to a client refused one at the limit; a second server
//! cannot bind the port the lanes share.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use bytes::Bytes;
use xk_driver::driver::{DriverConfig, UdpDriver};
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig, Event};

/// Serves port 9 (discard) with lanes until `stop` is set and every context
/// is freed (at most 30 s); returns the driver.
fn server(stop: Arc<AtomicBool>, peer_lanes: usize) -> (SocketAddr, std::thread::JoinHandle<UdpDriver>) {
    let cfg = DriverConfig { peer_lanes, ..DriverConfig::default() };
    let mut d = UdpDriver::bind_with("127.0.0.1:0", EndpointConfig::default(), 1, cfg).unwrap();
    d.endpoint().listen(9, ContextConfig::stream()).unwrap();
    let addr = d.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let deadline = StdInstant::now() + StdDuration::from_secs(30);
        while !(stop.load(Ordering::Relaxed) && d.endpoint().context_count() == 0)
            && StdInstant::now() < deadline
        {
            d.turn(Duration::from_millis(5)).unwrap();
            let now = d.now();
            let ep = d.endpoint();
            while let Some(ev) = ep.poll_event() {
                if let Event::Readable { ctx } | Event::PeerFinished { ctx } = ev {
                    while ep.read(now, ctx).is_some() {}
                    if matches!(ev, Event::PeerFinished { .. }) {
                        ep.close(now, ctx);
                    }
                }
            }
        }
        d
    });
    (addr, h)
}

#[test]
fn a_validated_client_gets_a_lane_out_of_a_floods_way() {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, h) = server(stop.clone(), 4);
    // Junk at the shared socket the whole time (bounded: 3 s or 2 M sends).
    let junk_stop = Arc::new(AtomicBool::new(false));
    let js = junk_stop.clone();
    let junk = std::thread::spawn(move || {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let end = StdInstant::now() + StdDuration::from_secs(3);
        let mut n = 0u64;
        while !js.load(Ordering::Relaxed) && StdInstant::now() < end && n < 2_000_000 {
            let _ = s.send_to(&[0xa5u8; 64], addr);
            n += 1;
        }
        n
    });
    let mut c = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 2).unwrap();
    let now = c.now();
    let ctx = c.endpoint().connect(now, addr, 9, ContextConfig::stream()).unwrap();
    let total = 8u64 << 20;
    let chunk = Bytes::from(vec![7u8; 64 << 10]);
    let mut written = 0;
    let end = StdInstant::now() + StdDuration::from_secs(20);
    let mut closed = false;
    let mut graceful = None;
    while StdInstant::now() < end {
        let now = c.now();
        let ep = c.endpoint();
        while written < total && ep.writable(ctx, 1 << 20) {
            ep.write(now, ctx, chunk.clone(), false, None).unwrap();
            written += chunk.len() as u64;
        }
        if written >= total && !closed {
            ep.close(now, ctx);
            closed = true;
        }
        while let Some(ev) = ep.poll_event() {
            if let Event::Closed { reason, .. } = ev {
                graceful = Some(reason == xtp_proto::CloseReason::Graceful);
            }
        }
        if graceful.is_some() {
            break;
        }
        c.turn(Duration::from_millis(5)).unwrap();
    }
    junk_stop.store(true, Ordering::Relaxed);
    let junk_sent = junk.join().unwrap();
    assert_eq!(graceful, Some(true), "the transfer ended gracefully within 20 s");
    assert_eq!(c.endpoint().context_stats(ctx).map(|s| s.bytes_acked), Some(total));
    // The server ends once its context has lingered and is freed.
    stop.store(true, Ordering::Relaxed);
    let t = StdInstant::now();
    // The client keeps answering meanwhile, as a live process would.
    while !h.is_finished() {
        c.turn(Duration::from_millis(5)).unwrap();
    }
    let mut d = h.join().unwrap();
    println!("the server's context was freed {:.1} s after the transfer", t.elapsed().as_secs_f64());
    let lanes = d.lane_counters();
    let shared = d.counters();
    let malformed = d.endpoint().stats().malformed;
    println!(
        "junk sent {junk_sent}, shared socket received {}, lanes {lanes:?}, contexts held {}",
        shared.received,
        d.endpoint().context_count()
    );
    assert_eq!(lanes.opened, 1, "one lane for the one validated client");
    assert_eq!(lanes.open, 0, "closed with its last context");
    // 8 MB is about 6,000 data packets; on the shared socket only what came
    // before validation (the first round trip's window), and junk.
    let from_client = shared.received - malformed;
    assert!(from_client < 64, "{from_client} of the client's datagrams came through the shared socket");
    assert!(malformed > 0, "the junk reached the shared socket");
}

#[test]
fn a_second_server_cannot_take_a_port_shared_with_lanes() {
    let cfg = DriverConfig { peer_lanes: 4, ..DriverConfig::default() };
    let a = UdpDriver::bind_with("127.0.0.1:0", EndpointConfig::default(), 1, cfg).unwrap();
    let addr = a.local_addr().unwrap();
    for peer_lanes in [0, 4] {
        let cfg = DriverConfig { peer_lanes, ..DriverConfig::default() };
        let e = UdpDriver::bind_with(addr, EndpointConfig::default(), 1, cfg).err().expect("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "peer_lanes {peer_lanes}: {e}");
    }
}

#[test]
fn a_client_refused_a_lane_at_the_limit_gets_the_next_one() {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, h) = server(stop.clone(), 1);
    let mut clients: Vec<UdpDriver> =
        (0..2).map(|i| UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 10 + i).unwrap()).collect();
    // A sends 256 KB and closes; B, a moment later, sends 256 KB and keeps
    // its context open until A's has long been freed on the server (2 s of
    // linger, with room for a loaded machine), then closes.
    let mut ctxs = Vec::new();
    for c in clients.iter_mut() {
        let now = c.now();
        let ep = c.endpoint();
        let ctx = ep.connect(now, addr, 9, ContextConfig::stream()).unwrap();
        ep.write(now, ctx, Bytes::from(vec![3u8; 256 << 10]), false, None).unwrap();
        ctxs.push(ctx);
        for _ in 0..20 {
            c.turn(Duration::from_millis(5)).unwrap();
        }
    }
    let now = clients[0].now();
    clients[0].endpoint().close(now, ctxs[0]);
    let b_closes = StdInstant::now() + StdDuration::from_secs(5);
    stop.store(true, Ordering::Relaxed);
    // Both keep answering until the server has freed both contexts.
    let end = StdInstant::now() + StdDuration::from_secs(25);
    let mut b_open = true;
    while !h.is_finished() && StdInstant::now() < end {
        if b_open && StdInstant::now() >= b_closes {
            let now = clients[1].now();
            clients[1].endpoint().close(now, ctxs[1]);
            b_open = false;
        }
        for c in clients.iter_mut() {
            c.turn(Duration::from_millis(2)).unwrap();
        }
    }
    let d = h.join().unwrap();
    let l = d.lane_counters();
    println!("{l:?}");
    assert_eq!(l.at_limit, 1, "B was refused a lane while A had the only one");
    assert_eq!(l.opened, 2, "B got the lane when A's context was freed");
    assert_eq!(l.open, 0);
}
