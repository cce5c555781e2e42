//! The monitor in the engine-thread mode: a message's journey crosses from
//! the application's thread to the engine thread through the TN ring (the
//! same ring journey at the push and at the pop) and on to the echo
//! server's thread in the same process (the engine's write and the
//! server's read carry the same data journey), with application, ring,
//! engine and system-call events on their own threads, and per-phase
//! profiles from the spans. Needs the `trace` feature (the workspace
//! builds it: the `xpress` binary turns it on).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use xk_driver::api::{Mode, Xtp};
use xk_driver::driver::UdpDriver;
use xk_time::Duration;
use xk_trace::{Phase, Point};
use xtp_proto::{ContextConfig, EndpointConfig, Event};

fn of(t: &xk_trace::ThreadEvents, p: Point) -> impl Iterator<Item = xk_trace::Event> + '_ {
    t.events.iter().filter(move |e| e.point == p).copied()
}

/// One recording at a time: the recorder is the process's.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An integrated driver echoing every message on port 7, on its own thread
/// named "echo" until `stop` is set; its address and thread.
fn echo_server(stop: &Arc<AtomicBool>) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let mut d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 15).unwrap();
    let addr = d.local_addr().unwrap();
    d.endpoint().listen(7, ContextConfig::stream()).unwrap();
    let halt = stop.clone();
    let server = std::thread::Builder::new()
        .name("echo".into())
        .spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                d.turn(Duration::from_millis(5)).unwrap();
                let now = d.now();
                let ep = d.endpoint();
                while let Some(ev) = ep.poll_event() {
                    if let Event::Readable { ctx } = ev {
                        while let Some(c) = ep.read(now, ctx) {
                            let _ = ep.write(now, ctx, c.data, c.eom, None);
                        }
                    }
                }
            }
        })
        .unwrap();
    (addr, server)
}

/// The `Park` spans of thread `t`: (start, end, timeout asked, wake bits).
fn parks(t: &xk_trace::ThreadEvents) -> Vec<(u64, u64, u64, u32)> {
    let begins: Vec<_> = of(t, Point::Park).filter(|e| e.phase == Phase::Begin).collect();
    let ends: Vec<_> = of(t, Point::Park).filter(|e| e.phase == Phase::End).collect();
    assert_eq!(begins.len(), ends.len(), "{}: park edges unpaired", t.name);
    begins.iter().zip(&ends).map(|(b, e)| (b.t, e.t, e.a, e.b)).collect()
}

/// The spans of `point` on thread `t`, (begin, end): each `End` paired
/// with the `Begin` before it by phase. The engine records a packet span's
/// edges with two `record` calls, so a recording can end between them and
/// keep a trailing `Begin` alone (ignored); pairing by position
/// (`chunks(2)`) then mispaired or panicked (the CI flake on main).
fn spans(t: &xk_trace::ThreadEvents, point: Point) -> Vec<(u64, u64)> {
    let mut open = None;
    let mut out = Vec::new();
    for e in of(t, point) {
        match e.phase {
            Phase::Begin => {
                assert!(open.is_none(), "{}: {point:?} begins inside an open span", t.name);
                open = Some(e.t);
            }
            Phase::End => {
                let b = open.take().unwrap_or_else(|| panic!("{}: {point:?} ends without a begin", t.name));
                out.push((b, e.t));
            }
            Phase::Instant => panic!("{}: {point:?} recorded as an instant", t.name),
        }
    }
    out
}

/// Every ring block thread `from` pushed before `until` that thread `to`
/// popped was popped at or after its push (same ring journey); with
/// `all_popped`, every such block was popped. The number of pairs checked.
fn pushes_precede_pops(
    from: &xk_trace::ThreadEvents,
    to: &xk_trace::ThreadEvents,
    until: u64,
    all_popped: bool,
) -> usize {
    let pushed: HashMap<u64, u64> = of(from, Point::RingPush).map(|e| (e.journey, e.t)).collect();
    let popped: HashMap<u64, u64> = of(to, Point::RingPop).map(|e| (e.journey, e.t)).collect();
    let mut n = 0;
    for (j, t) in pushed.iter().filter(|(_, t)| **t <= until) {
        let Some(p) = popped.get(j) else {
            assert!(!all_popped, "{}: ring journey {j:x} never popped by {}", from.name, to.name);
            continue;
        };
        assert!(p >= t, "{}: ring journey {j:x} popped {} ns before its push", from.name, t - p);
        n += 1;
    }
    n
}

/// When the application's last write returned. Every block it pushed up
/// to then was popped by the engine during the recording (the ring is in
/// order and that write's reply was read); a block pushed later — the read
/// that follows posts a read credit — may be popped after the recording
/// ended.
fn last_write_end(client: &xk_trace::ThreadEvents) -> u64 {
    of(client, Point::AppWrite).filter(|e| e.phase == Phase::End).map(|e| e.t).max().unwrap()
}

