//! Bulk goodput against message size (the throughput-vs-message-size part of
//! E8): XTP messages (each ending with EOM) against kernel TCP writes of the
//! same size with Nagle off, on loopback, measured by the same tools
//! (`xpress serve` and `xpress bulk -l N`) run as separate processes; and,
//! QUIC (quinn, through the same tools: one bidirectional stream, writes of
//! the message size), and when `iperf3` is installed, iperf3's own TCP measurement with the same
//! write size (`-l`) and byte count (`-n`) as an outside peer.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// One measurement.
pub(crate) struct Row {
    pub(crate) transport: &'static str,
    pub(crate) message: usize,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
}

impl Row {
    pub(crate) fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds / 1e6
    }
}

/// `xpress serve` as a child (XTP, TCP and QUIC), ended by its id when
/// dropped, its QUIC certificate file removed. Its stdout stays open (a line
/// per transfer; a closed pipe would make its prints fail).
struct Server {
    child: Child,
    addr: String,
    quic: String,
    cert: std::path::PathBuf,
    _out: BufReader<std::process::ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.cert);
    }
}

fn server(exe: &str) -> Result<Server, String> {
    let cert = std::env::temp_dir().join(format!("xpress-quic-{}.der", std::process::id()));
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "900", "--quic-cert"])
        .arg(&cert)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start xpress serve: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut srv = Server { child, addr: String::new(), quic: String::new(), cert, _out: BufReader::new(out) };
    let mut line = String::new();
    for (prefix, slot) in [("listening on ", 0), ("quic on ", 1)] {
        line.clear();
        srv._out.read_line(&mut line).map_err(|e| e.to_string())?;
        let v = line.trim().strip_prefix(prefix).ok_or(format!("xpress serve said: {line:?}"))?.to_string();
        if slot == 0 { srv.addr = v } else { srv.quic = v }
    }
    Ok(srv)
}

/// Most messages one run sends: small messages would otherwise make a run
/// of `bytes` take minutes (100 MB of 16-byte QUIC writes is ~40 s).
pub(crate) const MAX_MESSAGES: u64 = 250_000;

/// Runs every size for each peer; `progress` is called before each run.
/// Each measurement is made `reps` times (one row each) and moves
/// `min(bytes, size × MAX_MESSAGES)` bytes.
pub(crate) fn run(
    sizes: &[usize],
    max_bytes: u64,
    reps: u32,
    peers: &[String],
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>, String> {
    let has = |p: &str| peers.iter().any(|x| x == p);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?.display().to_string();
    let srv = server(&exe)?;
    let mut rows = Vec::new();
    for &size in sizes {
        let bytes = max_bytes.min(size as u64 * MAX_MESSAGES);
        let ours = ["xtp", "tcp", "quic"].into_iter().filter(|t| has(t));
        for (transport, rep) in ours.flat_map(|t| (1..=reps).map(move |r| (t, r))) {
            progress(&format!("message size {size} B, {transport}, repetition {rep} of {reps}"));
            let mut cmd = Command::new(&exe);
            if transport == "quic" {
                cmd.args(["bulk", "--to", &srv.quic, "--quic-cert"]).arg(&srv.cert);
            } else {
                cmd.args(["bulk", "--to", &srv.addr]);
            }
            let out = cmd
                .args(["-n", &bytes.to_string(), "-l", &size.to_string()])
                .args(["--transport", transport, "-J"])
                .output()
                .map_err(|e| format!("run xpress bulk: {e}"))?;
            if !out.status.success() {
                return Err(format!("bulk -l {size} {transport}: {}", String::from_utf8_lossy(&out.stderr)));
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
            let seconds = v["seconds"].as_f64().ok_or("bulk result without seconds")?;
            let bytes = v["bytes"].as_u64().ok_or("bulk result without bytes")?;
            rows.push(Row { transport, message: size, bytes, seconds });
        }
        for _ in 0..if has("iperf3") { reps } else { 0 } {
            if let Some(row) = iperf3(size, bytes)? {
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// iperf3 over loopback TCP with `size`-byte writes; None when iperf3 is not
/// installed.
fn iperf3(size: usize, bytes: u64) -> Result<Option<Row>, String> {
    if Command::new("iperf3").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return Ok(None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port()
        .to_string();
    let server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start iperf3 -s: {e}"))?;
    let mut server = Reaped(server);
    let out = (0..50)
        .find_map(|_| {
            let out = Command::new("iperf3")
                .args([
                    "-c",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-n",
                    &bytes.to_string(),
                    "-l",
                    &size.to_string(),
                    "-J",
                ])
                .output()
                .ok()?;
            // A client that came before the server was listening fails; with
            // -J iperf3 3.12 may still exit 0, the error only in its JSON.
            let refused = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .map_or(true, |v| v.get("error").is_some());
            if out.status.success() && !refused {
                return Some(out);
            }
            std::thread::sleep(std::time::Duration::from_millis(50)); // server not up yet
            None
        })
        .ok_or("iperf3 -c did not connect to its server")?;
    // The one-off server normally exits after the test; it has been seen to
    // hang when a retried client attempt raced its start. The result is in
    // the client's output already, so wait a little, then end it by its id.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while server.0.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(server);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("iperf3 JSON: {e}"))?;
    let sum = &v["end"]["sum_received"];
    let (sent, seconds) = (sum["bytes"].as_u64(), sum["seconds"].as_f64());
    match (sent, seconds) {
        (Some(b), Some(s)) if s > 0.0 => {
            Ok(Some(Row { transport: "iperf3", message: size, bytes: b, seconds: s }))
        }
        _ => Err(format!("iperf3 JSON without end.sum_received: {v}")),
    }
}

/// A child ended by its id when dropped (if it is still running).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
