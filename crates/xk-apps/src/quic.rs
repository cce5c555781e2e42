//! QUIC as an outside peer: quinn (crates.io), driven by the same `serve` /
//! `bulk` tools as XTP and kernel TCP, so the goodput comparison runs one
//! harness over three transports.
//!
//! `xpress serve --quic-cert FILE` also runs a QUIC server on the listen IP
//! (on `--quic-port`, any free one by default, printed) with a fresh self-signed
//! certificate written to FILE; `xpress bulk --transport quic --quic-cert
//! FILE --to ADDR` trusts exactly that certificate. Each bulk run opens one
//! connection and one bidirectional stream, writes the bytes in `-l`-sized
//! writes, finishes the stream, and stops the clock when the server's
//! 8-byte count of what it received comes back — the same end point as the
//! XTP and TCP runs (data delivered and acknowledged by the receiver).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("quic: tokio runtime: {e}"))
}

/// Binds the QUIC server on `addr` (port 0: any free port), writes its
/// certificate to `cert_path`, and serves on a thread of its own until
/// `done` is set. Returns the bound address.
pub(crate) fn spawn_server(
    addr: SocketAddr,
    cert_path: &Path,
    done: Arc<AtomicBool>,
) -> Result<SocketAddr, String> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .map_err(|e| format!("quic: certificate: {e}"))?;
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    std::fs::write(cert_path, &cert).map_err(|e| format!("--quic-cert {}: {e}", cert_path.display()))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
    let mut config =
        quinn::ServerConfig::with_single_cert(vec![cert], key).map_err(|e| format!("quic: {e}"))?;
    config.transport_config(Arc::new(transport()));
    let rt = runtime()?;
    let endpoint = {
        let _guard = rt.enter();
        quinn::Endpoint::server(config, addr)
            .map_err(|e| format!("--quic-port: cannot bind QUIC on {addr}: {e}"))?
    };
    let addr = endpoint.local_addr().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            loop {
                // Look at `done` every 100 ms between connections.
                let tick = tokio::time::sleep(std::time::Duration::from_millis(100));
                tokio::select! {
                    incoming = endpoint.accept() => {
                        let Some(incoming) = incoming else { return };
                        tokio::spawn(async move {
                            if let Err(e) = serve_connection(incoming).await {
                                eprintln!("xpress serve: quic connection: {e}");
                            }
                        });
                    }
                    () = tick => {
                        if done.load(Ordering::Relaxed) {
                            endpoint.close(0u32.into(), b"server stopped");
                            return;
                        }
                    }
                }
            }
        });
    });
    Ok(addr)
}

/// Windows large enough for loopback bulk transfer (quinn's defaults aim at
/// the Internet and would cap a loopback run well below the link).
fn transport() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window((16u32 << 20).into());
    t.receive_window((32u32 << 20).into());
    t.send_window(32 << 20);
    t
}

async fn serve_connection(incoming: quinn::Incoming) -> Result<(), String> {
    let conn = incoming.await.map_err(|e| e.to_string())?;
    loop {
        let (mut send, mut recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(quinn::ConnectionError::ApplicationClosed(_)) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let mut total = 0u64;
        while let Some(chunk) = recv.read_chunk(1 << 20, true).await.map_err(|e| e.to_string())? {
            total += chunk.bytes.len() as u64;
        }
        send.write_all(&total.to_be_bytes()).await.map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let _ = send.stopped().await;
    }
}

/// One bulk run: `bytes` in `message`-byte writes. Returns the bytes the
/// server counted and the seconds from the first write to its answer.
pub(crate) fn bulk(
    to: SocketAddr,
    cert_path: &Path,
    bytes: u64,
    message: usize,
) -> Result<(u64, f64), String> {
    let der = std::fs::read(cert_path).map_err(|e| format!("--quic-cert {}: {e}", cert_path.display()))?;
    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(der)).map_err(|e| format!("--quic-cert {}: {e}", cert_path.display()))?;
    let mut client =
        quinn::ClientConfig::with_root_certificates(Arc::new(roots)).map_err(|e| e.to_string())?;
    client.transport_config(Arc::new(transport()));
    let rt = runtime()?;
    rt.block_on(async move {
        let local = SocketAddr::new(if to.is_ipv4() { [0, 0, 0, 0].into() } else { [0u16; 8].into() }, 0);
        let mut endpoint = quinn::Endpoint::client(local).map_err(|e| format!("quic client bind: {e}"))?;
        endpoint.set_default_client_config(client);
        let conn = endpoint
            .connect(to, "localhost")
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| format!("quic connect {to}: {e}"))?;
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        let pattern: bytes::Bytes =
            (0..1u64 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let t0 = Instant::now();
        let mut sent = 0u64;
        while sent < bytes {
            let n = (bytes - sent).min(message as u64) as usize;
            let start = (sent % (1 << 20)) as usize;
            let end = (start + n).min(pattern.len());
            send.write_all(&pattern[start..end]).await.map_err(|e| e.to_string())?;
            sent += (end - start) as u64;
        }
        send.finish().map_err(|e| e.to_string())?;
        let mut answer = [0u8; 8];
        recv.read_exact(&mut answer).await.map_err(|e| format!("quic: server's count: {e}"))?;
        let secs = t0.elapsed().as_secs_f64();
        conn.close(0u32.into(), b"done");
        endpoint.wait_idle().await;
        Ok((u64::from_be_bytes(answer), secs))
    })
}
