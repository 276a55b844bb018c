//! [`AdmissionApi`]: what the job endpoints (`/v1/quotes`, `/v1/jobs…`) ask of the admission
//! service. The server authenticates the caller and parses the body; the service decides
//! (eligibility, associations, routing, holds, forwarding) and answers the JSON of
//! `docs/api.md`, or an [`ApiError`].

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::ApiError;
use crate::auth::Principal;
use crate::request::JobRequest;

/// `GET /v1/jobs` query: every filter that is `Some` must match. A `user` caller sees only its
/// own jobs whatever `user` says (the service enforces it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsFilter {
    pub user: Option<String>,
    pub account: Option<String>,
    pub state: Option<String>,
    /// Only jobs with a smaller id: the `next_before` of the page before.
    pub before: Option<i64>,
    /// The most jobs listed, the newest that match (default 1,000, at most 10,000).
    pub limit: Option<u32>,
}

/// The admission service as the HTTP API sees it. Every method receives the verified caller;
/// role and association checks for jobs are the service's (it knows the accounts involved).
#[async_trait]
pub trait AdmissionApi: Send + Sync {
    /// `POST /v1/quotes` → 200: `[{"cluster","currency","eligible","reasons","estimate",
    /// "remaining_after"}]` (see docs/api.md).
    async fn quote(&self, caller: &Principal, request: JobRequest) -> Result<Value, ApiError>;

    /// `POST /v1/jobs` → 201: admit, route, hold, forward. `idempotency_key` is the
    /// `Idempotency-Key` header; a retry with the same key answers the first answer.
    async fn submit(
        &self,
        caller: &Principal,
        request: JobRequest,
        idempotency_key: Option<String>,
    ) -> Result<Value, ApiError>;

    /// `GET /v1/jobs` → 200: `{"jobs": [...], "next_before": id or null}` (see docs/api.md).
    async fn jobs(&self, caller: &Principal, filter: JobsFilter) -> Result<Value, ApiError>;

    /// `GET /v1/jobs/{id}` → 200.
    async fn job(&self, caller: &Principal, id: i64) -> Result<Value, ApiError>;

    /// `DELETE /v1/jobs/{id}` → 200: cancel on the cluster, release the hold.
    async fn cancel(&self, caller: &Principal, id: i64) -> Result<Value, ApiError>;

    /// `GET /v1/jobs/{id}/status` → 200: what the job's cluster reports of it now, with its
    /// exit code once it finished.
    async fn status(&self, caller: &Principal, id: i64) -> Result<Value, ApiError>;

    /// Waits until everything answered so far is in the ledger (called at shutdown).
    async fn settled(&self) {}

    /// Before holds expire at `now`: keeps those whose job its cluster says still waits (a
    /// held job, which the accounting database does not report) a lifetime longer; returns
    /// how many.
    async fn keep_waiting(&self, _now: i64) -> u64 {
        0
    }

    /// Settles the holds (and the jobs that hold nothing) of jobs logged as ended in a state
    /// after which Slurm may run them again (`NODE_FAIL`, `PREEMPTED`) that their cluster
    /// says will not; only `cluster`'s when given. Returns how many.
    async fn settle_not_rerun(&self, _cluster: Option<&str>, _now: i64) -> u64 {
        0
    }
}
