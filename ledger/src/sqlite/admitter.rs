//! The admission writer: a thread of its own with a connection of its own, on which every
//! admission transaction ([`admit::admit`]) runs from `BEGIN` to `COMMIT` without leaving it.
//!
//! Through sqlx each statement of a transaction was a round trip to the connection's worker
//! thread, and each result row and statement result woke the waiting task: a batch of one
//! submission cost about 60 futex calls and most of its CPU in thread switches. Here a batch
//! costs one hand-over to this thread and one back, and the statements stay prepared for the
//! connection's life.
//!
//! Submissions queue here one by one ([`Admitter::admit_one`]) and are group-committed by
//! the thread itself: it takes everything queued at once and decides it in one transaction
//! (each submission against the allocations as the ones before it left them, as separate
//! transactions would), while the next batch gathers. The records of forwarded jobs
//! ([`Admitter::forwarded`]) ride in the next batch's transaction, or are written alone after
//! [`FORWARDED_LINGER`]; [`Admitter::settled`] waits for those queued before it. They are handed
//! over beside the queue ([`Handover`]), not through it: the thread takes them whenever it
//! wakes, and a record wakes it only when it sleeps with nothing else to write (under load
//! each record would otherwise cost the thread one more wake-up per submission).
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use super::admit::{self, sql, Admitted};
use super::{BUSY_TIMEOUT, WAL_SIZE_LIMIT};
use crate::error::{LedgerError, Result};
use crate::model::{AdmitOutcome, ForwardedJob, NewAdmission};

/// Statements the connection keeps prepared (the admission path has about a dozen).
const STATEMENTS: usize = 32;

/// Most queued submissions in one transaction.
const MAX_BATCH: usize = 256;

/// The longest a forwarded job's record waits for a batch to ride in before it is written
/// alone.
pub const FORWARDED_LINGER: Duration = Duration::from_millis(5);

/// What a queued submission gets back: its outcome, or (its key used before) the id of the
/// job recorded with it, which the caller reads once the transaction is over.
// Moved once, through a oneshot: boxing the outcome would cost an allocation a submission.
#[allow(clippy::large_enum_variant)]
pub(super) enum Queued {
    Decided(Result<AdmitOutcome>),
    Earlier(i64),
}

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
    One {
        admission: Box<NewAdmission>,
        now: i64,
        reply: oneshot::Sender<Queued>,
    },
    /// Forwarded jobs wait in the [`Handover`] and the thread slept without a deadline.
    Wake,
    /// Answered once every forwarded job queued before it is written (or has failed and been
    /// logged).
    Settled(oneshot::Sender<()>),
    DataVersion(oneshot::Sender<Result<i64>>),
    /// From now on another connection checkpoints ([`super::SqliteStorage`]'s checkpointer).
    StopCheckpointing(oneshot::Sender<Result<()>>),
}

/// The handle to the admission writer's thread. The thread ends, closing its connection, once
/// the last handle is dropped.
#[derive(Debug)]
pub(super) struct Admitter {
    tx: mpsc::Sender<Request>,
    handover: Arc<Handover>,
}

/// Forwarded jobs' records on their way to the thread.
#[derive(Debug, Default)]
struct Handover {
    jobs: Mutex<Vec<ForwardedJob>>,
    /// Set by the thread just before it sleeps with no deadline: whoever hands over a record
    /// next clears it and wakes the thread.
    idle: AtomicBool,
    /// Set once the thread has ended (a panic included): records can no longer be taken.
    ended: AtomicBool,
}

