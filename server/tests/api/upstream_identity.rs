//! Stable tool identity across refresh (issue 27): an exposed upstream tool name belongs to the
//! server that exposed it first, whatever the servers are called and in whatever order they
//! are read, across refreshes, restarts and instances; a tool that would take a name another
//! server owns is held for review with the reason. And a change of a tool's annotations is held
//! for review like a change of its description or schema.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use crate::fake_upstream::{self, FakeUpstream};
use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

async fn get(app: &TestApp, key: &str, path: &str) -> Value {
    app.http()
        .get(app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Registers `up` as `name` with `extra` fields; returns its id.
async fn register(app: &TestApp, key: &str, name: &str, up: &FakeUpstream, extra: Value) -> String {
    let mut body =
        json!({ "name": name, "transport": "http", "url": up.url(), "timeout_ms": 5000 });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, out) = post(app, key, "/v1/mcp/servers", body).await;
    assert_eq!(status, 201, "{out}");
    out["id"].as_str().unwrap().to_owned()
}

async fn refresh(app: &TestApp, key: &str, id: &str) -> Value {
    let (status, out) = post(
        app,
        key,
        &format!("/v1/mcp/servers/{id}/refresh"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    out
}

async fn review(app: &TestApp, key: &str, id: &str, tool: &str) -> Value {
    let tools = get(app, key, &format!("/v1/mcp/servers/{id}/tools")).await;
    tools["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("no {tool} in {tools}"))
        .clone()
}

fn calls(up: &FakeUpstream) -> usize {
    up.state.calls.load(Ordering::SeqCst)
}

/// Calls `shared_echo` and `shared_add` once each on `app` and asserts they ran on `owner`
/// (and nothing reached `other`).
async fn both_reach(
    app: &TestApp,
    key: &str,
    owner: &FakeUpstream,
    other: &FakeUpstream,
    why: &str,
) {
    let (before_owner, before_other) = (calls(owner), calls(other));
    let out = execute(
        app,
        key,
        json!([
            { "tool": "shared_echo", "args": { "message": "for the owner" } },
            { "tool": "shared_add", "args": { "a": 2, "b": 3 } },
        ]),
    )
    .await;
    assert_eq!(out[0]["result"], "Echo: for the owner", "{why}: {}", out[0]);
    assert_eq!(out[1]["result"], json!({ "sum": 5 }), "{why}: {}", out[1]);
    assert_eq!(
        (calls(owner), calls(other)),
        (before_owner + 2, before_other),
        "{why}: the calls reached the owner only"
    );
}

db_test!(
    a_later_server_whose_name_sorts_first_never_takes_a_tool_name_another_server_owns,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let first = fake_upstream::start().await;
        let later = fake_upstream::start().await;
        later.keep_only(&[]);
        later.set_tool(
            "translate",
            "Translate text.",
            json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
            true,
        );
        let zeta = register(
            &app,
            &key,
            "zeta",
            &first,
            json!({ "tool_prefix": "shared_" }),
        )
        .await;
        let alpha = register(
            &app,
            &key,
            "alpha",
            &later,
            json!({ "tool_prefix": "shared_", "auto_approve": true }),
        )
        .await;
        both_reach(&app, &key, &first, &later, "before any collision").await;

        // The later server's upstream starts offering tools whose prefixed names zeta owns; alpha
        // sorts first and auto-approves, and still does not get them.
        later.set_tool("echo", "Echo a message back.", json!({ "type": "object", "properties": { "message": { "type": "string" } }, "required": ["message"] }), true);
        later.set_tool("add", "Add two numbers.", json!({ "type": "object", "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } } }), false);
        let refreshed = refresh(&app, &key, &alpha).await;
        both_reach(
            &app,
            &key,
            &first,
            &later,
            "after the other server's refresh",
        )
        .await;
        assert_eq!(
            refreshed["tool_counts"],
            json!({ "available": 1, "unavailable": 0, "pending_review": 2 }),
            "{refreshed}"
        );
        assert_eq!(
            refreshed["tools"],
            json!(["shared_translate"]),
            "{refreshed}"
        );
        let tool = get(&app, &key, "/v1/tools/shared_echo").await;
        assert_eq!(tool["source"], format!("mcp:{zeta}"), "{tool}");

        // Held for review with the reason, and approving it is refused while the name is taken.
        let echo = review(&app, &key, &alpha, "echo").await;
        assert_eq!(echo["status"], "pending_review", "{echo}");
        let reason = echo["collision"]
            .as_str()
            .unwrap_or_else(|| panic!("no collision in {echo}"));
        assert!(
            reason.contains("zeta") && reason.contains("shared_echo"),
            "{reason}"
        );
        let (status, out) = post(
            &app,
            &key,
            &format!("/v1/mcp/servers/{alpha}/approve"),
            json!({ "tools": ["echo"] }),
        )
        .await;
        assert_eq!(status, 409, "{out}");
        assert!(
            out["error"]["message"].as_str().unwrap().contains("zeta"),
            "{out}"
        );
        assert!(
            review(&app, &key, &zeta, "echo").await["collision"].is_null(),
            "the owner's tool collides with nothing"
        );

        // Stable across the owner's own refresh, another refresh of alpha, a restart (an instance
        // starting on the same database) and another instance's reload.
        refresh(&app, &key, &zeta).await;
        refresh(&app, &key, &alpha).await;
        both_reach(&app, &key, &first, &later, "after both refreshed").await;
        let b = app!(
            backend,
            Options {
                database_url: Some(app.database_url.clone()),
                data_dir: Some(app.data_dir.clone()),
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        both_reach(
            &b,
            &key,
            &first,
            &later,
            "on an instance started afterwards",
        )
        .await;
        later.set_tool("echo", "Echo a message back, louder.", json!({ "type": "object", "properties": { "message": { "type": "string" } }, "required": ["message"] }), true);
        refresh(&app, &key, &alpha).await;
        b.wb.upstreams().reload_all().await.unwrap();
        both_reach(
            &b,
            &key,
            &first,
            &later,
            "on the other instance after its reload",
        )
        .await;

        // The collision goes away with its owner; the held tool then follows the review rule: never
        // approved, it waits for an admin, and only then does the name reach alpha.
        let res = app
            .http()
            .delete(app.url(&format!("/v1/mcp/servers/{zeta}")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 204);
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "shared_echo", "args": { "message": "x" } }]),
        )
        .await;
        assert_eq!(
            out[0]["code"], "UNAVAILABLE",
            "held until reviewed: {}",
            out[0]
        );
        assert!(
            out[0]["error"]
                .as_str()
                .unwrap()
                .contains("held for review: it is new on the MCP server alpha"),
            "{}",
            out[0]
        );
        let echo = review(&app, &key, &alpha, "echo").await;
        assert_eq!(
            (echo["status"].as_str(), echo["collision"].as_str()),
            (Some("pending_review"), None),
            "{echo}"
        );
        let (status, out) = post(
            &app,
            &key,
            &format!("/v1/mcp/servers/{alpha}/approve"),
            json!({ "tools": ["echo"] }),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let before = calls(&later);
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "shared_echo", "args": { "message": "now alpha" } }]),
        )
        .await;
        assert_eq!(out[0]["result"], "Echo: now alpha", "{}", out[0]);
        assert_eq!(calls(&later), before + 1);
    }
);

db_test!(
    a_tool_held_for_review_keeps_its_name_against_a_new_registration,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let first = fake_upstream::start().await;
        let later = fake_upstream::start().await;
        later.keep_only(&["echo"]);
        let zeta = register(
            &app,
            &key,
            "zeta",
            &first,
            json!({ "tool_prefix": "shared_" }),
        )
        .await;
        // zeta's echo changes and is held for review: out of the catalog, but the name is zeta's.
        first.set_tool("echo", "Echo a message back (v2).", json!({ "type": "object", "properties": { "message": { "type": "string" } }, "required": ["message"] }), true);
        refresh(&app, &key, &zeta).await;
        assert_eq!(
            review(&app, &key, &zeta, "echo").await["status"],
            "pending_review"
        );
        let (status, out) = post(
            &app,
            &key,
            "/v1/mcp/servers",
            json!({ "name": "alpha", "url": later.url(), "tool_prefix": "shared_" }),
        )
        .await;
        assert_eq!(
            status, 409,
            "a registration does not take the name of a tool under review: {out}"
        );
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("shared_echo"),
            "{out}"
        );
        let (status, _) = post(
            &app,
            &key,
            &format!("/v1/mcp/servers/{zeta}/approve"),
            json!({ "tools": ["echo"] }),
        )
        .await;
        assert_eq!(status, 200);
        both_reach(
            &app,
            &key,
            &first,
            &later,
            "the approved tool is back under its own name",
        )
        .await;
    }
);

