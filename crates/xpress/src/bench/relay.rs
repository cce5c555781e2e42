//! `xpress bench relay`: forwarding capacity of `xpress emulate` without
//! impairments.
//!
//! The relay runs as its own process (this binary, `emulate`), pinned to one
//! CPU when `--relay-cpu` is given; a sender thread blasts small datagrams at
//! it with `sendmmsg` and a receiver thread counts what comes out, both in
//! this process. The capacity is what the receiver counts per second while
//! the sender offers more than the relay can take (the relay's kernel drops
//! say by how much). Loopback only; bounded by `--seconds` (at most 60).

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use xk_driver::batch::{BATCH, BatchSocket, Outgoing};

#[derive(Args)]
pub(crate) struct RelayArgs {
    /// Seconds of load (1–60).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Datagram size in bytes.
    #[arg(short = 'l', long, default_value_t = 64)]
    length: usize,
    /// Pin the relay process to this CPU (and this process to the others).
    #[arg(long)]
    relay_cpu: Option<usize>,
    /// Print JSON.
    #[arg(short = 'J', long)]
    json: bool,
    /// Run the relay of another `xpress` build (a baseline in the same run).
    #[arg(long)]
    relay_exe: Option<std::path::PathBuf>,
}

fn free_port() -> Result<u16, String> {
    let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(s.local_addr().map_err(|e| e.to_string())?.port())
}

pub(crate) fn run(a: &RelayArgs) -> Result<(), String> {
    if !(1.0..=60.0).contains(&a.seconds) {
        return Err(format!("--seconds {}: must be between 1 and 60", a.seconds));
    }
    if a.length == 0 || a.length > 1472 {
        return Err(format!("-l {}: must be 1..=1472 bytes", a.length));
    }
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let rx_addr = rx.local_addr().map_err(|e| e.to_string())?;
    let relay_port = free_port()?;
    let exe = match &a.relay_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| e.to_string())?,
    };
    let mut cmd = match a.relay_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let duration = a.seconds + 1.5;
    let relay = cmd
        .args(["emulate", "--listen", &format!("127.0.0.1:{relay_port}"), "--server", &rx_addr.to_string()])
        .args(["--link", "", "--duration", &duration.to_string(), "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start the relay ({}): {e}", exe.display()))?;
    std::thread::sleep(Duration::from_millis(300));

    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let counter = {
        let (stop, received) = (stop.clone(), received.clone());
        let rx = BatchSocket::with_offload(rx, false, false).map_err(|e| e.to_string())?;
        std::thread::spawn(move || {
            let mut rx = rx;
            rx.size_buffers(8 << 20);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match rx.recv_many(true, &mut |_, _| n += 1) {
                    Ok(_) => received.store(n, Ordering::Relaxed),
                    Err(_) => break,
                }
            }
        })
    };
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let mut tx = BatchSocket::with_offload(tx, false, false).map_err(|e| e.to_string())?;
    let dst = format!("127.0.0.1:{relay_port}").parse().map_err(|e| format!("{e}"))?;
    let arena = vec![0x42u8; BATCH * a.length];
    let out: Vec<Outgoing> =
        (0..BATCH).map(|k| Outgoing { dst, start: k * a.length, len: a.length }).collect();
    let t0 = Instant::now();
    let mut offered = 0u64;
    let base = received.load(Ordering::Relaxed);
    // Bounded: by time and by count (1e9 datagrams).
    while t0.elapsed().as_secs_f64() < a.seconds && offered < 1_000_000_000 {
        offered += tx.send(&arena, &out).map_err(|e| e.to_string())? as u64;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let got = received.load(Ordering::Relaxed) - base;
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let _ = counter.join();
    let out = relay.wait_with_output().map_err(|e| e.to_string())?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let pps = got as f64 / elapsed;
    let relay_in = report["forward"]["offered"].as_u64().unwrap_or(0);
    if a.json {
        println!(
            "{}",
            json!({"length": a.length, "seconds": elapsed, "offered_pps": offered as f64 / elapsed,
                "forwarded_pps": pps, "relay_received": relay_in, "relay_kernel_drops": report["kernel_drops"],
                "relay_send_calls": report["send_calls"], "relay_recv_calls": report["recv_calls"]})
        );
    } else {
        println!(
            "relay forwarding, {} B datagrams, {elapsed:.1} s: offered {:.0} pkt/s, forwarded {pps:.0} pkt/s; \
             relay read {relay_in} datagrams in {} receive calls, kernel dropped {} at the relay",
            a.length,
            offered as f64 / elapsed,
            report["recv_calls"],
            report["kernel_drops"]
        );
    }
    Ok(())
}
