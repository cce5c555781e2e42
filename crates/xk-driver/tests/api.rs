//! The blocking APIs end to end between two real processes over UDP on
//! loopback: stream (10 MB echoed and compared), messages (EOM boundaries and
//! BTAGs), transaction, acknowledged and unacknowledged datagrams; and the
//! faults: no listener, unreachable peer, peer killed mid-transfer, peer
//! aborting.
//!
//! The same suite runs once per deployment mode (`integrated::*`,
//! `engine_thread::*`, `daemon::*`): client and server both make their
//! objects through an `Xtp` of that mode, and nothing else differs. In the
//! daemon mode the client (this process) and the server (a child) each
//! register with a daemon of their own (two more child processes, see
//! `common`), started with a retry limit of 3 (the endpoint settings are
//! the daemon's in that mode); "peer killed" then kills the server and its
//! daemon, as a host going down.
//!
//! The server is this test binary run again as a child process with
//! `XPRESS_API_ROLE=server` and `XPRESS_API_MODE` (the `server_role` test
//! below does nothing otherwise); it prints its address, serves until told
//! to stop or 60 s pass.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{DaemonChild, Settings};
use xk_driver::api::{Mode, Xtp, XtpStream};
use xtp_proto::{ContextConfig, EndpointConfig, Service};

/// The deployment modes the suite runs in, by name (the server child gets
/// the name in its environment, and in the daemon mode its daemon's socket).
fn mode_at(name: &str, socket: Option<PathBuf>) -> Xtp {
    Xtp::new(match name {
        "integrated" => Mode::integrated(),
        "engine_thread" => Mode::engine_thread(),
        "daemon" => Mode::daemon(socket.expect("a daemon socket")),
        other => panic!("unknown mode {other}"),
    })
}

/// What one test runs in: its client's `Xtp` and, in the daemon mode, the
/// two daemons (the client's and the server's).
struct Env {
    mode: &'static str,
    xtp: Xtp,
    /// Kept alive for the test (killed when dropped).
    _client_daemon: Option<DaemonChild>,
    server_daemon: Option<DaemonChild>,
}

fn env(mode: &'static str) -> Env {
    if mode != "daemon" {
        return Env { mode, xtp: mode_at(mode, None), _client_daemon: None, server_daemon: None };
    }
    let impatient = Settings { max_retries: Some(3), no_connect_timeout: true, ..Settings::default() };
    let c = DaemonChild::start(&impatient);
    let s = DaemonChild::start(&impatient);
    Env { mode, xtp: mode_at(mode, Some(c.socket.clone())), _client_daemon: Some(c), server_daemon: Some(s) }
}

impl Env {
    fn server(&self) -> Server {
        Server::start(self.mode, self.server_daemon.as_ref().map(|d| d.socket.clone()))
    }
}

#[test]
fn daemon_role() {
    common::daemon_role()
}

