//! The sink (`xpress loadgen sink`): receives what a run sends, timestamps
//! every arrival and reports the receiver's view — count, bytes, rate
//! between the first and last arrival, the inter-arrival distribution, and
//! loss and reordering from the sequence numbers the adapters write.
//!
//! Bounded like a run: it ends after `duration`, after `idle` without
//! traffic once something arrived, or after `count` requests.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::stats::{Histogram, Summary};

/// What the sink receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proto {
    /// UDP datagrams (the udp, udp-mmsg and udp-gso adapters).
    Udp,
    /// TCP connections (the tcp adapter): bytes, not requests.
    Tcp,
    /// XTP datagrams.
    Xtp,
    /// XTP streams: each message a request.
    XtpStream,
    /// XTP transactions: each answered with one byte.
    XtpTransaction,
}

impl Proto {
    /// Parses a name (the adapter's name is accepted too).
    pub fn parse(s: &str) -> Result<Proto, String> {
        Ok(match s {
            "udp" | "udp-mmsg" | "udp-gso" => Proto::Udp,
            "tcp" => Proto::Tcp,
            "xtp" => Proto::Xtp,
            "xtp-stream" => Proto::XtpStream,
            "xtp-transaction" => Proto::XtpTransaction,
            _ => return Err(format!("--proto {s}: not one of udp, tcp, xtp, xtp-stream, xtp-transaction")),
        })
    }
}

/// How a sink runs.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// What to receive.
    pub proto: Proto,
    /// XTP port to listen on.
    pub xtp_port: u16,
    /// Longest run.
    pub duration: Duration,
    /// End after this long without traffic, once something arrived.
    pub idle: Duration,
    /// End after this many requests (0: no bound).
    pub count: u64,
}

/// The receiver's view.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SinkReport {
    /// What it received.
    pub proto: String,
    /// Where it listened.
    pub listen: String,
    /// Requests (datagrams, messages, transactions; for TCP: reads).
    pub received: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Seconds from the first to the last arrival.
    pub seconds: f64,
    /// Requests per second over that time.
    pub rate_per_s: f64,
    /// Sequence numbers missing between the least and the greatest seen
    /// (datagram protocols with payloads of 8 bytes or more).
    pub lost: u64,
    /// Arrivals with a lower sequence number than one before them.
    pub reordered: u64,
    /// Inter-arrival times.
    pub interarrival: Summary,
    /// Why it ended.
    pub stopped: String,
}

struct Tally {
    start: Instant,
    first: Option<u64>,
    last: u64,
    received: u64,
    bytes: u64,
    hist: Histogram,
    min_seq: u64,
    max_seq: u64,
    seqs: u64,
    reordered: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            start: Instant::now(),
            first: None,
            last: 0,
            received: 0,
            bytes: 0,
            hist: Histogram::default(),
            min_seq: u64::MAX,
            max_seq: 0,
            seqs: 0,
            reordered: 0,
        }
    }

    fn arrival(&mut self, data: &[u8], with_seq: bool) {
        let now = self.start.elapsed().as_nanos() as u64;
        if self.first.is_none() {
            self.first = Some(now);
        } else {
            self.hist.record(now - self.last);
        }
        self.last = now;
        self.received += 1;
        self.bytes += data.len() as u64;
        if with_seq && data.len() >= 8 {
            let seq = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
            if self.seqs > 0 && seq < self.max_seq {
                self.reordered += 1;
            }
            self.min_seq = self.min_seq.min(seq);
            self.max_seq = self.max_seq.max(seq);
            self.seqs += 1;
        }
    }

    fn since_last(&self) -> Option<Duration> {
        self.first
            .map(|_| Duration::from_nanos((self.start.elapsed().as_nanos() as u64).saturating_sub(self.last)))
    }

    fn report(self, proto: Proto, listen: String, stopped: &str) -> SinkReport {
        let seconds = self.first.map_or(0.0, |f| (self.last - f) as f64 / 1e9);
        let lost =
            if self.seqs > 0 { (self.max_seq - self.min_seq + 1).saturating_sub(self.seqs) } else { 0 };
        SinkReport {
            proto: format!("{proto:?}").to_lowercase(),
            listen,
            received: self.received,
            bytes: self.bytes,
            seconds,
            rate_per_s: if seconds > 0.0 { (self.received - 1) as f64 / seconds } else { 0.0 },
            lost,
            reordered: self.reordered,
            interarrival: self.hist.summary(0),
            stopped: stopped.to_string(),
        }
    }

    /// Why to stop now, if it is time.
    fn done(&self, cfg: &SinkConfig, stop: &AtomicBool) -> Option<&'static str> {
        if stop.load(Ordering::Relaxed) {
            return Some("stopped");
        }
        if cfg.count > 0 && self.received >= cfg.count {
            return Some("count reached");
        }
        if self.start.elapsed() >= cfg.duration {
            return Some("duration reached");
        }
        if self.since_last().is_some_and(|d| d >= cfg.idle) {
            return Some("idle");
        }
        None
    }
}

