//! The FTP client: login, passive data connections (EPSV, falling back to
//! PASV), transfers and directory commands.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf,
};

use rustls::pki_types::ServerName;

use crate::net::{COPY_BUF, Conn, Net, Stream, connect_control, connect_data};
use crate::proto::{self, MAX_LINE};
use crate::tls::ClientTls;

type Halves = (BufReader<ReadHalf<Pin<Box<dyn Stream>>>>, WriteHalf<Pin<Box<dyn Stream>>>);

fn halves(s: Pin<Box<dyn Stream>>) -> Halves {
    let (r, w) = tokio::io::split(s);
    (BufReader::new(r), w)
}

/// A reply: code and text (lines joined with newlines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code.
    pub code: u16,
    /// The text.
    pub text: String,
}

impl Reply {
    fn error(&self, what: &str) -> io::Error {
        io::Error::other(format!("{what}: the server said {} {}", self.code, self.text))
    }
}

/// A logged-in (or not yet) control connection.
pub struct Client {
    net: Net,
    peer: SocketAddr,
    r: BufReader<ReadHalf<Pin<Box<dyn Stream>>>>,
    w: WriteHalf<Pin<Box<dyn Stream>>>,
    /// After [`Client::auth_tls`]: data connections are TLS too, with
    /// this configuration and name (so they resume the control session).
    tls: Option<(ClientTls, ServerName<'static>)>,
}

impl Client {
    /// Connects to a server and reads its greeting.
    pub async fn connect(net: Net, addr: SocketAddr) -> io::Result<Client> {
        let (s, peer): Conn = connect_control(&net, addr).await?;
        let (r, w) = halves(s);
        let mut c = Client { net, peer, r, w, tls: None };
        let hello = c.reply().await?;
        if hello.code != 220 {
            return Err(hello.error(&format!("greeting from {addr}")));
        }
        Ok(c)
    }

    /// Reads one reply (multi-line replies whole).
    pub async fn reply(&mut self) -> io::Result<Reply> {
        let mut parser = proto::ReplyParser::default();
        let mut line = String::new();
        loop {
            line.clear();
            let n = (&mut self.r).take(MAX_LINE as u64).read_line(&mut line).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the control connection",
                ));
            }
            match parser.feed(&line) {
                Ok(Some((code, text))) => return Ok(Reply { code, text }),
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
    }

