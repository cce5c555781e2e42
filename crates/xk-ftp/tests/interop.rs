//! The interop matrix: our server (kernel TCP, loopback) against curl,
//! lftp and Python's ftplib; our client against vsftpd and pyftpdlib. With
//! explicit FTPS (RFC 4217): curl and lftp against our server with TLS
//! required, our client against vsftpd (`ssl_enable`, `require_ssl_reuse`)
//! and pyftpdlib's TLS_FTPHandler (pyOpenSSL). Each
//! pairing moves files of 0 B, 1 B, 1 MB and 100 MB both ways byte-exact
//! (SHA-256), lists, renames and deletes, and resumes an interrupted
//! transfer (REST for downloads, APPE or REST+STOR for uploads).
//!
//! A pairing whose program is missing is skipped with the reason printed,
//! unless `XPRESS_REQUIRE_FTP_INTEROP` is set (CI installs the programs
//! and sets it): then it fails. Every child process has a time limit and
//! is ended by its id when dropped; the servers' ports come from the
//! kernel (our server, pyftpdlib) or from a port the test bound and freed
//! just before (vsftpd, which is retried if another process took it).

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Ours, Reaped, have, len, pattern, run_for, run_ok, sha, sha_file, tempdir};
use xk_ftp::client::Client;
use xk_ftp::net::Net;

/// The sizes of the matrix (the seed's smallest and largest, and 1 MB).
const SIZES: [usize; 4] = [0, 1, 1_000_000, 100_000_000];
/// The largest, used for the resume cases.
const BIG: usize = 100_000_000;
/// A time limit for one client run that moves 100 MB through a debug build
/// on a busy two-core machine (it takes a few seconds).
const LIMIT: Duration = Duration::from_secs(120);

/// A scratch directory with the server's root and the client's side.
struct Scratch {
    base: PathBuf,
    root: PathBuf,
    local: PathBuf,
    /// SHA-256 of `srcN`, by size.
    sums: Vec<(usize, String)>,
}

