//! What the client and server commands share: value parsers (sizes and
//! rates through the link model's one parser, addresses with host names
//! and a default port), the path flags, `--trace`, and Ctrl-C.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use xk_apps::{PathConfig, Transport};

/// `-n 1G`, `-l 64k`, `--window 4m`: powers of 1024.
pub(crate) fn bytes(s: &str) -> Result<u64, String> {
    xk_netemu::parse_bytes("", s).map_err(|e| e.reason)
}

/// A byte size held in memory.
pub(crate) fn size(s: &str) -> Result<usize, String> {
    xk_netemu::parse_size("", s).map_err(|e| e.reason)
}

/// `--rate 10mbit`: bits per second, as `tc` writes them.
pub(crate) fn rate(s: &str) -> Result<u64, String> {
    xk_netemu::parse_rate("", s).map_err(|e| e.reason)
}

/// Seconds as a positive finite number (`0.2`, `3`).
pub(crate) fn seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s.parse().map_err(|_| "expected a number of seconds, like 0.5 or 3".to_string())?;
    if !(0.0..=1e9).contains(&v) {
        return Err("expected a number of seconds from 0 up".into());
    }
    Ok(std::time::Duration::from_secs_f64(v))
}

/// `HOST[:PORT]`, `[V6]:PORT`; the port defaults to 3636.
pub(crate) fn addr(s: &str) -> Result<SocketAddr, String> {
    xk_apps::addr::parse(s)
}

/// `--transport xtp|udp|tcp|quic`.
pub(crate) fn transport(s: &str) -> Result<Transport, String> {
    s.parse()
}

/// How a client tool reaches the server (shared by `ping` and `bulk`).
#[derive(Args)]
pub(crate) struct PathArgs {
    /// Do not use UDP GSO/GRO.
    #[arg(long)]
    no_offload: bool,
    /// Go through a running `xpress emulate` listening at ADDR (started with
    /// `--server` set to the service's address): packets are sent there
    /// instead. XTP and UDP only; kernel TCP runs under an emulated link
    /// with `xpress netns`.
    #[arg(long, value_name = "ADDR", value_parser = addr)]
    via: Option<SocketAddr>,
    /// XTP directly over IP protocol 36 (root only) from this local IPv4
    /// address to the `--to` address (port ignored).
    #[arg(long, value_name = "LOCAL_IP")]
    raw: Option<std::net::Ipv4Addr>,
    /// Write every XTP packet sent and received to FILE (pcap, framed as
    /// IP protocol 36, IPv4 or IPv6 as the path: Wireshark and tshark
    /// decode it as XTP as it is).
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
}

impl PathArgs {
    /// `--raw`'s local address, if given.
    pub(crate) fn raw_local(&self) -> Option<std::net::IpAddr> {
        self.raw.map(Into::into)
    }

    /// The first of the path's flags a `--graph` run does not take (the
    /// graph's device is a plain socket: no relay, no capture, no offload
    /// to turn off), by name.
    pub(crate) fn not_for_graph(&self) -> Option<&'static str> {
        [(self.via.is_some(), "--via"), (self.pcap.is_some(), "--pcap"), (self.no_offload, "--no-offload")]
            .into_iter()
            .find_map(|(set, flag)| set.then_some(flag))
    }

    pub(crate) fn config(&self, busy_poll: bool) -> PathConfig {
        PathConfig {
            no_offload: self.no_offload,
            via: self.via,
            raw: self.raw,
            busy_poll,
            pcap: self.pcap.clone(),
        }
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

/// The flag Ctrl-C sets: the first press asks the running tool to stop and
/// print what it has; a second press exits at once (status 130).
pub(crate) fn ctrl_c() -> Result<&'static AtomicBool, String> {
    ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::Relaxed) {
            std::process::exit(130);
        }
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    Ok(&STOP)
}

/// `--trace FILE` (on `serve`, `ping`, `bulk`, `daemon` and `emulate`).
#[derive(Args)]
pub(crate) struct TraceArgs {
    /// Record the monitor's tracepoints (application calls, ring crossings,
    /// engine events, system calls; one journey per message and packet)
    /// and write them to FILE when the command ends: a Chrome JSON trace
    /// that ui.perfetto.dev opens, or JSON lines if FILE ends in .jsonl.
    /// (Packets themselves: --pcap, where the command has it.)
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

impl TraceArgs {
    /// Whether `--trace` was given.
    pub(crate) fn is_set(&self) -> bool {
        self.trace.is_some()
    }

