//! Idempotency-Key on POST /v1/tools/invoke (D13).

use serde_json::{json, Value};
use workbench_core::store;

use crate::fakes;
use crate::helpers::{admin_with_key, Options};
use crate::{app, db_test};

async fn invoke(
    app: &crate::helpers::TestApp,
    key: &str,
    idem: &str,
    body: &Value,
) -> (u16, Option<String>, String) {
    let res = app
        .http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(key)
        .header("idempotency-key", idem)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let replayed = res
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, replayed, res.text().await.unwrap())
}

async fn calls(app: &crate::helpers::TestApp, who: &workbench_core::auth::Principal) -> usize {
    app.wb.flush_records().await;
    store::audit::list(
        app.wb.db().pool(),
        &who.project_id,
        &Default::default(),
        1000,
    )
    .await
    .unwrap()
    .len()
}

db_test!(
    the_same_key_and_body_replay_the_stored_response_byte_for_byte,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let body = json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "once" } });
        let (s1, r1, b1) = invoke(&app, &key, "order-1", &body).await;
        assert_eq!((s1, r1), (200, None));
        let (s2, r2, b2) = invoke(&app, &key, "order-1", &body).await;
        assert_eq!((s2, r2.as_deref()), (200, Some("true")));
        assert_eq!(b1, b2, "byte for byte");
        assert_eq!(calls(&app, &admin).await, 1, "the tool ran once");
    }
);

db_test!(a_stored_failure_is_replayed_too, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let body = json!({ "tool": "storage.get", "arguments": { "key": "missing" } });
    let (s1, _, b1) = invoke(&app, &key, "k-fail", &body).await;
    assert_eq!(s1, 502);
    let (s2, r2, b2) = invoke(&app, &key, "k-fail", &body).await;
    assert_eq!((s2, r2.as_deref()), (502, Some("true")));
    assert_eq!(b1, b2);
    assert_eq!(calls(&app, &admin).await, 1);
});

db_test!(the_same_key_with_another_body_is_refused, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    invoke(
        &app,
        &key,
        "k1",
        &json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "a" } }),
    )
    .await;
    let (status, _, body) = invoke(
        &app,
        &key,
        "k1",
        &json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "b" } }),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        "idempotency_key_reused"
    );
    assert_eq!(calls(&app, &admin).await, 1);
});

db_test!(
    the_same_key_while_the_first_is_running_is_refused,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        app.wb
            .egress()
            .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
            .await
            .unwrap();
        let body =
            json!({ "tool": "http.fetch", "arguments": { "url": fake.url("/delay?ms=1500") } });
        let first = invoke(&app, &key, "slow", &body);
        let second = async {
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            invoke(&app, &key, "slow", &body).await
        };
        let ((s1, _, _), (s2, _, b2)) = tokio::join!(first, second);
        assert_eq!(s1, 200);
        assert_eq!(s2, 409);
        assert_eq!(
            serde_json::from_str::<Value>(&b2).unwrap()["error"]["code"],
            "idempotency_key_in_use"
        );
        assert_eq!(
            fake.state
                .requests
                .load(std::sync::atomic::Ordering::SeqCst),
            1
        );
    }
);

db_test!(concurrent_requests_with_one_key_execute_once, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let body = json!({ "tool": "storage.put", "arguments": { "key": "race", "content": "x" } });
    let attempts = (0..8).map(|_| invoke(&app, &key, "race-key", &body));
    let outcomes = futures::future::join_all(attempts).await;
    for (status, replayed, _) in &outcomes {
        assert!(*status == 200 || *status == 409, "{status} {replayed:?}");
    }
    assert!(
        outcomes.iter().any(|(s, r, _)| *s == 200 && r.is_none()),
        "one ran"
    );
    assert_eq!(calls(&app, &admin).await, 1, "exactly one execution");
});

db_test!(
    keys_are_scoped_per_api_key_and_expire_after_a_day,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let other_key = app.api_key(&admin).await;
        let body = json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "x" } });
        invoke(&app, &key, "shared", &body).await;
        let (_, replayed, _) = invoke(&app, &other_key, "shared", &body).await;
        assert_eq!(replayed, None, "another API key has its own key space");
        assert_eq!(calls(&app, &admin).await, 2);
        app.clock.advance_ms(24 * 60 * 60 * 1000 + 1);
        let (status, replayed, _) = invoke(&app, &key, "shared", &body).await;
        assert_eq!(
            (status, replayed),
            (200, None),
            "after 24 h the key is fresh"
        );
        assert_eq!(calls(&app, &admin).await, 3);
    }
);

db_test!(bad_idempotency_keys_are_refused, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let body = json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "x" } });
    let (status, _, out) = invoke(&app, &key, &"x".repeat(256), &body).await;
    assert_eq!(status, 400);
    assert!(out.contains("invalid Idempotency-Key"));
});

db_test!(
    two_instances_sharing_a_database_execute_a_key_once,
    |backend| {
        let a = app!(backend);
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&a).await;
        let body = json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "x" } });
        let attempts = (0..6).map(|i| {
            let app = if i % 2 == 0 { &a } else { &b };
            invoke(app, &key, "cross-instance", &body)
        });
        let outcomes = futures::future::join_all(attempts).await;
        assert!(outcomes.iter().all(|(s, _, _)| *s == 200 || *s == 409));
        assert_eq!(calls(&a, &admin).await, 1);
    }
);
