//! The UDP relay on loopback: delay accuracy, release error (at the E2
//! operating point too) and rate limit. Traffic goes only to 127.0.0.1; every
//! loop is bounded in count and time.

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use xk_driver::pacer::{DEFAULT_SPIN, Scheduling};
use xk_driver::relay::{DEFAULT_MAX_P99_ERROR, RelayConfig, RelayReport, run_on};
use xk_netemu::parse_line;
use xk_time::Duration;

/// The tests measure real time; run them one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn relay(
    fwd: &str,
    rev: &str,
    secs: u64,
) -> (SocketAddr, SocketAddr, UdpSocket, thread::JoinHandle<RelayReport>) {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (raddr, saddr) = (relay_sock.local_addr().unwrap(), server.local_addr().unwrap());
    let cfg = RelayConfig {
        listen: raddr,
        server: saddr,
        forward: parse_line(fwd).unwrap(),
        reverse: parse_line(rev).unwrap(),
        seed: 1,
        duration: Duration::from_secs(secs),
        spin: DEFAULT_SPIN,
        max_p99_error: DEFAULT_MAX_P99_ERROR,
        stop: None,
    };
    let h = thread::spawn(move || run_on(relay_sock, &cfg, &mut None).unwrap());
    (raddr, saddr, server, h)
}

#[test]
fn delay_is_applied_with_small_release_error() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (raddr, _saddr, server, h) = relay("delay 20ms", "delay 20ms", 4);
    // Echo server, bounded by a read timeout.
    let echo = thread::spawn(move || {
        server.set_read_timeout(Some(StdDuration::from_millis(500))).unwrap();
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            let _ = server.send_to(&buf[..n], from);
        }
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The client blocks for echoes between sends instead of spinning: a
    // client spinning on a whole core beside the relay's real-time thread
    // left the echo thread and itself one core on a 2-core machine, and its
    // round trips grew by milliseconds of its own scheduling (the relay's
    // release error stayed under 100 µs; it is asserted below).
    client.set_read_timeout(Some(StdDuration::from_millis(1))).unwrap();
    let t0 = StdInstant::now();
    let mut rtts = Vec::new();
    let mut buf = [0u8; 64];
    let mut i = 0u64;
    // 10,000 packets/s for 2 s (sent in small bursts: the timeout above
    // rounds to the kernel tick).
    while t0.elapsed() < StdDuration::from_millis(2500) {
        while i < 20_000 && t0.elapsed() >= StdDuration::from_micros(100 * i) {
            client.send_to(&(t0.elapsed().as_nanos() as u64).to_be_bytes(), raddr).unwrap();
            i += 1;
        }
        if let Ok((8, _)) = client.recv_from(&mut buf) {
            let sent = u64::from_be_bytes(buf[..8].try_into().unwrap());
            rtts.push(t0.elapsed().as_nanos() as u64 - sent);
        }
    }
    let report = h.join().unwrap();
    echo.join().unwrap();
    eprintln!("{}", report.to_json());
    rtts.sort_unstable();
    assert!(rtts.len() > 15_000, "only {} echoes", rtts.len());
    let med = rtts[rtts.len() / 2] as f64 / 1e6;
    eprintln!("median RTT {med:.3} ms");
    // Never early: the delay is applied. The upper side of the round trip
    // also holds the client's and the echo thread's own scheduling, which
    // this test does not control (a CI run on a fresh clone saw a 45.4 ms
    // median while the relay's own release error was 37 µs at p50), so it is
    // loose here; the relay's precision is asserted on its own report below.
    assert!((39.9..50.0).contains(&med), "median RTT {med:.3} ms for 2 × 20 ms");
    // With SCHED_FIFO (root, as CI runs) the release is that of an idle
    // machine; at normal priority the thread waits its turn on a loaded one
    // (p50 about 120 µs in a debug build beside the other tests' builds).
    let p50 = report.forward.error_quantile(0.5);
    let fifo = matches!(report.timing.scheduling, Some(Scheduling::Fifo(_)));
    let limit = Duration::from_micros(if fifo { 100 } else { 500 });
    assert!(p50 <= limit, "release error p50 {p50:?} ({:?})", report.timing.scheduling);
}

#[test]
fn rate_limit_holds_within_two_percent() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The receiving thread's clock measures the rate, so a VM stall at
    // either end of its span skews one run (97.91 Mbit/s was seen once on a
    // loaded machine); up to three runs, as the other real-time tests here.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (mbit, n) = rate_through_a_100_mbit_limit();
        assert!(n > 5000, "only {n} packets");
        if (mbit / 100.0 - 1.0).abs() < 0.02 {
            return;
        }
        seen.push(format!("{mbit:.2}"));
    }
    panic!("{} Mbit/s through a 100 Mbit/s limit in three runs", seen.join(", "));
}