impl Scratch {
    /// `root/` (served) and `local/` holding `srcN` for every size.
    fn new(name: &str) -> Scratch {
        let base = tempdir(name);
        let (root, local) = (base.join("root"), base.join("local"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&local).unwrap();
        let mut sums = Vec::new();
        for (i, n) in SIZES.iter().enumerate() {
            let data = pattern(*n, i as u8);
            std::fs::write(local.join(format!("src{n}")), &data).unwrap();
            sums.push((*n, sha(&data)));
        }
        Scratch { base, root, local, sums }
    }

    /// SHA-256 of `srcN`.
    fn sum(&self, n: usize) -> &str {
        &self.sums.iter().find(|(m, _)| *m == n).expect("a size of the matrix").1
    }

    fn src(&self, n: usize) -> PathBuf {
        self.local.join(format!("src{n}"))
    }

    /// A local file holding the first `k` bytes of `srcN`.
    fn prefix(&self, n: usize, k: usize, name: &str) -> PathBuf {
        let p = self.local.join(name);
        std::fs::write(&p, &std::fs::read(self.src(n)).unwrap()[..k]).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// curl: upload over EPSV and download over PASV for every size, NLST and
/// LIST, rename and delete by quote commands, a download cut off by a time
/// limit and resumed (`-C -`: REST), an upload resumed (`-C -`: SIZE, APPE).
#[test]
fn curl_against_our_server() {
    if !have("curl", &["--version"]) {
        return;
    }
    let sc = Scratch::new("curl");
    let ours = Ours::start(&sc.root);
    let url = format!("ftp://alice:secret@{}", ours.addr);
    let curl = |what: &str, args: &[&str]| {
        run_ok(
            &format!("curl {what}"),
            Command::new("curl").args(["-sS", "--max-time", "100"]).args(args),
            LIMIT,
        )
    };
    for n in SIZES {
        let (src, back) = (sc.src(n), sc.local.join(format!("back{n}")));
        curl("upload", &["-T", s(&src), &format!("{url}/up{n}")]);
        assert_eq!(sha_file(&sc.root.join(format!("up{n}"))), sc.sum(n), "curl upload (EPSV) of {n} B");
        curl("download", &["--disable-epsv", "-o", s(&back), &format!("{url}/up{n}")]);
        assert_eq!(sha_file(&back), sc.sum(n), "curl download (PASV) of {n} B");
    }
    // Listings: NLST names exactly, LIST one `ls -l` line per file.
    let names = curl("NLST", &["-l", &format!("{url}/")]);
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    assert_eq!(names, ["up0", "up1", "up1000000", "up100000000"]);
    let list = curl("LIST", &[&format!("{url}/")]);
    let parsed: Vec<(u64, &str)> = list
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.get(4)?.parse().ok()?, *f.last()?))
        })
        .collect();
    for n in SIZES {
        assert!(parsed.contains(&(n as u64, &format!("up{n}"))), "LIST lacks up{n}: {list}");
    }
    // Rename and delete (commands before the listing of `/`).
    curl(
        "RNFR/RNTO/DELE",
        &["-Q", "RNFR up1", "-Q", "RNTO renamed", "-Q", "DELE up0", "-o", "/dev/null", &format!("{url}/")],
    );
    assert!(
        sc.root.join("renamed").exists() && !sc.root.join("up1").exists() && !sc.root.join("up0").exists()
    );
    // A download cut off by curl's time limit at 10 MB/s, then resumed.
    // On a loaded machine curl may not reach the data in 1 s: then 2, 4.
    let part = sc.local.join("part");
    let big = format!("{url}/up{BIG}");
    for secs in ["1", "2", "4"] {
        let _ = std::fs::remove_file(&part);
        let (o, _) = run_for(
            Command::new("curl").args([
                "-sS",
                "--limit-rate",
                "10M",
                "--max-time",
                secs,
                "-o",
                s(&part),
                &big,
            ]),
            LIMIT,
        );
        assert!(!o.status.success() && len(&part) < BIG as u64, "curl was not cut off after {secs} s");
        if len(&part) > 0 {
            break;
        }
    }
    let cut = len(&part);
    assert!(cut > 0, "curl got no data within 4 s");
    curl("resumed download", &["-C", "-", "-o", s(&part), &big]);
    assert_eq!(sha_file(&part), sc.sum(BIG), "curl -C - after {cut} B");
    // An upload resumed from what the server has (SIZE, then APPE).
    let first = sc.prefix(BIG, 37_000_001, "first");
    curl("partial upload", &["-T", s(&first), &format!("{url}/resumed")]);
    curl("resumed upload", &["-C", "-", "-T", s(&sc.src(BIG)), &format!("{url}/resumed")]);
    assert_eq!(sha_file(&sc.root.join("resumed")), sc.sum(BIG), "curl -C - -T");
}

/// curl with explicit FTPS (`--ssl-reqd`: AUTH TLS, PBSZ 0, PROT P; `-k`
/// for the self-signed certificate) against our server with TLS required:
/// every size both ways byte-exact over TLS data connections that resume
/// the control session, a listing, and curl without TLS refused (530).
#[test]
fn curl_ftps_against_our_server() {
    if !have("curl", &["--version"]) {
        return;
    }
    let sc = Scratch::new("curl-tls");
    let ours = Ours::start_tls(&sc.root);
    let url = format!("ftp://alice:secret@{}", ours.addr);
    let curl = |what: &str, args: &[&str]| {
        run_ok(
            &format!("curl {what}"),
            Command::new("curl").args(["-sS", "--ssl-reqd", "-k", "--max-time", "100"]).args(args),
            LIMIT,
        )
    };
    for n in SIZES {
        let (src, back) = (sc.src(n), sc.local.join(format!("back{n}")));
        curl("FTPS upload", &["-T", s(&src), &format!("{url}/up{n}")]);
        assert_eq!(sha_file(&sc.root.join(format!("up{n}"))), sc.sum(n), "curl FTPS upload of {n} B");
        curl("FTPS download", &["--disable-epsv", "-o", s(&back), &format!("{url}/up{n}")]);
        assert_eq!(sha_file(&back), sc.sum(n), "curl FTPS download of {n} B");
    }
    let mut names: Vec<String> =
        curl("FTPS NLST", &["-l", &format!("{url}/")]).lines().map(String::from).collect();
    names.sort_unstable();
    assert_eq!(names, ["up0", "up1", "up1000000", "up100000000"]);
    let (o, _) = run_for(Command::new("curl").args(["-sS", "--max-time", "20", &format!("{url}/")]), LIMIT);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("530"), "clear-text login not refused: {err}");
}