/// The engine thread that serves `client`'s rings: the one that popped its
/// first block. An earlier test's engine thread, also named `xtp-engine`,
/// may still linger and record into this recording (Session 22: the local
/// CI run picked it and found the client's blocks "never popped").
fn engine_of<'a>(
    rec: &'a xk_trace::Recording,
    client: &xk_trace::ThreadEvents,
) -> &'a xk_trace::ThreadEvents {
    let first = of(client, Point::RingPush).next().expect("the client pushed no block").journey;
    rec.threads
        .iter()
        .filter(|t| t.name == "xtp-engine")
        .find(|t| of(t, Point::RingPop).any(|e| e.journey == first))
        .expect("no engine thread popped the client's first block")
}

/// How many of the waits `ps` `why` ended (among other causes).
fn woke(ps: &[(u64, u64, u64, u32)], why: u32) -> usize {
    ps.iter().filter(|p| p.3 & why != 0).count()
}

#[test]
fn journeys_cross_the_ring_and_reach_the_server() {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = echo_server(&stop);

    xk_trace::start(xk_trace::Config::default());
    xk_trace::name_thread("client");
    let count = 8;
    {
        let xtp = Xtp::new(Mode::engine_thread());
        let mut s = xtp.connect(addr, 7).unwrap();
        s.set_timeout(Some(std::time::Duration::from_secs(5)));
        for i in 0..count {
            // A pause lets the engine thread park before the write, so the
            // write rings its doorbell (checked below) even on a loaded
            // machine, where back to back the engine is often still awake.
            std::thread::sleep(std::time::Duration::from_millis(5));
            let msg = vec![i as u8; 1000 + i];
            s.send_message(&msg, None).unwrap();
            assert_eq!(s.recv_message().unwrap().unwrap().data, msg);
        }
        // One bulk message: its full packets leave as GSO trains.
        let bulk = vec![9u8; 60_000];
        s.send_message(&bulk, None).unwrap();
        assert_eq!(s.recv_message().unwrap().unwrap().data.len(), bulk.len());
        s.abort();
    }
    // Collected while the engine thread may still linger and the server
    // runs: the recorder takes every thread's buffer itself.
    let rec = xk_trace::finish();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();

    let thread =
        |name: &str| rec.threads.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name}"));
    let (client, echo) = (thread("client"), thread("echo"));
    let engine = engine_of(&rec, client);
    // The application's calls: one send and one receive span per message.
    let writes: Vec<_> = of(client, Point::AppWrite).filter(|e| e.phase == Phase::End).collect();
    assert_eq!(writes.len(), count + 1);
    assert_eq!(
        writes.iter().map(|e| e.a).collect::<Vec<_>>(),
        (0..count as u64).map(|i| 1000 + i).chain([60_000]).collect::<Vec<_>>()
    );
    // Every block pushed on the client's side is popped, same journey, later, on the engine's.
    let pushed: HashMap<u64, u64> = of(client, Point::RingPush).map(|e| (e.journey, e.t)).collect();
    let popped: HashMap<u64, u64> =
        of(engine, Point::RingPop).filter(|e| e.b == 0).map(|e| (e.journey, e.t)).collect();
    assert!(pushed.len() >= count, "{} pushes", pushed.len());
    // Blocks posted up to the last write: the engine took them all, in
    // ring order, before it could send the reply the client then read.
    assert!(pushes_precede_pops(client, engine, last_write_end(client), true) >= count);
    // The engine (on its own thread) wrote each message; the server read it: same data journey.
    let written: HashSet<u64> = of(engine, Point::Write).map(|e| e.journey).collect();
    let read: HashSet<u64> = of(echo, Point::Read).map(|e| e.journey).collect();
    assert_eq!(written.len(), count + 1);
    assert!(written.is_subset(&read), "engine writes not read at the server under the same journey");
    // One journey from the application's write to the server's read:
    // the write span names the ring block it pushed, the engine links that
    // block to the data it wrote (flow, seq), whose packets the server reads.
    let links: HashMap<u64, u64> = of(engine, Point::Link).map(|e| (e.journey, e.a)).collect();
    for w in &writes {
        assert_ne!(w.journey, 0, "write span without its ring block");
        assert!(pushed.contains_key(&w.journey), "write's journey not a block it pushed");
        assert!(popped.contains_key(&w.journey), "write's block not popped by the engine");
        let data =
            links.get(&w.journey).unwrap_or_else(|| panic!("block {:x} not linked to data", w.journey));
        assert!(written.contains(data) && read.contains(data), "linked data journey lost");
    }
    // System calls are spans on the engine thread; the profile sees them.
    let prof = xk_trace::profile(&rec);
    let send = prof.iter().find(|p| p.point == Point::SendCall).expect("send calls profiled");
    assert!(
        send.count >= count && send.min <= send.median && send.median <= send.p99 && send.p99 <= send.max
    );
    let app = prof.iter().find(|p| p.point == Point::AppWrite).unwrap();
    assert_eq!(app.count, count + 1);
    // Packets are built (engine thread) and parsed (server thread) as
    // spans timed on the clock, each with its checksum span inside.
    for (t, work, sum) in [(engine, Point::PacketBuild, 0), (echo, Point::PacketParse, 1)] {
        let mut open = None;
        let mut n = 0;
        // (Both threads build and parse: each kind of checksum is matched
        // with its own span.)
        for e in t.events.iter().filter(|e| e.point == work || (e.point == Point::Checksum && e.b == sum)) {
            match (e.point == work, e.phase) {
                (true, Phase::Begin) => open = Some(e.t),
                (true, Phase::End) => {
                    assert!(e.t >= open.take().expect("end without begin"));
                    n += 1;
                }
                (false, _) => {
                    assert!(open.is_some_and(|b| b <= e.t), "checksum outside its packet span");
                }
                _ => unreachable!(),
            }
        }
        assert!(n >= 40, "{work:?}: {n} spans");
        assert!(prof.iter().any(|p| p.point == work && p.count >= n));
    }
    let sums = prof.iter().find(|p| p.point == Point::Checksum).expect("checksums profiled");
    assert!(sums.count >= 80 && sums.max > 0);
    // Packet events sit inside their build span on the timeline.
    let builds = spans(engine, Point::PacketBuild);
    for e in of(engine, Point::PacketSent) {
        assert!(
            builds.iter().any(|(b, end)| *b <= e.t && e.t <= *end),
            "packet event outside every build span"
        );
    }
    // Receive calls carry the bytes they returned (≥ 32 B of header per datagram).
    let recvs: Vec<_> =
        rec.threads.iter().flat_map(|t| of(t, Point::RecvCall)).filter(|e| e.phase == Phase::End).collect();
    assert!(!recvs.is_empty());
    for r in &recvs {
        assert!(r.a > 0 && u64::from(r.b) >= 32 * r.a, "recv call: {} datagrams, {} bytes", r.a, r.b);
    }
    // The bulk message left in GSO trains of several segments (loopback
    // has UDP GSO), each no bigger than the send call it was part of.
    let trains: Vec<_> = of(engine, Point::GsoTrain).collect();
    assert!(trains.iter().any(|t| t.a >= 2 && u64::from(t.b) >= 1000 * t.a), "trains: {trains:?}");
    assert!(rec.merged().windows(2).all(|w| w[0].1.t <= w[1].1.t));

    // Every blocking wait is a `Park` span saying what ended it: the engine
    // thread wakes for the application's doorbell (its writes) and for the
    // socket (the echoes), the application for the engine's doorbell (the
    // replies), the echo server's integrated driver for its socket.
    let (ep, cp, sp) = (parks(engine), parks(client), parks(echo));
    assert!(woke(&ep, xk_trace::wake::BELL) > 0, "engine never woken by its doorbell: {ep:?}");
    assert!(woke(&ep, xk_trace::wake::SOCKET) > 0, "engine never woken by its socket: {ep:?}");
    // The application parks for a reply only if it has not come yet: on
    // a loaded machine it can be preempted for the whole round trip, so
    // not every reply wakes it (6 of 8 seen with two spinners). Each wake
    // it has is matched to its own ring below.
    assert!(woke(&cp, xk_trace::wake::BELL) > 0, "application never woken by its doorbell: {cp:?}");
    assert_eq!(woke(&cp, xk_trace::wake::SOCKET), 0, "the application has no socket");
    assert!(woke(&sp, xk_trace::wake::SOCKET) > 0, "echo's driver never woken by its socket: {sp:?}");
    for (b, e, timeout, why) in ep.iter().chain(&cp).chain(&sp) {
        assert!(b <= e && *timeout > 0);
        // A wait the timer ended lasted its timeout (less 1 ms of slack:
        // the engine asks its timers' remaining time in ns).
        if *why == xk_trace::wake::TIMER {
            assert!(e - b + 1_000_000 >= *timeout, "timer wake after {} ns of {timeout}", e - b);
        }
    }
    // Each doorbell wake of the application follows its own ring by the
    // engine thread: one rung after the application's previous doorbell
    // wake ended and by this one's end (a ring clears the sleeper's
    // `parked`, so it can end one wait only, and the woken side drains its
    // eventfd). Session 21 had "any ring before the end", which the first
    // ring meets for every later wake: it could not fail.
    let rings: Vec<u64> = of(engine, Point::Bell).map(|e| e.t).collect();
    let mut after = 0;
    for (b, e, _, why) in cp.iter().filter(|p| p.3 & xk_trace::wake::BELL != 0) {
        assert!(
            rings.iter().any(|r| *r > after && r <= e),
            "wake {b}..{e} ({why}) with no ring since the previous doorbell wake ended at {after}"
        );
        after = *e;
    }
    assert!(!of(client, Point::Bell).collect::<Vec<_>>().is_empty(), "the application never rang the engine");
}

