//! E1 (seed 000, Tables 1–3): message ping-pong, 10 / 1,000 / 10,000 bytes.
//!
//! End-to-end time is one way: half a round trip, as in the seed (whose
//! network simulator added 0.9 ms per crossing). Processing time is
//! end-to-end minus the link delay.
//!
//! * In the simulator (`xk-sim`): two endpoints joined by a link of 0.9 ms or
//!   zero delay. Virtual time covers the link; the protocol's own cost is the
//!   wall time spent inside the two endpoints (and their applications) per
//!   round trip, the simulator's event queue and packet copies excluded.
//! * Over real UDP on loopback, link delay zero, three ways: both endpoints
//!   on one thread taking turns without sleeping (the protocol plus the
//!   kernel's UDP path); the server on its own thread (blocking waits: a
//!   cross-thread wake-up per message); the server as `xpress serve` in its
//!   own process (seed 000 Table 1's situation).
//! * The deployment modes (`e1_modes`): a client written against the
//!   blocking API, integrated, on an engine thread, and through an
//!   `xpress daemon` process (SandiaXTP's daemon serving separate client
//!   processes), against one echo thread.
//! * The raw-UDP floor: the same exchange with plain sockets, no protocol.

use std::net::SocketAddr;
use std::time::Instant as WallInstant;

use bytes::Bytes;
use xk_driver::driver::UdpDriver;
use xk_netemu::LinkParams;
use xk_sim::Sim;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, ContextId, Endpoint, EndpointConfig, Event};
use xtp_testkit::{App, Host, Meter, Pair};

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::stats;
use crate::svg::{esc, loglog};

/// One measured row: samples of the one-way end-to-end time in ns.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Where it ran: simulator (with its link delay), real UDP, UDP floor.
    pub setting: String,
    /// Message bytes.
    pub size: usize,
    /// One-way link delay included in the end-to-end time.
    pub link_delay_ns: u64,
    /// Median one-way end-to-end time.
    pub median_e2e_ns: f64,
    /// Median end-to-end time less the link delay.
    pub processing_ns: f64,
    /// Every sample of the one-way end-to-end time.
    pub samples_e2e_ns: Vec<u64>,
}

impl Row {
    pub(crate) fn new(setting: String, size: usize, link_delay_ns: u64, e2e_ns: Vec<u64>) -> Row {
        let median_e2e_ns = stats::median(e2e_ns.iter().map(|&v| v as f64));
        Row {
            setting,
            size,
            link_delay_ns,
            median_e2e_ns,
            processing_ns: median_e2e_ns - link_delay_ns as f64,
            samples_e2e_ns: e2e_ns,
        }
    }
}

/// Both ends of a ping-pong (or request/reply) in the simulator: the
/// application on the test kit's host.
pub(crate) struct Ping {
    ctx: Option<ContextId>,
    client: bool,
    size: usize,
    /// Bytes the server answers each request with (0: echo the request).
    reply: usize,
    remaining: u32,
    got: usize,
    sent_at: Instant,
    rtts: Vec<u64>,
}

/// Wall time spent in the endpoint and the application (not in the
/// simulator's own queues and copies): the lab's clock behind the test
/// kit's [`Meter`].
#[derive(Default)]
pub(crate) struct Busy {
    since: Option<WallInstant>,
    ns: u64,
}

impl Meter for Busy {
    fn begin(&mut self) {
        self.since = Some(WallInstant::now());
    }
    fn end(&mut self) {
        if let Some(t) = self.since.take() {
            self.ns += t.elapsed().as_nanos() as u64;
        }
    }
}

/// A ping-pong host in the simulator.
pub(crate) type PingNode = Host<Ping, Busy>;

impl App for Ping {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Incoming { ctx, .. } => self.ctx = Some(ctx),
                Event::Readable { ctx } => {
                    while let Some(c) = ep.read(now, ctx) {
                        if self.client {
                            self.got += c.data.len();
                        } else if self.reply == 0 {
                            let _ = ep.write(now, ctx, c.data, c.eom, None);
                        } else if c.eom {
                            let _ = ep.write(now, ctx, Bytes::from(vec![0x5au8; self.reply]), true, None);
                        }
                    }
                }
                _ => {}
            }
        }
        let expect = if self.reply == 0 { self.size } else { self.reply };
        if self.client && self.got >= expect {
            self.got = 0;
            self.rtts.push((now - self.sent_at).as_nanos() as u64);
            self.send(ep, now);
        }
    }
}

