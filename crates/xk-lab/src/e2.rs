//! E2 (seed 002, Fig. 3): bulk throughput against round-trip delay, through
//! the real-time emulator, XTP with and without checksums.
//!
//! Each point: an `xpress emulate`-style relay (in this process, on loopback)
//! with `rate 45mbit` (the DS-3 port of seed 002) and half the round-trip
//! delay each way, a server endpoint discarding on XTP port 9, and a client
//! sending a fixed number of bytes; goodput is bytes over the time from the
//! first write to the graceful close. XTP paces itself at the path rate with
//! RATE/BURST (seed 002's XTP used rate control too).
//!
//! Kernel TCP runs under the same link model through `xpress netns` (root:
//! two namespaces joined by TUN devices), once with Linux's default buffers
//! and once with the server's receive buffer at 64 KB — the window seed 002's
//! SunOS TCP had. Without root those rows are skipped, saying why.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use bytes::Bytes;
use xk_driver::driver::UdpDriver;
use xk_driver::relay::{self, RelayConfig};
use xk_netemu::parse_line;
use xk_time::Duration;
use xtp_proto::{CloseReason, ContextConfig, EndpointConfig, Event};

/// One point of the curve.
pub(crate) struct Point {
    pub(crate) rtt_ms: u64,
    pub(crate) nocheck: bool,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    pub(crate) relay_p99_error_us: f64,
}

impl Point {
    pub(crate) fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds / 1e6
    }
}

pub(crate) fn point(rtt_ms: u64, nocheck: bool, bytes: u64) -> Result<Point, String> {
    let spec = parse_line(&format!("rate 45mbit delay {}us limit 10000", rtt_ms * 500))
        .map_err(|e| e.to_string())?;
    let mut server =
        UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 21).map_err(|e| e.to_string())?;
    server.endpoint().listen(9, ContextConfig::stream()).map_err(|e| e.to_string())?;
    let saddr = server.local_addr().map_err(|e| e.to_string())?;
    let relay_sock = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let raddr = relay_sock.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = RelayConfig {
        listen: raddr,
        server: saddr,
        forward: spec.clone(),
        reverse: spec,
        seed: rtt_ms,
        duration: Duration::from_secs(300),
        spin: Duration::from_micros(100),
        max_p99_error: Duration::from_millis(1),
        stop: Some(stop.clone()),
    };
    let relay = thread::spawn(move || relay::run_on(relay_sock, &cfg, &mut None));
    let server_stop = stop.clone();
    let srv = thread::spawn(move || {
        while !server_stop.load(Ordering::Relaxed) {
            if server.turn(Duration::from_millis(5)).is_err() {
                return;
            }
            let now = server.now();
            let ep = server.endpoint();
            while let Some(ev) = ep.poll_event() {
                match ev {
                    Event::Readable { ctx } => while ep.read(now, ctx).is_some() {},
                    Event::PeerFinished { ctx } => ep.close(now, ctx),
                    _ => {}
                }
            }
        }
    });
    let result = (|| -> Result<(f64, CloseReason), String> {
        let mut d =
            UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 22).map_err(|e| e.to_string())?;
        let mut cfg = ContextConfig::stream();
        cfg.nocheck = nocheck;
        // XTP rate control at the bottleneck rate (45 Mbit/s = 5,625,000 B/s),
        // as XTP is meant to be used on a known path: without pacing, bursts at
        // loopback speed overflow the relay's socket buffer and the run
        // measures kernel drops and back-off instead of the path.
        cfg.out_rate = 5_625_000;
        cfg.out_burst = 64 * 1024;
        let t0 = d.now();
        let ctx = d.endpoint().connect(t0, raddr, 9, cfg).map_err(|e| e.to_string())?;
        let chunk = Bytes::from(vec![0x77u8; 1 << 20]);
        let mut written = 0u64;
        loop {
            let now = d.now();
            if now - t0 > Duration::from_secs(120) {
                return Err(format!("E2 point {rtt_ms} ms: transfer did not finish in 120 s"));
            }
            let ep = d.endpoint();
            while written < bytes && ep.unacked_bytes(ctx) < 8 << 20 {
                let n = (bytes - written).min(chunk.len() as u64) as usize;
                ep.write(now, ctx, chunk.slice(..n), false, None).map_err(|e| e.to_string())?;
                written += n as u64;
                if written == bytes {
                    ep.close(now, ctx);
                }
            }
            while let Some(ev) = ep.poll_event() {
                if let Event::Closed { reason, .. } = ev {
                    return Ok(((d.now() - t0).as_secs_f64(), reason));
                }
            }
            d.turn(Duration::from_millis(5)).map_err(|e| e.to_string())?;
        }
    })();
    stop.store(true, Ordering::Relaxed);
    let report = relay.join().map_err(|_| "relay thread panicked".to_string())?.map_err(|e| e.to_string())?;
    let _ = srv.join();
    let (seconds, reason) = result?;
    if reason != CloseReason::Graceful {
        return Err(format!("E2 point {rtt_ms} ms: transfer ended with {reason:?}"));
    }
    Ok(Point {
        rtt_ms,
        nocheck,
        bytes,
        seconds,
        relay_p99_error_us: report.forward.error_quantile(0.99).as_secs_f64() * 1e6,
    })
}

/// One kernel-TCP point, measured through `xpress netns`.
pub(crate) struct TcpPoint {
    pub(crate) rtt_ms: u64,
    /// Server receive buffer 64 KB (seed 002's window) instead of Linux's default.
    pub(crate) window_64k: bool,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
}

impl TcpPoint {
    pub(crate) fn mbit(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds / 1e6
    }
}

/// Kernel TCP bulk through `xpress netns` (this binary) under the E2 link.
/// Err when not root: the caller reports the rows as skipped.
pub(crate) fn tcp_point(rtt_ms: u64, window_64k: bool, bytes: u64) -> Result<TcpPoint, String> {
    if !xk_driver::netns::is_root() {
        return Err("not root".into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.display();
    let rcvbuf = if window_64k { " --tcp-rcvbuf 65536" } else { "" };
    let out = std::process::Command::new(exe.to_string())
        .args(["netns", "--link", &format!("rate 45mbit delay {}us limit 10000", rtt_ms * 500)])
        .args(["--a", &format!("exec {exe} serve --listen 10.200.0.1:3636 --duration 300{rcvbuf}")])
        .args(["--b", &format!("{exe} bulk --to 10.200.0.1:3636 --transport tcp -n {bytes} -J")])
        .args(["--report", "/dev/null"])
        .output()
        .map_err(|e| format!("E2 TCP: cannot run xpress netns: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = text
        .lines()
        .find_map(|l| l.starts_with('{').then(|| serde_json::from_str(l).ok()).flatten())
        .ok_or_else(|| {
            format!(
                "E2 TCP {rtt_ms} ms: no result from xpress netns: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let seconds = json["seconds"].as_f64().ok_or("E2 TCP: result without seconds")?;
    Ok(TcpPoint { rtt_ms, window_64k, bytes, seconds })
}