/// lftp with explicit FTPS forced for control and data, certificate not
/// verified (self-signed): every size both ways byte-exact, its parsed
/// listings (each a TLS data connection resuming the control session),
/// rename and delete.
#[test]
fn lftp_ftps_against_our_server() {
    if !have("lftp", &["--version"]) {
        return;
    }
    let sc = Scratch::new("lftp-tls");
    let ours = Ours::start_tls(&sc.root);
    let lftp = |what: &str, script: &str| {
        let script = format!(
            "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 20; \
             set net:reconnect-interval-base 1; set xfer:clobber yes; \
             set ssl:verify-certificate no; set ftp:ssl-force true; set ftp:ssl-protect-data true; \
             set ftp:ssl-protect-list true; open -u alice,secret -p {} {}; {script}",
            ours.addr.port(),
            ours.addr.ip()
        );
        run_ok(&format!("lftp {what}"), Command::new("lftp").args(["--norc", "-c", &script]), LIMIT)
    };
    for n in SIZES {
        let (src, back) = (sc.src(n), sc.local.join(format!("back{n}")));
        lftp("FTPS put", &format!("put {} -o up{n}", s(&src)));
        assert_eq!(sha_file(&sc.root.join(format!("up{n}"))), sc.sum(n), "lftp FTPS put of {n} B");
        lftp("FTPS get", &format!("get up{n} -o {}", s(&back)));
        assert_eq!(sha_file(&back), sc.sum(n), "lftp FTPS get of {n} B");
    }
    for mlsd in ["no", "yes"] {
        let out = lftp("FTPS cls", &format!("set ftp:use-mlsd {mlsd}; cls -1 --size --block-size=1; cls -1"));
        for n in SIZES {
            assert!(out.contains(&format!("{n} up{n}")), "lftp FTPS cls (use-mlsd {mlsd}): {out}");
        }
    }
    lftp("FTPS mv/rm", "mv up1 renamed; rm up0");
    assert!(sc.root.join("renamed").exists() && !sc.root.join("up0").exists());
}

