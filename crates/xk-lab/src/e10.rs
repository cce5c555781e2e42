//! E10 (issue #16; seed 003 §2.3.3, seed 000 §4.1.4): the framework's
//! compile-time variants against each other — message form (`Contig` /
//! `Rope`) × XTP's timer queue (heap / delta list / timing wheel), plus the
//! deliberately copying `Limit<L>` form (seed 000's Estelle "Limit": each
//! crossing between layers copies whole records of `L` bytes, see
//! `xk_msg::Limit`) — on E1's ping-pong (10 / 1,000 / 10,000 bytes) and on
//! a bulk transfer, in the deterministic simulator and over real UDP on
//! loopback.
//!
//! Every variant is its own instance of the same code (`XtpProtocol<M,
//! Q>`), composed one of two ways from a graph description: in a run-time
//! `Graph<M>` (`compose dynamic`, `XtpStack::from_desc`; the form × timer
//! × Limit variants) or as the compiled stack `xk_core::compiled::Stack`
//! (`compose compiled`, what `compose auto` picks for `app -> xtp ->
//! <device>` and `xpress --graph` runs; the rows `compiled contig/heap` and
//! `compiled rope/heap`). Nothing is switched at run time. The runners are
//! generic over the composition ([`Compose`]: the simulator's node and the
//! UDP driver take any `DeviceStack`), so both run the same harness. The
//! compiled stack against the direct endpoint path is measured by
//! `xtp-proto`'s `layer` benchmark (docs/PERF.md, "XTP in the framework").
//!
//! The demux map's one-entry cache (`XtpProtocol`'s `CACHE`) is not a
//! dimension here: after the key exchange every packet of the one context
//! carries the return key and `Endpoint::lookup` resolves it by slot index
//! without consulting the by-peer map, so in the timed rounds cache on and
//! off run the same code and their ratio would be 1 by construction. E5
//! measures the demux with the cache hit, missed and off. Every variant
//! here has the cache on (the default).
//!
//! What is measured, per variant and round (rounds interleave the
//! variants, so a disturbance of the machine hits them alike; each figure
//! is the median over rounds):
//!
//! * **sim** (`app -> xtp -> link` on both sides, `xk-sim` with a perfect
//!   link): virtual time says nothing of speed, so the lab reads the
//!   thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`) and the wall clock
//!   around the simulation run; both nodes and the simulator run on this
//!   one thread, so the CPU time is the whole host cost of an operation.
//! * **udp** (`app -> xtp -> udp`, `xk_driver::graph_udp`, client on the
//!   lab's thread, server on a thread of its own, 127.0.0.1): the wall
//!   time of an operation and the CPU time per operation of the measured
//!   variant's two threads only: the client thread's
//!   `CLOCK_THREAD_CPUTIME_ID` plus the server thread's run time
//!   (`/proc/self/task/<tid>/schedstat`, the same scheduler figure as that
//!   thread's CPU clock, read from the client thread because a thread's
//!   clock can only be read from another one through `unsafe` FFI), user
//!   and kernel time both. Not counted: the other variants' idle servers
//!   and any other thread of the process (xk-driver's reaper, for one),
//!   nor work the server does after the client has its last reply (its
//!   acknowledgement of that reply: the same for every variant). Both
//!   threads are pinned to one CPU for the step (see [`Pinned`] for why).
//!
//! An operation is one round trip (ping-pong: the server echoes) or one
//! bulk transfer (`bulk_bytes` in messages of `bulk_message` bytes; the
//! server answers one byte when it has them all). `relative` is the CPU
//! time per operation over that of the step's fastest variant. Copies are
//! `xk_msg`'s own counters (payload bytes copied by message operations):
//! both sides in the simulator, the client's side over UDP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant as Clock;

use nix::time::{ClockId, clock_gettime};
use xk_core::compiled::Stack;
use xk_core::device::{DeviceStack, GraphOn};
use xk_core::{Addr, ArenaId, Event, Graph, Part, Participants, SessionId};
use xk_driver::graph_udp::GraphUdp;
use xk_msg::{Bytes, Contig, Limit, Msg, Rope, copy_stats};
use xk_netemu::LinkParams;
use xk_sim::{NodeId, Sim};
use xk_time::{DeltaList, Duration, HeapQueue, TimerQueue, TimingWheel};
use xtp_proto::stack::{Composed, XtpStack};
use xtp_proto::{ContextConfig, EndpointConfig, XtpProtocol};
use xtp_testkit::{GraphApp, GraphHost};

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::svg::heatmap;

/// The XTP port the server listens on.
const PORT: u16 = 7;

/// One measured variant at one point.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// `sim` or `udp`.
    pub net: String,
    /// `pingpong` or `bulk`.
    pub workload: String,
    /// Message bytes (ping-pong) or bytes per transfer (bulk).
    pub size: usize,
    /// The variant, `form/timers`, prefixed `compiled ` for the compiled
    /// stack.
    pub variant: String,
    /// `graph` (the run-time graph) or `compiled` (`xk_core::compiled::Stack`).
    #[serde(default = "graph")]
    pub compose: String,
    /// `contig`, `rope` or `limit`.
    pub form: String,
    /// `heap`, `delta` or `wheel`.
    pub timers: String,
    /// The record size of the `limit` form (0 for the others).
    pub limit: usize,
    /// Operations per round.
    pub ops: usize,
    /// Rounds.
    pub rounds: usize,
    /// Host CPU time per operation, ns (median over rounds): the lab
    /// thread's in the simulator, the variant's client and server threads'
    /// over UDP.
    pub cpu_ns: f64,
    /// The smallest and largest round's CPU time per operation, ns.
    pub cpu_ns_min: f64,
    /// See `cpu_ns_min`.
    pub cpu_ns_max: f64,
    /// Wall time per operation, ns (median over rounds).
    pub wall_ns: f64,
    /// `cpu_ns` over the step's fastest variant's.
    pub relative: f64,
    /// Payload bytes copied by message operations per operation: both
    /// nodes in the simulator, the client's side only over UDP (the
    /// counters are per thread).
    pub copied_bytes: f64,
}

