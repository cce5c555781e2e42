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

mod echo;
mod loop_link;
mod mux;
pub mod tap;

pub use echo::Echo;
pub use loop_link::LoopLink;
pub use mux::Mux;
pub use tap::Tap;
