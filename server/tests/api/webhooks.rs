//! The confirmation webhook (D15): a held call is POSTed to the project's webhook through the
//! delivery outbox, signed `t=…,v1=…` under a vault secret (and, for the transition, the old
//! `sha256=` value under `Workbench-Signature-Legacy`), at once and then with retries; the URL
//! passes the egress rules when set and at every connection; nothing secret is in the body.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, Options, TestApp};
use crate::{app, db_test};

/// A webhook receiver on loopback: records every request and answers the statuses queued (200
/// once the queue is empty).
#[derive(Default)]
struct Receiver {
    got: Mutex<Vec<(HeaderMap, Bytes)>>,
    answers: Mutex<Vec<u16>>,
}

async fn hook(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    r.got.lock().unwrap().push((headers, body));
    let mut answers = r.answers.lock().unwrap();
    let code = if answers.is_empty() {
        200
    } else {
        answers.remove(0)
    };
    StatusCode::from_u16(code).unwrap()
}

async fn receiver(answers: Vec<u16>) -> (String, Arc<Receiver>) {
    let state = Arc::new(Receiver {
        answers: Mutex::new(answers),
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook"), state)
}

async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let res = app
        .http()
        .request(method, app.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The newest delivery once it is no longer pending (deliveries run in the background).
async fn settled_delivery(app: &TestApp, key: &str) -> Value {
    for _ in 0..300 {
        let (_, list) = send(
            app,
            key,
            reqwest::Method::GET,
            "/v1/webhooks/deliveries",
            Value::Null,
        )
        .await;
        if let Some(d) = list["data"].get(0) {
            if d["status"] != "pending" {
                return d.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no delivery settled within 30 s");
}

/// The newest delivery once `ok` says so.
async fn newest_delivery_when(app: &TestApp, key: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..300 {
        let (_, list) = send(
            app,
            key,
            reqwest::Method::GET,
            "/v1/webhooks/deliveries",
            Value::Null,
        )
        .await;
        if let Some(d) = list["data"].get(0) {
            if ok(d) {
                return d.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no delivery as expected within 30 s");
}

/// An agent key whose policy holds storage.put for a confirmation.
async fn gated_agent(app: &TestApp, admin: &str) -> String {
    let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
    let (_, pol) = send(
        app,
        admin,
        reqwest::Method::POST,
        "/v1/policies",
        json!({ "name": "careful", "tool_allowlist": rules }),
    )
    .await;
    let (_, key) = send(
        app,
        admin,
        reqwest::Method::POST,
        "/v1/api-keys",
        json!({ "name": "agent", "policy_id": pol["id"] }),
    )
    .await;
    key["key"].as_str().unwrap().to_owned()
}

const SIGNING: &str = "whsec-signing-Key-0123456789";
const PASTED: &str = "pasted-Api-Token-5566778899";

db_test!(
    a_held_call_is_announced_to_the_webhook_signed_with_the_vault_secret,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .vault()
            .set(&admin, "HOOK_SIGNING", SIGNING)
            .await
            .unwrap();
        app.wb
            .vault()
            .set(&admin, "API_TOKEN", PASTED)
            .await
            .unwrap();
        let (url, got) = receiver(vec![]).await;
        let (status, s) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "webhook": { "url": url, "secret_ref": "HOOK_SIGNING" } }),
        )
        .await;
        assert_eq!(status, 200, "{s}");
        assert_eq!(
            s["webhook"],
            json!({ "url": url, "secret_ref": "HOOK_SIGNING" })
        );
        assert!(!s.to_string().contains(SIGNING));

        let agent = gated_agent(&app, &key).await;
        let args =
            json!({ "key": "report", "content": format!("{PASTED} and {{{{vault:API_TOKEN}}}}") });
        let (status, held) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "end_user_id": "cust-1", "arguments": args }),
        )
        .await;
        assert_eq!(status, 202, "{held}");
        let delivery = settled_delivery(&app, &key).await;
        assert_eq!(
            (
                delivery["status"].as_str(),
                delivery["attempts"].as_i64(),
                delivery["response_status"].as_i64()
            ),
            (Some("delivered"), Some(1), Some(200)),
            "{delivery}"
        );

        let (headers, body) = got.got.lock().unwrap()[0].clone();
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["workbench-event"], "confirmation.created");
        assert_eq!(
            headers["workbench-delivery"].to_str().unwrap(),
            delivery["id"].as_str().unwrap()
        );
        // One signature format for every delivery: the timestamp is signed with the body.
        let sig = headers["workbench-signature"].to_str().unwrap();
        let t: i64 = sig
            .strip_prefix("t=")
            .and_then(|s| s.split(',').next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(t, app.wb.clock().now_ms() / 1000);
        assert_eq!(
            sig,
            workbench_core::delivery::signature(SIGNING.as_bytes(), t, &body),
            "HMAC-SHA256 of \"<t>.<body>\" under the vault secret"
        );
        assert_eq!(
            workbench_core::delivery::verify(SIGNING.as_bytes(), sig, &body, t + 10),
            Ok(())
        );
        assert!(workbench_core::delivery::verify(b"another secret", sig, &body, t).is_err());
        // The old untimed value, for receivers not yet moved, under its own header.
        assert_eq!(
            headers["workbench-signature-legacy"].to_str().unwrap(),
            workbench_core::delivery::legacy_signature(SIGNING.as_bytes(), &body)
        );
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            !text.contains(SIGNING) && !text.contains(PASTED),
            "no secret in the body: {text}"
        );
        let event: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(event["type"], "confirmation.created");
        let data = &event["data"];
        assert_eq!(data["id"], held["confirmation_id"]);
        assert_eq!(data["tool_call_id"], held["id"]);
        assert_eq!(
            (
                data["tool"].as_str(),
                data["status"].as_str(),
                data["end_user_id"].as_str()
            ),
            (Some("storage.put"), Some("pending"), Some("cust-1"))
        );
        assert!(data["url"].as_str().unwrap().ends_with(&format!(
            "/confirmations/{}",
            held["confirmation_id"].as_str().unwrap()
        )));
        assert!(
            data["arguments"]["content"]
                .as_str()
                .unwrap()
                .contains("{{vault:API_TOKEN}}"),
            "references stay references: {data}"
        );

        // The identical call again is the same confirmation: no second announcement.
        let (status, _) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "end_user_id": "cust-1", "arguments": args }),
        )
        .await;
        assert_eq!(status, 202);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(got.got.lock().unwrap().len(), 1);

        // Removed: held calls are no longer announced.
        let (_, s) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "webhook": null }),
        )
        .await;
        assert_eq!(s["webhook"], Value::Null);
        let (status, _) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "other", "content": "x" } }),
        )
        .await;
        assert_eq!(status, 202);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(got.got.lock().unwrap().len(), 1);
    }
);

