//! Ping-pong round-trip time through the blocking API in each deployment
//! mode, on loopback, as ratios measured in one run (issue #17's goal:
//! the engine thread within 1.2× of integrated in busy-poll mode), and
//! bulk goodput one way per blocking mode (goal: the engine thread at
//! least 0.9× integrated).
//!
//! `cargo bench -p xk-driver --bench modes` (options after `--`:
//! `--rounds N`, `--count N`, `--pin APP,ENGINE` to pin the client thread
//! and the engine thread, `--bulk BYTES` for the bulk transfer, 256 MiB by
//! default (64 MiB, 27 ms at 20 Gbit/s, made one scheduling hiccup a
//! 20 % swing on a shared machine), `--bulk-only` for the bulk rows alone).
//!
//! The daemon rows run the daemon as a separate process (this bench
//! binary again, with `--daemon-role SOCKET`), started for its row's turn
//! and killed after it (a busy-polling daemon would otherwise spin through
//! the other rows); the client is this process.
//!
//! The server is an integrated listener on its own thread, sleeping
//! between messages, the same for every row; only the client's mode
//! changes. Rows are interleaved round by round (each round runs every
//! mode and size once) so that load from elsewhere on the machine falls on
//! all of them alike; a row's figure is the median over rounds of each
//! round's median round trip.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xk_driver::api::{EngineConfig, Mode, Xtp, XtpStream};
use xk_driver::daemon::{self, DaemonConfig};

const PORT: u16 = 7;
/// The bulk sink's XTP port.
const SINK: u16 = 9;
const SIZES: [usize; 3] = [10, 1000, 10_000];

struct Row {
    name: &'static str,
    mode: Mode,
    /// Integrated row this one is compared with.
    base: usize,
    /// A daemon process to start for the row: busy-polling or not.
    daemon: Option<bool>,
}

/// A daemon child process, killed (by its id) when dropped.
struct DaemonChild(Child, PathBuf);

impl DaemonChild {
    fn start(socket: &PathBuf, busy: bool, pin: Option<usize>) -> DaemonChild {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg("--daemon-role").arg(socket).stdout(Stdio::piped());
        if busy {
            cmd.arg("--busy");
        }
        if let Some(cpu) = pin {
            cmd.arg("--daemon-cpu").arg(cpu.to_string());
        }
        let mut child = cmd.spawn().expect("start the daemon");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let d = DaemonChild(child, socket.clone());
        out.read_line(&mut line).expect("daemon ready");
        assert!(line.starts_with("ready"), "daemon said {line:?}");
        d
    }
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

/// The daemon role: serves SOCKET until killed (or 10 minutes).
fn daemon_role(socket: &str) {
    if let Some(cpu) = arg("--daemon-cpu") {
        pin_self(cpu.parse().expect("CPU"));
    }
    let mut cfg = DaemonConfig::new(socket);
    cfg.engine.busy_poll = std::env::args().any(|a| a == "--busy");
    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(600));
        STOP.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    daemon::serve(cfg, &STOP, |_| println!("ready")).expect("daemon");
}

fn median(v: &[f64]) -> f64 {
    xk_stats::median(v.iter().copied())
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn pin_self(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).expect("CPU in range");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin");
}

/// The echo server: serves streams one after the other, echoing messages.
fn serve() -> SocketAddr {
    let (tell, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut l = Xtp::default().bind("127.0.0.1:0", PORT).expect("bind");
        tell.send(l.local_addr().unwrap()).unwrap();
        loop {
            let Ok((mut s, _, _)) = l.accept_timeout(Some(Duration::from_secs(60))) else { return };
            while let Ok(Some(m)) = s.recv_message() {
                if s.send_message(&m.data, m.btag).is_err() {
                    break;
                }
            }
            let _ = s.close();
        }
    });
    addr.recv().unwrap()
}

/// The bulk sink: reads each stream to its end, then answers with the
/// byte count (so the client's clock stops when everything has arrived).
fn sink() -> SocketAddr {
    let (tell, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut l = Xtp::default().bind("127.0.0.1:0", SINK).expect("bind");
        tell.send(l.local_addr().unwrap()).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let Ok((mut s, _, _)) = l.accept_timeout(Some(Duration::from_secs(60))) else { return };
            let mut n = 0u64;
            while let Ok(k @ 1..) = std::io::Read::read(&mut s, &mut buf) {
                n += k as u64;
            }
            let _ = s.send_message(&n.to_le_bytes(), None);
            let _ = s.close();
        }
    });
    addr.recv().unwrap()
}

