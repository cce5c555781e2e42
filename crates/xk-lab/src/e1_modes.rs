//! E1's deployment-mode rows (issue #17): the same ping-pong from a client
//! written once against the blocking API (`XtpStream::send_message` /
//! `recv_message`), made in each mode — integrated, engine thread, and
//! through an `xpress daemon` in its own process (seed 000 Table 1's
//! "separate processes": SandiaXTP's daemon serving its clients) — against
//! one echo server on its own thread, over real UDP on loopback — directly
//! (the zero-delay link) and through the link emulator's real-time relay
//! with 0.9 ms each way (seed 000's link), the raw-UDP floor through the
//! same relay beside them (so the relay's own cost can be read off).

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};

use xk_driver::api::{Mode, Xtp};
use xk_driver::driver::UdpDriver;
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig, Event};

use crate::e1::Row;

/// The echo server of these rows: a driver on its own thread echoing
/// every chunk (EOM kept), until dropped (E8's profiles use it too).
pub(crate) struct EchoThread {
    pub(crate) addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EchoThread {
    pub(crate) fn start() -> Result<EchoThread, String> {
        let mut d =
            UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 15).map_err(|e| e.to_string())?;
        let addr = d.local_addr().map_err(|e| e.to_string())?;
        d.endpoint().listen(7, ContextConfig::stream()).map_err(|e| e.to_string())?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        // Named: E8 finds the peer's events in a trace by thread name.
        let builder = std::thread::Builder::new().name("lab-echo".into());
        let thread = builder.spawn(move || {
            while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                if d.turn(Duration::from_millis(20)).is_err() {
                    return;
                }
                let now = d.now();
                let ep = d.endpoint();
                while let Some(ev) = ep.poll_event() {
                    if let Event::Readable { ctx } = ev {
                        while let Some(c) = ep.read(now, ctx) {
                            let _ = ep.write(now, ctx, c.data, c.eom, None);
                        }
                    }
                }
            }
        });
        let thread = thread.map_err(|e| format!("start the echo thread: {e}"))?;
        Ok(EchoThread { addr, stop, thread: Some(thread) })
    }
}

impl Drop for EchoThread {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `xpress daemon` as a child process (this binary is `xpress`), killed
/// by its id when dropped; its stdout stays open (a closed pipe would end
/// it at its next line).
pub(crate) struct DaemonProcess {
    child: Child,
    _out: std::io::BufReader<ChildStdout>,
    pub(crate) socket: PathBuf,
}

impl DaemonProcess {
    /// Its process id (E8 reads its CPU time).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn start() -> Result<DaemonProcess, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let socket = std::env::temp_dir().join(format!("xpress-e1-{}.sock", std::process::id()));
        let mut child = Command::new(exe)
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .args(["--listen", "127.0.0.1:0", "--duration", "600"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start xpress daemon: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let mut d = DaemonProcess { child, _out: std::io::BufReader::new(out), socket };
        let mut line = String::new();
        d._out.read_line(&mut line).map_err(|e| e.to_string())?;
        if !line.starts_with("xpress daemon: serving") {
            return Err(format!("xpress daemon said {line:?} (E1's daemon row needs the xpress binary)"));
        }
        Ok(d)
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// `count` round trips of `size` bytes from a client made with `xtp`;
/// one way = half of each round trip.
fn api_client(xtp: &Xtp, to: SocketAddr, size: usize, count: u32, what: &str) -> Result<Vec<u64>, String> {
    let mut s = xtp.connect(to, 7).map_err(|e| format!("E1 {what}: {e}"))?;
    s.set_timeout(Some(std::time::Duration::from_secs(5)));
    let msg = vec![0x42u8; size];
    let clock = xk_driver::clock::Clock::new();
    let mut e2e_ns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let t0 = clock.now();
        s.send_message(&msg, None).map_err(|e| format!("E1 {what} {size} B: {e}"))?;
        let back = s.recv_message().map_err(|e| format!("E1 {what} {size} B: {e}"))?;
        if back.map(|m| m.data.len()) != Some(size) {
            return Err(format!("E1 {what} {size} B: the echo was cut short"));
        }
        e2e_ns.push((clock.now() - t0).as_nanos() as u64 / 2);
    }
    s.abort();
    Ok(e2e_ns)
}

/// The link emulator's relay on its own thread, in front of `server`,
/// with `delay` each way; stopped when dropped.
pub(crate) struct Relay {
    /// Where clients send.
    pub(crate) addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub(crate) fn start(server: SocketAddr, delay: Duration, seed: u64) -> Result<Relay, String> {
        use xk_driver::relay::{self, RelayConfig};
        let spec = xk_netemu::parse_line(&format!("delay {}us", delay.as_nanos() / 1000))
            .map_err(|e| e.to_string())?;
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let addr = sock.local_addr().map_err(|e| e.to_string())?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cfg = RelayConfig {
            listen: addr,
            server,
            forward: spec.clone(),
            reverse: spec,
            seed,
            duration: Duration::from_secs(600),
            spin: xk_driver::pacer::DEFAULT_SPIN,
            max_p99_error: relay::DEFAULT_MAX_P99_ERROR,
            stop: Some(stop.clone()),
        };
        let thread = std::thread::spawn(move || {
            let _ = relay::run_on(sock, &cfg, &mut None);
        });
        Ok(Relay { addr, stop, thread: Some(thread) })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The three rows for `size`: the API client integrated, on an engine
/// thread, and through a daemon process; with `via`, through the relay
/// with that delay each way (rows named for it, the delay as their link
/// delay).
pub(crate) fn api_modes(size: usize, count: u32, via: Option<(Duration, u64)>) -> Result<Vec<Row>, String> {
    let server = EchoThread::start()?;
    let daemon = DaemonProcess::start()?;
    let modes = [
        ("real UDP, API integrated", Mode::integrated()),
        ("real UDP, API engine thread", Mode::engine_thread()),
        ("real UDP, API via xpress daemon (separate process)", Mode::daemon(&daemon.socket)),
    ];
    let mut rows = Vec::new();
    for (name, mode) in modes {
        // A relay of its own for each client: the relay sends the server's
        // packets to the last client it heard from, so with one relay for
        // all three a packet the server sent late to the client before
        // (its context's END, after that client's abort) reached the next
        // one.
        let relay = via.map(|(d, seed)| Relay::start(server.addr, d, seed)).transpose()?;
        let (to, delay, link) = match (&relay, via) {
            (Some(r), Some((d, _))) => {
                (r.addr, d.as_nanos() as u64, format!(", {:.1} ms link (relay)", d.as_nanos() as f64 / 1e6))
            }
            _ => (server.addr, 0, String::new()),
        };
        let name = format!("{name}{link}");
        let r = api_client(&Xtp::new(mode), to, size, count, &name)?;
        rows.push(Row::new(name, size, delay, r));
    }
    Ok(rows)
}
