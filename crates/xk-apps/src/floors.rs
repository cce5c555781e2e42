//! The floors XTP is compared with, measured by the same tools: a raw UDP
//! echo (the cost of the kernel path alone) and kernel TCP.
//!
//! The TCP server takes a one-byte command: `e` echoes; `d` discards and,
//! when the client has shut down its side, answers the 8-byte big-endian
//! count of what it received — the receiver's own view, as XTP's discard
//! service and the QUIC peer give it; `s` reads a 13-byte source request
//! (bytes or time, as XTP's source service) and sends that (`bulk -R`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::feed::SourceRequest;
use crate::ping::Echo;

/// Reads once; with `busy`, spins on a non-blocking socket instead of
/// sleeping in the kernel.
fn read_spin(s: &mut TcpStream, buf: &mut [u8], busy: bool) -> std::io::Result<usize> {
    loop {
        match s.read(buf) {
            Err(e) if busy && e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            r => return r,
        }
    }
}

/// Serves TCP connections: first byte `e` echoes, `d` discards (then
/// answers the count). `busy`: the echo spins on non-blocking reads (the
/// busy-poll floor). Stops accepting once `done` is set.
pub fn tcp_server(l: TcpListener, busy: bool, done: &AtomicBool) {
    // Accept without blocking, waiting in poll(2) for at most 50 ms at a
    // time: a connection is taken at once (a sleep between tries held the
    // first ping's reply and a short transfer's count up to 50 ms), and
    // `done` is noticed within 50 ms.
    let _ = l.set_nonblocking(true);
    while !done.load(Ordering::Relaxed) {
        let s = match l.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
                let mut fds = [PollFd::new(std::os::fd::AsFd::as_fd(&l), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::from(50u8));
                continue;
            }
            Err(_) => continue,
        };
        let _ = s.set_nonblocking(false);
        std::thread::spawn(move || {
            let mut s = s;
            let _ = s.set_nodelay(true);
            let mut mode = [0u8; 1];
            if s.read_exact(&mut mode).is_err() {
                return;
            }
            if mode[0] == b's' {
                source(s);
                return;
            }
            let echo = mode[0] == b'e';
            let busy = busy && echo && s.set_nonblocking(true).is_ok();
            let mut buf = vec![0u8; 1 << 16];
            let mut total = 0u64;
            loop {
                match read_spin(&mut s, &mut buf, busy) {
                    Ok(0) => {
                        if !echo {
                            let _ = s.write_all(&total.to_be_bytes());
                        }
                        return;
                    }
                    Ok(n) => {
                        total += n as u64;
                        if echo && s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
    }
}

/// The TCP source: sends what the request asks, then closes.
fn source(mut s: TcpStream) {
    let mut req = [0u8; SourceRequest::LEN];
    if s.read_exact(&mut req).is_err() {
        return;
    }
    let Some(r) = SourceRequest::decode(&req) else { return };
    let deadline = r.timed.then(|| Instant::now() + Duration::from_millis(r.amount.min(3_600_000)));
    let limit = if r.timed { u64::MAX } else { r.amount };
    let chunk = vec![0x5au8; 1 << 16];
    let mut sent = 0u64;
    while sent < limit && deadline.is_none_or(|d| Instant::now() < d) {
        let n = (limit - sent).min(chunk.len() as u64) as usize;
        match s.write(&chunk[..n]) {
            Ok(w) => sent += w as u64,
            Err(_) => return,
        }
    }
    // The sender's own counters, when asked: after the data, as a trailer
    // the client takes off the end of the stream.
    if r.counters
        && let Some(c) = crate::tcp_info::TcpCounters::of(&s, sent)
        && s.write_all(&crate::tcp_info::trailer(&c)).is_err()
    {
        return;
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    // Wait for the client's close, so the last bytes are not cut by a reset.
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut rest = [0u8; 64];
    while matches!(s.read(&mut rest), Ok(n) if n > 0) {}
}

/// Echoes UDP datagrams (`busy`: spinning on non-blocking receives) until
/// `done` is set.
pub fn udp_echo(s: UdpSocket, busy: bool, done: &AtomicBool) {
    let mut buf = vec![0u8; 65_536];
    let _ = s.set_nonblocking(busy);
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    while !done.load(Ordering::Relaxed) {
        match s.recv_from(&mut buf) {
            Ok((n, from)) => {
                let _ = s.send_to(&buf[..n], from);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                std::hint::spin_loop()
            }
            // An ICMP error of an earlier reply (the client went away).
            Err(_) => {}
        }
    }
}

/// Where `xpress serve` puts the UDP echo by default: the next port up
/// from the XTP/TCP port (`None` for 65535, which has no next port).
pub fn default_udp_echo_port(port: u16) -> Option<u16> {
    port.checked_add(1)
}

/// Ping over raw UDP datagrams: each carries its sequence number in its
/// first bytes, so a late or reordered reply is told from the awaited one.
pub(crate) struct UdpEcho {
    s: UdpSocket,
    len: usize,
    busy: bool,
    buf: Vec<u8>,
}

impl UdpEcho {
    pub(crate) fn open(to: SocketAddr, len: usize, busy: bool) -> Result<UdpEcho, String> {
        if len > 65_000 {
            return Err(format!("-l {len}: a raw UDP datagram holds at most 65,000 bytes here"));
        }
        let s = UdpSocket::bind(crate::addr::any_for(to)).map_err(|e| format!("udp bind: {e}"))?;
        s.connect(to).map_err(|e| format!("udp connect {to}: {e}"))?;
        s.set_nonblocking(busy).map_err(|e| e.to_string())?;
        Ok(UdpEcho { s, len, busy, buf: vec![0u8; 65_536] })
    }

    fn tag(&self, seq: u64) -> Vec<u8> {
        let mut m = vec![0x5au8; self.len];
        let n = self.len.min(8);
        m[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
        m
    }
}

impl Echo for UdpEcho {
    fn send(&mut self, seq: u64) -> Result<(), String> {
        let m = self.tag(seq);
        self.s.send(&m).map(|_| ()).map_err(|e| format!("udp send: {e}"))
    }

    fn wait(&mut self, until: Instant, stop: &AtomicBool) -> Result<Vec<u64>, String> {
        loop {
            let now = Instant::now();
            if now >= until || stop.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            if !self.busy {
                // Wake at least every 50 ms to notice Ctrl-C.
                let t = (until - now).min(Duration::from_millis(50)).max(Duration::from_micros(1));
                self.s.set_read_timeout(Some(t)).map_err(|e| e.to_string())?;
            }
            match self.s.recv(&mut self.buf) {
                Ok(n) => {
                    let k = n.min(self.len).min(8);
                    let mut seq = [0u8; 8];
                    seq[..k].copy_from_slice(&self.buf[..k]);
                    return Ok(vec![u64::from_le_bytes(seq)]);
                }
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if self.busy {
                        std::hint::spin_loop();
                    }
                }
                // The kernel reports an ICMP port unreachable of an earlier
                // send here: no echo is listening.
                Err(e) => {
                    return Err(format!(
                        "udp echo at {}: {e}",
                        self.s.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string())
                    ));
                }
            }
        }
    }

    fn seq_bits(&self) -> u32 {
        (self.len.min(8) * 8) as u32
    }
}

/// Ping over kernel TCP (Nagle off): replies come back in order, so the
/// k-th `len` bytes answer request k.
pub(crate) struct TcpEcho {
    s: TcpStream,
    len: usize,
    busy: bool,
    got: u64,
    buf: Vec<u8>,
}

impl TcpEcho {
    pub(crate) fn open(to: SocketAddr, len: usize, busy: bool) -> Result<TcpEcho, String> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))
            .map_err(|e| format!("tcp connect {to}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.write_all(b"e").map_err(|e| e.to_string())?;
        s.set_nonblocking(busy).map_err(|e| e.to_string())?;
        Ok(TcpEcho { s, len, busy, got: 0, buf: vec![0u8; len.max(1 << 16)] })
    }
}

impl Echo for TcpEcho {
    fn send(&mut self, _seq: u64) -> Result<(), String> {
        let m = vec![0x5au8; self.len];
        self.s.write_all(&m).map_err(|e| format!("tcp send: {e}"))
    }

    fn wait(&mut self, until: Instant, stop: &AtomicBool) -> Result<Vec<u64>, String> {
        let before = self.got / self.len as u64;
        loop {
            let now = Instant::now();
            if now >= until || stop.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            if !self.busy {
                let t = (until - now).min(Duration::from_millis(50)).max(Duration::from_micros(1));
                self.s.set_read_timeout(Some(t)).map_err(|e| e.to_string())?;
            }
            match self.s.read(&mut self.buf) {
                Ok(0) => return Err("tcp: the server closed the connection".into()),
                Ok(n) => {
                    self.got += n as u64;
                    let after = self.got / self.len as u64;
                    if after > before {
                        return Ok((before..after).collect());
                    }
                }
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if self.busy {
                        std::hint::spin_loop();
                    }
                }
                Err(e) => return Err(format!("tcp receive: {e}")),
            }
        }
    }
}
