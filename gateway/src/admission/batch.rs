//! Group commit for the admission path: concurrent submissions queue their ledger writes
//! here, and one task hands everything queued to the ledger as one batch (one write
//! transaction) while the next batch gathers. At one submission at a time a batch is one
//! submission and nothing waits; under load the single writer's per-transaction cost is
//! shared by every submission of a batch instead of paid by each.
//!
//! The ledger decides each submission of a batch in order, exactly as separate transactions
//! would, so batching changes throughput, never outcomes.

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
}

/// The ledger writes of admission, group-committed: [`Ledger::admit`] and
/// [`Ledger::record_forwarded`]. The tasks start on first use, on the caller's runtime.
pub(crate) struct AdmissionWriter {
    ledger: Ledger,
    admit: OnceLock<Batcher<NewAdmission, Result<AdmitOutcome, LedgerError>>>,
    forwarded: OnceLock<Batcher<ForwardedJob, Result<(), LedgerError>>>,
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

    /// Records one forwarded job (links its hold, notes the cluster's job id), batched.
    pub(crate) async fn forwarded(&self, job: ForwardedJob) -> Result<(), LedgerError> {
        let batcher = self.forwarded.get_or_init(|| {
            let ledger = self.ledger.clone();
            Batcher::spawn(move |batch: Vec<ForwardedJob>| {
                let ledger = ledger.clone();
                async move {
                    match ledger.record_forwarded(&batch).await {
                        Ok(linked) => {
                            let holds = batch.iter().filter(|j| j.hold.is_some()).count();
                            if u64::try_from(holds).unwrap_or(u64::MAX) != linked {
                                tracing::error!(
                                    holds,
                                    linked,
                                    "some holds were already linked to other jobs; they will \
                                     expire instead of settling"
                                );
                            }
                            vec![Ok(()); batch.len()]
                        }
                        Err(e) => {
                            // One bad job must not fail the others: retry them one by one.
                            tracing::warn!(error = %e, jobs = batch.len(),
                                "recording forwarded jobs as a batch failed; retrying one by one");
                            let mut out = Vec::with_capacity(batch.len());
                            for job in &batch {
                                let one = ledger.record_forwarded(std::slice::from_ref(job)).await;
                                out.push(one.map(|_| ()));
                            }
                            out
                        }
                    }
                }
            })
        });
        batcher.call(job).await.unwrap_or_else(|| Err(stopped()))
    }
}

fn stopped() -> LedgerError {
    LedgerError::Storage("the admission writer stopped".to_string())
}