impl Ping {
    fn send(&mut self, ep: &mut Endpoint, now: Instant) {
        if self.remaining == 0 {
            return;
        }
        self.remaining -= 1;
        self.sent_at = now;
        if let Some(ctx) = self.ctx {
            let _ = ep.write(now, ctx, Bytes::from(vec![0x42u8; self.size]), true, None);
        }
    }

    /// Round trips completed, in virtual nanoseconds.
    pub(crate) fn rtts(&self) -> &[u64] {
        &self.rtts
    }
}

fn node(
    seed: u64,
    cfg: &EndpointConfig,
    client: bool,
    (size, reply): (usize, usize),
    count: u32,
) -> PingNode {
    let ping = Ping {
        reply,
        ctx: None,
        client,
        size,
        remaining: count,
        got: 0,
        sent_at: Instant::ZERO,
        rtts: Vec::new(),
    };
    Host::metered(Endpoint::new(cfg.clone(), seed), ping, Busy::default())
}

/// Request/reply exchanges in the simulator over `link` (both directions):
/// `count` requests of `request` bytes on one context, each answered with
/// `reply` bytes (0: the request echoed). Returns the simulator (to read
/// round trips and link counters), the client's and the server's ids, and
/// the CPU time taken.
pub(crate) fn exchange(
    link: LinkParams,
    cfg: &EndpointConfig,
    (request, reply): (usize, usize),
    count: u32,
    seed: u64,
) -> Result<(Sim<PingNode>, [xk_sim::NodeId; 2], std::time::Duration), String> {
    let server = node(seed ^ 1, cfg, false, (request, reply), 0);
    let client = node(seed ^ 2, cfg, true, (request, reply), count);
    let Pair { mut sim, client: c, server: s, server_addr, .. } =
        xtp_testkit::pair(seed, client, server, link.clone(), link);
    sim.node_mut(s).ep.listen(7, ContextConfig::stream()).map_err(|e| e.to_string())?;
    sim.node_mut(c).with(|ping, ep| -> Result<(), String> {
        let ctx =
            ep.connect(Instant::ZERO, server_addr, 7, ContextConfig::stream()).map_err(|e| e.to_string())?;
        ping.ctx = Some(ctx);
        ping.send(ep, Instant::ZERO);
        Ok(())
    })?;
    let wall = WallInstant::now();
    sim.run_until(Instant::from_secs(24 * 3600), 50_000_000, |sim| sim.node(c).rtts.len() >= count as usize)
        .map_err(|e| e.to_string())?;
    Ok((sim, [c, s], wall.elapsed()))
}

/// E1 in the simulator with the given one-way link delay.
pub(crate) fn simulated(size: usize, delay: Duration, count: u32, seed: u64) -> Result<Row, String> {
    let link = LinkParams { delay, ..LinkParams::default() };
    let (sim, [c, s], _) = exchange(link, &EndpointConfig::default(), (size, 0), count, seed)?;
    // Both endpoints' own time (protocol and application), not the
    // simulator's event queue and packet copies.
    let cpu_per_rt = (sim.node(c).meter.ns + sim.node(s).meter.ns) / u64::from(count.max(1));
    let rtts = &sim.node(c).rtts;
    if rtts.len() < count as usize {
        return Err(format!(
            "E1 simulated {size} B: only {} of {count} round trips (seed {seed})",
            rtts.len()
        ));
    }
    // One way = half the virtual round trip + half the CPU time per round trip.
    let e2e_ns = rtts.iter().map(|r| (r + cpu_per_rt) / 2).collect();
    let ms = delay.as_secs_f64() * 1e3;
    Ok(Row::new(format!("simulator, {ms} ms link"), size, delay.as_nanos() as u64, e2e_ns))
}

