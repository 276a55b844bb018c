//! `bursar serve`: the HTTP API of `docs/api.md` on axum.
//!
//! - [`router`] builds the routes from one table ([`route_table`] lists it; a test checks
//!   `openapi.json` against it) with a per-request tracing span and request counter.
//! - [`ServerState`]: the shared [`App`], the [`TokenVerifier`], the [`Metrics`], and the
//!   admission service behind [`AdmissionApi`] (`None`: the job endpoints answer 503).
//! - [`ApiError`] is every refusal, as `{"error", "message", "details"}`; the extractors in
//!   [`extract`] turn bad tokens, bodies, query strings and paths into one.
//! - Handlers: [`accounts`] (tree, balances, reports), `finance` (statements, top users/jobs), [`admin`] (changes, audited; the audit
//!   log), [`jobs`] (quotes and jobs, through [`AdmissionApi`]), [`meta`] (health, metrics,
//!   OpenAPI).
//! - [`serve`]: binds, prints `bursar listening on http://ADDR`, runs the collection loop, the
//!   hold-expiry loop, the checkpoint loop and the alert loop (`crate::alerts`) beside the
//!   server, and stops gracefully on SIGINT or SIGTERM.

pub mod accounts;
pub mod admin;
pub mod admission;
mod error;
pub mod extract;
mod finance;
pub mod jobs;
pub mod meta;
pub mod metrics;

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{delete, get, post, MethodRouter};
use axum::Router;
use tokio::sync::watch;
use tracing::Instrument;

pub use admission::{AdmissionApi, JobsFilter};
pub use error::ApiError;
pub use metrics::Metrics;

use crate::app::App;
use crate::auth::TokenVerifier;
use crate::collect::{collect_loop, Collector};

/// How often the hold-expiry loop looks for holds past their expiry.
pub const EXPIRY_INTERVAL: Duration = Duration::from_secs(30);

/// How long background tasks get to finish after the server stopped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct ServerState {
    pub app: Arc<App>,
    pub verifier: Arc<TokenVerifier>,
    pub metrics: Arc<Metrics>,
    pub admission: Option<Arc<dyn AdmissionApi>>,
}

impl ServerState {
    /// A state with fresh metrics.
    pub fn new(
        app: Arc<App>,
        verifier: Arc<TokenVerifier>,
        admission: Option<Arc<dyn AdmissionApi>>,
    ) -> ServerState {
        ServerState {
            app,
            verifier,
            metrics: Arc::new(Metrics::default()),
            admission,
        }
    }
}

/// One route: method, path template (axum syntax, `{id}`), handler.
struct Route {
    method: Method,
    path: &'static str,
    handler: MethodRouter<ServerState>,
}

fn route(method: Method, path: &'static str, handler: MethodRouter<ServerState>) -> Route {
    Route {
        method,
        path,
        handler,
    }
}

/// Every route of the API. The router is built from this table only, so [`route_table`] is
/// exactly what the server answers.
fn routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/healthz", get(meta::healthz)),
        route(Method::GET, "/metrics", get(meta::metrics)),
        route(Method::GET, "/openapi.json", get(meta::openapi)),
        route(Method::GET, "/v1/accounts", get(accounts::list)),
        route(Method::POST, "/v1/accounts", post(admin::upsert_account)),
        route(
            Method::GET,
            "/v1/accounts/{name}/balance",
            get(accounts::balance),
        ),
        route(
            Method::GET,
            "/v1/reports/usage",
            get(accounts::usage_report),
        ),
        route(
            Method::GET,
            "/v1/accounts/{name}/statement",
            get(finance::statement),
        ),
        route(Method::GET, "/v1/reports/top", get(finance::top)),
        route(Method::GET, "/v1/exports/focus", get(finance::focus)),
        route(
            Method::POST,
            "/v1/accounts/{name}/close",
            post(admin::close_account),
        ),
        route(Method::POST, "/v1/associations", post(admin::associate)),
        route(
            Method::DELETE,
            "/v1/associations/{user}/{account}",
            delete(admin::dissociate),
        ),
        route(
            Method::POST,
            "/v1/users/{name}/default-account",
            post(admin::set_default_account),
        ),
        route(Method::POST, "/v1/allocations", post(admin::set_allocation)),
        route(
            Method::POST,
            "/v1/allocations/renew",
            post(admin::renew_allocation),
        ),
        route(Method::POST, "/v1/deposits", post(admin::deposit)),
        route(Method::POST, "/v1/transfers", post(admin::transfer)),
        route(Method::POST, "/v1/refunds", post(admin::refund)),
        route(Method::POST, "/v1/adjustments", post(admin::adjust)),
        route(Method::GET, "/v1/audit", get(admin::audit_log)),
        route(Method::POST, "/v1/quotes", post(jobs::quote)),
        route(Method::POST, "/v1/jobs", post(jobs::submit)),
        route(Method::GET, "/v1/jobs", get(jobs::list)),
        route(Method::GET, "/v1/jobs/{id}", get(jobs::get)),
        route(Method::GET, "/v1/jobs/{id}/status", get(jobs::status)),
        route(Method::DELETE, "/v1/jobs/{id}", delete(jobs::cancel)),
    ]
}

/// `(method, path template)` of every route the router answers.
pub fn route_table() -> Vec<(Method, &'static str)> {
    routes().into_iter().map(|r| (r.method, r.path)).collect()
}

/// The API as a service: every route, JSON answers for unknown paths (404) and methods (405),
/// and per request a tracing span and a count in `bursar_http_requests_total`.
pub fn router(state: ServerState) -> Router {
    let mut router = Router::new();
    for r in routes() {
        // Routes on the same path merge their methods.
        router = router.route(r.path, r.handler);
    }
    router
        .fallback(meta::not_found)
        .method_not_allowed_fallback(meta::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), track))
        .with_state(state)
}

