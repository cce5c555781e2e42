//! Explicit FTPS (RFC 4217) between our client and our server, over TCP,
//! XTP and XTP in the simulator, and the refusals of a server that requires TLS. Outside clients
//! and servers with TLS are in `interop.rs`.

mod common;

use std::time::Duration;

use common::{in_sim, pattern, sha, sim_seed, start, tempdir};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use xk_ftp::client::Client;
use xk_ftp::net::Net;
use xk_ftp::tls::{ClientTls, ServerTls, server_name};

fn server_tls(required: bool) -> (ServerTls, String) {
    let (mut tls, pem) = ServerTls::self_signed(&["127.0.0.1".into(), "localhost".into()]).unwrap();
    tls.required = required;
    (tls, pem)
}

/// AUTH TLS, PBSZ 0, PROT P, then files of 0 B, 1 B, 1 MB and 8 MB both
/// ways byte-exact, a resumed download, and listings, all over TLS.
async fn round_trip(net: Net) {
    let root = tempdir(&format!("tls-{net:?}"));
    let (tls, _) = server_tls(true);
    let (addr, _stop) = start(net.clone(), &root, |c| c.tls = Some(tls)).await;
    let mut c = Client::connect(net.clone(), addr).await.unwrap();
    c.auth_tls(&ClientTls::new(None, true).unwrap(), server_name("127.0.0.1").unwrap()).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    for (i, n) in [0usize, 1, 1 << 20, 8 << 20].into_iter().enumerate() {
        let data = pattern(n, i as u8);
        let name = format!("f{n}");
        assert_eq!(c.stor(&name, false, &mut &data[..]).await.unwrap(), n as u64);
        assert_eq!(sha(&std::fs::read(root.join(&name)).unwrap()), sha(&data), "{net:?} TLS upload of {n} B");
        let mut back = Vec::new();
        assert_eq!(c.retr(&name, 0, &mut back).await.unwrap(), n as u64);
        assert_eq!(sha(&back), sha(&data), "{net:?} TLS download of {n} B");
    }
    let data = pattern(1 << 20, 2);
    let mut tail = Vec::new();
    c.retr(&format!("f{}", 1 << 20), 300_000, &mut tail).await.unwrap();
    assert!(tail == data[300_000..], "REST + RETR over TLS");
    let names = c.listing("NLST", "").await.unwrap();
    assert_eq!(names.lines().count(), 4, "{names}");
    assert_eq!(c.cmd("CCC").await.unwrap().code, 533, "CCC refused");
    assert_eq!(c.cmd("PROT C").await.unwrap().code, 534, "clear data refused when TLS is required");
    c.quit().await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

/// Many uploads in one session, each on a data connection that must
/// resume the control connection's TLS session: an upload's data
/// connection brings no new ticket (its client would not read one), so a
/// client that spent one ticket per resumption ran out after the control
/// connection's eight and the ninth upload was refused (522). Now the
/// client keeps the control connection's 32 and, down to its last, takes a
/// listing (which brings 4): 80 uploads pass that point twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eighty_uploads_in_one_session_each_resume() {
    let root = tempdir("tls-many");
    let (tls, _) = server_tls(true);
    let (addr, _stop) = start(Net::Tcp, &root, |c| c.tls = Some(tls)).await;
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.auth_tls(&ClientTls::new(None, true).unwrap(), server_name("127.0.0.1").unwrap()).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    for i in 0..80u8 {
        let data = pattern(1000, i);
        let r = c.stor(&format!("u{i}"), false, &mut &data[..]).await;
        assert_eq!(r.map_err(|e| e.to_string()), Ok(1000), "upload {i}");
    }
    c.quit().await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftps_round_trip_over_tcp() {
    round_trip(Net::Tcp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftps_round_trip_over_xtp() {
    round_trip(Net::Xtp).await;
}

/// The same over XTP in the simulator, with 1 % of the packets lost each
/// way (TLS over a lossy XTP stream; rustls' randomness is its own, so
/// unlike the plain round trip this run is not reproducible byte for byte).
#[test]
fn ftps_round_trip_over_xtp_in_the_simulator_with_loss() {
    in_sim(sim_seed(), 0.01, round_trip);
}

/// A client that trusts the server's certificate as a CA connects; one
/// that checks another name, or trusts nothing, does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_checks_the_certificate() {
    let root = tempdir("tls-ca");
    let (tls, pem) = server_tls(false);
    std::fs::write(root.join("..").join(format!("ca-{}.pem", std::process::id())), &pem).unwrap();
    let ca = root.join("..").join(format!("ca-{}.pem", std::process::id()));
    let (addr, _stop) = start(Net::Tcp, &root, |c| c.tls = Some(tls)).await;
    let trusting = ClientTls::new(Some(&ca), false).unwrap();
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.auth_tls(&trusting, server_name("localhost").unwrap()).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    let e = c.auth_tls(&trusting, server_name("example.com").unwrap()).await.unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    assert!(ClientTls::new(None, false).unwrap_err().to_string().contains("--tls-insecure"));
    let _ = std::fs::remove_file(&ca);
    let _ = std::fs::remove_dir_all(&root);
}

/// A server with `required` refuses USER and PASS in clear text (530), and
/// a server without TLS says so to AUTH TLS (504).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_login_is_refused_when_tls_is_required() {
    let root = tempdir("tls-required");
    let (tls, _) = server_tls(true);
    let (addr, _stop) = start(Net::Tcp, &root, |c| c.tls = Some(tls)).await;
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    let feat = c.cmd("FEAT").await.unwrap();
    assert!(feat.text.contains("AUTH TLS") && feat.text.contains("PROT"), "{feat:?}");
    let r = c.cmd("USER alice").await.unwrap();
    assert_eq!(r.code, 530, "{r:?}");
    assert!(r.text.contains("AUTH TLS"), "{r:?}");
    assert_eq!(c.cmd("PASS secret").await.unwrap().code, 530);
    assert_eq!(c.cmd("PBSZ 0").await.unwrap().code, 503, "PBSZ before AUTH TLS");
    assert_eq!(c.cmd("RETR x").await.unwrap().code, 530);
    let e = c.login("alice", "secret").await.unwrap_err();
    assert!(e.to_string().contains("530"), "{e}");
    let (plain, _stop2) = start(Net::Tcp, &root, |_| {}).await;
    let mut c = Client::connect(Net::Tcp, plain).await.unwrap();
    assert_eq!(c.cmd("AUTH TLS").await.unwrap().code, 504);
    let _ = std::fs::remove_dir_all(&root);
}

/// Commands sent in clear text right behind AUTH TLS (before the
/// handshake) are dropped, not run as if they had come encrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_injected_before_the_handshake_are_dropped() {
    let root = tempdir("tls-inject");
    let (tls, _) = server_tls(false);
    let (addr, _stop) = start(Net::Tcp, &root, |c| c.tls = Some(tls)).await;
    let mut s = BufReader::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    s.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("220"), "{line}");
    s.get_mut().write_all(b"AUTH TLS\r\nUSER alice\r\n").await.unwrap();
    line.clear();
    s.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("234"), "{line}");
    let tls = ClientTls::new(None, true).unwrap();
    let mut t = BufReader::new(
        tls.connect(&server_name("127.0.0.1").unwrap(), Box::pin(s.into_inner())).await.unwrap(),
    );
    t.get_mut().write_all(b"PASS secret\r\n").await.unwrap();
    t.get_mut().flush().await.unwrap();
    line.clear();
    tokio::time::timeout(Duration::from_secs(5), t.read_line(&mut line)).await.unwrap().unwrap();
    assert!(line.starts_with("503"), "the injected USER ran: {line}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A PROT P data connection that does not resume the control connection's
/// TLS session (a third party that took the passive port, or a client
/// without a session cache) is refused with 522, as vsftpd's
/// `require_ssl_reuse`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_connection_must_resume_the_control_session() {
    let root = tempdir("tls-reuse");
    std::fs::write(root.join("f"), pattern(10_000, 1)).unwrap();
    let (tls, _) = server_tls(false);
    let (addr, _stop) = start(Net::Tcp, &root, |c| c.tls = Some(tls)).await;
    let mut c = Client::connect(Net::Tcp, addr).await.unwrap();
    c.auth_tls(&ClientTls::new(None, true).unwrap(), server_name("127.0.0.1").unwrap()).await.unwrap();
    c.login("alice", "secret").await.unwrap();
    let r = c.cmd("EPSV").await.unwrap();
    let port = xk_ftp::proto::parse_epsv(&format!("229 {}", r.text)).unwrap();
    let data = tokio::net::TcpStream::connect((addr.ip(), port)).await.unwrap();
    c.raw_writer().write_all(b"RETR f\r\n").await.unwrap();
    c.raw_writer().flush().await.unwrap();
    assert_eq!(c.reply().await.unwrap().code, 150);
    // A fresh configuration: no session to resume.
    let stranger = ClientTls::new(None, true).unwrap();
    let got = async {
        let mut d = stranger.connect(&server_name("127.0.0.1").unwrap(), Box::pin(data)).await?;
        let mut v = Vec::new();
        d.read_to_end(&mut v).await.map(|_| v)
    };
    let got: std::io::Result<Vec<u8>> = tokio::time::timeout(Duration::from_secs(10), got).await.unwrap();
    assert!(got.is_err() || got.as_ref().is_ok_and(Vec::is_empty), "the stranger got data");
    let r = c.reply().await.unwrap();
    assert_eq!(r.code, 522, "{r:?}");
    assert!(r.text.contains("session reuse"), "{r:?}");
    let mut back = Vec::new();
    c.retr("f", 0, &mut back).await.unwrap();
    assert_eq!(back, pattern(10_000, 1), "the client's own (resumed) data connection works");
    let _ = std::fs::remove_dir_all(&root);
}
