//! Typed participants: who a session talks to, one address component per layer.
//!
//! The x-kernel passed participants as stacks of untyped address pieces; each
//! protocol popped its own piece and handed the rest down. Same idea here, with
//! an enum instead of `void *`.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// One layer's address component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// A transport port (UDP-like demultiplexing).
    Port(u16),
    /// A link-layer protocol type (EtherType-like demultiplexing).
    Type(u16),
    /// A link-layer station number.
    Station(u32),
    /// An IPv4 host.
    Ipv4(Ipv4Addr),
    /// An IPv6 host.
    Ipv6(Ipv6Addr),
    /// A 64-bit context key (XTP).
    Key(u64),
    /// A socket address: the peer of a datagram device (UDP, raw IP with the
    /// port ignored, a simulated link).
    Inet(SocketAddr),
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Port(p) => write!(f, "port {p}"),
            Addr::Type(t) => write!(f, "type {t:#06x}"),
            Addr::Station(s) => write!(f, "station {s}"),
            Addr::Ipv4(a) => write!(f, "{a}"),
            Addr::Ipv6(a) => write!(f, "{a}"),
            Addr::Key(k) => write!(f, "key {k:#x}"),
            Addr::Inet(a) => write!(f, "{a}"),
        }
    }
}

/// One participant: a stack of address components, the top one belonging to
/// the highest protocol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// Bottom first; `pop` takes from the end.
    stack: Vec<Addr>,
}

impl Part {
    /// An empty participant.
    pub fn new() -> Self {
        Part::default()
    }

    /// A participant from components listed top (highest layer) first.
    pub fn top_first(components: impl IntoIterator<Item = Addr>) -> Self {
        let mut stack: Vec<Addr> = components.into_iter().collect();
        stack.reverse();
        Part { stack }
    }

    /// Takes the top component (the caller's own layer).
    pub fn pop(&mut self) -> Option<Addr> {
        self.stack.pop()
    }

    /// The top component without removing it.
    pub fn peek(&self) -> Option<&Addr> {
        self.stack.last()
    }

    /// Adds a component for the layer below, under the existing ones' owner.
    /// Used by a protocol that decides its lower layer's address itself.
    pub fn push(&mut self, a: Addr) {
        self.stack.push(a);
    }

    /// Whether no component is left.
    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }
}

/// Both ends of a session, as seen by the opener.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Participants {
    /// This end.
    pub local: Part,
    /// The other end.
    pub remote: Part,
}

impl Participants {
    /// Participants from a local and a remote part.
    pub fn new(local: Part, remote: Part) -> Self {
        Participants { local, remote }
    }

    /// Only a local part (a passive open: "anyone who talks to this").
    pub fn local(local: Part) -> Self {
        Participants { local, remote: Part::new() }
    }
}
