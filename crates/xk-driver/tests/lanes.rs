//! Peer lanes over real UDP sockets on loopback: a validated client's
//! datagrams reach the server on a socket of their own, out of the way of
//! junk flooding the shared socket; the lane closes with the client's last
//! context and goes to a client refused one at the limit; a second server
//! cannot bind the port the lanes share; beside a busy lane the shared
//! socket is read within the intake budget.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use bytes::Bytes;
use xk_driver::driver::{DriverConfig, UdpDriver};
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig, Event};

/// Serves port 9 (discard) with lanes until `stop` is set and every context
/// is freed (at most 30 s); returns the driver.
fn server(stop: Arc<AtomicBool>, peer_lanes: usize) -> (SocketAddr, std::thread::JoinHandle<UdpDriver>) {
    server_with(stop, DriverConfig { peer_lanes, ..DriverConfig::default() }, None)
}

/// As [`server`], with driver settings; `shared_read` follows the intake
/// budget's count of datagrams read from the shared socket, turn by turn.
fn server_with(
    stop: Arc<AtomicBool>,
    cfg: DriverConfig,
    shared_read: Option<Arc<AtomicU64>>,
) -> (SocketAddr, std::thread::JoinHandle<UdpDriver>) {
    let mut d = UdpDriver::bind_with("127.0.0.1:0", EndpointConfig::default(), 1, cfg).unwrap();
    d.endpoint().listen(9, ContextConfig::stream()).unwrap();
    let addr = d.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let deadline = StdInstant::now() + StdDuration::from_secs(30);
        while !(stop.load(Ordering::Relaxed) && d.endpoint().context_count() == 0)
            && StdInstant::now() < deadline
        {
            d.turn(Duration::from_millis(5)).unwrap();
            if let Some(r) = &shared_read {
                r.store(d.intake_counters().shared_read, Ordering::Relaxed);
            }
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

/// One thread sending 64-byte junk datagrams at `addr` as fast as it can
/// until `stop`, for at most `secs` seconds or `most` sends; the count.
fn junk(addr: SocketAddr, stop: Arc<AtomicBool>, secs: u64, most: u64) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let end = StdInstant::now() + StdDuration::from_secs(secs);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) && StdInstant::now() < end && n < most {
            let _ = s.send_to(&[0xa5u8; 64], addr);
            n += 1;
        }
        n
    })
}

#[test]
fn a_validated_client_gets_a_lane_out_of_a_floods_way() {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, h) = server(stop.clone(), 4);
    // Junk at the shared socket the whole time (bounded: 3 s or 2 M sends).
    let junk_stop = Arc::new(AtomicBool::new(false));
    let junk = junk(addr, junk_stop.clone(), 3, 2_000_000);
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

/// A client sends 1 MB every 20 ms for about a second (its lane busy the
/// whole time) while one thread floods the shared socket with junk: the
/// server reads the shared socket at the budget's rate, not at the flood's
/// (without the budget it reads tens of thousands of junk datagrams a
/// second here), and still reads it.
#[test]
fn beside_a_busy_lane_the_shared_socket_is_read_within_the_budget() {
    const RATE: u64 = 2_000;
    let stop = Arc::new(AtomicBool::new(false));
    let read = Arc::new(AtomicU64::new(0));
    let cfg = DriverConfig { peer_lanes: 4, unvalidated_rate: RATE, ..DriverConfig::default() };
    let (addr, h) = server_with(stop.clone(), cfg, Some(read.clone()));
    let mut c = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 3).unwrap();
    let now = c.now();
    let ctx = c.endpoint().connect(now, addr, 9, ContextConfig::stream()).unwrap();
    let chunk = Bytes::from(vec![5u8; 1 << 20]);
    let junk_stop = Arc::new(AtomicBool::new(false));
    let mut flood = None;
    let mut window = None;
    for i in 0..60 {
        let now = c.now();
        c.endpoint().write(now, ctx, chunk.clone(), false, None).unwrap();
        let next = StdInstant::now() + StdDuration::from_millis(20);
        while StdInstant::now() < next {
            c.turn(Duration::from_millis(2)).unwrap();
            while c.endpoint().poll_event().is_some() {}
        }
        if i == 5 {
            // The lane is open and busy: flood from now on (bounded: 5 s
            // or 3 M sends), and count from a moment later.
            flood = Some(junk(addr, junk_stop.clone(), 5, 3_000_000));
        }
        if i == 10 {
            window = Some((StdInstant::now(), read.load(Ordering::Relaxed)));
        }
    }
    let (t0, r0) = window.unwrap();
    let (secs, during) = (t0.elapsed().as_secs_f64(), read.load(Ordering::Relaxed) - r0);
    junk_stop.store(true, Ordering::Relaxed);
    let junk_sent = flood.unwrap().join().unwrap();
    let acked = c.endpoint().context_stats(ctx).map_or(0, |s| s.bytes_acked);
    let now = c.now();
    c.endpoint().close(now, ctx);
    stop.store(true, Ordering::Relaxed);
    while !h.is_finished() {
        c.turn(Duration::from_millis(5)).unwrap();
        while c.endpoint().poll_event().is_some() {}
    }
    let d = h.join().unwrap();
    let intake = d.intake_counters();
    println!(
        "junk sent {junk_sent}; {during} datagrams read from the shared socket in {secs:.2} s; {intake:?}"
    );
    // All but the last megabyte, written 20 ms before, was acknowledged.
    assert!(acked >= 59 << 20, "the transfer went on under the flood: {acked} B acknowledged");
    // The budget's rate, plus its depth and one batch of slack for the
    // turn the counter lags by.
    let most = RATE as f64 * secs + 64.0 + 64.0;
    assert!((during as f64) <= most, "{during} read in {secs:.2} s, budget {most:.0}");
    assert!((during as f64) >= RATE as f64 * secs / 4.0, "the shared socket was still read: {during}");
    assert!(intake.deferred > 0, "the budget was spent and the socket set aside");
}

