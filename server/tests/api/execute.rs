//! execute_tools in batch mode: the pipeline's rules, one by one.

use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::store;

use crate::fakes;
use crate::helpers::{admin_with_key, execute, mcp_call, Options};
use crate::{app, db_test};

db_test!(storage_round_trips_and_applies_schema_defaults, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let results = execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "notes/today.txt", "content": "hello" } }])).await;
    let put = &results[0]["result"];
    assert_eq!(put["key"], "notes/today.txt");
    assert_eq!(put["size"], 5);
    assert_eq!(
        put["content_type"], "text/plain; charset=utf-8",
        "the schema default was applied"
    );
    let results = execute(
        &app,
        &key,
        json!([{ "tool": "storage.get", "args": { "key": "notes/today.txt" } }]),
    )
    .await;
    let got = &results[0]["result"];
    assert_eq!(got["content"], "hello");
    assert_eq!(
        got["encoding"], "utf8",
        "the default encoding (auto) picked utf8"
    );
    assert_eq!(got["updated_at"], put["updated_at"]);
    assert!(
        got.get("sha256").is_none() && put.get("sha256").is_none(),
        "no content hash: an offline-guessing aid for short secrets"
    );
    // Binary content round-trips as base64.
    let results = execute(
        &app,
        &key,
        json!([
            { "tool": "storage.put", "args": { "key": "b.bin", "content": "/wD+AQ==", "encoding": "base64", "content_type": "application/octet-stream" } },
        ]),
    )
    .await;
    assert_eq!(results[0]["result"]["size"], 4);
    let results = execute(
        &app,
        &key,
        json!([{ "tool": "storage.get", "args": { "key": "b.bin" } }]),
    )
    .await;
    assert_eq!(results[0]["result"]["encoding"], "base64");
    assert_eq!(results[0]["result"]["content"], "/wD+AQ==");
    assert_eq!(
        results[0]["result"]["content_type"],
        "application/octet-stream"
    );
});

db_test!(storage_is_scoped_to_the_project, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    execute(
        &app,
        &key,
        json!([{ "tool": "storage.put", "args": { "key": "secret-plan", "content": "x" } }]),
    )
    .await;
    let (other, _) = app
        .wb
        .accounts()
        .create_user(
            "eve@example.com",
            crate::helpers::PASSWORD,
            Some("other"),
            Role::Admin,
        )
        .await
        .unwrap();
    let eve = app
        .wb
        .accounts()
        .principal_for_user(&other.id)
        .await
        .unwrap()
        .unwrap();
    let eve_key = app.api_key(&eve).await;
    let results = execute(
        &app,
        &eve_key,
        json!([{ "tool": "storage.get", "args": { "key": "secret-plan" } }]),
    )
    .await;
    assert_eq!(results[0]["code"], "TOOL_ERROR");
    assert!(results[0]["handler_error"]
        .as_str()
        .unwrap()
        .contains("no object with key"));
});

db_test!(unknown_tools_and_invalid_arguments_fail_alone, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let results = execute(
        &app,
        &key,
        json!([
            { "tool": "nope_missing", "args": {} },
            { "tool": "storage.put", "args": { "key": 7, "extra": true } },
            { "tool": "storage.put", "args": { "key": "ok", "content": "fine" } },
            { "tool": "storage.put", "args": { "key": "../escape", "content": "x" } },
        ]),
    )
    .await;
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["code"], "TOOL_NOT_FOUND");
    assert_eq!(results[0]["tool"], "nope_missing");
    assert_eq!(results[1]["code"], "INVALID_ARGUMENTS");
    let paths: Vec<&str> = results[1]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/key"), "{paths:?}");
    assert!(paths.contains(&"/content"), "{paths:?}");
    assert!(results[1]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["message"].as_str().unwrap().len() > 3));
    assert_eq!(results[2]["result"]["key"], "ok");
    assert_eq!(results[3]["code"], "INVALID_ARGUMENTS");
    let msg = results[1]["error"].as_str().unwrap();
    assert_eq!(msg, msg.to_lowercase());
});

