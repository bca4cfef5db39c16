//! Compose mode and the return projection (seed 000): every sentence a rule, every rule a test.

use serde_json::{json, Value};
use workbench_core::store;

use crate::helpers::{admin_with_key, execute, mcp_call};
use crate::{app, db_test};

async fn run(app: &crate::helpers::TestApp, key: &str, args: Value) -> (Value, bool) {
    mcp_call(app, key, "execute_tools", args).await
}

async fn audit_count(
    app: &crate::helpers::TestApp,
    who: &workbench_core::auth::Principal,
) -> usize {
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
    compose_chains_steps_and_return_shapes_the_answer,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (out, is_error) = run(
        &app,
        &key,
        json!({
            "compose": true,
            "executions": [
                { "ref_id": "put", "tool": "storage.put", "args": { "key": "reports/q3.csv", "content": "a,b\n1,2\n" } },
                { "ref_id": "get", "tool": "storage.get", "args": { "key": "{{step:put.key}}" } },
                { "ref_id": "note", "tool": "storage.put", "args": { "key": "notes/n", "content": "Saved {{step:put.key}} ({{step:put.size}} bytes) {{step:get.encoding}}" } }
            ],
            "return": { "file": "{{step:put.key}}", "rows": "{{step:put.size}}", "sha": "{{step:get.updated_at}}", "all": ["{{step:note.size}}", "{{step:note.key}}"] }
        }),
    )
    .await;
        assert!(!is_error, "{out}");
        let result = &out["result"];
        assert_eq!(result["file"], "reports/q3.csv");
        assert_eq!(
            result["rows"], 8,
            "a whole-value reference keeps the number type"
        );
        assert_eq!(result["sha"], json!(result["sha"].as_str().unwrap()));
        assert_eq!(result["all"][1], "notes/n");
        assert_eq!(
            out.as_object().unwrap().len(),
            1,
            "only {{ result }} is sent back: {out}"
        );
        // The embedded references were interpolated (the number as JSON).
        let (got, _) = run(
            &app,
            &key,
            json!({ "executions": [{ "tool": "storage.get", "args": { "key": "notes/n" } }] }),
        )
        .await;
        assert_eq!(
            got["results"][0]["result"]["content"],
            "Saved reports/q3.csv (8 bytes) utf8"
        );
    }
);

db_test!(without_return_compose_answers_the_last_result, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let (out, _) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "a", "tool": "storage.put", "args": { "key": "x", "content": "one" } },
            { "ref_id": "b", "tool": "storage.get", "args": { "key": "x" } }
        ] }),
    )
    .await;
    assert_eq!(out["result"]["content"], "one");
    assert_eq!(out["result"]["key"], "x");
});

db_test!(the_first_failing_step_ends_the_run, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let (out, is_error) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "a", "tool": "storage.put", "args": { "key": "first", "content": "done" } },
            { "ref_id": "b", "tool": "storage.get", "args": { "key": "missing" } },
            { "ref_id": "c", "tool": "storage.put", "args": { "key": "never", "content": "x" } }
        ] }),
    )
    .await;
    assert!(is_error);
    assert_eq!(out["code"], "TOOL_ERROR");
    assert_eq!(out["index"], 1);
    assert_eq!(out["ref_id"], "b");
    let check = execute(&app, &key, json!([{ "tool": "storage.get", "args": { "key": "first" } }, { "tool": "storage.get", "args": { "key": "never" } }])).await;
    assert_eq!(check[0]["result"]["content"], "done", "step a took effect");
    assert_eq!(check[1]["code"], "TOOL_ERROR", "step c never ran");
    assert_eq!(
        audit_count(&app, &admin).await,
        4,
        "a, b and the two checks; c never ran"
    );
});

