//! The two deployments behind the blocking API: the endpoint in the
//! caller's thread ([`Core::Integrated`]) or on an engine thread
//! ([`Core::Engine`]). Everything the API objects do to the endpoint goes
//! through the methods here, so `XtpStream`, `XtpListener`, datagrams and
//! transactions are written once for both.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use xk_time::Instant;
use xtp_proto::{Chunk, ContextConfig, ContextId, EndpointConfig};

use crate::driver::{DriverConfig, UdpDriver, WaitMode};
use crate::engine::{CtxHandle, EngineClient, Mode};

/// A context as the API names it: the endpoint's id in the integrated mode,
/// the ring handle in the engine-thread mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Cid {
    Local(ContextId),
    Remote(CtxHandle),
}

/// The driver of a set of integrated API objects. When the last object is
/// gone and contexts remain (closed but lingering, so that a peer which
/// missed our final acknowledgement still gets it), the driver moves to
/// the reaper thread (one for all, [`super::reaper`]) that keeps turning
/// it until no context is left — what a kernel does for TCP's TIME_WAIT.
/// Bounded by the longest linger (10 minutes). (The engine thread does the
/// same by itself.)
pub(crate) struct Linger(Option<UdpDriver>);

impl Linger {
    /// The driver, for a caller that keeps it turning itself (the async
    /// API's driver task, which lingers by itself).
    #[cfg(feature = "tokio")]
    pub(crate) fn into_driver(mut self) -> Option<UdpDriver> {
        self.0.take()
    }
}

impl std::ops::Deref for Linger {
    type Target = UdpDriver;
    fn deref(&self) -> &UdpDriver {
        self.0.as_ref().expect("driver present until drop")
    }
}

impl std::ops::DerefMut for Linger {
    fn deref_mut(&mut self) -> &mut UdpDriver {
        self.0.as_mut().expect("driver present until drop")
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        let Some(mut d) = self.0.take() else { return };
        if d.endpoint().context_count() == 0 {
            return;
        }
        // The reaper flushes it at once (a final acknowledgement the caller
        // produced last), then answers whatever the peer still sends.
        super::reaper::adopt(d);
    }
}

/// Where the endpoint runs. One per socket, inside an `Rc`: the size
/// difference costs nothing, and boxing the driver would put an indirection
/// on the integrated mode's path.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Core {
    Integrated(Linger),
    Engine(EngineClient),
}

fn open_error(peer: SocketAddr, port: u16, e: impl std::fmt::Debug) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("open a context to {peer} port {port}: {e:?}"))
}