db_test!(an_oversized_result_becomes_result_too_large, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let big = "x".repeat(70_000);
    let results = execute(
        &app,
        &key,
        json!([{ "tool": "storage.put", "args": { "key": "big", "content": big } }]),
    )
    .await;
    assert_eq!(results[0]["result"]["size"], 70_000);
    let results = execute(
        &app,
        &key,
        json!([{ "tool": "storage.get", "args": { "key": "big" } }]),
    )
    .await;
    assert_eq!(results[0]["code"], "RESULT_TOO_LARGE");
    assert!(results[0]["size"].as_u64().unwrap() > 70_000);
    assert!(results[0]["error"].as_str().unwrap().contains("compose"));
    // Just under the cap is fine.
    let fits = "y".repeat(59_000);
    execute(
        &app,
        &key,
        json!([{ "tool": "storage.put", "args": { "key": "fits", "content": fits } }]),
    )
    .await;
    let results = execute(
        &app,
        &key,
        json!([{ "tool": "storage.get", "args": { "key": "fits" } }]),
    )
    .await;
    assert_eq!(results[0]["result"]["size"], 59_000);
});

db_test!(
    rest_invoke_has_its_own_result_ceiling_instead_of_the_mcp_cap,
    |backend| {
        let app = app!(
            backend,
            Options {
                rest_result_max_bytes: Some(100_000),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let invoke = |body: Value| {
            let req = app
                .http()
                .post(app.url("/v1/tools/invoke"))
                .bearer_auth(&key)
                .json(&body);
            async move {
                let res = req.send().await.unwrap();
                (res.status().as_u16(), res.json::<Value>().await.unwrap())
            }
        };
        let (status, _) = invoke(json!({ "tool": "storage.put", "arguments": { "key": "big", "content": "x".repeat(70_000) } })).await;
        assert_eq!(status, 200);
        // Over MCP's 60,000 characters, under this server's REST ceiling: REST answers it whole.
        let (status, out) =
            invoke(json!({ "tool": "storage.get", "arguments": { "key": "big" } })).await;
        assert_eq!(
            status,
            200,
            "{}",
            &out.to_string()[..200.min(out.to_string().len())]
        );
        assert_eq!(out["result"]["content"].as_str().unwrap().len(), 70_000);
        let mcp = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "big" } }]),
        )
        .await;
        assert_eq!(mcp[0]["code"], "RESULT_TOO_LARGE", "MCP keeps the cap");
        // Over the REST ceiling: 502 tool_error stating the size; tool_result_too_large is gone.
        invoke(json!({ "tool": "storage.put", "arguments": { "key": "huge", "content": "y".repeat(120_000) } })).await;
        let (status, out) =
            invoke(json!({ "tool": "storage.get", "arguments": { "key": "huge" } })).await;
        assert_eq!(status, 502, "{out}");
        assert_eq!(out["error"]["code"], "tool_error");
        let message = out["error"]["meta"]["handler_error"].as_str().unwrap();
        assert!(
            message.contains("bytes") && message.contains("100000"),
            "{message}"
        );
    }
);

async fn allow_fake(
    app: &crate::helpers::TestApp,
    admin: &workbench_core::auth::Principal,
    fake: &fakes::FakeApi,
) {
    app.wb
        .egress()
        .add(admin, &format!("127.0.0.1:{}", fake.addr.port()))
        .await
        .unwrap();
}

