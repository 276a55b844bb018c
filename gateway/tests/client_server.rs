//! The client against the real server: `bursar serve` on a free port with a SQLite ledger,
//! a token from `bursar token issue`, and `bursar balance` reading through the API what the
//! admin set locally. Checks the client and the server agree on docs/api.md, not just the
//! client and a mock.

mod client_support;

use std::process::Stdio;

use client_support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Kills the server when the test ends, however it ends.
struct Server {
    child: tokio::process::Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn start_server(home: &Home) -> Server {
    let mut child = tokio::process::Command::new(bursar_exe())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("bursar serve printed its address in time")
        .unwrap()
        .expect("bursar serve printed its address");
    let url = first
        .strip_prefix("bursar listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    Server { child, url }
}

#[tokio::test]
async fn balance_through_the_real_server() {
    let home = Home::new();
    home.write(
        "bursar.yaml",
        "database: sqlite://ledger.db\n\
         accounts:\n  science: {}\n  physics: {parent: science}\n  chemistry: {parent: science}\n\
         users:\n  alice: {default_account: physics, accounts: [physics]}\n\
         auth:\n  hs256_key_file: jwt.key\n",
    );
    let admin = |args: &'static [&'static str]| {
        let home = &home;
        async move { run_program(&bursar_exe(), args, home, &[]).await }
    };
    let run = admin(&["token", "keygen"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for args in [
        &[
            "alloc",
            "set",
            "science",
            "--currency",
            "su",
            "--amount",
            "1000",
        ][..],
        &[
            "alloc",
            "set",
            "physics",
            "--currency",
            "su",
            "--amount",
            "100",
        ][..],
        &[
            "alloc",
            "set",
            "chemistry",
            "--currency",
            "su",
            "--amount",
            "50",
        ][..],
    ] {
        let run = run_program(&bursar_exe(), args, &home, &[]).await;
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
    }
    let issued = admin(&["token", "issue", "--user", "alice", "--ttl", "1h"]).await;
    assert_eq!(issued.code, 0, "{issued:?}");
    let token = issued.stdout.trim().to_string();

    let server = start_server(&home).await;
    // A user's shell: no configuration, the token and the server's address in the environment.
    let user = Home::new();
    let run = run_program(
        &bursar_exe(),
        &["balance"],
        &user,
        &[("BURSAR_URL", &server.url), ("BURSAR_TOKEN", &token)],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let rows: Vec<&str> = run.stdout.lines().collect();
    assert!(
        rows[0].starts_with("ACCOUNT  CURRENCY  ALLOCATED"),
        "{run:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("physics") && r.contains("100.00")),
        "{run:?}"
    );
    assert!(!run.stdout.contains("chemistry"), "{run:?}");

    let run = run_program(
        &bursar_exe(),
        &["balance", "--format", "json"],
        &user,
        &[("BURSAR_URL", &server.url), ("BURSAR_TOKEN", &token)],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let physics = json["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["account"] == "physics")
        .unwrap();
    assert_eq!(physics["allocated"], "100.00");

    // Another user's account: the server's 403, as the user sees it.
    let run = run_program(
        &bursar_exe(),
        &["balance", "chemistry"],
        &user,
        &[("BURSAR_URL", &server.url), ("BURSAR_TOKEN", &token)],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.starts_with("bursar: "), "{run:?}");
    assert!(run.stderr.contains("chemistry"), "{run:?}");

    // A token the server does not accept.
    let run = run_program(
        &bursar_exe(),
        &["balance"],
        &user,
        &[("BURSAR_URL", &server.url), ("BURSAR_TOKEN", "not-a-jwt")],
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("the token from BURSAR_TOKEN was refused"),
        "{run:?}"
    );
}
