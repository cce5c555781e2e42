//! xk-ftp — an RFC 959 FTP server and client over any byte-stream transport:
//! kernel TCP (interoperable with standard clients such as curl and Python's
//! ftplib) or XTP (the E3 application of seed 003).
//!
//! # Contract
//!
//! * [`server::serve`] runs a server on a [`net::Net`] (TCP or XTP) until its
//!   stop signal: one tokio task per session, every path confined to the
//!   root directory ([`vpath`]), data connections only between the control
//!   connection's two hosts (no FTP bounce, no PASV theft), limits on
//!   sessions and on failed logins, each refusal a reply that says which
//!   limit.
//! * [`client::Client`] speaks to any RFC 959 server: login, EPSV (falling
//!   back to PASV), RETR with REST, STOR, APPE, LIST/NLST/MLSD, SIZE, MKD,
//!   RMD, DELE, RNFR/RNTO.
//!
//! Interoperability is tested against real software (`tests/interop.rs`):
//! curl, lftp and Python's ftplib against our server; vsftpd and pyftpdlib
//! against our client. ABOR is read during a transfer and as TCP urgent
//! data (as ftplib sends it).
//!
//! Explicit FTPS (RFC 4217, [`tls`]) is an option of both sides: AUTH TLS
//! (234), PBSZ 0, PROT P or C, CCC refused (533). Data connections under
//! PROT P are TLS with the server as TLS server, and must resume the
//! control connection's TLS session (as vsftpd's `require_ssl_reuse`); a
//! server with `required` refuses USER/PASS (530), PROT C (534) and clear
//! data connections (522) before AUTH TLS. TLS runs over either transport
//! (over XTP it wraps the XTP stream).
//!
//! Concurrency: tokio tasks, because the XTP side is the async API
//! (`xk_driver::aio`), whose streams can be spread over tasks — the blocking
//! XTP API keeps every stream of a listener on one thread.
//!
//! Over XTP, a host's address is its UDP socket address; the control
//! connection is XTP port 21 there. A passive data connection is a fresh
//! XTP endpoint: EPSV's port-only reply (`229 (|||p|)`) names its UDP port,
//! and the client opens XTP port 20 (ftp-data) at that UDP port on the
//! control connection's host. PASV names the same UDP port in its six-number
//! form. Active mode (PORT/EPRT) is TCP only.
//!
//! [`net::Net::Sim`] runs the same server and client over XTP on a simulated
//! network in virtual time (`xk_driver::aio::SimNet`: seeded loss, delay and
//! rate limits; the same seed, the same run), which is how the conformance
//! tests run over XTP in the simulator (`tests/ftp.rs`).

pub mod client;
pub mod fuzzing;
pub mod net;
pub mod proto;
pub mod server;
mod tickets;
pub mod tls;
pub mod vpath;