/// The per-request span (method, route, user, status, time taken) and request counter.
async fn track(State(state): State<ServerState>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let span = tracing::info_span!(
        "request",
        method = %method,
        route = %route,
        path = %request.uri().path(),
        user = tracing::field::Empty,
        role = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("status", status);
    span.in_scope(|| {
        tracing::info!(
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "answered"
        );
    });
    state.metrics.request(method.as_str(), &route, status);
    response
}

/// The admission service for `app`: every configured cluster is quoted; those with a
/// `submit` section take jobs. (Tests build a [`ServerState`] without one: the job endpoints
/// then answer 503 `not_configured`.)
fn admission_service(app: &Arc<App>) -> anyhow::Result<Option<Arc<dyn AdmissionApi>>> {
    let admission = crate::admission::Admission::from_app(app.clone())
        .context("the admission service (clusters.*.submit)")?;
    tracing::info!(
        clusters = ?admission.forwarding_clusters(),
        "job admission: clusters taking submissions"
    );
    admission.prepare_forwarders();
    Ok(Some(Arc::new(admission)))
}

/// Runs the API on `listen` until SIGINT or SIGTERM, with the collection loop (every cluster
/// with a `collect` section) and the hold-expiry loop as background tasks. Prints
/// `bursar listening on http://ADDR` to `out` once bound (`127.0.0.1:0` picks a free port).
pub async fn serve(app: App, listen: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let auth = app.config.auth.clone().context(
        "bursar serve needs an `auth:` section in the configuration \
         (hs256_key_file and/or jwks_file) to check API tokens",
    )?;
    let verifier = TokenVerifier::from_config(&auth).context("auth")?;
    let mut collectors = Vec::new();
    for (name, cluster) in &app.config.clusters {
        if let Some(collector) = Collector::from_config(name, cluster)? {
            collectors.push(collector);
        }
    }
    let app = Arc::new(app);
    let admission = admission_service(&app)?;
    let state = ServerState::new(app.clone(), Arc::new(verifier), admission.clone());

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr().context("the bound address")?;
    writeln!(out, "bursar listening on http://{address}")?;
    out.flush()?;
    tracing::info!(%address, collectors = collectors.len(), "serving");

    let (stop, stopped) = watch::channel(false);
    let collecting = tokio::spawn(collect_loop(
        app.clone(),
        collectors,
        admission.clone(),
        until_stopped(stopped.clone()),
    ));
    let expiring = tokio::spawn(expiry_loop(
        app.clone(),
        admission.clone(),
        until_stopped(stopped.clone()),
    ));
    let checkpointing = tokio::spawn(checkpoint_loop(app.clone(), until_stopped(stopped.clone())));
    let alerting = tokio::spawn(crate::alerts::alerts_loop(
        app.clone(),
        until_stopped(stopped.clone()),
    ));

    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("the HTTP server failed");
    tracing::info!("shutting down");
    if let Some(admission) = &admission {
        // Jobs answered just before the signal are recorded before the process ends.
        admission.settled().await;
    }
    let _ = stop.send(true);
    let background = async {
        match collecting.await {
            Ok(Err(e)) => tracing::error!("collection loop: {e:#}"),
            Err(e) => tracing::error!("collection loop: {e}"),
            Ok(Ok(())) => {}
        }
        if let Err(e) = checkpointing.await {
            tracing::error!("checkpoint loop: {e}");
        }
        if let Err(e) = expiring.await {
            tracing::error!("hold-expiry loop: {e}");
        }
        if let Err(e) = alerting.await {
            tracing::error!("alert loop: {e}");
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, background)
        .await
        .is_err()
    {
        tracing::warn!("background tasks did not stop within {SHUTDOWN_GRACE:?}");
    }
    served
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn until_stopped(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for SIGINT: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
}

/// How often a server moves the ledger's write-ahead log into the database
/// ([`bursar_ledger::Ledger::checkpoint`]).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// Every [`CHECKPOINT_INTERVAL`], checkpoints the ledger beside its writer (instead of the
/// writer doing it at commit, stalling the admissions queued behind it) until `shutdown`.
pub async fn checkpoint_loop(app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let mut ticks = tokio::time::interval(CHECKPOINT_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        if let Err(e) = app.ledger.checkpoint().await {
            tracing::error!("checkpointing the ledger: {e}");
        }
    }
}

/// Every [`EXPIRY_INTERVAL`], settles the holds of jobs logged as ended `NODE_FAIL` or
/// `PREEMPTED` that their cluster will not run again ([`AdmissionApi::settle_not_rerun`]),
/// keeps the holds of jobs their cluster says still wait (through `admission`,
/// [`AdmissionApi::keep_waiting`]), expires the other holds past their expiry
/// (and, in the same ledger transaction, marks their API jobs `expired`) and picks up new
/// price-table versions, until `shutdown` resolves.
pub async fn expiry_loop(
    app: Arc<App>,
    admission: Option<Arc<dyn AdmissionApi>>,
    shutdown: impl Future<Output = ()>,
) {
    let mut ticks = tokio::time::interval(EXPIRY_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        let now = crate::timefmt::now();
        if let Some(admission) = &admission {
            admission.settle_not_rerun(None, now).await;
            admission.keep_waiting(now).await;
        }
        match app.ledger.expire_holds(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "holds expired"),
            Err(e) => tracing::error!("expiring holds: {e}"),
        }
        // Quotes use price-table versions stored since (`bursar prices import`/`refresh`).
        if let Err(e) = app.prices.reload_if_changed(&app.ledger).await {
            tracing::warn!("price tables: {e:#}; the ones loaded before stay in use");
        }
    }
}