/// lftp: upload over EPSV and download over PASV for every size, its own
/// parsed listings (`cls`, MLSD), rename and delete, `get -c` after a
/// partial local file (REST) and `put -c` after a partial remote one (SIZE,
/// then REST and STOR).
#[test]
fn lftp_against_our_server() {
    if !have("lftp", &["--version"]) {
        return;
    }
    let sc = Scratch::new("lftp");
    let ours = Ours::start(&sc.root);
    // No retries and short timeouts: lftp otherwise reconnects for ever.
    let lftp = |what: &str, script: &str| {
        let script = format!(
            "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 20; \
             set net:reconnect-interval-base 1; set xfer:clobber yes; \
             open -u alice,secret -p {} {}; {script}",
            ours.addr.port(),
            ours.addr.ip()
        );
        run_ok(&format!("lftp {what}"), Command::new("lftp").args(["--norc", "-c", &script]), LIMIT)
    };
    for n in SIZES {
        let (src, back) = (sc.src(n), sc.local.join(format!("back{n}")));
        lftp("put", &format!("set ftp:prefer-epsv yes; put {} -o up{n}", s(&src)));
        assert_eq!(sha_file(&sc.root.join(format!("up{n}"))), sc.sum(n), "lftp put (EPSV) of {n} B");
        lftp("get", &format!("set ftp:prefer-epsv no; get up{n} -o {}", s(&back)));
        assert_eq!(sha_file(&back), sc.sum(n), "lftp get (PASV) of {n} B");
    }
    // Listings as lftp parses them: from LIST, and from MLSD.
    for mlsd in ["no", "yes"] {
        let out = lftp("cls", &format!("set ftp:use-mlsd {mlsd}; cls -1 --size --block-size=1"));
        let mut got: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| {
                l.trim().split_once(' ').map(|(n, name)| (name.trim().to_string(), n.to_string()))
            })
            .collect();
        got.sort();
        let want: Vec<(String, String)> = SIZES.iter().map(|n| (format!("up{n}"), n.to_string())).collect();
        assert_eq!(got, want, "lftp cls (use-mlsd {mlsd}): {out}");
    }
    lftp("mv/rm", "mv up1 renamed; rm up0");
    assert!(
        sc.root.join("renamed").exists() && !sc.root.join("up1").exists() && !sc.root.join("up0").exists()
    );
    // Resume a download from a partial local file.
    let part = sc.prefix(BIG, 23_456_789, "part");
    lftp("get -c", &format!("get -c up{BIG} -o {}", s(&part)));
    assert_eq!(sha_file(&part), sc.sum(BIG), "lftp get -c");
    // Resume an upload from a partial remote file.
    std::fs::copy(sc.prefix(BIG, 61_000_003, "first"), sc.root.join("resumed")).unwrap();
    lftp("put -c", &format!("put -c {} -o resumed", s(&sc.src(BIG))));
    assert_eq!(sha_file(&sc.root.join("resumed")), sc.sum(BIG), "lftp put -c");
}

/// Python's ftplib (a client library whose parsers are strict): STOR and
/// RETR for every size, NLST, MLSD and LIST, SIZE, rename and delete, and
/// transfers really interrupted — the client closes the data connection
/// part-way, reads the server's reply, then resumes with REST + RETR, APPE,
/// and REST + STOR.
#[test]
fn ftplib_against_our_server() {
    if !have("python3", &["--version"]) {
        return;
    }
    let sc = Scratch::new("ftplib");
    let ours = Ours::start(&sc.root);
    let out = run_ok(
        "ftplib",
        Command::new("python3")
            .args(["-c", FTPLIB, &ours.addr.ip().to_string(), &ours.addr.port().to_string()])
            .arg(&sc.local),
        LIMIT,
    );
    for n in SIZES {
        let want = sc.sum(n);
        assert_eq!(sha_file(&sc.root.join(format!("py{n}"))), want, "ftplib STOR of {n} B");
        assert!(out.contains(&format!("get {n} {want}\n")), "ftplib RETR of {n} B: {out}");
        assert!(out.contains(&format!("size {n} {n}\n")), "SIZE of {n} B: {out}");
    }
    assert!(out.contains("nlst ['py0', 'py1', 'py1000000', 'py100000000']\n"), "{out}");
    let mlsd = "mlsd [('py0', 'file', '0'), ('py1', 'file', '1'), \
                ('py1000000', 'file', '1000000'), ('py100000000', 'file', '100000000')]\n";
    assert!(out.contains(mlsd), "{out}");
    assert!(out.contains("dir 4\n"), "{out}");
    // storlines sends every line with CR LF (the last one too).
    assert_eq!(std::fs::read(sc.root.join("text")).unwrap(), b"one\ntwo\n\nfour\n", "STOR in TYPE A");
    assert!(out.contains("lines ['one', 'two', '', 'four']\n"), "RETR in TYPE A: {out}");
    assert_eq!(std::fs::read(sc.root.join("renamed")).unwrap(), b"old", "RNFR/RNTO");
    assert!(!sc.root.join("old").exists() && !sc.root.join("gone").exists(), "RNFR/RNTO, DELE");
    let want = sc.sum(BIG);
    assert!(out.contains(&format!("resumed get {want}\n")), "REST + RETR: {out}");
    assert_eq!(sha_file(&sc.root.join("appe")), want, "APPE after an interrupted STOR");
    assert_eq!(sha_file(&sc.root.join("rest")), want, "REST + STOR after an interrupted STOR");
    assert!(out.contains("abort 225\nnoop 200\n"), "ABOR with urgent data: {out}");
    assert!(out.contains("abort mid 426 226\nnoop 200\n"), "ABOR during RETR: {out}");
}

