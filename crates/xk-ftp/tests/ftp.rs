//! Our server with our client over TCP and XTP, and one test per attack
//! the server refuses. Everything on loopback; 127.0.0.2 is the "third
//! party". Outside clients and servers are in `interop.rs`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{pattern, sha, start, tempdir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xk_ftp::client::Client;
use xk_ftp::net::Net;

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

/// The same with every XTP endpoint (client's and server's, control and
/// data) on an engine thread: the async API in that mode under FTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_round_trip_over_xtp_on_engine_threads() {
    round_trip(Net::XtpEngine).await;
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
    c.w_raw(b"NOOP \xc3\x28\r\n").await;
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

/// A session's place in the per-address limit is given back when its
/// conversation ends (QUIT answered), not when the transport's close
/// completes: over XTP a client process that exits right after QUIT
/// leaves its side of the context open, and the server's close then waits
/// for a timeout. Here each client answers QUIT's 221 and vanishes
/// (its connection is leaked, never closed); with a limit of 2 per
/// address, the fifth session in a row is still admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_quit_frees_its_slot_even_if_the_client_vanishes() {
    let root = tempdir("vanish");
    let (addr, _stop) = start(Net::Xtp, &root, |c| c.max_per_addr = 2).await;
    for i in 0..5 {
        let mut c = Client::connect(Net::Xtp, addr).await.unwrap_or_else(|e| panic!("session {i}: {e}"));
        c.login("alice", "secret").await.unwrap();
        assert_eq!(c.cmd("QUIT").await.unwrap().code, 221);
        std::mem::forget(c);
    }
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