/// Sends `bytes` in 64 KiB writes to the sink in `mode`; goodput in
/// Mbit/s, from the first write to the sink's count.
fn bulk(mode: &Mode, addr: SocketAddr, bytes: u64) -> f64 {
    let mut s = Xtp::new(mode.clone()).connect(addr, SINK).expect("connect the sink");
    let chunk = vec![7u8; 64 << 10];
    let t = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        std::io::Write::write_all(&mut s, &chunk[..k]).expect("bulk write");
        left -= k as u64;
    }
    s.shutdown_write().expect("shutdown");
    let m = s.recv_message().expect("the sink's count").expect("a count");
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(m.data.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap())), Some(bytes));
    s.close().expect("close");
    bytes as f64 * 8.0 / secs / 1e6
}

/// CPU time (user + system) of this whole process — client, engine
/// thread, server thread — and of the daemon process `daemon`, in ns.
fn host_cpu_ns(daemon: Option<u32>) -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let me = getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 * 1e9 + v.tv_usec() as f64 * 1e3;
        t(u.user_time()) + t(u.system_time())
    });
    // /proc/PID/schedstat: the daemon's (main thread's) time on a CPU, ns.
    let theirs = daemon
        .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok())
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
        .unwrap_or(0.0);
    me + theirs
}

/// `count` round trips of `size` bytes (after a warm-up); the median in µs,
/// the application's and engine's wake-ups per message, the payload
/// copies made to cross the rings per message, and the host's CPU time per
/// round trip in µs (this process and the daemon: client, engine and
/// server alike).
fn ping(s: &mut XtpStream, size: usize, count: usize, daemon: Option<u32>) -> (f64, f64, f64, f64, f64) {
    let msg = vec![0x5a; size];
    for _ in 0..50 {
        s.send_message(&msg, None).unwrap();
        s.recv_message().unwrap().unwrap();
    }
    let before = s.ring_stats().unwrap_or_default();
    let cpu = host_cpu_ns(daemon);
    let mut rtts = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        s.send_message(&msg, None).unwrap();
        let back = s.recv_message().unwrap().expect("echo");
        rtts.push(t.elapsed().as_nanos() as f64 / 1000.0);
        assert_eq!(back.data.len(), size);
    }
    let cpu = (host_cpu_ns(daemon) - cpu) / count as f64 / 1000.0;
    let after = s.ring_stats().unwrap_or_default();
    let per = |a: u64, b: u64| (a - b) as f64 / count as f64;
    (
        median(&rtts),
        per(after.app_wakeups, before.app_wakeups),
        per(after.engine_wakeups, before.engine_wakeups),
        // Payload copies to cross between application and engine, per
        // message (bytes copied both ways over the bytes of the request and
        // the answer; 0 for integrated and the engine thread, whose rings
        // move references).
        per(after.app_copied + after.engine_copied, before.app_copied + before.engine_copied)
            / (2 * size) as f64,
        cpu,
    )
}