/// E10's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Where: `sim`, `udp`.
    pub nets: Vec<String>,
    /// Ping-pong message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Whether to run the bulk transfer.
    pub bulk: bool,
    /// Bytes per bulk transfer.
    pub bulk_bytes: usize,
    /// Bytes per message of the bulk transfer.
    pub bulk_message: usize,
    /// Record sizes of the copying `limit` form (10, 1,000, 10,000); a
    /// limit runs where the messages fit it.
    pub limits: Vec<usize>,
    /// Rounds per point (the variants interleaved in each).
    pub rounds: usize,
    /// Round trips per round in the simulator.
    pub sim_round_trips: usize,
    /// Round trips per round over UDP.
    pub udp_round_trips: usize,
    /// Bulk transfers per round.
    pub bulk_transfers: usize,
}

fn graph() -> String {
    "graph".into()
}

/// One step: where and what.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    /// `sim` or `udp`.
    pub net: String,
    /// `pingpong` or `bulk`.
    pub workload: String,
    /// Message bytes (ping-pong) or bytes per transfer (bulk).
    pub size: usize,
}

/// What the two applications do.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// The client sends `size` bytes, the server echoes them.
    PingPong { size: usize },
    /// The client sends `total` bytes in messages of `message`; the server
    /// answers one byte when it has them all.
    Bulk { total: usize, message: usize },
}

/// The application on either side (the same in the simulator and on UDP).
struct Peer {
    server: bool,
    work: Work,
    payload: Bytes,
    session: Option<SessionId>,
    /// Bytes received towards the current operation.
    got: usize,
    /// Round trips still to start (client, ping-pong).
    left: usize,
    done: bool,
    failed: Option<String>,
}

impl Peer {
    fn new(server: bool, work: Work) -> Self {
        let n = match work {
            Work::PingPong { size } => size,
            Work::Bulk { message, .. } => message,
        };
        let payload = Bytes::from((0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        Peer { server, work, payload, session: None, got: 0, left: 0, done: false, failed: None }
    }

    fn push<M: Msg>(&mut self, g: &mut impl DeviceStack<M>, session: SessionId, msg: M) {
        if let Err(e) = g.push(session, msg) {
            self.failed.get_or_insert_with(|| format!("push refused: {e}"));
        }
    }

    /// The client starts `ops` operations (run one after the other).
    fn start<M: Msg>(&mut self, g: &mut impl DeviceStack<M>, ops: usize) {
        let Some(session) = self.session else {
            self.failed = Some("no session".into());
            return;
        };
        (self.left, self.got, self.done) = (ops, 0, false);
        self.next(g, session);
    }

    fn next<M: Msg>(&mut self, g: &mut impl DeviceStack<M>, session: SessionId) {
        if self.left == 0 {
            self.done = true;
            return;
        }
        self.left -= 1;
        match self.work {
            Work::PingPong { .. } => self.push(g, session, M::from_shared(self.payload.clone())),
            Work::Bulk { total, message } => {
                for _ in 0..total.div_ceil(message) {
                    self.push(g, session, M::from_shared(self.payload.clone()));
                }
            }
        }
    }
}

impl<M: Msg, S: DeviceStack<M>> GraphApp<M, S> for Peer {
    fn poll(&mut self, g: &mut S) {
        while let Some(ev) = g.poll_event() {
            let Event::Deliver { session, msg, .. } = ev else { continue };
            self.got += msg.len();
            match (self.server, self.work) {
                (true, Work::PingPong { .. }) => {
                    self.got = 0;
                    self.push(g, session, msg);
                }
                (true, Work::Bulk { total, message }) => {
                    if self.got >= total.div_ceil(message) * message {
                        self.got = 0;
                        self.push(g, session, M::from_shared(Bytes::from_static(b"!")));
                    }
                }
                (false, Work::PingPong { size }) => {
                    if self.got >= size {
                        self.got -= size;
                        self.next(g, session);
                    }
                }
                (false, Work::Bulk { .. }) => {
                    self.got = 0;
                    self.next(g, session);
                }
            }
        }
    }
}

/// One round's figures, per operation.
struct Sample {
    cpu_ns: f64,
    wall_ns: f64,
    copied: f64,
}

/// A variant set up at one point, run round by round.
trait Runner {
    /// Runs `ops` operations and times them.
    fn round(&mut self, ops: usize) -> Result<Sample, String>;
}

/// The calling thread's CPU time, ns.
fn thread_ns() -> Result<f64, String> {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64)
        .map_err(|e| format!("CLOCK_THREAD_CPUTIME_ID: {e}"))
}

/// Thread `tid`'s run time so far, ns: the first field of its
/// `schedstat` (the scheduler's `sum_exec_runtime`, what the thread's own
/// `CLOCK_THREAD_CPUTIME_ID` reads, user and kernel time).
fn task_ns(tid: i32) -> Result<f64, String> {
    let path = format!("/proc/self/task/{tid}/schedstat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|v| v as f64)
        .ok_or_else(|| format!("{path}: no run time in {text:?}"))
}

/// Times `f` running `ops` operations, `cpu(start)` reading the CPU time
/// counted (`start`: before `f`).
fn timed(
    cpu: impl Fn(bool) -> Result<f64, String>,
    ops: usize,
    f: impl FnOnce() -> Result<(), String>,
) -> Result<Sample, String> {
    let (c0, w0, k0) = (cpu(true)?, Clock::now(), copy_stats().bytes);
    f()?;
    let (c1, wall, k1) = (cpu(false)?, w0.elapsed(), copy_stats().bytes);
    let n = ops.max(1) as f64;
    Ok(Sample { wall_ns: wall.as_nanos() as f64 / n, cpu_ns: (c1 - c0) / n, copied: (k1 - k0) as f64 / n })
}

/// How a variant is composed: the composition type it builds and how.
/// The runners below are generic over it, so the graph's variants and the
/// compiled stack's run the same simulator and socket code.
trait Compose<M: Msg>: 'static {
    /// `graph` or `compiled` (the row's `compose`).
    const NAME: &'static str;
    /// The application's view of the stack.
    type S: DeviceStack<M> + 'static;
    /// `app -> xtp -> {device}`, its demux cache on (see the module's docs).
    fn build(device: &str, seed: u64) -> Result<Self::S, String>;
}

/// The run-time graph (`compose dynamic`), XTP's timers in a `Q`.
struct ByGraph<Q>(std::marker::PhantomData<Q>);

impl<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static> Compose<M> for ByGraph<Q> {
    const NAME: &'static str = "graph";
    type S = GraphOn<Graph<M>>;
    fn build(device: &str, seed: u64) -> Result<Self::S, String> {
        let s = XtpStack::<M>::from_desc::<Q, true>(
            &format!("compose dynamic\napp -> xtp -> {device}"),
            EndpointConfig::default(),
            ContextConfig::stream(),
            seed,
        )
        .map_err(|e| e.to_string())?;
        Ok(s.on_device())
    }
}

/// The compiled stack (`compose compiled`, what `compose auto` picks for
/// this shape), XTP's timers in a `Q`.
struct ByStack<Q>(std::marker::PhantomData<Q>);

impl<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static> Compose<M> for ByStack<Q> {
    const NAME: &'static str = "compiled";
    type S = Stack<M, XtpProtocol<M, Q, true>>;
    fn build(device: &str, seed: u64) -> Result<Self::S, String> {
        let (c, _) = XtpStack::<M>::compose::<Q, true>(
            &format!("compose compiled\napp -> xtp -> {device}"),
            EndpointConfig::default(),
            ContextConfig::stream(),
            seed,
        )
        .map_err(|e| e.to_string())?;
        match c {
            Composed::Compiled(s) => Ok(s),
            Composed::Graph(_) => Err("`compose compiled` built a graph".into()),
        }
    }
}

fn listen<M: Msg>(s: &mut impl DeviceStack<M>) -> Result<(), String> {
    s.open_enable(&Participants::local(Part::top_first([Addr::Port(PORT)]))).map_err(|e| e.to_string())
}

fn open<M: Msg>(s: &mut impl DeviceStack<M>, to: SocketAddr) -> Result<SessionId, String> {
    let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(PORT), Addr::Inet(to)]));
    s.open(&parts).map_err(|e| e.to_string())
}

