//! The daemon mode's own promises, with real processes over loopback (the
//! API suite in `api.rs` runs in this mode too):
//!
//! * a client process killed with SIGKILL has its contexts closed and its
//!   session ended (the daemon's counters drop to zero);
//! * a daemon killed while a client waits on it makes the waiting call
//!   fail with "xpress daemon at PATH went away" within a bounded time, and
//!   a later connect fail with "no xpress daemon at PATH";
//! * tiny rings block the writer instead of losing anything, both ways;
//! * one write far larger than the write bound waits for acknowledgements
//!   between its pieces and arrives whole;
//! * client B cannot use client A's context handle: the block is refused
//!   to B, and A's context carries on untouched;
//! * a client cannot take another client's wake-ups of the daemon (each
//!   has an eventfd of its own).
//!
//! The daemon is this test binary in the daemon role (`common`); the
//! crashing client is this test binary in the client role.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{DaemonChild, Settings};
use xk_driver::api::{Mode, Xtp, XtpStream};
use xk_driver::engine::{BlockError, Notice, ToEngine};
use xtp_proto::ContextConfig;

const PORT: u16 = 7;

#[test]
fn daemon_role() {
    common::daemon_role()
}

fn pattern(n: usize, salt: u64) -> Vec<u8> {
    (0..n).map(|i| (i as u64 ^ salt).wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect()
}

/// An integrated listener on its own thread serving `streams` streams
/// with `serve`, one after the other (the streams share the listener's
/// thread); a stream for which `serve` returns true is held open for 20 s,
/// the others are closed. Returns its address.
fn server(streams: usize, serve: fn(&mut XtpStream) -> bool) -> SocketAddr {
    let (tell, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut l = Xtp::default().bind("127.0.0.1:0", PORT).unwrap();
        tell.send(l.local_addr().unwrap()).unwrap();
        let mut held = Vec::new();
        for _ in 0..streams {
            let Ok((mut s, _, _)) = l.accept_timeout(Some(Duration::from_secs(30))) else { return };
            s.set_timeout(Some(Duration::from_secs(60)));
            if serve(&mut s) {
                held.push(s);
            } else {
                let _ = s.close();
            }
        }
        if !held.is_empty() {
            std::thread::sleep(Duration::from_secs(20));
        }
    });
    addr.recv().unwrap()
}

/// Echoes one message, and holds the stream open.
fn echo_one(s: &mut XtpStream) -> bool {
    if let Ok(Some(m)) = s.recv_message() {
        let _ = s.send_message(&m.data, m.btag);
    }
    true
}

/// Waits (bounded) until the daemon's status satisfies `ok`.
fn wait_status(d: &DaemonChild, what: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let v = d.status();
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < end, "{what}: daemon status still {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The client role: opens three streams to `XPRESS_TEST_SERVER` through
/// the daemon, echoes a message on each, says "ready" and waits to be killed.
#[test]
fn client_role() {
    if std::env::var("XPRESS_TEST_ROLE").as_deref() != Ok("client") {
        return;
    }
    let xtp = Xtp::new(Mode::daemon(std::env::var("XPRESS_DAEMON_SOCKET").unwrap()));
    let addr = std::env::var("XPRESS_TEST_SERVER").unwrap();
    let mut streams = Vec::new();
    for i in 0..3u64 {
        let mut s = xtp.connect(&*addr, PORT).unwrap();
        s.send_message(b"hello", Some(i)).unwrap();
        assert_eq!(s.recv_message().unwrap().unwrap().data, b"hello");
        streams.push(s);
    }
    println!("client ready");
    std::thread::sleep(Duration::from_secs(60));
}

/// Client segments the daemon process has mapped (its memfds are named
/// "xpress-client").
fn segments_mapped(d: &DaemonChild) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", d.child.id())).unwrap();
    maps.lines().filter(|l| l.contains("memfd:xpress-client")).count()
}

