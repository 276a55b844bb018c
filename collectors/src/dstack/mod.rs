//! dstack 0.22.5 REST client: collect usage (runs → [`UsageRecord`](bursar_pricing::UsageRecord)s),
//! cross-check dstack's own `cost`, and the submit/stop side the gateway forwards to.
//!
//! Facts this is built on are in `reference/dstack-0.22.5/REPORT.md` and its captures; the
//! tests replay those captures.
//!
//! ```text
//! DstackClient::new(DstackConfig { base_url, token, project, cluster, timeout, page_size, ca_file })
//!   fetch_since(Option<RunCursor>, limit_pages)  -> DstackPage     new runs, keyset on (submitted_at, id)
//!   refresh_runs(&[run id])                      -> RefreshOutcome re-poll unfinished runs by id
//!   run_events_since(Option<EventCursor>, pages) -> RunEvents      runs that changed (events feed)
//!   get_run(&RunRef)                             -> DstackRun
//!   get_plan(&run_spec) -> RunPlan;  apply(&RunPlan) -> DstackRun;  stop_run(&[name], abort)
//!   me() -> DstackUser;  list_users();  create_user(name, role);  project_members();  add_members(&[..])
//! map_run(run JSON, MapContext) -> RunMapping   (pure)     dstack_reported_cost(run JSON) -> micros
//! ```
//!
//! - [`client`]: HTTP (reqwest + rustls, bearer token, a timeout on every call), listing and
//!   re-polling. Every call is a `POST` with a JSON body, as dstack's RPC-style API wants.
//! - [`records`]: one record per job submission with provisioning data; how elapsed time and
//!   price match dstack's `cost`, and where bursar deliberately differs (shared instances).
//! - [`number`]: prices and costs read from their JSON text (`RawValue`), never via `f64`.
//! - [`events`]: the events feed. [`submit`]: plan, apply (create only), stop.
//! - [`members`]: users and project membership (`bursar sync push` on a dstack cluster).
//! - [`error`]: the client's one error type, [`DstackError`].
//!
//! # A collection loop (the gateway's)
//!
//! Persist the [`RunCursor`] and the set of unfinished run ids. Each pass: `fetch_since(cursor)`
//! → post its records, add `unfinished_run_ids` to the set, store `next_cursor`; then
//! `refresh_runs(set)` → post its records, replace the set with `still_unfinished`.
//! Records are keyed by `(cluster, submission id, submit)`: the same submission comes back
//! while it runs (end `None`, elapsed growing) and once more when final, so the ledger's
//! idempotency/adjustment path absorbs repeats. Within one page or one refresh each
//! submission appears once.

pub mod client;
pub mod error;
pub mod events;
pub mod members;
pub mod number;
pub mod records;
pub mod submit;
mod wire;

pub use client::{
    DstackClient, DstackConfig, DstackPage, RefreshOutcome, RunCursor, RunRef,
    LIST_SUBMISSIONS_LIMIT, MAX_PAGE_SIZE,
};
pub use error::DstackError;
pub use events::{EventCursor, RunEvents};
pub use members::{valid_username, DstackUser, GlobalRole, ProjectMember, ProjectRole};
pub use number::{json_number_micros, Micros};
pub use records::{
    dstack_reported_cost, job_state, map_run, MapContext, RawQuarantine, RunMapping, RunSummary,
};
pub use submit::{DstackRun, JobPlanSummary, RunPlan, PLAN_MAX_OFFERS};