/// Both sides in `xk-sim` on this thread.
struct SimRun<M: Msg, S: DeviceStack<M>> {
    sim: Sim<GraphHost<M, S, Peer>>,
    client: NodeId,
}

fn sim_runner<M: Msg + 'static, C: Compose<M>>(
    work: Work,
    seed: u64,
    _cpu: Option<usize>,
) -> Result<Box<dyn Runner>, String> {
    let (mut c, mut s) = (C::build("link", 1)?, C::build("link", 2)?);
    listen(&mut s)?;
    let mut sim = Sim::new(seed);
    let (sid, saddr) = sim.add_node(GraphHost::new(s, Peer::new(true, work)));
    let session = open(&mut c, saddr)?;
    let mut client = Peer::new(false, work);
    client.session = Some(session);
    let (cid, _) = sim.add_node(GraphHost::new(c, client));
    sim.connect(cid, sid, LinkParams::default(), LinkParams::default()).map_err(|e| e.to_string())?;
    let mut r = SimRun { sim, client: cid };
    r.round(1)?; // the handshake, untimed
    Ok(Box::new(r))
}

impl<M: Msg, S: DeviceStack<M>> Runner for SimRun<M, S> {
    fn round(&mut self, ops: usize) -> Result<Sample, String> {
        let (sim, cid) = (&mut self.sim, self.client);
        timed(
            |_| thread_ns(),
            ops,
            || {
                let h = sim.node_mut(cid);
                h.app.start(&mut h.stack, ops);
                let end = sim.now() + Duration::from_secs(3600);
                sim.run_until(end, u64::MAX, |s| s.node(cid).app.done || s.node(cid).app.failed.is_some())
                    .map_err(|e| e.to_string())?;
                let app = &sim.node(cid).app;
                match (&app.failed, app.done) {
                    (Some(f), _) => Err(f.clone()),
                    (None, true) => Ok(()),
                    (None, false) => Err("the simulation went idle before the operations ended".into()),
                }
            },
        )
    }
}

/// The client on this thread, the server on its own, both on UDP sockets.
struct UdpRun<M: Msg, S: DeviceStack<M>> {
    dev: GraphUdp,
    client: S,
    _msg: std::marker::PhantomData<M>,
    app: Peer,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<Result<(), String>>>,
    /// The server thread's id, for its run time.
    server_tid: i32,
}

/// Longest wait for one round over UDP (loopback: a lost datagram is
/// retransmitted within milliseconds).
const UDP_ROUND_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

fn udp_server<M: Msg + 'static, C: Compose<M>>(
    work: Work,
    stop: Arc<AtomicBool>,
    cpu: Option<usize>,
    ready: std::sync::mpsc::Sender<Result<(SocketAddr, i32), String>>,
) -> Result<(), String> {
    pin(cpu);
    let setup = || -> Result<(C::S, GraphUdp), String> {
        let mut s = C::build("udp", 2)?;
        let dev = GraphUdp::bind("127.0.0.1:0".parse().expect("literal")).map_err(|e| e.to_string())?;
        s.advance(dev.now());
        listen(&mut s)?;
        Ok((s, dev))
    };
    let (mut s, mut dev) = match setup() {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let tid = nix::unistd::gettid().as_raw();
    let _ = ready.send(dev.local_addr().map(|a| (a, tid)).map_err(|e| e.to_string()));
    let mut app = Peer::new(true, work);
    // Bounded: the lab stops it; an hour is the backstop.
    let end = dev.now() + Duration::from_secs(3600);
    while !stop.load(Ordering::Relaxed) && dev.now() < end {
        let until = dev.now() + Duration::from_millis(50);
        dev.run_until(&mut s, until, |g| {
            app.poll(g);
            stop.load(Ordering::Relaxed)
        })
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn udp_runner<M: Msg + 'static, C: Compose<M>>(
    work: Work,
    _seed: u64,
    cpu: Option<usize>,
) -> Result<Box<dyn Runner>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let st = stop.clone();
    let server = std::thread::Builder::new()
        .name("e10-server".into())
        .spawn(move || udp_server::<M, C>(work, st, cpu, tx))
        .map_err(|e| e.to_string())?;
    let mut r = UdpRun {
        dev: GraphUdp::bind("127.0.0.1:0".parse().expect("literal")).map_err(|e| e.to_string())?,
        client: C::build("udp", 1)?,
        _msg: std::marker::PhantomData,
        app: Peer::new(false, work),
        stop,
        server: Some(server),
        server_tid: 0,
    };
    let (to, tid) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .map_err(|_| "E10: the UDP server did not start".to_string())??;
    r.server_tid = tid;
    r.client.advance(r.dev.now());
    r.app.session = Some(open(&mut r.client, to)?);
    r.round(1)?; // the handshake, untimed
    Ok(Box::new(r))
}

impl<M: Msg, S: DeviceStack<M>> Runner for UdpRun<M, S> {
    fn round(&mut self, ops: usize) -> Result<Sample, String> {
        let UdpRun { dev, client, app, server_tid, .. } = self;
        let tid = *server_tid;
        // This variant's two threads only (module docs). The server's file
        // is read before the client's clock at the start and after it at
        // the end, so the reads stay outside the client's interval.
        let cpu = move |start: bool| {
            Ok(if start {
                let server = task_ns(tid)?;
                server + thread_ns()?
            } else {
                let client = thread_ns()?;
                client + task_ns(tid)?
            })
        };
        timed(cpu, ops, || {
            client.advance(dev.now());
            app.start(client, ops);
            let limit = Duration::from_nanos(UDP_ROUND_LIMIT.as_nanos() as u64);
            let end = dev.now() + limit;
            dev.run_until(client, end, |g| {
                app.poll(g);
                app.done || app.failed.is_some()
            })
            .map_err(|e| format!("socket: {e}"))?;
            match (&app.failed, app.done) {
                (Some(f), _) => Err(f.clone()),
                (None, true) => Ok(()),
                (None, false) => Err(format!("E10: a UDP round did not end within {UDP_ROUND_LIMIT:?}")),
            }
        })
    }
}

impl<M: Msg, S: DeviceStack<M>> Drop for UdpRun<M, S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}

