//! Bulk goodput against message size (the throughput-vs-message-size part of
//! E8): XTP messages (each ending with EOM) against kernel TCP writes of the
//! same size with Nagle off, on loopback: the server is `xpress serve` in a
//! process of its own, the client is `xk_apps::bulk` (what `xpress bulk -l
//! N` runs) called in this process; QUIC (quinn) the same way (one stream,
//! writes of the message size); and, when `iperf3` is installed, iperf3's
//! own TCP measurement with the same write size (`-l`) and byte count
//! (`-n`) as an outside peer.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;

use xk_apps::{Amount, BulkConfig, Transport};

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::netns_run::have_iperf3;
use crate::serve_proc::Reaped;
use crate::stats;
use crate::svg::{Series, plot_series};

/// One measurement.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// xtp, tcp, quic or iperf3.
    pub transport: String,
    /// Bytes per message (write).
    pub message_bytes: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Goodput.
    pub mbit_per_s: f64,
}

impl Row {
    fn new(transport: &str, message_bytes: usize, bytes: u64, seconds: f64) -> Row {
        let mbit_per_s = bytes as f64 * 8.0 / seconds / 1e6;
        Row { transport: transport.into(), message_bytes, bytes, seconds, mbit_per_s }
    }
}

/// `xpress serve` as a child (XTP, TCP and QUIC), ended by its id when
/// dropped, its QUIC certificate file removed. Its stdout stays open (a line
/// per transfer; a closed pipe would make its prints fail).
///
/// Why a process and not a thread: the server is the client's peer, and a
/// peer in the same process would share its allocator, its scheduler
/// slices and (for QUIC) its async runtime's thread budget with the
/// client; as a user's two programs, each side has a process of its own.
struct Server {
    child: Child,
    addr: SocketAddr,
    quic: SocketAddr,
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
    let unset = SocketAddr::from(([0, 0, 0, 0], 0));
    let mut srv = Server { child, addr: unset, quic: unset, cert, _out: BufReader::new(out) };
    let mut line = String::new();
    for (prefix, slot) in [("listening on ", 0), ("quic on ", 1)] {
        line.clear();
        srv._out.read_line(&mut line).map_err(|e| e.to_string())?;
        let v: SocketAddr = line
            .trim()
            .strip_prefix(prefix)
            .and_then(|a| a.parse().ok())
            .ok_or(format!("xpress serve said: {line:?}"))?;
        if slot == 0 { srv.addr = v } else { srv.quic = v }
    }
    Ok(srv)
}

/// Most messages one run sends: small messages would otherwise make a run
/// of `bytes` take minutes (100 MB of 16-byte QUIC writes is ~40 s).
pub(crate) const MAX_MESSAGES: u64 = 250_000;

/// One run of `transport` with `size`-byte messages against `srv`: the
/// library call `xpress bulk -n BYTES -l SIZE --transport T` makes.
fn measure(srv: &Server, transport: &str, size: usize, bytes: u64) -> Result<Row, String> {
    let t: Transport = transport.parse()?;
    let to = if t == Transport::Quic { srv.quic } else { srv.addr };
    let mut cfg = BulkConfig::new(to, Amount::Bytes(bytes));
    cfg.transport = t;
    cfg.length = Some(size);
    if t == Transport::Quic {
        cfg.quic_cert = Some(srv.cert.clone());
    }
    let r = xk_apps::bulk::run(&cfg, &AtomicBool::new(false), |_| {})
        .map_err(|e| format!("bulk -l {size} {transport}: {e}"))?;
    Ok(Row::new(transport, size, r.bytes, r.seconds))
}

/// iperf3 over loopback TCP with `size`-byte writes; None when iperf3 is not
/// installed.
fn iperf3(size: usize, bytes: u64) -> Result<Option<Row>, String> {
    if !have_iperf3() {
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
        (Some(b), Some(s)) if s > 0.0 => Ok(Some(Row::new("iperf3", size, b, s))),
        _ => Err(format!("iperf3 JSON without end.sum_received: {v}")),
    }
}

/// The transports goodput vs message size can measure (iperf3 only when
/// installed).
pub(crate) const PEERS: [&str; 4] = ["xtp", "tcp", "quic", "iperf3"];

/// MSG's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Message bytes.
    pub sizes: Vec<usize>,
    /// Most bytes per run (a run also stops at 250,000 messages).
    pub bytes: u64,
    /// Runs per point.
    pub repetitions: u32,
    /// Transports measured: xtp, tcp, quic, iperf3 (iperf3 if installed).
    pub peers: Vec<String>,
}

/// Goodput vs message size.
pub struct Msg {
    p: Params,
    server: Option<Server>,
}