/// The ftplib side of `ftplib_against_our_server`: argv host, port, the
/// local directory with `srcN`; prints what the test checks.
const FTPLIB: &str = r#"
import ftplib, hashlib, io, sys
host, port, local = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sizes = [0, 1, 1000000, 100000000]
big = 100000000
f = ftplib.FTP()
f.connect(host, port, timeout=60)
f.login("alice", "secret")
for n in sizes:
    with open(f"{local}/src{n}", "rb") as src:
        f.storbinary(f"STOR py{n}", src, blocksize=1 << 16)
    h = hashlib.sha256()
    f.retrbinary(f"RETR py{n}", h.update, blocksize=1 << 16)
    print("get", n, h.hexdigest())
    print("size", n, f.size(f"py{n}"))
print("nlst", sorted(f.nlst()))
print("mlsd", sorted((name, facts["type"], facts["size"]) for name, facts in f.mlsd(facts=["type", "size"])))
lines = []
f.dir(lines.append)
print("dir", len(lines))
# TYPE A: lines out with CR LF, stored with the local LF.
f.storlines("STOR text", io.BytesIO(b"one\ntwo\r\n\nfour"))
lines = []
f.retrlines("RETR text", lines.append)
print("lines", lines)
f.voidcmd("TYPE I")
for name in ["old", "gone"]:
    f.storbinary(f"STOR {name}", io.BytesIO(name.encode()))
f.rename("old", "renamed")
f.delete("gone")

def cut_upload(name, k):
    # Send k bytes, close the data connection, read the server's verdict.
    with open(f"{local}/src{big}", "rb") as src:
        conn = f.transfercmd(f"STOR {name}")
        conn.sendall(src.read(k))
        conn.close()
    try:
        f.voidresp()
    except ftplib.error_temp:
        pass

# Download: read part of it, hang up, then REST + RETR for the rest.
h = hashlib.sha256()
conn = f.transfercmd(f"RETR py{big}")
got = 0
while got < 12345678:
    b = conn.recv(min(1 << 16, 12345678 - got))
    if not b:
        break
    h.update(b)
    got += len(b)
conn.close()
try:
    f.voidresp()
except ftplib.error_temp:
    pass
f.retrbinary(f"RETR py{big}", h.update, blocksize=1 << 16, rest=got)
print("resumed get", h.hexdigest())
# Upload by APPE after an interrupted STOR.
cut_upload("appe", 45678901)
with open(f"{local}/src{big}", "rb") as src:
    src.seek(f.size("appe"))
    f.storbinary("APPE appe", src, blocksize=1 << 16)
# Upload by REST + STOR after an interrupted STOR.
cut_upload("rest", 54321)
with open(f"{local}/src{big}", "rb") as src:
    k = f.size("rest")
    src.seek(k)
    f.storbinary("STOR rest", src, blocksize=1 << 16, rest=k)
# ABOR as ftplib sends it: one send() with MSG_OOB, so its last byte (the
# LF) is TCP urgent data, which a server reading without SO_OOBINLINE
# never sees. With no transfer running the answer is 225 (as vsftpd's).
f.sock.settimeout(10)
print("abort", f.abort()[:3])
print("noop", f.voidcmd("NOOP")[:3])
# ABOR during a transfer: 426 for the RETR, then 226 for ABOR (RFC 959
# 4.1.3; ftplib's abort() reads the first).
conn = f.transfercmd(f"RETR py{big}")
conn.recv(1 << 16)
print("abort mid", f.abort()[:3], f.getresp()[:3])
conn.close()
print("noop", f.voidcmd("NOOP")[:3])
f.quit()
"#;

