//! E2 (seed 002, Fig. 3): bulk throughput against round-trip delay, through
//! the real-time emulator, XTP with and without checksums.
//!
//! Each point: an `xpress emulate`-style relay (in this process, on loopback)
//! with `rate 45mbit` (the DS-3 port of seed 002) and half the round-trip
//! delay each way, a server endpoint discarding on XTP port 9, and a client
//! sending a fixed number of bytes; goodput is bytes over the time from the
//! first write to the graceful close. XTP paces itself at the path rate with
//! RATE/BURST (seed 002's XTP used rate control too). Kernel TCP through the same conditions
//! needs `xpress netns` (root; not built yet) and is reported as skipped.

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