impl Core {
    /// Binds `local` and starts the endpoint in `mode`. In the daemon
    /// mode, registers with the daemon instead: its socket is used, so
    /// `local` must be a port-0 address or the daemon's own.
    pub(crate) fn bind(local: SocketAddr, ep: EndpointConfig, mode: Mode) -> io::Result<Core> {
        let (busy, engine) = match mode {
            Mode::Integrated { busy_poll } => (busy_poll, None),
            Mode::EngineThread(cfg) => (cfg.busy_poll, Some(cfg)),
            Mode::Daemon { socket, busy_poll } => {
                let client = crate::daemon::connect(&socket, busy_poll)?;
                let theirs = client.local_addr();
                if local.port() != 0 && local != theirs {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrNotAvailable,
                        format!(
                            "{local}: in the daemon mode the daemon's socket ({theirs}) is used; bind port 0 or {theirs}"
                        ),
                    ));
                }
                return Ok(Core::Engine(client));
            }
        };
        let wait = if busy { WaitMode::BusyPoll } else { WaitMode::Blocking };
        let driver = UdpDriver::bind_with(
            local,
            ep,
            super::time_seed(),
            DriverConfig { wait, offload: true, ..DriverConfig::default() },
        )?;
        Ok(match engine {
            None => Core::Integrated(Linger(Some(driver))),
            Some(cfg) => Core::Engine(crate::engine::spawn(driver, cfg)?),
        })
    }

    pub(crate) fn now(&self) -> Instant {
        match self {
            Core::Integrated(d) => d.now(),
            Core::Engine(e) => e.now(),
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Core::Integrated(d) => d.local_addr(),
            Core::Engine(e) => Ok(e.local_addr()),
        }
    }

    /// Hands what is queued to the network (the engine does so by itself).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match self {
            Core::Integrated(d) => d.flush(),
            Core::Engine(_) => Ok(()),
        }
    }

    pub(crate) fn listen(&mut self, port: u16, cfg: ContextConfig) -> io::Result<()> {
        let refused = |e: String| io::Error::new(io::ErrorKind::AddrInUse, format!("XTP port {port}: {e}"));
        match self {
            Core::Integrated(d) => d.endpoint().listen(port, cfg).map_err(|e| refused(e.to_string())),
            Core::Engine(e) => e.listen(port, cfg).map_err(|e| refused(e.to_string())),
        }
    }

    pub(crate) fn connect(&mut self, peer: SocketAddr, port: u16, cfg: ContextConfig) -> io::Result<Cid> {
        match self {
            Core::Integrated(d) => {
                let now = d.now();
                d.endpoint()
                    .connect(now, peer, port, cfg)
                    .map(Cid::Local)
                    .map_err(|e| open_error(peer, port, e))
            }
            Core::Engine(e) => e.connect(peer, port, cfg).map(Cid::Remote),
        }
    }

    pub(crate) fn send_datagram(
        &mut self,
        peer: SocketAddr,
        port: u16,
        data: Bytes,
        acknowledged: bool,
    ) -> io::Result<Cid> {
        match self {
            Core::Integrated(d) => {
                let now = d.now();
                d.endpoint()
                    .send_datagram(now, peer, port, data, acknowledged)
                    .map(Cid::Local)
                    .map_err(|e| open_error(peer, port, e))
            }
            Core::Engine(e) => e.send_datagram(peer, port, data, acknowledged).map(Cid::Remote),
        }
    }

    /// Queues `data`. Integrated: `WouldBlock` when the engine's send buffer
    /// is full (the caller waits for room and retries). Ring modes: posts
    /// (waiting while the TN ring is full), and between blocks waits for
    /// acknowledgements no later than `deadline`.
    pub(crate) fn write(
        &mut self,
        ctx: Cid,
        data: &[u8],
        eom: bool,
        btag: Option<u64>,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        match (self, ctx) {
            (Core::Integrated(d), Cid::Local(id)) => {
                let now = d.now();
                d.endpoint().write(now, id, Bytes::copy_from_slice(data), eom, btag).map_err(|e| match e {
                    xtp_proto::WriteError::WouldBlock => {
                        io::Error::new(io::ErrorKind::WouldBlock, e.to_string())
                    }
                    _ => io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        format!("cannot write: the context is closed ({e:?})"),
                    ),
                })
            }
            (Core::Engine(e), Cid::Remote(h)) => e.write_slice_until(h, data, eom, btag, deadline),
            _ => Err(mismatch()),
        }
    }

    /// Whether a write may go now. Integrated: room in the engine's send
    /// buffer and fewer than `bound` bytes unsent
    /// ([`xtp_proto::Endpoint::writable`]). Engine thread: fewer than
    /// `bound` bytes posted and unacknowledged (the thread queues beyond the
    /// endpoint's buffer itself, within its own write bound).
    pub(crate) fn has_room(&mut self, ctx: Cid, bound: u64) -> bool {
        match (self, ctx) {
            (Core::Integrated(d), Cid::Local(id)) => d.endpoint().writable(id, bound),
            (Core::Engine(e), Cid::Remote(h)) => e.has_room(h) && e.unacked_bytes(h) < bound,
            _ => false,
        }
    }

    /// Takes the next in-order chunk of `ctx`, if any.
    pub(crate) fn read_chunk(&mut self, ctx: Cid) -> Option<Chunk> {
        match (self, ctx) {
            (Core::Integrated(d), Cid::Local(id)) => {
                let now = d.now();
                d.endpoint().read(now, id)
            }
            (Core::Engine(e), Cid::Remote(h)) => e.read_chunk(h),
            _ => None,
        }
    }

    pub(crate) fn close(&mut self, ctx: Cid) -> io::Result<()> {
        match (self, ctx) {
            (Core::Integrated(d), Cid::Local(id)) => {
                let now = d.now();
                d.endpoint().close(now, id);
                Ok(())
            }
            (Core::Engine(e), Cid::Remote(h)) => e.close(h),
            _ => Err(mismatch()),
        }
    }

    pub(crate) fn abort(&mut self, ctx: Cid) -> io::Result<()> {
        match (self, ctx) {
            (Core::Integrated(d), Cid::Local(id)) => {
                let now = d.now();
                d.endpoint().abort(now, id);
                Ok(())
            }
            (Core::Engine(e), Cid::Remote(h)) => e.abort(h),
            _ => Err(mismatch()),
        }
    }

    /// The object of `ctx` is gone: forget what is kept for it.
    pub(crate) fn forget(&mut self, ctx: Cid) {
        if let (Core::Engine(e), Cid::Remote(h)) = (self, ctx) {
            e.forget(h);
        }
    }
}

fn mismatch() -> io::Error {
    io::Error::other("internal: a context of the other deployment mode")
}