#[test]
fn a_killed_client_has_its_contexts_closed_and_its_session_freed() {
    let d = DaemonChild::start(&Settings::default());
    let addr = server(3, echo_one);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "client_role", "--nocapture", "--test-threads", "1"])
        .env("XPRESS_TEST_ROLE", "client")
        .env("XPRESS_DAEMON_SOCKET", &d.socket)
        .env("XPRESS_TEST_SERVER", addr.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let ready = loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break false;
        }
        if line.contains("client ready") {
            break true;
        }
    };
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the client process ended before it was ready");
    }
    // Each stream has an endpoint of its own: three sessions of the
    // client's process, a context each.
    let before = wait_status(&d, "three contexts", |v| v["clients"] == 3 && v["contexts"] == 3);
    for s in before["sessions"].as_array().unwrap() {
        assert_eq!(
            (&s["pid"], &s["contexts"]),
            (&serde_json::json!(child.id()), &serde_json::json!(1)),
            "{before}"
        );
    }
    assert_eq!(segments_mapped(&d), 3, "the daemon maps one segment per session");
    // SIGKILL: no goodbye, no close; only the socket closing tells.
    child.kill().unwrap();
    child.wait().unwrap();
    let after =
        wait_status(&d, "the killed client's contexts gone", |v| v["clients"] == 0 && v["contexts"] == 0);
    eprintln!("before: {before}\nafter: {after}");
    // And its memory: the segments are unmapped once nothing refers to them.
    let end = Instant::now() + Duration::from_secs(10);
    while segments_mapped(&d) > 0 {
        assert!(Instant::now() < end, "the killed client's segments are still mapped in the daemon");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_daemon_fails_the_waiting_call_with_a_clear_error() {
    let mut d = DaemonChild::start(&Settings::default());
    // A server that accepts and then says nothing: the client's read waits.
    let addr = server(1, |_| true);
    let mut s = Xtp::new(Mode::daemon(&d.socket)).connect(addr, PORT).unwrap();
    s.send_message(b"anyone?", None).unwrap();
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        // Our own child, by its id.
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    });
    let t = Instant::now();
    let err = s.recv_message().expect_err("the daemon died");
    let waited = t.elapsed();
    killer.join().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
    let text = err.to_string();
    assert!(text.contains("xpress daemon at") && text.contains("went away"), "{text}");
    assert!(text.contains(&*d.socket.to_string_lossy()), "{text}");
    assert!(waited < Duration::from_secs(3), "the call took {waited:?} to notice");
    eprintln!("after {waited:?}: {text}");
    // Writing fails the same way, and a new object says there is no daemon.
    assert!(s.write_all(b"more").and_then(|_| s.flush()).is_err() || s.recv_message().is_err());
    d.kill();
    let err = Xtp::new(Mode::daemon(&d.socket)).connect(addr, PORT).err().expect("no daemon");
    assert!(err.to_string().contains("no xpress daemon at"), "{err}");
}

