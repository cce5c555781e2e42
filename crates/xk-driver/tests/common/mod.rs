//! A daemon for the tests: this test binary run again as a child process
//! in the daemon role (`XPRESS_TEST_ROLE=daemon`), serving a fresh Unix
//! socket under the temporary directory. Separate processes are the point
//! of the daemon mode, so the tests use real ones; the child is killed by
//! its id when the handle is dropped, and ends by itself after 120 s.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use xk_driver::daemon::{self, DaemonConfig};

/// Settings of a test daemon.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// Ring bytes (default 8 MiB).
    pub(crate) ring: Option<usize>,
    /// The endpoint's retry limit.
    pub(crate) max_retries: Option<u32>,
    /// Read credit and write bound.
    pub(crate) read_credit: Option<u64>,
    pub(crate) write_bound: Option<u64>,
    /// No connect timeout (XTP's own retries alone end a silent connect).
    pub(crate) no_connect_timeout: bool,
}

/// A daemon child process; killed when dropped.
pub(crate) struct DaemonChild {
    pub(crate) child: Child,
    pub(crate) socket: PathBuf,
    pub(crate) udp: String,
}

static N: AtomicU32 = AtomicU32::new(0);

impl DaemonChild {
    pub(crate) fn start(s: &Settings) -> DaemonChild {
        let socket = std::env::temp_dir().join(format!(
            "xpress-test-{}-{}.sock",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "daemon_role", "--nocapture", "--test-threads", "1"])
            .env("XPRESS_TEST_ROLE", "daemon")
            .env("XPRESS_DAEMON_SOCKET", &socket)
            .stdout(Stdio::piped());
        if let Some(r) = s.ring {
            cmd.env("XPRESS_DAEMON_RING", r.to_string());
        }
        if let Some(r) = s.max_retries {
            cmd.env("XPRESS_DAEMON_RETRIES", r.to_string());
        }
        if let Some(r) = s.read_credit {
            cmd.env("XPRESS_DAEMON_CREDIT", r.to_string());
        }
        if let Some(r) = s.write_bound {
            cmd.env("XPRESS_DAEMON_BOUND", r.to_string());
        }
        if s.no_connect_timeout {
            cmd.env("XPRESS_DAEMON_NO_CONNECT_TIMEOUT", "1");
        }
        let mut child = cmd.spawn().expect("start the daemon process");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut d = DaemonChild { child, socket, udp: String::new() };
        let mut line = String::new();
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "daemon exited before serving");
            if let Some(i) = line.find("daemon serving ") {
                d.udp = line[i + "daemon serving ".len()..].trim().to_string();
                break;
            }
        }
        // Keep reading (and dropping) its output so it never blocks on a pipe.
        std::thread::spawn(move || {
            let mut l = String::new();
            while out.read_line(&mut l).unwrap_or(0) > 0 {
                l.clear();
            }
        });
        d
    }

    /// The daemon's counters.
    pub(crate) fn status(&self) -> serde_json::Value {
        daemon::status(&self.socket).expect("daemon status")
    }

    /// Kills the daemon (SIGKILL) and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The daemon role: serves until killed, or 120 s.
pub(crate) fn daemon_role() {
    if std::env::var("XPRESS_TEST_ROLE").as_deref() != Ok("daemon") {
        return;
    }
    let env = |k: &str| std::env::var(k).ok().map(|v| v.parse::<u64>().expect(k));
    let mut cfg = DaemonConfig::new(std::env::var("XPRESS_DAEMON_SOCKET").unwrap());
    if let Some(r) = env("XPRESS_DAEMON_RING") {
        cfg.ring_bytes = r as usize;
    }
    if let Some(r) = env("XPRESS_DAEMON_RETRIES") {
        cfg.endpoint.max_retries = r as u32;
    }
    if let Some(r) = env("XPRESS_DAEMON_CREDIT") {
        cfg.engine.read_credit = r;
    }
    if let Some(r) = env("XPRESS_DAEMON_BOUND") {
        cfg.engine.write_bound = r;
    }
    if std::env::var_os("XPRESS_DAEMON_NO_CONNECT_TIMEOUT").is_some() {
        cfg.endpoint.connect_timeout = None;
    }
    static STOP: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(120));
        STOP.store(true, Ordering::SeqCst);
    });
    daemon::serve(cfg, &STOP, |udp| println!("daemon serving {udp}")).unwrap();
}
