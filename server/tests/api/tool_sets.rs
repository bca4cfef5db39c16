//! Tool sets (issue 33): a curated set of tools at its own MCP endpoint, `/mcp/sets/{slug}`,
//! with exposed names, descriptions and fixed values; managing sets over REST; keys limited to
//! sets; policy, confirmation and audit on set calls. The tools come from a real MCP server on
//! loopback (the Rust SDK's, `fake_upstream`).

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::fake_upstream::{self, FakeUpstream};
use crate::helpers::{admin_with_key, execute, mcp_request, Options, TestApp};
use crate::policies::send;
use crate::{app, db_test};

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    send(app, key, reqwest::Method::POST, path, Some(body)).await
}

pub(crate) async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    send(app, key, reqwest::Method::GET, path, None).await
}

/// An MCP request to a set endpoint: (HTTP status, JSON-RPC answer or null).
pub(crate) async fn set_rpc(
    app: &TestApp,
    key: &str,
    slug: &str,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url(&format!("/mcp/sets/{slug}")))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let sse = res
        .headers()
        .get("content-type")
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    let body = res.text().await.unwrap_or_default();
    if !sse {
        return (status, serde_json::from_str(&body).unwrap_or(Value::Null));
    }
    // An initialize opens a session, whose answers come as an event stream (as the client's
    // Accept allows): the event carrying the answer.
    let answer = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id") == Some(&json!(1)))
        .unwrap_or(Value::Null);
    (status, answer)
}

/// The names a set endpoint lists for `key`.
async fn listed(app: &TestApp, key: &str, slug: &str) -> Vec<String> {
    let (status, out) = set_rpc(app, key, slug, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{out}");
    out["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {out}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Calls a set's tool: (the result's JSON text parsed, or the text itself; is_error).
async fn set_call(app: &TestApp, key: &str, slug: &str, tool: &str, args: Value) -> (Value, bool) {
    let (status, out) = set_rpc(
        app,
        key,
        slug,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let result = &out["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {out}"));
    let value = serde_json::from_str(text).unwrap_or_else(|_| json!(text));
    (value, result["isError"].as_bool().unwrap_or(false))
}

/// The support set: the upstream's `add` as `sum` with `a` fixed at 40 and its own
/// description, and its `echo` as is.
fn support_set() -> Value {
    json!({
        "slug": "support",
        "name": "Support desk",
        "description": "Tools for the support desk.",
        "tools": [
            { "tool": "fake.add", "name": "sum", "description": "Add 40 to a number.", "fixed": { "a": 40 } },
            { "tool": "fake.echo" }
        ]
    })
}

/// An app on loopback with the fake upstream registered as `fake` and the support set.
async fn with_set(
    backend: crate::helpers::Backend,
) -> Option<(TestApp, String, FakeUpstream, Value)> {
    let app = crate::helpers::spawn_app_with(backend, Options::loopback()).await?;
    let (_, key) = admin_with_key(&app).await;
    let out = execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "FAKE_TOKEN", "value": "upstream-token-7f3a9c" } }])).await;
    assert!(out[0].get("result").is_some(), "{out:?}");
    let up = fake_upstream::start().await;
    let (status, out) = post(&app, &key, "/v1/mcp/servers", json!({ "name": "fake", "transport": "http", "url": up.url(), "auth": { "type": "bearer", "secret_ref": "FAKE_TOKEN" }, "timeout_ms": 5000 })).await;
    assert_eq!(status, 201, "{out}");
    let (status, set) = post(&app, &key, "/v1/tool-sets", support_set()).await;
    assert_eq!(status, 201, "{set}");
    Some((app, key, up, set))
}

