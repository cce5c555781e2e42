//! [`XtpListener`]: accepts streams and transactions, receives datagrams.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, EndpointConfig, Service};

use super::{Cid, Handle, Mode, Shared, TURN, XtpStream, timed_out};

/// Listens on a UDP address for XTP contexts addressed to one XTP port.
pub struct XtpListener {
    shared: Handle,
    /// Datagram contexts still delivering: `(ctx, peer, data so far)`.
    partial: Vec<(Cid, SocketAddr, Vec<u8>)>,
    datagrams: VecDeque<(SocketAddr, Bytes)>,
}

impl XtpListener {
    /// Binds `addr` (UDP) and listens on XTP `port`.
    pub fn bind(addr: impl ToSocketAddrs, port: u16) -> io::Result<XtpListener> {
        XtpListener::open(Mode::integrated(), addr, port, EndpointConfig::default())
    }

    /// Binds with the endpoint in `mode` (see [`super::Xtp`]).
    pub(super) fn open(
        mode: Mode,
        addr: impl ToSocketAddrs,
        port: u16,
        ep: EndpointConfig,
    ) -> io::Result<XtpListener> {
        let local = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to bind"))?;
        let shared = Shared::bind(local, ep, mode)?;
        shared.borrow_mut().core.listen(port, ContextConfig::stream())?;
        Ok(XtpListener { shared, partial: Vec::new(), datagrams: VecDeque::new() })
    }

    /// The UDP address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.shared.borrow().core.local_addr()
    }

    /// Waits for the next stream or transaction (datagrams are kept for
    /// [`XtpListener::recv_datagram`]). `timeout` None waits forever.
    pub fn accept_timeout(
        &mut self,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<(XtpStream, SocketAddr, Service)> {
        let deadline = self.deadline(timeout);
        loop {
            // Datagram contexts leave `incoming` here; what is left is ours.
            self.collect_datagrams();
            let next = self.shared.borrow_mut().incoming.pop_front();
            if let Some((ctx, peer, service)) = next {
                return Ok((XtpStream::from_parts(self.shared.clone(), ctx, peer), peer, service));
            }
            self.turn(deadline, "accept")?;
        }
    }

    /// Waits for the next stream or transaction, forever.
    pub fn accept(&mut self) -> io::Result<(XtpStream, SocketAddr)> {
        self.accept_timeout(None).map(|(s, a, _)| (s, a))
    }

    /// Waits for the next datagram (service 1 or 2) sent to this port.
    pub fn recv_datagram(&mut self, timeout: Option<std::time::Duration>) -> io::Result<(SocketAddr, Bytes)> {
        let deadline = self.deadline(timeout);
        loop {
            self.collect_datagrams();
            if let Some(d) = self.datagrams.pop_front() {
                return Ok(d);
            }
            self.turn(deadline, "recv_datagram")?;
        }
    }

    fn deadline(&self, timeout: Option<std::time::Duration>) -> Option<Instant> {
        timeout.map(|t| self.shared.borrow().now() + Duration::from_nanos(t.as_nanos() as u64))
    }

    fn turn(&mut self, deadline: Option<Instant>, what: &str) -> io::Result<()> {
        let mut s = self.shared.borrow_mut();
        if deadline.is_some_and(|d| s.now() >= d) {
            return Err(timed_out(what));
        }
        s.pump(TURN)?;
        // Datagram contexts need reading as they arrive, whoever waits.
        drop(s);
        self.collect_datagrams();
        Ok(())
    }

    /// Moves finished datagrams from their contexts to the queue.
    fn collect_datagrams(&mut self) {
        let mut s = self.shared.borrow_mut();
        let is_datagram = |svc: &Service| matches!(svc, Service::Datagram | Service::AckedDatagram);
        for &(ctx, peer, _) in s.incoming.iter().filter(|(_, _, svc)| is_datagram(svc)) {
            self.partial.push((ctx, peer, Vec::new()));
        }
        s.incoming.retain(|(_, _, svc)| !is_datagram(svc));
        let mut k = 0;
        while k < self.partial.len() {
            let ctx = self.partial[k].0;
            let mut eom = false;
            while let Some(c) = s.read_chunk(ctx) {
                self.partial[k].2.extend_from_slice(&c.data);
                eom |= c.eom;
            }
            let (finished, closed) = s.status(ctx);
            if eom || finished || closed.is_some() {
                let (ctx, peer, data) = self.partial.swap_remove(k);
                if !data.is_empty() || eom {
                    self.datagrams.push_back((peer, Bytes::from(data)));
                }
                // Fails only if the engine thread ended; the next wait says so.
                let _ = s.core.close(ctx);
                s.forget(ctx);
            } else {
                k += 1;
            }
        }
    }
}