/// Pins the calling thread to `cpu`; `None` leaves it alone.
fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        // Best effort: an unpinned run measures the same, noisier. The
        // server threads end with the step, so nothing is restored.
        let _ = crate::affinity::pin_self(c);
    }
}

/// The lab thread pinned to the CPU it runs on for the UDP rows (the
/// servers join it there), its former affinity restored when dropped.
///
/// Why: unpinned, whether the scheduler put a variant's server thread on
/// the client's CPU or on the other one decided its round trip (about
/// 25 against 45 µs of CPU time on this 2-core machine), and the placement
/// stuck to the variant for the whole step, so the variants' ratios
/// measured the placement. On one CPU every variant pays the same two
/// context switches per round trip.
struct Pinned {
    cpu: Option<usize>,
    /// Restores the lab thread's mask when dropped.
    _guard: crate::affinity::Affinity,
}

impl Pinned {
    fn here() -> Self {
        let mut guard = crate::affinity::Affinity::default();
        let cpu = nix::sched::sched_getcpu().ok().filter(|&c| guard.pin(0, c).is_ok());
        Pinned { cpu, _guard: guard }
    }
}

type Make = fn(Work, u64, Option<usize>) -> Result<Box<dyn Runner>, String>;

/// One variant: its names and its two instantiations.
struct Variant {
    /// `graph` or `compiled`.
    compose: &'static str,
    form: &'static str,
    timers: &'static str,
    limit: usize,
    sim: Make,
    udp: Make,
}

impl Variant {
    fn name(&self) -> String {
        let form = if self.limit > 0 { format!("limit{}", self.limit) } else { self.form.to_string() };
        let compiled = if self.compose == "compiled" { "compiled " } else { "" };
        format!("{compiled}{form}/{}", self.timers)
    }
}

/// Every variant, each a separate instance of the generic code.
fn variants() -> Vec<Variant> {
    macro_rules! v {
        ($by:ident, $form:literal, $m:ty, $timers:literal, $q:ty, $limit:expr) => {
            Variant {
                compose: <$by<$q> as Compose<$m>>::NAME,
                form: $form,
                timers: $timers,
                limit: $limit,
                sim: sim_runner::<$m, $by<$q>>,
                udp: udp_runner::<$m, $by<$q>>,
            }
        };
        ($form:literal, $m:ty, $timers:literal, $q:ty, $limit:expr) => {
            v!(ByGraph, $form, $m, $timers, $q, $limit)
        };
    }
    type H = HeapQueue<ArenaId>;
    type D = DeltaList<ArenaId>;
    type W = TimingWheel<ArenaId>;
    vec![
        v!("contig", Contig, "heap", H, 0),
        v!("contig", Contig, "delta", D, 0),
        v!("contig", Contig, "wheel", W, 0),
        v!("rope", Rope, "heap", H, 0),
        v!("rope", Rope, "delta", D, 0),
        v!("rope", Rope, "wheel", W, 0),
        v!("limit", Limit<10>, "heap", H, 10),
        v!("limit", Limit<1_000>, "heap", H, 1_000),
        v!("limit", Limit<10_000>, "heap", H, 10_000),
        // The compiled stack beside the graph, in both forms (the timer
        // queue is the graph's choice that matters least: see the reading).
        v!(ByStack, "contig", Contig, "heap", H, 0),
        v!(ByStack, "rope", Rope, "heap", H, 0),
    ]
}

/// The record sizes the `limit` form is compiled for.
const LIMITS: [usize; 3] = [10, 1_000, 10_000];

/// E10: the framework's variants.
pub struct E10(Params);

impl E10 {
    fn work(&self, p: &Point) -> Work {
        match p.workload.as_str() {
            "bulk" => Work::Bulk { total: self.0.bulk_bytes, message: self.0.bulk_message },
            _ => Work::PingPong { size: p.size },
        }
    }

    /// Whether variant `v` runs at point `p`: a limit only where the
    /// messages fit its record (as the seed's table has no entries above
    /// the limit).
    fn applies(&self, v: &Variant, p: &Point) -> bool {
        let msg = if p.workload == "bulk" { self.0.bulk_message } else { p.size };
        v.limit == 0 || (self.0.limits.contains(&v.limit) && msg <= v.limit)
    }
}

