//! schedule.callback: delivered once due, signed with the project's secret; retried with
//! backoff under the same event id; refused with clear errors and nothing stored; listed,
//! cancelled and kept to their owner; secrets delivered but never shown; delivered exactly once
//! by two instances claiming together; and nothing lost when the process is killed with SIGKILL
//! in the middle of a delivery.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, database_url, execute, temp_dir, Options, TestApp, PASSWORD};
use crate::{app, db_test};

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Got {
    method: Method,
    uri: String,
    headers: HeaderMap,
    body: Value,
    raw: Bytes,
}

#[derive(Default)]
struct Receiver {
    got: Mutex<Vec<Got>>,
    /// Statuses to answer, in order; 200 once they run out.
    answers: Mutex<VecDeque<u16>>,
    /// Requests to /slow never get an answer while this is set.
    hang: std::sync::atomic::AtomicBool,
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let parsed = serde_json::from_slice(&body).unwrap_or(Value::Null);
    r.got.lock().unwrap().push(Got {
        method,
        uri: uri.to_string(),
        headers,
        body: parsed,
        raw: body,
    });
    if uri.path() == "/slow" && r.hang.swap(false, std::sync::atomic::Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    let code = r.answers.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(code).unwrap()
}

async fn start_receiver() -> (SocketAddr, Arc<Receiver>) {
    let r = Arc::new(Receiver::default());
    let app = Router::new().fallback(any(receive)).with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, r)
}

/// An app that may call the receiver back: loopback allowed by the operator, the receiver's
/// address in the project's allowlist.
async fn setup(
    backend: crate::helpers::Backend,
) -> Option<(TestApp, String, SocketAddr, Arc<Receiver>)> {
    let app = crate::helpers::spawn_app_with(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        },
    )
    .await?;
    let (admin, key) = admin_with_key(&app).await;
    let (addr, receiver) = start_receiver().await;
    app.wb
        .egress()
        .add(&admin, &addr.to_string())
        .await
        .unwrap();
    Some((app, key, addr, receiver))
}

async fn schedule(app: &TestApp, key: &str, args: Value) -> Value {
    execute(
        app,
        key,
        json!([{ "tool": "schedule.callback", "args": args }]),
    )
    .await
    .remove(0)
}

