//! The xpress applications as a library: what `xpress serve`, `ping` and
//! `bulk` do, callable with typed configurations and returning typed,
//! serialisable results — for the command line (which only parses flags
//! and prints) and for the laboratory (which runs them in-process).
//!
//! | module | what |
//! |---|---|
//! | [`server`] | echo, discard and verify over XTP; the TCP and UDP floors; the QUIC peer |
//! | [`ping`] | request/reply round trips over XTP, raw UDP or kernel TCP, with ping's conventions |
//! | [`bulk`] | one transfer with iperf3's conventions (`-n`/`-t`, intervals, the receiver's count) |
//! | [`addr`] | host names, IPv6 and the default port |
//! | [`format`] | numbers with three significant figures and a readable unit |
//! | [`close`] | why a context ended, as a sentence |
//!
//! Every run takes a `stop` flag (set it from a Ctrl-C handler): the run
//! then ends early and still returns what it measured, marked interrupted.
//!
//! A server and two clients in one process, on loopback:
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use xk_apps::{Amount, BulkConfig, PingConfig, ServeConfig, Server};
//!
//! static STOP: AtomicBool = AtomicBool::new(false);
//! let server = Server::bind(&ServeConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
//! let addr = server.services()[0].addr; // XTP first, then tcp, udp-echo
//! let serving = std::thread::spawn(move || server.run(&STOP, |r| println!("{} bytes in", r.bytes)));
//!
//! let go = AtomicBool::new(false); // set it to stop a run early
//! let bulk = xk_apps::bulk::run(&BulkConfig::new(addr, Amount::Bytes(1 << 20)), &go, |_| {}).unwrap();
//! assert_eq!(bulk.receiver_bytes, Some(1 << 20)); // the server's own count
//! let ping = xk_apps::ping::run(&PingConfig::new(addr, 10), &go, |_| {}).unwrap();
//! assert_eq!(ping.received, 10);
//! println!("{}", serde_json::to_string(&bulk).unwrap()); // what `bulk -J` prints
//!
//! STOP.store(true, Ordering::Relaxed);
//! serving.join().unwrap().unwrap();
//! ```
//!
//! This crate does I/O and reads the wall clock (it sits with `xk-driver`
//! in the driver layer); sizes and rates are parsed by the link model's one
//! parser, [`xk_netemu::parse_bytes`] and [`xk_netemu::parse_rate`].

pub mod addr;
pub mod bulk;
mod bulk_quic;
mod bulk_tcp;
mod bulk_xtp;
mod capture;
pub mod client;
pub mod close;
mod counters;
mod feed;
pub mod floors;
pub mod format;
pub mod graph_app;
pub mod pcap_file;
pub mod ping;
mod quic;
pub mod server;
pub mod stats;
pub mod tcp_info;
pub mod transport;

pub use bulk::{Amount, BulkConfig, BulkResult, Direction, Interval, StreamResult};
pub use client::PathConfig;
pub use ping::{PingConfig, PingResult, Reply};
pub use server::{EngineReport, Received, ServeConfig, Server, Service};
pub use transport::Transport;