fn rate_through_a_100_mbit_limit() -> (f64, usize) {
    let (raddr, _saddr, server, h) = relay("rate 100mbit limit 100000", "delay 1ms", 4);
    let rx = thread::spawn(move || {
        server.set_read_timeout(Some(StdDuration::from_millis(500))).unwrap();
        let mut buf = [0u8; 2048];
        let (mut first, mut last, mut bytes, mut n) = (None, None, 0usize, 0usize);
        while let Ok((len, _)) = server.recv_from(&mut buf) {
            let now = StdInstant::now();
            if first.is_none() {
                first = Some(now);
            } else {
                bytes += len; // bytes after the first arrival, over the span
            }
            last = Some(now);
            n += 1;
        }
        (bytes, last.unwrap().duration_since(first.unwrap()), n)
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    // 12,000 × 1,250 B = 120 Mbit offered in one second, above the limit.
    let payload = [0x55u8; 1250];
    let t0 = StdInstant::now();
    for i in 0..12_000u32 {
        while t0.elapsed() < StdDuration::from_micros(u64::from(i) * 83) {}
        client.send_to(&payload, raddr).unwrap();
    }
    let report = h.join().unwrap();
    let (bytes, span, n) = rx.join().unwrap();
    let mbit = bytes as f64 * 8.0 / span.as_secs_f64() / 1e6;
    eprintln!("{n} packets, {mbit:.2} Mbit/s; {}", report.to_json());
    (mbit, n)
}

#[test]
fn packet_radio_channel_in_real_time() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A run whose round trips miss the model is repeated, up to three runs:
    // this machine is sometimes not run at all for 10–100 ms (see
    // `release_error_at_45_mbit_and_100_ms`), which shifts a round trip by
    // as much, however exact the relay. A real timing error fails all three.
    for attempt in 1..=3 {
        match radio_round_trips() {
            Ok(()) => return,
            Err(why) if attempt < 3 => eprintln!("run {attempt} missed the model, repeated: {why}"),
            Err(why) => panic!("three runs missed the model; last: {why}"),
        }
    }
}

/// One run of the packet-radio check; `Err` when a round trip misses the
/// model (the rest is asserted).
fn radio_round_trips() -> Result<(), String> {
    // p = 1 makes the timing exact: key-up 100 ms, then (100 + 20) bytes at
    // 9,600 bit/s = 100 ms of airtime, handed over at the frame's end.
    let line = "profile packet-radio-9600 txdelay 100ms persist 100%";
    let (raddr, _saddr, server, h) = relay(line, line, 4);
    let echo = thread::spawn(move || {
        server.set_read_timeout(Some(StdDuration::from_millis(1500))).unwrap();
        let mut buf = [0u8; 2048];
        let mut n_echoed = 0;
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            let _ = server.send_to(&buf[..n], from);
            n_echoed += 1;
        }
        n_echoed
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(StdDuration::from_millis(1500))).unwrap();
    let mut buf = [0u8; 256];
    let mut rtts = Vec::new();
    for _ in 0..3 {
        let t = StdInstant::now();
        client.send_to(&[7u8; 100], raddr).unwrap();
        let (n, _) = client.recv_from(&mut buf).unwrap();
        assert_eq!(n, 100);
        rtts.push(t.elapsed());
    }
    // Too long for one 238-byte frame: dropped by the station, not sent.
    client.send_to(&[0u8; 239], raddr).unwrap();
    let report = h.join().unwrap();
    assert!(echo.join().unwrap() == 3);
    // Each way: key-up 100 ms + 100 ms airtime. The echo answers at once,
    // while the request's 10 ms tail is still on the air: the reply senses
    // the carrier and waits for it (410 ms). From the second round on, the
    // next request meets the reply's tail the same way (420 ms) — but its
    // wait ends when that tail ends, a time fixed before the client even got
    // the reply, so however late the reply was handed over comes off these
    // round trips (a CI run: 418.6 ms after a reply 1.4 ms late). Their
    // bounds are therefore wider below; the relay's own release error,
    // asserted after, is the accuracy check.
    for (i, rtt) in rtts.iter().enumerate() {
        let ms = rtt.as_secs_f64() * 1e3;
        let (model, below) = if i == 0 { (410.0, 0.0) } else { (420.0, 5.0) };
        if !(model - below..model + 3.0).contains(&ms) {
            return Err(format!("round trip {i}: {ms:.2} ms, model says {model} ms: {rtts:?}"));
        }
    }
    let (f, r) = (&report.forward.link, &report.reverse.link);
    assert_eq!((f.key_ups, r.key_ups, f.delivered, r.delivered), (3, 3, 3, 3), "{report:?}");
    assert_eq!((f.drop_mtu, f.drop_collision, r.drop_collision), (1, 0, 0));
    assert!(report.forward.error_quantile(0.5) < Duration::from_millis(1), "{report:?}");
    assert!(report.reverse.error_quantile(0.5) < Duration::from_millis(1), "{report:?}");
    Ok(())
}

/// The E2 operating point — 45 Mbit/s, 100 ms each way — with 1,400-byte
/// datagrams offered just under the rate and a 40-byte answer for every
/// second one (as TCP's ACKs), both directions' release error bounded.
///
/// The bound catches a bad regression (a wake-up on the kernel tick, a
/// thread left waiting behind the load) without failing on a loaded 2-core
/// CI machine in a debug build: p99 2 ms with `SCHED_FIFO` (root, as CI
/// runs), 20 ms at normal priority. The goal, p99 ≤ 200 µs, is measured in
/// release builds by `scripts/bench-release.sh` (docs/PERF.md);
/// `XK_RELEASE_P99_LIMIT_US=200` holds this test to it.
///
/// This virtual machine is sometimes not run at all for 10–100 ms (a
/// real-time `cyclictest` sees the same); one such stall in a 3-second run
/// delays 1–3 % of the packets. The relay reports it (a timer wake-up over
/// 1 ms late), and a run spoiled that way is repeated, up to three runs.
#[test]
fn release_error_at_45_mbit_and_100_ms() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for attempt in 1..=3 {
        match one_45_mbit_run() {
            Ok(()) => return,
            Err((why, stalled)) if stalled && attempt < 3 => {
                eprintln!("run {attempt} spoiled by a stall of the machine, repeated: {why}");
            }
            Err((why, _)) => panic!("{why}"),
        }
    }
}

