//! The xpress link model: one seeded model of a network path, used by every
//! driver — virtual time (the simulator), a real-time UDP relay, and a TUN
//! router between network namespaces.
//!
//! # Contract
//!
//! Sans-I/O and deterministic: [`Link::send`] takes a packet and the current
//! [`Instant`](xk_time::Instant), [`Link::poll`] hands packets back when their
//! arrival time has come, [`Link::next_arrival`] says when that is. No clock,
//! no sockets; randomness from a seed, one independent stream per impairment.
//! The stage order is documented in [`link`]; configuration in [`config`].
//! Drivers hold a [`Path`]: two independent directions, or one half-duplex
//! shared radio channel with p-persistent CSMA ([`channel`]) when the
//! configuration says `csma` (the packet-radio profiles do).
//!
//! ```
//! use xk_netemu::{Link, parse_line};
//! use xk_time::{Duration, Instant};
//!
//! let spec = parse_line("delay 10ms rate 8mbit").unwrap();
//! let mut link = Link::new(spec.params, spec.changes, Instant::ZERO, 42, "a->b").unwrap();
//! link.send(Instant::ZERO, vec![0u8; 1000]);          // 8,000 bits at 8 Mbit/s = 1 ms
//! assert_eq!(link.next_arrival(), Some(Instant::from_millis(11)));
//! let d = link.poll(Instant::from_millis(11)).unwrap();
//! assert_eq!(d.packet.len(), 1000);
//! ```

pub mod channel;
pub mod config;
pub mod link;
mod noise;
mod params;
pub mod path;
pub mod profiles;
mod show;

pub use channel::{AirDrop, Channel};
pub use config::{
    LinkSpec, parse_bytes, parse_duration, parse_line, parse_percent, parse_rate, parse_size, parse_toml,
};
pub use link::{Change, Delivery, DropReason, Fate, Link, LinkPacket, LinkStats, SendOutcome};
pub use params::{Blackout, ConfigError, Corrupt, CsmaParams, JitterDist, LinkParams, Loss, Slot};
pub use path::Path;
