//! What the command-line tests share: the binary, children ended by their
//! id, `xpress serve` started and read until it has listed its services, and
//! `xpress emulate` started on a port it chose itself, returned only once
//! it has bound it (a test that guessed a free port and slept could send
//! into a relay that was not there yet — on a busy CI machine it did).

// Each test binary uses a different part of these helpers.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const X: &str = env!("CARGO_BIN_EXE_xpress");

/// A child process ended (by its id) when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops `c` as Ctrl-C would (so it finishes what it writes) and waits up
/// to 10 s for it to end.
pub fn interrupt(mut c: Reaped) {
    let _ = Command::new("kill").args(["-INT", &c.0.id().to_string()]).status();
    let t0 = Instant::now();
    while c.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(10), "did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `xpress serve` with its printed services.
pub struct Server {
    pub child: Reaped,
    pub addr: SocketAddr,
    pub services: Vec<(String, SocketAddr)>,
    pub out: BufReader<std::process::ChildStdout>,
}

/// `xpress serve --listen 127.0.0.1:0` plus `extra`.
pub fn serve(extra: &[&str]) -> Server {
    serve_on("127.0.0.1:0", extra)
}

/// `xpress serve --listen LISTEN` plus `extra`, returned once it has listed
/// every service it holds (so all are bound).
pub fn serve_on(listen: &str, extra: &[&str]) -> Server {
    let mut child = Command::new(X)
        .args(["serve", "--listen", listen, "--duration", "120"])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start xpress serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = Reaped(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("listening line").parse().unwrap();
    let mut services = Vec::new();
    // `quic on …` (with --quic-cert), then one indented line per service.
    loop {
        line.clear();
        out.read_line(&mut line).unwrap();
        if line.starts_with("quic on ") {
            continue;
        }
        let mut w = line.split_whitespace();
        let (name, a) = (w.next().unwrap().to_string(), w.next().unwrap().parse().unwrap());
        let last = name == "udp-echo" && !extra.contains(&"--quic-cert") || name == "quic";
        services.push((name, a));
        if last {
            break;
        }
    }
    Server { child, addr, services, out }
}

/// `xpress emulate` in front of `server` with `link`, without real-time
/// pacing, plus `extra`; returns once the relay has bound its port, with
/// that address.
pub fn emulate(server: SocketAddr, link: &str, extra: &[&str]) -> (Reaped, SocketAddr) {
    let mut child = Command::new(X)
        .args(["emulate", "--listen", "127.0.0.1:0", "--server", &server.to_string(), "--link", link])
        .args(["--duration", "60", "--no-realtime", "--no-keep-warm"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start xpress emulate");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let child = Reaped(child);
    // "xpress emulate: 127.0.0.1:PORT <-> SERVER seed N for 60 s", printed
    // once the socket is bound.
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let bound = line
        .strip_prefix("xpress emulate: ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("emulate said: {line}"));
    // Keep reading its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in err.lines() {});
    (child, bound)
}
