//! The two transports behind one interface: a listener, a connection, and
//! the data-connection helpers of passive mode.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use std::io::Read;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use xk_driver::aio::{AsyncXtpListener, SimNet};
use xk_driver::api::{Mode, Xtp};

/// XTP port of the control connection (FTP's well-known port).
pub const XTP_CONTROL_PORT: u16 = 21;
/// XTP port of data connections (ftp-data).
pub const XTP_DATA_PORT: u16 = 20;

/// The buffer of a data transfer. `tokio::io::copy`'s 8 KiB means one
/// blocking-pool round trip per 8 KiB of a file (tokio's files run their
/// reads and writes there): 12,800 for 100 MB.
pub const COPY_BUF: usize = 256 * 1024;

/// Which transport carries FTP.
#[derive(Clone, Debug)]
pub enum Net {
    /// Kernel TCP.
    Tcp,
    /// XTP over UDP.
    Xtp,
    /// XTP over UDP with each endpoint on an engine thread of its own
    /// (issue #17's deployment mode; the rest of FTP is the same).
    XtpEngine,
    /// XTP on the hosts of a simulated network, in virtual time (tests:
    /// the same server and client over a seeded lossy link,
    /// reproducibly). Addresses are the network's hosts': the server
    /// listens on its server host, and the client connects from the other.
    Sim(SimNet),
}

impl Net {
    /// Whether this is XTP (in any mode).
    pub fn is_xtp(&self) -> bool {
        !matches!(self, Net::Tcp)
    }

    /// How XTP objects are made in this transport's mode (not the
    /// simulated one, which makes them on its network).
    fn xtp(&self) -> Xtp {
        match self {
            Net::XtpEngine => Xtp::new(Mode::engine_thread()),
            Net::Tcp | Net::Xtp | Net::Sim(_) => Xtp::default(),
        }
    }

    /// An XTP listener on `port` at `addr`.
    async fn bind_xtp(&self, addr: SocketAddr, port: u16) -> io::Result<AsyncXtpListener> {
        match self {
            Net::Sim(s) => s.bind(addr, port).await,
            _ => self.xtp().bind_async(addr, port).await,
        }
    }
}

impl PartialEq for Net {
    /// The same transport (two simulated networks are the same if they are
    /// one network).
    fn eq(&self, other: &Net) -> bool {
        match (self, other) {
            (Net::Sim(a), Net::Sim(b)) => a.same(b),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl std::str::FromStr for Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Net, String> {
        match s {
            "tcp" => Ok(Net::Tcp),
            "xtp" => Ok(Net::Xtp),
            "xtp-engine" => Ok(Net::XtpEngine),
            _ => Err(format!("{s:?}: the transport is tcp, xtp or xtp-engine")),
        }
    }
}

/// A byte stream of either transport.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// A connection and its peer's address.
pub type Conn = (Pin<Box<dyn Stream>>, SocketAddr);

/// A listener of either transport.
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// TCP control connections (urgent data read inline: [`UrgentInline`]).
    TcpControl(TcpListener),
    /// XTP (its UDP address; streams on one XTP port).
    Xtp(AsyncXtpListener),
}

impl Listener {
    /// Binds the control listener at `addr`.
    pub async fn control(net: &Net, addr: SocketAddr) -> io::Result<Listener> {
        match net {
            Net::Tcp => Ok(Listener::TcpControl(TcpListener::bind(addr).await?)),
            _ => Ok(Listener::Xtp(net.bind_xtp(addr, XTP_CONTROL_PORT).await?)),
        }
    }

    /// A passive data listener on `ip`, any port.
    pub async fn data(net: &Net, ip: std::net::IpAddr) -> io::Result<Listener> {
        let addr = SocketAddr::new(ip, 0);
        match net {
            Net::Tcp => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
            _ => Ok(Listener::Xtp(net.bind_xtp(addr, XTP_DATA_PORT).await?)),
        }
    }

    /// The local address (for XTP: the UDP address).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) | Listener::TcpControl(l) => l.local_addr(),
            Listener::Xtp(l) => Ok(l.local_addr()),
        }
    }

    /// The next connection.
    pub async fn accept(&self) -> io::Result<Conn> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                s.set_nodelay(true)?;
                Ok((Box::pin(s), peer))
            }
            Listener::TcpControl(l) => {
                let (s, peer) = l.accept().await?;
                s.set_nodelay(true)?;
                socket2::SockRef::from(&s).set_out_of_band_inline(true)?;
                Ok((Box::pin(UrgentInline(s)), peer))
            }
            Listener::Xtp(l) => {
                let (s, peer) = l.accept().await?;
                Ok((Box::pin(s), peer))
            }
        }
    }
}

/// Opens the control connection to `addr`.
pub async fn connect_control(net: &Net, addr: SocketAddr) -> io::Result<Conn> {
    connect(net, addr, XTP_CONTROL_PORT).await
}

/// Opens a data connection to `addr` (XTP: port 20 at that UDP address).
pub async fn connect_data(net: &Net, addr: SocketAddr) -> io::Result<Conn> {
    connect(net, addr, XTP_DATA_PORT).await
}

async fn connect(net: &Net, addr: SocketAddr, xtp_port: u16) -> io::Result<Conn> {
    match net {
        Net::Tcp => {
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Ok((Box::pin(s), addr))
        }
        Net::Sim(s) => Ok((Box::pin(s.connect(addr, xtp_port).await?), addr)),
        Net::Xtp | Net::XtpEngine => Ok((Box::pin(net.xtp().connect_async(addr, xtp_port).await?), addr)),
    }
}

/// An accepted TCP connection that reads urgent data inline.
///
/// Clients send ABOR (and Telnet's Synch) as TCP urgent data (RFC 959
/// §4.1.3; Python's ftplib sends the whole `ABOR\r\n` with MSG_OOB, which
/// makes its LF the urgent byte). Without SO_OOBINLINE that byte is never
/// read and the line never ends. With it, Linux still stops each read at
/// the urgent mark, and tokio takes that short read for a drained socket
/// and waits for a readiness edge that never comes (the byte arrived with
/// the rest): so after a short read one more non-blocking read is tried
/// here, past the mark.
struct UrgentInline(TcpStream);

impl AsyncRead for UrgentInline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.0).poll_read(cx, buf))?;
        if buf.filled().len() > before && buf.remaining() > 0 {
            let sock = socket2::SockRef::from(&self.0);
            // The socket is non-blocking: nothing more is WouldBlock.
            if let Ok(n) = (&*sock).read(buf.initialize_unfilled()) {
                buf.advance(n);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for UrgentInline {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, b)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
