//! Group commit for the admission path: concurrent submissions queue their ledger writes
//! here, and one task hands everything queued to the ledger as one batch (one write
//! transaction) while the next batch gathers. At one submission at a time a batch is one
//! submission and nothing waits; under load the single writer's per-transaction cost is
//! shared by every submission of a batch instead of paid by each.
//!
//! The ledger decides each submission of a batch in order, exactly as separate transactions
//! would, so batching changes throughput, never outcomes.
//!
//! Forwarded jobs (cluster job id noted, hold linked) are recorded behind the submitter's
//! answer: the job already runs, nothing about the answer depends on the record, and waiting
//! for a second transaction on every submission was a third of the latency bursar added to a
//! slurmrestd submission. They ride in the next batch's transaction (at
//! [`FORWARDED_LINGER`] at the latest, alone): a steady stream of submissions costs one
//! transaction each, not two. Every reader of jobs in this process first waits for the
//! records queued before it ([`AdmissionWriter::settled`], which writes them at once), so a
//! client sees its job with its cluster job id in any later call; `bursar serve` waits for
//! them before it exits.

use std::sync::OnceLock;
use std::time::Duration;

use bursar_ledger::{AdmitOutcome, ForwardedJob, Ledger, LedgerError, NewAdmission};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::timefmt::now;

/// Most submissions in one transaction.
const MAX_BATCH: usize = 256;

/// The longest a forwarded job's record waits for a batch to ride in before it is written
/// alone.
pub(crate) const FORWARDED_LINGER: Duration = Duration::from_millis(5);

type Reply = oneshot::Sender<Result<AdmitOutcome, LedgerError>>;

/// What the writer task is asked for.
enum Request {
    Admit(Box<NewAdmission>, Reply),
    Forwarded(ForwardedJob),
    /// Answered once every forwarded job queued before it is written.
    Settled(oneshot::Sender<()>),
}

/// The ledger writes of admission, group-committed by one task: [`Ledger::admit_recording`]
/// for submissions with the forwarded jobs queued meanwhile, or for those jobs alone when no
/// submission came for them. The task starts on first use, on the caller's
/// runtime, and ends when the writer is dropped.
pub(crate) struct AdmissionWriter {
    ledger: Ledger,
    tx: OnceLock<mpsc::UnboundedSender<Request>>,
}

impl AdmissionWriter {
    pub(crate) fn new(ledger: Ledger) -> AdmissionWriter {
        AdmissionWriter {
            ledger,
            tx: OnceLock::new(),
        }
    }

    /// Admits one submission (its hold and job), batched with whatever else is queued.
    pub(crate) async fn admit(&self, admission: NewAdmission) -> Result<AdmitOutcome, LedgerError> {
        let (reply, answer) = oneshot::channel();
        if self
            .sender()
            .send(Request::Admit(Box::new(admission), reply))
            .is_err()
        {
            return Err(stopped());
        }
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Queues the record of a forwarded job (its hold linked, the cluster's job id noted)
    /// without waiting for it: the job already runs on its cluster, and its submitter is
    /// answered at once. Whoever reads jobs afterwards waits for
    /// [`AdmissionWriter::settled`] first; a record that cannot be written is logged, and its
    /// hold then expires instead of settling.
    pub(crate) fn forwarded(&self, job: ForwardedJob) {
        let (id, cluster_job_id) = (job.job, job.cluster_job_id.clone());
        if self.sender().send(Request::Forwarded(job)).is_err() {
            tracing::error!(job = id, %cluster_job_id, error = %stopped(),
                "the job was forwarded but could not be linked to its hold; the hold will \
                 expire instead of settling");
        }
    }

    /// Waits until every forwarded job queued before this call is written (or has failed
    /// and been logged).
    pub(crate) async fn settled(&self) {
        let (reply, answer) = oneshot::channel();
        if self.sender().send(Request::Settled(reply)).is_ok() {
            let _ = answer.await;
        }
    }

    fn sender(&self) -> &mpsc::UnboundedSender<Request> {
        self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.ledger.clone(), rx));
            tx
        })
    }
}

/// What the writer task has taken and not yet written.
#[derive(Default)]
struct Pending {
    admissions: Vec<NewAdmission>,
    replies: Vec<Reply>,
    forwarded: Vec<ForwardedJob>,
    barriers: Vec<oneshot::Sender<()>>,
}

