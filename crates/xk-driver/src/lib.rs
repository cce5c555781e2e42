//! Real I/O for xpress. This crate is where sockets and the wall clock enter;
//! everything it drives (the link model, the XTP engine) stays sans-I/O.
//!
//! * [`driver`]: the XTP endpoint on a socket — [`driver::UdpDriver`] (XTP over
//!   UDP, the default) and [`driver::RawDriver`] (XTP over IP protocol 36,
//!   root only) — one thread, blocking or busy-poll.
//! * [`api`]: blocking `std::net`-style APIs — `XtpStream` (Read/Write and
//!   messages), `XtpListener`, datagrams, transactions; `aio` (feature
//!   `tokio`): `AsyncXtpStream` / `AsyncXtpListener` for tokio.
//! * [`engine`]: the engine-thread deployment — the endpoint on its own
//!   (pinnable) thread behind lock-free TN/FN rings of control blocks; the
//!   blocking API runs on it when made with [`engine::Mode::EngineThread`].
//! * [`daemon`]: the daemon deployment — `xpress daemon` owns the endpoint
//!   and serves client processes through shared-memory rings
//!   ([`engine::Mode::Daemon`]).
//! * [`netns`]: driver 3 of the link model — two network namespaces joined by
//!   TUN devices through the model (root); [`netns_buffers`] sizes kernel
//!   TCP's buffer limits in them for the emulated path.
//! * [`transport`]: what the driver needs from a socket; [`batch`] implements
//!   it for UDP with `sendmmsg`/`recvmmsg` and GSO/GRO, [`raw`] for IP 36.
//! * [`relay`]: driver 2 of the link model — a real-time UDP relay that applies
//!   one [`xk_netemu::Link`] per direction between a client and a server and
//!   measures its own timing accuracy.
//! * [`pacer`]: how the relay and the netns router meet release instants
//!   (timerfd + epoll, a bounded final spin, `SCHED_FIFO` when permitted).
//! * [`clock`]: the monotonic clock as an [`xk_time::Instant`].
//! * [`trace`]: the tracing monitor's tracepoints here (system calls, ring
//!   crossings, application calls) and the engine's subscriber; compiled in
//!   with the `trace` feature, recording while `xk_trace::start` runs.
//!
//! `unsafe` stays forbidden here too: system calls go through `nix`,
//! `rustix` and `socket2`, the scheduling policy through `thread-priority`,
//! shared memory through `xk-shm` (the one crate with `unsafe`, in one
//! module).

#[cfg(feature = "tokio")]
pub mod aio;
pub mod api;
pub mod batch;
pub mod clock;
pub mod daemon;
pub mod driver;
pub mod engine;
pub mod graph_udp;
pub mod intake;
pub mod lanes;
pub mod netns;
pub mod netns_buffers;
pub mod pacer;
pub mod path_mtu;
pub mod raw;
pub mod relay;
pub mod trace;
pub mod trace_clock;
pub mod transport;
pub mod tun_batch;