/// E1 over real UDP on loopback. Client and server endpoints run on one
/// thread, taking turns on their sockets without sleeping: the measurement is
/// the protocol plus the kernel's UDP path, not the scheduler (on this kind of
/// virtual machine a cross-CPU wake-up alone costs ~50 µs; docs/PERF.md).
pub(crate) fn udp(size: usize, count: u32) -> Result<Row, String> {
    let mut server =
        UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 11).map_err(|e| e.to_string())?;
    let saddr = server.local_addr().map_err(|e| e.to_string())?;
    server.endpoint().listen(7, ContextConfig::stream()).map_err(|e| e.to_string())?;
    let mut d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 12).map_err(|e| e.to_string())?;
    let now = d.now();
    let ctx = d.endpoint().connect(now, saddr, 7, ContextConfig::stream()).map_err(|e| e.to_string())?;
    let msg = Bytes::from(vec![0x42u8; size]);
    let serve = |server: &mut UdpDriver| -> Result<(), String> {
        server.turn(Duration::ZERO).map_err(|e| e.to_string())?;
        let now = server.now();
        let ep = server.endpoint();
        while let Some(ev) = ep.poll_event() {
            if let Event::Readable { ctx } = ev {
                while let Some(c) = ep.read(now, ctx) {
                    let _ = ep.write(now, ctx, c.data, c.eom, None);
                }
            }
        }
        server.flush().map_err(|e| e.to_string())
    };
    let mut e2e_ns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let t0 = d.now();
        d.endpoint().write(t0, ctx, msg.clone(), true, None).map_err(|e| e.to_string())?;
        let mut got = 0;
        while got < size {
            if d.now() - t0 > Duration::from_secs(5) {
                return Err(format!("E1 udp {size} B: no echo within 5 s"));
            }
            d.turn(Duration::ZERO).map_err(|e| e.to_string())?;
            serve(&mut server)?;
            let now = d.now();
            while let Some(c) = d.endpoint().read(now, ctx) {
                got += c.data.len();
            }
            while d.endpoint().poll_event().is_some() {}
        }
        e2e_ns.push((d.now() - t0).as_nanos() as u64 / 2);
    }
    Ok(Row::new("real UDP, one thread".into(), size, 0, e2e_ns))
}

/// Ping-pong from a blocking client in this thread against `to`: one way =
/// half of each round trip.
fn blocking_client(to: SocketAddr, size: usize, count: u32, what: &str) -> Result<Vec<u64>, String> {
    let mut d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 13).map_err(|e| e.to_string())?;
    let now = d.now();
    let ctx = d.endpoint().connect(now, to, 7, ContextConfig::stream()).map_err(|e| e.to_string())?;
    let msg = Bytes::from(vec![0x42u8; size]);
    let mut e2e_ns = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let t0 = d.now();
        d.endpoint().write(t0, ctx, msg.clone(), true, None).map_err(|e| e.to_string())?;
        d.flush().map_err(|e| e.to_string())?;
        let mut got = 0;
        while got < size {
            if d.now() - t0 > Duration::from_secs(5) {
                return Err(format!("E1 {what} {size} B: no echo within 5 s"));
            }
            d.turn(Duration::from_millis(50)).map_err(|e| e.to_string())?;
            let now = d.now();
            while let Some(c) = d.endpoint().read(now, ctx) {
                got += c.data.len();
            }
            while d.endpoint().poll_event().is_some() {}
        }
        e2e_ns.push((d.now() - t0).as_nanos() as u64 / 2);
    }
    let now = d.now();
    d.endpoint().abort(now, ctx);
    let _ = d.flush();
    Ok(e2e_ns)
}

/// E1 over real UDP with the server endpoint on its own thread (blocking
/// waits on both sides: each message costs a cross-thread wake-up).
pub(crate) fn udp_threads(size: usize, count: u32) -> Result<Row, String> {
    let mut server =
        UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 14).map_err(|e| e.to_string())?;
    let saddr = server.local_addr().map_err(|e| e.to_string())?;
    server.endpoint().listen(7, ContextConfig::stream()).map_err(|e| e.to_string())?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let halt = stop.clone();
    let srv = std::thread::spawn(move || {
        while !halt.load(std::sync::atomic::Ordering::Relaxed) {
            if server.turn(Duration::from_millis(20)).is_err() {
                return;
            }
            let now = server.now();
            let ep = server.endpoint();
            while let Some(ev) = ep.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(c) = ep.read(now, ctx) {
                        let _ = ep.write(now, ctx, c.data, c.eom, None);
                    }
                }
            }
        }
    });
    let r = blocking_client(saddr, size, count, "server thread");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = srv.join();
    Ok(Row::new("real UDP, server thread".into(), size, 0, r?))
}

