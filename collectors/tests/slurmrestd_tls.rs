//! slurmrestd over https with a site's own certificate authority (`ca_file`): a real TLS
//! server on 127.0.0.1 (rustls), its certificate signed by a test CA
//! (`fixtures/tls/`, see its README). The client trusts what `ca_file` names and nothing
//! else; without it, the public roots, which do not know the test CA.

#[path = "fixtures/slurmrestd/common.rs"]
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bursar_collectors::slurmrestd::{ApiVersion, RestError, SlurmRestClient};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn tls_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// What the server saw: the request line of every request it answered.
type Seen = Arc<Mutex<Vec<String>>>;

/// An https server on 127.0.0.1 with the test CA's certificate for 127.0.0.1 and localhost.
/// It answers every request on every connection with the ping slurmrestd 22.05 gave, and
/// notes its request line; a failed handshake just ends that connection.
async fn tls_server() -> (SocketAddr, Seen) {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls_fixture("server.pem"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_file(tls_fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let noted = seen.clone();
    let ping = fixture("real-22.05/ping.json");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, noted, ping) = (acceptor.clone(), noted.clone(), ping.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request head at a time (the client sends GETs without a body).
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    noted
                        .lock()
                        .unwrap()
                        .push(head.lines().next().unwrap_or_default().to_string());
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\n\r\n{ping}",
                        ping.len()
                    );
                    if tls.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn an_https_slurmrestd_with_a_site_ca_is_trusted_through_ca_file() {
    let (addr, seen) = tls_server().await;
    let key = key_file();
    // By IP address and by name: the certificate names both.
    for base in [
        format!("https://{addr}"),
        format!("https://localhost:{}", addr.port()),
    ] {
        let mut config = config(&base, &key, Some(ApiVersion::V0_0_38));
        config.ca_file = Some(tls_fixture("ca.pem"));
        let client = SlurmRestClient::new(config).unwrap();
        let ping = client
            .ping()
            .await
            .unwrap_or_else(|e| panic!("{base}: {e}"));
        assert_eq!(ping.release.as_deref(), Some("22.05.8"), "{ping:?}");
        assert_eq!(ping.controllers.len(), 1, "{ping:?}");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec!["GET /slurm/v0.0.38/ping HTTP/1.1"; 2],
        "the server answered both pings over TLS"
    );
}

#[tokio::test]
async fn an_unknown_ca_is_refused_with_the_reason() {
    let (addr, seen) = tls_server().await;
    let key = key_file();
    let base = format!("https://{addr}");
    // The public roots (no ca_file), then a CA file of another authority.
    for ca_file in [None, Some(tls_fixture("other-ca.pem"))] {
        let mut config = config(&base, &key, Some(ApiVersion::V0_0_38));
        config.ca_file = ca_file.clone();
        let client = SlurmRestClient::new(config).unwrap();
        let err = client.ping().await.unwrap_err();
        let RestError::Unreachable { url, message } = &err else {
            panic!("{ca_file:?}: expected unreachable, got {err:?}");
        };
        assert!(url.starts_with(&base), "{url}");
        assert!(
            message.contains("UnknownIssuer"),
            "{ca_file:?}: the reason names the unknown issuer: {message}"
        );
    }
    assert!(seen.lock().unwrap().is_empty(), "no request crossed");
}

#[test]
fn a_ca_file_that_cannot_be_used_is_a_configuration_error_naming_it() {
    let key = key_file();
    let not_pem = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(not_pem.path(), "not a certificate\n").unwrap();
    let cases = [
        (
            "https://127.0.0.1:6820",
            tls_fixture("missing.pem"),
            "reading ca_file",
        ),
        (
            "https://127.0.0.1:6820",
            not_pem.path().to_path_buf(),
            "holds no PEM certificate",
        ),
        ("http://127.0.0.1:6820", tls_fixture("ca.pem"), "not https"),
    ];
    for (base, ca_file, why) in cases {
        let mut config = config(base, &key, Some(ApiVersion::V0_0_38));
        config.ca_file = Some(ca_file.clone());
        let err = SlurmRestClient::new(config).unwrap_err();
        let RestError::Config(message) = &err else {
            panic!("{ca_file:?}: expected a configuration error, got {err:?}");
        };
        assert!(message.contains(why), "{message}");
        assert!(
            message.contains(&ca_file.display().to_string()),
            "names the file: {message}"
        );
    }
}
