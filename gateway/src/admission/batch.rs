//! Group commit for the admission path: concurrent submissions queue their ledger writes
//! here, and one task hands everything queued to the ledger as one batch (one write
//! transaction) while the next batch gathers. At one submission at a time a batch is one
//! submission and nothing waits; under load the single writer's per-transaction cost is
//! shared by every submission of a batch instead of paid by each.
//!
//! The ledger decides each submission of a batch in order, exactly as separate transactions
//! would, so batching changes throughput, never outcomes.
//!
//! Forwarded jobs (cluster job id noted, hold linked) are recorded the same way but behind
//! the submitter's answer: the job already runs, nothing about the answer depends on the
//! record, and waiting for a second transaction on every submission was a third of the
//! latency bursar added to a slurmrestd submission. Every reader of jobs in this process
//! first waits for the records queued before it ([`AdmissionWriter::settled`]), so a
//! client sees its job with its cluster job id in any later call; `bursar serve` waits for
//! them before it exits.

use std::future::Future;
use std::sync::OnceLock;

use bursar_ledger::{AdmitOutcome, ForwardedJob, Ledger, LedgerError, NewAdmission};
use tokio::sync::{mpsc, oneshot};

use crate::timefmt::now;

/// Most submissions in one transaction.
const MAX_BATCH: usize = 256;

type Job<Req, Resp> = (Req, oneshot::Sender<Resp>);

/// A queue drained by one task that runs `run` over everything queued at once.
struct Batcher<Req, Resp> {
    tx: mpsc::UnboundedSender<Job<Req, Resp>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Batcher<Req, Resp> {
    /// Starts the task on the current tokio runtime; it ends when the batcher is dropped.
    fn spawn<F, Fut>(run: F) -> Batcher<Req, Resp>
    where
        F: Fn(Vec<Req>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Resp>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job<Req, Resp>>();
        tokio::spawn(async move {
            let mut requests = Vec::new();
            let mut replies = Vec::new();
            while let Some((request, reply)) = rx.recv().await {
                requests.push(request);
                replies.push(reply);
                while requests.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok((request, reply)) => {
                            requests.push(request);
                            replies.push(reply);
                        }
                        Err(_) => break,
                    }
                }
                let answers = run(std::mem::take(&mut requests)).await;
                // A caller that stopped waiting loses only its answer; the write stands.
                for (reply, answer) in replies.drain(..).zip(answers) {
                    let _ = reply.send(answer);
                }
            }
        });
        Batcher { tx }
    }

    async fn call(&self, request: Req) -> Option<Resp> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((request, reply)).ok()?;
        answer.await.ok()
    }

    /// Queues `request` without waiting for its answer; false when the task has stopped.
    fn send(&self, request: Req) -> bool {
        let (reply, _) = oneshot::channel();
        self.tx.send((request, reply)).is_ok()
    }
}

/// The ledger writes of admission, group-committed: [`Ledger::admit`] and
/// [`Ledger::record_forwarded`]. The tasks start on first use, on the caller's runtime.
pub(crate) struct AdmissionWriter {
    ledger: Ledger,
    admit: OnceLock<Batcher<NewAdmission, Result<AdmitOutcome, LedgerError>>>,
    /// Forwarded jobs to record; `None` is a barrier, answered once everything queued before
    /// it is written.
    forwarded: OnceLock<Batcher<Option<ForwardedJob>, ()>>,
}

impl AdmissionWriter {
    pub(crate) fn new(ledger: Ledger) -> AdmissionWriter {
        AdmissionWriter {
            ledger,
            admit: OnceLock::new(),
            forwarded: OnceLock::new(),
        }
    }

    /// Admits one submission (its hold and job), batched with whatever else is queued.
    pub(crate) async fn admit(&self, admission: NewAdmission) -> Result<AdmitOutcome, LedgerError> {
        let batcher = self.admit.get_or_init(|| {
            let ledger = self.ledger.clone();
            Batcher::spawn(move |batch: Vec<NewAdmission>| {
                let ledger = ledger.clone();
                async move {
                    let n = batch.len();
                    match ledger.admit(&batch, now()).await {
                        Ok(outcomes) => outcomes,
                        Err(e) => vec![Err(e); n],
                    }
                }
            })
        });
        batcher
            .call(admission)
            .await
            .unwrap_or_else(|| Err(stopped()))
    }

    /// Queues the record of a forwarded job (its hold linked, the cluster's job id noted),
    /// batched with the others, without waiting for it: the job already runs on its cluster,
    /// and its submitter is answered at once. Whoever reads jobs afterwards waits for
    /// [`AdmissionWriter::settled`] first; a record that cannot be written is logged, and its
    /// hold then expires instead of settling.
    pub(crate) fn forwarded(&self, job: ForwardedJob) {
        let (id, cluster_job_id) = (job.job, job.cluster_job_id.clone());
        if !self.forwarded_batcher().send(Some(job)) {
            tracing::error!(job = id, %cluster_job_id, error = %stopped(),
                "the job was forwarded but could not be linked to its hold; the hold will \
                 expire instead of settling");
        }
    }

    /// Waits until every forwarded job queued before this call is written (or has failed
    /// and been logged).
    pub(crate) async fn settled(&self) {
        let _ = self.forwarded_batcher().call(None).await;
    }

    fn forwarded_batcher(&self) -> &Batcher<Option<ForwardedJob>, ()> {
        self.forwarded.get_or_init(|| {
            let ledger = self.ledger.clone();
            Batcher::spawn(move |batch: Vec<Option<ForwardedJob>>| {
                let ledger = ledger.clone();
                async move {
                    let n = batch.len();
                    let jobs: Vec<ForwardedJob> = batch.into_iter().flatten().collect();
                    if !jobs.is_empty() {
                        record_forwarded(&ledger, &jobs).await;
                    }
                    vec![(); n]
                }
            })
        })
    }
}

/// Records `jobs`, as one batch, else (one bad job must not fail the others) one by one;
/// logs what could not be recorded.
async fn record_forwarded(ledger: &Ledger, jobs: &[ForwardedJob]) {
    let failed = match ledger.record_forwarded(jobs).await {
        Ok(linked) => {
            let holds = jobs.iter().filter(|j| j.hold.is_some()).count();
            if u64::try_from(holds).unwrap_or(u64::MAX) != linked {
                tracing::error!(
                    holds,
                    linked,
                    "some holds were already linked to other jobs; they will expire instead of \
                     settling"
                );
            }
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, jobs = jobs.len(),
                "recording forwarded jobs as a batch failed; retrying one by one");
            let mut failed = Vec::new();
            for job in jobs {
                if let Err(e) = ledger.record_forwarded(std::slice::from_ref(job)).await {
                    failed.push((job, e));
                }
            }
            failed
        }
    };
    for (job, e) in failed {
        tracing::error!(job = job.job, cluster_job_id = %job.cluster_job_id, error = %e,
            "the job was forwarded but could not be linked to its hold; the hold will expire \
             instead of settling");
    }
}

fn stopped() -> LedgerError {
    LedgerError::Storage("the admission writer stopped".to_string())
}
