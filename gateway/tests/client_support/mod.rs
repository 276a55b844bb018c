//! Shared by the `client_*` tests: run the real `bursar` binary in a clean environment against
//! a wiremock server standing in for bursar, and a proxy that drops the first connection.

#![allow(dead_code)] // each test crate uses part of this

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiremock::MockServer;

pub const TOKEN: &str = "test-token";

/// What a run of the binary printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A temporary folder that is the user's home and working folder.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `name` in the folder and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

pub fn bursar_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bursar"))
}

/// Runs `program args` in `home` with only `HOME`, `MY_VAR` and `env` set (plus
/// `BURSAR_TOKEN` unless `env` sets it to "", which leaves it unset; other empty values are
/// set empty).
pub async fn run_program(program: &Path, args: &[&str], home: &Home, env: &[(&str, &str)]) -> Run {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .env("MY_VAR", "hello")
        .stdin(std::process::Stdio::null());
    if !env.iter().any(|(k, _)| *k == "BURSAR_TOKEN") {
        command.env("BURSAR_TOKEN", TOKEN);
    }
    for (k, v) in env {
        if !(*k == "BURSAR_TOKEN" && v.is_empty()) {
            command.env(k, v);
        }
    }
    let output = command.output().await.unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// `bursar args` with `BURSAR_URL` pointing at `url`.
pub async fn bursar(args: &[&str], home: &Home, url: &str) -> Run {
    run_program(&bursar_exe(), args, home, &[("BURSAR_URL", url)]).await
}

/// The JSON bodies of the requests the mock received for `method path`.
pub async fn bodies(server: &MockServer, method: &str, path: &str) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == method && r.url.path() == path)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// A job script with `#SBATCH` lines.
pub const SCRIPT: &str =
    "#!/bin/bash\n#SBATCH --time=30\n#SBATCH --mem=4G\n#SBATCH -J train\nsrun hostname\n";

/// A TCP proxy to `upstream` that reads the whole first request it gets and closes the
/// connection without an answer (a server that died mid-request), then passes every later
/// connection through. Returns its URL and the raw first request.
pub fn dropping_proxy(upstream: SocketAddr) -> (String, Arc<Mutex<Option<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let dropped = Arc::new(Mutex::new(None));
    let record = dropped.clone();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { return };
            if n == 0 {
                let request = read_request(&mut conn);
                *record.lock().unwrap() = Some(request);
                drop(conn);
                continue;
            }
            let Ok(up) = TcpStream::connect(upstream) else {
                return;
            };
            let (mut up_read, mut conn_write) =
                (up.try_clone().unwrap(), conn.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut up_read, &mut conn_write);
                let _ = conn_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let mut up = up;
                let _ = std::io::copy(&mut conn, &mut up);
                let _ = up.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (url, dropped)
}

/// Reads one HTTP/1 request (head and a `Content-Length` body) as text.
fn read_request(conn: &mut TcpStream) -> String {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = header(&text[..end], "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                break;
            }
        }
    }
    let _ = conn.flush();
    String::from_utf8_lossy(&data).to_string()
}

/// A header's value in a raw HTTP head, by case-insensitive name.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}
