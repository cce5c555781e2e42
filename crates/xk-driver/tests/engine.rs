//! The engine-thread mode's own promises, over real UDP on loopback:
//! backpressure instead of loss when the rings are tiny, refusal of blocks
//! naming unknown contexts, and one wake-up per message each way in a
//! blocking request/response loop. (The API suite in `api.rs` runs in this
//! mode too.)

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use xk_driver::api::{EngineConfig, Mode, Xtp, XtpStream};
use xk_driver::driver::UdpDriver;
use xk_driver::engine::{self, BlockError, CtxHandle, Notice, ToEngine};
use xtp_proto::{ContextConfig, EndpointConfig};

const PORT: u16 = 7;

fn pattern(n: usize, salt: u64) -> Vec<u8> {
    (0..n).map(|i| (i as u64 ^ salt).wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect()
}

/// An integrated listener on its own thread running `serve` on the first
/// stream it accepts; returns its address and the thread.
fn server<R: Send + 'static>(
    serve: impl FnOnce(XtpStream) -> R + Send + 'static,
) -> (SocketAddr, std::thread::JoinHandle<R>) {
    let (tell, addr) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut l = Xtp::default().bind("127.0.0.1:0", PORT).unwrap();
        tell.send(l.local_addr().unwrap()).unwrap();
        let (s, _, _) = l.accept_timeout(Some(Duration::from_secs(30))).expect("a client within 30 s");
        serve(s)
    });
    (addr.recv().unwrap(), t)
}

/// The server side of the message loops: echoes each message with its
/// BTAG until the client closes; returns how many it echoed.
fn echo_messages(mut s: XtpStream) -> u64 {
    let mut n = 0;
    while let Some(m) = s.recv_message().unwrap() {
        s.send_message(&m.data, m.btag).unwrap();
        n += 1;
    }
    s.close().unwrap();
    n
}