/// Two clients, one lane: A holds it and keeps it busy, B is validated but
/// left on the shared socket. B's datagrams are not charged to the intake
/// budget (a small one here), so with no flood the shared socket is never
/// set aside and B's 8 MB go through at loopback speed.
#[test]
fn a_validated_client_beyond_the_lane_limit_is_not_charged() {
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = DriverConfig { peer_lanes: 1, unvalidated_rate: 500, ..DriverConfig::default() };
    let (addr, h) = server_with(stop.clone(), cfg, None);
    let mut a = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 4).unwrap();
    let mut b = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 5).unwrap();
    let now = a.now();
    let ca = a.endpoint().connect(now, addr, 9, ContextConfig::stream()).unwrap();
    // A first, until the server has validated it and given it the lane.
    let t = StdInstant::now();
    while t.elapsed() < StdDuration::from_millis(200) {
        let now = a.now();
        let _ = a.endpoint().write(now, ca, Bytes::from(vec![1u8; 1024]), false, None);
        a.turn(Duration::from_millis(1)).unwrap();
        while a.endpoint().poll_event().is_some() {}
    }
    let now = b.now();
    let cb = b.endpoint().connect(now, addr, 9, ContextConfig::stream()).unwrap();
    let total = 8u64 << 20;
    let chunk = Bytes::from(vec![6u8; 64 << 10]);
    let mut written = 0;
    let end = StdInstant::now() + StdDuration::from_secs(20);
    let mut acked = 0;
    while acked < total && StdInstant::now() < end {
        // A trickles 1 KB per turn on its lane: busy, never idle 100 ms.
        let now = a.now();
        let _ = a.endpoint().write(now, ca, Bytes::from(vec![1u8; 1024]), false, None);
        a.turn(Duration::from_millis(1)).unwrap();
        while a.endpoint().poll_event().is_some() {}
        let now = b.now();
        let ep = b.endpoint();
        while written < total && ep.writable(cb, 1 << 20) {
            ep.write(now, cb, chunk.clone(), false, None).unwrap();
            written += chunk.len() as u64;
        }
        while ep.poll_event().is_some() {}
        acked = ep.context_stats(cb).map_or(0, |s| s.bytes_acked);
        b.turn(Duration::from_millis(1)).unwrap();
    }
    assert_eq!(acked, total, "B's transfer finished within 20 s");
    for (c, ctx) in [(&mut a, ca), (&mut b, cb)] {
        let now = c.now();
        c.endpoint().close(now, ctx);
    }
    stop.store(true, Ordering::Relaxed);
    while !h.is_finished() {
        for c in [&mut a, &mut b] {
            c.turn(Duration::from_millis(2)).unwrap();
            while c.endpoint().poll_event().is_some() {}
        }
    }
    let d = h.join().unwrap();
    let (lanes, intake) = (d.lane_counters(), d.intake_counters());
    println!("{lanes:?} {intake:?}");
    assert_eq!(lanes.at_limit, 1, "B was left on the shared socket");
    assert!(intake.shared_read > 1000, "B's datagrams came through the shared socket: {intake:?}");
    assert_eq!(intake.deferred, 0, "no flood, so the shared socket was never set aside");
}
