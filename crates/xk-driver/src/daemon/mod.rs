//! The daemon deployment: `xpress daemon` owns the endpoint — one UDP
//! socket, the engine's loop — and serves many client processes, each
//! through rings of its own in shared memory (SandiaXTP's daemon; Aeron's
//! media driver). The blocking API runs on it when made with
//! [`crate::engine::Mode::Daemon`]; the application is otherwise the same.
//!
//! * registration (`handshake.rs`): a client connects to the daemon's
//!   Unix socket; the daemon checks its credentials (`SO_PEERCRED`: the
//!   daemon's own user, or root — anyone else is refused with a message),
//!   creates a sealed `memfd` segment holding the client's TN and FN rings,
//!   and passes it and two eventfds (the client's doorbell, the daemon's)
//!   with `SCM_RIGHTS`. The connection stays open: its end is how each side
//!   learns the other has gone.
//! * the rings ([`xk_shm`]) carry the same blocks as the engine thread's
//!   ([`crate::engine::block`]), encoded as records (`codec`); payload is
//!   written into the ring once by its producer and taken by the consumer
//!   as a zero-copy view, released when the last reference drops — one
//!   copy per message more than integrated (the producer's).
//! * isolation: handles are per client (client B cannot even name client
//!   A's contexts: its handle means nothing in B's session, and the block
//!   is refused to B); a corrupt block is refused to its sender; a corrupt
//!   ring ends that client's session only. Nothing a client writes in its
//!   segment can make the daemon read or write outside it.
//! * a client that dies (its socket closes without a goodbye) has its
//!   contexts aborted and its segment freed; one that leaves in order has
//!   them closed gracefully. A daemon that dies makes the client's next (or
//!   current, blocked) call fail with "xpress daemon at PATH went away".
//! * endpoint settings ([`xtp_proto::EndpointConfig`]: retries, timeouts,
//!   limits) are the daemon's, set when it starts; the settings an
//!   application passes for its own endpoint do not apply in this mode.
//!   Per-context settings ([`xtp_proto::ContextConfig`]) do.

mod codec;
mod handshake;
mod link;
mod server;

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use xk_shm::Segment;
use xtp_proto::EndpointConfig;

use crate::engine::{EngineClient, EngineConfig};

/// Where the daemon listens, with what settings.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The Unix socket clients register at.
    pub socket: PathBuf,
    /// The UDP address of the endpoint.
    pub listen: SocketAddr,
    /// The endpoint's settings (for every client).
    pub endpoint: EndpointConfig,
    /// The engine's: busy-poll, read credit, write bound, reply hold;
    /// `ring_slots` is how many blocks a client may have applied per pass
    /// (its rings' size is `ring_bytes`).
    pub engine: EngineConfig,
    /// Bytes of each of a client's rings (a power of two, 64 KiB to 1 GiB).
    pub ring_bytes: usize,
}

impl DaemonConfig {
    /// The defaults, serving `socket`: UDP on 127.0.0.1 (any port), the
    /// client endpoint settings ([`crate::api::client_config`]), 8 MiB
    /// rings.
    pub fn new(socket: impl Into<PathBuf>) -> DaemonConfig {
        DaemonConfig {
            socket: socket.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            endpoint: crate::api::client_config(),
            engine: EngineConfig::default(),
            ring_bytes: 8 << 20,
        }
    }
}

/// The default socket: `$XDG_RUNTIME_DIR/xpress.sock`, else
/// `/tmp/xpress-UID.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => Path::new(&d).join("xpress.sock"),
        None => PathBuf::from(format!("/tmp/xpress-{}.sock", rustix::process::geteuid().as_raw())),
    }
}

/// Runs a daemon until `stop` is set; `ready` is called with its UDP
/// address once it serves. Fails if the sockets cannot be bound (or a
/// daemon already serves the socket path) or the UDP socket fails.
pub fn serve(cfg: DaemonConfig, stop: &AtomicBool, ready: impl FnOnce(SocketAddr)) -> io::Result<()> {
    if !cfg.ring_bytes.is_power_of_two() || !(64 << 10..=1 << 30).contains(&cfg.ring_bytes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("ring size {} bytes: must be a power of two from 64 KiB to 1 GiB", cfg.ring_bytes),
        ));
    }
    if cfg.engine.read_credit == 0 || cfg.engine.write_bound == 0 || cfg.engine.ring_slots == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "read credit, write bound and ring slots (blocks applied per client per pass) must be at least 1",
        ));
    }
    let d = server::Daemon::bind(cfg)?;
    ready(d.local_addr()?);
    d.run(stop)
}

fn no_daemon(path: &Path, e: &io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "no xpress daemon at {} ({e}); start one with `xpress daemon --socket {}`",
            path.display(),
            path.display()
        ),
    )
}

/// Registers with the daemon at `socket` and returns the client's end of
/// its rings (what [`crate::engine::Mode::Daemon`] runs on).
pub fn connect(socket: &Path, busy_poll: bool) -> io::Result<EngineClient> {
    let mut sock = UnixStream::connect(socket).map_err(|e| no_daemon(socket, &e))?;
    // The other way round too: whoever holds the socket path gets all our
    // traffic, and a path in /tmp can be taken by another user first. Only
    // a daemon of our own user or root is talked to.
    let cred = rustix::net::sockopt::socket_peercred(&sock).map_err(io::Error::from)?;
    let (theirs, ours) = (cred.uid.as_raw(), rustix::process::geteuid().as_raw());
    if theirs != ours && theirs != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the process at {} runs as uid {theirs}, not as us (uid {ours}) or root: not an xpress daemon to trust",
                socket.display()
            ),
        ));
    }
    // A daemon that accepts and never answers must not hang us.
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    // A daemon that refuses us (credentials) answers and closes at once,
    // so the hello may fail to go: its answer says why.
    let sent = sock.write_all(&handshake::hello(handshake::Ask::Register));
    let (w, [seg, client_bell, daemon_bell]) = handshake::recv_welcome(&sock).map_err(|e| {
        let e = match sent {
            Err(s) if e.kind() != io::ErrorKind::PermissionDenied => s,
            _ => e,
        };
        io::Error::new(e.kind(), format!("xpress daemon at {}: {e}", socket.display()))
    })?;
    sock.set_read_timeout(None)?;
    let seg = Arc::new(Segment::open(seg)?);
    let link = link::ShmLink::new(seg, client_bell, daemon_bell, sock, socket.to_path_buf())?;
    let cfg = EngineConfig {
        busy_poll,
        read_credit: w.read_credit.max(1),
        write_bound: w.write_bound.max(1),
        ..EngineConfig::default()
    };
    let _ = w.session;
    Ok(EngineClient::new(Box::new(link), w.local, cfg))
}

/// What the daemon at `socket` serves, as JSON: `udp` (its address),
/// `clients` (sessions now), `served` (since the start), `contexts` (not
/// over, clients' and departed clients' still closing),
/// `endpoint_contexts` (the endpoint's, lingering ones included) and
/// `sessions` (per client: `session`, `pid`, `uid`, `contexts`,
/// `listening`).
pub fn status(socket: &Path) -> io::Result<serde_json::Value> {
    let mut sock = UnixStream::connect(socket).map_err(|e| no_daemon(socket, &e))?;
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    sock.write_all(&handshake::hello(handshake::Ask::Status))?;
    let mut text = String::new();
    sock.read_to_string(&mut text)?;
    serde_json::from_str(text.trim()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("xpress daemon at {}: bad status {text:?}: {e}", socket.display()),
        )
    })
}

#[cfg(test)]
mod tests;