/// A bound sink: where it listens, then [`Sink::run`].
pub struct Sink {
    cfg: SinkConfig,
    inner: Inner,
}

enum Inner {
    Udp(UdpSocket),
    Tcp(TcpListener),
    Xtp(xk_driver::api::XtpListener),
}

/// How long a blocking receive waits before the bounds are looked at.
const POLL: Duration = Duration::from_millis(50);

impl Sink {
    /// Binds `listen` for `cfg.proto`.
    pub fn bind(listen: SocketAddr, cfg: SinkConfig) -> io::Result<Sink> {
        let inner = match cfg.proto {
            Proto::Udp => {
                let s =
                    socket2::Socket::new(socket2::Domain::for_address(listen), socket2::Type::DGRAM, None)?;
                // A deep receive buffer: bursts from sendmmsg and GSO arrive
                // faster than one reader drains them.
                let _ = s.set_recv_buffer_size(16 << 20);
                s.bind(&listen.into())?;
                let s: UdpSocket = s.into();
                s.set_read_timeout(Some(POLL))?;
                Inner::Udp(s)
            }
            Proto::Tcp => {
                let l = TcpListener::bind(listen)?;
                l.set_nonblocking(true)?;
                Inner::Tcp(l)
            }
            _ => Inner::Xtp(xk_driver::api::XtpListener::bind(listen, cfg.xtp_port)?),
        };
        Ok(Sink { cfg, inner })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Inner::Udp(s) => s.local_addr(),
            Inner::Tcp(l) => l.local_addr(),
            Inner::Xtp(l) => l.local_addr(),
        }
    }

    /// Receives until a bound is reached or `stop` is set.
    pub fn run(self, stop: Arc<AtomicBool>) -> io::Result<SinkReport> {
        let listen = self.local_addr()?.to_string();
        let cfg = self.cfg;
        let mut t = Tally::new();
        let why = match self.inner {
            Inner::Udp(s) => {
                let mut buf = vec![0u8; 65_536];
                loop {
                    if let Some(w) = t.done(&cfg, &stop) {
                        break w;
                    }
                    match s.recv_from(&mut buf) {
                        Ok((n, _)) => t.arrival(&buf[..n], true),
                        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Inner::Tcp(l) => loop {
                if let Some(w) = t.done(&cfg, &stop) {
                    break w;
                }
                match l.accept() {
                    Ok((mut c, _)) => {
                        c.set_read_timeout(Some(POLL))?;
                        let mut buf = vec![0u8; 65_536];
                        // One connection at a time: the tcp adapter opens one.
                        loop {
                            if let Some(w) = t.done(&cfg, &stop) {
                                return Ok(t.report(cfg.proto, listen, w));
                            }
                            match c.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => t.arrival(&buf[..n], false),
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                                    ) => {}
                                Err(e) => return Err(e),
                            }
                        }
                        break "connection closed";
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => return Err(e),
                }
            },
            Inner::Xtp(mut l) => loop {
                if let Some(w) = t.done(&cfg, &stop) {
                    break w;
                }
                match cfg.proto {
                    Proto::Xtp => match l.recv_datagram(Some(POLL)) {
                        Ok((_, d)) => t.arrival(&d, true),
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                        Err(e) => return Err(e),
                    },
                    _ => match l.accept_timeout(Some(POLL)) {
                        Ok((mut s, _, _)) => {
                            if cfg.proto == Proto::XtpStream {
                                s.set_timeout(Some(POLL));
                                loop {
                                    if let Some(w) = t.done(&cfg, &stop) {
                                        return Ok(t.report(cfg.proto, listen, w));
                                    }
                                    match s.recv_message() {
                                        Ok(Some(m)) => t.arrival(&m.data, true),
                                        Ok(None) => break,
                                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                                        Err(e) => return Err(e),
                                    }
                                }
                            } else {
                                let mut req = Vec::new();
                                s.read_to_end(&mut req)?;
                                t.arrival(&req, true);
                                std::io::Write::write_all(&mut s, b"k")?;
                                let _ = s.close();
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                        Err(e) => return Err(e),
                    },
                }
            },
        };
        Ok(t.report(cfg.proto, listen, why))
    }
}
