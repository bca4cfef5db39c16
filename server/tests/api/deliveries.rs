//! The one delivery service (D25): webhook events and scheduled callbacks are rows of one
//! leased outbox, signed `t=…,v1=…` (checked here by a receiver that knows only the secret),
//! retried by one classifier, recorded in one history; a delivery waiting when the process
//! stops is delivered after a restart; and the old history tables arrive in the new ones.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};

use crate::db_test;
use crate::helpers::{admin_with_key, database_url, execute, temp_dir, Options};
use crate::schedules::{serve, wait_until};

const SIGNING: &str = "whsec-signing-Key-0123456789";

/// HMAC-SHA256 written out from SHA-256 (RFC 2104), so the receiver shares no code with the
/// sender.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the documentation tells receivers to do: `t` within 300 s of now, and `v1` equal to
/// HMAC-SHA256(secret, "<t>.<raw body>").
fn verifies(secret: &str, header: &str, body: &[u8], now_secs: i64) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = Some(v.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(body);
    (now_secs - t).abs() <= 300 && hmac_sha256(secret.as_bytes(), &signed) == v1
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[derive(Clone, Debug)]
struct Got {
    headers: HeaderMap,
    body: Bytes,
    /// Whether the signature verified with `SIGNING` against the receiver's own clock.
    verified: bool,
}

#[derive(Default)]
struct Receiver {
    got: Mutex<Vec<Got>>,
    /// Statuses to answer, in order; 200 once they run out.
    answers: Mutex<VecDeque<u16>>,
}

async fn receive(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let verified = headers
        .get("workbench-signature")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sig| verifies(SIGNING, sig, &body, unix_now()));
    r.got.lock().unwrap().push(Got {
        headers,
        body,
        verified,
    });
    let code = r.answers.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(code).unwrap()
}

async fn start_receiver(answers: &[u16]) -> (SocketAddr, Arc<Receiver>) {
    let r = Arc::new(Receiver::default());
    r.answers.lock().unwrap().extend(answers);
    let app = Router::new().fallback(any(receive)).with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, r)
}

fn received(r: &Receiver) -> Vec<Got> {
    r.got.lock().unwrap().clone()
}