impl Pending {
    fn take(&mut self, request: Request) {
        match request {
            Request::Admit(admission, reply) => {
                self.admissions.push(*admission);
                self.replies.push(reply);
            }
            Request::Forwarded(job) => self.forwarded.push(job),
            Request::Settled(reply) => self.barriers.push(reply),
        }
    }
}

/// The writer task: takes everything queued at once, admits the submissions with the
/// forwarded jobs in one transaction, or writes the forwarded jobs alone when a barrier asks
/// for them, they waited [`FORWARDED_LINGER`], or the writer is gone.
async fn run(ledger: Ledger, mut rx: mpsc::UnboundedReceiver<Request>) {
    let mut p = Pending::default();
    let mut deadline: Option<Instant> = None;
    let mut open = true;
    while open || !p.forwarded.is_empty() {
        if open {
            let first = match deadline {
                None => rx.recv().await,
                Some(at) => tokio::time::timeout_at(at, rx.recv())
                    .await
                    .unwrap_or_else(|_elapsed| None),
            };
            match first {
                Some(request) => p.take(request),
                // The linger is over, or every sender is gone.
                None => open = !rx.is_closed(),
            }
        }
        while p.admissions.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(request) => p.take(request),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        let lingered = deadline.is_some_and(|at| Instant::now() >= at);
        if !p.admissions.is_empty() {
            let jobs = std::mem::take(&mut p.forwarded);
            let answers = admit(&ledger, std::mem::take(&mut p.admissions), &jobs).await;
            // A caller that stopped waiting loses only its answer; the write stands.
            for (reply, answer) in p.replies.drain(..).zip(answers) {
                let _ = reply.send(answer);
            }
        } else if !p.forwarded.is_empty() && (!p.barriers.is_empty() || lingered || !open) {
            record_forwarded(&ledger, &std::mem::take(&mut p.forwarded)).await;
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

/// Admits `batch` with the records of `jobs` in one transaction. Should that fail while jobs
/// were to be recorded, each is tried on its own (a bad record must not refuse submissions,
/// nor a failed batch lose records).
async fn admit(
    ledger: &Ledger,
    batch: Vec<NewAdmission>,
    jobs: &[ForwardedJob],
) -> Vec<Result<AdmitOutcome, LedgerError>> {
    let n = batch.len();
    match ledger.admit_recording(&batch, jobs, now()).await {
        Ok(done) => {
            check_recorded(jobs, done.linked, &done.unrecorded);
            return done.outcomes;
        }
        Err(e) if jobs.is_empty() => return vec![Err(e); n],
        Err(e) => tracing::warn!(error = %e, jobs = jobs.len(),
            "admitting with the forwarded jobs' records failed; retrying apart"),
    }
    record_forwarded(ledger, jobs).await;
    match ledger.admit(&batch, now()).await {
        Ok(outcomes) => outcomes,
        Err(e) => vec![Err(e); n],
    }
}

/// Logs forwarded jobs whose record did not take: not found, or holds linked to other jobs.
fn check_recorded(jobs: &[ForwardedJob], linked: u64, unrecorded: &[i64]) {
    for &job in unrecorded {
        tracing::error!(
            job,
            "the job was forwarded but its record is missing; its hold will \
            expire instead of settling"
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
async fn record_forwarded(ledger: &Ledger, jobs: &[ForwardedJob]) {
    let e = match ledger.admit_recording(&[], jobs, now()).await {
        Ok(done) => return check_recorded(jobs, done.linked, &done.unrecorded),
        Err(e) => e,
    };
    tracing::warn!(error = %e, jobs = jobs.len(),
        "recording forwarded jobs as a batch failed; retrying one by one");
    for job in jobs {
        let one = std::slice::from_ref(job);
        match ledger.admit_recording(&[], one, now()).await {
            Ok(done) => check_recorded(one, done.linked, &done.unrecorded),
            Err(e) => tracing::error!(job = job.job, cluster_job_id = %job.cluster_job_id,
                error = %e, "the job was forwarded but could not be linked to its hold; the \
                hold will expire instead of settling"),
        }
    }
}

fn stopped() -> LedgerError {
    LedgerError::Storage("the admission writer stopped".to_string())
}