impl Experiment for Msg {
    const ID: &'static str = "MSG";
    const TITLE: &'static str = "Bulk goodput vs message size: XTP messages (EOM) vs kernel TCP writes (Nagle off) vs QUIC (quinn) stream writes, loopback";
    type Params = Params;
    type Point = (usize, String, u32);
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            sizes: if quick { vec![64, 1024, 65_536] } else { vec![16, 64, 256, 1024, 4096, 16_384, 65_536] },
            bytes: if quick { 20_000_000 } else { 100_000_000 },
            repetitions: if quick { 2 } else { 3 },
            peers: PEERS.iter().map(|s| s.to_string()).collect(),
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.sizes.is_empty() || p.sizes.iter().any(|&s| s == 0 || s > 1 << 20) {
            return Err("sizes: must not be empty; 1 B to 1 MiB each".into());
        }
        if p.peers.is_empty() {
            return Err("peers: must not be empty".into());
        }
        if let Some(x) = p.peers.iter().find(|x| !PEERS.contains(&x.as_str())) {
            return Err(format!("unknown peer {x:?} (known: {})", PEERS.join(", ")));
        }
        if p.bytes == 0 || !(1..=100).contains(&p.repetitions) {
            return Err("bytes at least 1, repetitions 1 to 100".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        Msg { p, server: None }
    }
    fn params(&self) -> &Params {
        &self.p
    }
    fn steps(&self, _env: &Env) -> Vec<Step<(usize, String, u32)>> {
        let iperf3 = have_iperf3();
        let mut out = Vec::new();
        for &size in &self.p.sizes {
            for t in self.p.peers.iter().filter(|t| *t != "iperf3" || iperf3) {
                for rep in 1..=self.p.repetitions {
                    out.push(Step {
                        label: format!(
                            "message size {size} B, {t}, repetition {rep} of {}",
                            self.p.repetitions
                        ),
                        point: (size, t.clone(), rep),
                    });
                }
            }
        }
        out
    }
    fn notes(&self, _env: &Env) -> Vec<String> {
        if self.p.peers.iter().any(|p| p == "iperf3") && !have_iperf3() {
            vec!["MSG: iperf3 rows skipped: iperf3 is not installed".into()]
        } else {
            Vec::new()
        }
    }
    fn run(
        &mut self,
        (size, transport, _rep): &(usize, String, u32),
        _env: &Env,
    ) -> Result<Vec<Row>, String> {
        let bytes = self.p.bytes.min(*size as u64 * MAX_MESSAGES);
        if transport == "iperf3" {
            return Ok(iperf3(*size, bytes)?.into_iter().collect());
        }
        if self.server.is_none() {
            // The peer in a process of its own (see `Server`): `xpress serve`.
            let exe = std::env::current_exe().map_err(|e| e.to_string())?.display().to_string();
            self.server = Some(server(&exe)?);
        }
        let srv = self.server.as_ref().expect("started above");
        Ok(vec![measure(srv, transport, *size, bytes)?])
    }
    fn csv_key() -> &'static [&'static str] {
        &["transport", "message_bytes"]
    }
    fn render(p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        let groups = stats::group(rows, |r| (r.message_bytes, r.transport.clone()), |r| r.mbit_per_s);
        let get = |size: usize, t: &str| groups.iter().find(|g| g.0.0 == size && g.0.1 == t).map(|g| g.1);
        let rate = |size: usize, t: &str| get(size, t).map_or(0.0, |s| s.median);
        let mut sizes: Vec<usize> = rows.iter().map(|r| r.message_bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let table: Vec<Vec<String>> = sizes
            .iter()
            .map(|&size| {
                let shown = |t: &str| get(size, t).map_or("—".to_string(), |s| s.html(1));
                let ratio = |a: f64, b: f64| if b > 0.0 { format!("{:.2}", a / b) } else { "—".into() };
                vec![
                    size.to_string(),
                    shown("xtp"),
                    shown("tcp"),
                    shown("quic"),
                    shown("iperf3"),
                    ratio(rate(size, "xtp"), rate(size, "tcp")),
                    ratio(rate(size, "xtp"), rate(size, "quic")),
                ]
            })
            .collect();
        page.table(
            &format!("Measured here on loopback, Mbit/s: XTP messages (each ending with EOM), kernel TCP writes of the same size (Nagle off) and QUIC (quinn) stream writes of the same size, the client in the lab's process, the server `xpress serve` in its own; each run moves {} bytes or {MAX_MESSAGES} messages, whichever is less", p.bytes),
            &["message bytes", "XTP", "kernel TCP", "QUIC (quinn)", "iperf3 (TCP)", "XTP / TCP", "XTP / QUIC"],
            &table,
        );
        let series = |name: &str, t: &str| {
            let pts: Vec<(f64, stats::Spread)> =
                sizes.iter().filter_map(|&s| get(s, t).map(|g| (s as f64, g))).collect();
            Series::spread(name, &pts)
        };
        page.figure(
            plot_series(
                "Goodput vs message size (loopback)",
                ("message size (bytes)", "goodput (Mbit/s)"),
                &[
                    series("XTP", "xtp"),
                    series("kernel TCP", "tcp"),
                    series("QUIC (quinn)", "quic"),
                    series("iperf3", "iperf3"),
                ],
                (true, true),
            ),
            "Goodput against message size on loopback, median of the repetitions (bars: their range).",
        );
        if let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) {
            page.reading(&format!(
                "With {lo}-byte messages XTP moves {:.1} Mbit/s against TCP's {:.1} and QUIC's {:.1}; with {hi}-byte messages {:.1} against {:.1} and {:.1}. QUIC here is quinn in user space like XTP, encrypting every packet (TLS 1.3), with windows raised to 16/32 MiB for loopback; each small write is one async call. Each XTP message is at least one packet with its own EOM (and a status request); TCP, with Nagle off, still coalesces writes into segments when the receiver lags. iperf3 (when installed) runs with its own defaults — Nagle on, its own timing — as an outside check on our TCP numbers, not as the same method.",
                rate(lo, "xtp"),
                rate(lo, "tcp"),
                rate(lo, "quic"),
                rate(hi, "xtp"),
                rate(hi, "tcp"),
                rate(hi, "quic")
            ));
        }
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["Goodput vs message size (loopback; median, range):".to_string()];
        for ((size, t), s, _) in
            stats::group(rows, |r| (r.message_bytes, r.transport.clone()), |r| r.mbit_per_s)
        {
            out.push(format!("  {size:>6} B {t}: {} Mbit/s", s.text(1)));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} B {}", r.message_bytes, r.transport), r.mbit_per_s, "Mbit/s"))
    }
}
