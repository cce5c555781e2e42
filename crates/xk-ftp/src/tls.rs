//! Explicit FTPS (RFC 4217): the TLS configurations of the server and the
//! client, and the wrapping of a stream of either transport in TLS.
//!
//! rustls with the ring provider, chosen per configuration
//! (`builder_with_provider`), so nothing depends on a process-wide default.
//!
//! Data connections under `PROT P` are TLS too, the server always the TLS
//! server (§7). A client resumes its control connection's TLS session on
//! each data connection (both use one `ClientConfig`, whose session cache
//! is keyed by the server name): vsftpd refuses data connections that do
//! not (`require_ssl_reuse`, on by default), because resumption proves the
//! data connection comes from the client that logged in, not from a
//! third party that raced it to the passive port. Our server asks the same
//! when [`ServerTls::require_reuse`] is set (the default).

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, DigitallySignedStruct, HandshakeKind, RootCertStore, ServerConfig, SignatureScheme,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::net::Stream;

/// How long a TLS handshake may take (control or data connection).
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
}

/// Which connection a server-side handshake is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// The control connection (after AUTH TLS).
    Control = 0,
    /// A data connection the server writes (RETR, LIST, NLST, MLSD).
    Download = 1,
    /// A data connection the server reads (STOR, APPE, STOU).
    Upload = 2,
}

/// The server's side: its certificate and what it demands of clients.
#[derive(Clone)]
pub struct ServerTls {
    /// Control connections, downloads, uploads (see [`Channel`]).
    acceptors: [TlsAcceptor; 3],
    /// Refuse USER and PASS (530) and unprotected data (PROT C: 534; a
    /// transfer without PROT P: 522) until the control connection is TLS
    /// (vsftpd's `force_local_logins_ssl` and `force_local_data_ssl`).
    pub required: bool,
    /// Refuse a PROT P data connection that does not resume the control
    /// connection's TLS session (vsftpd's `require_ssl_reuse`).
    pub require_reuse: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("required", &self.required)
            .field("require_reuse", &self.require_reuse)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// From a PEM certificate chain and a PEM private key.
    pub fn from_pem_files(cert: &Path, key: &Path) -> io::Result<ServerTls> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_err(&format!("certificate {}", cert.display()), e))?
            .collect::<Result<_, _>>()
            .map_err(|e| tls_err(&format!("certificate {}", cert.display()), e))?;
        if chain.is_empty() {
            return Err(tls_err(&format!("certificate {}", cert.display()), "no CERTIFICATE in the file"));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| tls_err(&format!("private key {}", key.display()), e))?;
        ServerTls::new(chain, key)
    }

    /// A fresh self-signed certificate for `names` (host names or IP
    /// addresses); returns it in PEM too, for clients told to trust it.
    pub fn self_signed(names: &[String]) -> io::Result<(ServerTls, String)> {
        let ck = rcgen::generate_simple_self_signed(names.to_vec())
            .map_err(|e| tls_err("self-signed certificate", e))?;
        let pem = ck.cert.pem();
        let key = PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
        Ok((ServerTls::new(vec![ck.cert.der().clone()], key)?, pem))
    }

    fn new(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> io::Result<ServerTls> {
        let mut cfg = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_err("TLS versions", e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| tls_err("certificate and key", e))?;
        // Stateless tickets (sealed with a key of this process, rotated
        // every 6 h): a client may resume one ticket on many data
        // connections. The default stateful TLS 1.3 tickets are single-use,
        // and lftp (GnuTLS) resumes the control connection's session on
        // every data connection: its second listing was refused.
        cfg.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| tls_err("TLS tickets", e))?;
        // One configuration per channel, sharing the ticket key and the
        // session cache, differing in the TLS 1.3 tickets sent: rustls'
        // client spends one per resumption, so the control connection
        // gives CONTROL_TICKETS (our client keeps up to
        // `tickets::PER_SERVER`; rustls' own store keeps 8), a download or
        // listing 4 more, and an upload none. The client of an upload
        // never reads its data connection: tickets left unread there make
        // its close a TCP reset, which destroyed the tail of lftp's uploads
        // in our receive queue ("Connection reset by peer" before the last
        // read). Our client refreshes its supply with a listing when a run
        // of uploads has nearly spent it.
        let with_tickets = |n| {
            let mut c = cfg.clone();
            c.send_tls13_tickets = n;
            TlsAcceptor::from(Arc::new(c))
        };
        Ok(ServerTls {
            acceptors: [with_tickets(CONTROL_TICKETS), with_tickets(4), with_tickets(0)],
            required: false,
            require_reuse: true,
        })
    }

    /// The server's handshake on an accepted stream: the control
    /// connection after AUTH TLS, or a data connection (which must resume
    /// the session if [`Self::require_reuse`]).
    pub async fn accept(
        &self,
        s: std::pin::Pin<Box<dyn Stream>>,
        channel: Channel,
    ) -> io::Result<std::pin::Pin<Box<dyn Stream>>> {
        let data = channel != Channel::Control;
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptors[channel as usize].accept(s))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        if data && self.require_reuse && tls.get_ref().1.handshake_kind() != Some(HandshakeKind::Resumed) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "session reuse required: the data connection must resume the control connection's TLS session",
            ));
        }
        Ok(Box::pin(tls))
    }
}

