//! Bulk goodput against message size (the throughput-vs-message-size part of
//! E8): XTP messages (each ending with EOM) against kernel TCP writes of the
//! same size with Nagle off, on loopback, measured by the same tools
//! (`xpress serve` and `xpress bulk -l N`) run as separate processes.

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

/// `xpress serve` as a child, ended by its id when dropped. Its stdout stays
/// open (a line per transfer; a closed pipe would make its prints fail).
struct Server(Child, String, #[allow(dead_code)] BufReader<std::process::ChildStdout>);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(exe: &str) -> Result<Server, String> {
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "900"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start xpress serve: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut srv = Server(child, String::new(), BufReader::new(out));
    let mut line = String::new();
    srv.2.read_line(&mut line).map_err(|e| e.to_string())?;
    srv.1 = line.trim().strip_prefix("listening on ").ok_or(format!("unexpected: {line}"))?.to_string();
    Ok(srv)
}

/// Runs every size for XTP and TCP; `progress` is called before each run.
pub(crate) fn run(sizes: &[usize], bytes: u64, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?.display().to_string();
    let srv = server(&exe)?;
    let mut rows = Vec::new();
    for &size in sizes {
        for transport in ["xtp", "tcp"] {
            progress(&format!("message size {size} B, {transport}"));
            let out = Command::new(&exe)
                .args(["bulk", "--to", &srv.1, "-n", &bytes.to_string(), "-l", &size.to_string()])
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
    }
    Ok(rows)
}
