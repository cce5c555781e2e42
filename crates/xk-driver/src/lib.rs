//! Real I/O for xpress. This crate is where sockets and the wall clock enter;
//! everything it drives (the link model, later the XTP engine) stays sans-I/O.
//!
//! * [`udp`]: the XTP endpoint on a UDP socket (blocking, one thread).
//! * [`relay`]: driver 2 of the link model — a real-time UDP relay that applies
//!   one [`xk_netemu::Link`] per direction between a client and a server and
//!   measures its own timing accuracy.

pub mod batch;
pub mod clock;
pub mod relay;
pub mod udp;
