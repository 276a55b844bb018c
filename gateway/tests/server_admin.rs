//! The admin endpoints: accounts (create, move, close), associations, renewals, deposits,
//! transfers, refunds and adjustments — admin only, audited with before and after, retries
//! answered 200 without a second movement or audit entry.

mod server_support;

use axum::http::Method;
use bursar_gateway::auth::Role;
use serde_json::{json, Value};
use server_support::{setup, TestServer, DAY, HOUR, T0};

async fn audit(server: &TestServer) -> Vec<Value> {
    let admin = server.token("root-admin", Role::Admin);
    server.get("/v1/audit", &admin).await.assert_status(200)["audit"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn finance_and_users_cannot_change_anything() {
    let server = setup().await;
    server.seed_usage().await;
    let bodies: [(&str, Value); 8] = [
        ("/v1/accounts/physics/close", json!({"reason": "x"})),
        (
            "/v1/users/alice/default-account",
            json!({"account": "chemistry"}),
        ),
        (
            "/v1/allocations/renew",
            json!({"account": "physics", "currency": "su"}),
        ),
        (
            "/v1/deposits",
            json!({"account": "physics", "currency": "su", "amount": "1", "reason": "x"}),
        ),
        (
            "/v1/adjustments",
            json!({"account": "physics", "currency": "su", "amount": "1", "reason": "x"}),
        ),
        (
            "/v1/transfers",
            json!({"from": "physics", "to": "chemistry", "currency": "su", "amount": "1",
                   "reason": "x"}),
        ),
        ("/v1/refunds", json!({"job": "onprem:1", "reason": "x"})),
        ("/v1/accounts", json!({"name": "astro"})),
    ];
    for role in [Role::Finance, Role::User] {
        let token = server.token("alice", role);
        for (path, body) in &bodies {
            server
                .post(path, &token, body)
                .await
                .assert_error(403, "forbidden");
        }
        server
            .call(
                Method::DELETE,
                "/v1/associations/alice/physics",
                Some(&token),
                None,
            )
            .await
            .assert_error(403, "forbidden");
    }
    assert!(audit(&server).await.is_empty());
    assert_eq!(
        server
            .app
            .ledger
            .journal(&Default::default())
            .await
            .unwrap()
            .len(),
        7
    );
}

#[tokio::test]
async fn accounts_are_created_moved_and_closed_with_audit() {
    let server = setup().await;
    let admin = server.token("root-admin", Role::Admin);
    server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "astro", "parent": "physics"}),
        )
        .await
        .assert_status(201);
    server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "optics", "parent": "astro"}),
        )
        .await
        .assert_status(201);
    // A cycle, and a declared account moved elsewhere: 409.
    server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "astro", "parent": "optics"}),
        )
        .await
        .assert_error(409, "conflict");
    server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "physics", "parent": "chemistry"}),
        )
        .await
        .assert_error(409, "conflict");
    let moved = server
        .post(
            "/v1/accounts",
            &admin,
            &json!({"name": "astro", "parent": "chemistry"}),
        )
        .await;
    assert_eq!(
        *moved.assert_status(200),
        json!({"name": "astro", "parent": "chemistry", "closed_at": null})
    );
    // Close: needs a reason; then no new associations; again: 200, nothing audited.
    server
        .post("/v1/accounts/astro/close", &admin, &json!({}))
        .await
        .assert_error(422, "invalid_request");
    let closed = server
        .post(
            "/v1/accounts/astro/close",
            &admin,
            &json!({"reason": "ended"}),
        )
        .await;
    let closed_at = closed.assert_status(200)["closed_at"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .post(
            "/v1/accounts/astro/close",
            &admin,
            &json!({"reason": "ended"}),
        )
        .await
        .assert_status(200);
    let refused = server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "alice", "account": "optics"}),
        )
        .await;
    refused.assert_error(409, "account_closed");
    assert_eq!(refused.json["details"]["closed"], "astro");
    let accounts = server.get("/v1/accounts", &admin).await;
    let astro = accounts.json["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "astro")
        .unwrap()
        .clone();
    assert_eq!(astro["closed_at"], closed_at);

    let entries = audit(&server).await;
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "account.close",
            "account.move",
            "account.create",
            "account.create"
        ]
    );
    assert_eq!(entries[0]["before"]["closed_at"], Value::Null);
    assert_eq!(entries[0]["after"]["closed_at"], closed_at);
    assert_eq!(entries[0]["after"]["reason"], "ended");
    assert_eq!(entries[1]["before"]["parent"], "physics");
    assert_eq!(entries[1]["after"]["parent"], "chemistry");
    for e in &entries {
        assert_eq!(
            (e["actor"].as_str(), e["role"].as_str()),
            (Some("root-admin"), Some("admin"))
        );
    }
}