/// A standard server for our client: where it listens, who to log in as,
/// the directory clients may write (as the client names it and on disk).
struct Peer {
    addr: SocketAddr,
    /// FTPS: AUTH TLS before login, certificate not verified.
    tls: bool,
    user: &'static str,
    password: &'static str,
    dir: &'static str,
    disk: PathBuf,
    _proc: Reaped,
}

/// Whether this process runs as root (vsftpd must: it chroots).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Waits until `addr` greets with 220 naming `who`, while `child` runs; at
/// most 10 s. False when the child ended first (it could not bind).
fn greets(addr: SocketAddr, who: &str, child: &mut Reaped) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if child.0.try_wait().unwrap().is_some() {
            return false;
        }
        if let Ok(c) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut line = String::new();
            if BufReader::new(c).read_line(&mut line).is_ok() && line.starts_with("220") {
                assert!(line.contains(who), "{addr} is not {who}: {line}");
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{who} did not answer on {addr} within 10 s");
}

/// vsftpd on a loopback port with a generated configuration: anonymous
/// login, writes allowed in `pub/` (vsftpd refuses a chroot root the
/// anonymous user can write to, so the root is root's and `pub/` is open),
/// no seccomp sandbox and no namespaces (they fail in containers). With
/// `tls`: FTPS forced for login and data with a generated self-signed
/// certificate, and `require_ssl_reuse` (vsftpd's default) spelled out.
fn vsftpd(sc: &Scratch, tls: bool) -> Option<Peer> {
    let program =
        ["/usr/sbin/vsftpd", "vsftpd"].into_iter().find(|p| Path::new(p).exists()).unwrap_or("vsftpd");
    if !have(program, &["-v"]) {
        return None;
    }
    if !is_root() {
        assert!(std::env::var_os("XPRESS_REQUIRE_FTP_INTEROP").is_none(), "vsftpd needs root (it chroots)");
        eprintln!("SKIPPED: vsftpd needs root");
        return None;
    }
    let (root, empty) = (sc.root.join("vsftpd"), sc.base.join("empty"));
    let disk = root.join("pub");
    std::fs::create_dir_all(&disk).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&disk, std::fs::Permissions::from_mode(0o777)).unwrap();
    let tls_conf = if tls {
        let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let (cert, key) = (sc.base.join("vsftpd-cert.pem"), sc.base.join("vsftpd-key.pem"));
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
        format!(
            "ssl_enable=YES\nallow_anon_ssl=YES\nforce_anon_logins_ssl=YES\nforce_anon_data_ssl=YES\n\
             require_ssl_reuse=YES\nssl_ciphers=HIGH\nrsa_cert_file={}\nrsa_private_key_file={}\n",
            cert.display(),
            key.display()
        )
    } else {
        String::new()
    };
    for _try in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let conf = sc.base.join("vsftpd.conf");
        std::fs::write(
            &conf,
            format!(
                "listen=YES\nlisten_address=127.0.0.1\nlisten_port={port}\nbackground=NO\n\
                 anonymous_enable=YES\nno_anon_password=YES\nanon_root={}\nlocal_enable=NO\n\
                 write_enable=YES\nanon_upload_enable=YES\nanon_mkdir_write_enable=YES\n\
                 anon_other_write_enable=YES\nanon_world_readable_only=NO\nanon_umask=022\n\
                 seccomp_sandbox=NO\nisolate=NO\nisolate_network=NO\nsecure_chroot_dir={}\n\
                 xferlog_enable=NO\nconnect_from_port_20=NO\npasv_enable=YES\n{tls_conf}",
                root.display(),
                empty.display()
            ),
        )
        .unwrap();
        let mut child = Reaped(
            Command::new(program)
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if greets(addr, "vsFTPd", &mut child) {
            return Some(Peer {
                addr,
                tls,
                user: "anonymous",
                password: "xpress@",
                dir: "/pub",
                disk,
                _proc: child,
            });
        }
    }
    panic!("vsftpd could not bind a free port in 5 tries");
}

