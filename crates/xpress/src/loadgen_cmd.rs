//! `xpress loadgen`: the UniLoG-style load generator of `xk-loadgen` —
//! check a model, run it against an adapter, receive it with a sink,
//! measure the system-call floor, merge agents' results.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Subcommand};
use xk_loadgen::adapt::{AdapterSpec, Kind};
use xk_loadgen::sched::{Realtime, Wait};
use xk_loadgen::sink::{Proto, Sink, SinkConfig};
use xk_loadgen::{Model, RunConfig, RunReport};

#[derive(Subcommand)]
pub(crate) enum LoadgenCommand {
    /// Validate a model; print its automata and the expected rate and size.
    Check(CheckArgs),
    /// Run a model against an adapter; summary (or -J JSON) on stdout.
    Run(RunArgs),
    /// Receive a run's traffic and report the receiver's view.
    Sink(SinkArgs),
    /// The raw sendto / sendmmsg / GSO rates on loopback (the floor).
    Floor(FloorArgs),
    /// Combine the -J results of several agents into one.
    Merge(MergeArgs),
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The model file (TOML).
    model: PathBuf,
    /// JSON instead of text.
    #[arg(short = 'J', long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct RunArgs {
    /// The model file (TOML).
    model: PathBuf,
    /// null, null-1, udp, udp-mmsg, udp-gso, tcp, xtp, xtp-stream, xtp-transaction.
    #[arg(long, default_value = "udp")]
    adapter: String,
    /// Where to send (UDP/TCP address; for XTP the peer's UDP address).
    #[arg(long)]
    to: Option<SocketAddr>,
    /// XTP port at the peer.
    #[arg(long, default_value_t = 9)]
    xtp_port: u16,
    /// Model time to run, seconds (requests specified later are not sent).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Most requests.
    #[arg(long, default_value_t = 1_000_000)]
    count: u64,
    /// 1: GAR, SCHED and ADAPT on one thread; 2: GAR on its own thread.
    #[arg(long, default_value_t = 1)]
    threads: u8,
    /// busy, sleep, hybrid or hybrid:MARGIN_US.
    #[arg(long, default_value = "busy")]
    wait: String,
    /// Do not rehearse the release path 2 µs before each request (on by
    /// default; off only to measure what it does to the miss times).
    #[arg(long)]
    no_warm: bool,
    /// Time the run with CLOCK_MONOTONIC instead of the TSC (the TSC is
    /// used where the kernel uses it; this is only to compare the two).
    #[arg(long)]
    os_clock: bool,
    /// SCHED_FIFO for the sending thread (refused with the reason if not permitted).
    #[arg(long)]
    fifo: bool,
    /// Pin the sending thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Pin the GAR thread (--threads 2) to this CPU.
    #[arg(long)]
    gar_cpu: Option<usize>,
    /// Seed of the virtual users' random streams (give each agent its own).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A miss above this many µs counts as late.
    #[arg(long, default_value_t = 1.0)]
    late_us: f64,
    /// Drop requests more than this many µs late when due (counted).
    #[arg(long)]
    drop_late_us: Option<f64>,
    /// Ask the kernel for transmit timestamps (SO_TIMESTAMPING) on UDP.
    #[arg(long)]
    tx_timestamps: bool,
    /// Start at this Unix time (seconds): agents started apart begin together.
    #[arg(long)]
    start_at: Option<f64>,
    /// Allow a target that is not a loopback address.
    #[arg(long)]
    remote: bool,
    /// JSON on stdout, no progress line.
    #[arg(short = 'J', long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct SinkArgs {
    /// Address to listen on (UDP, TCP, or the UDP address of the XTP endpoint).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// udp, tcp, xtp, xtp-stream, xtp-transaction (an adapter's name works).
    #[arg(long, default_value = "udp")]
    proto: String,
    /// XTP port to listen on.
    #[arg(long, default_value_t = 9)]
    xtp_port: u16,
    /// Longest time to listen, seconds.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// End after this many seconds without traffic, once some arrived.
    #[arg(long, default_value_t = 2.0)]
    idle: f64,
    /// End after this many requests (0: no bound).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// JSON on stdout.
    #[arg(short = 'J', long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct FloorArgs {
    /// Datagram payload, bytes.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Seconds per mode.
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// Most datagrams per mode.
    #[arg(long, default_value_t = 50_000_000)]
    count: u64,
    /// JSON on stdout.
    #[arg(short = 'J', long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct MergeArgs {
    /// `xpress loadgen run -J` outputs, one per agent.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

fn secs(s: f64, what: &str) -> Result<Duration, String> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(format!("{what} {s}: seconds above 0, at most a day"))
    }
}

fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _ = ctrlc::set_handler(move || s.store(true, Ordering::Relaxed));
    stop
}