/// 64 KiB rings, 4 KiB of read credit, a 64 KiB write bound: a 4 MB
/// write in 1000-byte writes must wait on TN many times, and 4 MB coming
/// back must wait on FN; every byte arrives once, in order.
#[test]
fn tiny_rings_block_instead_of_losing() {
    const N: usize = 4_000_000;
    let d = DaemonChild::start(&Settings {
        ring: Some(64 << 10),
        read_credit: Some(4096),
        write_bound: Some(64 << 10),
        ..Settings::default()
    });
    let addr = server(1, |s| {
        let mut got = Vec::with_capacity(N);
        let mut buf = vec![0u8; 64 << 10];
        while got.len() < N {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "stream ended after {} of {N} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got == pattern(N, 1), "the server's bytes differ from what was written");
        s.write_all(&pattern(N, 2)).unwrap();
        false
    });
    let mut s = Xtp::new(Mode::daemon(&d.socket)).connect(addr, PORT).unwrap();
    s.set_timeout(Some(Duration::from_secs(60)));
    for chunk in pattern(N, 1).chunks(1000) {
        s.write_all(chunk).unwrap();
    }
    let mut back = Vec::with_capacity(N);
    s.read_to_end(&mut back).unwrap();
    let stats = s.ring_stats().expect("daemon mode");
    s.close().unwrap();
    assert_eq!(back.len(), N, "bytes echoed");
    assert!(back == pattern(N, 2), "the bytes read differ from what the server wrote");
    eprintln!("{stats:?}");
    assert!(stats.tn_full > 0, "the TN ring never filled: the test tests nothing ({stats:?})");
    assert!(stats.fn_full > 0, "the FN ring never filled: the test tests nothing ({stats:?})");
}

/// One `write` far larger than the write bound: the client library splits
/// it and waits for acknowledgements between the pieces (the daemon
/// refuses, and aborts the context of, a client that posts past the bound),
/// so it arrives whole.
#[test]
fn one_write_larger_than_the_bound_arrives_whole() {
    const N: usize = 3_000_000;
    let d = DaemonChild::start(&Settings {
        ring: Some(64 << 10),
        write_bound: Some(64 << 10),
        ..Settings::default()
    });
    let addr = server(1, |s| {
        let mut got = Vec::with_capacity(N);
        s.read_to_end(&mut got).unwrap();
        let ok = got == pattern(N, 3);
        let _ = s.send_message(&[ok as u8], Some(got.len() as u64));
        false
    });
    let mut s = Xtp::new(Mode::daemon(&d.socket)).connect(addr, PORT).unwrap();
    s.set_timeout(Some(Duration::from_secs(60)));
    let data = pattern(N, 3);
    assert_eq!(s.write(&data).unwrap(), N, "one write call takes it all");
    s.shutdown_write().unwrap();
    let m = s.recv_message().unwrap().expect("the server's verdict");
    assert_eq!((m.data.as_slice(), m.btag), (&[1u8][..], Some(N as u64)), "1 = the bytes matched");
    s.close().unwrap();
}

/// Two clients of one daemon: B posts blocks naming A's context handle. B
/// is refused (the handle means nothing in B's session) and A's context
/// goes on: its echo still comes back whole, and the daemon still counts
/// it as A's.
#[test]
fn client_b_cannot_use_client_a_handle() {
    let d = DaemonChild::start(&Settings::default());
    let addr = server(1, echo_one);
    let mut a = xk_driver::daemon::connect(&d.socket, false).unwrap();
    let mut b = xk_driver::daemon::connect(&d.socket, false).unwrap();
    let h = a.connect(addr, PORT, ContextConfig::stream()).unwrap();
    a.write(h, Bytes::from_static(b"from A"), true, Some(1)).unwrap();
    // B, with A's handle: a write (data into A's stream?), a credit, an abort.
    b.post(ToEngine::Write { ctx: h, data: Bytes::from_static(b"from B"), eom: true, btag: Some(2) })
        .unwrap();
    b.post(ToEngine::Credit { ctx: h, bytes: 1 << 30 }).unwrap();
    b.post(ToEngine::Abort { ctx: h }).unwrap();
    let mut refused = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while refused.len() < 3 && Instant::now() < end {
        b.wait(xk_time::Duration::from_millis(50)).unwrap();
        while let Some(n) = b.next_notice() {
            match n {
                Notice::Failed { ctx, error } => refused.push((ctx, error)),
                other => panic!("B learnt something about A: {other:?}"),
            }
        }
    }
    assert_eq!(refused, vec![(h, BlockError::UnknownContext); 3]);
    // A's echo: exactly A's message, tag and all.
    let mut echoed = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        a.wait(xk_time::Duration::from_millis(50)).unwrap();
        while let Some(c) = a.read_chunk(h) {
            echoed.extend_from_slice(&c.data);
            if c.eom {
                assert_eq!(echoed, b"from A");
                assert_eq!(c.btag, Some(1));
                let v = d.status();
                let contexts: Vec<_> =
                    v["sessions"].as_array().unwrap().iter().map(|s| s["contexts"].clone()).collect();
                assert_eq!(contexts, vec![serde_json::json!(1), serde_json::json!(0)], "{v}");
                return;
            }
        }
        if let Some(n) = a.next_notice() {
            panic!("A's context disturbed: {n:?}");
        }
    }
    panic!("A's echo never came back (got {echoed:?})");
}

/// A hand-made client, speaking the registration and ring protocol
/// byte by byte (as documented in docs/ARCHITECTURE.md), so that it can
/// post what the real client never would.
struct RawClient {
    _sock: std::os::unix::net::UnixStream,
    seg: std::sync::Arc<xk_shm::Segment>,
    tn: xk_shm::Producer,
    fnr: xk_shm::Consumer,
    daemon_bell: std::os::fd::OwnedFd,
}

const CAP_OFF: usize = 8;

