//! The submit side the gateway forwards to: `runs/get_plan`, `runs/apply`, `runs/stop`.
//!
//! dstack 0.22.5 has no `runs/submit`; a run is created by asking for a plan and applying it
//! (REPORT §6). Applying a plan whose run name is taken replaces or updates that run: a
//! finished one is soft-deleted and replaced by a new id, an active one is updated in place
//! (`force: true`) or refused. bursar only ever creates: [`DstackClient::apply`] sends
//! `force: false` and refuses plans that name an existing run, so a submission can never
//! touch another run. The gateway should leave `run_name` out of the spec (dstack then
//! generates a free name) or make it unique.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::client::DstackClient;
use super::number::{json_number_micros, parse_time};
use super::DstackError;

/// Offers asked for per job in a plan: enough to quote the cheapest and show alternatives.
pub const PLAN_MAX_OFFERS: u32 = 50;

/// A run as dstack returned it from `runs/apply` or `runs/get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DstackRun {
    pub id: String,
    pub run_name: String,
    pub project: String,
    pub user: String,
    pub status: String,
    pub submitted_at: DateTime<Utc>,
    pub deleted: bool,
    /// The run's JSON as received (for [`map_run`](super::map_run), [`dstack_reported_cost`](super::dstack_reported_cost)).
    pub raw: String,
}

impl DstackRun {
    pub(crate) fn from_json(text: &str, url: &str) -> Result<DstackRun, DstackError> {
        #[derive(Deserialize)]
        struct RunHead {
            id: String,
            project_name: String,
            user: String,
            status: String,
            submitted_at: String,
            #[serde(default)]
            deleted: Option<bool>,
            run_spec: RunSpecHead,
        }
        #[derive(Deserialize)]
        struct RunSpecHead {
            #[serde(default)]
            run_name: Option<String>,
        }
        let bad = |detail: String| DstackError::BadPayload {
            url: url.to_string(),
            detail,
        };
        let head: RunHead =
            serde_json::from_str(text).map_err(|e| bad(format!("not a run: {e}")))?;
        Ok(DstackRun {
            submitted_at: parse_time(&head.submitted_at).map_err(bad)?,
            id: head.id,
            run_name: head.run_spec.run_name.unwrap_or_default(),
            project: head.project_name,
            user: head.user,
            status: head.status,
            deleted: head.deleted.unwrap_or(false),
            raw: text.to_string(),
        })
    }
}

/// What one job of a plan could run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPlanSummary {
    pub job_num: u32,
    /// Offers dstack found (it returns at most [`PLAN_MAX_OFFERS`] of them).
    pub total_offers: u64,
    /// The cheapest offer returned, USD micros per hour (whole instance, or the shared block's
    /// offer price, as dstack quotes it).
    pub cheapest_price_micros: Option<i64>,
    /// The spec's `max_price`, USD micros per hour.
    pub max_price_micros: Option<i64>,
}

/// A plan from `runs/get_plan`, ready for [`DstackClient::apply`].
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// `create`, or `update` when an active run of that name would be updated in place.
    pub action: String,
    /// The dstack user the run will belong to (the token's user).
    pub user: String,
    /// The name in the spec; `None` lets dstack generate one at apply.
    pub run_name: Option<String>,
    /// The id of an existing (non-deleted) run with that name, if any.
    pub current_run_id: Option<String>,
    pub job_plans: Vec<JobPlanSummary>,
    /// The whole plan as received.
    pub raw: String,
    /// The spec to apply, exactly as the server echoed it.
    run_spec: Box<RawValue>,
}

impl DstackClient {
    /// Asks dstack for a plan for `run_spec` (a dstack `RunSpec`: `{"configuration": {...}}`,
    /// optionally `run_name`, `profile`, `ssh_key_pub`, …).
    pub async fn get_plan(&self, run_spec: &serde_json::Value) -> Result<RunPlan, DstackError> {
        #[derive(Serialize)]
        struct GetPlan<'a> {
            run_spec: &'a serde_json::Value,
            max_offers: u32,
        }
        #[derive(Deserialize)]
        struct PlanWire {
            action: String,
            user: String,
            run_spec: Box<RawValue>,
            #[serde(default)]
            current_resource: Option<CurrentWire>,
            #[serde(default)]
            job_plans: Vec<JobPlanWire>,
        }
        #[derive(Deserialize)]
        struct CurrentWire {
            id: String,
        }
        #[derive(Deserialize)]
        struct NameOnly {
            #[serde(default)]
            run_name: Option<String>,
        }
        #[derive(Deserialize)]
        struct JobPlanWire {
            job_spec: JobSpecNum,
            #[serde(default)]
            offers: Vec<OfferPrice>,
            #[serde(default)]
            total_offers: u64,
            #[serde(default)]
            max_price: Option<Box<RawValue>>,
        }
        #[derive(Deserialize)]
        struct JobSpecNum {
            job_num: u32,
        }
        #[derive(Deserialize)]
        struct OfferPrice {
            price: Box<RawValue>,
        }

