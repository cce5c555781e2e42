//! `xpress daemon`: the XTP endpoint as a daemon serving client processes
//! over shared memory (`xk_driver::daemon`); `--status` asks a running one
//! what it serves.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::Args;
use xk_driver::daemon::{self, DaemonConfig};

use crate::args;

#[derive(Args)]
pub(crate) struct DaemonArgs {
    #[command(flatten)]
    trace: args::TraceArgs,
    /// The Unix socket clients register at (default:
    /// $XDG_RUNTIME_DIR/xpress.sock, else /tmp/xpress-UID.sock). Only the
    /// daemon's own user and root may register.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// UDP address of the endpoint: HOST:PORT (0: any free port; printed).
    #[arg(long, default_value = "127.0.0.1:0", value_parser = args::addr, value_name = "ADDR")]
    listen: SocketAddr,
    /// Spin instead of sleeping (one core at 100 %).
    #[arg(long)]
    busy_poll: bool,
    /// Bytes of each client's TN and FN rings (a power of two, 64K to 1G).
    #[arg(long, default_value = "8M", value_parser = args::size, value_name = "BYTES")]
    ring: usize,
    /// WTIMER expiries without an answer before a context is abandoned
    /// (default: the engine's).
    #[arg(long, value_name = "N")]
    max_retries: Option<u32>,
    /// Bytes the daemon delivers ahead of a client's reading, per context.
    #[arg(long, value_parser = args::size, value_name = "BYTES")]
    read_credit: Option<usize>,
    /// Bytes a client may have written and not seen acknowledged, per context.
    #[arg(long, value_parser = args::size, value_name = "BYTES")]
    write_bound: Option<usize>,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_parser = args::seconds, value_name = "SECONDS")]
    duration: Option<std::time::Duration>,
    /// Print the running daemon's status (JSON: clients, contexts) and exit.
    #[arg(long)]
    status: bool,
}

pub(crate) fn run(a: &DaemonArgs) -> Result<(), String> {
    a.trace.around("daemon", || run_traced(a))
}

fn run_traced(a: &DaemonArgs) -> Result<(), String> {
    let socket = a.socket.clone().unwrap_or_else(daemon::default_socket);
    if a.status {
        let v = daemon::status(&socket).map_err(|e| e.to_string())?;
        println!("{v}");
        return Ok(());
    }
    let mut cfg = DaemonConfig::new(&socket);
    cfg.listen = a.listen;
    cfg.ring_bytes = a.ring;
    cfg.engine.busy_poll = a.busy_poll;
    if let Some(n) = a.max_retries {
        cfg.endpoint.max_retries = n;
    }
    if let Some(n) = a.read_credit {
        cfg.engine.read_credit = n as u64;
    }
    if let Some(n) = a.write_bound {
        cfg.engine.write_bound = n as u64;
    }
    let stop = args::ctrl_c()?;
    if let Some(d) = a.duration {
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    daemon::serve(cfg, stop, |udp| {
        println!("xpress daemon: serving {} (XTP on UDP {udp})", socket.display());
    })
    .map_err(|e| e.to_string())
}
