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
        // One line per service: xtp, tcp, udp-echo.
        for name in ["xtp", "tcp", "udp-echo"] {
            line.clear();
            out.read_line(&mut line).unwrap();
            assert!(line.trim_start().starts_with(name), "{line}");
        }
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
    assert!(
        line.starts_with(&format!("received 100000000 bytes sha256 {sent} from 127.0.0.1:"))
            && line.trim().ends_with("(closed gracefully)"),
        "{line}"
    );
    // The server's own count and hash came back to the client.
    assert_eq!(report["receiver_bytes"], 100_000_000, "{report}");
    assert_eq!(report["receiver_sha256"].as_str(), Some(sent.as_str()), "{report}");

    let out = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["ping", "--to", &server.addr, "-l", "1000", "-c", "200", "-i", "0", "-J"])
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("-l 0: a request must carry at least 1 byte"));
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

#[test]
fn quic_peer_carries_a_bulk_transfer_and_checks_its_certificate() {
    let cert = std::env::temp_dir().join(format!("xpress-quic-test-{}.der", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "60", "--quic-cert"])
        .arg(&cert)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = [String::new(), String::new()];
    for l in &mut lines {
        out.read_line(l).unwrap();
    }
    let server = Server { child, addr: lines[0].trim().to_string(), out };
    let quic = lines[1].trim().strip_prefix("quic on ").expect("quic line").to_string();
    let bulk = |cert: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_xpress"))
            .args(["bulk", "--transport", "quic", "--to", &quic, "-n", "20000000", "-l", "4096", "-J"])
            .arg("--quic-cert")
            .arg(cert)
            .output()
            .unwrap()
    };
    let r = bulk(&cert);
    assert!(r.status.success(), "quic bulk: {}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["bytes"], 20_000_000, "the server counted every byte: {v}");
    assert!(v["gbit_per_s"].as_f64().unwrap() > 0.0);
    // Another certificate is not trusted: the handshake fails, saying so.
    let other = std::env::temp_dir().join(format!("xpress-quic-other-{}.der", std::process::id()));
    let mut c2 = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "5", "--quic-cert"])
        .arg(&other)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut o2 = BufReader::new(c2.stdout.take().unwrap());
    let mut l = String::new();
    o2.read_line(&mut l).unwrap();
    let _other_server = Server { child: c2, addr: l, out: o2 };
    let r = bulk(&other);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("quic connect") && err.to_lowercase().contains("certificate"), "{err}");
    // Without a certificate file the tool says what it needs.
    let r = Command::new(env!("CARGO_BIN_EXE_xpress"))
        .args(["bulk", "--transport", "quic", "--to", &quic])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&r.stderr).contains("needs --quic-cert"));
    drop(server);
    let _ = std::fs::remove_file(&cert);
    let _ = std::fs::remove_file(&other);
}
