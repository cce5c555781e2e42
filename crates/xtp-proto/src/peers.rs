//! Which peers have proved they receive our packets, for a driver that
//! gives them a path of their own.
//!
//! Implicit setup lets anyone spoof a FIRST, so under a flood the socket
//! every FIRST arrives on fills, and the kernel drops datagrams of
//! established peers with the flood's. A driver that can steer a peer's
//! datagrams elsewhere (a UDP socket connected to it, see
//! `xk_driver::driver::DriverConfig::peer_lanes`) needs to know when a peer
//! has been validated (answered a packet only a receiver of ours could
//! answer, see [`crate::admission`]) and when its last context is gone. Off
//! unless asked for: nothing is queued for an endpoint whose driver does not
//! read it.

use std::collections::VecDeque;
use std::net::SocketAddr;

use xk_core::DemuxMap;

/// A change in the set of validated peers
/// ([`Endpoint::poll_peer_change`](crate::Endpoint::poll_peer_change)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerChange {
    /// A context with this peer was validated: the peer receives what we
    /// send it (announced once per peer until it is gone).
    Validated(SocketAddr),
    /// The last context with a peer announced validated was freed.
    Gone(SocketAddr),
}

/// The announced peers and the changes not yet taken.
pub(crate) struct PeerWatch {
    on: bool,
    hash_seed: u64,
    announced: DemuxMap<SocketAddr, ()>,
    changes: VecDeque<PeerChange>,
}

impl PeerWatch {
    pub(crate) fn new(hash_seed: u64) -> Self {
        PeerWatch { on: false, hash_seed, announced: DemuxMap::new(hash_seed), changes: VecDeque::new() }
    }

    /// Starts or stops watching; stopping forgets everything.
    pub(crate) fn set(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.announced = DemuxMap::new(self.hash_seed);
            self.changes.clear();
        }
    }

    /// A context with `peer` was validated.
    pub(crate) fn validated(&mut self, peer: SocketAddr) {
        if self.on && !self.announced.contains(&peer) {
            self.announced.install(peer, ());
            self.changes.push_back(PeerChange::Validated(peer));
        }
    }

    /// The last context with `peer` was freed.
    pub(crate) fn gone(&mut self, peer: SocketAddr) {
        if self.on && self.announced.contains(&peer) {
            self.announced.erase(&peer);
            self.changes.push_back(PeerChange::Gone(peer));
        }
    }

    pub(crate) fn poll(&mut self) -> Option<PeerChange> {
        self.changes.pop_front()
    }
}
