//! `xpress ftp`: the FTP server and client of `xk-ftp` from the command line.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use xk_ftp::client::Client;
use xk_ftp::net::Net;
use xk_ftp::server::{self, Config};
use xk_ftp::tls::{ClientTls, ServerTls, server_name};

#[derive(Subcommand)]
pub(crate) enum FtpCommand {
    /// Serve a directory over FTP (FTPS with --tls-*) until Ctrl-C.
    Serve(ServeArgs),
    /// Download: `xpress ftp get ftp://USER:PASS@HOST:PORT/PATH [FILE]` (ftps://: explicit FTPS, AUTH TLS).
    Get(GetArgs),
    /// Upload: `xpress ftp put FILE ftp://USER:PASS@HOST:PORT/PATH`.
    Put(PutArgs),
    /// List a directory: `xpress ftp ls ftp://USER:PASS@HOST:PORT/DIR`.
    Ls(LsArgs),
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The directory served; nothing outside it is reachable.
    #[arg(long)]
    root: PathBuf,
    /// Control address (over XTP: the UDP address; the control connection is XTP port 21 there).
    #[arg(long, default_value = "127.0.0.1:2121")]
    listen: String,
    /// tcp, xtp, or xtp-engine (XTP with the endpoint on an engine thread).
    #[arg(long, default_value = "tcp")]
    transport: Net,
    /// An account's user name (with --password).
    #[arg(long, requires = "password")]
    user: Option<String>,
    /// The account's password.
    #[arg(long, requires = "user")]
    password: Option<String>,
    /// Let `anonymous` log in with any password, read-only.
    #[arg(long)]
    anonymous: bool,
    /// Sessions at once, in total.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// Sessions at once from one address.
    #[arg(long, default_value_t = 8)]
    max_per_addr: usize,
    /// Seconds a session may stay idle.
    #[arg(long, default_value_t = 300)]
    idle: u64,
    /// Offer explicit FTPS (AUTH TLS) with this PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key", conflicts_with = "tls_self_signed")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Offer explicit FTPS with a fresh self-signed certificate (clients must not verify it).
    #[arg(long)]
    tls_self_signed: bool,
    /// Refuse USER/PASS (530) and clear data connections (522, PROT C: 534) before AUTH TLS.
    #[arg(long)]
    tls_required: bool,
}

/// How a client trusts an ftps:// server.
#[derive(Args)]
pub(crate) struct TlsArgs {
    /// ftps://: accept any server certificate (self-signed); the link is encrypted, the server not authenticated.
    #[arg(long)]
    tls_insecure: bool,
    /// ftps://: trust the certificates in this PEM file.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct GetArgs {
    /// ftp://[USER[:PASS]@]HOST[:PORT]/PATH, or ftps:// (explicit: AUTH TLS on the same port)
    url: String,
    /// Where to write (default: the file's name, `-` for standard output).
    file: Option<PathBuf>,
    /// Resume: fetch from this byte on, appending to FILE.
    #[arg(long)]
    resume: bool,
    /// tcp, xtp, or xtp-engine (XTP with the endpoint on an engine thread).
    #[arg(long, default_value = "tcp")]
    transport: Net,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args)]
pub(crate) struct PutArgs {
    /// The local file.
    file: PathBuf,
    /// ftp://[USER[:PASS]@]HOST[:PORT]/PATH, or ftps://
    url: String,
    /// Append to the remote file (APPE) instead of replacing it.
    #[arg(long)]
    append: bool,
    /// tcp, xtp, or xtp-engine (XTP with the endpoint on an engine thread).
    #[arg(long, default_value = "tcp")]
    transport: Net,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args)]
pub(crate) struct LsArgs {
    /// ftp://[USER[:PASS]@]HOST[:PORT]/DIR, or ftps://
    url: String,
    /// tcp, xtp, or xtp-engine (XTP with the endpoint on an engine thread).
    #[arg(long, default_value = "tcp")]
    transport: Net,
    #[command(flatten)]
    tls: TlsArgs,
}

/// The parts of an ftp:// URL.
struct Url {
    /// ftps:// (explicit FTPS).
    tls: bool,
    host: String,
    user: String,
    password: String,
    addr: SocketAddr,
    path: String,
}

fn parse_url(url: &str) -> Result<Url, String> {
    let (tls, rest) = match (url.strip_prefix("ftp://"), url.strip_prefix("ftps://")) {
        (Some(r), _) => (false, r),
        (_, Some(r)) => (true, r),
        _ => return Err(format!("{url:?}: must start with ftp:// or ftps://")),
    };
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (Some(a), r),
        None => (None, rest),
    };
    let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let name = match host.rsplit_once(':') {
        Some((h, _)) if !host.ends_with(']') => h,
        _ => host,
    }
    .to_string();
    let host =
        if host.contains(':') && !host.ends_with(']') { host.to_string() } else { format!("{host}:21") };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("{url:?}: host {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url:?}: host {host:?} has no address"))?;
    let (user, password) = match auth {
        Some(a) => {
            a.split_once(':').map_or((a.to_string(), String::new()), |(u, p)| (u.to_string(), p.to_string()))
        }
        None => ("anonymous".to_string(), "xpress@".to_string()),
    };
    Ok(Url { tls, host: name, user, password, addr, path: format!("/{path}") })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

