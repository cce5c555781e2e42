//! The FTP server: one tokio task per session over either transport.
//!
//! Security by default: paths confined to the root ([`crate::vpath`]); a
//! data connection only between the control connection's two hosts (PORT
//! and EPRT to another address refused — FTP bounce; a passive connection
//! from another address refused — PASV theft); a delay after each failed
//! login and the session closed after `max_login_failures`; sessions limited
//! per address and in total (421, naming the limit); an idle timeout;
//! anonymous access only when configured, and then read-only. Malformed
//! input gets an error reply, never a crash: lines are bounded, non-UTF-8
//! lines refused.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncSeekExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::watch;

use crate::net::{COPY_BUF, Conn, Listener, Net, connect_data};
use crate::proto::{self, Entry, Facts, MAX_LINE, parse_command, reply};
use crate::tls::{Channel, ServerTls};
use crate::vpath;

/// What a server serves and its limits.
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP or XTP.
    pub net: Net,
    /// Control address (XTP: the UDP address; the control port is XTP port 21).
    pub listen: SocketAddr,
    /// The directory served; every path is confined to it.
    pub root: PathBuf,
    /// Accounts: (user, password).
    pub users: Vec<(String, String)>,
    /// Let `anonymous` / `ftp` log in with any password, read-only.
    pub anonymous: bool,
    /// Sessions at once, in total.
    pub max_sessions: usize,
    /// Sessions at once from one address.
    pub max_per_addr: usize,
    /// A session idle this long is closed (421).
    pub idle: Duration,
    /// Wait after a failed login before replying.
    pub login_delay: Duration,
    /// Failed logins before the session is closed.
    pub max_login_failures: u32,
    /// Explicit FTPS (RFC 4217): AUTH TLS, PBSZ, PROT offered when set.
    pub tls: Option<ServerTls>,
}

impl Config {
    /// Defaults for `root`: TCP on 127.0.0.1:2121, no accounts, no
    /// anonymous access, 64 sessions (8 per address), 5 min idle, 1 s after
    /// a failed login, 3 failures.
    pub fn new(root: PathBuf) -> Config {
        Config {
            net: Net::Tcp,
            listen: "127.0.0.1:2121".parse().expect("address"),
            root,
            users: Vec::new(),
            anonymous: false,
            max_sessions: 64,
            max_per_addr: 8,
            idle: Duration::from_secs(300),
            login_delay: Duration::from_secs(1),
            max_login_failures: 3,
            tls: None,
        }
    }
}

/// A bound server.
pub struct Server {
    listener: Listener,
    cfg: Arc<Config>,
    root: PathBuf,
    sessions: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// Binds the control listener. The root must be an existing directory.
pub async fn bind(cfg: Config) -> io::Result<Server> {
    let root = cfg
        .root
        .canonicalize()
        .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", cfg.root.display())))?;
    if !root.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("root {}: not a directory", root.display()),
        ));
    }
    let listener = Listener::control(&cfg.net, cfg.listen).await?;
    Ok(Server { listener, cfg: Arc::new(cfg), root, sessions: Arc::default() })
}