/// Back to back in busy-poll (no pauses; both sides spin on their rings
/// and take each block as soon as it is published), every ring block's pop
/// is timed no earlier than its push. The journeys test pauses before each
/// message so the engine parks; there, reading the push's time after
/// publishing it (the Session 21 order) went unseen in 200 of 200 runs.
/// Here the popper can pop, and read its clock, between the publish and a
/// late push time: with that order restored 11 of 200 runs failed idle.
#[test]
fn back_to_back_ring_pushes_are_timed_before_their_pops() {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = echo_server(&stop);

    xk_trace::start(xk_trace::Config::default());
    xk_trace::name_thread("client");
    {
        // Busy-poll: both sides spin on their rings, so each block is
        // popped as soon as it is published.
        let cfg = xk_driver::engine::EngineConfig { busy_poll: true, ..Default::default() };
        let xtp = Xtp::new(Mode::EngineThread(cfg));
        let mut s = xtp.connect(addr, 7).unwrap();
        s.set_timeout(Some(std::time::Duration::from_secs(5)));
        for i in 0..1000u32 {
            let msg = vec![i as u8; 64 + (i as usize % 32)];
            s.send_message(&msg, None).unwrap();
            assert_eq!(s.recv_message().unwrap().unwrap().data, msg);
        }
        s.abort();
    }
    let rec = xk_trace::finish();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();

    let thread =
        |name: &str| rec.threads.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name}"));
    let client = thread("client");
    let engine = engine_of(&rec, client);
    let last_read = of(client, Point::AppRead).map(|e| e.t).max().unwrap();
    // The application's writes, popped by the engine; the engine's
    // deliveries, popped by the application (spinning in its busy poll).
    let n = pushes_precede_pops(client, engine, last_write_end(client), true);
    assert!(n >= 1000, "{n} writes checked");
    let n = pushes_precede_pops(engine, client, last_read, false);
    assert!(n >= 1000, "{n} deliveries checked");
}