/// Runs each listed test function once per mode, as `MODE::NAME`.
macro_rules! in_every_mode {
    ($($name:ident),* $(,)?) => {
        mod integrated {
            $(#[test] fn $name() { super::$name("integrated") })*
        }
        mod engine_thread {
            $(#[test] fn $name() { super::$name("engine_thread") })*
        }
        mod daemon {
            $(#[test] fn $name() { super::$name("daemon") })*
        }
    };
}

in_every_mode!(
    stream_messages_transaction_datagrams_between_processes,
    no_listener_is_a_named_refusal,
    unreachable_peer_times_out_saying_nothing_was_acknowledged,
    peer_killed_mid_transfer_reports_what_was_acknowledged,
    peer_abort_is_a_reset,
);

const PORT: u16 = 80;

/// The server child process; killed by its id when dropped.
struct Server {
    child: Child,
    addr: String,
    out: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(mode: &str, socket: Option<PathBuf>) -> Server {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "server_role", "--nocapture", "--test-threads", "1"])
            .env("XPRESS_API_ROLE", "server")
            .env("XPRESS_API_MODE", mode)
            .stdout(Stdio::piped());
        if let Some(s) = socket {
            cmd.env("XPRESS_DAEMON_SOCKET", s);
        }
        let mut child = cmd.spawn().expect("start the server process");
        let out = BufReader::new(child.stdout.take().unwrap());
        // From here the child is reaped by `Drop`, whatever happens.
        let mut srv = Server { child, addr: String::new(), out };
        let mut line = String::new();
        loop {
            line.clear();
            assert!(srv.out.read_line(&mut line).unwrap() > 0, "server exited before listening");
            // The harness may print "test server_role ... " on the same line.
            if let Some(i) = line.find("listening ") {
                srv.addr = line[i + "listening ".len()..].trim().to_string();
                return srv;
            }
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "server exited");
            if let Some(i) = line.find("srv ") {
                return line[i..].trim().to_string();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u64).wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect()
}

/// The server: streams echo everything (messages come back with their
/// BTAG) except a first message "abort", which aborts the stream;
/// transactions answer in upper case, datagrams are printed.
#[test]
fn server_role() {
    if std::env::var("XPRESS_API_ROLE").as_deref() != Ok("server") {
        return;
    }
    let xtp = mode_at(
        &std::env::var("XPRESS_API_MODE").unwrap_or_else(|_| "integrated".into()),
        std::env::var_os("XPRESS_DAEMON_SOCKET").map(PathBuf::from),
    );
    let mut l = xtp.bind("127.0.0.1:0", PORT).unwrap();
    println!("listening {}", l.local_addr().unwrap());
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if let Ok((peer, d)) = l.recv_datagram(Some(Duration::from_millis(1))) {
            println!("srv datagram {} bytes from {peer}: {}", d.len(), String::from_utf8_lossy(&d));
            if &d[..] == b"quit" {
                return;
            }
        }
        let Ok((s, _, service)) = l.accept_timeout(Some(Duration::from_millis(20))) else { continue };
        // A test may kill its peer, or (in the daemon mode) the daemon, in
        // mid-conversation: that is reported, not a panic of this process.
        if let Err(e) = serve_one(s, service) {
            println!("srv error: {e}");
            if e.to_string().contains("went away") {
                return;
            }
        }
    }
}

/// One accepted context of `server_role`.
fn serve_one(mut s: XtpStream, service: Service) -> std::io::Result<()> {
    if service == Service::Transaction {
        let mut req = Vec::new();
        s.read_to_end(&mut req)?;
        s.write_all(&req.to_ascii_uppercase())?;
        s.close()?;
        println!("srv transaction {} bytes", req.len());
        return Ok(());
    }
    // A stream: echo messages with their tags until the peer finishes.
    let mut n = 0;
    while let Some(m) = s.recv_message()? {
        if n == 0 && m.data == b"abort" {
            s.abort();
            println!("srv aborted");
            return Ok(());
        }
        n += m.data.len();
        s.send_message(&m.data, m.btag)?;
    }
    s.close()?;
    println!("srv stream {n} bytes");
    Ok(())
}

fn stream_messages_transaction_datagrams_between_processes(mode_name: &'static str) {
    let env = env(mode_name);
    let xtp = &env.xtp;
    let mut srv = env.server();
    let addr = srv.addr.clone();

    // Stream: 10 MB written as one unbroken stream, echoed back in pieces.
    let data = pattern(10_000_000);
    let mut s = xtp.connect(&*addr, PORT).unwrap();
    let mut back = Vec::with_capacity(data.len());
    for chunk in data.chunks(1 << 20) {
        s.write_all(chunk).unwrap();
    }
    s.shutdown_write().unwrap();
    s.read_to_end(&mut back).unwrap();
    assert!(back == data, "stream echo differs ({} of {} bytes back)", back.len(), data.len());
    s.close().unwrap();
    assert_eq!(srv.line(), "srv stream 10000000 bytes");

    // Messages: boundaries and tags survive.
    let mut s = xtp.connect(&*addr, PORT).unwrap();
    for i in 0..50u64 {
        let m = pattern(1 + (i as usize * 977) % 5000);
        s.send_message(&m, Some(1000 + i)).unwrap();
        let echo = s.recv_message().unwrap().expect("echoed message");
        assert_eq!(echo.data, m, "message {i}");
        assert_eq!(echo.btag, Some(1000 + i), "message {i}");
    }
    s.close().unwrap();
    srv.line();

    // Transaction.
    let resp = xtp.transaction(&*addr, PORT, b"hello, xtp", Duration::from_secs(10)).unwrap();
    assert_eq!(resp, b"HELLO, XTP");
    assert_eq!(srv.line(), "srv transaction 10 bytes");

    // Datagrams, acknowledged and not.
    xtp.send_datagram(&*addr, PORT, b"acked one", true, Duration::from_secs(10)).unwrap();
    assert!(srv.line().ends_with(": acked one"));
    xtp.send_datagram(&*addr, PORT, b"plain one", false, Duration::from_secs(10)).unwrap();
    assert!(srv.line().ends_with(": plain one"));
    xtp.send_datagram(&*addr, PORT, b"quit", true, Duration::from_secs(10)).unwrap();
}

fn no_listener_is_a_named_refusal(mode_name: &'static str) {
    let env = env(mode_name);
    let srv = env.server();
    let mut s = env.xtp.connect(&*srv.addr, 99).unwrap();
    s.write_all(b"anyone?").unwrap();
    let mut buf = [0u8; 16];
    let err = s.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    assert!(err.to_string().contains("no listener"), "{err}");
}

/// A short retry schedule so the faults surface in seconds, not minutes.
fn impatient() -> EndpointConfig {
    EndpointConfig { max_retries: 3, ..EndpointConfig::default() }
}

fn unreachable_peer_times_out_saying_nothing_was_acknowledged(mode_name: &'static str) {
    let env = env(mode_name);
    // A UDP port with nothing behind it.
    let addr = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut s = env.xtp.connect_with(addr, PORT, impatient(), ContextConfig::stream()).unwrap();
    s.write_all(b"hello?").unwrap();
    let mut buf = [0u8; 8];
    let err = s.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(err.to_string().contains("0 bytes acknowledged"), "{err}");
}

fn peer_killed_mid_transfer_reports_what_was_acknowledged(mode_name: &'static str) {
    let mut env = env(mode_name);
    let mut srv = env.server();
    let mut s = env.xtp.connect_with(&*srv.addr, PORT, impatient(), ContextConfig::stream()).unwrap();
    let chunk = pattern(1 << 20);
    // Make sure the server is receiving, then kill it (our own child, by id).
    s.send_message(&chunk, None).unwrap();
    let echo = s.recv_message().unwrap().expect("echo"); // the server is alive and answering
    assert_eq!(echo.data.len(), chunk.len());
    // The server's host goes down: in the daemon mode its daemon first
    // (otherwise the daemon, seeing its client die, aborts the context and
    // we get a reset).
    if let Some(d) = env.server_daemon.as_mut() {
        d.kill();
    }
    let _ = srv.child.kill();
    let _ = srv.child.wait();
    let err = loop {
        match s.write_all(&chunk) {
            Ok(()) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    let text = err.to_string();
    let acked: u64 = text
        .split_whitespace()
        .zip(text.split_whitespace().skip(1))
        .find(|(_, w)| *w == "bytes")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in: {text}"));
    assert!(acked >= 1, "{text}");
    eprintln!("after the kill: {text}");
}

fn peer_abort_is_a_reset(mode_name: &'static str) {
    let env = env(mode_name);
    let mut srv = env.server();
    let mut s = env.xtp.connect(&*srv.addr, PORT).unwrap();
    s.send_message(b"abort", None).unwrap();
    let err = s.recv_message().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    assert_eq!(srv.line(), "srv aborted");
}