db_test!(
    a_set_endpoint_lists_only_its_tools_under_their_exposed_names,
    |backend| {
        let Some((app, key, _up, set)) = with_set(backend).await else {
            return;
        };
        assert_eq!(set["object"], "tool_set");
        assert!(set["id"].as_str().unwrap().starts_with("tset_"));
        assert_eq!(set["endpoint"], app.url("/mcp/sets/support"));
        let (status, out) = set_rpc(&app, &key, "support", "tools/list", json!({})).await;
        assert_eq!(status, 200, "{out}");
        let tools = out["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["sum", "fake.echo"]);
        let sum = &tools[0];
        assert_eq!(sum["description"], "Add 40 to a number.");
        assert_eq!(
            sum["inputSchema"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["b"],
            "the fixed argument is not shown: {sum}"
        );
        assert_eq!(tools[1]["description"], "Echo a message back.");
        assert_eq!(tools[1]["annotations"]["readOnlyHint"], true);

        // initialize names the set and gives its description as instructions.
        let (status, init) = set_rpc(&app, &key, "support", "initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } })).await;
        assert_eq!(status, 200, "{init}");
        assert_eq!(
            init["result"]["serverInfo"]["name"],
            "workbench: Support desk"
        );
        assert_eq!(
            init["result"]["instructions"],
            "Tools for the support desk."
        );

        // /mcp is still the nine meta-tools.
        let res = mcp_request(&app, &key, "tools/list", json!({})).await;
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 9);

        // A set that does not exist is 404 in the API's error shape, before any MCP.
        let (status, out) = set_rpc(&app, &key, "nope", "tools/list", json!({})).await;
        assert_eq!(status, 404, "{out}");
        assert!(
            out["error"].is_object() || out["error"].is_string(),
            "{out}"
        );
    }
);

db_test!(
    a_set_call_gets_the_fixed_values_and_nothing_outside_the_set_runs,
    |backend| {
        let Some((app, key, up, _)) = with_set(backend).await else {
            return;
        };
        let (out, is_error) = set_call(&app, &key, "support", "sum", json!({ "b": 2 })).await;
        assert!(!is_error, "{out}");
        assert_eq!(out, json!({ "sum": 42 }));

        // The caller cannot set a fixed argument.
        let calls = up.state.calls.load(std::sync::atomic::Ordering::SeqCst);
        let (out, is_error) =
            set_call(&app, &key, "support", "sum", json!({ "a": 1, "b": 2 })).await;
        assert!(is_error);
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        // A tool of the catalog the set does not list, by either name, is not found.
        for name in ["fake.whoami", "fake.add", "execute_tools"] {
            let (out, is_error) = set_call(&app, &key, "support", name, json!({})).await;
            assert!(is_error, "{name}: {out}");
            assert_eq!(out["code"], "TOOL_NOT_FOUND", "{name}: {out}");
        }
        assert_eq!(
            up.state.calls.load(std::sync::atomic::Ordering::SeqCst),
            calls,
            "nothing reached the upstream"
        );

        // The audit row names the tool and the set.
        let (status, audit) = get(&app, &key, "/v1/audit?tool=fake.add").await;
        assert_eq!(status, 200, "{audit}");
        let entries = audit["entries"]
            .as_array()
            .or(audit["data"].as_array())
            .unwrap_or_else(|| panic!("{audit}"));
        let row = entries
            .iter()
            .find(|e| e["status"] == "succeeded" || e["status"] == "ok")
            .unwrap_or_else(|| panic!("a finished call in {audit}"));
        assert_eq!(row["tool_set"], "support", "{row}");
        assert_eq!(row["surface"], "mcp");
        // The audit log filters by the set; a call outside it is not listed there.
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.add", "args": { "a": 1, "b": 1 } }]),
        )
        .await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let (_, all) = get(&app, &key, "/v1/audit?tool=fake.add").await;
        let (_, through) = get(&app, &key, "/v1/audit?tool=fake.add&tool_set=support").await;
        let count = |v: &Value| {
            v["entries"]
                .as_array()
                .or(v["data"].as_array())
                .map(Vec::len)
                .unwrap_or(0)
        };
        assert_eq!(count(&all), count(&through) + 1, "{all} / {through}");
        assert!(through["entries"]
            .as_array()
            .or(through["data"].as_array())
            .unwrap()
            .iter()
            .all(|e| e["tool_set"] == "support"));
        // The portal's audit page says so too.
        let b = app.browser();
        b.sign_in("ada@example.com", crate::helpers::PASSWORD).await;
        let html = b.get("/audit?tool=fake.add").await.text().await.unwrap();
        assert!(
            html.contains("mcp · set support"),
            "the audit page names the set"
        );
    }
);

db_test!(
    a_key_limited_to_a_set_reaches_that_set_and_nothing_else,
    |backend| {
        let Some((app, key, _up, set)) = with_set(backend).await else {
            return;
        };
        let (status, other) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "other", "name": "Other", "tools": [{ "tool": "fake.whoami" }] }),
        )
        .await;
        assert_eq!(status, 201, "{other}");
        let (status, made) = post(
            &app,
            &key,
            "/v1/api-keys",
            json!({ "name": "desk", "tool_sets": ["support"] }),
        )
        .await;
        assert_eq!(status, 201, "{made}");
        assert_eq!(made["tool_sets"], json!(["support"]));
        let limited = made["key"].as_str().unwrap().to_owned();
        let key_id = made["id"].as_str().unwrap().to_owned();

        assert_eq!(
            listed(&app, &limited, "support").await,
            ["sum", "fake.echo"]
        );
        let (out, is_error) = set_call(&app, &limited, "support", "sum", json!({ "b": 1 })).await;
        assert!(!is_error, "{out}");
        // Another set answers as if it did not exist.
        let (status, _) = set_rpc(&app, &limited, "other", "tools/list", json!({})).await;
        assert_eq!(status, 404);
        // /mcp, REST tools and management are refused; who it is, not.
        let res = mcp_request(&app, &limited, "tools/list", json!({})).await;
        assert_eq!(res.status(), 403);
        let body: Value = res.json().await.unwrap();
        assert!(body.to_string().contains("limited to tool sets"), "{body}");
        for path in ["/v1/tools", "/v1/tool-sets", "/v1/audit", "/v1/api-keys"] {
            let (status, out) = get(&app, &limited, path).await;
            assert_eq!(status, 403, "{path}: {out}");
        }
        let (status, _) = post(
            &app,
            &limited,
            "/v1/tools/invoke",
            json!({ "tool": "fake.whoami", "arguments": {} }),
        )
        .await;
        assert_eq!(status, 403);
        let (status, me) = get(&app, &limited, "/v1/me").await;
        assert_eq!(status, 200, "{me}");

        // A set a key is limited to cannot be deleted.
        let set_id = set["id"].as_str().unwrap();
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::DELETE,
            &format!("/v1/tool-sets/{set_id}"),
            None,
        )
        .await;
        assert_eq!(status, 409, "{out}");
        assert!(out.to_string().contains(&key_id), "{out}");

        // Lifting the limit applies to the key's next request.
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            Some(json!({ "tool_sets": null })),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["tool_sets"], Value::Null);
        let res = mcp_request(&app, &limited, "tools/list", json!({})).await;
        assert_eq!(res.status(), 200);
        // And limiting it again, too.
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            Some(json!({ "tool_sets": ["other"] })),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(listed(&app, &limited, "other").await, ["fake.whoami"]);
        let (status, _) = set_rpc(&app, &limited, "support", "tools/list", json!({})).await;
        assert_eq!(status, 404);

        // A key cannot be limited to a set that does not exist, and a refused create leaves
        // no key behind.
        let before = get(&app, &key, "/v1/api-keys").await.1["data"]
            .as_array()
            .unwrap()
            .len();
        let (status, out) = post(
            &app,
            &key,
            "/v1/api-keys",
            json!({ "name": "x", "tool_sets": ["nope"] }),
        )
        .await;
        assert_eq!(status, 422, "{out}");
        assert!(!out.to_string().contains("key_"), "{out}");
        let after = get(&app, &key, "/v1/api-keys").await.1["data"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(before, after);
        let (status, _) = post(
            &app,
            &key,
            "/v1/api-keys",
            json!({ "name": "x", "tool_sets": [] }),
        )
        .await;
        assert_eq!(status, 422);
    }
);