    /// Sends a command and reads its reply.
    pub async fn cmd(&mut self, line: &str) -> io::Result<Reply> {
        if line.contains(['\r', '\n']) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a command must not contain CR or LF"));
        }
        self.w.write_all(format!("{line}\r\n").as_bytes()).await?;
        self.w.flush().await?;
        self.reply().await
    }

    async fn expect(&mut self, line: &str, ok: impl Fn(u16) -> bool) -> io::Result<Reply> {
        let r = self.cmd(line).await?;
        if ok(r.code) { Ok(r) } else { Err(r.error(line.split(' ').next().unwrap_or(line))) }
    }

    /// Explicit FTPS (RFC 4217): AUTH TLS (234), the handshake with `name`
    /// on the control connection, then PBSZ 0 and PROT P, so every data
    /// connection is TLS too. Call it before [`Client::login`], so the
    /// password goes encrypted.
    pub async fn auth_tls(&mut self, tls: &ClientTls, name: ServerName<'static>) -> io::Result<()> {
        self.expect("AUTH TLS", |c| c == 234).await?;
        // A server that sent more after 234 is not speaking RFC 4217 (and
        // lines read before the handshake must not count as protected).
        if !self.r.buffer().is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent more after 234 in clear text",
            ));
        }
        let (nr, nw) = halves(Box::pin(tokio::io::empty()));
        let r = std::mem::replace(&mut self.r, nr);
        let w = std::mem::replace(&mut self.w, nw);
        let plain = r.into_inner().unsplit(w);
        (self.r, self.w) = halves(tls.connect(&name, plain).await?);
        self.expect("PBSZ 0", |c| c == 200).await?;
        self.expect("PROT P", |c| c == 200).await?;
        self.tls = Some((tls.clone(), name));
        Ok(())
    }

    /// USER and PASS (and TYPE I: every transfer is binary).
    pub async fn login(&mut self, user: &str, password: &str) -> io::Result<()> {
        let r = self.expect(&format!("USER {user}"), |c| c == 230 || c == 331).await?;
        if r.code == 331 {
            self.expect(&format!("PASS {password}"), |c| c == 230).await?;
        }
        self.expect("TYPE I", |c| c == 200).await?;
        Ok(())
    }

    /// A passive data connection: EPSV, or PASV if the server lacks it.
    async fn data(&mut self) -> io::Result<Conn> {
        let r = self.cmd("EPSV").await?;
        let addr = if r.code == 229 {
            let port = proto::parse_epsv(&format!("229 {}", r.text)).ok_or_else(|| r.error("EPSV reply"))?;
            SocketAddr::new(self.peer.ip(), port)
        } else {
            let r = self.expect("PASV", |c| c == 227).await?;
            // The port from PASV; the host is the control connection's
            // (a server behind NAT may name an address we cannot reach).
            let a = proto::parse_hostport(r.text.split('(').nth(1).unwrap_or(&r.text))
                .ok_or_else(|| r.error("PASV reply"))?;
            SocketAddr::new(self.peer.ip(), a.port())
        };
        connect_data(&self.net, addr).await
    }

    /// Runs a transfer command: opens the data connection, sends `line`,
    /// expects 150/125, runs `body`, expects 226/250.
    async fn transfer<T>(
        &mut self,
        line: &str,
        body: impl AsyncFnOnce(Pin<Box<dyn Stream>>) -> io::Result<T>,
    ) -> io::Result<T> {
        let (data, _) = self.data().await?;
        self.expect(line, |c| c == 150 || c == 125).await?;
        // The handshake after 150: servers start TLS on the data
        // connection when the command has come (vsftpd, ours).
        let data = match &self.tls {
            None => data,
            Some((tls, name)) => match tls.connect(name, data).await {
                Ok(d) => d,
                Err(e) => {
                    let said = tokio::time::timeout(Duration::from_secs(5), self.reply()).await;
                    let said = match said {
                        Ok(Ok(r)) => format!(": the server said {} {}", r.code, r.text),
                        _ => String::new(),
                    };
                    return Err(io::Error::new(e.kind(), format!("{line}: data connection TLS: {e}{said}")));
                }
            },
        };
        let out = body(data).await;
        let done = self.reply().await?;
        let out = out?;
        if done.code != 226 && done.code != 250 {
            return Err(done.error(line));
        }
        Ok(out)
    }

    /// Over TLS, before an upload: when one ticket is left, a listing
    /// spends it and its data connection brings new ones. An upload's data
    /// connection brings none (`tls.rs`), and a data connection that
    /// cannot resume the control connection's session is refused by
    /// servers that require reuse (vsftpd's default, ours).
    async fn refresh_tickets(&mut self) -> io::Result<()> {
        let left = match &self.tls {
            Some((tls, name)) => tls.tickets(name),
            None => return Ok(()),
        };
        if left == 1 {
            self.listing("NLST", "").await?;
        }
        Ok(())
    }

    /// Retrieves `path` from byte `offset` into `dst`; returns the bytes.
    pub async fn retr<W: AsyncWrite + Unpin>(
        &mut self,
        path: &str,
        offset: u64,
        dst: &mut W,
    ) -> io::Result<u64> {
        if offset > 0 {
            self.expect(&format!("REST {offset}"), |c| c == 350).await?;
        }
        self.transfer(&format!("RETR {path}"), async |d| {
            tokio::io::copy_buf(&mut BufReader::with_capacity(COPY_BUF, d), dst).await
        })
        .await
    }

    /// Stores `src` as `path` (`append`: APPE); returns the bytes sent.
    pub async fn stor<R: AsyncRead + Unpin>(
        &mut self,
        path: &str,
        append: bool,
        src: &mut R,
    ) -> io::Result<u64> {
        self.refresh_tickets().await?;
        let verb = if append { "APPE" } else { "STOR" };
        self.transfer(&format!("{verb} {path}"), async |mut d| {
            let n = tokio::io::copy_buf(&mut BufReader::with_capacity(COPY_BUF, src), &mut d).await?;
            d.shutdown().await?;
            // Read what the server sent (TLS 1.3 session tickets) until it
            // closes: a socket closed with unread bytes sends a reset,
            // which can destroy the tail of the upload in the server's
            // receive queue. The server closes right after its last read.
            let mut sink = [0u8; 4096];
            while matches!(d.read(&mut sink).await, Ok(n) if n > 0) {}
            Ok(n)
        })
        .await
    }

    /// A listing: `LIST`, `NLST` or `MLSD` of `path`.
    pub async fn listing(&mut self, verb: &str, path: &str) -> io::Result<String> {
        let line = if path.is_empty() { verb.to_string() } else { format!("{verb} {path}") };
        self.transfer(&line, async |mut d| {
            let mut s = String::new();
            d.read_to_string(&mut s).await?;
            Ok(s)
        })
        .await
    }

    /// SIZE of `path`.
    pub async fn size(&mut self, path: &str) -> io::Result<u64> {
        let r = self.expect(&format!("SIZE {path}"), |c| c == 213).await?;
        r.text.trim().parse().map_err(|_| r.error("SIZE reply"))
    }

    /// A command that must succeed with a 2xx/3xx reply (MKD, DELE, …).
    pub async fn simple(&mut self, line: &str) -> io::Result<Reply> {
        self.expect(line, |c| (200..400).contains(&c)).await
    }

    /// Renames `from` to `to`.
    pub async fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        self.expect(&format!("RNFR {from}"), |c| c == 350).await?;
        self.expect(&format!("RNTO {to}"), |c| c == 250).await?;
        Ok(())
    }

    /// The control connection's write half, for raw bytes (tests of how a
    /// server takes malformed input).
    pub fn raw_writer(&mut self) -> &mut (impl AsyncWrite + Unpin + use<>) {
        &mut self.w
    }

    /// QUIT, then closes the control connection and waits (up to 2 s) for
    /// the close to complete: over XTP a process that exits at once would
    /// leave the server's side of the context to time out.
    pub async fn quit(mut self) -> io::Result<()> {
        self.cmd("QUIT").await?;
        let _ = tokio::time::timeout(Duration::from_secs(2), self.w.shutdown()).await;
        Ok(())
    }
}
