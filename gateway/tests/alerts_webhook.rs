//! Alerts end to end in the gateway: a fake clock drives an allocation through its period,
//! alerts are POSTed to a local webhook (axum on 127.0.0.1) with the exact JSON, a webhook
//! that fails first delivers exactly once, and a restart (a new App on the same SQLite file)
//! fires and sends nothing again. Also the `forecast` object of the balance API.

mod server_support;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use bursar_gateway::alerts::check_alerts;
use bursar_gateway::app::App;
use bursar_gateway::auth::Role;
use bursar_gateway::config::Config;
use bursar_ledger::{NewHold, UsageCharge};
use bursar_pricing::Currency;
use serde_json::{json, Value};
use server_support::{setup, DAY, HOUR, T0, UNIT};

/// A webhook that records every body and answers with the scripted statuses (then 200).
#[derive(Clone, Default)]
struct Hook {
    received: Arc<Mutex<Vec<Value>>>,
    script: Arc<Mutex<Vec<u16>>>,
}

async fn receive(State(hook): State<Hook>, Json(body): Json<Value>) -> StatusCode {
    hook.received.lock().unwrap().push(body);
    let mut script = hook.script.lock().unwrap();
    let status = if script.is_empty() {
        200
    } else {
        script.remove(0)
    };
    StatusCode::from_u16(status).unwrap()
}

/// Starts the webhook on 127.0.0.1; its URL.
async fn start_hook(hook: Hook) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().route("/hook", post(receive)).with_state(hook);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/hook")
}

fn charge(job: &str, units: i64, at: i64) -> UsageCharge {
    UsageCharge {
        cluster: "onprem".to_string(),
        job_id: job.to_string(),
        display_id: job.to_string(),
        submit: at - HOUR,
        revision: "r1".to_string(),
        account: "physics".to_string(),
        user: "alice".to_string(),
        partition: Some("batch".to_string()),
        qos: None,
        state: "COMPLETED".to_string(),
        is_final: true,
        currency: Currency::new("su"),
        amount_micros: units * UNIT,
        effective_at: at,
        price_version: None,
        note: None,
    }
}

async fn open(dir: &std::path::Path, webhook: &str, format: &str) -> App {
    let path = dir.join("bursar.yaml");
    std::fs::write(
        &path,
        format!(
            "database: sqlite://ledger.db\n\
             accounts:\n  org: {{}}\n  physics: {{parent: org}}\n\
             alerts:\n  webhook: {{url: \"{webhook}\", format: {format}, timeout: 5s}}\n"
        ),
    )
    .unwrap();
    App::open(Config::load(Some(&path)).unwrap()).await.unwrap()
}