db_test!(results_stay_in_order_whatever_finishes_first, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (admin, key) = admin_with_key(&app).await;
    let fake = fakes::start().await;
    allow_fake(&app, &admin, &fake).await;
    let delays = [400u64, 10, 250, 0, 120, 60];
    let executions: Vec<Value> = delays.iter().map(|ms| json!({ "tool": "http.fetch", "args": { "url": fake.url(&format!("/delay?ms={ms}")) } })).collect();
    let results = execute(&app, &key, json!(executions)).await;
    for (i, ms) in delays.iter().enumerate() {
        let body: Value =
            serde_json::from_str(results[i]["result"]["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["ms"], *ms, "entry {i}");
    }
});

db_test!(a_batch_never_runs_more_than_eight_at_once, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (admin, key) = admin_with_key(&app).await;
    let fake = fakes::start().await;
    allow_fake(&app, &admin, &fake).await;
    let executions: Vec<Value> = (0..20)
        .map(|_| json!({ "tool": "http.fetch", "args": { "url": fake.url("/delay?ms=150") } }))
        .collect();
    let results = execute(&app, &key, json!(executions)).await;
    assert_eq!(results.len(), 20);
    assert!(results.iter().all(|r| r["result"]["status"] == 200));
    let max = fake
        .state
        .max_in_flight
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(max <= 8, "{max} ran at once");
    assert!(max >= 2, "executions ran concurrently ({max})");
    assert_eq!(
        fake.state
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        20
    );
});

db_test!(
    batches_over_fifty_and_malformed_requests_are_refused_before_running,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let too_many: Vec<Value> = (0..51).map(|i| json!({ "tool": "storage.put", "args": { "key": format!("k{i}"), "content": "x" } })).collect();
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "execute_tools",
            json!({ "executions": too_many }),
        )
        .await;
        assert!(is_error);
        assert_eq!(out["code"], "INVALID_ARGUMENTS");
        assert!(out["error"]
            .as_str()
            .unwrap()
            .contains("too many executions"));
        for bad in [
            json!({}),
            json!({ "executions": [] }),
            json!({ "executions": [{ "args": {} }] }),
            json!({ "executions": "x" }),
        ] {
            let (out, is_error) = mcp_call(&app, &key, "execute_tools", bad.clone()).await;
            assert!(is_error, "{bad}");
            assert_eq!(out["code"], "INVALID_ARGUMENTS");
        }
        app.wb.flush_records().await;
        let rows = store::audit::list(
            app.wb.db().pool(),
            &admin.project_id,
            &Default::default(),
            100,
        )
        .await
        .unwrap();
        assert!(rows.is_empty(), "nothing ran, nothing was audited");
    }
);

db_test!(every_execution_leaves_one_audit_row_and_usage, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let results = execute(
        &app,
        &key,
        json!([
            { "tool": "storage.put", "args": { "key": "a", "content": "1" } },
            { "tool": "storage.put", "args": {} },
            { "tool": "nope_missing" },
        ]),
    )
    .await;
    assert_eq!(results.len(), 3);
    app.wb.flush_records().await;
    let rows = store::audit::list(
        app.wb.db().pool(),
        &admin.project_id,
        &Default::default(),
        100,
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 3);
    let mut statuses: Vec<(String, String, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.tool.clone().unwrap(),
                r.status.to_string(),
                r.error_code.clone(),
            )
        })
        .collect();
    statuses.sort();
    assert_eq!(
        statuses,
        vec![
            (
                "nope_missing".into(),
                "failed".into(),
                Some("TOOL_NOT_FOUND".into())
            ),
            (
                "storage.put".into(),
                "failed".into(),
                Some("INVALID_ARGUMENTS".into())
            ),
            ("storage.put".into(), "succeeded".into(), None),
        ]
    );
    assert!(rows
        .iter()
        .all(|r| r.surface == "mcp" && r.api_key_id.is_some() && r.tool_call_id.is_some()));
    let usage = app
        .wb
        .metering()
        .usage(&admin, "2000-01-01", "2999-12-31")
        .await
        .unwrap();
    let calls: i64 = usage
        .iter()
        .filter(|u| u.meter.as_str() == "tool_call" && u.tool == "storage.put")
        .map(|u| u.value)
        .sum();
    assert_eq!(calls, 2, "both storage.put attempts are metered");
    assert!(
        !usage.iter().any(|u| u.tool == "nope_missing"),
        "a made-up name gets no counter of its own"
    );
    let unknown: i64 = usage
        .iter()
        .filter(|u| u.meter.as_str() == "tool_call" && u.tool == "(unknown tool)")
        .map(|u| u.value)
        .sum();
    assert_eq!(unknown, 1, "but the call is counted");
});
