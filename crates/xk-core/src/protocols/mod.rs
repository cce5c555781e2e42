//! Small protocols that exercise the interface: enough to build a working stack
//! and to measure the framework's own costs (experiment E9).
//!
//! ```text
//!   app / Echo
//!       |
//!      Mux      4-byte header: source port, destination port
//!       |
//!    LoopLink   2-byte header: protocol type; frames go to the device queue
//! ```
//!
//! [`census`] is not a toy: a pass-through datagram layer counting frames and
//! bytes each way, registered in XTP's graphs (`xtp_proto::stack::registry`,
//! `app -> xtp -> census -> udp`).

pub mod census;
mod echo;
mod loop_link;
mod mux;

pub use echo::Echo;
pub use loop_link::LoopLink;
pub use mux::Mux;

/// The toys' registry (`app`, `echo`, `mux`, `loop`), for graphs of toys
/// (`tests/stack.rs` builds the echo stack from descriptions with it); the
/// constructors are given the host's number (`mux` seeds its demux map
/// with it). They stay out of XTP's registry: their frames carry no peer
/// address, so no datagram device can drive them.
pub fn toys<M: xk_msg::Msg>() -> crate::registry::Registry<M, u64> {
    crate::registry::Registry::new()
        .protocol(echo::KIND, echo::make)
        .protocol(mux::KIND, mux::make)
        .protocol(loop_link::KIND, loop_link::make)
}