db_test!(
    tool_sets_are_managed_by_admins_and_checked_whole,
    |backend| {
        let Some((app, key, _up, set)) = with_set(backend).await else {
            return;
        };
        let member = app.user("mo@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        let (status, _) = post(
            &app,
            &member_key,
            "/v1/tool-sets",
            json!({ "slug": "mine", "name": "Mine", "tools": [{ "tool": "fake.echo" }] }),
        )
        .await;
        assert_eq!(status, 403);
        // A member sees the sets and their endpoints, not the fixed values.
        let (status, list) = get(&app, &member_key, "/v1/tool-sets").await;
        assert_eq!(status, 200, "{list}");
        let seen = &list["data"][0];
        assert_eq!(seen["slug"], "support");
        assert_eq!(seen["tools"][0]["fixed"], Value::Null, "{seen}");
        assert_eq!(seen["tools"][0]["fixed_arguments"], json!(["a"]));
        // The admin sees them.
        let (_, list) = get(&app, &key, "/v1/tool-sets").await;
        assert_eq!(list["data"][0]["tools"][0]["fixed"], json!({ "a": 40 }));

        let bad: &[(&str, Value)] = &[
            (
                "slug",
                json!({ "slug": "Bad Slug", "name": "x", "tools": [{ "tool": "fake.echo" }] }),
            ),
            (
                "unknown tool",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.nope" }] }),
            ),
            ("no tools", json!({ "slug": "x", "name": "x", "tools": [] })),
            (
                "same name twice",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.echo", "name": "e" }, { "tool": "fake.add", "name": "e" }] }),
            ),
            (
                "bad exposed name",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.echo", "name": "has space" }] }),
            ),
            (
                "fixed unknown",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.add", "fixed": { "c": 1 } }] }),
            ),
            (
                "fixed wrong type",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.add", "fixed": { "a": "forty" } }] }),
            ),
            (
                "empty name",
                json!({ "slug": "x", "name": " ", "tools": [{ "tool": "fake.echo" }] }),
            ),
            (
                "unknown field",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.echo" }], "public": true }),
            ),
            (
                "unknown entry field",
                json!({ "slug": "x", "name": "x", "tools": [{ "tool": "fake.echo", "args": {} }] }),
            ),
            ("array body", json!([{ "slug": "x" }])),
            (
                "string tools",
                json!({ "slug": "x", "name": "x", "tools": "fake.echo" }),
            ),
        ];
        for (what, body) in bad {
            let (status, out) = post(&app, &key, "/v1/tool-sets", body.clone()).await;
            assert!(status == 422 || status == 400, "{what}: {status} {out}");
            assert!(
                out["error"].is_object() || out["error"].is_string(),
                "{what}: {out}"
            );
        }
        let (_, list) = get(&app, &key, "/v1/tool-sets").await;
        assert_eq!(
            list["data"].as_array().unwrap().len(),
            1,
            "nothing was stored"
        );

        let (status, out) = post(&app, &key, "/v1/tool-sets", support_set()).await;
        assert_eq!(status, 409, "{out}");

        // PUT replaces tools, keeps the slug.
        let id = set["id"].as_str().unwrap();
        let mut changed = support_set();
        changed["tools"] = json!([{ "tool": "fake.echo", "name": "say" }]);
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::PUT,
            &format!("/v1/tool-sets/{id}"),
            Some(changed.clone()),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(listed(&app, &key, "support").await, ["say"]);
        changed["slug"] = json!("renamed");
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::PUT,
            &format!("/v1/tool-sets/{id}"),
            Some(changed),
        )
        .await;
        assert_eq!(status, 422, "{out}");
        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::PUT,
            "/v1/tool-sets/tset_none",
            Some(support_set()),
        )
        .await;
        assert_eq!(status, 404);

        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::DELETE,
            &format!("/v1/tool-sets/{id}"),
            None,
        )
        .await;
        assert_eq!(status, 204);
        let (status, _) = set_rpc(&app, &key, "support", "tools/list", json!({})).await;
        assert_eq!(status, 404, "a deleted set's endpoint is gone");
    }
);