/// One run of [`release_error_at_45_mbit_and_100_ms`]: Err with the reason
/// and whether the machine stalled the relay's thread during it.
fn one_45_mbit_run() -> Result<(), (String, bool)> {
    let line = "delay 100ms rate 45mbit limit 10000";
    let (raddr, _saddr, server, h) = relay(line, line, 4);
    let echo = thread::spawn(move || {
        server.set_read_timeout(Some(StdDuration::from_millis(500))).unwrap();
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while let Ok((_, from)) = server.recv_from(&mut buf) {
            n += 1;
            if n.is_multiple_of(2) {
                let _ = server.send_to(&[0xacu8; 40], from);
            }
        }
        n
    });
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    // 4 × 1,400 B every millisecond = 44.8 Mbit/s for 3 s. Sleeping between
    // bursts keeps the sender off the CPU; the link spaces the packets out.
    let payload = [0x45u8; 1400];
    let t0 = StdInstant::now();
    let mut sent = 0u64;
    for ms in 0..3000u64 {
        for _ in 0..4 {
            client.send_to(&payload, raddr).unwrap();
            sent += 1;
        }
        let next = StdDuration::from_millis(ms + 1);
        if let Some(wait) = next.checked_sub(t0.elapsed()) {
            thread::sleep(wait);
        }
    }
    let report = h.join().unwrap();
    let received = echo.join().unwrap();
    let j = report.to_json();
    eprintln!("{sent} sent, {received} through; {j}");
    assert!(received as f64 >= 0.9 * sent as f64, "{received} of {sent} datagrams through");
    assert!(report.reverse.link.delivered > 1000, "{j}");
    let fifo = matches!(report.timing.scheduling, Some(Scheduling::Fifo(_)));
    let limit_us = std::env::var("XK_RELEASE_P99_LIMIT_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(if fifo { 2_000 } else { 20_000 });
    let stalled = report.timing.stalls(Duration::from_millis(1)).0 > 0;
    for (name, d) in [("forward", &report.forward), ("reverse", &report.reverse)] {
        let p99 = d.error_quantile(0.99);
        if p99 > Duration::from_micros(limit_us) {
            let why = format!(
                "{name} release error p99 {p99:?} above {limit_us} µs ({:?}): {j}",
                report.timing.scheduling
            );
            return Err((why, stalled));
        }
    }
    Ok(())
}
