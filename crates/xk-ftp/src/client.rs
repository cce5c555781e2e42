//! The FTP client: login, passive data connections (EPSV, falling back to
//! PASV), transfers and directory commands.

use std::io;
use std::net::SocketAddr;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf,
};

use crate::net::{COPY_BUF, Conn, Net, Stream, connect_control, connect_data};
use crate::proto::{self, MAX_LINE};

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
    r: BufReader<ReadHalf<std::pin::Pin<Box<dyn Stream>>>>,
    w: WriteHalf<std::pin::Pin<Box<dyn Stream>>>,
}

impl Client {
    /// Connects to a server and reads its greeting.
    pub async fn connect(net: Net, addr: SocketAddr) -> io::Result<Client> {
        let (s, peer): Conn = connect_control(net, addr).await?;
        let (r, w) = tokio::io::split(s);
        let mut c = Client { net, peer, r: BufReader::new(r), w };
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
        connect_data(self.net, addr).await
    }

    /// Runs a transfer command: opens the data connection, sends `line`,
    /// expects 150/125, runs `body`, expects 226/250.
    async fn transfer<T>(
        &mut self,
        line: &str,
        body: impl AsyncFnOnce(std::pin::Pin<Box<dyn Stream>>) -> io::Result<T>,
    ) -> io::Result<T> {
        let (data, _) = self.data().await?;
        self.expect(line, |c| c == 150 || c == 125).await?;
        let out = body(data).await;
        let done = self.reply().await?;
        let out = out?;
        if done.code != 226 && done.code != 250 {
            return Err(done.error(line));
        }
        Ok(out)
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
        let verb = if append { "APPE" } else { "STOR" };
        self.transfer(&format!("{verb} {path}"), async |mut d| {
            let n = tokio::io::copy_buf(&mut BufReader::with_capacity(COPY_BUF, src), &mut d).await?;
            d.shutdown().await?;
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

    /// QUIT.
    pub async fn quit(mut self) -> io::Result<()> {
        self.cmd("QUIT").await.map(|_| ())
    }
}