db_test!(policy_and_confirmation_apply_on_set_endpoints, |backend| {
    let Some((app, key, up, _)) = with_set(backend).await else {
        return;
    };
    let (status, policy) = post(&app, &key, "/v1/policies", json!({ "name": "desk", "tool_allowlist": { "mode": "allowlist", "allow": ["fake.*"], "deny": ["fake.echo"], "require_confirmation": ["fake.add"] } })).await;
    assert_eq!(status, 201, "{policy}");
    let (status, made) = post(
        &app,
        &key,
        "/v1/api-keys",
        json!({ "name": "desk", "policy_id": policy["id"], "tool_sets": ["support"] }),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let agent = made["key"].as_str().unwrap();

    // The denied tool is not listed and does not run.
    assert_eq!(listed(&app, agent, "support").await, ["sum"]);
    let calls = up.state.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (out, is_error) = set_call(
        &app,
        agent,
        "support",
        "fake.echo",
        json!({ "message": "hi" }),
    )
    .await;
    assert!(is_error);
    assert_eq!(out["code"], "NOT_ALLOWED", "{out}");
    // The gated one is held for a person, with the fixed value in the held call.
    let (out, is_error) = set_call(&app, agent, "support", "sum", json!({ "b": 2 })).await;
    assert!(is_error, "{out}");
    assert_eq!(out["code"], "AWAITING_CONFIRMATION", "{out}");
    assert_eq!(
        up.state.calls.load(std::sync::atomic::Ordering::SeqCst),
        calls
    );
    let id = out["confirmation_id"]
        .as_str()
        .or(out["details"]["confirmation_id"].as_str())
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    let (status, decided) = post(
        &app,
        &key,
        &format!("/v1/tools/confirmations/{id}"),
        json!({ "decision": "approve" }),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert!(
        decided.to_string().contains("42"),
        "the approved call ran with a = 40: {decided}"
    );
});

db_test!(
    a_made_up_token_or_key_is_refused_at_a_set_endpoint,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let (status, out) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "vault", "name": "Vault", "tools": [{ "tool": "vault_list" }] }),
        )
        .await;
        assert_eq!(status, 201, "{out}");
        let (status, _) = set_rpc(
            &app,
            "wbat_not_a_real_token",
            "vault",
            "tools/list",
            json!({}),
        )
        .await;
        assert_eq!(status, 401);
        let (status, _) = set_rpc(&app, "not-a-key", "vault", "tools/list", json!({})).await;
        assert_eq!(status, 401);
        assert_eq!(listed(&app, &key, "vault").await, ["vault_list"]);
    }
);