impl Server {
    /// The control address (XTP: the UDP address).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` turns true.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> io::Result<()> {
        loop {
            let (stream, peer) = tokio::select! {
                // In order, not at random (tokio's default): the same run
                // every time over the simulator.
                // Stop first: connections that keep arriving must not
                // hide it.
                biased;
                _ = stop.changed() => return Ok(()),
                c = self.listener.accept() => c?,
            };
            let admitted = {
                let mut s = self.sessions.lock().expect("session table");
                let total: usize = s.values().sum();
                let here = s.get(&peer.ip()).copied().unwrap_or(0);
                if total >= self.cfg.max_sessions {
                    Err(format!("too many sessions (limit {} in total)", self.cfg.max_sessions))
                } else if here >= self.cfg.max_per_addr {
                    Err(format!(
                        "too many sessions from {} (limit {} per address)",
                        peer.ip(),
                        self.cfg.max_per_addr
                    ))
                } else {
                    *s.entry(peer.ip()).or_default() += 1;
                    Ok(())
                }
            };
            let (cfg, root) = (self.cfg.clone(), self.root.clone());
            let slot = admitted.is_ok().then(|| Slot { table: self.sessions.clone(), ip: peer.ip() });
            tokio::spawn(async move {
                let mut stream = stream;
                if let Err(why) = admitted {
                    let _ = stream.write_all(reply(421, &why).as_bytes()).await;
                    let _ = tokio::time::timeout(CLOSE_WAIT, stream.shutdown()).await;
                    return;
                }
                let mut slot = slot;
                let tls = cfg.tls.clone();
                let mut s = Session::new(cfg, root, peer);
                loop {
                    let (r, mut w) = tokio::io::split(stream);
                    let mut r = BufReader::new(r);
                    let end = s.run(&mut r, &mut w).await;
                    let Ok(End::StartTls) = end else {
                        // The conversation is over: its slot is free now,
                        // not when the transport's close completes (an XTP
                        // client that exits right after QUIT leaves the
                        // close to time out).
                        drop(slot.take());
                        let _ = tokio::time::timeout(CLOSE_WAIT, w.shutdown()).await;
                        break;
                    };
                    // Whatever the client sent after AUTH TLS in plain text
                    // (in `r`'s buffer) is dropped with it: commands
                    // injected before the handshake must not run as if
                    // they had come encrypted (the STARTTLS injection of
                    // CVE-2011-0411).
                    let plain = r.into_inner().unsplit(w);
                    match tls.as_ref().map(|t| t.accept(plain, Channel::Control)) {
                        Some(handshake) => match handshake.await {
                            Ok(secured) => stream = secured,
                            Err(_) => break,
                        },
                        None => break,
                    }
                }
            });
        }
    }
}

/// How long a session's transport may take to close once its
/// conversation is over (or a refusal is written).
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A session's place in the per-address count, given back when dropped
/// (at the end of the conversation, or if its task ends any other way).
struct Slot {
    table: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = t.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                t.remove(&self.ip);
            }
        }
    }
}

/// Runs a server on the current runtime until `stop`; returns its address.
pub async fn spawn(cfg: Config, stop: watch::Receiver<bool>) -> io::Result<SocketAddr> {
    let server = bind(cfg).await?;
    let addr = server.local_addr()?;
    tokio::spawn(server.run(stop));
    Ok(addr)
}

struct Session {
    cfg: Arc<Config>,
    root: PathBuf,
    peer: SocketAddr,
    user: Option<String>,
    logged_in: bool,
    anonymous: bool,
    failures: u32,
    cwd: String,
    binary: bool,
    rest: u64,
    rnfr: Option<PathBuf>,
    facts: Facts,
    /// The control line being read (kept when a transfer ends mid-line).
    line: Vec<u8>,
    passive: Option<Listener>,
    active: Option<SocketAddr>,
    /// The 220 greeting was sent (once; not again after AUTH TLS).
    greeted: bool,
    /// The control connection is TLS (after AUTH TLS).
    secure: bool,
    /// PBSZ was given (RFC 4217 §8: before PROT).
    pbsz: bool,
    /// PROT P: data connections are TLS.
    protect_data: bool,
}

/// How a session's command loop ended.
enum End {
    /// The client left, or the session was closed.
    Closed,
    /// AUTH TLS was accepted (234 sent): the TLS handshake comes next.
    StartTls,
}

/// What a command handler asks the session loop to do.
enum Next {
    Reply(u16, String),
    Quit(u16, String),
    /// Reply (234), then the TLS handshake on the control connection.
    StartTls(u16, String),
}

fn ok(code: u16, text: impl Into<String>) -> io::Result<Next> {
    Ok(Next::Reply(code, text.into()))
}