#[tokio::test]
async fn associations_are_removed_and_defaults_set() {
    let server = setup().await;
    let admin = server.token("root-admin", Role::Admin);
    server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "dave", "account": "physics"}),
        )
        .await
        .assert_status(201);
    server
        .post(
            "/v1/associations",
            &admin,
            &json!({"user": "dave", "account": "chemistry"}),
        )
        .await
        .assert_status(201);
    let set = server
        .post(
            "/v1/users/dave/default-account",
            &admin,
            &json!({"account": "chemistry"}),
        )
        .await;
    assert_eq!(set.assert_status(200)["default_account"], "chemistry");
    let removed = server
        .call(
            Method::DELETE,
            "/v1/associations/dave/physics",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(
        *removed.assert_status(200),
        json!({"user": "dave", "default_account": "chemistry", "accounts": ["chemistry"]})
    );
    // The default cannot go; declared ones neither; unknown users are 404.
    server
        .call(
            Method::DELETE,
            "/v1/associations/dave/chemistry",
            Some(&admin),
            None,
        )
        .await
        .assert_error(409, "conflict");
    server
        .call(
            Method::DELETE,
            "/v1/associations/alice/physics",
            Some(&admin),
            None,
        )
        .await
        .assert_error(409, "conflict");
    server
        .post(
            "/v1/users/nobody/default-account",
            &admin,
            &json!({"account": "physics"}),
        )
        .await
        .assert_error(404, "not_found");
    let entries = audit(&server).await;
    assert_eq!(entries[0]["action"], "association.remove");
    assert_eq!(entries[0]["target"], "dave:physics");
    assert_eq!(
        entries[0]["before"]["accounts"],
        json!(["chemistry", "physics"])
    );
    assert_eq!(entries[0]["after"]["accounts"], json!(["chemistry"]));
    assert_eq!(entries[1]["before"]["default_account"], "physics");
    assert_eq!(entries[1]["after"]["default_account"], "chemistry");
}