db_test!(
    the_official_python_sdk_lists_and_calls_a_sets_tools,
    |backend| {
        let Some((app, key, _up, _)) = with_set(backend).await else {
            return;
        };
        let report = crate::mcp_sdk::run_client(
            app.url("/mcp/sets/support"),
            key,
            json!([["sum", { "b": 2 }]]),
        )
        .await;
        if report.is_null() {
            return;
        }
        assert_eq!(report["server"]["name"], "workbench: Support desk");
        let names: Vec<&str> = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["sum", "fake.echo"]);
        assert_eq!(report["calls"][0]["structured"], json!({ "sum": 42 }));
        assert_eq!(report["calls"][0]["is_error"], false);
    }
);

db_test!(
    the_portal_creates_and_edits_a_set_and_shows_its_endpoint_and_client_configuration,
    |backend| {
        let Some((app, _key, _up, _)) = with_set(backend).await else {
            return;
        };
        let admin = app.browser();
        admin
            .sign_in("ada@example.com", crate::helpers::PASSWORD)
            .await;
        let res = admin
            .call(
                "save_tool_set",
                &[
                    ("slug", "triage"),
                    ("name", "Triage"),
                    ("description", "Sort incoming work."),
                    ("tools", "fake.echo as say\n\nfake.whoami\n"),
                ],
            )
            .await;
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let page: Value = admin
            .call("tool_sets_page", &[])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(page["can_manage"], true);
        let triage = page["sets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["slug"] == "triage")
            .unwrap_or_else(|| panic!("{page}"));
        assert_eq!(triage["endpoint"], app.url("/mcp/sets/triage"));
        let names: Vec<&str> = triage["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["say", "fake.whoami"]);

        // Editing the support set's tool list keeps the description and fixed value of the
        // tool it still lists.
        let support = page["sets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["slug"] == "support")
            .unwrap();
        let id = support["id"].as_str().unwrap();
        let res = admin
            .call(
                "save_tool_set",
                &[
                    ("id", id),
                    ("slug", "support"),
                    ("name", "Support"),
                    ("description", ""),
                    ("tools", "fake.add as sum"),
                ],
            )
            .await;
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let (_, set) = get(&app, &_key, &format!("/v1/tool-sets/{id}")).await;
        assert_eq!(
            set["tools"],
            json!([{ "tool": "fake.add", "name": "sum", "description": "Add 40 to a number.", "fixed": { "a": 40 } }])
        );

        // A bad line is refused with the reason, and nothing changes.
        let res = admin
            .call(
                "save_tool_set",
                &[
                    ("slug", "bad"),
                    ("name", "Bad"),
                    ("description", ""),
                    ("tools", "no.such.tool"),
                ],
            )
            .await;
        assert!(!res.status().is_success());
        assert!(res.text().await.unwrap().contains("no tool named"));

        // The page renders the endpoint and the client configuration.
        let html = admin.get("/tool-sets").await.text().await.unwrap();
        assert!(
            html.contains(&app.url("/mcp/sets/triage")),
            "the endpoint is shown"
        );
        assert!(
            html.contains("mcpServers"),
            "the client configuration is shown"
        );

        // A member sees the sets but cannot change them.
        let member = app.user("mo@example.com", Role::Member).await;
        let _ = member;
        let b = app.browser();
        b.sign_in("mo@example.com", crate::helpers::PASSWORD).await;
        let page: Value = b.call("tool_sets_page", &[]).await.json().await.unwrap();
        assert_eq!(page["can_manage"], false);
        let res = b
            .call(
                "save_tool_set",
                &[
                    ("slug", "mine"),
                    ("name", "Mine"),
                    ("description", ""),
                    ("tools", "fake.echo"),
                ],
            )
            .await;
        assert_eq!(res.status(), 403);
    }
);

/// The body of the first `curl … /v1/tool-sets … -d '<json>'` in a document of the repository.
fn documented_set(doc: &str) -> Value {
    documented_body(doc, "/v1/tool-sets")
}

/// The body of the first `curl … <route>" … -d '<json>'` in a document of the repository.
pub fn documented_body(doc: &str, route: &str) -> Value {
    let path = format!("{}/../{doc}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let from = text
        .find(&format!("{route}\""))
        .unwrap_or_else(|| panic!("{doc} shows a curl of {route}"));
    let rest = &text[from..];
    let start = rest.find("-d '").unwrap() + 4;
    let end = start + rest[start..].find('\'').unwrap();
    let body: String = rest[start..end].lines().map(str::trim).collect();
    serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("{doc}'s example is not JSON: {e}: {body}"))
}

db_test!(
    the_tool_sets_the_docs_show_are_accepted_as_written,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for doc in ["README.md", "docs/features.md"] {
            let body = documented_set(doc);
            let (status, out) = post(&app, &key, "/v1/tool-sets", body.clone()).await;
            assert_eq!(status, 201, "{doc}: {out}");
            let exposed: Vec<String> = body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    t["name"]
                        .as_str()
                        .or(t["tool"].as_str())
                        .unwrap()
                        .to_owned()
                })
                .collect();
            assert_eq!(
                listed(&app, &key, body["slug"].as_str().unwrap()).await,
                exposed,
                "{doc}"
            );
        }
    }
);