async fn call(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http
        .request(method, format!("{base}{path}"))
        .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Sets the signing secret and the webhook, and makes an agent key whose storage.put calls are
/// held for confirmation (so each one is announced to the webhook).
async fn webhook_and_gated_agent(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    hook: &str,
) -> String {
    use reqwest::Method;
    let (status, v) = call(http, base, admin, Method::POST, "/v1/tools/invoke", Some(json!({ "tool": "vault_set", "arguments": { "name": "HOOK_SIGNING", "value": SIGNING } }))).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = call(
        http,
        base,
        admin,
        Method::PATCH,
        "/v1/settings",
        Some(json!({ "webhook": { "url": hook, "secret_ref": "HOOK_SIGNING" } })),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
    let (_, pol) = call(
        http,
        base,
        admin,
        Method::POST,
        "/v1/policies",
        Some(json!({ "name": "careful", "tool_allowlist": rules })),
    )
    .await;
    let (_, key) = call(
        http,
        base,
        admin,
        Method::POST,
        "/v1/api-keys",
        Some(json!({ "name": "agent", "policy_id": pol["id"] })),
    )
    .await;
    key["key"]
        .as_str()
        .unwrap_or_else(|| panic!("{key}"))
        .to_owned()
}

db_test!(
    a_pending_delivery_is_delivered_after_the_process_restarts,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let data = temp_dir("outbox");
        let admin = crate::cli::provision_with_cli(&url);
        // The first attempt is answered 503: the delivery waits in the outbox for its retry.
        let (addr, receiver) = start_receiver(&[503]).await;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let up = || async {
            for _ in 0..600 {
                if http
                    .get(format!("{base}/healthz"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == 200)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("workbench did not start");
        };
        let mut child = serve(&url, &data, port);
        up().await;
        let agent =
            webhook_and_gated_agent(&http, &base, &admin, &format!("http://{addr}/hook")).await;
        let (status, held) = call(
            &http,
            &base,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            Some(json!({ "tool": "storage.put", "arguments": { "key": "a", "content": "b" } })),
        )
        .await;
        assert_eq!(status, 202, "{held}");
        wait_until("the first attempt", Duration::from_secs(15), || {
            !received(&receiver).is_empty()
        })
        .await;
        // Recorded as waiting for a retry, then the process dies (no chance to clean up).
        let mut recorded = Value::Null;
        for _ in 0..100 {
            let (_, list) = call(
                &http,
                &base,
                &admin,
                reqwest::Method::GET,
                "/v1/webhooks/deliveries",
                None,
            )
            .await;
            recorded = list["data"][0].clone();
            if recorded["response_status"] == 503 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            (recorded["status"].as_str(), recorded["attempts"].as_i64()),
            (Some("pending"), Some(1)),
            "{recorded}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(received(&receiver).len(), 1);

        let mut child = serve(&url, &data, port);
        up().await;
        wait_until(
            "the retry after the restart",
            Duration::from_secs(45),
            || received(&receiver).len() >= 2,
        )
        .await;
        // The receiver has the retry; its outcome is recorded once the answer is back.
        let mut list = Value::Null;
        for _ in 0..100 {
            (_, list) = call(
                &http,
                &base,
                &admin,
                reqwest::Method::GET,
                "/v1/webhooks/deliveries",
                None,
            )
            .await;
            if list["data"][0]["status"] != "pending" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        let got = received(&receiver);
        assert_eq!(got.len(), 2, "delivered once after the restart");
        assert!(
            got.iter().all(|g| g.verified),
            "every attempt verifies with the secret and a fresh timestamp"
        );
        assert_eq!(got[0].body, got[1].body, "the same event");
        assert_eq!(
            got[0].headers["workbench-delivery"],
            got[1].headers["workbench-delivery"]
        );
        let event: Value = serde_json::from_slice(&got[1].body).unwrap();
        assert_eq!(event["type"], "confirmation.created");
        assert_eq!(event["data"]["id"], held["confirmation_id"]);
        let d = &list["data"][0];
        assert_eq!(
            (
                d["id"].as_str(),
                d["status"].as_str(),
                d["attempts"].as_i64(),
                d["response_status"].as_i64()
            ),
            (
                got[1].headers["workbench-delivery"].to_str().ok(),
                Some("delivered"),
                Some(2),
                Some(200)
            ),
            "{list}"
        );
    }
);

db_test!(
    webhooks_and_callbacks_share_one_classifier_4xx_final_408_429_and_5xx_retried,
    |backend| {
        let app = crate::app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let (addr, receiver) = start_receiver(&[]).await;
        app.wb
            .egress()
            .add(&admin, &addr.to_string())
            .await
            .unwrap();
        let agent =
            webhook_and_gated_agent(&app.http(), &app.base, &key, &format!("http://{addr}/hook"))
                .await;
        let secret = app.wb.schedules().signing_secret(&admin).await.unwrap();
        for (code, retried) in [
            (404, false),
            (410, false),
            (408, true),
            (429, true),
            (502, true),
        ] {
            receiver.answers.lock().unwrap().extend([code, code]);
            // A callback …
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "schedule.callback", "args": { "url": format!("http://{addr}/cb"), "delay_seconds": 1 } }]),
            )
            .await
            .remove(0);
            let id = out["result"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{out}"))
                .to_owned();
            app.clock.advance_ms(2_000);
            assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
            let (_, cb) = call(
                &app.http(),
                &app.base,
                &key,
                reqwest::Method::GET,
                &format!("/v1/schedules/{id}"),
                None,
            )
            .await;
            assert_eq!(
                (cb["status"].as_str(), cb["last_response_status"].as_i64()),
                (
                    Some(if retried { "scheduled" } else { "failed" }),
                    Some(i64::from(code))
                ),
                "callback answered {code}: {cb}"
            );
            // … and a webhook event get the same verdict.
            let (status, _) = call(&app.http(), &app.base, &agent, reqwest::Method::POST, "/v1/tools/invoke", Some(json!({ "tool": "storage.put", "arguments": { "key": format!("k{code}"), "content": "x" } }))).await;
            assert_eq!(status, 202);
            let mut d = Value::Null;
            for _ in 0..100 {
                let (_, list) = call(
                    &app.http(),
                    &app.base,
                    &key,
                    reqwest::Method::GET,
                    "/v1/webhooks/deliveries",
                    None,
                )
                .await;
                d = list["data"][0].clone();
                if d["response_status"] == code {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(
                (
                    d["status"].as_str(),
                    d["attempts"].as_i64(),
                    d["response_status"].as_i64()
                ),
                (
                    Some(if retried { "pending" } else { "failed" }),
                    Some(1),
                    Some(i64::from(code))
                ),
                "webhook answered {code}: {d}"
            );
            // Clear the retried ones before the next round.
            if retried {
                app.clock.advance_ms(12_000);
                assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 2);
            }
        }
        // Both kinds carry one signature format: the webhook under the vault secret, the
        // callback under the project's signing secret.
        let now = app.wb.clock().now_ms() / 1000;
        for g in received(&receiver) {
            let sig = g.headers["workbench-signature"].to_str().unwrap();
            let secret = if g.headers["workbench-event"] == "callback" {
                secret.as_str()
            } else {
                SIGNING
            };
            assert!(verifies(secret, sig, &g.body, now), "{:?}", g.headers);
            assert_eq!(
                g.headers.contains_key("workbench-signature-legacy"),
                g.headers["workbench-event"] != "callback",
                "only webhooks carry the old value during the transition"
            );
        }
    }
);

db_test!(
    the_migration_moves_both_old_histories_into_the_outbox,
    |backend| {
        use workbench_core::delivery::{DeliveryKind, DeliveryStatus};
        use workbench_core::store::{deliveries, schedules, testing, Db};
        let Some(url) = database_url(backend).await else {
            return;
        };
        // A database as the previous release left it: migrated up to 0015, with rows in the
        // two old history tables and the old callback table.
        let db = Db::connect(&url).await.unwrap();
        testing::migrate_up_to(&db, 15).await.unwrap();
        for sql in [
            "INSERT INTO projects (id, name, created_at) VALUES ('prj_old', 'old', 1000)",
            "INSERT INTO webhook_deliveries (id, project_id, event, subject_id, url, status, attempts, response_status, error, created_at, updated_at) \
             VALUES ('whd_ok', 'prj_old', 'confirmation.created', 'conf_1', 'https://hooks.example.com/a', 'delivered', 2, 200, NULL, 2000, 2500)",
            "INSERT INTO webhook_deliveries (id, project_id, event, subject_id, url, status, attempts, response_status, error, created_at, updated_at) \
             VALUES ('whd_wait', 'prj_old', 'confirmation.created', 'conf_2', 'https://hooks.example.com/a', 'pending', 1, 503, 'the webhook answered 503', 3000, 3100)",
            "INSERT INTO scheduled_callbacks (id, project_id, user_id, api_key_id, url, method, payload_shown, ciphertext, nonce, key_version, \
             scheduled_for, status, attempts, next_attempt_at, lease_until, response_status, error, delivered_at, created_at, updated_at) \
             VALUES ('sched_done', 'prj_old', 'usr_1', NULL, 'https://cb.example.com/x', 'POST', '{\"a\":1}', 'c1', 'n1', 1, \
             4000, 'delivered', 2, 4400, NULL, 200, NULL, 4500, 3500, 4500)",
            "INSERT INTO scheduled_callbacks (id, project_id, user_id, api_key_id, url, method, payload_shown, ciphertext, nonce, key_version, \
             scheduled_for, status, attempts, next_attempt_at, lease_until, response_status, error, delivered_at, created_at, updated_at) \
             VALUES ('sched_leased', 'prj_old', 'usr_1', 'key_1', 'https://cb.example.com/y', 'PUT', NULL, 'c2', 'n2', 1, \
             5000, 'scheduled', 1, 5000, 5020, NULL, NULL, NULL, 3600, 5000)",
            "INSERT INTO callback_attempts (id, callback_id, attempt, started_at, duration_ms, response_status, error) \
             VALUES ('cba_1', 'sched_done', 1, 4000, 12, 500, 'the receiver answered HTTP 500')",
            "INSERT INTO callback_attempts (id, callback_id, attempt, started_at, duration_ms, response_status, error) \
             VALUES ('cba_2', 'sched_done', 2, 4400, 9, 200, NULL)",
        ] {
            testing::execute(&db, sql).await.unwrap();
        }

        db.migrate().await.unwrap();
        let p = db.pool();
        let hooks = deliveries::recent(p, "prj_old", DeliveryKind::Webhook, 10)
            .await
            .unwrap();
        let summary: Vec<_> = hooks
            .iter()
            .map(|d| (d.id.as_str(), d.status, d.attempts, d.response_status))
            .collect();
        assert_eq!(
            summary,
            [
                ("whd_wait", DeliveryStatus::Failed, 1, Some(503)),
                ("whd_ok", DeliveryStatus::Delivered, 2, Some(200)),
            ]
        );
        assert!(
            hooks[0]
                .error
                .as_deref()
                .unwrap()
                .contains("the webhook answered 503; not retried"),
            "{:?}",
            hooks[0].error
        );
        assert_eq!(hooks[1].delivered_at, Some(2500));
        let attempts = deliveries::attempts_of(p, &["whd_ok".to_owned(), "sched_done".to_owned()])
            .await
            .unwrap();
        let attempts: Vec<_> = attempts
            .iter()
            .map(|a| (a.delivery_id.as_str(), a.attempt, a.response_status))
            .collect();
        assert_eq!(
            attempts,
            [
                ("sched_done", 1, Some(500)),
                ("sched_done", 2, Some(200)),
                ("whd_ok", 2, Some(200)),
            ]
        );
        let done = schedules::get(p, "prj_old", "sched_done")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                done.status,
                done.payload_shown.as_deref(),
                done.delivered_at
            ),
            (DeliveryStatus::Delivered, Some("{\"a\":1}"), Some(4500))
        );
        // The callback an instance was delivering when it stopped is claimed again once its
        // lease has run out, with its sealed target and attempts carried over.
        let leased = schedules::get(p, "prj_old", "sched_leased")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (leased.status, leased.method.as_str(), leased.attempts),
            (DeliveryStatus::Delivering, "PUT", 1)
        );
        assert!(deliveries::claim_due(&db, 5010, 25_010, 10)
            .await
            .unwrap()
            .is_empty());
        let claimed = deliveries::claim_due(&db, 6000, 26_000, 10).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(
            (
                claimed[0].id.as_str(),
                claimed[0].kind,
                claimed[0].attempts,
                claimed[0].ciphertext.as_deref()
            ),
            ("sched_leased", DeliveryKind::Callback, 2, Some("c2"))
        );
        for old in [
            "webhook_deliveries",
            "scheduled_callbacks",
            "callback_attempts",
        ] {
            assert!(!testing::table_exists(&db, old).await, "{old} is gone");
        }
        db.close().await;
    }
);
