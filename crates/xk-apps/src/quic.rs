//! QUIC as an outside peer: quinn (crates.io), driven by the same `serve` /
//! `bulk` tools as XTP and kernel TCP, so the goodput comparison runs one
//! harness over three transports.
//!
//! `xpress serve --quic-cert FILE` also runs a QUIC server on the listen IP
//! (on `--quic-port`, any free one by default, printed) with a fresh self-signed
//! certificate written to FILE; `xpress bulk --transport quic --quic-cert
//! FILE --to ADDR` trusts exactly that certificate. Each of bulk's flows is
//! a connection of its own (as each of TCP's `-P` connections has its own
//! congestion control) with one bidirectional stream, which starts with a
//! request: [`DISCARD`] (count what arrives and answer the count) or a
//! `SourceRequest` as XTP's source service takes (send, `-R`).
//! The client side is `bulk_quic.rs`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::feed::{SourceRequest, pattern};

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
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
        let (send, recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(quinn::ConnectionError::ApplicationClosed(_) | quinn::ConnectionError::LocallyClosed) => {
                return Ok(());
            }
            Err(e) => return Err(e.to_string()),
        };
        tokio::spawn(async move {
            if let Err(e) = serve_stream(send, recv).await {
                eprintln!("xpress serve: quic stream: {e}");
            }
        });
    }
}

/// The first byte of a stream that asks the server to count what it
/// receives and answer the count (8 bytes, big-endian); any other stream
/// starts with a [`SourceRequest`] (`t` or `n`): the server sends (`-R`).
pub(crate) const DISCARD: u8 = b'D';

async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream) -> Result<(), String> {
    let mut kind = [0u8; 1];
    recv.read_exact(&mut kind).await.map_err(|e| format!("request: {e}"))?;
    let req = if kind[0] == DISCARD {
        None
    } else {
        let mut head = [0u8; SourceRequest::LEN];
        head[0] = kind[0];
        recv.read_exact(&mut head[1..]).await.map_err(|e| format!("request: {e}"))?;
        let r = SourceRequest::decode(&head)
            .ok_or("unknown request (is the client `xpress bulk` of this version?)")?;
        Some(r)
    };
    let Some(req) = req else {
        let mut total = 0u64;
        while let Some(chunk) = recv.read_chunk(1 << 20, true).await.map_err(|e| e.to_string())? {
            total += chunk.bytes.len() as u64;
        }
        send.write_all(&total.to_be_bytes()).await.map_err(|e| e.to_string())?;
        send.finish().map_err(|e| e.to_string())?;
        let _ = send.stopped().await;
        return Ok(());
    };
    // The source: until the amount is sent, the time is up, or the client
    // stops reading (its own deadline or Ctrl-C) — not an error.
    let data = pattern();
    let piece = if req.length == 0 { data.len() } else { (req.length as usize).min(data.len()) };
    let until = req.timed.then(|| Instant::now() + std::time::Duration::from_millis(req.amount));
    let limit = if req.timed { u64::MAX } else { req.amount };
    let mut sent = 0u64;
    while sent < limit && until.is_none_or(|u| Instant::now() < u) {
        let n = (limit - sent).min(piece as u64) as usize;
        let start = (sent % data.len() as u64) as usize;
        let start = if start + n > data.len() { 0 } else { start };
        match send.write_chunk(data.slice(start..start + n)).await {
            Ok(()) => sent += n as u64,
            Err(quinn::WriteError::Stopped(_) | quinn::WriteError::ConnectionLost(_)) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
    let _ = send.finish();
    let _ = send.stopped().await;
    Ok(())
}

/// A client endpoint trusting exactly the certificate in `cert_path`.
pub(crate) fn client(to: SocketAddr, cert_path: &Path) -> Result<quinn::Endpoint, String> {
    let der = std::fs::read(cert_path).map_err(|e| format!("--quic-cert {}: {e}", cert_path.display()))?;
    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(der)).map_err(|e| format!("--quic-cert {}: {e}", cert_path.display()))?;
    let mut client =
        quinn::ClientConfig::with_root_certificates(Arc::new(roots)).map_err(|e| e.to_string())?;
    client.transport_config(Arc::new(transport()));
    let local = SocketAddr::new(if to.is_ipv4() { [0, 0, 0, 0].into() } else { [0u16; 8].into() }, 0);
    let mut endpoint = quinn::Endpoint::client(local).map_err(|e| format!("quic client bind: {e}"))?;
    endpoint.set_default_client_config(client);
    Ok(endpoint)
}