impl Session {
    fn new(cfg: Arc<Config>, root: PathBuf, peer: SocketAddr) -> Session {
        Session {
            cfg,
            root,
            peer,
            user: None,
            logged_in: false,
            anonymous: false,
            failures: 0,
            cwd: "/".into(),
            binary: false,
            rest: 0,
            rnfr: None,
            facts: Facts::ALL,
            line: Vec::new(),
            passive: None,
            active: None,
            greeted: false,
            secure: false,
            pbsz: false,
            protect_data: false,
        }
    }

    async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &mut self,
        r: &mut BufReader<R>,
        w: &mut W,
    ) -> io::Result<End> {
        if !self.greeted {
            self.greeted = true;
            send(w, reply(220, "xpress FTP server ready")).await?;
        }
        loop {
            // A line may have come in during a transfer (`self.line`).
            if !self.line.ends_with(b"\n") {
                let mut limited = (&mut *r).take(MAX_LINE as u64 + 1);
                let read = limited.read_until(b'\n', &mut self.line);
                let n = match tokio::time::timeout(self.cfg.idle, read).await {
                    Err(_) => {
                        send(w, reply(421, &format!("idle for {} s: closing", self.cfg.idle.as_secs())))
                            .await?;
                        return Ok(End::Closed);
                    }
                    Ok(r) => r?,
                };
                if n == 0 {
                    return Ok(End::Closed);
                }
            }
            let mut buf = std::mem::take(&mut self.line);
            if buf.len() > MAX_LINE {
                send(w, reply(500, &format!("line longer than {MAX_LINE} bytes"))).await?;
                // Skip the rest of the overlong line.
                if !buf.ends_with(b"\n") {
                    (&mut *r).take(1 << 20).read_until(b'\n', &mut Vec::new()).await?;
                }
                continue;
            }
            proto::strip_telnet(&mut buf);
            let Ok(line) = std::str::from_utf8(&buf) else {
                send(w, reply(501, "command is not UTF-8")).await?;
                continue;
            };
            let Some(cmd) = parse_command(line) else { continue };
            let next = match self.handle(&cmd.verb, &cmd.arg, r, w).await {
                Ok(n) => n,
                Err(e) => Next::Reply(451, format!("local error: {e}")),
            };
            match next {
                Next::Reply(code, text) => send(w, reply(code, &text)).await?,
                Next::Quit(code, text) => {
                    send(w, reply(code, &text)).await?;
                    return Ok(End::Closed);
                }
                Next::StartTls(code, text) => {
                    send(w, reply(code, &text)).await?;
                    self.line.clear();
                    self.secure = true;
                    return Ok(End::StartTls);
                }
            }
        }
    }

    /// AUTH, PBSZ, PROT and CCC (RFC 4217).
    fn security(&mut self, verb: &str, arg: &str) -> Next {
        let reply = |code, text: &str| Next::Reply(code, text.to_string());
        let Some(tls) = &self.cfg.tls else {
            return reply(if verb == "AUTH" { 504 } else { 502 }, "TLS is not offered");
        };
        let arg = arg.trim().to_ascii_uppercase();
        match verb {
            "AUTH" if self.secure => reply(503, "already using TLS"),
            // TLS-C and SSL are older names of the same (RFC 4217 §6).
            "AUTH" if matches!(arg.as_str(), "TLS" | "TLS-C" | "SSL") => {
                Next::StartTls(234, format!("AUTH {arg} ok: start the TLS handshake"))
            }
            "AUTH" => reply(504, &format!("AUTH {arg}: only TLS")),
            _ if !self.secure => {
                reply(503, &format!("{verb} needs a TLS control connection: AUTH TLS first"))
            }
            // TLS needs no protection buffer: always 0 (§8).
            "PBSZ" => {
                self.pbsz = true;
                reply(200, "PBSZ=0")
            }
            "PROT" if !self.pbsz => reply(503, "PBSZ first"),
            "PROT" => match arg.as_str() {
                "P" => {
                    self.protect_data = true;
                    reply(200, "PROT P: data connections are TLS")
                }
                "C" if tls.required => reply(534, "PROT C refused: this server requires protected data"),
                "C" => {
                    self.protect_data = false;
                    reply(200, "PROT C: data connections are clear")
                }
                "S" | "E" => reply(536, &format!("PROT {arg}: not supported with TLS")),
                _ => reply(504, &format!("PROT {arg}: not a protection level")),
            },
            // Dropping back to a clear control connection would expose the
            // session to injection again (as vsftpd, refused).
            _ => reply(533, "CCC refused: the control connection stays encrypted"),
        }
    }

    /// The real path of a client's argument, or the refusal as a reply.
    fn path(&self, arg: &str) -> Result<(String, PathBuf), Next> {
        let v = vpath::resolve(&self.cwd, arg).map_err(|r| Next::Reply(550, r.0))?;
        let p = vpath::real(&self.root, &v).map_err(|r| Next::Reply(550, r.0))?;
        Ok((v, p))
    }

    async fn handle<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &mut self,
        verb: &str,
        arg: &str,
        r: &mut BufReader<R>,
        w: &mut W,
    ) -> io::Result<Next> {
        // Before login only these.
        if !self.logged_in
            && !matches!(
                verb,
                "USER"
                    | "PASS"
                    | "QUIT"
                    | "FEAT"
                    | "SYST"
                    | "HELP"
                    | "NOOP"
                    | "OPTS"
                    | "AUTH"
                    | "PBSZ"
                    | "PROT"
                    | "CCC"
            )
        {
            return ok(530, "log in first (USER and PASS)");
        }
        // As vsftpd's force_local_logins_ssl: no password in clear text.
        if matches!(verb, "USER" | "PASS")
            && !self.secure
            && self.cfg.tls.as_ref().is_some_and(|t| t.required)
        {
            return ok(530, "this server requires TLS: AUTH TLS first, then USER and PASS");
        }
        let writes = matches!(
            verb,
            "STOR" | "STOU" | "APPE" | "DELE" | "MKD" | "XMKD" | "RMD" | "XRMD" | "RNFR" | "RNTO"
        );
        if writes && self.anonymous {
            return ok(550, "anonymous users may not change anything");
        }
        macro_rules! path {
            ($a:expr) => {
                match self.path($a) {
                    Ok(p) => p,
                    Err(n) => return Ok(n),
                }
            };
        }
        match verb {
            "USER" => {
                self.user = Some(arg.to_string());
                self.logged_in = false;
                ok(331, format!("password for {arg}"))
            }
            "PASS" => {
                let Some(user) = self.user.clone() else { return ok(503, "USER first") };
                let anon = self.cfg.anonymous && matches!(user.as_str(), "anonymous" | "ftp");
                if anon || self.cfg.users.iter().any(|(u, p)| *u == user && *p == arg) {
                    self.logged_in = true;
                    self.anonymous = anon;
                    return ok(230, if anon { "anonymous login, read-only" } else { "logged in" });
                }
                self.failures += 1;
                tokio::time::sleep(self.cfg.login_delay).await;
                if self.failures >= self.cfg.max_login_failures {
                    return Ok(Next::Quit(421, format!("{} failed logins: closing", self.failures)));
                }
                ok(530, "login incorrect")
            }
            "AUTH" | "PBSZ" | "PROT" | "CCC" => Ok(self.security(verb, arg)),
            "QUIT" => Ok(Next::Quit(221, "goodbye".into())),
            "NOOP" => ok(200, "ok"),
            "SYST" => ok(215, "UNIX Type: L8"),
            "FEAT" => ok(
                211,
                format!(
                    "Features:\n{}EPSV\nEPRT\nMDTM\n{}\nPASV\nREST STREAM\nSIZE\nUTF8\nEnd",
                    if self.cfg.tls.is_some() { "AUTH TLS\nPBSZ\nPROT\n" } else { "" },
                    self.facts.feat()
                ),
            ),
            "OPTS" => {
                let (opt, rest) = arg.split_once(' ').unwrap_or((arg, ""));
                if arg.eq_ignore_ascii_case("UTF8 ON") {
                    ok(200, "UTF8 is always on")
                } else if opt.eq_ignore_ascii_case("MLST") {
                    self.facts = Facts::parse(rest);
                    ok(200, format!("MLST OPTS {}", self.facts.chosen()))
                } else {
                    ok(501, format!("option {arg:?} not supported"))
                }
            }
            "HELP" => ok(
                214,
                "Commands:\nUSER PASS QUIT NOOP SYST FEAT OPTS HELP STAT TYPE MODE STRU PWD CWD CDUP\nMKD RMD DELE RNFR RNTO SIZE MDTM REST PASV EPSV PORT EPRT RETR STOR APPE\nSTOU LIST NLST MLSD MLST ABOR ALLO AUTH PBSZ PROT CCC\nEnd",
            ),
            "STAT" if arg.is_empty() => {
                ok(211, format!("xpress FTP server\nconnected from {}\nEnd of status", self.peer))
            }
            "TYPE" => match arg.to_ascii_uppercase().as_str() {
                "I" | "L 8" => {
                    self.binary = true;
                    ok(200, "type set to I")
                }
                "A" | "A N" => {
                    self.binary = false;
                    ok(200, "type set to A")
                }
                _ => ok(504, format!("type {arg:?} not supported")),
            },
            "MODE" => {
                if arg.eq_ignore_ascii_case("S") {
                    ok(200, "mode S")
                } else {
                    ok(504, "only MODE S")
                }
            }
            "STRU" => {
                if arg.eq_ignore_ascii_case("F") {
                    ok(200, "structure F")
                } else {
                    ok(504, "only STRU F")
                }
            }
            "ALLO" => ok(202, "no storage allocation needed"),
            "PWD" | "XPWD" => {
                ok(257, format!("\"{}\" is the current directory", self.cwd.replace('"', "\"\"")))
            }
            "CWD" | "XCWD" | "CDUP" | "XCUP" => {
                let target = if verb.ends_with("UP") { ".." } else { arg };
                let (v, p) = path!(target);
                if !p.is_dir() {
                    return ok(550, format!("{v}: not a directory"));
                }
                self.cwd = v;
                ok(250, format!("directory is {}", self.cwd))
            }
            "MKD" | "XMKD" => {
                let (v, p) = path!(arg);
                tokio::fs::create_dir(&p)
                    .await
                    .map_or_else(|e| ok(550, format!("{v}: {e}")), |()| ok(257, format!("\"{v}\" created")))
            }
            "RMD" | "XRMD" => {
                let (v, p) = path!(arg);
                if v == "/" {
                    return ok(550, "the root cannot be removed");
                }
                tokio::fs::remove_dir(&p)
                    .await
                    .map_or_else(|e| ok(550, format!("{v}: {e}")), |()| ok(250, format!("{v} removed")))
            }
            "DELE" => {
                let (v, p) = path!(arg);
                tokio::fs::remove_file(&p)
                    .await
                    .map_or_else(|e| ok(550, format!("{v}: {e}")), |()| ok(250, format!("{v} deleted")))
            }
            "RNFR" => {
                let (v, p) = path!(arg);
                if tokio::fs::symlink_metadata(&p).await.is_err() {
                    return ok(550, format!("{v}: no such file"));
                }
                self.rnfr = Some(p);
                ok(350, "ready for RNTO")
            }
            "RNTO" => {
                let Some(from) = self.rnfr.take() else { return ok(503, "RNFR first") };
                let (v, p) = path!(arg);
                tokio::fs::rename(&from, &p)
                    .await
                    .map_or_else(|e| ok(550, format!("{v}: {e}")), |()| ok(250, "renamed"))
            }
            "SIZE" => {
                let (v, p) = path!(arg);
                match tokio::fs::metadata(&p).await {
                    Ok(m) if m.is_file() => ok(213, m.len().to_string()),
                    _ => ok(550, format!("{v}: not a file")),
                }
            }
            "MDTM" => {
                let (v, p) = path!(arg);
                match tokio::fs::metadata(&p).await {
                    Ok(m) if m.is_file() => ok(213, proto::mdtm(Entry::of(String::new(), &m).mtime)),
                    _ => ok(550, format!("{v}: not a file")),
                }
            }
            "REST" => match arg.trim().parse::<u64>() {
                Ok(n) => {
                    self.rest = n;
                    ok(350, format!("restarting at {n}; now STOR, APPE or RETR"))
                }
                Err(_) => ok(501, format!("REST {arg:?}: not a byte offset")),
            },
            "PASV" | "EPSV" => {
                if verb == "EPSV" && arg.eq_ignore_ascii_case("ALL") {
                    return ok(200, "EPSV ALL accepted");
                }
                // The data listener on the address the client reached us at.
                let ip = self.cfg.listen.ip();
                let ip = if ip.is_unspecified() { self.peer.ip() } else { ip };
                let l = Listener::data(&self.cfg.net, ip).await?;
                let addr = l.local_addr()?;
                self.passive = Some(l);
                self.active = None;
                if verb == "EPSV" {
                    ok(229, format!("Entering Extended Passive Mode (|||{}|)", addr.port()))
                } else {
                    match proto::pasv_text(addr) {
                        Some(t) => ok(227, format!("Entering Passive Mode ({t})")),
                        None => ok(522, "PASV needs IPv4; use EPSV"),
                    }
                }
            }
            "PORT" | "EPRT" => {
                if self.cfg.net.is_xtp() {
                    return ok(502, "active mode is not offered over XTP; use EPSV or PASV");
                }
                let addr = if verb == "PORT" { proto::parse_hostport(arg) } else { proto::parse_eprt(arg) };
                let Some(addr) = addr else { return ok(501, format!("{verb} {arg:?}: not an address")) };
                if addr.ip() != self.peer.ip() {
                    return ok(
                        504,
                        format!(
                            "{verb} to {} refused: data connections go only to the client's own address",
                            addr.ip()
                        ),
                    );
                }
                if addr.port() < 1024 {
                    return ok(504, format!("{verb} to port {} refused: not below 1024", addr.port()));
                }
                self.active = Some(addr);
                self.passive = None;
                ok(200, format!("{verb} ok"))
            }
            "RETR" => {
                let (v, p) = path!(arg);
                let mut f = match tokio::fs::File::open(&p).await {
                    Ok(f) if f.metadata().await.is_ok_and(|m| m.is_file()) => f,
                    _ => return ok(550, format!("{v}: not a readable file")),
                };
                let rest = std::mem::take(&mut self.rest);
                if rest > 0 {
                    f.seek(io::SeekFrom::Start(rest)).await?;
                }
                let binary = self.binary;
                self.transfer(r, w, &v, Channel::Download, |mut data| async move {
                    if binary {
                        tokio::io::copy_buf(&mut BufReader::with_capacity(COPY_BUF, f), &mut data)
                            .await
                            .map(|_| ())
                    } else {
                        to_ascii(&mut f, &mut data).await
                    }
                    .and(data.shutdown().await)
                })
                .await
            }
            "STOR" | "APPE" | "STOU" => {
                let name = if verb == "STOU" {
                    format!("stou-{}", std::process::id() ^ rand_suffix())
                } else {
                    arg.to_string()
                };
                let (v, p) = path!(&name);
                let rest = std::mem::take(&mut self.rest);
                let mut opts = tokio::fs::OpenOptions::new();
                opts.write(true).create(true);
                if verb == "APPE" {
                    opts.append(true);
                } else if rest == 0 {
                    opts.truncate(true);
                }
                if verb == "STOU" {
                    opts.create_new(true);
                }
                let mut f = match opts.open(&p).await {
                    Ok(f) => f,
                    Err(e) => return ok(550, format!("{v}: {e}")),
                };
                if rest > 0 && verb == "STOR" {
                    f.seek(io::SeekFrom::Start(rest)).await?;
                }
                let binary = self.binary;
                self.transfer(r, w, &v, Channel::Upload, |mut data| async move {
                    if binary {
                        tokio::io::copy_buf(&mut BufReader::with_capacity(COPY_BUF, data), &mut f)
                            .await
                            .map(|_| ())
                    } else {
                        from_ascii(&mut data, &mut f).await
                    }?;
                    f.flush().await
                })
                .await
            }
            "LIST" | "NLST" | "MLSD" => {
                let (v, p) = path!(proto::list_target(arg));
                let mut entries = Vec::new();
                match tokio::fs::metadata(&p).await {
                    Ok(m) if m.is_dir() => {
                        let mut rd = tokio::fs::read_dir(&p).await?;
                        while let Some(e) = rd.next_entry().await? {
                            if let Ok(m) = e.metadata().await {
                                entries.push(Entry::of(e.file_name().to_string_lossy().into_owned(), &m));
                            }
                        }
                    }
                    Ok(m) if verb != "MLSD" => {
                        entries.push(Entry::of(v.rsplit('/').next().unwrap_or("").to_string(), &m))
                    }
                    _ => return ok(550, format!("{v}: no such directory")),
                }
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                let text: String = entries
                    .iter()
                    .map(|e| match verb {
                        "LIST" => e.list_line(),
                        "NLST" => format!("{}\r\n", e.name),
                        _ => e.mlsd_line(self.facts),
                    })
                    .collect();
                self.transfer(r, w, &v, Channel::Download, |mut data| async move {
                    data.write_all(text.as_bytes()).await.and(data.shutdown().await)
                })
                .await
            }
            "MLST" => {
                let (v, p) = path!(arg);
                match tokio::fs::metadata(&p).await {
                    Ok(m) => {
                        let line = Entry::of(v.clone(), &m).mlsd_line(self.facts);
                        ok(250, format!("Listing {v}\n{}\nEnd", line.trim_end()))
                    }
                    Err(_) => ok(550, format!("{v}: no such file")),
                }
            }
            "ABOR" => ok(225, "no transfer to abort"),
            _ => ok(502, format!("{verb}: not implemented")),
        }
    }

    /// Opens the data connection (passive: accepted only from the client's
    /// own address; active: connected to the address PORT/EPRT gave), says
    /// 150, runs `body` on it, and replies 226 or 426. Meanwhile it reads
    /// the control connection: ABOR ends the transfer (426 for it, then 226
    /// for ABOR, RFC 959 §4.1.3); any other command waits in `self.line`
    /// until the transfer is over.
    async fn transfer<R, W, F, Fut>(
        &mut self,
        r: &mut BufReader<R>,
        w: &mut W,
        what: &str,
        channel: Channel,
        body: F,
    ) -> io::Result<Next>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
        F: FnOnce(std::pin::Pin<Box<dyn crate::net::Stream>>) -> Fut,
        Fut: std::future::Future<Output = io::Result<()>>,
    {
        if !self.protect_data && self.cfg.tls.as_ref().is_some_and(|t| t.required) {
            self.passive = None;
            self.active = None;
            return ok(522, "data connections must be protected: PBSZ 0 and PROT P first");
        }
        let conn: Conn = if let Some(l) = self.passive.take() {
            send(w, reply(150, &format!("opening data connection for {what}"))).await?;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                match tokio::time::timeout_at(deadline, l.accept()).await {
                    Err(_) => return ok(425, "no data connection within 30 s"),
                    Ok(Err(e)) => return ok(425, format!("data connection: {e}")),
                    Ok(Ok((s, from))) if from.ip() == self.peer.ip() => break (s, from),
                    // Another host took the port first (PASV theft): drop
                    // it and keep waiting for the client.
                    Ok(Ok(_)) => continue,
                }
            }
        } else if let Some(addr) = self.active.take() {
            send(w, reply(150, &format!("connecting to {addr} for {what}"))).await?;
            match connect_data(&self.cfg.net, addr).await {
                Ok(c) => c,
                Err(e) => return ok(425, format!("cannot connect to {addr}: {e}")),
            }
        } else {
            return ok(425, "use PASV, EPSV, PORT or EPRT first");
        };
        // PROT P: the server is the TLS server of the data connection too
        // (RFC 4217 §7), after the 150 as vsftpd does it.
        let data = match (&self.cfg.tls, self.protect_data) {
            (Some(tls), true) => match tls.accept(conn.0, channel).await {
                Ok(d) => d,
                Err(e) => return ok(522, format!("data connection: TLS failed: {e}")),
            },
            _ => conn.0,
        };
        let mut body = std::pin::pin!(body(data));
        let mut control_open = true;
        let done = loop {
            // read_until is cancel-safe: a part-read line stays in
            // `self.line` when the transfer ends first.
            let reading = control_open && !self.line.ends_with(b"\n") && self.line.len() <= MAX_LINE;
            let mut limited = (&mut *r).take(MAX_LINE as u64 + 1);
            tokio::select! {
                // In order (see `run`): a transfer done is taken first.
                biased;
                done = &mut body => break done,
                got = limited.read_until(b'\n', &mut self.line), if reading => {
                    match got {
                        Ok(n) if n > 0 => {}
                        // The client hung up or the line failed: finish the
                        // transfer; the session loop sees the end next.
                        _ => control_open = false,
                    }
                    if self.line.ends_with(b"\n") {
                        let mut l = self.line.clone();
                        proto::strip_telnet(&mut l);
                        let cmd = std::str::from_utf8(&l).ok().and_then(parse_command);
                        if cmd.is_some_and(|c| c.verb == "ABOR") {
                            // Dropping `body` closes the data connection.
                            self.line.clear();
                            send(w, reply(426, &format!("{what}: transfer aborted by ABOR"))).await?;
                            return ok(226, "ABOR: data connection closed");
                        }
                    }
                }
            }
        };
        match done {
            Ok(()) => ok(226, "transfer complete"),
            Err(e) => ok(426, format!("transfer aborted: {e}")),
        }
    }
}