fn rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} M/s", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} k/s", r / 1e3)
    } else {
        format!("{r:.1}/s")
    }
}

pub(crate) fn run(cmd: LoadgenCommand) -> Result<(), String> {
    match cmd {
        LoadgenCommand::Check(a) => check(&a),
        LoadgenCommand::Run(a) => run_model(&a),
        LoadgenCommand::Sink(a) => sink(&a),
        LoadgenCommand::Floor(a) => floor(&a),
        LoadgenCommand::Merge(a) => merge(&a),
    }
}

fn check(a: &CheckArgs) -> Result<(), String> {
    let model = Model::load(&a.model)?;
    let p = xk_loadgen::predict(&model);
    if a.json {
        let v = serde_json::json!({
            "model": model.name,
            "users": model.user_count(),
            "automata": model.automata.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
            "prediction": p.as_ref().ok(),
            "prediction_error": p.as_ref().err(),
        });
        println!("{v}");
        return Ok(());
    }
    println!("model {}: {} virtual user(s)", model.name, model.user_count());
    if !model.description.is_empty() {
        println!("  {}", model.description);
    }
    print!("{}", model.describe());
    match p {
        Ok(p) => {
            let r = if p.rate_per_s.is_finite() {
                rate(p.rate_per_s)
            } else {
                "unbounded (no delay: P_max)".into()
            };
            let load = if p.bytes_per_s.is_finite() {
                format!("{:.2} Mbit/s of payload", p.bytes_per_s * 8e-6)
            } else {
                "as much payload as the adapter takes".to_string()
            };
            println!("expected rate {r}, mean request {:.1} B, {load}", p.mean_size);
            for g in &p.groups {
                let runs = g
                    .requests_per_run
                    .map(|x| format!(", {x:.1} requests before terminate"))
                    .unwrap_or_default();
                let each = if g.rate_per_s.is_finite() { rate(g.rate_per_s) } else { "unbounded".into() };
                println!("  {} × {}: {each} each{runs}", g.count, g.automaton);
            }
            if let Some(n) = p.note {
                println!("note: {n}");
            }
        }
        Err(e) => println!("no analytic rate: {e}"),
    }
    Ok(())
}

fn run_model(a: &RunArgs) -> Result<(), String> {
    let model = Model::load(&a.model)?;
    let kind = Kind::parse(&a.adapter)?;
    if kind.sends() {
        let to = a.to.ok_or_else(|| format!("--adapter {} needs --to ADDR", kind.name()))?;
        if !to.ip().is_loopback() && !a.remote {
            return Err(format!("--to {to} is not a loopback address: add --remote to load another host"));
        }
    }
    let wait = Wait::parse(&a.wait)?;
    let duration = secs(a.duration, "--duration")?;
    if a.count == 0 {
        return Err("--count 0: nothing to do".into());
    }
    let cfg = RunConfig {
        adapter: AdapterSpec { kind, to: a.to, xtp_port: a.xtp_port, tx_timestamps: a.tx_timestamps },
        threads: a.threads,
        wait,
        warm: !a.no_warm,
        os_clock: a.os_clock,
        count: a.count,
        duration_ns: duration.as_nanos() as u64,
        late_ns: (a.late_us.max(0.0) * 1e3) as u64,
        drop_late_ns: a.drop_late_us.map(|u| (u.max(0.0) * 1e3) as u64),
        rt: Realtime { fifo: a.fifo, cpu: a.cpu },
        gar_cpu: a.gar_cpu,
        seed: a.seed,
    };
    if let Some(at) = a.start_at {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?;
        let wait = at - now.as_secs_f64();
        if wait > 3600.0 {
            return Err(format!("--start-at {at}: more than an hour from now"));
        }
        if wait > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(wait));
        }
    }
    let stop = stop_on_ctrl_c();
    let mut line = |n: u64, ns: u64| {
        eprintln!("  {:>6.1} s  {:>12} requests  {}", ns as f64 / 1e9, n, rate(n as f64 / (ns as f64 / 1e9)));
    };
    let progress: Option<xk_loadgen::run::Progress<'_>> = if a.json { None } else { Some(&mut line) };
    let r = xk_loadgen::run(&model, &cfg, stop.clone(), progress)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        print_run(&r);
    }
    // A run cut short by Ctrl-C did not do what was asked: the summary
    // above says what ran, and the exit status says it was cut (issue #13,
    // as `ping -c`). A sink has no end of its own: Ctrl-C is how it ends.
    if stop.load(Ordering::Relaxed) {
        return Err(format!("interrupted (Ctrl-C) after {} requests", r.requests));
    }
    Ok(())
}

