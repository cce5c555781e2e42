//! `xpress emulate`: the real-time UDP relay (driver 2 of the link model).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;

use clap::Args;
use xk_driver::relay::{self, RelayConfig};
use xk_netemu::{LinkSpec, parse_line, parse_toml};
use xk_time::Duration;

#[derive(Args)]
pub(crate) struct EmulateArgs {
    /// Address clients send to.
    #[arg(long)]
    listen: SocketAddr,
    /// The server the relay forwards to.
    #[arg(long)]
    server: SocketAddr,
    /// Client → server link, netem-like (`delay 20ms rate 100mbit loss 1%`) or
    /// `@file.toml`.
    #[arg(long, default_value = "")]
    link: String,
    /// Server → client link (default: the same as --link).
    #[arg(long)]
    reverse: Option<String>,
    /// Master seed (default: derived from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Spin this many microseconds before each release instead of sleeping.
    #[arg(long, default_value_t = 200)]
    spin_us: u64,
    /// Mark the run invalid when the p99 release error exceeds this (µs).
    #[arg(long, default_value_t = 1000)]
    max_p99_error_us: u64,
    /// Write one JSON line per datagram event here.
    #[arg(long)]
    log: Option<String>,
}

pub(crate) fn spec(what: &str, s: &str) -> Result<LinkSpec, String> {
    let r = match s.strip_prefix('@') {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read {path}: {e}"))?;
            parse_toml(&text)
        }
        None => parse_line(s),
    };
    r.map_err(|e| format!("{what}: {e}"))
}

pub(crate) fn run(a: &EmulateArgs) -> Result<(), String> {
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        return Err(format!("--duration {}: must be a positive number of seconds", a.duration));
    }
    let forward = spec("--link", &a.link)?;
    let reverse = spec("--reverse", a.reverse.as_deref().unwrap_or(&a.link))?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("xpress emulate: {} <-> {} seed {seed} for {} s", a.listen, a.server, a.duration);
    let cfg = RelayConfig {
        listen: a.listen,
        server: a.server,
        forward,
        reverse,
        seed,
        duration: Duration::from_secs_f64(a.duration),
        spin: Duration::from_micros(a.spin_us),
        max_p99_error: Duration::from_micros(a.max_p99_error_us),
        stop: None,
    };
    let mut file = match &a.log {
        Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| format!("--log {p}: {e}"))?)),
        None => None,
    };
    let report = relay::run(&cfg, file.as_mut().map(|f| f as &mut dyn Write))
        .map_err(|e| format!("relay on {}: {e}", a.listen))?;
    if let Some(mut f) = file {
        f.flush().map_err(|e| e.to_string())?;
    }
    println!("{}", serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?);
    if !report.valid {
        return Err(
            "release timing exceeded --max-p99-error-us: results of this run are not trustworthy".into()
        );
    }
    Ok(())
}
