//! One-shot services: datagrams (1, 2) and transactions (3).

use std::io::{self, Read};
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig, Service};

use super::{Mode, Shared, TURN, XtpStream, any_local, close_error, timed_out};

fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))
}

/// Sends `data` as one datagram to XTP `port` at `addr`. Unacknowledged
/// (service 1) returns once it left; acknowledged (service 2) waits for the
/// receiver's acknowledgement, up to `timeout`, and fails with the reason
/// (refusal, unreachable peer) otherwise.
pub fn send_datagram(
    addr: impl ToSocketAddrs,
    port: u16,
    data: &[u8],
    acknowledged: bool,
    timeout: std::time::Duration,
) -> io::Result<()> {
    send(Mode::integrated(), EndpointConfig::default(), addr, port, data, acknowledged, timeout)
}

/// [`send_datagram`] with the endpoint in `mode`.
pub(super) fn send(
    mode: Mode,
    ep: EndpointConfig,
    addr: impl ToSocketAddrs,
    port: u16,
    data: &[u8],
    acknowledged: bool,
    timeout: std::time::Duration,
) -> io::Result<()> {
    let peer = resolve(addr)?;
    let shared = Shared::bind(any_local(peer), ep, mode)?;
    let mut s = shared.borrow_mut();
    let now = s.now();
    let ctx = s.core.send_datagram(peer, port, Bytes::copy_from_slice(data), acknowledged)?;
    let ctx = s.opened(ctx);
    s.core.flush()?;
    // Service 1 is done once sent; on the engine thread, "sent" is when the
    // engine has the block (it sends at once, and serves the context until
    // it ends even after this object is gone).
    if !acknowledged {
        return Ok(());
    }
    let deadline = now + Duration::from_nanos(timeout.as_nanos() as u64);
    loop {
        if let Some(e) = s.failure(ctx) {
            return Err(e);
        }
        if let (_, Some(reason)) = s.status(ctx) {
            return close_error(reason).map_or(Ok(()), Err);
        }
        if s.now() >= deadline {
            return Err(timed_out("acknowledged datagram"));
        }
        s.pump(TURN)?;
    }
}

/// A transaction (service 3): sends `request` to XTP `port` at `addr` and
/// returns the whole response. The server side is an
/// [`super::XtpListener::accept_timeout`] returning [`Service::Transaction`]:
/// read the request to its end, write the response, close.
pub fn transaction(
    addr: impl ToSocketAddrs,
    port: u16,
    request: &[u8],
    timeout: std::time::Duration,
) -> io::Result<Vec<u8>> {
    self::request(Mode::integrated(), EndpointConfig::default(), addr, port, request, timeout)
}

/// [`transaction`] with the endpoint in `mode`.
pub(super) fn request(
    mode: Mode,
    ep: EndpointConfig,
    addr: impl ToSocketAddrs,
    port: u16,
    request: &[u8],
    timeout: std::time::Duration,
) -> io::Result<Vec<u8>> {
    let peer = resolve(addr)?;
    let shared = Shared::bind(any_local(peer), ep, mode)?;
    let ctx = {
        let mut s = shared.borrow_mut();
        let ctx = s.core.connect(peer, port, ContextConfig::new(Service::Transaction))?;
        let ctx = s.opened(ctx);
        let deadline = Some(s.now() + xk_time::Duration::from_nanos(timeout.as_nanos() as u64));
        s.write(ctx, request, true, None, deadline)?;
        s.core.close(ctx)?;
        ctx
    };
    let mut stream = XtpStream::from_parts(shared, ctx, peer);
    stream.set_timeout(Some(timeout));
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(response)
}
