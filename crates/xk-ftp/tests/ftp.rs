//! Our server with our client over TCP and XTP, with curl and Python's
//! ftplib as outside clients (each when installed), and one test per attack
//! the server refuses. Everything on loopback; 127.0.0.2 is the "third
//! party".

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use xk_ftp::client::Client;
use xk_ftp::net::Net;
use xk_ftp::server::{self, Config};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xk-ftp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u64).wrapping_mul(2_654_435_761).wrapping_add(u64::from(salt)) as u8).collect()
}

fn sha(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

async fn start(
    net: Net,
    root: &std::path::Path,
    tweak: impl FnOnce(&mut Config),
) -> (SocketAddr, watch::Sender<bool>) {
    let mut cfg = Config::new(root.to_path_buf());
    cfg.net = net;
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.users = vec![("alice".into(), "secret".into())];
    cfg.login_delay = Duration::from_millis(50);
    tweak(&mut cfg);
    let (tx, rx) = watch::channel(false);
    let addr = server::spawn(cfg, rx).await.unwrap();
    (addr, tx)
}

/// Uploads and downloads files of 0 B, 1 B, 1 MB and 8 MB byte-exact,
/// resumes a download (REST) and an upload (APPE), lists, renames, deletes.
async fn round_trip(net: Net) {
    let root = tempdir(&format!("rt-{net:?}"));
    let (addr, _stop) = start(net, &root, |_| {}).await;
    let mut c = Client::connect(net, addr).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    for (i, n) in [0usize, 1, 1 << 20, 8 << 20].into_iter().enumerate() {
        let data = pattern(n, i as u8);
        let name = format!("f{n}");
        assert_eq!(c.stor(&name, false, &mut &data[..]).await.unwrap(), n as u64);
        assert_eq!(sha(&std::fs::read(root.join(&name)).unwrap()), sha(&data), "{net:?} upload of {n} B");
        let mut back = Vec::new();
        assert_eq!(c.retr(&name, 0, &mut back).await.unwrap(), n as u64);
        assert_eq!(sha(&back), sha(&data), "{net:?} download of {n} B");
        assert_eq!(c.size(&name).await.unwrap(), n as u64);
    }
    // Resume a download from the middle, and an interrupted upload by APPE.
    let data = pattern(1 << 20, 9);
    std::fs::write(root.join("big"), &data).unwrap();
    let mut tail = Vec::new();
    c.retr("big", 300_000, &mut tail).await.unwrap();
    assert_eq!(tail, data[300_000..], "REST + RETR");
    c.stor("half", false, &mut &data[..400_000]).await.unwrap();
    c.stor("half", true, &mut &data[400_000..]).await.unwrap();
    assert_eq!(std::fs::read(root.join("half")).unwrap(), data, "STOR then APPE");
    // Directories and names.
    c.simple("MKD sub").await.unwrap();
    c.rename("half", "sub/whole").await.unwrap();
    let names = c.listing("NLST", "sub").await.unwrap();
    assert_eq!(names.trim(), "whole");
    let list = c.listing("LIST", "").await.unwrap();
    assert!(list.lines().any(|l| l.starts_with('d') && l.ends_with(" sub")), "{list}");
    let mlsd = c.listing("MLSD", "").await.unwrap();
    assert!(mlsd.contains("type=file;size=1048576;") && mlsd.contains(" big\r\n"), "{mlsd}");
    c.simple("CWD sub").await.unwrap();
    assert!(c.cmd("PWD").await.unwrap().text.starts_with("\"/sub\""));
    c.simple("DELE whole").await.unwrap();
    c.simple("CDUP").await.unwrap();
    c.simple("RMD sub").await.unwrap();
    assert!(!root.join("sub").exists());
    c.quit().await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_round_trip_over_tcp() {
    round_trip(Net::Tcp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_round_trip_over_xtp() {
    round_trip(Net::Xtp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_cannot_leave_the_root() {
    let base = tempdir("escape");
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(base.join("secret"), "secret").unwrap();
    std::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
    let (addr, _stop) = start(Net::Tcp, &root, |_| {}).await;
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    for bad in ["../secret", "/../secret", "link", "../../../../etc/passwd", "a/../../secret"] {
        let r = c.cmd(&format!("SIZE {bad}")).await.unwrap();
        assert_eq!(r.code, 550, "SIZE {bad}: {r:?}");
        let mut out = Vec::new();
        assert!(c.retr(bad, 0, &mut out).await.is_err() && out.is_empty(), "RETR {bad}");
    }
    assert_eq!(c.cmd("CWD ..").await.unwrap().code, 550);
    assert_eq!(c.cmd("RMD /").await.unwrap().code, 550);
    let _ = std::fs::remove_dir_all(&base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ftp_bounce_and_no_pasv_theft() {
    let root = tempdir("bounce");
    std::fs::write(root.join("f"), pattern(100_000, 1)).unwrap();
    let (addr, _stop) = start(Net::Tcp, &root, |_| {}).await;
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    // Bounce: data connections to a third party are refused.
    let r = c.cmd("PORT 127,0,0,2,200,10").await.unwrap();
    assert_eq!(r.code, 504, "{r:?}");
    assert!(r.text.contains("refused"));
    assert_eq!(c.cmd("EPRT |1|127.0.0.2|51210|").await.unwrap().code, 504);
    assert_eq!(c.cmd("PORT 127,0,0,1,0,80").await.unwrap().code, 504, "privileged port");
    // Theft: another host connects to the passive port first; the server
    // drops it and the client's own connection still gets the file.
    let r = c.cmd("EPSV").await.unwrap();
    let port = xk_ftp::proto::parse_epsv(&format!("229 {}", r.text)).unwrap();
    let thief = tokio::net::TcpSocket::new_v4().unwrap();
    thief.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut thief = thief.connect(SocketAddr::new(addr.ip(), port)).await.unwrap();
    c.cmd("TYPE I").await.unwrap();
    let mut ours = tokio::net::TcpStream::connect(SocketAddr::new(addr.ip(), port)).await.unwrap();
    c.w_line("RETR f").await;
    let mut got = Vec::new();
    ours.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, pattern(100_000, 1));
    let mut stolen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), thief.read_to_end(&mut stolen)).await;
    assert!(stolen.is_empty(), "the third party got {} bytes", stolen.len());
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_sessions_and_bad_input_are_limited() {
    let root = tempdir("limits");
    let (addr, _stop) = start(Net::Tcp, &root, |c| {
        c.max_per_addr = 2;
        c.anonymous = true;
        c.idle = Duration::from_millis(500);
    })
    .await;
    // Failed logins: 530, then closed after the third.
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.cmd("USER alice").await.unwrap();
    assert_eq!(c.cmd("PASS wrong").await.unwrap().code, 530);
    assert_eq!(c.cmd("PASS wrong").await.unwrap().code, 530);
    let r = c.cmd("PASS wrong").await.unwrap();
    assert_eq!(r.code, 421, "{r:?}");
    assert!(c.cmd("NOOP").await.is_err(), "closed after the limit");
    // Before login nothing but login.
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    assert_eq!(c.cmd("RETR x").await.unwrap().code, 530);
    // Anonymous: read-only.
    c.login("anonymous", "me@example").await.unwrap();
    let r = c.cmd("MKD x").await.unwrap();
    assert_eq!(r.code, 550, "{r:?}");
    assert!(c.stor("x", false, &mut &b"data"[..]).await.is_err());
    assert!(!root.join("x").exists());
    // Bad input: an overlong line, a line that is not UTF-8.
    let long = format!("NOOP {}", "a".repeat(5000));
    assert_eq!(c.cmd(&long).await.unwrap().code, 500);
    c.w_raw(b"NOOP \xff\xfe\r\n").await;
    assert_eq!(c.reply().await.unwrap().code, 501);
    assert_eq!(c.cmd("NOOP").await.unwrap().code, 200, "the session survives bad input");
    // Sessions per address: the third is refused, naming the limit.
    let _second = Client::connect(Net::Tcp, addr).await.unwrap();
    let third = Client::connect(Net::Tcp, addr).await;
    let e = third.err().expect("refused").to_string();
    assert!(e.contains("421") && e.contains("limit 2 per address"), "{e}");
    // Idle sessions are closed.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = c.reply().await.unwrap();
    assert_eq!(r.code, 421, "{r:?}");
    let _ = std::fs::remove_dir_all(&root);
}

fn have(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok()
}

/// curl and Python's ftplib against our server over TCP: download, upload,
/// listing, byte-exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_clients_work_against_our_server() {
    let root = tempdir("interop");
    let data = pattern(3 << 20, 7);
    std::fs::write(root.join("file.bin"), &data).unwrap();
    let (addr, _stop) = start(Net::Tcp, &root, |_| {}).await;
    let url = format!("ftp://alice:secret@{addr}");
    let out = root.join("../curl-out.bin");
    if have("curl") {
        let o = tokio::task::spawn_blocking({
            let (url, out) = (url.clone(), out.clone());
            move || {
                Command::new("curl")
                    .args(["-sS", "--max-time", "20", &format!("{url}/file.bin"), "-o"])
                    .arg(&out)
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        assert!(o.status.success(), "curl get: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(sha(&std::fs::read(&out).unwrap()), sha(&data), "curl download");
        let o = tokio::task::spawn_blocking({
            let (url, out) = (url.clone(), out.clone());
            move || {
                Command::new("curl")
                    .args(["-sS", "--max-time", "20", "-T"])
                    .arg(&out)
                    .arg(format!("{url}/up.bin"))
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        assert!(o.status.success(), "curl put: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(sha(&std::fs::read(root.join("up.bin")).unwrap()), sha(&data), "curl upload");
        let o = tokio::task::spawn_blocking({
            let url = url.clone();
            move || {
                Command::new("curl").args(["-sS", "--max-time", "20", &format!("{url}/")]).output().unwrap()
            }
        })
        .await
        .unwrap();
        let listing = String::from_utf8_lossy(&o.stdout);
        assert!(listing.contains("file.bin") && listing.contains("up.bin"), "curl LIST: {listing}");
    } else {
        eprintln!("SKIPPED: curl not installed");
    }
    let script = format!(
        r#"
import ftplib, hashlib, io
f = ftplib.FTP()
f.connect("{ip}", {port}, timeout=20)
f.login("alice", "secret")
buf = io.BytesIO()
f.retrbinary("RETR file.bin", buf.write)
print("get", hashlib.sha256(buf.getvalue()).hexdigest())
f.storbinary("STOR py.bin", io.BytesIO(buf.getvalue()))
print("names", sorted(f.nlst()))
print("mlsd", sorted(n for n, facts in f.mlsd() if facts.get("type") == "file"))
f.set_pasv(True)
print("size", f.size("py.bin"))
f.rename("py.bin", "py2.bin")
f.delete("py2.bin")
f.quit()
"#,
        ip = addr.ip(),
        port = addr.port()
    );
    let o = tokio::task::spawn_blocking(move || Command::new("python3").arg("-c").arg(script).output())
        .await
        .unwrap();
    match o {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "ftplib: {}{}", text, String::from_utf8_lossy(&o.stderr));
            let want: String = sha(&data).iter().map(|b| format!("{b:02x}")).collect();
            assert!(text.contains(&format!("get {want}")), "{text}");
            assert!(text.contains("'file.bin'") && text.contains("'py.bin'"), "{text}");
            assert!(text.contains(&format!("size {}", data.len())), "{text}");
            assert!(!root.join("py2.bin").exists());
        }
        Err(_) => eprintln!("SKIPPED: python3 not installed"),
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&root);
}

/// Test-only raw access to the control connection.
trait Raw {
    async fn w_line(&mut self, line: &str);
    async fn w_raw(&mut self, bytes: &[u8]);
}

impl Raw for Client {
    async fn w_line(&mut self, line: &str) {
        self.w_raw(format!("{line}\r\n").as_bytes()).await;
    }
    async fn w_raw(&mut self, bytes: &[u8]) {
        self.raw_writer().write_all(bytes).await.unwrap();
    }
}
