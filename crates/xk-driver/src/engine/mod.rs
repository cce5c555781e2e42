//! The engine-thread deployment: the XTP endpoint runs on a dedicated
//! (optionally pinned) thread, and the application talks to it through two
//! lock-free single-producer single-consumer rings of control blocks — TN,
//! to the network, and FN, from the network (seed 004's host/protocol
//! processor interface, Aeron's media driver in one process).
//!
//! * [`block`]: the blocks (plain data, payload by handle);
//! * `serve`: the engine itself — a driver serving sessions, each a pair
//!   of rings behind a `Port` with its own handles (one session here; one
//!   per client process in the daemon, [`crate::daemon`]);
//! * `ring`: the in-process rings and their wake-up protocol (an eventfd
//!   per side, rung only when that side sleeps);
//! * `thread`: the engine thread's loop;
//! * [`EngineClient`]: the application's side, over the in-process rings or
//!   a daemon's shared-memory rings, which the blocking API ([`crate::api`])
//!   uses when constructed with [`Mode::EngineThread`] or [`Mode::Daemon`].
//!
//! Contract: nothing is dropped between application and engine — a full TN
//! ring blocks the poster ([`EngineClient::post`]) or hands the block back
//! ([`EngineClient::try_post`]); the engine queues what the endpoint cannot
//! take yet and backlogs what does not fit in FN. A block naming an unknown
//! context is answered with [`FromEngine::Failed`]. When the application's
//! side is dropped the engine closes the contexts left open, serves them
//! until they are over (at most 10 minutes) and ends; when the engine ends
//! (a socket error), the application's next wait fails with an error saying
//! so instead of hanging.

pub mod block;
mod client;
pub(crate) mod doorbell;
mod ring;
pub(crate) mod serve;
mod thread;

use std::io;

use xk_time::Duration;

pub use block::{BlockError, CtxHandle, FromEngine, ToEngine};
pub(crate) use client::AppLink;
pub use client::{EngineClient, Notice};
pub use ring::RingStats;

use crate::driver::Driver;
use crate::transport::Transport;

/// Where the endpoint runs; chosen when an API object is made, invisible
/// afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the application's thread: each blocking call turns the driver
    /// (sleeping in the kernel, or with `busy_poll` spinning on the socket).
    Integrated {
        /// Spin on non-blocking receives instead of sleeping.
        busy_poll: bool,
    },
    /// On a dedicated thread, through the TN and FN rings.
    EngineThread(EngineConfig),
    /// In an `xpress daemon` process, through TN and FN rings in memory
    /// shared with it ([`crate::daemon`]).
    Daemon {
        /// The daemon's Unix socket.
        socket: std::path::PathBuf,
        /// Spin on the FN ring instead of sleeping.
        busy_poll: bool,
    },
}

impl Default for Mode {
    fn default() -> Self {
        Mode::integrated()
    }
}

impl Mode {
    /// In the application's thread, sleeping when idle (the default).
    pub fn integrated() -> Mode {
        Mode::Integrated { busy_poll: false }
    }

    /// The engine thread, sleeping when idle, not pinned.
    pub fn engine_thread() -> Mode {
        Mode::EngineThread(EngineConfig::default())
    }

    /// The daemon at `socket`, sleeping when idle.
    pub fn daemon(socket: impl Into<std::path::PathBuf>) -> Mode {
        Mode::Daemon { socket: socket.into(), busy_poll: false }
    }

    /// The engine thread spinning on its socket and ring, and the
    /// application spinning on its ring: lowest latency, two cores at 100 %.
    pub fn busy_engine_thread() -> Mode {
        Mode::EngineThread(EngineConfig { busy_poll: true, ..EngineConfig::default() })
    }
}

/// Settings of the engine-thread mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Pin the engine thread to this CPU.
    pub cpu: Option<usize>,
    /// Spin instead of sleeping (engine and application both).
    pub busy_poll: bool,
    /// Blocks per ring (each way).
    pub ring_slots: usize,
    /// Bytes the engine may deliver ahead of the application's reading, per
    /// context; the rest stays in the context, whose window closes.
    pub read_credit: u64,
    /// Bytes the application may have written and not yet seen
    /// acknowledged, per context, before a write waits.
    pub write_bound: u64,
    /// How long the engine holds back an acknowledgement after delivering
    /// data, so that the application's answer leaves with it.
    pub reply_hold: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cpu: None,
            busy_poll: false,
            ring_slots: 1024,
            read_credit: 4 << 20,
            write_bound: 4 << 20,
            reply_hold: Duration::from_micros(50),
        }
    }
}

/// Moves `driver` to a new engine thread and returns the application's
/// side. Fails if the rings' eventfds cannot be made, the thread cannot be
/// started, or the CPU asked for cannot be used.
pub fn spawn<T: Transport + Send + 'static>(
    driver: Driver<T>,
    cfg: EngineConfig,
) -> io::Result<EngineClient> {
    if cfg.ring_slots == 0 || cfg.read_credit == 0 || cfg.write_bound == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "engine thread: ring_slots, read_credit and write_bound must be at least 1",
        ));
    }
    let local = driver.local_addr()?;
    let (app, engine) = ring::pair(cfg.ring_slots)?;
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new().name("xtp-engine".into()).spawn(move || {
        let pinned = cfg.cpu.map_or(Ok(()), pin);
        let ok = pinned.is_ok();
        let _ = ready_tx.send(pinned);
        if ok {
            // A socket error ends the thread; the application's side then
            // finds the engine gone.
            let _ = thread::run(driver, engine, cfg);
        }
    })?;
    ready_rx.recv().map_err(|_| io::Error::other("the engine thread ended before it started"))??;
    Ok(EngineClient::new(Box::new(app), local, cfg))
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> io::Result<()> {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu}: {e}")))?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("cannot pin the engine to CPU {cpu}: {e}"))
    })
}