db_test!(
    an_annotation_change_is_held_for_review_like_a_description_change,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        up.set_annotations("add", json!({ "destructiveHint": true }));
        let id = register(&app, &key, "fake", &up, json!({})).await;
        let add = get(&app, &key, "/v1/tools/fake.add").await;
        assert_eq!(add["side_effects"], "destructive");

        // Nothing changed: a refresh holds nothing.
        let refreshed = refresh(&app, &key, &id).await;
        assert_eq!(
            refreshed["changes"],
            json!({ "added": [], "removed": [], "changed": [] }),
            "{refreshed}"
        );
        assert_eq!(refreshed["tool_counts"]["pending_review"], 0, "{refreshed}");

        // A destructive tool turning itself read-only (retryable, unconfirmed) waits for an admin.
        up.set_annotations(
            "add",
            json!({ "readOnlyHint": true, "idempotentHint": true }),
        );
        let refreshed = refresh(&app, &key, &id).await;
        assert_eq!(
            refreshed["changes"]["changed"],
            json!(["add"]),
            "{refreshed}"
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.add", "args": { "a": 1, "b": 1 } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "UNAVAILABLE", "held for review: {}", out[0]);
        // Listed with what an admin approved: still destructive, not what it now says it is.
        let listed: Value = app
            .http()
            .get(app.url("/v1/tools/fake.add"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (listed["status"].as_str(), listed["side_effects"].as_str()),
            (Some("unavailable"), Some("destructive")),
            "{listed}"
        );
        let held = review(&app, &key, &id, "add").await;
        assert_eq!(held["status"], "pending_review", "{held}");
        assert_eq!(
            held["annotations"],
            json!({ "readOnlyHint": true, "idempotentHint": true }),
            "{held}"
        );
        assert_eq!(
            held["approved_annotations"],
            json!({ "destructiveHint": true }),
            "{held}"
        );
        let (status, out) = post(
            &app,
            &key,
            &format!("/v1/mcp/servers/{id}/approve"),
            json!({ "tools": ["add"] }),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let add = get(&app, &key, "/v1/tools/fake.add").await;
        assert_eq!(add["side_effects"], "none", "approved as it is now");

        // Any of the four hints counts, openWorldHint too.
        up.set_annotations(
            "echo",
            json!({ "readOnlyHint": true, "openWorldHint": false }),
        );
        let refreshed = refresh(&app, &key, &id).await;
        assert_eq!(
            refreshed["changes"]["changed"],
            json!(["echo"]),
            "{refreshed}"
        );
        assert_eq!(
            review(&app, &key, &id, "echo").await["status"],
            "pending_review"
        );
    }
);

db_test!(
    fingerprints_stored_before_annotations_joined_them_hold_only_what_changed,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        let id = register(&app, &key, "fake", &up, json!({})).await;
        // The rows as the previous release stored them: fingerprints of description and schemas
        // only, every tool approved as last seen.
        let pool = app.wb.db().pool();
        for mut row in workbench_core::store::mcp_servers::list_tools(pool, &id)
            .await
            .unwrap()
        {
            let legacy = workbench_core::crypto::sha256_hex(
                format!(
                    "{}\u{1f}{}\u{1f}{}",
                    row.description,
                    row.input_schema,
                    row.output_schema.as_deref().unwrap_or("")
                )
                .as_bytes(),
            );
            row.fingerprint = legacy.clone();
            row.approved_fingerprint = Some(legacy);
            workbench_core::store::mcp_servers::upsert_tool(pool, &row)
                .await
                .unwrap();
        }
        // The first refresh after the upgrade: only the tool whose annotations changed since it was
        // last seen is held; the others stay available and are not reported as changed.
        up.set_annotations("add", json!({ "readOnlyHint": true }));
        let refreshed = refresh(&app, &key, &id).await;
        assert_eq!(
            refreshed["changes"],
            json!({ "added": [], "removed": [], "changed": ["add"] }),
            "{refreshed}"
        );
        assert_eq!(
            refreshed["tool_counts"],
            json!({ "available": 4, "unavailable": 0, "pending_review": 1 }),
            "{refreshed}"
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.echo", "args": { "message": "still" } }]),
        )
        .await;
        assert_eq!(out[0]["result"], "Echo: still");
        // And from then on nothing unchanged is held.
        let refreshed = refresh(&app, &key, &id).await;
        assert_eq!(refreshed["changes"]["changed"], json!([]), "{refreshed}");
        assert_eq!(refreshed["tool_counts"]["available"], 4, "{refreshed}");
    }
);
