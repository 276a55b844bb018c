//! The load generator's HTTP: a minimal HTTP/1.1 client over one keep-alive loopback
//! connection, in the spirit of `wrk` — the request's fixed part built once, one `write` and
//! usually one `read` per request, nothing parsed but the status line and the headers that
//! frame the body (`Content-Length`, `Transfer-Encoding: chunked`, `Connection: close`).
//!
//! A load generator is not what is measured: the lighter it is, the more of the two cores is
//! left to the server under test. `reqwest` (`--load-client reqwest`) spends about as much
//! CPU per request on this side as bursar does on its side of a quote.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest response head accepted (status line and headers).
const MAX_HEAD: usize = 64 * 1024;

/// One connection to one server and the fixed part of the one request it sends.
pub struct Http1 {
    addr: SocketAddr,
    /// `METHOD path HTTP/1.1`, `Host`, the fixed headers and `Content-Length`, each line ended.
    head: Vec<u8>,
    body: Vec<u8>,
    stream: Option<TcpStream>,
    /// The request being sent.
    out: Vec<u8>,
    /// What was read: the head, then the body from `body_at`.
    buf: Vec<u8>,
    /// The decoded body of the last response (chunked answers only; else it stays in `buf`).
    chunked_body: Vec<u8>,
}

/// A response's status and body, borrowed from the client until its next request.
pub struct Response<'a> {
    pub status: u16,
    pub body: &'a [u8],
}

impl Http1 {
    /// A client for `method path` at `base` (`http://127.0.0.1:PORT`, loopback only), sending
    /// `headers` and `body` with every request.
    pub fn new(
        base: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<Http1> {
        let authority = base
            .strip_prefix("http://")
            .ok_or_else(|| invalid(format!("{base}: only http:// addresses are supported")))?
            .trim_end_matches('/');
        let addr: SocketAddr = authority
            .parse()
            .map_err(|e| invalid(format!("{base}: not an IP address and port: {e}")))?;
        if !addr.ip().is_loopback() {
            return Err(invalid(format!(
                "{base}: the load generator stays on loopback"
            )));
        }
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for (name, value) in headers {
            if [name, value]
                .iter()
                .any(|s| s.contains('\r') || s.contains('\n'))
            {
                return Err(invalid(format!("header {name} holds a line break")));
            }
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        Ok(Http1 {
            addr,
            head: head.into_bytes(),
            body: body.unwrap_or_default().to_vec(),
            stream: None,
            out: Vec::with_capacity(4096),
            buf: Vec::with_capacity(16 * 1024),
            chunked_body: Vec::new(),
        })
    }

    /// Sends the request with `extra` headers added and reads the whole answer. A kept-alive
    /// connection the server closed meanwhile is reopened and the request sent once more, as
    /// long as not one byte of an answer had come back.
    pub async fn send(&mut self, extra: &[(&str, &str)]) -> io::Result<Response<'_>> {
        self.out.clear();
        self.out.extend_from_slice(&self.head);
        for (name, value) in extra {
            for part in [name.as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
                self.out.extend_from_slice(part);
            }
        }
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(&self.body);

        let reused = self.stream.is_some();
        let framed = match self.exchange().await {
            Ok(framed) => framed,
            Err(e) if reused && self.buf.is_empty() => {
                // The server closed the idle connection before this request reached it.
                let _ = e;
                self.stream = None;
                self.exchange().await?
            }
            Err(e) => {
                self.stream = None;
                return Err(e);
            }
        };
        let Framed {
            status,
            body_at,
            body_end,
            chunked,
            close,
        } = framed;
        if close {
            self.stream = None;
        }
        let body = if chunked {
            &self.chunked_body[..]
        } else {
            &self.buf[body_at..body_end]
        };
        Ok(Response { status, body })
    }

    /// Writes `out` on the connection (opening it first if needed) and reads one answer.
    async fn exchange(&mut self) -> io::Result<Framed> {
        self.buf.clear();
        if self.stream.is_none() {
            let stream = TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| io::Error::other("no connection"))?;
        stream.write_all(&self.out).await?;
        read_answer(stream, &mut self.buf, &mut self.chunked_body).await
    }
}

/// Where the answer's parts are in the read buffer.
struct Framed {
    status: u16,
    body_at: usize,
    body_end: usize,
    chunked: bool,
    close: bool,
}

/// Reads one answer into `buf`: the head, then a body framed by `Content-Length`, by chunks
/// (decoded into `chunked`) or by the end of the connection.
async fn read_answer(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    chunked_body: &mut Vec<u8>,
) -> io::Result<Framed> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("the answer's head is too long".into()));
        }
        if fill(stream, buf).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection before answering",
            ));
        }
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| invalid("the answer's head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| invalid(format!("not an HTTP/1 status line: {status_line:?}")))?;
    let (mut length, mut chunked, mut close) = (None, false, status_line.starts_with("HTTP/1.0"));
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| invalid(format!("Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().ends_with("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    if chunked {
        read_chunks(stream, buf, head_end, chunked_body).await?;
        return Ok(Framed {
            status,
            body_at: head_end,
            body_end: head_end,
            chunked: true,
            close,
        });
    }
    let body_end = match length {
        Some(n) => {
            let end = head_end + n;
            while buf.len() < end {
                if fill(stream, buf).await? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection ended inside the body",
                    ));
                }
            }
            end
        }
        // No body by definition.
        None if status == 204 || status == 304 || (100..200).contains(&status) => head_end,
        // Framed by the end of the connection.
        None => {
            close = true;
            while fill(stream, buf).await? > 0 {}
            buf.len()
        }
    };
    Ok(Framed {
        status,
        body_at: head_end,
        body_end,
        chunked: false,
        close,
    })
}

