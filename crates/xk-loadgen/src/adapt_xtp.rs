//! The XTP adapters: requests as XTP datagrams (service 1), as messages on
//! one XTP stream (service 4), or as transactions (service 3), through the
//! project's own driver and API.
//!
//! The datagram adapter drives one endpoint itself (one socket for the whole
//! run) rather than calling `xk_driver::api::send_datagram`, which binds a
//! socket per datagram. Each XTP datagram is a context of its own; the
//! receiving endpoint keeps each one for its linger (243 s with the default
//! retry schedule: it has no round-trip sample) and holds at most 1,024 per
//! peer, so after 1,024 datagrams from one socket the receiver refuses the
//! rest — and the sender, service 1 being unacknowledged, never hears of it.
//! Sends the local endpoint refuses are counted as errors with its reason.
//! See docs/LOADGEN.md ("Finding").

use std::io;
use std::net::SocketAddr;
use std::time::Duration as StdDuration;

use bytes::Bytes;
use xk_driver::api::{XtpStream, transaction};
use xk_driver::driver::UdpDriver;
use xk_time::Duration;
use xtp_proto::EndpointConfig;

use crate::adapt::{Adapter, Counts, Kind};
use crate::gar::Request;

/// How long a transaction may take before it counts as refused.
const TRANSACTION_TIMEOUT: StdDuration = StdDuration::from_secs(2);

fn seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

fn payload(r: &Request) -> Vec<u8> {
    let mut v = vec![0u8; r.size as usize];
    let seq = r.seq.to_le_bytes();
    let n = v.len().min(8);
    v[..n].copy_from_slice(&seq[..n]);
    v
}

pub(crate) fn open(kind: Kind, to: SocketAddr, port: u16) -> io::Result<Box<dyn Adapter>> {
    Ok(match kind {
        Kind::Xtp => {
            let local = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            Box::new(Datagrams {
                d: UdpDriver::bind(local, EndpointConfig::default(), seed())?,
                to,
                port,
                c: Counts::default(),
                since_turn: 0,
            })
        }
        Kind::XtpStream => {
            let s = XtpStream::connect(to, port).map_err(|e| {
                io::Error::new(e.kind(), format!("xtp-stream: connect {to} XTP port {port}: {e}"))
            })?;
            Box::new(Stream { s: Some(s), c: Counts::default() })
        }
        _ => Box::new(Transactions { to, port, c: Counts::default() }),
    })
}

struct Datagrams {
    d: UdpDriver,
    to: SocketAddr,
    port: u16,
    c: Counts,
    since_turn: u32,
}

impl Adapter for Datagrams {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        for r in batch {
            let now = self.d.now();
            self.c.calls += 1;
            match self.d.endpoint().send_datagram(now, self.to, self.port, Bytes::from(payload(r)), false) {
                Ok(_) => {
                    self.c.sent += 1;
                    self.c.bytes += u64::from(r.size);
                }
                Err(e) => self.c.error(1, format!("XTP endpoint refused the datagram: {e:?}")),
            }
            self.d.flush()?;
            // Let the endpoint expire lingering contexts now and then even
            // at full speed (a zero-wait turn reads what arrived).
            self.since_turn += 1;
            if self.since_turn >= 64 {
                self.since_turn = 0;
                self.d.turn(Duration::ZERO)?;
            }
        }
        Ok(())
    }
    fn idle(&mut self) {
        let _ = self.d.turn(Duration::ZERO);
    }
    fn finish(mut self: Box<Self>) -> Counts {
        let _ = self.d.flush();
        self.c
    }
}

struct Stream {
    s: Option<XtpStream>,
    c: Counts,
}

impl Adapter for Stream {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        let s = self.s.as_mut().expect("open until finish");
        for r in batch {
            self.c.calls += 1;
            s.send_message(&payload(r), None)
                .map_err(|e| io::Error::new(e.kind(), format!("xtp-stream: send: {e}")))?;
            self.c.sent += 1;
            self.c.bytes += u64::from(r.size);
        }
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Counts {
        if let Some(s) = self.s.take()
            && let Err(e) = s.close()
        {
            self.c.error(0, format!("xtp-stream: close: {e}"));
        }
        self.c
    }
}

struct Transactions {
    to: SocketAddr,
    port: u16,
    c: Counts,
}

impl Adapter for Transactions {
    fn execute(&mut self, batch: &[Request]) -> io::Result<()> {
        for r in batch {
            self.c.calls += 1;
            match transaction(self.to, self.port, &payload(r), TRANSACTION_TIMEOUT) {
                Ok(_) => {
                    self.c.sent += 1;
                    self.c.bytes += u64::from(r.size);
                }
                Err(e) => self.c.error(1, format!("xtp-transaction: {e}")),
            }
        }
        Ok(())
    }
    fn finish(self: Box<Self>) -> Counts {
        self.c
    }
}