db_test!(
    a_malformed_reference_is_bad_ref_when_its_step_runs,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for bad in [
            "{{step:a.key.}}",
            "{{step:a..key}}",
            "{{step:a.constructor}}",
            "{{step:zz.key}}",
            "{{step:a.key",
            "{{step:c.key}}",
        ] {
            let (out, is_error) = run(
                &app,
                &key,
                json!({ "compose": true, "executions": [
                { "ref_id": "a", "tool": "storage.put", "args": { "key": "k1", "content": "v" } },
                { "ref_id": "b", "tool": "storage.get", "args": { "key": bad } },
                { "ref_id": "c", "tool": "storage.put", "args": { "key": "k2", "content": "v" } }
            ] }),
            )
            .await;
            assert!(is_error, "{bad}");
            assert_eq!(out["code"], "BAD_REF", "{bad}: {out}");
            assert_eq!(out["ref_id"], "b", "{bad}");
            assert_eq!(out["index"], 1);
        }
        let check = execute(&app, &key, json!([{ "tool": "storage.get", "args": { "key": "k1" } }, { "tool": "storage.get", "args": { "key": "k2" } }])).await;
        assert_eq!(
            check[0]["result"]["content"], "v",
            "earlier steps took effect"
        );
        assert_eq!(check[1]["code"], "TOOL_ERROR", "later steps did not run");
    }
);

db_test!(compose_rules_are_checked_before_anything_runs, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let nine: Vec<Value> = (0..9).map(|i| json!({ "ref_id": format!("s{i}"), "tool": "storage.put", "args": { "key": format!("k{i}"), "content": "x" } })).collect();
    for args in [
        json!({ "compose": true, "executions": nine }),
        json!({ "compose": true, "executions": [{ "ref_id": "a", "tool": "storage.put", "args": { "key": "k", "content": "x" } }, { "tool": "storage.get", "args": { "key": "k" } }] }),
        json!({ "compose": true, "executions": [{ "ref_id": "a", "tool": "storage.put", "args": { "key": "k", "content": "x" } }, { "ref_id": "a", "tool": "storage.get", "args": { "key": "k" } }] }),
    ] {
        let (out, is_error) = run(&app, &key, args).await;
        assert!(is_error);
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
    }
    assert_eq!(audit_count(&app, &admin).await, 0, "nothing ran");
});

db_test!(
    step_results_are_inserted_literally_never_rescanned_for_vault_refs,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "TOKEN", "value": "super-secret-token" } }])).await;
        // Store the literal text "{{vault:TOKEN}}" (base64, so nothing resolves it on the way in).
        execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "title", "content": "e3t2YXVsdDpUT0tFTn19", "encoding": "base64" } }])).await;
        let (out, is_error) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "t", "tool": "storage.get", "args": { "key": "title" } },
            { "ref_id": "copy", "tool": "storage.put", "args": { "key": "copy", "content": "PR: {{step:t.content}}" } }
        ], "return": { "title": "{{step:t.content}}", "vault": "{{vault:TOKEN}}" } }),
    )
    .await;
        assert!(!is_error, "{out}");
        assert_eq!(out["result"]["title"], "{{vault:TOKEN}}");
        assert_eq!(
            out["result"]["vault"], "{{vault:TOKEN}}",
            "return never resolves vault refs"
        );
        let check = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "copy" } }]),
        )
        .await;
        assert_eq!(
            check[0]["result"]["content"], "PR: {{vault:TOKEN}}",
            "the next tool got the literal text, not the secret"
        );
    }
);

db_test!(
    vault_refs_in_compose_args_resolve_and_are_scrubbed_from_later_steps_and_the_answer,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "TOKEN", "value": "super-secret-token" } }])).await;
        let (out, _) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "a", "tool": "storage.put", "args": { "key": "tok", "content": "{{vault:TOKEN}}" } },
            { "ref_id": "b", "tool": "storage.get", "args": { "key": "tok" } },
            { "ref_id": "c", "tool": "storage.put", "args": { "key": "tok2", "content": "{{step:b.content}}" } }
        ], "return": ["{{step:b.content}}", "{{step:c.size}}"] }),
    )
    .await;
        assert_eq!(out["result"][0], "[redacted:TOKEN]");
        assert!(!out.to_string().contains("super-secret-token"));
        // Step c received the scrubbed text, not the secret.
        let check = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "tok2" } }]),
        )
        .await;
        assert_eq!(check[0]["result"]["content"], "[redacted:TOKEN]");
    }
);