/// Decodes a chunked body that starts at `at` in `buf` into `body`.
async fn read_chunks(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    mut at: usize,
    body: &mut Vec<u8>,
) -> io::Result<()> {
    body.clear();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf[at..], b"\r\n") {
                break at + i;
            }
            if fill(stream, buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended inside a chunk",
                ));
            }
        };
        let size_text = std::str::from_utf8(&buf[at..line_end]).unwrap_or_default();
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("chunk size {size_text:?}")))?;
        let data = line_end + 2;
        // The chunk and its CRLF; the last chunk (0) is followed by (no trailers) one CRLF.
        while buf.len() < data + size + 2 {
            if fill(stream, buf).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended inside a chunk",
                ));
            }
        }
        if size == 0 {
            return Ok(());
        }
        body.extend_from_slice(&buf[data..data + size]);
        at = data + size + 2;
    }
}

/// Reads what the socket has into the end of `buf`; 0 at the end of the stream.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    stream.read_buf(buf).await
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that reads one request per answer in `answers` (each in the given pieces) on
    /// one connection, then closes it; what it read, request by request.
    async fn serve(
        answers: Vec<Vec<&'static [u8]>>,
    ) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut requests = Vec::new();
            for pieces in answers {
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                // A request here is a head and a body of `Content-Length` bytes.
                loop {
                    let n = socket.read(&mut chunk).await.unwrap();
                    request.extend_from_slice(&chunk[..n]);
                    if let Some(end) = find(&request, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_string();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .map_or(0, |v| v.parse().unwrap());
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                requests.push(String::from_utf8(request).unwrap());
                for piece in pieces {
                    socket.write_all(piece).await.unwrap();
                    socket.flush().await.unwrap();
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            requests
        });
        (base, task)
    }

    #[tokio::test]
    async fn sends_the_fixed_request_with_extra_headers_and_reads_framed_answers() {
        let (base, server) = serve(vec![
            vec![
                b"HTTP/1.1 201 Created\r\ncontent-length: 10\r\n\r\n{\"id\":",
                b"\"7\"}",
            ],
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n",
                b"3\r\n:1}\r\n0\r\n\r\n",
            ],
            vec![b"HTTP/1.1 204 No Content\r\n\r\n"],
        ])
        .await;
        let mut client = Http1::new(
            &base,
            "POST",
            "/v1/jobs",
            &[("Authorization", "Bearer t")],
            Some(b"{\"x\":1}"),
        )
        .unwrap();
        let first = client.send(&[("Idempotency-Key", "k1")]).await.unwrap();
        assert_eq!((first.status, first.body), (201, &b"{\"id\":\"7\"}"[..]));
        let second = client.send(&[]).await.unwrap();
        assert_eq!((second.status, second.body), (200, &b"{\"a\":1}"[..]));
        let third = client.send(&[]).await.unwrap();
        assert_eq!((third.status, third.body.len()), (204, 0));
        let requests = server.await.unwrap();
        let authority = base.trim_start_matches("http://");
        assert_eq!(
            requests[0],
            format!(
                "POST /v1/jobs HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer t\r\n\
                 Content-Length: 7\r\nIdempotency-Key: k1\r\n\r\n{{\"x\":1}}"
            )
        );
        assert!(!requests[1].contains("Idempotency-Key"), "{}", requests[1]);
    }

    #[tokio::test]
    async fn reopens_a_connection_the_server_closed_and_refuses_a_cut_answer() {
        // First connection: one answer, then closed; the second request must go out on a new
        // connection, whose answer is cut inside its body.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            for answer in [
                &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
                &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\ncut"[..],
            ] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut chunk = [0u8; 1024];
                let _ = socket.read(&mut chunk).await.unwrap();
                socket.write_all(answer).await.unwrap();
            }
        });
        let mut client = Http1::new(&base, "GET", "/healthz", &[], None).unwrap();
        let first = client.send(&[]).await.unwrap();
        assert_eq!((first.status, first.body), (200, &b"ok"[..]));
        let second = client
            .send(&[])
            .await
            .err()
            .expect("a cut body is an error");
        assert_eq!(second.kind(), io::ErrorKind::UnexpectedEof, "{second}");
        server.await.unwrap();
    }

    #[test]
    fn stays_on_loopback_and_refuses_line_breaks_in_headers() {
        let far = Http1::new("http://192.0.2.1:80", "GET", "/", &[], None)
            .err()
            .unwrap();
        assert!(far.to_string().contains("loopback"), "{far}");
        let name = Http1::new("https://127.0.0.1:1", "GET", "/", &[], None)
            .err()
            .unwrap();
        assert!(name.to_string().contains("only http://"), "{name}");
        let header = Http1::new(
            "http://127.0.0.1:1",
            "GET",
            "/",
            &[("X", "a\r\nB: c")],
            None,
        )
        .err()
        .unwrap();
        assert!(header.to_string().contains("line break"), "{header}");
    }
}
