//! `xpress netns`: driver 3 of the link model — two network namespaces
//! joined through TUN devices with the emulator forwarding between them, so
//! any program runs under the emulated conditions (root only).

use std::os::unix::process::CommandExt;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use xk_driver::netns::{ADDR_A, ADDR_B, ForwardOptions, Netns, leftover};
use xk_time::Duration;

use xk_driver::pacer;
use xk_driver::relay::DEFAULT_MAX_P99_ERROR;

use crate::emulate::{duration_micros, pacing, spec};

/// Prefix of every namespace this command creates (then the process id).
pub(crate) const PREFIX: &str = "xpns";

#[derive(Args)]
pub(crate) struct NetnsArgs {
    /// A → B link in tc-netem's words (`delay 20ms rate 100mbit`; see
    /// docs/NETEM.md) or `@file.toml`.
    #[arg(long, default_value = "")]
    link: String,
    /// B → A link (default: the same as --link).
    #[arg(long)]
    reverse: Option<String>,
    /// Command started in namespace A (10.200.0.1) in the background, e.g. a
    /// server; it is stopped when B's command ends.
    #[arg(long, value_name = "SHELL COMMAND")]
    a: Option<String>,
    /// Command run in namespace B (10.200.0.2); the run ends when it does,
    /// with its exit status. `$XPRESS_PEER` holds the other end's address.
    /// Ctrl-C, SIGTERM or the end of --duration end it too (it runs in a
    /// process group of its own: use --shell for interactive work).
    #[arg(long, value_name = "SHELL COMMAND")]
    b: Option<String>,
    /// Give an interactive shell in namespace B instead of --b.
    #[arg(long)]
    shell: bool,
    /// Seconds given to A's command (a server) to come up before B's
    /// command starts.
    #[arg(long, default_value_t = 0.5)]
    settle: f64,
    /// Longest run in seconds (the emulator stops forwarding after it).
    #[arg(long, default_value_t = 600.0)]
    duration: f64,
    /// Master seed of the link model.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the emulator's whole report (JSON) here; without it, one
    /// summary line per direction is printed on stderr.
    #[arg(long)]
    report: Option<String>,
    /// Write every IP packet that crossed the emulated link (dropped ones
    /// are not) to FILE as pcap: kernel TCP, UDP, XTP over IP 36 — what
    /// tcpdump inside the namespaces would show, after the link.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Write one JSON line per packet event (arrive / release) here.
    #[arg(long)]
    log: Option<String>,
    /// Mark the run invalid (not trustworthy) when the p99 release error of
    /// either direction exceeds this (µs).
    #[arg(long, default_value_t = duration_micros(DEFAULT_MAX_P99_ERROR))]
    max_p99_error_us: u64,
    /// Least margin (µs) before each release spent spinning instead of
    /// sleeping; the margin grows with the wake-up lateness measured during
    /// the run, up to 100 µs (a spin holds a core at real-time priority).
    #[arg(long, default_value_t = duration_micros(pacer::DEFAULT_SPIN))]
    spin_us: u64,
    /// Longest a released packet is held back (µs) so that the packets due
    /// after it leave in the same TUN write, coalesced (0: never hold).
    /// Only packets the device can coalesce are held: none with
    /// --no-offload.
    #[arg(long, default_value_t = duration_micros(xk_driver::netns::DEFAULT_BATCH_SPAN))]
    batch_span_us: u64,
    /// Open the TUN devices without segmentation offloads: one packet per
    /// read and per write, nothing held (the emulator before batching; the
    /// baseline for comparison).
    #[arg(long)]
    no_offload: bool,
    /// Keep the host's kernel TCP buffer limits in the namespaces. By
    /// default net.ipv4.tcp_rmem / tcp_wmem's maximum is raised there (not on
    /// the host) to twice the path's bandwidth-delay product plus its queues
    /// and 4 MiB, so kernel TCP's window is not held by its buffers.
    #[arg(long)]
    keep_tcp_buffers: bool,
    /// Do not ask for SCHED_FIFO (by default the forwarding thread asks, and
    /// goes on at normal priority, saying so, where it is not permitted).
    #[arg(long)]
    no_realtime: bool,
    /// Do not keep the forwarding thread's CPU awake with a SCHED_IDLE
    /// spinner (by default one runs while releases are near, on idle time
    /// only, when the thread got SCHED_FIFO).
    #[arg(long)]
    no_keep_warm: bool,
}