        let path = self.project_path("runs/get_plan");
        let url = self.url(&path);
        let text = self
            .post(
                &path,
                &GetPlan {
                    run_spec,
                    max_offers: PLAN_MAX_OFFERS,
                },
            )
            .await?;
        let bad = |detail: String| DstackError::BadPayload {
            url: url.clone(),
            detail,
        };
        let wire: PlanWire =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a run plan: {e}")))?;
        let run_name = serde_json::from_str::<NameOnly>(wire.run_spec.get())
            .map_err(|e| bad(format!("run_spec: {e}")))?
            .run_name;
        let price = |raw: &RawValue| -> Result<Option<i64>, DstackError> {
            if raw.get() == "null" {
                return Ok(None);
            }
            json_number_micros(raw.get())
                .map(|m| Some(m.micros))
                .map_err(|e| bad(format!("price: {e}")))
        };
        let mut job_plans = Vec::with_capacity(wire.job_plans.len());
        for plan in &wire.job_plans {
            let mut cheapest: Option<i64> = None;
            for offer in &plan.offers {
                if let Some(p) = price(&offer.price)? {
                    cheapest = Some(cheapest.map_or(p, |c| c.min(p)));
                }
            }
            job_plans.push(JobPlanSummary {
                job_num: plan.job_spec.job_num,
                total_offers: plan.total_offers,
                cheapest_price_micros: cheapest,
                max_price_micros: match &plan.max_price {
                    Some(raw) => price(raw)?,
                    None => None,
                },
            });
        }
        Ok(RunPlan {
            action: wire.action,
            user: wire.user,
            run_name,
            current_run_id: wire.current_resource.map(|c| c.id),
            job_plans,
            raw: text,
            run_spec: wire.run_spec,
        })
    }

    /// Creates the run of `plan` (`runs/apply` with `force: false`). Refused with
    /// [`DstackError::NameTaken`] when the plan names a run that exists, finished or not:
    /// applying it would replace (soft-delete) or update that run. dstack itself refuses
    /// (400 "Resource has been changed") if a run of that name appeared since the plan.
    pub async fn apply(&self, plan: &RunPlan) -> Result<DstackRun, DstackError> {
        if plan.current_run_id.is_some() || plan.action != "create" {
            return Err(DstackError::NameTaken {
                project: self.project().to_string(),
                run_name: plan.run_name.clone().unwrap_or_default(),
            });
        }
        #[derive(Serialize)]
        struct Apply<'a> {
            plan: ApplyInput<'a>,
            force: bool,
        }
        #[derive(Serialize)]
        struct ApplyInput<'a> {
            run_spec: &'a RawValue,
            current_resource: Option<()>,
        }
        let path = self.project_path("runs/apply");
        let text = self
            .post(
                &path,
                &Apply {
                    plan: ApplyInput {
                        run_spec: &plan.run_spec,
                        current_resource: None,
                    },
                    force: false,
                },
            )
            .await?;
        DstackRun::from_json(&text, &self.url(&path))
    }

    /// Stops runs by name (`runs/stop`): gracefully, or at once with `abort`. dstack ignores
    /// names that do not exist or are already finished. Stopped runs are still charged for
    /// the time they ran.
    pub async fn stop_run(&self, run_names: &[String], abort: bool) -> Result<(), DstackError> {
        #[derive(Serialize)]
        struct Stop<'a> {
            runs_names: &'a [String],
            abort: bool,
        }
        let path = self.project_path("runs/stop");
        self.post(
            &path,
            &Stop {
                runs_names: run_names,
                abort,
            },
        )
        .await?;
        Ok(())
    }
}
