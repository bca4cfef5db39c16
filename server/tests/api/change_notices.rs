//! Keys are answered from memory (no database read per call), and revocation stays instant: a
//! revoked key, a tightened policy or a new rate limit holds on the next call after the change
//! returns, on the instance that made it and on another service on the same database; an
//! instance that cannot hear PostgreSQL's change notices stops trusting its memory and reads
//! the database for every call (fail closed). Across processes: multi_instance.rs.

use std::time::Duration;

use serde_json::{json, Value};
use workbench_core::store::changes::LISTENER_NAME;

use crate::helpers::{
    admin_with_key, fresh_pg_database, spawn_app_with, within, Backend, Options, TestApp,
};
use crate::{app, db_test};

/// REST `storage.put` with `key`: the HTTP status.
pub async fn put(app: &TestApp, key: &str) -> u16 {
    app.http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(key)
        .json(&json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

pub async fn rest(app: &TestApp, key: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let req = app.http().request(method, app.url(path));
    let res = req.bearer_auth(key).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Changes the key `id` with `PATCH /v1/api-keys/{id}` (by the admin's key).
pub async fn set_key(app: &TestApp, admin: &str, id: &str, body: Value) {
    let (status, out) = rest(app, admin, "PATCH", &format!("/v1/api-keys/{id}"), body).await;
    assert_eq!(status, 200, "{out}");
}

/// A new policy that allows only `storage.get`: its id.
pub async fn reads_only_policy(app: &TestApp, admin: &str) -> Value {
    let (status, pol) = rest(
        app,
        admin,
        "POST",
        "/v1/policies",
        json!({ "name": "reads", "tool_allowlist": { "mode": "allowlist", "allow": ["storage.get"] } }),
    )
    .await;
    assert_eq!(status, 201, "{pol}");
    pol["id"].clone()
}

/// A new agent key of the admin's project (made by the admin's key): (its id, its secret).
pub async fn agent_key(app: &TestApp, admin: &str) -> (String, String) {
    let (status, key) = rest(
        app,
        admin,
        "POST",
        "/v1/api-keys",
        json!({ "name": "agent" }),
    )
    .await;
    assert_eq!(status, 201, "{key}");
    (
        key["id"].as_str().unwrap().to_owned(),
        key["key"].as_str().unwrap().to_owned(),
    )
}

/// A second service on `a`'s database, as a second worker of one deployment is.
async fn second_service(a: &TestApp, backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        Options {
            database_url: Some(a.database_url.clone()),
            data_dir: Some(a.data_dir.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

db_test!(
    a_key_served_from_memory_is_refused_on_the_next_call_after_it_is_narrowed_or_revoked,
    |backend| {
        let a = app!(backend);
        let (_, admin) = admin_with_key(&a).await;
        let b = second_service(&a, backend).await;
        let (id, key) = agent_key(&a, &admin).await;
        for app in [&a, &b, &a, &b] {
            assert_eq!(
                put(app, &key).await,
                200,
                "the key works (and is now in memory)"
            );
        }

        // A policy that leaves only reads: refused at once, on both.
        let pol = reads_only_policy(&a, &admin).await;
        set_key(&a, &admin, &id, json!({ "policy_id": pol })).await;
        for app in [&a, &b] {
            assert_eq!(
                put(app, &key).await,
                403,
                "the new policy holds on the next call"
            );
        }
        set_key(&a, &admin, &id, json!({ "policy_id": null })).await;
        assert_eq!(put(&b, &key).await, 200, "and its removal too");

        // A rate limit of one call a minute: the second call is refused.
        set_key(&a, &admin, &id, json!({ "rate_limit_per_minute": 1 })).await;
        assert_eq!(put(&b, &key).await, 200);
        assert_eq!(
            put(&b, &key).await,
            429,
            "the limit holds on the next calls"
        );

        // Revoked on A: refused by A and by B on the very next call.
        let (status, _) = rest(
            &a,
            &admin,
            "DELETE",
            &format!("/v1/api-keys/{id}"),
            Value::Null,
        )
        .await;
        assert_eq!(status, 204);
        assert_eq!(put(&a, &key).await, 401);
        assert_eq!(put(&b, &key).await, 401);
        assert_eq!(put(&b, &admin).await, 200, "other keys are untouched");
    }
);

db_test!(
    a_rate_limit_is_one_budget_for_every_instance_and_is_never_exceeded,
    |backend| {
        let a = app!(backend);
        let (_, admin) = admin_with_key(&a).await;
        let b = second_service(&a, backend).await;
        // Both clocks at the start of one minute, so the window does not roll mid-test.
        let start = [&a, &b]
            .iter()
            .map(|app| {
                let now = app.wb.clock().now_ms();
                now - now.rem_euclid(60_000) + 60_000
            })
            .max()
            .unwrap();
        for app in [&a, &b] {
            app.clock.advance_ms(start + 1 - app.wb.clock().now_ms());
        }
        let (id, key) = agent_key(&a, &admin).await;
        // 40 a minute: each instance claims two units at a time from the shared budget.
        set_key(&a, &admin, &id, json!({ "rate_limit_per_minute": 40 })).await;
        let mut ran = [0, 0];
        for i in 0..70 {
            let status = put([&a, &b][i % 2], &key).await;
            assert!(status == 200 || status == 429, "{status}");
            ran[i % 2] += (status == 200) as usize;
        }
        let total = ran[0] + ran[1];
        assert!(
            (39..=40).contains(&total),
            "two instances ran {ran:?} calls under a limit of 40"
        );
        assert!(ran[0] >= 19 && ran[1] >= 19, "{ran:?}");
        // Raising the limit takes effect on the next call, against the same minute's count.
        set_key(&b, &admin, &id, json!({ "rate_limit_per_minute": 50 })).await;
        let mut more = 0;
        for i in 0..30 {
            more += (put([&a, &b][i % 2], &key).await == 200) as usize;
        }
        assert!(
            (1..=10).contains(&more),
            "{more} more calls ran after the limit went from 40 to 50"
        );
        // The next minute the whole budget is back.
        for app in [&a, &b] {
            app.clock.advance_ms(60_000);
        }
        assert_eq!(put(&a, &key).await, 200);
        assert_eq!(put(&b, &key).await, 200);
    }
);

async fn listener_up(app: &TestApp) -> bool {
    app.wb.db().changes().is_live()
}

pub async fn metric_up(app: &TestApp, token: &str) -> Option<bool> {
    let text = app
        .http()
        .get(app.url("/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("workbench_change_listener_up "))?;
    Some(line.ends_with(" 1"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_cannot_hear_change_notices_reads_the_database_for_every_call() {
    const TOKEN: &str = "metrics-token-0123456789";
    let Some(url) = fresh_pg_database().await else {
        return;
    };
    let app = spawn_app_with(
        crate::helpers::Backend::Postgres,
        Options {
            database_url: Some(url),
            metrics_token: Some(TOKEN.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (who, admin) = admin_with_key(&app).await;
    let (id, key) = agent_key(&app, &admin).await;
    within("the listener is up", Duration::from_secs(10), || {
        listener_up(&app)
    })
    .await;
    assert_eq!(metric_up(&app, TOKEN).await, Some(true));
    assert_eq!(put(&app, &key).await, 200, "in memory now");

    // Cut the notification connection, and keep cutting it while the key is revoked behind
    // the instance's back: the notice of that write is lost.
    let db = app.wb.db().clone();
    let cutting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let cutter = {
        let (db, cutting) = (db.clone(), cutting.clone());
        tokio::spawn(async move {
            while cutting.load(std::sync::atomic::Ordering::Relaxed) {
                workbench_core::store::testing::execute(
                    &db,
                    &format!(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = '{LISTENER_NAME}' AND datname = current_database()"
                    ),
                )
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    within(
        "the listener is down",
        Duration::from_secs(10),
        async || !listener_up(&app).await,
    )
    .await;
    let mut seen_down = false;
    within(
        "/metrics says the listener is down",
        Duration::from_secs(5),
        async || {
            seen_down |= metric_up(&app, TOKEN).await == Some(false);
            seen_down
        },
    )
    .await;
    assert_eq!(
        put(&app, &key).await,
        200,
        "read from the database, and not kept"
    );
    workbench_core::store::testing::execute(
        &db,
        &format!(
            "UPDATE api_keys SET revoked_at = 1 WHERE id = '{id}' AND project_id = '{}'",
            who.project_id
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        put(&app, &key).await,
        401,
        "a revocation whose notice was lost holds: the key is read from the database"
    );
    assert_eq!(
        put(&app, &admin).await,
        200,
        "live keys still work, read each call"
    );

    cutting.store(false, std::sync::atomic::Ordering::Relaxed);
    cutter.await.unwrap();
    within("the listener is back", Duration::from_secs(15), || {
        listener_up(&app)
    })
    .await;
    assert_eq!(put(&app, &key).await, 401);
    assert_eq!(put(&app, &admin).await, 200);
}
