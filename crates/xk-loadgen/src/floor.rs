//! The floor: how many datagrams per second this machine's kernel takes
//! from one thread with nothing else in the loop — one `sendto` per
//! datagram, `sendmmsg` of 64, and GSO of 64 segments per call — to a
//! loopback socket that is never read (the kernel drops what overflows its
//! receive buffer; the sender is not slowed by a reader). P_max of the
//! matching adapter is read against these numbers, measured in the same
//! run.

use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nix::sys::socket::{ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage, sendmmsg, sendmsg};
use serde::{Deserialize, Serialize};

/// One floor measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Floor {
    /// `sendto`, `sendmmsg` or `gso`.
    pub mode: String,
    /// Datagram payload, bytes.
    pub size: u32,
    /// Datagrams sent.
    pub datagrams: u64,
    /// System calls made.
    pub calls: u64,
    /// Calls refused (counted, not retried).
    pub errors: u64,
    /// Seconds.
    pub seconds: f64,
    /// Datagrams per second.
    pub rate_per_s: f64,
}

const BATCH: usize = 64;

/// Measures the three floors with `size`-byte datagrams, each for about
/// `time` (at most `count` datagrams).
pub fn measure(size: u32, time: Duration, count: u64) -> std::io::Result<Vec<Floor>> {
    let sink = {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
        let _ = s.set_recv_buffer_size(1 << 16);
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().expect("literal").into())?;
        UdpSocket::from(s)
    };
    let to = sink.local_addr()?;
    let size = size.clamp(1, 1024) as usize;
    let mut out = Vec::new();
    for mode in ["sendto", "sendmmsg", "gso"] {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        let buf = vec![0x5au8; size * BATCH];
        let (mut datagrams, mut calls, mut errors) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        match mode {
            "sendto" => {
                while datagrams < count && (calls & 1023 != 0 || start.elapsed() < time) {
                    calls += 1;
                    match sock.send_to(&buf[..size], to) {
                        Ok(_) => datagrams += 1,
                        Err(_) => errors += 1,
                    }
                }
            }
            "sendmmsg" => {
                sock.connect(to)?;
                let slices: Vec<[IoSlice<'_>; 1]> =
                    (0..BATCH).map(|i| [IoSlice::new(&buf[i * size..(i + 1) * size])]).collect();
                let addrs: Vec<Option<SockaddrStorage>> = vec![None; BATCH];
                let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
                while datagrams < count && (calls & 63 != 0 || start.elapsed() < time) {
                    calls += 1;
                    match sendmmsg(sock.as_raw_fd(), &mut headers, &slices, &addrs, [], MsgFlags::empty()) {
                        Ok(r) => datagrams += r.count() as u64,
                        Err(_) => errors += 1,
                    }
                }
            }
            _ => {
                sock.connect(to)?;
                let seg = size as u16;
                let cmsg = [ControlMessage::UdpGsoSegments(&seg)];
                let iov = [IoSlice::new(&buf)];
                while datagrams < count && (calls & 63 != 0 || start.elapsed() < time) {
                    calls += 1;
                    match sendmsg::<SockaddrStorage>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None) {
                        Ok(_) => datagrams += BATCH as u64,
                        Err(_) => errors += 1,
                    }
                    if errors > 0 && datagrams == 0 && calls > 16 {
                        break; // no GSO here: every call fails
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        out.push(Floor {
            mode: mode.to_string(),
            size: size as u32,
            datagrams,
            calls,
            errors,
            seconds,
            rate_per_s: datagrams as f64 / seconds,
        });
    }
    Ok(out)
}