async fn get_json(app: &TestApp, key: &str, path: &str) -> (StatusCode, Value) {
    let res = app
        .http()
        .get(app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn received(r: &Receiver) -> Vec<Got> {
    r.got.lock().unwrap().clone()
}

db_test!(
    a_callback_is_delivered_once_when_due_and_signed_with_the_projects_secret,
    |backend| {
        let Some((app, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        let out = schedule(&app, &key, json!({ "url": format!("http://{addr}/hook?x=1"), "delay_seconds": 60, "payload": { "task": "remind", "n": 1 } })).await;
        let id = out["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{out}"))
            .to_owned();
        assert!(id.starts_with("sched_"), "{out}");
        assert_eq!(
            out["result"]["scheduled_for"],
            workbench_core::clock::rfc3339(app.wb.clock().now_ms() + 60_000)
        );
        assert_eq!(
            app.wb.deliveries().run_due().await.unwrap(),
            0,
            "not due yet"
        );
        assert!(received(&receiver).is_empty());

        app.clock.advance_ms(61_000);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        let got = received(&receiver);
        assert_eq!(got.len(), 1);
        let g = &got[0];
        assert_eq!((g.method.as_str(), g.uri.as_str()), ("POST", "/hook?x=1"));
        assert_eq!(g.headers["workbench-event-id"], id.as_str());
        assert_eq!(g.body["id"], id.as_str());
        assert_eq!(g.body["payload"], json!({ "task": "remind", "n": 1 }));
        assert_eq!(g.body["scheduled_for"], out["result"]["scheduled_for"]);
        // The receiver checks the signature with the secret admins are shown.
        let (status, secret) = get_json(&app, &key, "/v1/schedules/signing-secret").await;
        assert_eq!(status, 200);
        let secret = secret["secret"].as_str().unwrap();
        let sig = g.headers["workbench-signature"].to_str().unwrap();
        let t: i64 = sig
            .strip_prefix("t=")
            .and_then(|s| s.split(',').next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(t, app.wb.clock().now_ms() / 1000);
        assert_eq!(
            sig,
            workbench_core::delivery::signature(secret.as_bytes(), t, &g.raw)
        );

        let (_, detail) = get_json(&app, &key, &format!("/v1/schedules/{id}")).await;
        assert_eq!(detail["status"], "delivered", "{detail}");
        assert_eq!(detail["attempts"], 1);
        assert_eq!(detail["deliveries"][0]["response_status"], 200, "{detail}");
        app.clock.advance_ms(3_600_000);
        assert_eq!(
            app.wb.deliveries().run_due().await.unwrap(),
            0,
            "a delivered callback is not sent again"
        );
        assert_eq!(received(&receiver).len(), 1);
    }
);

db_test!(
    a_failed_delivery_is_retried_with_backoff_under_the_same_event_id_then_given_up,
    |backend| {
        let Some((app, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        receiver.answers.lock().unwrap().extend([500, 503]);
        let out = schedule(
            &app,
            &key,
            json!({ "url": format!("http://{addr}/hook"), "delay_seconds": 1, "method": "PUT" }),
        )
        .await;
        let id = out["result"]["id"].as_str().unwrap().to_owned();
        app.clock.advance_ms(2_000);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        let (_, d) = get_json(&app, &key, &format!("/v1/schedules/{id}")).await;
        assert_eq!(
            (d["status"].as_str(), d["last_response_status"].as_i64()),
            (Some("scheduled"), Some(500)),
            "{d}"
        );
        assert!(
            d["last_error"].as_str().unwrap().contains("HTTP 500"),
            "{d}"
        );
        // The first retry waits 10 s (and up to 10% more).
        app.clock.advance_ms(9_000);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 0);
        app.clock.advance_ms(2_100);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        // Then 20 s.
        app.clock.advance_ms(22_100);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        let got = received(&receiver);
        assert_eq!(got.len(), 3);
        assert!(
            got.iter()
                .all(|g| g.method == Method::PUT && g.headers["workbench-event-id"] == id.as_str()),
            "{got:?}"
        );
        assert!(
            got.iter().all(|g| g.body == got[0].body),
            "every attempt carries the same body"
        );
        let (_, d) = get_json(&app, &key, &format!("/v1/schedules/{id}")).await;
        assert_eq!(d["status"], "delivered", "{d}");
        let codes: Vec<i64> = d["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["response_status"].as_i64().unwrap())
            .collect();
        assert_eq!(codes, [500, 503, 200]);

        // A receiver that never accepts: retried for about a day, then given up.
        receiver
            .answers
            .lock()
            .unwrap()
            .extend(std::iter::repeat_n(500, 100));
        let out = schedule(
            &app,
            &key,
            json!({ "url": format!("http://{addr}/never"), "delay_seconds": 1 }),
        )
        .await;
        let id = out["result"]["id"].as_str().unwrap().to_owned();
        let mut attempts = 0;
        for _ in 0..(30 * 6) {
            app.clock.advance_ms(600_000);
            attempts += app.wb.deliveries().run_due().await.unwrap();
        }
        let (_, d) = get_json(&app, &key, &format!("/v1/schedules/{id}")).await;
        assert_eq!(d["status"], "failed", "{d}");
        assert!(
            d["last_error"].as_str().unwrap().contains("gave up after"),
            "{d}"
        );
        // 10 s doubling to an hour, at most MAX_ATTEMPTS attempts, none after.
        assert!(
            d["last_error"].as_str().unwrap().contains(&format!(
                "gave up after {} attempts",
                workbench_core::delivery::MAX_ATTEMPTS
            )),
            "{d}"
        );
        assert_eq!(attempts as i64, workbench_core::delivery::MAX_ATTEMPTS);
        assert_eq!(d["attempts"], workbench_core::delivery::MAX_ATTEMPTS);
    }
);

db_test!(
    bad_callback_requests_are_refused_and_nothing_is_scheduled,
    |backend| {
        let Some((app, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        let refuse = |out: &Value, code: &str, text: &str| {
            assert_eq!(out["code"], code, "{out}");
            assert!(out.to_string().contains(text), "expected {text:?} in {out}");
        };
        let url = format!("http://{addr}/hook");
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": "https://elsewhere.example/cb", "delay_seconds": 5 }),
            )
            .await,
            "TOOL_ERROR",
            "is not in this project's egress allowlist",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": "http://169.254.169.254/latest", "delay_seconds": 5 }),
            )
            .await,
            "TOOL_ERROR",
            "allowlist",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": url, "at": "2020-01-01T00:00:00Z" }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "in the past",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": url, "delay_seconds": 5, "at": "2099-01-01T00:00:00Z" }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "not both",
        );
        refuse(
            &schedule(&app, &key, json!({ "url": url })).await,
            "INVALID_ARGUMENTS",
            "say when",
        );
        refuse(
            &schedule(&app, &key, json!({ "url": url, "delay_seconds": 0 })).await,
            "INVALID_ARGUMENTS",
            "delay_seconds",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": url, "delay_seconds": 2_592_001 }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "delay_seconds",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": url, "delay_seconds": 5, "method": "GET" }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "method",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": url, "delay_seconds": 5, "payload": "x".repeat(70_000) }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "at most 65536",
        );
        refuse(
            &schedule(
                &app,
                &key,
                json!({ "url": "ftp://files.example/x", "delay_seconds": 5 }),
            )
            .await,
            "INVALID_ARGUMENTS",
            "http",
        );

        // Loopback allowlisted but not allowed by the operator: refused at scheduling.
        let strict = app!(backend);
        let (admin, strict_key) = admin_with_key(&strict).await;
        strict
            .wb
            .egress()
            .add(&admin, &addr.to_string())
            .await
            .unwrap();
        refuse(
            &schedule(
                &strict,
                &strict_key,
                json!({ "url": url, "delay_seconds": 5 }),
            )
            .await,
            "TOOL_ERROR",
            "refusing to call back",
        );

        let (_, list) = get_json(&app, &key, "/v1/schedules").await;
        assert_eq!(list["data"], json!([]), "{list}");
        app.clock.advance_ms(3_600_000);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 0);
        assert!(received(&receiver).is_empty());
    }
);

db_test!(
    callbacks_are_listed_and_cancelled_by_their_owner_or_an_admin_only,
    |backend| {
        let Some((app, admin_key, addr, receiver)) = setup(backend).await else {
            return;
        };
        let member = app.user("bob@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        let url = format!("http://{addr}/hook");
        let mine = schedule(
            &app,
            &member_key,
            json!({ "url": url, "delay_seconds": 30 }),
        )
        .await["result"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let theirs = schedule(&app, &admin_key, json!({ "url": url, "delay_seconds": 30 })).await
            ["result"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

        let (_, list) = get_json(&app, &member_key, "/v1/schedules").await;
        let ids: Vec<&str> = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [mine.as_str()]);
        let (_, list) = get_json(&app, &admin_key, "/v1/schedules?status=scheduled").await;
        assert_eq!(list["data"].as_array().unwrap().len(), 2, "{list}");
        let (status, _) = get_json(&app, &admin_key, "/v1/schedules?status=later").await;
        assert_eq!(status, 400);

        assert_eq!(
            get_json(&app, &member_key, &format!("/v1/schedules/{theirs}"))
                .await
                .0,
            404
        );
        let del = |key: &str, id: &str| {
            app.http()
                .delete(app.url(&format!("/v1/schedules/{id}")))
                .bearer_auth(key.to_owned())
                .send()
        };
        assert_eq!(del(&member_key, &theirs).await.unwrap().status(), 404);
        assert_eq!(del(&member_key, &mine).await.unwrap().status(), 204);
        let again = del(&member_key, &mine).await.unwrap();
        assert_eq!(again.status(), 409);
        assert!(again.text().await.unwrap().contains("already cancelled"));
        assert_eq!(
            get_json(&app, &member_key, "/v1/schedules/signing-secret")
                .await
                .0,
            403
        );

        app.clock.advance_ms(31_000);
        assert_eq!(
            app.wb.deliveries().run_due().await.unwrap(),
            1,
            "only the callback not cancelled goes"
        );
        let got = received(&receiver);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].headers["workbench-event-id"], theirs.as_str());
        let (_, d) = get_json(&app, &admin_key, &format!("/v1/schedules/{mine}")).await;
        assert_eq!(d["status"], "cancelled", "{d}");
    }
);

db_test!(
    a_secret_in_a_callback_is_delivered_but_never_shown_or_stored_in_the_clear,
    |backend| {
        let Some((app, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        let token = "tok_live_9f8e7d6c5b4a";
        execute(
            &app,
            &key,
            json!([{ "tool": "vault_set", "args": { "name": "HOOK_TOKEN", "value": token } }]),
        )
        .await;
        let out = schedule(
        &app,
        &key,
        json!({ "url": format!("http://{addr}/hook?token={{{{vault:HOOK_TOKEN}}}}"), "delay_seconds": 5, "payload": { "auth": "{{vault:HOOK_TOKEN}}" } }),
    )
    .await;
        let id = out["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{out}"))
            .to_owned();
        assert!(!out.to_string().contains(token));
        let (_, shown) = get_json(&app, &key, &format!("/v1/schedules/{id}")).await;
        assert_eq!(
            shown["payload"],
            json!({ "auth": "{{vault:HOOK_TOKEN}}" }),
            "{shown}"
        );
        assert!(
            shown["url"]
                .as_str()
                .unwrap()
                .ends_with("token={{vault:HOOK_TOKEN}}"),
            "{shown}"
        );
        let row = workbench_core::store::deliveries::get(
            app.wb.db().pool(),
            &app.wb
                .accounts()
                .authenticate_api_key(&key)
                .await
                .unwrap()
                .project_id,
            &id,
        )
        .await
        .unwrap()
        .unwrap();
        assert!(
            !format!("{row:?}").contains(token),
            "the row holds the secret only sealed"
        );

        app.clock.advance_ms(6_000);
        app.wb.deliveries().run_due().await.unwrap();
        let got = received(&receiver);
        assert_eq!(got[0].uri, format!("/hook?token={token}"));
        // The URL is where the agent sent the call; the payload leaves scrubbed (issue 27).
        assert_eq!(got[0].body["payload"]["auth"], "[redacted:HOOK_TOKEN]");
        let (_, shown) = get_json(&app, &key, "/v1/schedules").await;
        assert!(!shown.to_string().contains(token), "{shown}");
    }
);

db_test!(
    two_instances_deliver_each_due_callback_exactly_once,
    |backend| {
        let Some((a, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                data_dir: Some(a.data_dir.clone()),
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let mut ids = Vec::new();
        for i in 0..40 {
            let on = if i % 2 == 0 { &a } else { &b };
            let out = schedule(on, &key, json!({ "url": format!("http://{addr}/hook"), "delay_seconds": 1, "payload": { "i": i } })).await;
            ids.push(
                out["result"]["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{out}"))
                    .to_owned(),
            );
        }
        a.clock.advance_ms(3_000);
        b.clock.advance_ms(3_000);
        let drain = |app: &TestApp| {
            let s = app.wb.deliveries().clone();
            async move {
                let mut n = 0;
                loop {
                    match s.run_due().await.unwrap() {
                        0 => return n,
                        k => n += k,
                    }
                }
            }
        };
        let (na, nb) = tokio::join!(drain(&a), drain(&b));
        assert_eq!(na + nb, 40, "A attempted {na}, B {nb}");
        let mut seen: Vec<String> = received(&receiver)
            .iter()
            .map(|g| g.headers["workbench-event-id"].to_str().unwrap().to_owned())
            .collect();
        seen.sort();
        ids.sort();
        assert_eq!(seen, ids, "every callback exactly once");
    }
);

/// The `workbench` binary serving on `port` against `url`.
pub(crate) fn serve(url: &str, data: &std::path::Path, port: u16) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args([
            "serve",
            "--database-url",
            url,
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--egress-allow-private",
            "127.0.0.1",
        ])
        .arg("--data-dir")
        .arg(data)
        .arg("--site-root")
        .arg(data.join("site"))
        .env_remove("WB_DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

pub(crate) async fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + limit;
    while !ok() {
        assert!(
            tokio::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

db_test!(a_process_killed_mid_delivery_loses_no_callback, |backend| {
    let Some(url) = database_url(backend).await else {
        return;
    };
    let data = temp_dir("killed");
    let key = crate::cli::provision_with_cli(&url);
    let (addr, receiver) = start_receiver().await;
    receiver
        .hang
        .store(true, std::sync::atomic::Ordering::SeqCst);
    {
        let wb = workbench_core::Workbench::open(&url, Default::default())
            .await
            .unwrap();
        let who = wb.accounts().authenticate_api_key(&key).await.unwrap();
        wb.egress().add(&who, &addr.to_string()).await.unwrap();
    }
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
    let invoke = |args: Value| {
        let req = http
            .post(format!("{base}/v1/tools/invoke"))
            .bearer_auth(&key)
            .json(&json!({ "tool": "schedule.callback", "arguments": args }));
        async move {
            let v: Value = req.send().await.unwrap().json().await.unwrap();
            v["result"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{v}"))
                .to_owned()
        }
    };
    let slow =
        invoke(json!({ "url": format!("http://{addr}/slow"), "delay_seconds": 1, "payload": "A" }))
            .await;
    let later = invoke(
        json!({ "url": format!("http://{addr}/later"), "delay_seconds": 6, "payload": "B" }),
    )
    .await;
    // The first delivery is under way (the receiver holds it open) when the process dies.
    wait_until("the first delivery", Duration::from_secs(15), || {
        !received(&receiver).is_empty()
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        received(&receiver).len(),
        1,
        "the later callback was not due yet"
    );

    let mut child = serve(&url, &data, port);
    up().await;
    // The later one goes when due; the interrupted one again once its lease has run out, under
    // the same event id.
    wait_until(
        "both callbacks after the restart",
        Duration::from_secs(45),
        || received(&receiver).len() >= 3,
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let got = received(&receiver);
    let ids: Vec<&str> = got
        .iter()
        .map(|g| g.headers["workbench-event-id"].to_str().unwrap())
        .collect();
    assert_eq!(ids[0], slow);
    assert!(
        ids[1..].contains(&slow.as_str()) && ids[1..].contains(&later.as_str()),
        "{ids:?}"
    );
    assert_eq!(got.len(), 3, "{ids:?}");
});

db_test!(
    the_callbacks_page_shows_deliveries_cancels_and_reveals_the_secret_to_admins_only,
    |backend| {
        let Some((app, key, addr, receiver)) = setup(backend).await else {
            return;
        };
        receiver.answers.lock().unwrap().push_back(502);
        let sent = schedule(&app, &key, json!({ "url": format!("http://{addr}/hook"), "delay_seconds": 1, "payload": { "note": "standup" } })).await;
        let sent = sent["result"]["id"].as_str().unwrap().to_owned();
        let waiting = schedule(
            &app,
            &key,
            json!({ "url": format!("http://{addr}/later"), "delay_seconds": 3600 }),
        )
        .await;
        let waiting = waiting["result"]["id"].as_str().unwrap().to_owned();
        app.clock.advance_ms(2_000);
        app.wb.deliveries().run_due().await.unwrap();

        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let data: Value = b.call("callbacks_page", &[]).await.json().await.unwrap();
        let first = data["callbacks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == sent.as_str())
            .unwrap_or_else(|| panic!("{data}"));
        assert_eq!(first["deliveries"][0]["response_status"], 502, "{data}");
        assert_eq!(first["status"], "scheduled", "a 502 is retried");
        let html = b.get("/callbacks").await.text().await.unwrap();
        assert!(
            html.contains(&waiting)
                && html.contains("data-testid=\"delivery\"")
                && html.contains("standup"),
            "the page is rendered with its deliveries"
        );

        let secret: Value = b
            .call("callback_signing_secret", &[])
            .await
            .json()
            .await
            .unwrap();
        assert!(secret.as_str().unwrap().starts_with("wbcs_"), "{secret}");
        let res = b.call("cancel_callback", &[("id", &waiting)]).await;
        assert_eq!(res.status(), 200);
        let (_, d) = get_json(&app, &key, &format!("/v1/schedules/{waiting}")).await;
        assert_eq!(d["status"], "cancelled");

        // A member sees only their own callbacks and never the secret.
        app.user("bob@example.com", Role::Member).await;
        let m = app.browser();
        m.sign_in("bob@example.com", PASSWORD).await;
        let data: Value = m.call("callbacks_page", &[]).await.json().await.unwrap();
        assert_eq!(data["callbacks"], json!([]), "{data}");
        let res = m.call("callback_signing_secret", &[]).await;
        assert_ne!(res.status(), 200);
        assert!(!res.text().await.unwrap().contains("wbcs_"));
        let res = m.call("cancel_callback", &[("id", &sent)]).await;
        assert_ne!(res.status(), 200);
    }
);

db_test!(
    retention_deletes_finished_callbacks_and_keeps_waiting_ones,
    |backend| {
        let Some((app, key, addr, _receiver)) = setup(backend).await else {
            return;
        };
        let admin = app.wb.accounts().authenticate_api_key(&key).await.unwrap();
        let done = schedule(
            &app,
            &key,
            json!({ "url": format!("http://{addr}/hook"), "delay_seconds": 1 }),
        )
        .await["result"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let waiting = schedule(
            &app,
            &key,
            json!({ "url": format!("http://{addr}/hook"), "delay_seconds": 2_500_000 }),
        )
        .await["result"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        app.clock.advance_ms(2_000);
        assert_eq!(app.wb.deliveries().run_due().await.unwrap(), 1);
        app.wb
            .audit()
            .set_retention_days(&admin, Some(1))
            .await
            .unwrap();
        app.clock.advance_ms(2 * 24 * 3600 * 1000);
        let report = app.wb.audit().apply_retention().await.unwrap();
        assert_eq!(report.callbacks, 1, "{report:?}");
        assert_eq!(
            get_json(&app, &key, &format!("/v1/schedules/{done}"))
                .await
                .0,
            404
        );
        let (_, w) = get_json(&app, &key, &format!("/v1/schedules/{waiting}")).await;
        assert_eq!(
            w["status"], "scheduled",
            "a callback still waiting is kept whatever its age"
        );
    }
);