/// Writes a reply and flushes it: a TLS writer may otherwise hold the
/// last record until the next write.
async fn send<W: AsyncWrite + Unpin>(w: &mut W, line: String) -> io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.flush().await
}

/// A few bits that differ between STOU names in one process.
fn rand_suffix() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
}

/// Copies `src` to `dst` with every LF as CRLF (TYPE A on the wire).
async fn to_ascii<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(src: &mut R, dst: &mut W) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(128 * 1024);
    loop {
        let n = src.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        out.clear();
        for &b in &buf[..n] {
            if b == b'\n' {
                out.push(b'\r');
            }
            out.push(b);
        }
        dst.write_all(&out).await?;
    }
}

/// Copies `src` to `dst` with every CRLF as LF (TYPE A from the wire).
async fn from_ascii<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(src: &mut R, dst: &mut W) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024);
    let mut cr = false;
    loop {
        let n = src.read(&mut buf).await?;
        if n == 0 {
            if cr {
                dst.write_all(b"\r").await?;
            }
            return Ok(());
        }
        out.clear();
        for &b in &buf[..n] {
            if cr && b != b'\n' {
                out.push(b'\r');
            }
            cr = b == b'\r';
            if !cr {
                out.push(b);
            }
        }
        dst.write_all(&out).await?;
    }
}
