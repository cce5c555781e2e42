//! The control blocks of the ring protocol: what the application posts to
//! the engine on the TN ring ([`ToEngine`]) and what the engine answers on
//! the FN ring ([`FromEngine`]) — seed 004's to-network and from-network
//! queues.
//!
//! Blocks are plain data: a context is named by a [`CtxHandle`] (a number,
//! not a pointer into the engine), and payload travels by handle — the `P`
//! parameter. In the engine-thread mode `P` is [`Bytes`]: the application's
//! buffer itself crosses the ring (a reference count moves, no byte is
//! copied), and received data reaches the application as slices of the
//! engine's receive buffer. A separate-process daemon would instantiate the
//! same blocks with a reference into a shared-memory segment instead.

use std::fmt;
use std::net::SocketAddr;

use bytes::Bytes;
use xtp_proto::{CloseReason, ContextConfig, Service};

/// Names a context across the rings. The application numbers the contexts
/// it opens (so it can post writes right behind the `Connect`, without
/// waiting for an answer); the engine numbers the contexts a listener
/// accepts, with the top bit set so the two ranges never meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CtxHandle(pub u64);

impl CtxHandle {
    /// The first handle of the engine's range (accepted contexts).
    pub const ENGINE_RANGE: u64 = 1 << 63;

    /// Whether the engine chose this handle (an accepted context).
    pub fn is_accepted(self) -> bool {
        self.0 & Self::ENGINE_RANGE != 0
    }
}

impl fmt::Display for CtxHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_accepted() {
            write!(f, "accepted#{}", self.0 & !Self::ENGINE_RANGE)
        } else {
            write!(f, "opened#{}", self.0)
        }
    }
}

/// A control block from the application to the engine (TN ring).
#[derive(Debug)]
pub enum ToEngine<P = Bytes> {
    /// Open a context to XTP `port` at `peer` under the application's handle.
    Connect {
        /// The handle the application chose (outside the engine's range).
        ctx: CtxHandle,
        /// Where.
        peer: SocketAddr,
        /// XTP port.
        port: u16,
        /// The context's settings.
        cfg: ContextConfig,
    },
    /// Accept contexts addressed to XTP `port`.
    Listen {
        /// XTP port.
        port: u16,
        /// Settings of the contexts accepted.
        cfg: ContextConfig,
    },
    /// One datagram (service 1, or 2 when `acknowledged`) under a new handle;
    /// the context ends by itself.
    Datagram {
        /// The handle the application chose.
        ctx: CtxHandle,
        /// Where.
        peer: SocketAddr,
        /// XTP port.
        port: u16,
        /// The datagram.
        data: P,
        /// Service 2: wait for the receiver's acknowledgement.
        acknowledged: bool,
    },
    /// Queue data. The engine never refuses for lack of room: it holds what
    /// the endpoint cannot take yet (the application bounds that, see
    /// [`FromEngine::Acked`]).
    Write {
        /// The context.
        ctx: CtxHandle,
        /// The bytes (by handle: no copy).
        data: P,
        /// The last byte ends a message.
        eom: bool,
        /// Tag of the message this write starts.
        btag: Option<u64>,
    },
    /// The application consumed `bytes` of delivered data: the engine may
    /// deliver that much more (read credit; what it may not deliver stays in
    /// the context, whose window then closes — backpressure to the peer).
    Credit {
        /// The context.
        ctx: CtxHandle,
        /// Bytes consumed since the last credit.
        bytes: u64,
    },
    /// Close the writing side (graceful close).
    Close {
        /// The context.
        ctx: CtxHandle,
    },
    /// Abort: END and a DIAG to the peer.
    Abort {
        /// The context.
        ctx: CtxHandle,
    },
}

impl<P> ToEngine<P> {
    /// The context the block is about (none for `Listen`).
    pub fn ctx(&self) -> Option<CtxHandle> {
        match self {
            ToEngine::Listen { .. } => None,
            ToEngine::Connect { ctx, .. }
            | ToEngine::Datagram { ctx, .. }
            | ToEngine::Write { ctx, .. }
            | ToEngine::Credit { ctx, .. }
            | ToEngine::Close { ctx }
            | ToEngine::Abort { ctx } => Some(*ctx),
        }
    }
}

/// A completion or event block from the engine to the application (FN ring).
#[derive(Debug)]
pub enum FromEngine<P = Bytes> {
    /// A listener accepted a context; the engine chose its handle.
    Incoming {
        /// The new context.
        ctx: CtxHandle,
        /// Who opened it.
        peer: SocketAddr,
        /// Its service.
        service: Service,
        /// The XTP port it was addressed to.
        port: u16,
    },
    /// In-order data (a slice of a received datagram: no copy).
    Data {
        /// The context.
        ctx: CtxHandle,
        /// Sequence number of the first byte.
        seq: u64,
        /// The bytes.
        data: P,
        /// The last byte ends a message.
        eom: bool,
        /// Tag of the message this chunk starts.
        btag: Option<u64>,
    },
    /// `bytes` of what the application wrote on `ctx` (in total) have been
    /// acknowledged by the peer. Sent when the application may be waiting
    /// for room (half its write bound outstanding) or when everything is
    /// acknowledged, not for every acknowledgement.
    Acked {
        /// The context.
        ctx: CtxHandle,
        /// Bytes acknowledged in total.
        bytes: u64,
    },
    /// The peer closed its writing side; all its data precedes this block.
    PeerFinished {
        /// The context.
        ctx: CtxHandle,
    },
    /// The context is over; all its data precedes this block. The handle is
    /// free from here on (a later block naming it is refused).
    Closed {
        /// The context.
        ctx: CtxHandle,
        /// Why.
        reason: CloseReason,
    },
    /// A `Listen` was accepted (`Ok`) or refused (the port has a listener).
    Listening {
        /// XTP port.
        port: u16,
        /// The refusal in words.
        result: Result<(), String>,
    },
    /// A block was refused; nothing of it took effect.
    Failed {
        /// The context it named.
        ctx: CtxHandle,
        /// Why.
        error: BlockError,
    },
}

/// Why the engine refused a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// No context has this handle (never opened, or closed and freed).
    UnknownContext,
    /// `Connect` or `Datagram` named a handle in the engine's range or one
    /// already in use.
    BadHandle,
    /// The endpoint refused to open the context (its reason).
    Open(String),
    /// The context's writing side is closed.
    Closed,
    /// The block could not be read (daemon mode: a record in the shared
    /// ring with an unknown kind or a field out of range); it was skipped.
    Corrupt(String),
    /// A `Write` took the context's unacknowledged bytes past the write
    /// bound the engine announced (plus one block): the client does not
    /// follow the ring protocol, so the write is refused and the context
    /// aborted (its stream has a hole now).
    OverWriteBound(u64),
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockError::UnknownContext => write!(f, "no such context"),
            BlockError::BadHandle => write!(f, "handle in the engine's range or already in use"),
            BlockError::Open(e) => write!(f, "cannot open the context: {e}"),
            BlockError::Closed => write!(f, "the context's writing side is closed"),
            BlockError::Corrupt(e) => write!(f, "corrupt block: {e}"),
            BlockError::OverWriteBound(n) => write!(
                f,
                "write refused and context aborted: more than the write bound ({n} bytes) unacknowledged"
            ),
        }
    }
}

impl std::error::Error for BlockError {}