/// TLS 1.3 tickets sent on a control connection.
const CONTROL_TICKETS: usize = 32;

/// The client's side: whom it trusts, and the session cache its control
/// and data connections share.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
    tickets: Arc<crate::tickets::TicketStore>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Trusts the certificates in `ca` (PEM), or, with `insecure`, any
    /// certificate (a self-signed server; the link is then encrypted but
    /// the server unauthenticated). One of the two must be given: there is
    /// no system trust store here.
    pub fn new(ca: Option<&Path>, insecure: bool) -> io::Result<ClientTls> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_err("TLS versions", e))?;
        let cfg = match (ca, insecure) {
            (_, true) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                    provider().signature_verification_algorithms,
                )))
                .with_no_client_auth(),
            (Some(ca), false) => {
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_file_iter(ca)
                    .map_err(|e| tls_err(&format!("CA {}", ca.display()), e))?
                {
                    let c = c.map_err(|e| tls_err(&format!("CA {}", ca.display()), e))?;
                    roots.add(c).map_err(|e| tls_err(&format!("CA {}", ca.display()), e))?;
                }
                if roots.is_empty() {
                    return Err(tls_err(&format!("CA {}", ca.display()), "no CERTIFICATE in the file"));
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            (None, false) => {
                return Err(tls_err(
                    "FTPS",
                    "give a CA certificate to trust (--tls-ca PEM) or accept any certificate (--tls-insecure)",
                ));
            }
        };
        // Our own session store: rustls' keeps 8 TLS 1.3 tickets a
        // server and spends one per resumption; every data connection
        // resumes, and an upload's brings no new ticket (see the server's
        // acceptors), so a session of uploads would run dry. This one keeps
        // more and says how many are left (`Client` refreshes before it
        // runs out).
        let tickets = Arc::new(crate::tickets::TicketStore::default());
        let mut cfg = cfg;
        cfg.resumption = rustls::client::Resumption::store(tickets.clone());
        Ok(ClientTls { connector: TlsConnector::from(Arc::new(cfg)), tickets })
    }

    /// TLS 1.3 tickets held for `name` (each resumes one connection).
    pub fn tickets(&self, name: &ServerName<'static>) -> usize {
        self.tickets.count(name)
    }

    /// The client's handshake with `name` on `s`. The same name and
    /// configuration for the control and the data connections make rustls
    /// offer the control session for resumption.
    pub async fn connect(
        &self,
        name: &ServerName<'static>,
        s: std::pin::Pin<Box<dyn Stream>>,
    ) -> io::Result<std::pin::Pin<Box<dyn Stream>>> {
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connector.connect(name.clone(), s))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(Box::pin(tls))
    }
}

/// Accepts any certificate but still checks the handshake's signatures
/// (so the peer holds the key of the certificate it showed).
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The name a client checks the server's certificate against: an IP
/// address as such, else a DNS name.
pub fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| tls_err(&format!("server name {host:?}"), e))
}