/// pyftpdlib's own command line, on a port the kernel picks (read from its
/// log line), one user with write access.
fn pyftpdlib(sc: &Scratch) -> Option<Peer> {
    let probe = Command::new("python3").args(["-c", "import pyftpdlib"]).stderr(Stdio::null()).status();
    if !probe.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var_os("XPRESS_REQUIRE_FTP_INTEROP").is_none(),
            "XPRESS_REQUIRE_FTP_INTEROP is set but Python's pyftpdlib is missing"
        );
        eprintln!("SKIPPED: pyftpdlib is not installed");
        return None;
    }
    let disk = sc.root.join("pyftpdlib");
    std::fs::create_dir_all(&disk).unwrap();
    let mut child = Reaped(
        Command::new("python3")
            .args(["-m", "pyftpdlib", "-i", "127.0.0.1", "-p", "0", "-w", "-u", "bob", "-P", "pw", "-d"])
            .arg(&disk)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // "... >>> starting FTP server on 127.0.0.1:PORT, pid=N <<<", read by a
    // thread that goes on draining the log so the server never blocks.
    let err = BufReader::new(child.0.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if let Some(a) = line.split("starting FTP server on ").nth(1) {
                let _ = tx.send(a.split(',').next().unwrap_or("").to_string());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(20)).expect("pyftpdlib's start line").parse().unwrap();
    Some(Peer { addr, tls: false, user: "bob", password: "pw", dir: "/", disk, _proc: child })
}

/// pyftpdlib's TLS_FTPHandler (needs pyOpenSSL) with TLS required for
/// login and data and a generated self-signed certificate, on a port the
/// kernel picks (printed by the script).
fn pyftpdlib_tls(sc: &Scratch) -> Option<Peer> {
    let probe =
        Command::new("python3").args(["-c", "import pyftpdlib, OpenSSL"]).stderr(Stdio::null()).status();
    if !probe.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var_os("XPRESS_REQUIRE_FTP_INTEROP").is_none(),
            "XPRESS_REQUIRE_FTP_INTEROP is set but pyftpdlib or pyOpenSSL is missing"
        );
        eprintln!("SKIPPED: pyftpdlib with pyOpenSSL is not installed");
        return None;
    }
    let disk = sc.root.join("pyftpdlib-tls");
    std::fs::create_dir_all(&disk).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (sc.base.join("py-cert.pem"), sc.base.join("py-key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let mut child = Reaped(
        Command::new("python3")
            .args(["-c", PYFTPDLIB_TLS])
            .args([&disk, &cert, &key])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let out = BufReader::new(child.0.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if let Some(p) = line.strip_prefix("port ") {
                let _ = tx.send(p.trim().to_string());
            }
        }
    });
    let port: u16 = rx.recv_timeout(Duration::from_secs(20)).expect("pyftpdlib's port").parse().unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    Some(Peer { addr, tls: true, user: "bob", password: "pw", dir: "/", disk, _proc: child })
}

/// The server side of `pyftpdlib_tls`: argv directory, certificate, key.
const PYFTPDLIB_TLS: &str = r#"
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import TLS_FTPHandler
from pyftpdlib.servers import FTPServer
d, cert, key = sys.argv[1:4]
a = DummyAuthorizer()
a.add_user("bob", "pw", d, perm="elradfmwMT")
h = TLS_FTPHandler
h.certfile, h.keyfile, h.authorizer = cert, key, a
h.tls_control_required = True
h.tls_data_required = True
s = FTPServer(("127.0.0.1", 0), h)
print("port", s.address[1], flush=True)
s.serve_forever()
"#;