#[tokio::test]
async fn alerts_reach_the_webhook_once_each_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let hook = Hook::default();
    // The first delivery is refused with a 500: it must be retried, and arrive once.
    hook.script.lock().unwrap().push(500);
    let url = start_hook(hook.clone()).await;
    let app = open(dir.path(), &url, "json").await;
    let su = Currency::new("su");
    let end = T0 + 30 * DAY;
    app.ledger
        .set_allocation("physics", &su, 1000 * UNIT, T0, end)
        .await
        .unwrap();

    // Day 1: 10 %: nothing.
    app.ledger
        .post_usage(&[charge("1", 100, T0 + HOUR)], T0 + DAY)
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + DAY)
        .await
        .unwrap();
    assert!(o.fired.is_empty());
    assert!(hook.received.lock().unwrap().is_empty());

    // Day 15: 52 %, spent before the window: 50 % fires; the webhook answers 500.
    app.ledger
        .post_usage(&[charge("2", 420, T0 + 12 * HOUR)], T0 + 15 * DAY)
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + 15 * DAY)
        .await
        .unwrap();
    assert_eq!(o.fired.len(), 1);
    assert_eq!((o.delivered, o.failed, o.pending), (0, 1, 1));
    let alerts = app.ledger.alerts().await.unwrap();
    assert_eq!(alerts[0].attempts, 1);
    assert!(alerts[0].last_error.as_deref().unwrap().contains("500"));

    // The next check fires nothing new and delivers the alert (200).
    let o = check_alerts(&app.ledger, &app.config, T0 + 15 * DAY + 300)
        .await
        .unwrap();
    assert!(o.fired.is_empty());
    assert_eq!((o.delivered, o.failed, o.pending), (1, 0, 0));
    {
        let received = hook.received.lock().unwrap();
        assert_eq!(received.len(), 2, "one refused POST and one delivered");
        assert_eq!(received[0], received[1]);
        let text = "bursar: account physics has committed 52.0% of its 1000.00 su allocation \
                    for 2025-01-01T00:00:00Z .. 2025-01-31T00:00:00Z (threshold 50%): 520.00 su \
                    charged and held, 480.00 su remaining; at 0.00 su a day it does not run out";
        assert_eq!(
            received[1],
            json!({
                "text": text,
                "alert_id": alerts[0].id,
                "account": "physics",
                "currency": "su",
                "threshold": "50%",
                "kind": "used:50",
                "allocated": "1000.00",
                "charged": "520.00",
                "held": "0.00",
                "committed": "520.00",
                "committed_percent": "52.0",
                "remaining": "480.00",
                "burn_rate_per_day": "0.00",
                "projected_exhaustion": null,
                "period_start": "2025-01-01T00:00:00Z",
                "period_end": "2025-01-31T00:00:00Z",
                "fired_at": "2025-01-16T00:00:00Z",
            })
        );
    }

    // Day 16: 250 su in the window, 77 %: projected to run out before the end.
    app.ledger
        .post_usage(
            &[charge("3", 250, T0 + 15 * DAY + 12 * HOUR)],
            T0 + 16 * DAY,
        )
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + 16 * DAY)
        .await
        .unwrap();
    assert_eq!(o.fired.len(), 1);
    assert_eq!(o.delivered, 1);
    let body = hook.received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(body["threshold"], "projected");
    assert_eq!(body["burn_rate_per_day"], "17.857143");
    // 230 su at 17.857143 a day: 1112832 s after day 16.
    assert_eq!(body["projected_exhaustion"], "2025-01-29T21:07:12Z");
    assert_eq!(body["committed"], "770.00");

    // Restart: a new App (new ledger, new pools) on the same file fires and sends nothing.
    drop(app);
    let app = open(dir.path(), &url, "json").await;
    for at in [T0 + 16 * DAY, T0 + 16 * DAY + HOUR] {
        let o = check_alerts(&app.ledger, &app.config, at).await.unwrap();
        assert!(o.fired.is_empty());
        assert_eq!((o.delivered, o.failed, o.pending), (0, 0, 0));
    }
    assert_eq!(hook.received.lock().unwrap().len(), 3);

    // Day 17: a running job's hold takes it to 82 %: 80 % fires; holds count as committed.
    app.ledger
        .place_hold(&NewHold {
            account: "physics".to_string(),
            currency: su.clone(),
            amount: 50 * UNIT,
            cluster: "onprem".to_string(),
            job_ref: Some("4".to_string()),
            placed_at: T0 + 17 * DAY,
            expires_at: T0 + 18 * DAY,
            lifetime: None,
            idempotency_key: "hold-4".to_string(),
            note: None,
        })
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + 17 * DAY)
        .await
        .unwrap();
    assert_eq!(o.fired.len(), 1);
    let body = hook.received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(body["threshold"], "80%");
    assert_eq!(body["held"], "50.00");
    assert_eq!(body["committed_percent"], "82.0");

    // Day 19: over 100 %.
    app.ledger
        .post_usage(&[charge("5", 300, T0 + 19 * DAY)], T0 + 19 * DAY)
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + 19 * DAY)
        .await
        .unwrap();
    assert_eq!(o.fired.len(), 1);
    assert_eq!(o.fired[0].kind.label(), "100%");

    // Every threshold was sent exactly once (the 500 aside).
    let received = hook.received.lock().unwrap().clone();
    let thresholds: Vec<&str> = received[1..]
        .iter()
        .map(|b| b["threshold"].as_str().unwrap())
        .collect();
    assert_eq!(thresholds, ["50%", "projected", "80%", "100%"]);
    let listed = app.ledger.alerts().await.unwrap();
    assert!(listed
        .iter()
        .all(|a| a.delivered_via.as_deref() == Some("webhook")));
}

