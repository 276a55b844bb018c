//! slurmrestd and dstack over https with a site's own certificate authority (`ca_file`): a
//! real TLS server on 127.0.0.1 (rustls), its certificate signed by a test CA
//! (`fixtures/tls/`, see its README). Each client trusts what `ca_file` names and nothing
//! else; without it, the public roots, which do not know the test CA.

#[path = "fixtures/slurmrestd/common.rs"]
mod common;
#[path = "fixtures/dstack/support.rs"]
mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bursar_collectors::dstack::{DstackClient, DstackError};
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
/// It answers every request on every connection with `answer` (JSON, 200), after reading the
/// request's body if it has one, and notes its request line; a failed handshake just ends
/// that connection.
async fn tls_server(answer: String) -> (SocketAddr, Seen) {
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
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, noted, answer) = (acceptor.clone(), noted.clone(), answer.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let head_end = loop {
                        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
                    let body: usize = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, v)| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buffer.len() < head_end + body {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buffer.drain(..head_end + body);
                    noted
                        .lock()
                        .unwrap()
                        .push(head.lines().next().unwrap_or_default().to_string());
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if tls.write_all(reply.as_bytes()).await.is_err() {
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
    let (addr, seen) = tls_server(fixture("real-22.05/ping.json")).await;
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
    let (addr, seen) = tls_server(fixture("real-22.05/ping.json")).await;
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

#[tokio::test]
async fn an_https_dstack_with_a_site_ca_is_trusted_through_ca_file() {
    let (addr, seen) = tls_server("[]".to_string()).await;
    let base = format!("https://localhost:{}", addr.port());
    let mut config = support::config(&base);
    config.ca_file = Some(tls_fixture("ca.pem"));
    let client = DstackClient::new(config).unwrap();
    let page = client.fetch_since(None, 1).await.unwrap();
    assert!(page.records.is_empty() && !page.more, "{page:?}");
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec!["POST /api/runs/list HTTP/1.1".to_string()]
    );

    // The public roots, then another CA: refused before any request crosses.
    for ca_file in [None, Some(tls_fixture("other-ca.pem"))] {
        let mut config = support::config(&base);
        config.ca_file = ca_file.clone();
        let err = DstackClient::new(config)
            .unwrap()
            .fetch_since(None, 1)
            .await
            .unwrap_err();
        let message = format!("{err:?}");
        assert!(
            matches!(err, DstackError::Unreachable { .. }),
            "{ca_file:?}: {message}"
        );
        assert!(
            message.contains("UnknownIssuer"),
            "{ca_file:?}: names the unknown issuer: {message}"
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 1);

    let not_pem = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(not_pem.path(), "not a certificate\n").unwrap();
    for (base, ca_file, why) in [
        (base.as_str(), tls_fixture("missing.pem"), "reading ca_file"),
        (
            base.as_str(),
            not_pem.path().to_path_buf(),
            "holds no PEM certificate",
        ),
        ("http://127.0.0.1:3000", tls_fixture("ca.pem"), "not https"),
    ] {
        let mut config = support::config(base);
        config.ca_file = Some(ca_file.clone());
        let err = DstackClient::new(config).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, DstackError::Config(_)) && message.contains(why),
            "{message}"
        );
        assert!(
            message.contains(&ca_file.display().to_string()),
            "{message}"
        );
    }
}