/// `xpress serve` as a child process, ended by its id when dropped. Its
/// stdout stays open: it prints a line per service, and a closed pipe
/// would end it.
struct ServeProcess(std::process::Child, Option<std::io::BufReader<std::process::ChildStdout>>);

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// E1 over real UDP against `xpress serve` in its own process (seed 000
/// Table 1's situation: client and protocol server in separate processes).
/// The process is what this row measures — the cost of crossing between
/// two programs' address spaces and schedulers — so it cannot be a thread;
/// the client is the in-process `blocking_client`.
pub(crate) fn udp_processes(size: usize, count: u32) -> Result<Row, String> {
    use std::io::BufRead;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--duration", "120"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("start xpress serve: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut guard = ServeProcess(child, Some(std::io::BufReader::new(out)));
    let mut line = String::new();
    guard.1.as_mut().expect("set above").read_line(&mut line).map_err(|e| e.to_string())?;
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("xpress serve said {line:?}"))?;
    let r = blocking_client(addr, size, count, "separate processes");
    drop(guard);
    Ok(Row::new("real UDP, separate processes".into(), size, 0, r?))
}

/// The floor for [`udp`]: the same exchange with plain UDP sockets and no
/// protocol, measured the same way (one thread, client and echo taking turns,
/// one way = half the round trip) — what the kernel path alone costs.
/// With `via`, through the relay with that delay each way (the relay's own
/// cost on top of the delay is what this row's processing time shows).
pub(crate) fn udp_floor(size: usize, count: u32, via: Option<(Duration, u64)>) -> Result<Row, String> {
    let server = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let client = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let saddr = server.local_addr().map_err(|e| e.to_string())?;
    let relay = via.map(|(d, seed)| crate::e1_modes::Relay::start(saddr, d, seed)).transpose()?;
    client.connect(relay.as_ref().map_or(saddr, |r| r.addr)).map_err(|e| e.to_string())?;
    for s in [&server, &client] {
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).map_err(|e| e.to_string())?;
    }
    let msg = vec![0x42u8; size];
    let mut buf = vec![0u8; size.max(1) + 64];
    let mut e2e_ns = Vec::with_capacity(count as usize);
    let clock = xk_driver::clock::Clock::new();
    for _ in 0..count {
        let t0 = clock.now();
        client.send(&msg).map_err(|e| e.to_string())?;
        let (n, from) = server.recv_from(&mut buf).map_err(|e| format!("E1 UDP floor: {e}"))?;
        server.send_to(&buf[..n], from).map_err(|e| e.to_string())?;
        client.recv(&mut buf).map_err(|e| format!("E1 UDP floor: {e}"))?;
        e2e_ns.push((clock.now() - t0).as_nanos() as u64 / 2);
    }
    Ok(match via {
        Some((d, _)) => Row::new(
            format!("raw UDP floor, {:.1} ms link (relay)", d.as_nanos() as f64 / 1e6),
            size,
            d.as_nanos() as u64,
            e2e_ns,
        ),
        None => Row::new("raw UDP floor, loopback".into(), size, 0, e2e_ns),
    })
}

/// Seed 000, Table 3 (processing time, integrated clients), SandiaXTP row:
/// 10 / 1,000 / 10,000 bytes, ms.
const SEED000_T3_SANDIA_MS: [(f64, f64); 3] = [(10.0, 0.80), (1000.0, 1.52), (10_000.0, 2.68)];
/// Seed 000, Table 2 (end-to-end, integrated clients, 0.9 ms simulated link), ms.
const SEED000_T2_SANDIA_MS: [(f64, f64); 3] = [(10.0, 1.70), (1000.0, 2.42), (10_000.0, 3.58)];