impl Experiment for E10 {
    const ID: &'static str = "E10";
    const TITLE: &'static str = "The framework's compile-time variants: message form × timer queue, and the copying Limit (seeds 003, 000)";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            nets: vec!["sim".into(), "udp".into()],
            sizes: vec![10, 1_000, 10_000],
            bulk: true,
            bulk_bytes: if quick { 200_000 } else { 1_000_000 },
            bulk_message: 10_000,
            limits: LIMITS.to_vec(),
            rounds: if quick { 2 } else { 7 },
            sim_round_trips: if quick { 100 } else { 1_500 },
            udp_round_trips: if quick { 20 } else { 200 },
            bulk_transfers: 1,
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.nets.is_empty() || p.nets.iter().any(|n| n != "sim" && n != "udp") {
            return Err(format!("nets: {:?}: each `sim` or `udp`, at least one", p.nets));
        }
        if p.sizes.iter().any(|&s| s == 0 || s > 1_000_000) {
            return Err(format!("sizes: {:?}: 1 to 1,000,000 bytes each", p.sizes));
        }
        if p.sizes.is_empty() && !p.bulk {
            return Err("sizes: empty and bulk = false: nothing to measure".into());
        }
        // The client pushes a whole transfer at once, so it must fit XTP's
        // send buffer beside the previous transfer's possibly still
        // unacknowledged tail: half the buffer (a 10 MB transfer was refused
        // with WouldBlock).
        let most = ContextConfig::stream().send_buffer / 2;
        if p.bulk && (p.bulk_message == 0 || p.bulk_message > p.bulk_bytes || p.bulk_bytes > most) {
            return Err(format!(
                "bulk_message {} / bulk_bytes {}: 1 ≤ message ≤ bytes ≤ {most} (half XTP's send buffer: a transfer is written at once)",
                p.bulk_message, p.bulk_bytes
            ));
        }
        if let Some(l) = p.limits.iter().find(|l| !LIMITS.contains(l)) {
            return Err(format!("limits: {l}: the limit form is compiled for {LIMITS:?} only"));
        }
        if !(1..=100).contains(&p.rounds) {
            return Err(format!("rounds: {}: 1 to 100", p.rounds));
        }
        for (name, v) in [
            ("sim_round_trips", p.sim_round_trips),
            ("udp_round_trips", p.udp_round_trips),
            ("bulk_transfers", p.bulk_transfers),
        ] {
            if !(1..=1_000_000).contains(&v) {
                return Err(format!("{name}: {v}: 1 to 1,000,000"));
            }
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E10(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &Env) -> Vec<Step<Point>> {
        let mut out = Vec::new();
        for net in &self.0.nets {
            let mut points: Vec<(String, usize)> =
                self.0.sizes.iter().map(|&s| ("pingpong".into(), s)).collect();
            if self.0.bulk {
                points.push(("bulk".into(), self.0.bulk_bytes));
            }
            for (workload, size) in points {
                out.push(Step {
                    label: format!("{net} {workload} {size} B"),
                    point: Point { net: net.clone(), workload, size },
                });
            }
        }
        out
    }
    fn run(&mut self, p: &Point, env: &Env) -> Result<Vec<Row>, String> {
        let work = self.work(p);
        let all = variants();
        let chosen: Vec<&Variant> = all.iter().filter(|v| self.applies(v, p)).collect();
        let ops = match (p.net.as_str(), work) {
            (_, Work::Bulk { .. }) => self.0.bulk_transfers,
            ("sim", _) => self.0.sim_round_trips,
            _ => self.0.udp_round_trips,
        };
        // Declared before the runners: dropped (affinity restored) after
        // their server threads have ended.
        let pinned = (p.net == "udp").then(Pinned::here);
        let cpu = pinned.as_ref().and_then(|p| p.cpu);
        let mut runners = Vec::with_capacity(chosen.len());
        for v in &chosen {
            let make = if p.net == "sim" { v.sim } else { v.udp };
            runners.push(make(work, env.seed, cpu).map_err(|e| format!("{}: {e}", v.name()))?);
        }
        let mut samples: Vec<Vec<Sample>> = chosen.iter().map(|_| Vec::new()).collect();
        for round in 0..self.0.rounds {
            if env.stopped() {
                break;
            }
            // Rotate the order each round: no variant always runs first.
            for k in 0..runners.len() {
                let i = (k + round) % runners.len();
                let s = runners[i].round(ops).map_err(|e| format!("{}: {e}", chosen[i].name()))?;
                samples[i].push(s);
            }
        }
        drop(runners);
        drop(pinned);
        let mut rows: Vec<Row> = chosen
            .iter()
            .zip(&samples)
            .filter(|(_, s)| !s.is_empty())
            .map(|(v, s)| {
                let cpu: Vec<f64> = s.iter().map(|x| x.cpu_ns).collect();
                Row {
                    net: p.net.clone(),
                    workload: p.workload.clone(),
                    size: p.size,
                    variant: v.name(),
                    compose: v.compose.into(),
                    form: v.form.into(),
                    timers: v.timers.into(),
                    limit: v.limit,
                    ops,
                    rounds: s.len(),
                    cpu_ns: xk_stats::median(cpu.iter().copied()),
                    cpu_ns_min: cpu.iter().copied().fold(f64::INFINITY, f64::min),
                    cpu_ns_max: cpu.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    wall_ns: xk_stats::median(s.iter().map(|x| x.wall_ns)),
                    relative: f64::NAN,
                    copied_bytes: xk_stats::median(s.iter().map(|x| x.copied)),
                }
            })
            .collect();
        let best = rows.iter().map(|r| r.cpu_ns).fold(f64::INFINITY, f64::min);
        for r in &mut rows {
            r.relative = r.cpu_ns / best;
        }
        Ok(rows)
    }
    fn csv_key() -> &'static [&'static str] {
        &["net", "workload", "size", "variant"]
    }
    fn render(_p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        render(rows, page)
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec!["E10 variants (CPU per op, relative to the step's fastest):".to_string()];
        for (net, workload, size) in points(rows) {
            let at: Vec<&Row> = rows_at(rows, &net, &workload, size);
            let (fast, slow) = fastest_slowest(&at, |r| r.limit == 0);
            let n = at.iter().filter(|r| r.limit == 0).count();
            out.push(format!(
                "  {net} {workload} {size} B: fastest {} {:.2} µs; slowest of the {n} zero-copy {} {:.2}x{}{}",
                fast.map_or("-", |r| r.variant.as_str()),
                fast.map_or(f64::NAN, |r| r.cpu_ns / 1e3),
                slow.map_or("-", |r| r.variant.as_str()),
                slow.map_or(f64::NAN, |r| r.relative),
                compiled_note(&at),
                limit_note(&at),
            ));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} {} {} B {}", r.net, r.workload, r.size, r.variant), r.cpu_ns, "ns CPU/op"))
    }
}