    /// Runs `body` with a recording going when `--trace` was given and
    /// writes the trace afterwards, also when `body` failed (the trace of
    /// a failure is worth having). The file is created first so a path
    /// that cannot be written is refused before the run.
    pub(crate) fn around<R>(
        &self,
        command: &str,
        body: impl FnOnce() -> Result<R, String>,
    ) -> Result<R, String> {
        let Some(path) = &self.trace else { return body() };
        let what = format!("--trace {}", path.display());
        let file = std::fs::File::create(path).map_err(|e| format!("{what}: {e}"))?;
        let os_before = OsCounters::now();
        xk_trace::start(xk_trace::Config::default());
        xk_trace::name_thread("main");
        let r = body();
        let rec = xk_trace::finish();
        let os = OsCounters::now().since(&os_before);
        let format = xk_trace::export::Format::for_path(path);
        xk_trace::export::write(&rec, format, std::process::id(), &format!("xpress {command}"), file)
            .map_err(|e| format!("{what}: {e}"))?;
        let dropped = if rec.dropped > 0 {
            format!(", {} dropped past the budget", rec.dropped)
        } else {
            String::new()
        };
        eprintln!("xpress {command}: trace: {} events{dropped} in {}", rec.len(), path.display());
        for p in xk_trace::profile(&rec) {
            eprintln!(
                "xpress {command}: trace: {:<10} {:>7} spans, ns min {} median {} p99 {} max {}",
                p.point.name(),
                p.count,
                p.min,
                p.median,
                p.p99,
                p.max
            );
        }
        // The operating system's disturbances over the run, apart from the
        // profile: a p99 or max well above the median with preemptions,
        // page faults or migrations here is the system's, not the
        // protocol's (seed 000's PATO filtered them out the same way).
        eprintln!(
            "xpress {command}: trace: os: {} involuntary context switches (preemptions), {} voluntary, \
             {} minor and {} major page faults, {}",
            os.involuntary,
            os.voluntary,
            os.minor_faults,
            os.major_faults,
            os.migrations
                .map_or("CPU migrations not available (/proc/self/task/*/sched)".into(), |m| format!(
                    "{m} CPU migrations"
                ))
        );
        r
    }
}

/// The process's operating-system counters (`getrusage`, and the
/// scheduler's migration counts from `/proc/self/task/*/sched` where the
/// kernel has them: threads alive at the reading).
#[derive(Clone, Copy, Debug, Default)]
struct OsCounters {
    voluntary: i64,
    involuntary: i64,
    minor_faults: i64,
    major_faults: i64,
    migrations: Option<i64>,
}

impl OsCounters {
    fn now() -> OsCounters {
        let mut c = OsCounters::default();
        if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
            c.voluntary = u.voluntary_context_switches();
            c.involuntary = u.involuntary_context_switches();
            c.minor_faults = u.minor_page_faults();
            c.major_faults = u.major_page_faults();
        }
        // Summed over the threads alive now (an ended thread's count is gone).
        let one = |path: std::path::PathBuf| -> Option<i64> {
            std::fs::read_to_string(path).ok().and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("se.nr_migrations"))
                    .and_then(|l| l.rsplit(':').next())
                    .and_then(|v| v.trim().parse().ok())
            })
        };
        c.migrations = std::fs::read_dir("/proc/self/task")
            .ok()
            .map(|d| d.flatten().filter_map(|t| one(t.path().join("sched"))).collect::<Vec<_>>())
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum());
        c
    }

    fn since(&self, before: &OsCounters) -> OsCounters {
        OsCounters {
            voluntary: self.voluntary - before.voluntary,
            involuntary: self.involuntary - before.involuntary,
            minor_faults: self.minor_faults - before.minor_faults,
            major_faults: self.major_faults - before.major_faults,
            migrations: self.migrations.zip(before.migrations).map(|(a, b)| a - b),
        }
    }
}