/// E1's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Message bytes.
    pub sizes: Vec<usize>,
    /// Round trips per simulated row.
    pub simulated_count: u32,
    /// Round trips per loopback row.
    pub udp_count: u32,
    /// Round trips per row through the relay with seed 000's 0.9 ms link
    /// (deployment modes and the floor; 0: none).
    #[serde(default)]
    pub relay_count: u32,
}

/// E1 (seed 000, Tables 1–3): message ping-pong.
pub struct E1(Params);

impl Experiment for E1 {
    const ID: &'static str = "E1";
    const TITLE: &'static str = "Message ping-pong: end-to-end (one-way) and processing time (seed 000)";
    type Params = Params;
    type Point = usize;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            sizes: vec![10, 1000, 10_000],
            simulated_count: if quick { 200 } else { 2000 },
            udp_count: if quick { 500 } else { 5000 },
            // 1.8 ms a round trip: 400 take under a second a row.
            relay_count: if quick { 50 } else { 400 },
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.sizes.is_empty() || p.sizes.iter().any(|&s| s == 0 || s > 1_000_000) {
            return Err("sizes: 1 to 1,000,000 bytes each, at least one".into());
        }
        if p.simulated_count == 0 || p.udp_count == 0 {
            return Err("simulated_count and udp_count must be at least 1".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E1(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &Env) -> Vec<Step<usize>> {
        self.0
            .sizes
            .iter()
            .map(|&s| Step {
                label: format!(
                    "{s} B: simulator 0.9 ms and 0 ms; real UDP one thread, server thread, separate processes; API integrated, engine thread, daemon; raw UDP floor; the API modes and the floor through a 0.9 ms relay"
                ),
                point: s,
            })
            .collect()
    }
    fn run(&mut self, &size: &usize, env: &Env) -> Result<Vec<Row>, String> {
        let i = self.0.sizes.iter().position(|&s| s == size).unwrap_or(0) as u64;
        let (sim_n, udp_n) = (self.0.simulated_count, self.0.udp_count);
        let mut rows = vec![
            simulated(size, Duration::from_micros(900), sim_n, env.seed + i)?,
            simulated(size, Duration::ZERO, sim_n, env.seed + 10 + i)?,
            udp(size, udp_n)?,
            udp_threads(size, udp_n)?,
            udp_processes(size, udp_n)?,
        ];
        rows.extend(crate::e1_modes::api_modes(size, udp_n, None)?);
        rows.push(udp_floor(size, udp_n, None)?);
        if self.0.relay_count > 0 {
            let via = Some((Duration::from_micros(900), env.seed + 20 + i));
            rows.extend(crate::e1_modes::api_modes(size, self.0.relay_count, via)?);
            rows.push(udp_floor(size, self.0.relay_count, via)?);
        }
        Ok(rows)
    }
    fn csv_key() -> &'static [&'static str] {
        &["setting", "size"]
    }
    fn render(_p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        // Relative to the fastest row, as the seed's Table 3.
        let fastest = rows.iter().map(|r| r.processing_ns).fold(f64::INFINITY, f64::min).max(1e-9);
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    esc(&r.setting),
                    r.size.to_string(),
                    format!("{:.1}", r.median_e2e_ns / 1e3),
                    format!("{:.1}", r.processing_ns / 1e3),
                    format!("{:.4}", r.processing_ns / 1e6),
                    format!("{:.1}", r.processing_ns / fastest),
                ]
            })
            .collect();
        page.table(
            "Measured here: one-way end-to-end and processing time (median); relative = processing time over the fastest row's",
            &["setting", "bytes", "end-to-end µs", "processing µs", "processing ms", "relative"],
            &table,
        );
        let seed: Vec<Vec<String>> = SEED000_T3_SANDIA_MS
            .iter()
            .zip(SEED000_T2_SANDIA_MS)
            .map(|((n, p), (_, e))| {
                vec![
                    n.to_string(),
                    format!("{e:.2}"),
                    format!("{p:.2}"),
                    format!("{:.1}", p / SEED000_T3_SANDIA_MS[0].1),
                ]
            })
            .collect();
        page.table(
            "Seed 000 (Thees & Gotzhein 1997), SandiaXTP, integrated clients, 0.9 ms simulated link",
            &["bytes", "end-to-end ms (Table 2)", "processing ms (Table 3)", "relative (Table 3)"],
            &seed,
        );
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for r in rows {
            let pt = (r.size as f64, r.processing_ns / 1e3);
            match series.iter_mut().find(|s| s.0 == r.setting) {
                Some(s) => s.1.push(pt),
                None => series.push((r.setting.clone(), vec![pt])),
            }
        }
        series.push((
            "SandiaXTP 1997 (seed 000 T3)".into(),
            SEED000_T3_SANDIA_MS.iter().map(|(n, p)| (*n, p * 1e3)).collect(),
        ));
        page.figure(
            loglog("E1 processing time vs message size", "message size (bytes)", "processing time (µs)", &series),
            "E1: one-way processing time per message against its size, each setting a line, seed 000's SandiaXTP for comparison.",
        );
        page.reading(&reading(rows));
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["E1 processing time per message (one way, median):".to_string()];
        for r in rows {
            out.push(format!(
                "  {:>24} {:>6} B  e2e {:>10.1} µs  processing {:>8.1} µs",
                r.setting,
                r.size,
                r.median_e2e_ns / 1e3,
                r.processing_ns / 1e3
            ));
        }
        out.push(
            "  seed 000 Table 3, SandiaXTP (1997): 800 / 1,520 / 2,680 µs for 10 / 1,000 / 10,000 B".into(),
        );
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} {} B processing", r.setting, r.size), r.processing_ns / 1e3, "µs"))
    }
}