#[tokio::test]
async fn slack_format_sends_the_text_only_and_no_webhook_means_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let hook = Hook::default();
    let url = start_hook(hook.clone()).await;
    let app = open(dir.path(), &url, "slack").await;
    let su = Currency::new("su");
    app.ledger
        .set_allocation("physics", &su, 10 * UNIT, T0, T0 + 30 * DAY)
        .await
        .unwrap();
    app.ledger
        .post_usage(&[charge("1", 6, T0 + HOUR)], T0 + DAY)
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + DAY)
        .await
        .unwrap();
    // 60 %, and 6 su in 14 days is 0.428572 su a day: 4 su last until day 10, before the
    // end: 50 % and projected.
    assert_eq!(o.fired.len(), 2);
    let received = hook.received.lock().unwrap().clone();
    assert_eq!(received.len(), 2);
    for body in &received {
        let object = body.as_object().unwrap();
        assert_eq!(object.len(), 1, "{body}");
        assert!(object["text"]
            .as_str()
            .unwrap()
            .starts_with("bursar: account physics"));
    }

    // Without a webhook: delivered to the log, nothing is pending.
    drop(app);
    std::fs::write(
        dir.path().join("bursar.yaml"),
        "database: sqlite://ledger.db\naccounts:\n  org: {}\n  physics: {parent: org}\n",
    )
    .unwrap();
    let app = App::open(Config::load(Some(&dir.path().join("bursar.yaml"))).unwrap())
        .await
        .unwrap();
    app.ledger
        .post_usage(&[charge("2", 3, T0 + 2 * DAY)], T0 + 2 * DAY)
        .await
        .unwrap();
    let o = check_alerts(&app.ledger, &app.config, T0 + 2 * DAY)
        .await
        .unwrap();
    assert_eq!(o.fired.len(), 1);
    assert_eq!((o.delivered, o.pending), (1, 0));
    let last = app.ledger.alerts().await.unwrap().pop().unwrap();
    assert_eq!(last.kind.label(), "80%");
    assert_eq!(last.delivered_via.as_deref(), Some("log"));
    assert_eq!(hook.received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn the_balance_api_carries_a_forecast() {
    let server = setup().await;
    server.seed_usage().await;
    let alice = server.token("alice", Role::User);
    let api = server
        .get("/v1/accounts/physics/balance?at=2025-01-15", &alice)
        .await;
    let row = &api.assert_status(200)["balances"][0];
    // The fields of before are all there.
    assert_eq!(row["remaining"], "80.25");
    // 19.75 su over 14 days: 1.410715 su a day (rounded up); 80.25 su last 4914955 s more.
    assert_eq!(
        row["forecast"],
        json!({
            "window": "14d",
            "window_start": "2025-01-01T00:00:00Z",
            "usage_in_window": "19.75",
            "held": "0.00",
            "burn_rate_per_day": "1.410715",
            "status": "projected",
            "exhaustion": "2025-03-12T21:15:55Z",
            "before_period_end": false,
        })
    );
    // The CLI prints the same.
    let cli: Value = serde_json::from_str(&server.cli(&[
        "balance",
        "physics",
        "--at",
        "2025-01-15",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(cli["balances"][0]["forecast"], row["forecast"]);
}