/// The daemon's waits name what woke them: its clients' doorbells (an
/// eventfd each, after its sockets among the descriptors it sleeps on) as
/// `BELL`, its UDP and Unix sockets as `SOCKET`. Session 21 labelled every
/// descriptor of the daemon's wait a socket.
#[test]
fn the_daemon_tells_its_clients_doorbells_from_its_sockets() {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = echo_server(&stop);
    let socket = std::env::temp_dir().join(format!("xk-trace-daemon-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let halt = Arc::new(AtomicBool::new(false));
    let (ready, up) = std::sync::mpsc::channel();
    let daemon = {
        let (cfg, halt) = (xk_driver::daemon::DaemonConfig::new(&socket), halt.clone());
        std::thread::Builder::new()
            .name("daemon".into())
            .spawn(move || xk_driver::daemon::serve(cfg, &halt, |_| ready.send(()).unwrap()))
            .unwrap()
    };
    up.recv_timeout(std::time::Duration::from_secs(10)).expect("daemon up");

    xk_trace::start(xk_trace::Config::default());
    {
        let mut s = Xtp::new(Mode::daemon(&socket)).connect(addr, 7).unwrap();
        s.set_timeout(Some(std::time::Duration::from_secs(5)));
        for i in 0..8 {
            // A pause before each message lets the daemon finish the last
            // one's work and park, so the write finds it asleep and rings
            // (back to back, the write often lands while it still works).
            std::thread::sleep(std::time::Duration::from_millis(5));
            let msg = vec![i as u8; 1000 + i];
            s.send_message(&msg, None).unwrap();
            assert_eq!(s.recv_message().unwrap().unwrap().data, msg);
        }
        s.abort();
    }
    let rec = xk_trace::finish();
    halt.store(true, Ordering::Relaxed);
    daemon.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    let _ = std::fs::remove_file(&socket);

    let d = rec.threads.iter().find(|t| t.name == "daemon").expect("daemon thread recorded");
    let dp = parks(d);
    // The client's writes ring the daemon's doorbell (it sleeps when each
    // comes), the echoes come in on its UDP socket.
    assert!(woke(&dp, xk_trace::wake::BELL) > 0, "daemon never woken by a client's doorbell: {dp:?}");
    assert!(woke(&dp, xk_trace::wake::SOCKET) > 0, "daemon never woken by its socket: {dp:?}");
}