db_test!(
    a_sets_fast_path_answers_tools_call_exactly_as_rmcp_does,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (status, out) = post(&app, &key, "/v1/tool-sets", json!({ "slug": "store", "name": "Store", "tools": [{ "tool": "storage.get", "name": "read" }, { "tool": "storage.put", "fixed": { "content_type": "text/plain" } }] })).await;
        assert_eq!(status, 201, "{out}");
        // With an Origin header a request goes through rmcp; without one, the fast path answers.
        let origin = app.base.clone();
        let send = |body: Value, origin: Option<String>| {
            let mut req = app
                .http()
                .post(app.url("/mcp/sets/store"))
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .json(&body);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            async move {
                let res = req.send().await.unwrap();
                (res.status().as_u16(), res.json::<Value>().await.unwrap())
            }
        };
        let call = |id: i64, name: &str, args: Value| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": name, "arguments": args } });
        let cases = [
            call(1, "read", json!({ "key": "missing.txt" })),
            call(2, "read", json!({ "key": 5 })),
            call(
                3,
                "storage.put",
                json!({ "key": "a.txt", "content": "x", "content_type": "text/html" }),
            ),
            call(4, "nope", json!({})),
        ];
        for body in cases {
            let before = workbench_server::mcp::fast_path_answered();
            let fast = send(body.clone(), None).await;
            assert!(
                workbench_server::mcp::fast_path_answered() > before,
                "{body} was not answered by the fast path"
            );
            let slow = send(body.clone(), Some(origin.clone())).await;
            assert_eq!(fast, slow, "{body}");
            assert_eq!(fast.0, 200);
            assert_eq!(
                fast.1["result"]["isError"], true,
                "{body}: each case is refused: {}",
                fast.1
            );
        }
        // A call that runs: the same through both, and the fixed value is what was stored.
        let fast = send(
            call(
                5,
                "storage.put",
                json!({ "key": "b.txt", "content": "hello" }),
            ),
            None,
        )
        .await;
        assert_eq!(fast.1["result"]["isError"], false, "{}", fast.1);
        let (out, is_error) =
            set_call(&app, &key, "store", "read", json!({ "key": "b.txt" })).await;
        assert!(!is_error, "{out}");
        assert_eq!(out["content"], "hello");
        assert_eq!(out["content_type"], "text/plain", "{out}");
    }
);