fn print_run(r: &RunReport) {
    println!("{} → {} ({} thread(s), wait {}, {})", r.model, r.adapter, r.threads, r.wait, r.scheduling);
    let spec = r.specified_rate_per_s.map_or("unbounded (P_max)".to_string(), rate);
    println!(
        "  {} requests in {:.3} s: {} (specified {spec}); {} dropped, {} refused{}",
        r.requests,
        r.seconds,
        rate(r.rate_per_s),
        r.dropped,
        r.counts.errors,
        r.counts.first_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default()
    );
    let m = &r.miss;
    println!(
        "  miss τ−t: VZ (mean) {:.0} ns, median {} ns, p99 {} ns, max {} ns; {:.2} % later than {} ns",
        m.mean_ns,
        m.median_ns,
        m.p99_ns,
        m.max_ns,
        m.late_share * 100.0,
        m.late_ns
    );
    if let Some(t) = &r.counts.tx_miss {
        println!(
            "  kernel transmit timestamp − t ({} stamped): mean {:.0} ns, median {} ns, p99 {} ns, max {} ns",
            t.n, t.mean_ns, t.median_ns, t.p99_ns, t.max_ns
        );
    }
    println!(
        "  clock: {}, {} ns off CLOCK_MONOTONIC at the end; ended: {}",
        r.clock, r.clock_drift_ns, r.stopped
    );
    if let Some(e) = &r.model_error {
        println!("  model: {e}");
    }
}

fn sink(a: &SinkArgs) -> Result<(), String> {
    let cfg = SinkConfig {
        proto: Proto::parse(&a.proto)?,
        xtp_port: a.xtp_port,
        duration: secs(a.duration, "--duration")?,
        idle: secs(a.idle, "--idle")?,
        count: a.count,
    };
    let s = Sink::bind(a.listen, cfg).map_err(|e| format!("--listen {}: {e}", a.listen))?;
    let addr = s.local_addr().map_err(|e| e.to_string())?;
    // The first line says where: a script (or test) that asked for port 0
    // reads it before it starts the run.
    println!("listening on {addr}");
    let r = s.run(stop_on_ctrl_c()).map_err(|e| e.to_string())?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        println!(
            "received {} ({} bytes) in {:.3} s: {}; lost {}, reordered {}; inter-arrival mean {:.0} ns, median {} ns, p99 {} ns; ended: {}",
            r.received,
            r.bytes,
            r.seconds,
            rate(r.rate_per_s),
            r.lost,
            r.reordered,
            r.interarrival.mean_ns,
            r.interarrival.median_ns,
            r.interarrival.p99_ns,
            r.stopped
        );
    }
    Ok(())
}

fn floor(a: &FloorArgs) -> Result<(), String> {
    let f = xk_loadgen::floor::measure(a.size, secs(a.duration, "--duration")?, a.count)
        .map_err(|e| e.to_string())?;
    if a.json {
        println!("{}", serde_json::to_string(&f).map_err(|e| e.to_string())?);
    } else {
        for x in &f {
            println!(
                "{:>9} {} B: {} datagrams in {:.3} s = {} ({} calls, {} refused)",
                x.mode,
                x.size,
                x.datagrams,
                x.seconds,
                rate(x.rate_per_s),
                x.calls,
                x.errors
            );
        }
    }
    Ok(())
}

fn merge(a: &MergeArgs) -> Result<(), String> {
    let mut runs = Vec::new();
    for f in &a.files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let r: RunReport = serde_json::from_str(text.trim())
            .map_err(|e| format!("{}: not an `xpress loadgen run -J` result: {e}", f.display()))?;
        runs.push(r);
    }
    let requests: u64 = runs.iter().map(|r| r.requests).sum();
    let vz = runs.iter().map(|r| r.miss.mean_ns * r.requests as f64).sum::<f64>() / (requests.max(1) as f64);
    let v = serde_json::json!({
        "agents": runs.len(),
        "requests": requests,
        "dropped": runs.iter().map(|r| r.dropped).sum::<u64>(),
        "refused": runs.iter().map(|r| r.counts.errors).sum::<u64>(),
        "bytes": runs.iter().map(|r| r.counts.bytes).sum::<u64>(),
        // The agents ran at once (a shared --start-at): their rates add up.
        "rate_per_s": runs.iter().map(|r| r.rate_per_s).sum::<f64>(),
        "vz_ns": vz,
        // Quantiles do not merge from summaries: the worst agent's bound it.
        "p99_ns_worst_agent": runs.iter().map(|r| r.miss.p99_ns).max().unwrap_or(0),
        "max_ns": runs.iter().map(|r| r.miss.max_ns).max().unwrap_or(0),
        "seeds": runs.iter().map(|r| r.seed).collect::<Vec<_>>(),
        "runs": runs,
    });
    println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
    Ok(())
}