db_test!(
    return_without_compose_lists_failures_and_refuses_refs_to_them,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let executions = json!([
            { "ref_id": "ok1", "tool": "storage.put", "args": { "key": "a", "content": "1" } },
            { "ref_id": "bad", "tool": "storage.get", "args": { "key": "missing" } },
            { "tool": "nope_missing" },
            { "ref_id": "ok2", "tool": "storage.put", "args": { "key": "b", "content": "22" } }
        ]);
        let (out, is_error) = run(&app, &key, json!({ "executions": executions, "return": { "sizes": ["{{step:ok1.size}}", "{{step:ok2.size}}"] } })).await;
        assert!(!is_error, "{out}");
        assert_eq!(out["result"], json!({ "sizes": [1, 2] }));
        let errors = out["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0]["index"], 1);
        assert_eq!(errors[0]["ref_id"], "bad");
        assert_eq!(errors[0]["code"], "TOOL_ERROR");
        assert_eq!(errors[1]["index"], 2);
        assert!(errors[1].get("ref_id").is_none());
        assert_eq!(errors[1]["code"], "TOOL_NOT_FOUND");

        let (out, is_error) = run(
            &app,
            &key,
            json!({ "executions": executions, "return": "{{step:bad.content}}" }),
        )
        .await;
        assert!(is_error);
        assert_eq!(out["code"], "BAD_REF");
        assert!(
            out.get("ref_id").is_none(),
            "ref_id is absent when the bad ref is in return"
        );
        // A single ref returns one value.
        let (out, _) = run(&app, &key, json!({ "executions": [{ "ref_id": "x", "tool": "storage.put", "args": { "key": "c", "content": "333" } }], "return": "{{step:x.size}}" })).await;
        assert_eq!(out["result"], 3);
    }
);

db_test!(step_references_need_compose, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let results = execute(
        &app,
        &key,
        json!([
            { "ref_id": "a", "tool": "storage.put", "args": { "key": "a", "content": "1" } },
            { "ref_id": "b", "tool": "storage.get", "args": { "key": "{{step:a.key}}" } }
        ]),
    )
    .await;
    assert!(results[0]["result"].is_object());
    assert_eq!(results[1]["code"], "BAD_REF");
    assert!(results[1]["error"].as_str().unwrap().contains("compose"));
});

db_test!(
    compose_intermediates_are_not_capped_but_the_answer_is,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "big", "content": "x".repeat(70_000) } }])).await;
        let (out, is_error) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "big", "tool": "storage.get", "args": { "key": "big" } },
            { "ref_id": "copy", "tool": "storage.put", "args": { "key": "copy", "content": "{{step:big.content}}" } }
        ], "return": { "copied": "{{step:copy.size}}" } }),
    )
    .await;
        assert!(!is_error, "{out}");
        assert_eq!(out["result"]["copied"], 70_000);
        let (out, is_error) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [{ "ref_id": "big", "tool": "storage.get", "args": { "key": "big" } }] }),
    )
    .await;
        assert!(is_error);
        assert_eq!(out["code"], "RESULT_TOO_LARGE");
    }
);

db_test!(every_compose_step_passes_the_whole_pipeline, |backend| {
    let app = app!(backend);
    let (admin, key) = admin_with_key(&app).await;
    let (out, is_error) = run(
        &app,
        &key,
        json!({ "compose": true, "executions": [
            { "ref_id": "a", "tool": "storage.put", "args": { "key": "a", "content": "1" } },
            { "ref_id": "b", "tool": "storage.put", "args": { "key": "{{step:a.size}}", "content": "x" } }
        ] }),
    )
    .await;
    assert!(is_error);
    assert_eq!(
        out["code"], "INVALID_ARGUMENTS",
        "the number 1 fails the key's string schema: {out}"
    );
    assert_eq!(out["errors"][0]["path"], "/key");
    app.wb.flush_records().await;
    let rows = store::audit::list(
        app.wb.db().pool(),
        &admin.project_id,
        &Default::default(),
        10,
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "each step leaves its audit row");
});