/// The steps' (net, workload, size), in order of appearance.
fn points(rows: &[Row]) -> Vec<(String, String, usize)> {
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for r in rows {
        let k = (r.net.clone(), r.workload.clone(), r.size);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn rows_at<'a>(rows: &'a [Row], net: &str, workload: &str, size: usize) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.net == net && r.workload == workload && r.size == size).collect()
}

fn fastest_slowest<'a>(at: &[&'a Row], keep: impl Fn(&Row) -> bool) -> (Option<&'a Row>, Option<&'a Row>) {
    let mut v: Vec<&Row> = at.iter().copied().filter(|r| keep(r)).collect();
    v.sort_by(|a, b| a.cpu_ns.total_cmp(&b.cpu_ns));
    (v.first().copied(), v.last().copied())
}

/// The `limit` rows against the zero-copy `contig/heap` row.
/// A row's spread between its rounds, (max - min) / median.
fn round_spread(r: &Row) -> f64 {
    if r.cpu_ns > 0.0 { (r.cpu_ns_max - r.cpu_ns_min) / r.cpu_ns } else { f64::NAN }
}

fn limit_note(at: &[&Row]) -> String {
    let Some(base) = at
        .iter()
        .find(|r| r.compose != "compiled" && r.limit == 0 && r.form == "contig" && r.timers == "heap")
    else {
        return String::new();
    };
    let parts: Vec<String> = at
        .iter()
        .filter(|r| r.limit > 0)
        .map(|r| {
            let ratio = r.cpu_ns / base.cpu_ns;
            let noise = round_spread(r).max(round_spread(base));
            let flag = match (ratio < 1.0, (ratio - 1.0).abs() < noise) {
                (true, true) => {
                    format!(" (faster than zero-copy, within the rounds' spread of {:.0} %)", 100.0 * noise)
                }
                (true, false) => " (faster than zero-copy: not the seed's effect)".to_string(),
                (false, true) => format!(" (within the rounds' spread of {:.0} %)", 100.0 * noise),
                (false, false) => String::new(),
            };
            format!("limit {}: {ratio:.2}x{flag}", r.limit)
        })
        .collect();
    if parts.is_empty() { String::new() } else { format!("; vs contig/heap {}", parts.join(", ")) }
}

/// Seed 000, Table 3: end-to-end processing time with integrated clients
/// (link delay removed), ms, by implementation, Limit and payload (10 /
/// 1,000 / 10,000 B); `None` where the payload exceeds the limit.
const SEED000: [(&str, &str, [Option<f64>; 3]); 7] = [
    ("SandiaXTP", "—", [Some(0.80), Some(1.52), Some(2.68)]),
    ("EC", "10", [Some(3.06), None, None]),
    ("EC", "1,000", [Some(3.66), Some(6.74), None]),
    ("EC", "10,000", [Some(10.2), Some(13.3), Some(37.6)]),
    ("PET/DINGO", "10", [Some(33.9), None, None]),
    ("PET/DINGO", "1,000", [Some(36.4), Some(39.4), None]),
    ("PET/DINGO", "10,000", [Some(81.7), Some(84.7), Some(108.3)]),
];

fn render(rows: &[Row], page: &mut Page) {
    for (net, workload, size) in points(rows) {
        let mut at = rows_at(rows, &net, &workload, size);
        at.sort_by(|a, b| a.cpu_ns.total_cmp(&b.cpu_ns));
        let table: Vec<Vec<String>> = at
            .iter()
            .map(|r| {
                vec![
                    r.variant.clone(),
                    format!("{:.2}", r.cpu_ns / 1e3),
                    format!("{:.2}–{:.2}", r.cpu_ns_min / 1e3, r.cpu_ns_max / 1e3),
                    format!("{:.2}", r.wall_ns / 1e3),
                    format!("{:.2}", r.relative),
                    format!("{:.0}", r.copied_bytes),
                ]
            })
            .collect();
        let (what, clock, copied) = if net == "sim" {
            (
                "in the simulator",
                "CPU time of the lab thread, which runs both nodes and the simulator",
                "both nodes",
            )
        } else {
            (
                "over UDP on loopback",
                "CPU time of this variant's client thread and server thread, user and kernel, on one pinned CPU; other threads not counted",
                "the client's side only",
            )
        };
        let op = if workload == "bulk" { "transfer" } else { "round trip" };
        page.table(
            &format!(
                "Measured here, {what}: {workload} {size} B — µs per {op} ({clock}; median of {} rounds of {} operations, variants interleaved), relative to the fastest; bytes copied by message operations, {copied}",
                at.first().map_or(0, |r| r.rounds),
                at.first().map_or(0, |r| r.ops)
            ),
            &["variant ([compiled] form/timers)", "CPU µs/op", "CPU range", "wall µs/op", "relative", "bytes copied/op"],
            &table,
        );
    }
    let pts = points(rows);
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.variant) {
            names.push(r.variant.clone());
        }
    }
    let cells: Vec<Vec<Option<f64>>> = names
        .iter()
        .map(|v| {
            pts.iter()
                .map(|(n, w, z)| {
                    rows_at(rows, n, w, *z).into_iter().find(|r| &r.variant == v).map(|r| 1.0 / r.relative)
                })
                .collect()
        })
        .collect();
    let cols: Vec<String> = pts.iter().map(|(n, w, z)| format!("{n} {w} {z}")).collect();
    page.figure(
        heatmap("E10: speed relative to the fastest variant (fastest = 1; CPU time per operation)", ("point", "variant"), &names, &cols, &cells),
        "E10: each variant's speed relative to the step's fastest (1/relative), per point; grey where a Limit does not fit the messages.",
    );
    let seed: Vec<Vec<String>> = SEED000
        .iter()
        .map(|(imp, limit, t)| {
            let mut v = vec![imp.to_string(), limit.to_string()];
            v.extend(t.iter().map(|x| x.map_or("—".into(), |ms| format!("{ms} ms ({:.1})", ms / 0.80))));
            v
        })
        .collect();
    page.table(
        "Seed 000 (Thees & Gotzhein 1997), Table 3 — their numbers: end-to-end processing time with integrated clients, 0.9 ms link delay removed, relative to SandiaXTP at 10 B",
        &["implementation", "Limit (B)", "10 B", "1,000 B", "10,000 B"],
        &seed,
    );
    page.note("Seed 003 (Li 2003), §2.3.3: PIX's feature diagram generates its protocols at compile time from C++ templates — Message: SingleBuffer | BufferTree (here Contig | Rope), EventManager: simple | delta list | timing wheel (here HeapQueue | DeltaList | TimingWheel), with active and passive open, 48 variations in all; the Map's one-entry cache is §5.1's (here the demux map's CACHE, measured by E5, not here: see the reading). The seed lists the variants and reports no timing of one against another; its measured numbers are E5's (demux) and the FTP tables.");
    page.reading(&reading(rows));
}

