//! `xpress serve` and `xpress ping` / `xpress bulk` as two real processes over
//! UDP on loopback: a 100 MB transfer verified by SHA-256, and ping-pong.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    addr: String,
    out: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xpress"))
            .args(["serve", "--listen", "127.0.0.1:0", "--duration", "120"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start xpress serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening on ").expect("listening line").to_string();
        Server { child, addr, out }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only the process this test started, by its id.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bulk_100_mb_arrives_intact_and_ping_pong_works() {
    let mut server = Server::start();
    let out = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["bulk", "--to", &server.addr, "-n", "100000000", "--verify", "-J"])
        .output()
        .unwrap();
    assert!(out.status.success(), "bulk failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = report["sha256"].as_str().unwrap().to_string();
    let mut line = String::new();
    server.out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("received 100000000 bytes sha256 {sent} (Graceful)"));

    let out = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["ping", "--to", &server.addr, "-l", "1000", "-n", "200", "-J"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ping failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = report["rtt_us"]["p50"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 < 100_000.0, "{report}");
}

#[test]
fn invalid_flags_are_refused_with_a_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_xpress")).args(["ping", "-l", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-l and -n must be at least 1"));
    let out = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args([
            "emulate",
            "--listen",
            "127.0.0.1:0",
            "--server",
            "127.0.0.1:9",
            "--link",
            "delay 5",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("delay") && err.contains("unit"), "{err}");
}