/// A background command this run started, in a process group of its own;
/// dropping it ends that group (SIGTERM, then SIGKILL after a second), so a
/// shell's children go too.
struct Background(Option<Child>);

impl Background {
    /// The command's exit status, if it has ended.
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self.0.as_mut() {
            Some(c) => {
                // Once it has ended, dropping still ends what it left
                // behind in its group.
                c.try_wait()
            }
            None => Ok(None),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let Some(mut c) = self.0.take() else { return };
        let Ok(pid) = i32::try_from(c.id()) else { return };
        let group = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..20 {
            if c.try_wait().ok().flatten().is_some() {
                // The leader is gone; make sure the rest of the group is too.
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = c.wait();
    }
}

pub(crate) fn run(a: &NetnsArgs) -> Result<std::process::ExitCode, String> {
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        return Err(format!("--duration {}: must be a positive number of seconds", a.duration));
    }
    if a.shell && a.b.is_some() {
        return Err("--shell and --b: choose one (the shell runs in namespace B)".into());
    }
    if a.spin_us > duration_micros(pacer::MAX_SPIN) {
        return Err(format!(
            "--spin-us {}: at most {} (a longer spin holds a core at real-time priority)",
            a.spin_us,
            duration_micros(pacer::MAX_SPIN)
        ));
    }
    let forward = spec("--link", &a.link)?;
    let reverse = spec("--reverse", a.reverse.as_deref().unwrap_or(&a.link))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ctrl-C: stop forwarding, end the commands, tear down (below).
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    }
    let mut log = match &a.log {
        Some(p) => {
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| format!("--log {p}: {e}"))?))
        }
        None => None,
    };
    // The TUN devices take the link's MTU (the smaller of the two
    // directions'), so the kernel's packets fit the emulated link.
    let mtu = [forward.params.mtu, reverse.params.mtu].into_iter().filter(|&m| m > 0).min().unwrap_or(1500);
    let mtu = u16::try_from(mtu).unwrap_or(u16::MAX);
    let mut writer = match &a.pcap {
        Some(p) => Some(crate::emulate::pcap_writer(p)?),
        None => None,
    };
    let base = crate::emulate::unix_base();
    let mut pcap = writer.as_mut().map(|w| {
        move |_dir: usize, t: xk_time::Instant, ip: &[u8]| {
            let _ = w.write_ip(base + t.as_nanos(), ip);
        }
    });
    let ns = Netns::create_with(PREFIX, mtu, !a.no_offload).map_err(|e| format!("--link: {e}"))?;
    eprintln!("xpress netns: {} ({ADDR_A}) <-> {} ({ADDR_B}), seed {}", ns.names.0, ns.names.1, a.seed);
    eprintln!("xpress netns: {}", ns.offloads);
    let buffers = ns.size_tcp_buffers(&forward, &reverse, !a.keep_tcp_buffers).map_err(|e| {
        format!(
            "sizing kernel TCP's buffers in the namespaces: {e} (--keep-tcp-buffers runs with the host's)"
        )
    })?;
    eprintln!("xpress netns: {buffers}");
    // What was understood, in the link's own words.
    eprintln!("xpress netns: A -> B: {forward}");
    eprintln!("xpress netns: B -> A: {reverse}");
    let (status, report) = std::thread::scope(|s| {
        let fwd = s.spawn(|| {
            let opts = ForwardOptions {
                spin: Duration::from_micros(a.spin_us),
                max_p99_error: Duration::from_micros(a.max_p99_error_us),
                pacing: pacing(a.no_realtime, a.no_keep_warm),
                batch_span: Duration::from_micros(a.batch_span_us),
                log: log.as_mut().map(|w| w as &mut dyn std::io::Write),
                capture: pcap.as_mut().map(|c| c as &mut dyn FnMut(usize, xk_time::Instant, &[u8])),
            };
            let r = ns.forward(&forward, &reverse, a.seed, Duration::from_secs_f64(a.duration), opts, &stop);
            if let Some(w) = log.as_mut() {
                use std::io::Write as _;
                let _ = w.flush();
            }
            r
        });
        let result = (|| -> Result<Option<ExitStatus>, String> {
            let _bg = match &a.a {
                Some(cmd) => {
                    let child =
                        ns.command(false, cmd).process_group(0).spawn().map_err(|e| format!("--a: {e}"))?;
                    std::thread::sleep(std::time::Duration::from_secs_f64(a.settle.max(0.0)));
                    Background(Some(child))
                }
                None => Background(None),
            };
            if let Some(cmd) = &a.b {
                // In a process group of its own, so that when this run
                // stops (Ctrl-C, SIGTERM, the duration) its whole group is
                // ended with it rather than left running on a link that no
                // longer forwards. A terminal's Ctrl-C then reaches us
                // alone, and we end B.
                let child =
                    ns.command(true, cmd).process_group(0).spawn().map_err(|e| format!("--b: {e}"))?;
                let mut b = Background(Some(child));
                loop {
                    if let Some(st) = b.try_wait().map_err(|e| format!("--b: {e}"))? {
                        return Ok(Some(st));
                    }
                    if stop.load(Ordering::Relaxed) || fwd.is_finished() {
                        let why =
                            if stop.load(Ordering::Relaxed) { "interrupted" } else { "--duration ended" };
                        drop(b);
                        return Err(format!("{why}: B's command was ended before it finished"));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            if a.shell {
                let st =
                    ns.command(true, "exec ${SHELL:-sh}").status().map_err(|e| format!("--shell: {e}"))?;
                return Ok(Some(st));
            }
            // Neither: forward until the duration ends or Ctrl-C.
            while !stop.load(Ordering::Relaxed) && !fwd.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(None)
        })();
        stop.store(true, Ordering::Relaxed);
        let report = fwd.join().map_err(|_| "the forwarding thread panicked".to_string());
        (result, report)
    });
    // Whether XTP's (or any UDP) socket buffers overflowed: a sender's
    // full buffer or a receiver that fell behind by a whole buffer.
    let udp = ns.udp_buffer_errors();
    // Only this run's namespaces are its to answer for; others of the
    // prefix (another run's, or a killed one's) are mentioned, not blamed.
    let mine = [ns.names.0.clone(), ns.names.1.clone()];
    if let Err(e) = ns.delete() {
        eprintln!("xpress netns: warning: teardown: {e}");
    }
    let (left, others): (Vec<String>, Vec<String>) =
        leftover(PREFIX).into_iter().partition(|n| mine.contains(n));
    let report = report?.map_err(|e| format!("forwarding: {e}"))?;
    let json = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
    // The whole report (JSON) where asked; a person gets a line per
    // direction either way, after whatever B's command printed.
    if let Some(path) = &a.report {
        std::fs::write(path, &json).map_err(|e| format!("--report {path}: {e}"))?;
    }
    eprintln!("xpress netns: A -> B: {}", report.forward.summary());
    eprintln!("xpress netns: B -> A: {}", report.reverse.summary());
    match udp {
        Some(((ar, as_), (br, bs))) => eprintln!(
            "xpress netns: UDP socket-buffer drops: A {ar} receive / {as_} send, B {br} receive / {bs} send"
        ),
        None => eprintln!("xpress netns: UDP socket-buffer drops: could not be read"),
    }
    if let Some(n) = report.kernel_drops.filter(|&n| n > 0) {
        eprintln!("xpress netns: the kernel dropped {n} packets before the emulator read them");
    }
    if !left.is_empty() {
        eprintln!("xpress netns: warning: namespaces still present after teardown: {left:?}");
    }
    if !others.is_empty() {
        eprintln!(
            "xpress netns: note: namespaces of other xpress netns runs exist: {others:?} (`ip netns del NAME` \
             removes one whose run is gone)"
        );
    }
    if let (Some(s), Some(w)) = (&report.timing.scheduling, &report.timing.keep_warm) {
        eprintln!("xpress netns: forwarding thread: {s}; keep-warm: {w}");
    }
    if !report.valid {
        eprintln!(
            "xpress netns: warning: this run is not trustworthy (measurements taken through it should be \
             marked invalid): {}",
            report.invalid_reasons.join("; ")
        );
    }
    let status = status?;
    Ok(match status.and_then(|s| s.code()) {
        Some(0) | None => std::process::ExitCode::SUCCESS,
        Some(c) => std::process::ExitCode::from(u8::try_from(c).unwrap_or(1)),
    })
}
