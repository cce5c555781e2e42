//! Registration over the daemon's Unix socket, both sides.
//!
//! The client connects and sends a hello (16 bytes: magic, version, what
//! it wants). The daemon checks the client's credentials (`SO_PEERCRED`:
//! the daemon's own user, or root), then either answers a status request
//! with one line of JSON and closes, or registers the client: it creates
//! the client's segment and eventfd and answers with the ring settings and
//! the UDP address, passing three descriptors with `SCM_RIGHTS` — the
//! segment (a sealed memfd), the client's eventfd, the daemon's eventfd.
//! The connection then stays open and silent: its end is how each side
//! learns that the other is gone. A refusal is a text the client shows.

use std::io::{self, IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

use super::codec::{Reader, Writer};

const HELLO: u64 = u64::from_le_bytes(*b"XPRHELO1");
const ACK: u64 = u64::from_le_bytes(*b"XPRACK01");
const VERSION: u32 = 1;

/// What a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Rings of its own.
    Register,
    /// The daemon's counters (JSON).
    Status,
}

pub(crate) fn hello(ask: Ask) -> [u8; 16] {
    let mut w = Writer::default();
    w.u64(HELLO).u32(VERSION).u32(match ask {
        Ask::Register => 1,
        Ask::Status => 2,
    });
    let mut b = [0u8; 16];
    b.copy_from_slice(&w.0);
    b
}

/// Reads a hello (the daemon's side); `Err` is the refusal text.
pub(crate) fn parse_hello(b: &[u8; 16]) -> Result<Ask, String> {
    let mut r = Reader::new(b);
    let (magic, version, what) =
        (r.u64("magic").unwrap_or(0), r.u32("version").unwrap_or(0), r.u32("what").unwrap_or(0));
    if magic != HELLO {
        return Err("not an xpress client (bad hello)".into());
    }
    if version != VERSION {
        return Err(format!(
            "client speaks version {version}, this daemon {VERSION}: use the same xpress build"
        ));
    }
    match what {
        1 => Ok(Ask::Register),
        2 => Ok(Ask::Status),
        w => Err(format!("unknown request {w}")),
    }
}

/// What a registered client is told.
pub(crate) struct Welcome {
    pub(crate) session: u64,
    pub(crate) local: SocketAddr,
    pub(crate) read_credit: u64,
    pub(crate) write_bound: u64,
}

/// Sends the welcome and the three descriptors (the daemon's side).
pub(crate) fn send_welcome(
    sock: &UnixStream,
    w: &Welcome,
    seg: BorrowedFd<'_>,
    client_bell: BorrowedFd<'_>,
    daemon_bell: BorrowedFd<'_>,
) -> io::Result<()> {
    let mut m = Writer::default();
    m.u64(ACK).u8(0).u64(w.session).addr(w.local).u64(w.read_credit).u64(w.write_bound);
    let fds = [seg, client_bell, daemon_bell];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    cmsg.push(SendAncillaryMessage::ScmRights(&fds));
    let n = rustix::net::sendmsg(sock, &[IoSlice::new(&m.0)], &mut cmsg, SendFlags::NOSIGNAL)?;
    if n != m.0.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "welcome cut short"));
    }
    Ok(())
}

/// Sends a refusal text (the daemon's side).
pub(crate) fn send_refusal(mut sock: &UnixStream, text: &str) {
    let mut m = Writer::default();
    m.u64(ACK).u8(1).text(text);
    let _ = sock.write_all(&m.0);
}

/// Writes a last word on a registered client's socket before the daemon
/// closes it (the client shows it in its "went away" error).
pub(crate) fn send_refusal_raw(mut sock: &UnixStream, text: &str) {
    let _ = sock.write_all(text.as_bytes());
}

/// Reads the daemon's answer (the client's side): the welcome and the
/// segment, client eventfd and daemon eventfd, or the refusal as an error.
pub(crate) fn recv_welcome(sock: &UnixStream) -> io::Result<(Welcome, [OwnedFd; 3])> {
    let mut buf = [0u8; 2048];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        sock.as_fd(),
        &mut [IoSliceMut::new(&mut buf)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = msg {
            fds.extend(it);
        }
    }
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("daemon's answer: {what}"));
    let mut r = Reader::new(&buf[..got.bytes]);
    if got.bytes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "the daemon closed the connection without answering",
        ));
    }
    if r.u64("magic").ok() != Some(ACK) {
        return Err(bad("not an xpress daemon"));
    }
    match r.u8("status").map_err(|e| bad(&e.to_string()))? {
        0 => {}
        _ => {
            let text = r.text("refusal").unwrap_or_else(|_| "refused".into());
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the daemon refused: {text}"),
            ));
        }
    }
    let e = |x: crate::engine::BlockError| bad(&x.to_string());
    let w = Welcome {
        session: r.u64("session").map_err(e)?,
        local: r.addr("address").map_err(e)?,
        read_credit: r.u64("read credit").map_err(e)?,
        write_bound: r.u64("write bound").map_err(e)?,
    };
    let fds: [OwnedFd; 3] =
        fds.try_into().map_err(|v: Vec<OwnedFd>| bad(&format!("{} descriptors, not 3", v.len())))?;
    Ok((w, fds))
}