/// Our client against `peer`: STOR and RETR for every size, byte-exact,
/// SIZE, LIST and NLST, a download resumed after a partial local file
/// (REST), an upload resumed by APPE, rename and delete.
async fn our_client_against(peer: &Peer, sc: &Scratch) {
    let mut c = Client::connect(Net::Tcp, peer.addr).await.unwrap();
    if peer.tls {
        let tls = xk_ftp::tls::ClientTls::new(None, true).unwrap();
        c.auth_tls(&tls, xk_ftp::tls::server_name(&peer.addr.ip().to_string()).unwrap()).await.unwrap();
    }
    c.login(peer.user, peer.password).await.unwrap();
    let at = |name: &str| format!("{}/{name}", peer.dir.trim_end_matches('/'));
    for n in SIZES {
        let src = sc.src(n);
        let mut f = tokio::fs::File::open(&src).await.unwrap();
        assert_eq!(c.stor(&at(&format!("c{n}")), false, &mut f).await.unwrap(), n as u64);
        assert_eq!(sha_file(&peer.disk.join(format!("c{n}"))), sc.sum(n), "our STOR of {n} B");
        let back = sc.local.join(format!("back{n}"));
        let mut f = tokio::fs::File::create(&back).await.unwrap();
        assert_eq!(c.retr(&at(&format!("c{n}")), 0, &mut f).await.unwrap(), n as u64);
        drop(f);
        assert_eq!(sha_file(&back), sc.sum(n), "our RETR of {n} B");
        assert_eq!(c.size(&at(&format!("c{n}"))).await.unwrap(), n as u64, "SIZE of {n} B");
    }
    let list = c.listing("LIST", peer.dir).await.unwrap();
    for n in SIZES {
        assert!(
            list.lines().any(
                |l| l.split_whitespace().nth(4) == Some(&n.to_string()) && l.ends_with(&format!(" c{n}"))
            ),
            "LIST lacks c{n}: {list}"
        );
    }
    let nlst = c.listing("NLST", peer.dir).await.unwrap();
    let mut names: Vec<&str> = nlst.lines().map(|l| l.rsplit('/').next().unwrap_or(l)).collect();
    names.sort_unstable();
    assert_eq!(names, ["c0", "c1", "c1000000", "c100000000"], "NLST: {nlst}");
    // A download resumed after a partial local file (REST + RETR).
    let part = sc.prefix(BIG, 33_333_333, "part");
    let mut f = tokio::fs::OpenOptions::new().append(true).open(&part).await.unwrap();
    c.retr(&at(&format!("c{BIG}")), len(&part), &mut f).await.unwrap();
    drop(f);
    assert_eq!(sha_file(&part), sc.sum(BIG), "our REST + RETR");
    // An upload resumed by APPE after a partial one.
    let data = std::fs::read(sc.src(BIG)).unwrap();
    c.stor(&at("appe"), false, &mut &data[..44_444_444]).await.unwrap();
    let have = c.size(&at("appe")).await.unwrap() as usize;
    c.stor(&at("appe"), true, &mut &data[have..]).await.unwrap();
    assert_eq!(sha_file(&peer.disk.join("appe")), sc.sum(BIG), "our STOR then APPE");
    c.rename(&at("c1"), &at("renamed")).await.unwrap();
    c.simple(&format!("DELE {}", at("c0"))).await.unwrap();
    assert!(
        peer.disk.join("renamed").exists()
            && !peer.disk.join("c1").exists()
            && !peer.disk.join("c0").exists()
    );
    c.quit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_against_vsftpd() {
    let sc = Scratch::new("vsftpd");
    let Some(peer) = vsftpd(&sc, false) else { return };
    our_client_against(&peer, &sc).await;
}

/// Our client with FTPS against vsftpd with `ssl_enable`, TLS forced for
/// login and data and `require_ssl_reuse`: every data connection must
/// resume the control connection's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_ftps_client_against_vsftpd() {
    let sc = Scratch::new("vsftpd-tls");
    let Some(peer) = vsftpd(&sc, true) else { return };
    our_client_against(&peer, &sc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_against_pyftpdlib() {
    let sc = Scratch::new("pyftpdlib");
    let Some(peer) = pyftpdlib(&sc) else { return };
    our_client_against(&peer, &sc).await;
}

/// Our client with FTPS against pyftpdlib's TLS_FTPHandler, TLS required
/// for login and data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_ftps_client_against_pyftpdlib() {
    let sc = Scratch::new("pyftpdlib-tls");
    let Some(peer) = pyftpdlib_tls(&sc) else { return };
    our_client_against(&peer, &sc).await;
}
