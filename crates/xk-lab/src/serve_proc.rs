//! `xpress serve` as a child process the experiments watch from outside:
//! its resident memory from `/proc/PID/status`, and its engine's state
//! from the `{"engine": …}` lines it prints with `-J --stats S` (contexts
//! held, every admission and limit counter) and once more when it stops.
//! Ended by its id: SIGINT first (so it prints that last report), then
//! SIGKILL if it does not go within 5 s, and always when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A line of a `/proc/PID/status` file in kB (`VmRSS:`, `VmHWM:`), 0 if
/// the process or the line is gone.
pub(crate) fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The engine's state as the server printed it.
#[derive(Clone, Debug, Default)]
pub struct EngineState {
    /// Seconds since the server started.
    pub seconds: f64,
    /// Contexts held (live and lingering).
    pub contexts: u64,
    /// The counters of `xtp_proto::EndpointStats`, by name.
    pub counters: Value,
    /// Times the shared socket was set aside, `--unvalidated-rate` spent.
    pub deferred: u64,
}

impl EngineState {
    /// A counter (0 if absent).
    pub fn get(&self, name: &str) -> u64 {
        self.counters[name].as_u64().unwrap_or(0)
    }
}

/// A running `xpress serve`.
pub struct ServeProcess {
    child: Child,
    addr: SocketAddr,
    /// Every engine report so far, in order.
    reports: Arc<Mutex<Vec<EngineState>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ServeProcess {
    /// Starts `exe serve` on a free loopback port, reporting its engine
    /// every `stats_every` seconds; stops by itself after `limit` seconds
    /// (a bound should the lab die without ending it). `extra`: more
    /// `serve` arguments.
    pub fn start(exe: &Path, stats_every: f64, limit: f64, extra: &[String]) -> Result<ServeProcess, String> {
        let mut child = Command::new(exe)
            .args(["serve", "--listen", "127.0.0.1:0", "--udp-echo-port", "0", "-J"])
            .args(["--stats", &stats_every.to_string(), "--duration", &limit.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {} serve: {e}", exe.display()))?;
        let out = child.stdout.take().ok_or("xpress serve: no stdout")?;
        let mut out = BufReader::new(out);
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        let Some(addr) = line.trim().strip_prefix("listening on ").and_then(|a| a.parse().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("xpress serve said {line:?}"));
        };
        let reports = Arc::new(Mutex::new(Vec::new()));
        let sink = reports.clone();
        // Reads to the end, so the server never blocks on a full pipe.
        let reader = std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<Value>(&l) else { continue };
                let e = &v["engine"];
                if e.is_object() {
                    let s = EngineState {
                        seconds: e["seconds"].as_f64().unwrap_or(0.0),
                        contexts: e["contexts"].as_u64().unwrap_or(0),
                        counters: e["counters"].clone(),
                        deferred: e["peer_lanes"]["unvalidated_deferred"].as_u64().unwrap_or(0),
                    };
                    sink.lock().expect("reader").push(s);
                }
            }
        });
        Ok(ServeProcess { child, addr, reports, reader: Some(reader) })
    }

    /// The XTP address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory now, kB.
    pub fn rss_kb(&self) -> u64 {
        status_kb(self.pid(), "VmRSS:")
    }

    /// The latest engine report, waiting up to `wait` for one newer than
    /// `after` reports.
    pub fn report_after(&self, after: usize, wait: Duration) -> Option<EngineState> {
        let end = Instant::now() + wait;
        loop {
            {
                let r = self.reports.lock().expect("reports");
                if r.len() > after {
                    return r.last().cloned();
                }
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many engine reports have arrived.
    pub fn reports(&self) -> usize {
        self.reports.lock().expect("reports").len()
    }

    /// A fresh engine report (the next periodic one).
    pub fn engine(&self) -> Option<EngineState> {
        self.report_after(self.reports(), Duration::from_secs(5))
    }

    /// Stops the server with SIGINT and returns its final engine report.
    pub fn stop(mut self) -> Option<EngineState> {
        let n = self.reports();
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.report_after(n, Duration::ZERO)
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child ended by its id when dropped (if it is still running).
pub(crate) struct Reaped(pub(crate) std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
