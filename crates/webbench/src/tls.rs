//! TLS on the client's side, for `https://` targets: a rustls client
//! configuration built once per run from the flags (versions, how the
//! server's certificate is checked, ALPN), then shared by every
//! connection of every thread.
//!
//! Choices, each as a user of curl would expect them:
//! - The crypto provider is `ring`: it builds on stable Rust with a C
//!   compiler only (aws-lc-rs also needs cmake, and Go or NASM on some
//!   targets).
//! - Certificates are checked against Mozilla's roots as the
//!   `webpki-roots` crate compiles them in, not the system's store: a run
//!   then means the same on every machine, and needs no `ca-certificates`
//!   package in a minimal container or namespace. A private CA is trusted
//!   with [`Verify::Roots`] (`--cacert`, which, as curl's, replaces the
//!   default roots), a self-signed test server with [`Verify::Insecure`].
//! - SNI is the URL's host when it is a DNS name; an IP literal sends none
//!   (RFC 6066 §3 forbids it, and curl does the same). rustls decides this
//!   from the [`ServerName`] kind.
//! - Session resumption is off: each connection makes a full handshake, as
//!   a new client would. The client addresses a run spreads its requests
//!   over stand for distinct machines, which would share no session cache.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The TLS versions a client offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsVersions {
    /// TLS 1.2 and 1.3, the server choosing (1.3 when it can).
    #[default]
    Both,
    /// TLS 1.2 only.
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

/// How the server's certificate is checked.
#[derive(Clone, Debug, Default)]
pub enum Verify {
    /// Against Mozilla's roots (the `webpki-roots` crate).
    #[default]
    WebPkiRoots,
    /// Against these roots only (`--cacert`).
    Roots(Vec<CertificateDer<'static>>),
    /// Any certificate is accepted (`--insecure`); the handshake's
    /// signatures are still checked, so the server must hold the key of
    /// the certificate it sent.
    Insecure,
}

/// A run's TLS settings.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    pub versions: TlsVersions,
    pub verify: Verify,
}

/// The certificates of a PEM file, for [`Verify::Roots`].
pub fn load_pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

/// The client configuration: `options`, offering `alpn` (`http/1.1` or
/// `h2`).
pub fn client_config(options: &TlsOptions, alpn: &[u8]) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = match options.versions {
        TlsVersions::Both => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersions::Tls12 => &[&rustls::version::TLS12],
        TlsVersions::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS: {e}"))?;
    let mut config = match &options.verify {
        Verify::WebPkiRoots => builder
            .with_root_certificates(RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
            .with_no_client_auth(),
        Verify::Roots(certs) => {
            let mut roots = RootCertStore::empty();
            for (i, c) in certs.iter().enumerate() {
                roots
                    .add(c.clone())
                    .map_err(|e| format!("CA certificate {}: {e}", i + 1))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Verify::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// The name the handshake sends (SNI) and checks the certificate for:
/// `host` without brackets; an IP address when it is one.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host:?}: not a TLS server name ({e})"))
}

/// A version's name, as results count handshakes.
pub fn version_name(v: Option<rustls::ProtocolVersion>) -> &'static str {
    match v {
        Some(rustls::ProtocolVersion::TLSv1_3) => "1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
        _ => "other",
    }
}

/// `--insecure`: every certificate is taken, the signatures over the
/// handshake are checked with the provider's algorithms.
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for AcceptAnyCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AcceptAnyCertificate")
    }
}

impl ServerCertVerifier for AcceptAnyCertificate {
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
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_and_verification_builds_a_config_offering_its_alpn() {
        for versions in [TlsVersions::Both, TlsVersions::Tls12, TlsVersions::Tls13] {
            for verify in [Verify::WebPkiRoots, Verify::Insecure] {
                let c = client_config(&TlsOptions { versions, verify }, b"h2").unwrap();
                assert_eq!(c.alpn_protocols, vec![b"h2".to_vec()]);
            }
        }
    }

    #[test]
    fn ip_literals_are_ip_server_names_and_bad_names_errors() {
        assert!(matches!(
            server_name("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("::1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("example.com").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(server_name("bad name").is_err());
    }

    #[test]
    fn a_file_without_certificates_is_an_error() {
        let dir = std::env::temp_dir().join(format!("webbench-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("empty.pem");
        std::fs::write(&f, "not PEM\n").unwrap();
        assert!(load_pem_certificates(&f)
            .unwrap_err()
            .contains("no certificate"));
        assert!(load_pem_certificates(&dir.join("missing.pem")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