db_test!(
    a_set_endpoint_answers_hostile_requests_with_errors_and_runs_nothing,
    |backend| {
        let Some((app, key, up, _)) = with_set(backend).await else {
            return;
        };
        let calls = up.state.calls.load(std::sync::atomic::Ordering::SeqCst);
        let raw = |body: Vec<u8>| {
            let req = app
                .http()
                .post(app.url("/mcp/sets/support"))
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(body);
            async move {
                let res = req.send().await.unwrap();
                (res.status().as_u16(), res.text().await.unwrap_or_default())
            }
        };
        // Larger than /mcp takes.
        let (status, _) = raw(vec![b' '; 5 * 1024 * 1024]).await;
        assert_eq!(status, 413);
        // Not JSON, and JSON that is no JSON-RPC request.
        for body in [
            &b"{not json"[..],
            b"[]",
            b"42",
            b"{\"jsonrpc\":\"2.0\",\"id\":1}",
        ] {
            let (status, text) = raw(body.to_vec()).await;
            assert!(
                (400..500).contains(&status) || text.contains("\"error\""),
                "{}: {status} {text}",
                String::from_utf8_lossy(body)
            );
        }
        // tools/call with arguments that are not an object, or without a name.
        for params in [
            json!({ "name": "sum", "arguments": [1, 2] }),
            json!({ "arguments": {} }),
            json!("sum"),
        ] {
            let (status, out) = set_rpc(&app, &key, "support", "tools/call", params.clone()).await;
            assert!(
                status >= 400 || out["error"].is_object() || out["result"]["isError"] == true,
                "{params}: {status} {out}"
            );
        }
        // A name a mile long, and arguments that do not fit the schema.
        let (out, is_error) =
            set_call(&app, &key, "support", &"x".repeat(100_000), json!({})).await;
        assert!(is_error);
        assert_eq!(out["code"], "TOOL_NOT_FOUND");
        let (out, is_error) = set_call(&app, &key, "support", "sum", json!({ "b": "two" })).await;
        assert!(is_error);
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        assert_eq!(
            up.state.calls.load(std::sync::atomic::Ordering::SeqCst),
            calls,
            "nothing reached the upstream"
        );
        // A slug that is not one, and a path below a set's.
        for path in [
            "/mcp/sets/..%2Fadmin",
            "/mcp/sets/support/extra",
            "/mcp/sets/",
        ] {
            let res = app
                .http()
                .post(app.url(path))
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
                .send()
                .await
                .unwrap();
            // Not found, or (below a set's path, where nothing is mounted) refused by the
            // portal's cross-site check: never an MCP answer.
            let status = res.status().as_u16();
            let text = res.text().await.unwrap();
            assert!(
                matches!(status, 403 | 404) && !text.contains("jsonrpc"),
                "{path}: {status} {text}"
            );
        }
    }
);

