//! One-shot services: datagrams (1, 2) and transactions (3).

use std::io::{self, Read};
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig, Service};

use super::{Shared, TURN, XtpStream, close_error, time_seed, timed_out};
use crate::driver::UdpDriver;

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
    let peer = resolve(addr)?;
    let local = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let shared = Shared::new(UdpDriver::bind(local, EndpointConfig::default(), time_seed())?);
    let mut s = shared.borrow_mut();
    let now = s.now();
    let ctx = s
        .driver
        .endpoint()
        .send_datagram(now, peer, port, Bytes::copy_from_slice(data), acknowledged)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
    s.driver.flush()?;
    if !acknowledged {
        return Ok(());
    }
    let deadline = now + Duration::from_nanos(timeout.as_nanos() as u64);
    loop {
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
    let peer = resolve(addr)?;
    let local = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let shared = Shared::new(UdpDriver::bind(local, EndpointConfig::default(), time_seed())?);
    let ctx = {
        let mut s = shared.borrow_mut();
        let now = s.now();
        let ep = s.driver.endpoint();
        let ctx = ep
            .connect(now, peer, port, ContextConfig::new(Service::Transaction))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e:?}")))?;
        ep.write(now, ctx, Bytes::copy_from_slice(request), true, None)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        ep.close(now, ctx);
        ctx
    };
    let mut stream = XtpStream::from_parts(shared, ctx, peer);
    stream.set_timeout(Some(timeout));
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(response)
}