fn main() {
    if let Some(socket) = arg("--daemon-role") {
        return daemon_role(&socket);
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once, short.
    let quick = !std::env::args().any(|a| a == "--bench");
    let bulk_only = std::env::args().any(|a| a == "--bulk-only");
    let rounds: usize = arg("--rounds").map_or(if quick { 1 } else { 7 }, |v| v.parse().expect("--rounds N"));
    let count: usize =
        arg("--count").map_or(if quick { 50 } else { 2000 }, |v| v.parse().expect("--count N"));
    let pins: Option<(usize, usize)> = arg("--pin").map(|v| {
        let (a, e) = v.split_once(',').expect("--pin APP,ENGINE");
        (a.parse().expect("CPU"), e.parse().expect("CPU"))
    });
    if let Some((app, _)) = pins {
        pin_self(app);
    }
    let engine = |busy_poll| {
        Mode::EngineThread(EngineConfig { busy_poll, cpu: pins.map(|p| p.1), ..EngineConfig::default() })
    };
    let socket = std::env::temp_dir().join(format!("xpress-bench-{}.sock", std::process::id()));
    let in_daemon = |busy_poll| Mode::Daemon { socket: socket.clone(), busy_poll };
    let rows = [
        Row {
            name: "integrated, blocking",
            mode: Mode::Integrated { busy_poll: false },
            base: 0,
            daemon: None,
        },
        Row { name: "engine thread, blocking", mode: engine(false), base: 0, daemon: None },
        Row { name: "daemon, blocking", mode: in_daemon(false), base: 0, daemon: Some(false) },
        Row {
            name: "integrated, busy-poll",
            mode: Mode::Integrated { busy_poll: true },
            base: 3,
            daemon: None,
        },
        Row { name: "engine thread, busy-poll", mode: engine(true), base: 3, daemon: None },
        Row { name: "daemon, busy-poll", mode: in_daemon(true), base: 3, daemon: Some(true) },
    ];
    let addr = serve();
    let sink_addr = sink();
    let bulk_bytes: u64 =
        arg("--bulk").map_or(if quick { 2 << 20 } else { 256 << 20 }, |v| v.parse().expect("--bulk BYTES"));
    let mut goodput = vec![Vec::new(); rows.len()];
    // Host CPU (this process and the daemon) per MiB moved, per round.
    let mut bulk_cpu = vec![Vec::new(); rows.len()];
    // [row][size] -> per-round medians, wake-ups
    let mut rtt = vec![vec![Vec::new(); SIZES.len()]; rows.len()];
    let mut wakes = vec![vec![(0.0, 0.0, 0.0, 0.0); SIZES.len()]; rows.len()];
    for _ in 0..rounds {
        for (r, row) in rows.iter().enumerate() {
            if bulk_only && row.base != 0 {
                continue;
            }
            let daemon = row.daemon.map(|busy| DaemonChild::start(&socket, busy, pins.map(|p| p.1)));
            let daemon_pid = daemon.as_ref().map(|d| d.0.id());
            if !bulk_only {
                let mut s = Xtp::new(row.mode.clone()).connect(addr, PORT).expect("connect");
                for (k, &size) in SIZES.iter().enumerate() {
                    let (m, app, eng, copies, cpu) = ping(&mut s, size, count, daemon_pid);
                    rtt[r][k].push(m);
                    wakes[r][k] = (app, eng, copies, cpu);
                }
                s.close().expect("close");
            }
            // Bulk in the blocking modes (busy-poll rows would only add
            // spinners competing for the two cores).
            if row.base == 0 {
                let cpu = host_cpu_ns(daemon_pid);
                goodput[r].push(bulk(&row.mode, sink_addr, bulk_bytes));
                bulk_cpu[r].push((host_cpu_ns(daemon_pid) - cpu) / 1e3 / (bulk_bytes >> 20).max(1) as f64);
            }
        }
    }
    if bulk_only {
        return print_bulk(&rows, &goodput, &bulk_cpu, rounds, bulk_bytes);
    }
    println!("ping-pong RTT on loopback, median of {rounds} round medians of {count} round trips (µs)");
    println!(
        "{:<26} {:>7} {:>10} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "client mode", "bytes", "RTT µs", "ratio", "app wake/msg", "eng wake/msg", "copies/msg", "CPU µs/RTT"
    );
    let med: Vec<Vec<f64>> = rtt.iter().map(|r| r.iter().map(|v| median(v)).collect()).collect();
    for (r, row) in rows.iter().enumerate() {
        for (k, &size) in SIZES.iter().enumerate() {
            println!(
                "{:<26} {:>7} {:>10.1} {:>8.3} {:>12.2} {:>12.2} {:>12.2} {:>12.1}",
                row.name,
                size,
                med[r][k],
                med[r][k] / med[row.base][k],
                wakes[r][k].0,
                wakes[r][k].1,
                wakes[r][k].2,
                wakes[r][k].3
            );
        }
    }
    print_bulk(&rows, &goodput, &bulk_cpu, rounds, bulk_bytes);
}

/// The bulk rows: median goodput per blocking mode and its ratio to
/// integrated's, and the host CPU time (user + system of this process —
/// client, engine thread, sink — and the daemon's) per MiB moved.
fn print_bulk(rows: &[Row], goodput: &[Vec<f64>], cpu: &[Vec<f64>], rounds: usize, bulk_bytes: u64) {
    println!(
        "\nbulk goodput one way on loopback, {} MiB in 64 KiB writes, median of {rounds} (Mbit/s)",
        bulk_bytes >> 20
    );
    println!("{:<26} {:>10} {:>8} {:>12} {:>8}", "client mode", "Mbit/s", "ratio", "CPU µs/MiB", "ratio");
    for (r, row) in rows.iter().enumerate().filter(|(_, row)| row.base == 0) {
        let (g, c) = (median(&goodput[r]), median(&cpu[r]));
        println!(
            "{:<26} {:>10.0} {:>8.3} {:>12.0} {:>8.3}",
            row.name,
            g,
            g / median(&goodput[0]),
            c,
            c / median(&cpu[0])
        );
    }
}