db_test!(
    a_failing_webhook_is_retried_and_how_it_went_is_kept,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .vault()
            .set(&admin, "HOOK_SIGNING", SIGNING)
            .await
            .unwrap();
        let (url, got) = receiver(vec![503]).await;
        send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "webhook": { "url": url, "secret_ref": "HOOK_SIGNING" } }),
        )
        .await;
        let agent = gated_agent(&app, &key).await;
        let (status, _) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "a", "content": "b" } }),
        )
        .await;
        assert_eq!(
            status, 202,
            "the call is answered without waiting for the webhook"
        );
        // The first attempt is made at once and fails; the delivery waits in the outbox.
        let d = newest_delivery_when(&app, &key, |d| d["attempts"] == 1 && d["error"].is_string())
            .await;
        assert_eq!(
            (d["status"].as_str(), d["response_status"].as_i64()),
            (Some("pending"), Some(503)),
            "a 503 is retried: {d}"
        );
        assert_eq!(
            app.wb.deliveries().run_due().await.unwrap(),
            0,
            "not before its wait"
        );
        // The first retry waits 10 s (and up to 10% more).
        app.clock.advance_ms(11_100);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        let d = settled_delivery(&app, &key).await;
        assert_eq!(
            (
                d["status"].as_str(),
                d["attempts"].as_i64(),
                d["response_status"].as_i64()
            ),
            (Some("delivered"), Some(2), Some(200)),
            "{d}"
        );
        let got = got.got.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, got[1].1, "a retry sends the same signed body");
        assert_eq!(
            got[0].0["workbench-delivery"],
            got[1].0["workbench-delivery"]
        );
    }
);