impl RawClient {
    fn register(socket: &std::path::Path) -> RawClient {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        use std::io::IoSliceMut;
        use std::mem::MaybeUninit;
        let mut sock = std::os::unix::net::UnixStream::connect(socket).unwrap();
        let mut hello = Vec::new();
        hello.extend_from_slice(b"XPRHELO1");
        hello.extend_from_slice(&1u32.to_le_bytes());
        hello.extend_from_slice(&1u32.to_le_bytes());
        sock.write_all(&hello).unwrap();
        let mut buf = [0u8; 512];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        rustix::net::recvmsg(&sock, &mut [IoSliceMut::new(&mut buf)], &mut cmsg, RecvFlags::CMSG_CLOEXEC)
            .unwrap();
        let mut fds = Vec::new();
        for m in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(it) = m {
                fds.extend(it);
            }
        }
        assert_eq!(&buf[..8], b"XPRACK01");
        let daemon_bell = fds.pop().unwrap();
        let _client_bell = fds.pop().unwrap();
        let seg = std::sync::Arc::new(xk_shm::Segment::open(fds.pop().unwrap()).unwrap());
        let cap = seg.u64_at(CAP_OFF).load(std::sync::atomic::Ordering::SeqCst) as usize;
        let tn = xk_shm::RingLayout { head: 64, tail: 128, data: 4096, cap };
        let fnr = xk_shm::RingLayout { head: 192, tail: 256, data: 4096 + cap, cap };
        RawClient {
            _sock: sock,
            tn: xk_shm::Producer::new(seg.clone(), tn).unwrap(),
            fnr: xk_shm::Consumer::new(seg.clone(), fnr, Box::new(|| {})).unwrap(),
            seg,
            daemon_bell,
        }
    }

    /// Posts a raw record and rings the daemon (whether it sleeps or not).
    fn post(&mut self, kind: u32, body: &[u8]) {
        assert!(self.tn.push(kind, &[body]).unwrap());
        rustix::io::write(&self.daemon_bell, &1u64.to_ne_bytes()).unwrap();
    }

    /// The next FN record's kind and body, waiting up to 5 s.
    fn next(&mut self) -> (u32, Vec<u8>) {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(r) = self.fnr.take().unwrap() {
                let mut body = vec![0u8; r.len];
                r.read(0, &mut body).unwrap();
                return (r.kind, body);
            }
            assert!(Instant::now() < end, "no answer from the daemon");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Through a real daemon: a client posting a block of an unknown kind and
/// a write naming no context gets a refusal for each; then it scribbles
/// its TN head and its session is ended with the reason on its socket.
/// Another client, using the API, carries on throughout, and the daemon
/// keeps serving new clients.
#[test]
fn corrupt_blocks_and_rings_hurt_only_their_sender() {
    let d = DaemonChild::start(&Settings::default());
    let addr = server(1, |s| {
        while let Ok(Some(m)) = s.recv_message() {
            if s.send_message(&m.data, m.btag).is_err() {
                break;
            }
        }
        false
    });
    let xtp = Xtp::new(Mode::daemon(&d.socket));
    let mut good = xtp.connect(addr, PORT).unwrap();
    let echo = |good: &mut XtpStream, i: u64| {
        good.send_message(b"still here", Some(i)).unwrap();
        let m = good.recv_message().unwrap().unwrap();
        assert_eq!((m.data.as_slice(), m.btag), (&b"still here"[..], Some(i)));
    };
    echo(&mut good, 1);
    let mut bad = RawClient::register(&d.socket);
    // An unknown kind: refused (FAILED = 22, handle 0, error Corrupt = 4).
    bad.post(99, b"garbage!");
    let (kind, body) = bad.next();
    assert_eq!((kind, &body[..8], body[8]), (22, &0u64.to_le_bytes()[..], 4), "{body:?}");
    assert!(String::from_utf8_lossy(&body).contains("unknown block kind 99"));
    // A close naming a context it does not have: UnknownContext (0).
    bad.post(6, &77u64.to_le_bytes());
    let (kind, body) = bad.next();
    assert_eq!((kind, &body[..8], body[8]), (22, &77u64.to_le_bytes()[..], 0), "{body:?}");
    echo(&mut good, 2);
    // Scribble the TN head far past the ring: the daemon ends this session.
    bad.seg.u64_at(64).store(u64::MAX / 4, std::sync::atomic::Ordering::SeqCst);
    rustix::io::write(&bad.daemon_bell, &1u64.to_ne_bytes()).unwrap();
    wait_status(&d, "the scribbler's session ended", |v| v["clients"] == 1);
    let mut why = String::new();
    bad._sock.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let _ = bad._sock.read_to_string(&mut why);
    assert!(why.contains("corrupt shared ring"), "{why:?}");
    echo(&mut good, 3);
    // And the daemon still registers newcomers.
    let v = xk_driver::daemon::status(&d.socket).unwrap();
    assert_eq!(v["clients"], 1, "{v}");
    let _again = xk_driver::daemon::connect(&d.socket, false).unwrap();
}

/// A connection that sends half a hello and stops is refused after the
/// 2-second hello deadline, and meanwhile the daemon serves others.
#[test]
fn a_partial_hello_is_dropped_after_its_deadline() {
    let d = DaemonChild::start(&Settings::default());
    let mut lazy = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    lazy.write_all(b"XPRHE").unwrap();
    let t = Instant::now();
    let _other = xk_driver::daemon::connect(&d.socket, false).expect("served meanwhile");
    lazy.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let _ = lazy.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).contains("no hello within 2 s"), "{answer:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// The credential check (SO_PEERCRED): a client of another user is
/// refused with a message saying why. Needs root (to run the client as
/// `nobody`); skipped otherwise.
#[test]
fn another_user_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run a client as another user");
        return;
    }
    let d = DaemonChild::start(&Settings::default());
    // Let anyone reach the socket file, so that the daemon's own check is
    // what refuses.
    std::fs::set_permissions(&d.socket, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // A copy of this test binary where `nobody` can run it (the checkout
    // may sit under a private directory, such as root's home).
    let dir = std::env::temp_dir().join(format!("xpress-stranger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("daemon-test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(&exe)
        .args(["--exact", "stranger_role", "--nocapture", "--test-threads", "1"])
        .env("XPRESS_TEST_ROLE", "stranger")
        .env("XPRESS_DAEMON_SOCKET", &d.socket)
        .uid(65534)
        .gid(65534)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.expect("run the client as nobody");
    assert!(out.status.success(), "the stranger role failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stranger refused: ") && text.contains("uid 65534 may not use this daemon"),
        "{text}"
    );
}

/// The stranger role: tries to register, prints what it was told.
#[test]
fn stranger_role() {
    if std::env::var("XPRESS_TEST_ROLE").as_deref() != Ok("stranger") {
        return;
    }
    match xk_driver::daemon::connect(
        std::path::Path::new(&std::env::var("XPRESS_DAEMON_SOCKET").unwrap()),
        false,
    ) {
        Ok(_) => println!("stranger admitted"),
        Err(e) => println!("stranger refused: {e}"),
    }
}

/// Echoes every message until the peer finishes.
fn echo_all(s: &mut XtpStream) -> bool {
    while let Ok(Some(m)) = s.recv_message() {
        if s.send_message(&m.data, m.btag).is_err() {
            break;
        }
    }
    false
}

/// The kernel's name of the eventfd behind `fd` (`eventfd-id` in
/// `/proc/self/fdinfo`, Linux 5.19 and later).
fn eventfd_id(fd: &std::os::fd::OwnedFd) -> Option<String> {
    use std::os::fd::AsRawFd;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines().find_map(|l| l.strip_prefix("eventfd-id:")).map(|v| v.trim().to_string())
}

/// The daemon wakes for a client through an eventfd of that client's own:
/// two clients are handed different eventfds (before session 13 every
/// client got the same one, so a client could take the daemon's wake-ups
/// meant for another by reading it, or keep it readable for all). Then a
/// hostile client reads the eventfd it was given as fast as it can and
/// rings it now and then, while another client makes 200 message round
/// trips through the same daemon: each stays well under the daemon's 50 ms
/// sleep (a taken wake-up would show as that wait).
#[test]
fn a_client_cannot_take_another_clients_wakeups() {
    const ROUNDS: u32 = 200;
    let d = DaemonChild::start(&Settings::default());
    let addr = server(1, echo_all);
    let hostile = RawClient::register(&d.socket);
    let other = RawClient::register(&d.socket);
    match (eventfd_id(&hostile.daemon_bell), eventfd_id(&other.daemon_bell)) {
        (Some(a), Some(b)) => assert_ne!(a, b, "two clients were given the same eventfd of the daemon"),
        _ => eprintln!("identity check skipped: this kernel shows no eventfd-id in fdinfo"),
    }
    drop(other);
    let bell = hostile.daemon_bell.try_clone().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thief = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut taken, mut rung) = (0u64, 0u64);
            let end = Instant::now() + Duration::from_secs(30);
            let mut b = [0u8; 8];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                if rustix::io::read(&bell, &mut b).is_ok() {
                    taken += 1;
                }
                if (taken + rung) % 64 == 0 && rustix::io::write(&bell, &1u64.to_ne_bytes()).is_ok() {
                    rung += 1;
                }
                std::thread::yield_now();
            }
            (taken, rung)
        })
    };
    let mut s = Xtp::new(Mode::daemon(&d.socket)).connect(addr, PORT).unwrap();
    let t = Instant::now();
    for i in 0..ROUNDS {
        let m = pattern(100 + i as usize, i as u64);
        s.send_message(&m, Some(u64::from(i))).unwrap();
        let echo = s.recv_message().unwrap().expect("the echo");
        assert_eq!(echo.data, m, "message {i}");
    }
    let took = t.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (taken, rung) = thief.join().unwrap();
    s.close().unwrap();
    drop(hostile);
    eprintln!(
        "{ROUNDS} round trips in {took:?} while the hostile client read its eventfd {taken} times and rang it {rung} times"
    );
    assert!(
        took < Duration::from_millis(15) * ROUNDS,
        "{ROUNDS} round trips took {took:?} beside a client reading its daemon eventfd"
    );
}