/// Rings of two blocks, 4 KiB of read credit and a 64 KiB write bound: a
/// 4 MB write must wait on the ring many times, and every byte must arrive
/// once, in order. Then the other way: the server sends 4 MB to a client
/// whose FN ring and credit are as small, so the engine holds data back.
#[test]
fn tiny_rings_block_instead_of_losing() {
    const N: usize = 4_000_000;
    let tiny =
        EngineConfig { ring_slots: 2, read_credit: 4096, write_bound: 64 << 10, ..EngineConfig::default() };
    let (addr, srv) = server(|mut s| {
        let mut got = Vec::with_capacity(N);
        let mut buf = vec![0u8; 64 << 10];
        while got.len() < N {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "stream ended after {} of {N} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        let intact = got == pattern(N, 1);
        s.write_all(&pattern(N, 2)).unwrap();
        s.close().unwrap();
        (got.len(), intact)
    });
    let mut s = Xtp::new(Mode::EngineThread(tiny)).connect(addr, PORT).unwrap();
    s.set_timeout(Some(Duration::from_secs(60)));
    // Many small writes: each is a block, so the two-slot ring fills.
    for chunk in pattern(N, 1).chunks(1000) {
        s.write_all(chunk).unwrap();
    }
    let mut back = Vec::with_capacity(N);
    s.read_to_end(&mut back).unwrap();
    let stats = s.ring_stats().expect("engine-thread mode");
    s.close().unwrap();
    let (got, intact) = srv.join().unwrap();
    assert_eq!(got, N, "bytes the server read");
    assert!(intact, "the server's bytes differ from what was written");
    assert_eq!(back.len(), N, "bytes echoed");
    assert!(back == pattern(N, 2), "the bytes read differ from what the server wrote");
    eprintln!("{stats:?}");
    assert!(stats.tn_full > 0, "the TN ring never filled: the test tests nothing ({stats:?})");
    assert!(stats.fn_full > 0, "the FN ring never filled: the test tests nothing ({stats:?})");
}

/// Blocks naming no context, or claiming a handle of the engine's range,
/// are refused with an error to the poster and change nothing.
#[test]
fn unknown_context_is_refused() {
    let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 1).unwrap();
    let mut e = engine::spawn(d, EngineConfig::default()).unwrap();
    let ghost = CtxHandle(4242);
    e.post(ToEngine::Write { ctx: ghost, data: Bytes::from_static(b"x"), eom: false, btag: None }).unwrap();
    e.post(ToEngine::Close { ctx: ghost }).unwrap();
    let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let stolen = CtxHandle(CtxHandle::ENGINE_RANGE + 1);
    e.post(ToEngine::Connect { ctx: stolen, peer, port: PORT, cfg: ContextConfig::stream() }).unwrap();
    let mut errors = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while errors.len() < 3 && Instant::now() < end {
        e.wait(xk_time::Duration::from_millis(50)).unwrap();
        while let Some(n) = e.next_notice() {
            match n {
                Notice::Failed { ctx, error } => errors.push((ctx, error)),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(
        errors,
        vec![
            (ghost, BlockError::UnknownContext),
            (ghost, BlockError::UnknownContext),
            (stolen, BlockError::BadHandle)
        ]
    );
}

/// Voluntary context switches of the calling thread (the kernel's count).
fn voluntary_switches() -> i64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD).map(|u| u.voluntary_context_switches()).unwrap_or(0)
}

/// A blocking request/response loop: the application sleeps once per
/// message and is woken once; the engine is woken once per request. Seed
/// 004's goal (one host interrupt per message, not per packet), counted
/// by us (doorbell rings) and by the kernel (voluntary switches).
#[test]
fn one_wakeup_per_message_when_blocking() {
    const MESSAGES: u64 = 300;
    let (addr, srv) = server(echo_messages);
    let mut s = Xtp::new(Mode::engine_thread()).connect(addr, PORT).unwrap();
    let msg = pattern(1000, 3);
    // Warm up (context setup, first round trips), then count.
    for _ in 0..20 {
        s.send_message(&msg, None).unwrap();
        s.recv_message().unwrap().unwrap();
    }
    let before = s.ring_stats().unwrap();
    let switches = voluntary_switches();
    for i in 0..MESSAGES {
        s.send_message(&msg, Some(i)).unwrap();
        let m = s.recv_message().unwrap().expect("echo");
        assert_eq!((m.data.len(), m.btag), (msg.len(), Some(i)));
    }
    let switches = voluntary_switches() - switches;
    let after = s.ring_stats().unwrap();
    s.close().unwrap();
    assert_eq!(srv.join().unwrap(), MESSAGES + 20);
    let per = |a: u64, b: u64| (a - b) as f64 / MESSAGES as f64;
    let app = per(after.app_wakeups, before.app_wakeups);
    let engine = per(after.engine_wakeups, before.engine_wakeups);
    let kernel = switches as f64 / MESSAGES as f64;
    eprintln!("per message: app woken {app:.2}, engine woken {engine:.2}, app thread switches {kernel:.2}");
    // At most one each way (a little slack for a timer-driven wake-up).
    assert!(app <= 1.1, "application woken {app:.2} times per message");
    assert!(engine <= 1.1, "engine woken {engine:.2} times per message");
    assert!(kernel <= 1.5, "application thread switched {kernel:.2} times per message");
    // And it does sleep: a blocking loop that never slept would be spinning.
    assert!(app >= 0.5, "application woken only {app:.2} times per message: not blocking?");
}

/// Busy-poll: neither side ever sleeps, so no doorbell is rung, and the
/// messages still arrive intact.
#[test]
fn busy_poll_rings_no_doorbell() {
    const MESSAGES: u64 = 200;
    let (addr, srv) = server(echo_messages);
    let mut s = Xtp::new(Mode::busy_engine_thread()).connect(addr, PORT).unwrap();
    for i in 0..MESSAGES {
        let msg = pattern(1 + (i as usize * 331) % 3000, i);
        s.send_message(&msg, Some(i)).unwrap();
        let m = s.recv_message().unwrap().expect("echo");
        assert_eq!((m.data, m.btag), (msg, Some(i)), "message {i}");
    }
    let stats = s.ring_stats().unwrap();
    s.close().unwrap();
    assert_eq!(srv.join().unwrap(), MESSAGES);
    assert_eq!((stats.app_wakeups, stats.engine_wakeups), (0, 0), "{stats:?}");
    assert_eq!((stats.app_sleeps, stats.engine_sleeps), (0, 0), "{stats:?}");
}