db_test!(
    a_webhook_host_that_resolves_to_a_private_address_is_never_called,
    |backend| {
        // Nothing private is allowed here. `localhost` is a name, so it passes the check of literal
        // addresses when set; the checked resolver refuses it at the connection.
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .vault()
            .set(&admin, "HOOK_SIGNING", SIGNING)
            .await
            .unwrap();
        let (url, got) = receiver(vec![]).await;
        let by_name = url.replace("127.0.0.1", "localhost");
        let (status, s) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "webhook": { "url": by_name, "secret_ref": "HOOK_SIGNING" } }),
        )
        .await;
        assert_eq!(status, 200, "{s}");
        let agent = gated_agent(&app, &key).await;
        send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "a", "content": "b" } }),
        )
        .await;
        let d = settled_delivery(&app, &key).await;
        assert_eq!(
            (d["status"].as_str(), d["attempts"].as_i64()),
            (Some("failed"), Some(1)),
            "an address rule is not retried: {d}"
        );
        assert!(d["error"].as_str().unwrap().contains("loopback"), "{d}");
        assert!(
            got.got.lock().unwrap().is_empty(),
            "the receiver was never reached"
        );
    }
);

db_test!(
    a_webhook_is_checked_completely_before_it_is_stored,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .vault()
            .set(&admin, "HOOK_SIGNING", SIGNING)
            .await
            .unwrap();
        let bad = [
            (
                json!({ "url": "http://127.0.0.1:9/hook", "secret_ref": "HOOK_SIGNING" }),
                "egress-allow-private",
            ),
            (
                json!({ "url": "http://169.254.169.254/latest", "secret_ref": "HOOK_SIGNING" }),
                "allow-private",
            ),
            (
                json!({ "url": "https://user:pw@hooks.example.com/x", "secret_ref": "HOOK_SIGNING" }),
                "never inline",
            ),
            (
                json!({ "url": "ftp://hooks.example.com/x", "secret_ref": "HOOK_SIGNING" }),
                "http(s)",
            ),
            (
                json!({ "url": "not a url", "secret_ref": "HOOK_SIGNING" }),
                "url",
            ),
            (
                json!({ "url": "https://hooks.example.com/x", "secret_ref": "NOPE" }),
                "no secret",
            ),
            (
                json!({ "url": "https://hooks.example.com/x", "secret": SIGNING }),
                "webhook",
            ),
            (
                json!({ "url": "https://hooks.example.com/x" }),
                "secret_ref",
            ),
        ];
        for (webhook, needle) in bad {
            let (status, e) = send(
                &app,
                &key,
                reqwest::Method::PATCH,
                "/v1/settings",
                json!({ "webhook": webhook }),
            )
            .await;
            assert_eq!(status, 422, "{webhook}: {e}");
            let message = e["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(needle), "{webhook}: {message}");
            assert!(
                !e.to_string().contains(SIGNING),
                "an error never echoes a secret: {e}"
            );
        }
        let (_, s) = send(
            &app,
            &key,
            reqwest::Method::GET,
            "/v1/settings",
            Value::Null,
        )
        .await;
        assert_eq!(s["webhook"], Value::Null, "nothing was stored");
        // A refused webhook in the same request leaves the retention unchanged too.
        let (status, _) = send(&app, &key, reqwest::Method::PATCH, "/v1/settings", json!({ "audit_retention_days": 7, "webhook": { "url": "ftp://x", "secret_ref": "HOOK_SIGNING" } })).await;
        assert_eq!(status, 422);
        assert_eq!(
            send(
                &app,
                &key,
                reqwest::Method::GET,
                "/v1/settings",
                Value::Null
            )
            .await
            .1["audit_retention_days"],
            Value::Null
        );

        let ok = json!({ "webhook": { "url": "https://hooks.example.com/approvals", "secret_ref": "HOOK_SIGNING" } });
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        assert_eq!(
            send(
                &app,
                &member_key,
                reqwest::Method::PATCH,
                "/v1/settings",
                ok.clone()
            )
            .await
            .0,
            403
        );
        assert_eq!(
            send(
                &app,
                &member_key,
                reqwest::Method::GET,
                "/v1/webhooks/deliveries",
                Value::Null
            )
            .await
            .0,
            403
        );
        let agent = gated_agent(&app, &key).await;
        assert_eq!(
            send(
                &app,
                &agent,
                reqwest::Method::PATCH,
                "/v1/settings",
                ok.clone()
            )
            .await
            .0,
            403,
            "a policy-limited key cannot redirect the webhook"
        );
        let (status, s) = send(&app, &key, reqwest::Method::PATCH, "/v1/settings", ok).await;
        assert_eq!(status, 200, "{s}");
        assert_eq!(s["webhook"]["url"], "https://hooks.example.com/approvals");
    }
);