/// E1's reading: per setting, the processing time at the smallest size and
/// how it grows to the largest, against the seed's factor.
pub(crate) fn reading(rows: &[Row]) -> String {
    let mut settings: Vec<&str> = Vec::new();
    for r in rows {
        if !settings.contains(&r.setting.as_str()) {
            settings.push(&r.setting);
        }
    }
    let mut parts = Vec::new();
    for s in &settings {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.setting == *s).collect();
        let (Some(lo), Some(hi)) = (mine.iter().min_by_key(|r| r.size), mine.iter().max_by_key(|r| r.size))
        else {
            continue;
        };
        if lo.size == hi.size {
            continue;
        }
        parts.push(format!(
            "{s}: {:.1} µs at {} bytes, ×{:.1} at {} bytes",
            lo.processing_ns / 1e3,
            lo.size,
            hi.processing_ns / lo.processing_ns.max(1e-9),
            hi.size
        ));
    }
    format!(
        "Processing time per message, smallest to largest size — {}. SandiaXTP in 1997: {:.0} µs at 10 bytes, ×{:.1} at 10,000 bytes. In the simulator, processing is the endpoints' own time (the simulator's queues and packet copies excluded) added to the virtual link delay.",
        parts.join("; "),
        SEED000_T3_SANDIA_MS[0].1 * 1e3,
        SEED000_T3_SANDIA_MS[2].1 / SEED000_T3_SANDIA_MS[0].1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(setting: &str, size: usize, us: u64) -> Row {
        Row::new(setting.into(), size, 0, vec![us * 1000; 3])
    }

    #[test]
    fn the_reading_quotes_the_rows_it_came_from() {
        let rows = [
            row("real UDP, one thread", 10, 5),
            row("real UDP, one thread", 10_000, 20),
            row("raw UDP floor, loopback", 10, 4),
            row("raw UDP floor, loopback", 10_000, 6),
        ];
        let text = reading(&rows);
        // Each setting's own rows: 20/5 = 4.0, 6/4 = 1.5 — not one setting's
        // row over another's.
        assert!(text.contains("real UDP, one thread: 5.0 µs at 10 bytes, ×4.0 at 10000 bytes"), "{text}");
        assert!(text.contains("raw UDP floor, loopback: 4.0 µs at 10 bytes, ×1.5 at 10000 bytes"), "{text}");
        assert!(text.contains("800 µs at 10 bytes, ×3.4 at 10,000 bytes"), "{text}");
    }
}
