//! [`Admission`] behind the HTTP API's [`AdmissionApi`]: JSON bodies and [`ApiError`]s.

use async_trait::async_trait;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{Admission, AdmissionError, JobQuery};
use crate::auth::Principal;
use crate::request::JobRequest;
use crate::server::{AdmissionApi, ApiError, JobsFilter};

impl From<AdmissionError> for ApiError {
    fn from(e: AdmissionError) -> ApiError {
        if let AdmissionError::Internal(detail) = &e {
            return ApiError::internal(detail);
        }
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::new(status, e.code(), e.to_string()).with_details(e.details())
    }
}

#[async_trait]
impl AdmissionApi for Admission {
    async fn quote(&self, caller: &Principal, request: JobRequest) -> Result<Value, ApiError> {
        Ok(Admission::quote(self, caller, &request).await?.to_json())
    }

    async fn submit(
        &self,
        caller: &Principal,
        request: JobRequest,
        idempotency_key: Option<String>,
    ) -> Result<Value, ApiError> {
        Ok(Admission::submit(self, caller, request, idempotency_key)
            .await?
            .to_json())
    }

    async fn jobs(&self, caller: &Principal, filter: JobsFilter) -> Result<Value, ApiError> {
        let query = JobQuery {
            user: filter.user,
            account: filter.account,
            state: filter.state,
            before: filter.before,
            limit: filter.limit,
        };
        let page = Admission::jobs(self, caller, &query).await?;
        Ok(json!({
            "jobs": page.jobs.iter().map(|j| j.to_json()).collect::<Vec<_>>(),
            "next_before": page.next_before,
        }))
    }

    async fn job(&self, caller: &Principal, id: i64) -> Result<Value, ApiError> {
        Ok(Admission::job(self, caller, id).await?.to_json())
    }

    async fn cancel(&self, caller: &Principal, id: i64) -> Result<Value, ApiError> {
        Ok(Admission::cancel(self, caller, id).await?.to_json())
    }

    async fn status(&self, caller: &Principal, id: i64) -> Result<Value, ApiError> {
        Ok(Admission::status(self, caller, id).await?.to_json())
    }

    async fn settled(&self) {
        Admission::settled(self).await;
    }

    async fn keep_waiting(&self, now: i64) -> u64 {
        Admission::keep_waiting(self, now).await
    }

    async fn settle_not_rerun(&self, cluster: Option<&str>, now: i64) -> u64 {
        Admission::settle_not_rerun(self, cluster, now).await
    }
}