/// The median over matching groups of `f(group)`: each group holds the
/// zero-copy graph rows of one point that differ only in the one choice
/// left free (the compiled rows are compared apart, [`compiled_note`]).
fn effect(rows: &[Row], key: impl Fn(&Row) -> String, f: impl Fn(&[&Row]) -> Option<f64>) -> f64 {
    let zero: Vec<&Row> = rows.iter().filter(|r| r.limit == 0 && r.compose != "compiled").collect();
    let mut keys: Vec<String> = zero.iter().map(|r| key(r)).collect();
    keys.sort();
    keys.dedup();
    let v: Vec<f64> = keys
        .iter()
        .filter_map(|k| {
            let g: Vec<&Row> = zero.iter().copied().filter(|r| &key(r) == k).collect();
            f(&g)
        })
        .collect();
    if v.is_empty() { f64::NAN } else { xk_stats::median(v) }
}

/// The compiled stack against the graph at one point, per form (heap
/// timers both): CPU time compiled / graph.
fn compiled_note(at: &[&Row]) -> String {
    let parts: Vec<String> = ["contig", "rope"]
        .iter()
        .filter_map(|form| {
            let find = |c: &str| {
                at.iter().find(|r| r.compose == c && r.limit == 0 && r.form == *form && r.timers == "heap")
            };
            let (g, c) = (find("graph")?, find("compiled")?);
            Some(format!("{form} {:.2}x", c.cpu_ns / g.cpu_ns))
        })
        .collect();
    if parts.is_empty() { String::new() } else { format!("; compiled / graph {}", parts.join(", ")) }
}

