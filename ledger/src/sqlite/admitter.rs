//! The admission writer: a thread of its own with a connection of its own, on which every
//! admission transaction ([`admit::admit`]) runs from `BEGIN` to `COMMIT` without leaving it.
//!
//! Through sqlx each statement of a transaction was a round trip to the connection's worker
//! thread, and each result row and statement result woke the waiting task: a batch of one
//! submission cost about 60 futex calls and most of its CPU in thread switches. Here a batch
//! costs one hand-over to this thread and one back, and the statements stay prepared for the
//! connection's life.
//!
//! The connection is a second writer beside the storage's sqlx writer (collection, admin,
//! releases): SQLite serializes the two (`BEGIN IMMEDIATE`, the busy timeout), and each
//! decides on what its own transaction reads, so nothing can overspend.
//!
//! Because this connection does most of a server's commits, it also answers
//! `PRAGMA data_version` for the quote view cache: the value moves when any *other*
//! connection commits (this storage's sqlx writer, which tells the cache itself, or another
//! process), and not for admissions, which would otherwise empty the cache at every batch.

use std::path::PathBuf;
use std::sync::mpsc;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use super::admit::{self, sql, Admitted};
use super::BUSY_TIMEOUT;
use crate::error::{LedgerError, Result};
use crate::model::{ForwardedJob, NewAdmission};

/// Statements the connection keeps prepared (the admission path has about a dozen).
const STATEMENTS: usize = 32;

/// Where the admission writer's connection goes.
#[derive(Debug, Clone)]
pub(super) enum Database {
    /// A database file (WAL).
    File(PathBuf),
    /// A shared in-memory database of the `memdb` VFS, by its name (`/…`).
    Memory(String),
}

enum Request {
    Admit {
        batch: Vec<NewAdmission>,
        forwarded: Vec<ForwardedJob>,
        now: i64,
        reply: oneshot::Sender<Result<Admitted>>,
    },
    DataVersion(oneshot::Sender<Result<i64>>),
    /// From now on another connection checkpoints ([`super::SqliteStorage`]'s checkpointer).
    StopCheckpointing(oneshot::Sender<Result<()>>),
}

/// The handle to the admission writer's thread. The thread ends, closing its connection, once
/// the last handle is dropped.
#[derive(Debug)]
pub(super) struct Admitter {
    tx: mpsc::Sender<Request>,
}

impl Admitter {
    /// Opens the connection (the database must exist and be migrated) and starts the thread.
    pub(super) fn start(database: &Database) -> Result<Admitter> {
        let conn = open(database)?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("bursar-admit".to_string())
            .spawn(move || run(&conn, &rx))
            .map_err(|e| LedgerError::Storage(format!("starting the admission writer: {e}")))?;
        Ok(Admitter { tx })
    }

    /// [`admit::admit`] on the writer's thread.
    pub(super) async fn admit(
        &self,
        batch: Vec<NewAdmission>,
        forwarded: Vec<ForwardedJob>,
        now: i64,
    ) -> Result<Admitted> {
        self.ask(|reply| Request::Admit {
            batch,
            forwarded,
            now,
            reply,
        })
        .await?
    }

    /// `PRAGMA data_version` of the writer's connection.
    pub(super) async fn data_version(&self) -> Result<i64> {
        self.ask(Request::DataVersion).await?
    }

    /// Turns off the connection's checkpoint at commit.
    pub(super) async fn stop_checkpointing(&self) -> Result<()> {
        self.ask(Request::StopCheckpointing).await?
    }

    async fn ask<T>(&self, request: impl FnOnce(oneshot::Sender<T>) -> Request) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(request(reply)).is_err() {
            return Err(stopped());
        }
        answer.await.map_err(|_| stopped())
    }
}

fn stopped() -> LedgerError {
    LedgerError::Storage("the admission writer stopped".to_string())
}

/// The connection, set up as the storage's sqlx connections are.
fn open(database: &Database) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match database {
        Database::File(path) => Connection::open_with_flags(path, flags),
        Database::Memory(name) => Connection::open_with_flags_and_vfs(name, flags, "memdb"),
    }
    .map_err(|e| LedgerError::Storage(format!("opening the admission writer's connection: {e}")))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    conn.set_prepared_statement_cache_capacity(STATEMENTS);
    conn.execute_batch(
        "pragma synchronous = normal;
         pragma foreign_keys = on;
         pragma cache_size = -16384;
         pragma temp_store = memory;
         pragma wal_autocheckpoint = 16384;
         pragma journal_size_limit = 67108864;",
    )
    .map_err(sql)?;
    Ok(conn)
}

fn run(conn: &Connection, rx: &mpsc::Receiver<Request>) {
    for request in rx {
        match request {
            Request::Admit {
                batch,
                forwarded,
                now,
                reply,
            } => {
                let done = admit::admit(conn, &batch, &forwarded, now);
                // A caller that stopped waiting loses only its answer.
                let _ = reply.send(done);
            }
            Request::DataVersion(reply) => {
                let version = conn
                    .query_row("pragma data_version", [], |row| row.get(0))
                    .map_err(sql);
                let _ = reply.send(version);
            }
            Request::StopCheckpointing(reply) => {
                let done = conn
                    .execute_batch("pragma wal_autocheckpoint = 0")
                    .map_err(sql);
                let _ = reply.send(done);
            }
        }
    }
}