db_test!(
    a_sets_tool_that_cannot_run_says_why_and_one_that_left_the_catalog_is_not_listed,
    |backend| {
        let Some((app, key, up, _)) = with_set(backend).await else {
            return;
        };
        // The upstream stops offering echo: still listed, its call says why it cannot run.
        up.remove_tool("echo");
        let (status, servers) = get(&app, &key, "/v1/mcp/servers").await;
        assert_eq!(status, 200);
        let id = servers["data"][0]["id"].as_str().unwrap().to_owned();
        let (status, out) = post(
            &app,
            &key,
            &format!("/v1/mcp/servers/{id}/refresh"),
            json!({}),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(listed(&app, &key, "support").await, ["sum", "fake.echo"]);
        let (out, is_error) = set_call(
            &app,
            &key,
            "support",
            "fake.echo",
            json!({ "message": "hi" }),
        )
        .await;
        assert!(is_error);
        assert_eq!(out["code"], "UNAVAILABLE", "{out}");
        assert!(out.to_string().contains("no longer offers it"), "{out}");
        // The server is deleted: its tools leave the catalog and the set lists none of them;
        // calling one by the set's name finds nothing to run.
        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::DELETE,
            &format!("/v1/mcp/servers/{id}"),
            None,
        )
        .await;
        assert_eq!(status, 204);
        assert!(listed(&app, &key, "support").await.is_empty());
        let (out, is_error) = set_call(&app, &key, "support", "sum", json!({ "b": 1 })).await;
        assert!(is_error);
        assert_eq!(out["code"], "TOOL_NOT_FOUND", "{out}");
        let (_, set) = get(&app, &key, "/v1/tool-sets").await;
        assert_eq!(
            set["data"][0]["tools"].as_array().unwrap().len(),
            2,
            "the set itself is kept"
        );
    }
);

db_test!(
    a_vault_secret_in_a_fixed_value_reaches_the_tool_but_never_comes_back,
    |backend| {
        let Some((app, key, _up, _)) = with_set(backend).await else {
            return;
        };
        const SECRET: &str = "desk-secret-4b7e1d";
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "vault_set", "args": { "name": "DESK_SECRET", "value": SECRET } }]),
        )
        .await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let (status, set) = post(&app, &key, "/v1/tool-sets", json!({ "slug": "leaky", "name": "Leaky", "tools": [{ "tool": "fake.echo", "name": "say", "fixed": { "message": "{{vault:DESK_SECRET}}" } }] })).await;
        assert_eq!(status, 201, "{set}");
        // The upstream echoes what it got: the secret, which the answer carries redacted.
        let res = app
            .http()
            .post(app.url("/mcp/sets/leaky"))
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "say", "arguments": {} } }))
            .send()
            .await
            .unwrap();
        let text = res.text().await.unwrap();
        assert!(text.contains("Echo: "), "{text}");
        assert!(!text.contains(SECRET), "the secret came back: {text}");
        // Neither the set's listing nor the audit log holds the value.
        let (_, sets) = get(&app, &key, "/v1/tool-sets").await;
        assert!(sets.to_string().contains("{{vault:DESK_SECRET}}"), "{sets}");
        assert!(!sets.to_string().contains(SECRET));
        let (_, audit) = get(&app, &key, "/v1/audit?tool_set=leaky").await;
        let entries = audit["entries"]
            .as_array()
            .or(audit["data"].as_array())
            .unwrap()
            .clone();
        assert!(!entries.is_empty(), "{audit}");
        for e in entries {
            let (_, detail) = get(
                &app,
                &key,
                &format!("/v1/audit/{}", e["id"].as_str().unwrap()),
            )
            .await;
            assert!(!detail.to_string().contains(SECRET), "{detail}");
        }
    }
);