fn reading(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    for (net, workload, size) in points(rows) {
        let at = rows_at(rows, &net, &workload, size);
        // The span is the graph's variants' (the choices of form and
        // timers); the compiled stack is another composition, given apart.
        let (fast, slow) = fastest_slowest(&at, |r| r.limit == 0 && r.compose == "graph");
        if let (Some(f), Some(s)) = (fast, slow) {
            // The span is an effect only if it exceeds the two rows' own
            // round-to-round spread.
            let noise = round_spread(f).max(round_spread(s));
            let flag = if s.cpu_ns / f.cpu_ns - 1.0 < noise {
                format!(", within the rounds' spread of {:.0} %: not resolved", 100.0 * noise)
            } else {
                String::new()
            };
            parts.push(format!(
                "{net} {workload} {size} B: the graph's zero-copy variants span {:.2}x (fastest {}, slowest {}{flag}){}{}",
                s.cpu_ns / f.cpu_ns,
                f.variant,
                s.variant,
                compiled_note(&at),
                limit_note(&at)
            ));
        }
    }
    let point = |r: &Row| format!("{} {} {}", r.net, r.workload, r.size);
    let pick = |g: &[&Row], want: fn(&Row) -> bool| g.iter().find(|r| want(r)).map(|r| r.cpu_ns);
    let timers = effect(
        rows,
        |r| format!("{} {}", point(r), r.form),
        |g| {
            let v: Vec<f64> = g.iter().map(|r| r.cpu_ns).collect();
            (v.len() > 1).then(|| {
                v.iter().copied().fold(0.0, f64::max) / v.iter().copied().fold(f64::INFINITY, f64::min)
            })
        },
    );
    let form = effect(
        rows,
        |r| format!("{} {}", point(r), r.timers),
        |g| Some(pick(g, |r| r.form == "rope")? / pick(g, |r| r.form == "contig")?),
    );
    let nets_here: Vec<&str> =
        ["sim", "udp"].into_iter().filter(|n| rows.iter().any(|r| r.net == *n)).collect();
    let words = |net: &str| if net == "sim" { "in the simulator" } else { "over UDP" };
    let spreads: Vec<String> = nets_here
        .iter()
        .map(|&net| {
            let v: Vec<f64> =
                rows.iter().filter(|r| r.net == net).map(round_spread).filter(|v| v.is_finite()).collect();
            let (rounds, ops) = rows.iter().find(|r| r.net == net).map_or((0, 0), |r| (r.rounds, r.ops));
            format!(
                "{} {:.1} % median, {:.0} % at most ({rounds} rounds of {ops} operations)",
                words(net),
                100.0 * xk_stats::median(v.iter().copied()),
                100.0 * v.iter().copied().fold(0.0, f64::max)
            )
        })
        .collect();
    // The graph's zero-copy span per network, median over the points.
    let span = |net: &str| {
        xk_stats::median(points(rows).into_iter().filter(|(n, _, _)| n == net).filter_map(|(n, w, size)| {
            let at = rows_at(rows, &n, &w, size);
            let (f, s) = fastest_slowest(&at, |r| r.limit == 0 && r.compose == "graph");
            Some(s?.cpu_ns / f?.cpu_ns)
        }))
    };
    let spans = match (span("sim"), span("udp")) {
        (a, b) if a.is_finite() && b.is_finite() => format!(
            " The median span of the graph's zero-copy variants is {a:.2}x in the simulator and {b:.2}x over UDP{}.",
            if b < a {
                ": smaller over UDP, where system calls and the wake-ups of two threads add tens of microseconds per round trip"
            } else {
                ": not smaller over UDP in this run, though system calls and thread wake-ups add tens of microseconds per round trip there"
            }
        ),
        _ => String::new(),
    };
    // Whether the Limit rows' cost grows with the limit, beyond their
    // spread, at each point that has two or more of them.
    let (mut grows, mut limit_points, mut not) = (0, 0, Vec::new());
    for (n, w, size) in points(rows) {
        let mut lim: Vec<&Row> = rows_at(rows, &n, &w, size).into_iter().filter(|r| r.limit > 0).collect();
        if lim.len() < 2 {
            continue;
        }
        lim.sort_by_key(|r| r.limit);
        limit_points += 1;
        let up = lim.windows(2).all(|p| p[1].cpu_ns_min > p[0].cpu_ns_max);
        if up {
            grows += 1;
        } else {
            not.push(format!("{n} {w} {size} B"));
        }
    }
    let limit_claim = if limit_points == 0 {
        String::new()
    } else {
        format!(
            " In this run it grows with the limit, every round of the larger limit slower than every round of the smaller, at {grows} of {limit_points} points{}.",
            if not.is_empty() { String::new() } else { format!(" (not at {})", not.join(", ")) }
        )
    };
    // Compiled / graph per network, median over the points (contiguous
    // form, heap timers: the pair every point has).
    let compiled_vs_graph = |net: &str| {
        xk_stats::median(points(rows).into_iter().filter(|(n, _, _)| n == net).filter_map(|(n, w, size)| {
            let at = rows_at(rows, &n, &w, size);
            let find = |c: &str| {
                at.iter().find(|r| r.compose == c && r.limit == 0 && r.form == "contig" && r.timers == "heap")
            };
            Some(find("compiled")?.cpu_ns / find("graph")?.cpu_ns)
        }))
    };
    let nets: Vec<String> = [("sim", "in the simulator"), ("udp", "over UDP")]
        .iter()
        .map(|&(net, words)| (compiled_vs_graph(net), words))
        .filter(|(m, _)| m.is_finite())
        .map(|(m, words)| format!("{m:.2} {words}"))
        .collect();
    let compiled = if nets.is_empty() {
        String::new()
    } else {
        format!(" Compiled / graph in this run, median over the points: {}.", nets.join(", "))
    };
    format!(
        "{}. The compiled rows are `xk_core::compiled::Stack` (the composition `compose auto` picks for `app -> xtp -> <device>`, XTP a type parameter, no dispatcher queue, no dynamic call) beside the run-time graph with the same form and timers. Besides the composition they differ in copies of every packet: the compiled stack's device lends XTP its transmit buffer and XTP writes each packet there (`Layer::flush_into`), while in the graph XTP writes each packet into a scratch buffer and copies it into a frame of its own (the graph's frames carry the device header). In the simulator that is one copy per packet of difference (the node copies every frame into the simulator's buffer either way); over UDP two (the graph's device also copies the frame into its send batch, where the compiled stack's XTP writes into the batch itself). Compiled / graph includes them; the bytes copied per operation count message operations only and show none of them.{compiled} The compiled stack against the direct endpoint path is measured by xtp-proto's `layer` benchmark, not here (docs/PERF.md). Each choice of the graph alone, as the median over the points and the other choice: slowest / fastest timer queue {timers:.3}; rope / contig {form:.3}; against the spread between a variant's rounds, (slowest − fastest round) / median, {} — an effect smaller than its rows' spread is not one this run can see, and the points above say where. A ping-pong or a bulk transfer on one context arms a few timers per packet, so the timer queue is not exercised hard here; the message form decides whether a layer boundary copies. The demux map's one-entry cache is not varied: after the key exchange every packet carries the return key, which XTP resolves by slot index without consulting the map, so in the timed rounds the cache is not consulted at all (E5 measures the demux with the cache hit, missed and off).{spans} The Limit rows model seed 000's effect: a message crossing from the application or the device into XTP is copied twice as a record of the maximum size (once when the message is made, once when XTP takes its bytes), one crossing from XTP to the device or to the application once (when the message is made); bytes copied per operation count them (both nodes in the simulator, the client only over UDP), so the cost should grow with the limit even for 10-byte messages.{limit_claim} The seed's EC took 3.06 ms at Limit 10 and 10.2 ms at Limit 10,000 for the same 10-byte ping-pong (3.3x), and 37.6 ms against SandiaXTP's 2.68 ms at 10,000 bytes (14x).",
        parts.join("; "),
        spreads.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(net: &str, form: &str, limit: usize, cpu: f64, (lo, hi): (f64, f64)) -> Row {
        Row {
            net: net.into(),
            workload: "pingpong".into(),
            size: 10,
            variant: format!("{form}/heap"),
            compose: "graph".into(),
            form: form.into(),
            timers: "heap".into(),
            limit,
            ops: 20,
            rounds: 2,
            cpu_ns: cpu,
            cpu_ns_min: lo,
            cpu_ns_max: hi,
            wall_ns: cpu,
            relative: 1.0,
            copied_bytes: 0.0,
        }
    }

    #[test]
    fn the_reading_says_what_the_rounds_cannot_resolve() {
        let rows = vec![
            // The simulator: a clean 1.5x span, Limit rows growing.
            row("sim", "contig", 0, 100.0, (99.0, 101.0)),
            row("sim", "rope", 0, 150.0, (149.0, 151.0)),
            row("sim", "limit", 10, 200.0, (199.0, 201.0)),
            row("sim", "limit", 1000, 300.0, (299.0, 301.0)),
            // UDP: a 1.86x span inside a 70 % round spread, and a Limit
            // row faster than zero-copy.
            row("udp", "contig", 0, 100.0, (60.0, 130.0)),
            row("udp", "rope", 0, 186.0, (100.0, 300.0)),
            row("udp", "limit", 10, 82.0, (80.0, 84.0)),
            row("udp", "limit", 1000, 90.0, (70.0, 110.0)),
        ];
        let text = reading(&rows);
        assert!(text.contains("udp pingpong 10 B: the graph's zero-copy variants span 1.86x"), "{text}");
        assert!(text.contains("not resolved"), "{text}");
        assert_eq!(text.matches("not resolved").count(), 1, "the simulator's span is resolved: {text}");
        assert!(text.contains("limit 10: 0.82x (faster than zero-copy"), "{text}");
        assert!(text.contains("not smaller over UDP"), "{text}");
        assert!(!text.contains("shrink"), "{text}");
        assert!(text.contains("at 1 of 2 points (not at udp pingpong 10 B)"), "{text}");
        assert!(
            text.contains("over UDP 57.2 % median, 108 % at most (2 rounds of 20 operations)"),
            "per-network spreads: {text}"
        );
    }
}