#[tokio::test]
async fn money_movements_are_audited_and_retries_change_nothing() {
    let server = setup().await;
    server.seed_usage().await;
    let admin = server.token("root-admin", Role::Admin);

    // Renew January's physics allocation: February, 100 su.
    let renewed = server
        .post(
            "/v1/allocations/renew",
            &admin,
            &json!({"account": "physics", "currency": "su", "at": "2025-01-15"}),
        )
        .await;
    let next = renewed.assert_status(201)["next"].clone();
    assert_eq!(
        (&next["start"], &next["end"], &next["amount"]),
        (
            &json!("2025-02-01T00:00:00Z"),
            &json!("2025-03-01T00:00:00Z"),
            &json!("100.00")
        )
    );
    server
        .post(
            "/v1/allocations/renew",
            &admin,
            &json!({"account": "physics", "currency": "su", "at": "2025-01-15"}),
        )
        .await
        .assert_status(200);

    // A deposit, retried with the same key.
    let deposit = json!({"account": "physics", "currency": "su", "amount": "25.5",
                         "period_of": "2025-01-10", "reason": "supplement",
                         "idempotency_key": "dep-7"});
    let posted = server.post("/v1/deposits", &admin, &deposit).await;
    assert_eq!(posted.assert_status(201)["allocation"]["amount"], "125.50");
    server
        .post("/v1/deposits", &admin, &deposit)
        .await
        .assert_status(200);

    // physics: 125.50 − 19.75 charged = 105.75 remaining. Too much, then enough.
    let refused = server
        .post(
            "/v1/transfers",
            &admin,
            &json!({"from": "physics", "to": "org", "currency": "su", "amount": "105.76",
                    "period_of": "2025-01-10", "reason": "rebalance"}),
        )
        .await;
    refused.assert_error(409, "insufficient_remaining");
    assert_eq!(refused.json["details"]["remaining"], "105.75");
    let transfer = json!({"from": "physics", "to": "org", "currency": "su", "amount": "5.75",
                          "period_of": "2025-01-10", "reason": "rebalance"});
    let moved = server.post("/v1/transfers", &admin, &transfer).await;
    let moved = moved.assert_status(201).clone();
    assert_eq!(moved["from"]["amount"], "119.75");
    assert_eq!(moved["to"]["amount"], "505.75");
    server
        .post("/v1/transfers", &admin, &transfer)
        .await
        .assert_status(200);

    // Refund job 1 (12.50 su) in two steps; above the cap is refused.
    let part = server
        .post(
            "/v1/refunds",
            &admin,
            &json!({"job": "onprem:1", "amount": "2.5", "reason": "slow node"}),
        )
        .await;
    assert_eq!(part.assert_status(201)["refunded"], "2.50");
    let over = server
        .post(
            "/v1/refunds",
            &admin,
            &json!({"job": "1", "cluster": "onprem", "amount": "10.01", "reason": "more"}),
        )
        .await;
    over.assert_error(409, "conflict");
    assert!(
        over.json["message"]
            .as_str()
            .unwrap()
            .contains("at most 10 su"),
        "{:#?}",
        over
    );
    let rest = server
        .post(
            "/v1/refunds",
            &admin,
            &json!({"job": "onprem:1", "reason": "rest"}),
        )
        .await;
    assert_eq!(
        (&rest.assert_status(201)["amount"], &rest.json["refunded"]),
        (&json!("10.00"), &json!("12.50"))
    );
    server
        .post(
            "/v1/refunds",
            &admin,
            &json!({"job": "onprem:999", "reason": "x"}),
        )
        .await
        .assert_error(404, "not_found");

    // An adjustment.
    server
        .post(
            "/v1/adjustments",
            &admin,
            &json!({"account": "chemistry", "currency": "usd", "amount": "-0.234567",
                    "period_of": "2025-01-05", "reason": "credit"}),
        )
        .await
        .assert_status(201);

    let entries = audit(&server).await;
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "adjustment",
            "refund",
            "refund",
            "transfer",
            "deposit",
            "allocation.renew"
        ]
    );
    let refund = &entries[2];
    assert_eq!(refund["target"], "onprem:1");
    assert_eq!(refund["before"]["refunded"], "0.00");
    assert_eq!(refund["after"]["refunded"], "2.50");
    assert_eq!(refund["after"]["reason"], "slow node");
    let t = &entries[3];
    assert_eq!(t["target"], "physics->org");
    assert_eq!(t["before"]["from"]["amount"], "125.50");
    assert_eq!(t["after"]["from"]["amount"], "119.75");
    assert_eq!(t["before"]["to"]["amount"], "500.00");
    assert_eq!(t["after"]["to"]["amount"], "505.75");
    let d = &entries[4];
    assert_eq!(d["before"]["allocation"]["amount"], "100.00");
    assert_eq!(d["after"]["allocation"]["amount"], "125.50");
    assert_eq!(d["after"]["deposit"]["key"], "dep-7");
    assert_eq!(entries[5]["before"], Value::Null);
    assert_eq!(entries[5]["after"]["start"], "2025-02-01T00:00:00Z");

    // The ledger agrees: physics charged 19.75 − 12.50 refunded.
    let balance = server
        .get("/v1/accounts/physics/balance?at=2025-01-20", &admin)
        .await;
    let su = balance.json["balances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["currency"] == "su")
        .unwrap()
        .clone();
    assert_eq!(
        (&su["allocated"], &su["charged"]),
        (&json!("119.75"), &json!("7.25"))
    );
    assert!(server.app.ledger.verify().await.unwrap().is_empty());
    let _ = (T0, HOUR, DAY);
}
