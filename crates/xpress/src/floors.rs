//! The floors XTP is compared with, measured by the same tools: a raw UDP
//! echo (the cost of the kernel path alone) and kernel TCP.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use clap::ValueEnum;

/// The transport a tool measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Transport {
    /// XTP over UDP (this project).
    Xtp,
    /// Raw UDP datagrams (ping only): the floor.
    Udp,
    /// Kernel TCP.
    Tcp,
    /// QUIC (quinn), bulk only: needs `--quic-cert` (see `xpress serve`).
    Quic,
}

impl Transport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Transport::Xtp => "xtp",
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        }
    }
}

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

fn read_exact_spin(s: &mut TcpStream, buf: &mut [u8], busy: bool) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match read_spin(s, &mut buf[got..], busy)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

/// Serves TCP connections: first byte `e` echoes, `d` discards. `busy`: the
/// echo spins on non-blocking reads (the busy-poll floor).
pub(crate) fn tcp_server(l: TcpListener, busy: bool) {
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let mut s = s;
            let _ = s.set_nodelay(true);
            let mut mode = [0u8; 1];
            if s.read_exact(&mut mode).is_err() {
                return;
            }
            let busy = busy && mode[0] == b'e' && s.set_nonblocking(true).is_ok();
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = read_spin(&mut s, &mut buf, busy) {
                if n == 0 || (mode[0] == b'e' && s.write_all(&buf[..n]).is_err()) {
                    break;
                }
            }
        });
    }
}

/// Echoes UDP datagrams (`busy`: spinning on non-blocking receives).
pub(crate) fn udp_echo(s: UdpSocket, busy: bool) {
    let mut buf = vec![0u8; 65_536];
    let _ = s.set_nonblocking(busy);
    loop {
        match s.recv_from(&mut buf) {
            Ok((n, from)) => {
                let _ = s.send_to(&buf[..n], from);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(_) => return,
        }
    }
}

fn udp_echo_addr(to: SocketAddr) -> SocketAddr {
    SocketAddr::new(to.ip(), to.port().wrapping_add(1))
}

/// Round trips of `len`-byte datagrams to the raw UDP echo, in nanoseconds.
/// `busy`: spin on non-blocking receives.
pub(crate) fn ping_udp(to: SocketAddr, len: usize, count: u32, busy: bool) -> Result<Vec<u64>, String> {
    if len > 65_000 {
        return Err(format!("-l {len}: a raw UDP datagram holds at most 65,000 bytes here"));
    }
    let s = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    s.connect(udp_echo_addr(to)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2))).map_err(|e| e.to_string())?;
    s.set_nonblocking(busy).map_err(|e| e.to_string())?;
    let msg = vec![0x5au8; len];
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let t0 = Instant::now();
        s.send(&msg).map_err(|e| e.to_string())?;
        loop {
            match s.recv(&mut buf) {
                Ok(_) => break,
                Err(e)
                    if busy && e.kind() == std::io::ErrorKind::WouldBlock && t0.elapsed().as_secs() < 2 =>
                {
                    std::hint::spin_loop()
                }
                Err(e) => return Err(format!("udp ping {i}: no echo from {}: {e}", udp_echo_addr(to))),
            }
        }
        out.push(t0.elapsed().as_nanos() as u64);
    }
    Ok(out)
}

/// Round trips of `len`-byte messages over kernel TCP (Nagle off), in ns.
/// `busy`: spin on non-blocking reads.
pub(crate) fn ping_tcp(to: SocketAddr, len: usize, count: u32, busy: bool) -> Result<Vec<u64>, String> {
    let mut s = TcpStream::connect(to).map_err(|e| format!("tcp connect {to}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.write_all(b"e").map_err(|e| e.to_string())?;
    s.set_nonblocking(busy).map_err(|e| e.to_string())?;
    let msg = vec![0x5au8; len];
    let mut buf = vec![0u8; len];
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let t0 = Instant::now();
        s.write_all(&msg).map_err(|e| e.to_string())?;
        read_exact_spin(&mut s, &mut buf, busy).map_err(|e| e.to_string())?;
        out.push(t0.elapsed().as_nanos() as u64);
    }
    Ok(out)
}

/// Sends `bytes` (or, with `seconds`, as much as fits in that time) over
/// kernel TCP to the discard service; returns the bytes sent and the seconds
/// taken until the server closed its side (all data consumed).
/// `message`: write in pieces of this size with Nagle off (message traffic).
pub(crate) fn bulk_tcp(
    to: SocketAddr,
    bytes: u64,
    seconds: Option<f64>,
    message: Option<usize>,
) -> Result<(u64, f64), String> {
    let mut s = TcpStream::connect(to).map_err(|e| format!("tcp connect {to}: {e}"))?;
    s.write_all(b"d").map_err(|e| e.to_string())?;
    if message.is_some() {
        s.set_nodelay(true).map_err(|e| e.to_string())?;
    }
    let chunk = vec![0x5au8; message.unwrap_or(1 << 20)];
    let t0 = Instant::now();
    let mut left = if seconds.is_some() { u64::MAX } else { bytes };
    let mut sent = 0u64;
    while left > 0 {
        if seconds.is_some_and(|t| t0.elapsed().as_secs_f64() >= t) {
            break;
        }
        let n = left.min(chunk.len() as u64) as usize;
        s.write_all(&chunk[..n]).map_err(|e| e.to_string())?;
        left -= n as u64;
        sent += n as u64;
    }
    s.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    let mut rest = [0u8; 16];
    let _ = s.read(&mut rest); // returns 0 once the server has read everything and closed
    Ok((sent, t0.elapsed().as_secs_f64()))
}