async fn session(net: Net, u: &Url, tls: &TlsArgs) -> Result<Client, String> {
    if !u.tls && (tls.tls_insecure || tls.tls_ca.is_some()) {
        return Err("--tls-insecure and --tls-ca are for ftps:// URLs".into());
    }
    let mut c = Client::connect(net, u.addr).await.map_err(|e| format!("connect to {}: {e}", u.addr))?;
    if u.tls {
        let cfg = ClientTls::new(tls.tls_ca.as_deref(), tls.tls_insecure).map_err(|e| e.to_string())?;
        let name = server_name(&u.host).map_err(|e| e.to_string())?;
        c.auth_tls(&cfg, name).await.map_err(|e| format!("FTPS with {}: {e}", u.host))?;
    }
    c.login(&u.user, &u.password).await.map_err(|e| format!("login as {}: {e}", u.user))?;
    Ok(c)
}

pub(crate) fn run(cmd: FtpCommand) -> Result<(), String> {
    let rt = runtime()?;
    match cmd {
        FtpCommand::Serve(a) => rt.block_on(async {
            let listen = a
                .listen
                .to_socket_addrs()
                .map_err(|e| format!("--listen {}: {e}", a.listen))?
                .next()
                .ok_or_else(|| format!("--listen {}: no address", a.listen))?;
            let mut cfg = Config::new(a.root.clone());
            cfg.net = a.transport.clone();
            cfg.listen = listen;
            cfg.anonymous = a.anonymous;
            cfg.max_sessions = a.max_sessions;
            cfg.max_per_addr = a.max_per_addr;
            cfg.idle = Duration::from_secs(a.idle);
            if let (Some(u), Some(p)) = (a.user, a.password) {
                cfg.users.push((u, p));
            }
            let tls = match (&a.tls_cert, &a.tls_key, a.tls_self_signed) {
                (Some(c), Some(k), _) => Some(ServerTls::from_pem_files(c, k).map_err(|e| e.to_string())?),
                (_, _, true) => {
                    let mut names = vec!["localhost".to_string()];
                    if !listen.ip().is_unspecified() {
                        names.push(listen.ip().to_string());
                    }
                    Some(ServerTls::self_signed(&names).map_err(|e| e.to_string())?.0)
                }
                _ if a.tls_required => {
                    return Err("--tls-required needs --tls-cert and --tls-key, or --tls-self-signed".into());
                }
                _ => None,
            };
            cfg.tls = tls.map(|mut t| {
                t.required = a.tls_required;
                t
            });
            if cfg.users.is_empty() && !cfg.anonymous {
                return Err("no way to log in: give --user and --password, or --anonymous".into());
            }
            let (tx, rx) = tokio::sync::watch::channel(false);
            let cfg_tls = cfg.tls.clone();
            let server = server::bind(cfg).await.map_err(|e| e.to_string())?;
            let addr = server.local_addr().map_err(|e| e.to_string())?;
            let how = if a.transport.is_xtp() { " (XTP port 21 at this UDP address)" } else { "" };
            let tls = match &cfg_tls {
                Some(t) if t.required => ", FTPS required",
                Some(_) => ", FTPS offered",
                None => "",
            };
            println!("ftp on {addr}{how}, root {}{tls}", a.root.display());
            ctrlc::set_handler(move || {
                let _ = tx.send(true);
            })
            .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
            let _ = server.run(rx).await;
            eprintln!("xpress ftp: stopped");
            Ok(())
        }),
        FtpCommand::Get(a) => rt.block_on(async {
            let u = parse_url(&a.url)?;
            let started = std::time::Instant::now();
            let mut c = session(a.transport, &u, &a.tls).await?;
            let name = u.path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("download").to_string();
            let t0 = std::time::Instant::now();
            let n = if a.file.as_deref() == Some(std::path::Path::new("-")) {
                c.retr(&u.path, 0, &mut tokio::io::stdout()).await
            } else {
                let path = a.file.unwrap_or_else(|| PathBuf::from(name));
                let offset = if a.resume { std::fs::metadata(&path).map_or(0, |m| m.len()) } else { 0 };
                let mut f = tokio::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(a.resume)
                    .truncate(!a.resume)
                    .open(&path)
                    .await
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                c.retr(&u.path, offset, &mut f).await
            }
            .map_err(|e| e.to_string())?;
            let secs = t0.elapsed().as_secs_f64();
            eprintln!(
                "got {n} bytes in {secs:.6} s ({:.3} Mbit/s), {:.6} s from connect, peak memory {} kB",
                n as f64 * 8.0 / secs / 1e6,
                started.elapsed().as_secs_f64(),
                peak_kb().map_or("?".into(), |k| k.to_string())
            );
            c.quit().await.map_err(|e| e.to_string())
        }),
        FtpCommand::Put(a) => rt.block_on(async {
            let u = parse_url(&a.url)?;
            let mut f =
                tokio::fs::File::open(&a.file).await.map_err(|e| format!("{}: {e}", a.file.display()))?;
            let mut c = session(a.transport, &u, &a.tls).await?;
            let t0 = std::time::Instant::now();
            let n = c.stor(&u.path, a.append, &mut f).await.map_err(|e| e.to_string())?;
            let secs = t0.elapsed().as_secs_f64();
            eprintln!("sent {n} bytes in {secs:.3} s ({:.3} Mbit/s)", n as f64 * 8.0 / secs / 1e6);
            c.quit().await.map_err(|e| e.to_string())
        }),
        FtpCommand::Ls(a) => rt.block_on(async {
            let u = parse_url(&a.url)?;
            let mut c = session(a.transport, &u, &a.tls).await?;
            let text = c.listing("LIST", &u.path).await.map_err(|e| e.to_string())?;
            print!("{}", text.replace("\r\n", "\n"));
            c.quit().await.map_err(|e| e.to_string())
        }),
    }
}

/// This process's peak resident memory (VmHWM), kB.
fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