impl Handover {
    fn take(&self) -> Vec<ForwardedJob> {
        std::mem::take(&mut *self.jobs.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn is_empty(&self) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

/// Marks the hand-over ended when the thread's function returns or unwinds.
struct Ended(Arc<Handover>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::SeqCst);
    }
}

impl Admitter {
    /// Opens the connection (the database must exist and be migrated) and starts the thread.
    pub(super) fn start(database: &Database) -> Result<Admitter> {
        let conn = open(database)?;
        let (tx, rx) = mpsc::channel();
        let handover = Arc::new(Handover::default());
        let theirs = handover.clone();
        std::thread::Builder::new()
            .name("bursar-admit".to_string())
            .spawn(move || {
                let _ended = Ended(theirs.clone());
                run(&conn, &rx, &theirs);
            })
            .map_err(|e| LedgerError::Storage(format!("starting the admission writer: {e}")))?;
        Ok(Admitter { tx, handover })
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

    /// Admits one submission (its hold and job), batched with whatever else is queued.
    pub(super) async fn admit_one(&self, admission: NewAdmission, now: i64) -> Result<Queued> {
        self.ask(|reply| Request::One {
            admission: Box::new(admission),
            now,
            reply,
        })
        .await
    }

    /// Queues the record of a forwarded job without waiting for it.
    pub(super) fn forwarded(&self, job: ForwardedJob) -> Result<()> {
        if self.handover.ended.load(Ordering::SeqCst) {
            return Err(stopped());
        }
        self.handover
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(job);
        // The thread sets `idle`, then looks at the jobs, then sleeps: either it sees this
        // one, or this sees `idle` and wakes it.
        if self.handover.idle.swap(false, Ordering::SeqCst) {
            self.tx.send(Request::Wake).map_err(|_| stopped())?;
        }
        Ok(())
    }

    /// Waits until every forwarded job queued before this call is written (or has failed
    /// and been logged).
    pub(super) async fn settled(&self) {
        let _ = self.ask(Request::Settled).await;
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
    conn.execute_batch(&format!(
        "pragma synchronous = normal;
         pragma foreign_keys = on;
         pragma cache_size = -16384;
         pragma temp_store = memory;
         pragma wal_autocheckpoint = 16384;
         pragma journal_size_limit = {WAL_SIZE_LIMIT};"
    ))
    .map_err(sql)?;
    Ok(conn)
}

/// What the thread has taken and not yet written.
#[derive(Default)]
struct Pending {
    admissions: Vec<NewAdmission>,
    replies: Vec<oneshot::Sender<Queued>>,
    now: i64,
    forwarded: Vec<ForwardedJob>,
    barriers: Vec<oneshot::Sender<()>>,
}

/// The thread: answers what needs no transaction at once, runs pre-formed batches as they
/// come, and group-commits queued submissions with the forwarded jobs queued meanwhile, or
/// writes those jobs alone when a barrier asks for them, they waited [`FORWARDED_LINGER`], or
/// every handle is gone.
fn run(conn: &Connection, rx: &mpsc::Receiver<Request>, handover: &Handover) {
    let mut p = Pending::default();
    let mut deadline: Option<Instant> = None;
    let mut open = true;
    while open || !p.forwarded.is_empty() {
        if open {
            let first = match deadline {
                None => {
                    handover.idle.store(true, Ordering::SeqCst);
                    let first = if handover.is_empty() {
                        rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
                    } else {
                        Err(mpsc::RecvTimeoutError::Timeout)
                    };
                    handover.idle.store(false, Ordering::SeqCst);
                    first
                }
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            match first {
                Ok(request) => take(conn, &mut p, request),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
            }
        }
        while open && p.admissions.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(request) => take(conn, &mut p, request),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => open = false,
            }
        }
        // After the queue: a barrier taken above finds the records handed over before it.
        p.forwarded.append(&mut handover.take());
        let lingered = deadline.is_some_and(|at| Instant::now() >= at);
        if !p.admissions.is_empty() {
            let jobs = std::mem::take(&mut p.forwarded);
            let batch = std::mem::take(&mut p.admissions);
            let answers = admit_queued(conn, &batch, &jobs, p.now);
            // A caller that stopped waiting loses only its answer; the write stands.
            for (reply, answer) in p.replies.drain(..).zip(answers) {
                let _ = reply.send(answer);
            }
        } else if !p.forwarded.is_empty() && (!p.barriers.is_empty() || lingered || !open) {
            record_forwarded(conn, &std::mem::take(&mut p.forwarded));
        }
        if p.forwarded.is_empty() {
            deadline = None;
            for barrier in p.barriers.drain(..) {
                let _ = barrier.send(());
            }
        } else if deadline.is_none() {
            deadline = Some(Instant::now() + FORWARDED_LINGER);
        }
    }
}

/// Takes one request: queues submissions, forwarded jobs and barriers; answers the rest.
fn take(conn: &Connection, p: &mut Pending, request: Request) {
    match request {
        Request::One {
            admission,
            now,
            reply,
        } => {
            p.admissions.push(*admission);
            p.replies.push(reply);
            p.now = p.now.max(now);
        }
        Request::Wake => {}
        Request::Settled(reply) => p.barriers.push(reply),
        Request::Admit {
            batch,
            forwarded,
            now,
            reply,
        } => {
            // A caller that stopped waiting loses only its answer.
            let _ = reply.send(admit::admit(conn, &batch, &forwarded, now));
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

/// Admits `batch` with the records of `jobs` in one transaction. Should that fail while jobs
/// were to be recorded, they are recorded apart and the batch tried alone (a bad record must
/// not refuse submissions, nor a failed batch lose records).
fn admit_queued(
    conn: &Connection,
    batch: &[NewAdmission],
    jobs: &[ForwardedJob],
    now: i64,
) -> Vec<Queued> {
    let failed = |e: LedgerError| {
        batch
            .iter()
            .map(|_| Queued::Decided(Err(e.clone())))
            .collect()
    };
    let done = match admit::admit(conn, batch, jobs, now) {
        Ok(done) => {
            check_recorded(jobs, done.linked, &done.unrecorded);
            done
        }
        Err(e) if jobs.is_empty() => return failed(e),
        Err(e) => {
            tracing::warn!(error = %e, jobs = jobs.len(),
                "admitting with the forwarded jobs' records failed; retrying apart");
            record_forwarded(conn, jobs);
            match admit::admit(conn, batch, &[], now) {
                Ok(done) => done,
                Err(e) => return failed(e),
            }
        }
    };
    queued(done)
}

/// Each submission's answer from what [`admit::admit`] decided.
fn queued(done: Admitted) -> Vec<Queued> {
    let mut answers: Vec<Queued> = done
        .outcomes
        .into_iter()
        .map(|o| {
            Queued::Decided(o.unwrap_or_else(|| {
                Err(LedgerError::Storage(
                    "a submission was left undecided".to_string(),
                ))
            }))
        })
        .collect();
    for (i, job) in done.earlier {
        answers[i] = Queued::Earlier(job);
    }
    answers
}

/// Logs forwarded jobs whose record did not take: not found, or holds linked to other jobs.
fn check_recorded(jobs: &[ForwardedJob], linked: u64, unrecorded: &[i64]) {
    for &job in unrecorded {
        tracing::error!(
            job,
            "the job was forwarded but its record is missing; its hold will expire instead \
             of settling"
        );
    }
    let holds = jobs.iter().filter(|j| j.hold.is_some()).count();
    if u64::try_from(holds).unwrap_or(u64::MAX) != linked {
        tracing::error!(
            holds,
            linked,
            "some holds were already linked to other jobs; they will expire instead of \
             settling"
        );
    }
}

/// Records `jobs` in one transaction, else (one bad job must not fail the others) one by
/// one; logs what could not be recorded.
fn record_forwarded(conn: &Connection, jobs: &[ForwardedJob]) {
    let now = jobs.iter().map(|j| j.at).max().unwrap_or(0);
    let e = match admit::admit(conn, &[], jobs, now) {
        Ok(done) => return check_recorded(jobs, done.linked, &done.unrecorded),
        Err(e) => e,
    };
    tracing::warn!(error = %e, jobs = jobs.len(),
        "recording forwarded jobs as a batch failed; retrying one by one");
    for job in jobs {
        let one = std::slice::from_ref(job);
        match admit::admit(conn, &[], one, job.at) {
            Ok(done) => check_recorded(one, done.linked, &done.unrecorded),
            Err(e) => tracing::error!(job = job.job, cluster_job_id = %job.cluster_job_id,
                error = %e, "the job was forwarded but could not be linked to its hold; the \
                hold will expire instead of settling"),
        }
    }
}
