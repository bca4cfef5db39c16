//! Tool allowlist policies (seed 004, D2, D14, D20): managing them and API keys over REST, and
//! their effect on what a key sees and runs on every surface.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, mcp_call, TestApp};
use crate::{app, db_test};

/// A REST request with a bearer key: (status, JSON body or null).
pub(crate) async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app.http().request(method, app.url(path)).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    send(app, key, reqwest::Method::POST, path, Some(body)).await
}

async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    send(app, key, reqwest::Method::GET, path, None).await
}

/// Creates a policy and returns its id.
async fn policy(app: &TestApp, key: &str, name: &str, rules: Value, default: bool) -> String {
    let (status, out) = post(
        app,
        key,
        "/v1/policies",
        json!({ "name": name, "tool_allowlist": rules, "default": default }),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    out["id"].as_str().unwrap().to_owned()
}

/// A new key of the admin's with `policy_id` attached; returns (id, secret).
async fn key_with(app: &TestApp, admin_key: &str, policy_id: Option<&str>) -> (String, String) {
    let (status, out) = post(
        app,
        admin_key,
        "/v1/api-keys",
        json!({ "name": "agent", "policy_id": policy_id }),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    (
        out["id"].as_str().unwrap().to_owned(),
        out["key"].as_str().unwrap().to_owned(),
    )
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

db_test!(
    policies_are_validated_and_only_unrestricted_admins_manage_them,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let rules = json!({ "mode": "allowlist", "allow": ["storage.*", "vault_list"], "deny": ["storage.put"], "require_confirmation": [] });
        let (status, created) = post(
            &app,
            &admin,
            "/v1/policies",
            json!({ "name": "support agent", "tool_allowlist": rules }),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        let id = created["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("pol_"));
        assert_eq!(created["object"], "policy");
        assert_eq!(created["tool_allowlist"], rules);
        assert_eq!(created["default"], false);
        assert!(
            created["created_at"].as_str().unwrap().ends_with('Z')
                && created["updated_at"].is_string()
        );

        for (bad, needle) in [
            (json!({ "mode": "open", "deny": ["a*b"] }), "\"a*b\""),
            (json!({ "mode": "open", "allow": [""] }), "empty"),
            (
                json!({ "mode": "open", "require_confirmation": ["x".repeat(65)] }),
                "longer than 64",
            ),
            (json!({ "mode": "sometimes" }), "mode"),
        ] {
            let (status, out) = post(
                &app,
                &admin,
                "/v1/policies",
                json!({ "name": "bad", "tool_allowlist": bad }),
            )
            .await;
            assert_eq!(status, 422, "{out}");
            assert!(
                out["error"]["message"].as_str().unwrap().contains(needle),
                "{needle}: {out}"
            );
        }
        let (status, out) = post(
            &app,
            &admin,
            "/v1/policies",
            json!({ "name": "support agent", "tool_allowlist": { "mode": "open" } }),
        )
        .await;
        assert_eq!(status, 409, "names are unique: {out}");
        let (_, list) = get(&app, &admin, "/v1/policies").await;
        assert_eq!(list["object"], "list");
        assert_eq!(
            list["data"].as_array().unwrap().len(),
            1,
            "nothing bad was stored: {list}"
        );

        // At most one default: setting another clears the first.
        let a = policy(&app, &admin, "a", json!({ "mode": "open" }), true).await;
        let b = policy(&app, &admin, "b", json!({ "mode": "open" }), true).await;
        assert_eq!(
            get(&app, &admin, &format!("/v1/policies/{a}")).await.1["default"],
            false
        );
        assert_eq!(
            get(&app, &admin, &format!("/v1/policies/{b}")).await.1["default"],
            true
        );
        let (status, replaced) = send(&app, &admin, reqwest::Method::PUT, &format!("/v1/policies/{a}"), Some(json!({ "name": "a2", "tool_allowlist": { "mode": "open", "deny": ["http.fetch"] } }))).await;
        assert_eq!(status, 200, "{replaced}");
        assert_eq!(
            (
                replaced["name"].as_str(),
                replaced["tool_allowlist"]["deny"][0].as_str()
            ),
            (Some("a2"), Some("http.fetch"))
        );
        let (status, _) = send(
            &app,
            &admin,
            reqwest::Method::PUT,
            &format!("/v1/policies/{a}"),
            Some(json!({ "name": "a2", "tool_allowlist": { "mode": "open", "deny": ["*x*"] } })),
        )
        .await;
        assert_eq!(status, 422);

        // A policy in use cannot go; the answer names the key.
        let (key_id, limited) = key_with(&app, &admin, Some(&id)).await;
        let (status, out) = send(
            &app,
            &admin,
            reqwest::Method::DELETE,
            &format!("/v1/policies/{id}"),
            None,
        )
        .await;
        assert_eq!(status, 409, "{out}");
        assert!(
            out["error"]["message"].as_str().unwrap().contains(&key_id),
            "{out}"
        );

        // A key with a policy attached manages nothing, even an admin's; nor does a member.
        let (status, _) = post(
            &app,
            &limited,
            "/v1/policies",
            json!({ "name": "mine", "tool_allowlist": { "mode": "open" } }),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = post(
            &app,
            &limited,
            "/v1/api-keys",
            json!({ "name": "escalate" }),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = send(
            &app,
            &limited,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            Some(json!({ "policy_id": null })),
        )
        .await;
        assert_eq!(status, 403, "a limited key cannot free itself");
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        assert_eq!(
            post(
                &app,
                &member_key,
                "/v1/policies",
                json!({ "name": "m", "tool_allowlist": { "mode": "open" } })
            )
            .await
            .0,
            403
        );
        assert_eq!(get(&app, &member_key, "/v1/policies").await.0, 403);

        // Detached, it can go.
        let (status, key) = send(
            &app,
            &admin,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            Some(json!({ "policy_id": null })),
        )
        .await;
        assert_eq!(status, 200, "{key}");
        assert_eq!(key["policy_id"], Value::Null);
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::DELETE,
                &format!("/v1/policies/{id}"),
                None
            )
            .await
            .0,
            204
        );
        assert_eq!(
            get(&app, &admin, &format!("/v1/policies/{id}")).await.0,
            404
        );
    }
);

db_test!(
    api_keys_over_rest_show_the_secret_once_and_carry_their_policy,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let pol = policy(
            &app,
            &admin,
            "read only",
            json!({ "mode": "allowlist", "allow": ["storage.get"] }),
            false,
        )
        .await;
        let (status, created) = post(
            &app,
            &admin,
            "/v1/api-keys",
            json!({ "name": "ci", "policy_id": pol }),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(
            (
                created["object"].as_str(),
                created["name"].as_str(),
                created["policy_id"].as_str()
            ),
            (Some("api_key"), Some("ci"), Some(pol.as_str()))
        );
        let secret = created["key"].as_str().unwrap().to_owned();
        let id = created["id"].as_str().unwrap().to_owned();
        let (status, list) = get(&app, &admin, "/v1/api-keys").await;
        assert_eq!(status, 200);
        assert!(
            !list.to_string().contains(&secret),
            "listings never carry a secret"
        );
        let listed = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id.as_str())
            .unwrap();
        assert_eq!(listed["policy_id"], pol.as_str());
        let (_, me) = get(&app, &secret, "/v1/me").await;
        assert_eq!(me["policy_id"], pol.as_str());

        for (body, status) in [
            (json!({ "name": "x", "policy_id": "pol_nope" }), 422),
            (json!({ "name": "" }), 422),
            (json!({ "name": "x", "extra": 1 }), 422),
        ] {
            assert_eq!(
                post(&app, &admin, "/v1/api-keys", body.clone()).await.0,
                status,
                "{body}"
            );
        }
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::PATCH,
                &format!("/v1/api-keys/{id}"),
                Some(json!({}))
            )
            .await
            .0,
            422
        );
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::PATCH,
                &format!("/v1/api-keys/{id}"),
                Some(json!({ "policy_id": "pol_nope" }))
            )
            .await
            .0,
            422
        );
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::PATCH,
                "/v1/api-keys/key_nope",
                Some(json!({ "policy_id": null }))
            )
            .await
            .0,
            404
        );

        // Revoked: the key stops working at once.
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::DELETE,
                &format!("/v1/api-keys/{id}"),
                None
            )
            .await
            .0,
            204
        );
        assert_eq!(get(&app, &secret, "/v1/me").await.0, 401);
    }
);

db_test!(
    a_keys_policy_decides_what_it_sees_and_runs_on_every_surface,
    |backend| {
        let app = app!(backend);
        let (ada, admin) = admin_with_key(&app).await;
        let pol = policy(
        &app,
        &admin,
        "storage reader",
        json!({ "mode": "allowlist", "allow": ["storage.*", "vault_list"], "deny": ["storage.put"], "require_confirmation": [] }),
        false,
    )
    .await;
        let (_, key) = key_with(&app, &admin, Some(&pol)).await;

        // Visibility (D2): only what the key may run.
        let (status, tools) = get(&app, &key, "/v1/tools").await;
        assert_eq!(status, 200);
        let mut visible = names(&tools["data"]);
        visible.sort();
        assert_eq!(
            visible,
            vec!["storage.get".to_owned(), "vault_list".to_owned()]
        );
        assert_eq!(get(&app, &key, "/v1/tools/storage.get").await.0, 200);
        assert_eq!(get(&app, &key, "/v1/tools/http.fetch").await.0, 404);
        let (found, _) = mcp_call(
            &app,
            &key,
            "search_tools",
            json!({ "query": "store a file put object", "limit": 50 }),
        )
        .await;
        let found = names(&found["tools"]);
        assert!(
            !found.contains(&"storage.put".to_owned())
                && !found.iter().any(|n| n.starts_with("http")),
            "{found:?}"
        );
        let (schema, is_error) = mcp_call(
            &app,
            &key,
            "get_tool_schema",
            json!({ "tool": "storage.put" }),
        )
        .await;
        assert!(is_error, "{schema}");
        let (all, _) = mcp_call(
            &app,
            &admin,
            "search_tools",
            json!({ "query": "store a file put object", "limit": 50 }),
        )
        .await;
        assert!(
            names(&all["tools"]).contains(&"storage.put".to_owned()),
            "the admin's own key has no policy"
        );

        // Running: a hidden tool by name answers why, on MCP, REST, /rest and in compose.
        let out = execute(
            &app,
            &key,
            json!([
                { "tool": "storage.put", "args": { "key": "k", "content": "v" } },
                { "tool": "http.fetch", "args": { "url": "https://example.org" } },
                { "tool": "storage.get", "args": { "key": "missing" } },
            ]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_ALLOWED", "{}", out[0]);
        assert_eq!(
            out[0]["rule"],
            json!({ "policy_id": pol, "list": "deny", "pattern": "storage.put" })
        );
        assert_eq!(out[1]["code"], "NOT_ALLOWED");
        assert_eq!(
            out[1]["rule"],
            json!({ "policy_id": pol, "list": "allow", "pattern": null })
        );
        assert_ne!(
            out[2]["code"], "NOT_ALLOWED",
            "allowed tools run: {}",
            out[2]
        );
        let (status, res) = post(
            &app,
            &key,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }),
        )
        .await;
        assert_eq!(status, 403, "{res}");
        assert_eq!(res["error"]["code"], "tool_not_allowed");
        assert_eq!(
            res["error"]["meta"]["rule"],
            json!({ "policy_id": pol, "list": "deny", "pattern": "storage.put" })
        );
        let (status, res) = post(&app, &key, "/rest/storage", json!({ "executions": [{ "tool": "storage.put", "args": { "key": "k", "content": "v" } }] })).await;
        assert_eq!(status, 200);
        assert_eq!(res["results"][0]["code"], "NOT_ALLOWED");
        let (composed, is_error) = mcp_call(
            &app,
            &key,
            "execute_tools",
            json!({ "compose": true, "executions": [
        { "tool": "vault_list", "args": {}, "ref_id": "a" },
        { "tool": "storage.put", "args": { "key": "k", "content": "v" }, "ref_id": "b" },
    ] }),
        )
        .await;
        assert!(is_error);
        assert_eq!(
            (composed["code"].as_str(), composed["ref_id"].as_str()),
            (Some("NOT_ALLOWED"), Some("b")),
            "{composed}"
        );

        // Blocked calls are invocations: metered and in the audit log as denied.
        let (_, usage) = get(&app, &admin, "/v1/usage?from=2000-01-01&to=2999-12-31").await;
        let puts: i64 = usage["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["tool"] == "storage.put" && u["meter"] == "tool_call")
            .map(|u| u["value"].as_i64().unwrap())
            .sum();
        assert_eq!(puts, 4, "{usage}");
        let page = app
            .wb
            .audit()
            .page(&ada, &Default::default())
            .await
            .unwrap();
        assert!(
            page.entries
                .iter()
                .any(|e| e.tool.as_deref() == Some("storage.put") && e.status.as_str() == "denied"),
            "{:?}",
            page.entries
        );
    }
);

db_test!(
    the_project_default_applies_to_keys_without_a_policy_and_changes_apply_at_once,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let (_, agent) = key_with(&app, &admin, None).await;
        let visible = |key: String| {
            let app = &app;
            async move { names(&get(app, &key, "/v1/tools").await.1["data"]) }
        };
        let before = visible(agent.clone()).await;
        assert!(
            before.contains(&"http.fetch".to_owned()),
            "no default: everything"
        );

        let default = policy(
            &app,
            &admin,
            "default",
            json!({ "mode": "open", "deny": ["http.*"] }),
            true,
        )
        .await;
        let now = visible(agent.clone()).await;
        assert!(
            !now.contains(&"http.fetch".to_owned()) && now.contains(&"storage.get".to_owned()),
            "{now:?}"
        );
        let out = execute(
            &app,
            &agent,
            json!([{ "tool": "http.fetch", "args": { "url": "https://example.org" } }]),
        )
        .await;
        assert_eq!(
            out[0]["rule"],
            json!({ "policy_id": default, "list": "deny", "pattern": "http.*" })
        );

        // Editing the policy changes what the key sees on its next request.
        let (status, _) = send(&app, &admin, reqwest::Method::PUT, &format!("/v1/policies/{default}"), Some(json!({ "name": "default", "default": true, "tool_allowlist": { "mode": "allowlist", "allow": ["vault_list"] } }))).await;
        assert_eq!(status, 200);
        assert_eq!(visible(agent.clone()).await, vec!["vault_list".to_owned()]);
        let (found, _) = mcp_call(
            &app,
            &agent,
            "search_tools",
            json!({ "query": "get a stored object", "limit": 50 }),
        )
        .await;
        assert!(
            names(&found["tools"]).iter().all(|n| n == "vault_list"),
            "{found}"
        );

        // Deleting the default (no key has it attached) opens everything again.
        assert_eq!(
            send(
                &app,
                &admin,
                reqwest::Method::DELETE,
                &format!("/v1/policies/{default}"),
                None
            )
            .await
            .0,
            204
        );
        assert_eq!(visible(agent).await, before);
    }
);

db_test!(
    a_keys_rate_limit_stops_calls_over_it_until_the_next_minute,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let (status, created) = post(
            &app,
            &admin,
            "/v1/api-keys",
            json!({ "name": "limited", "rate_limit_per_minute": 3 }),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["rate_limit_per_minute"], 3);
        let (key_id, key) = (
            created["id"].as_str().unwrap().to_owned(),
            created["key"].as_str().unwrap().to_owned(),
        );
        // Line the clock up with the start of a minute, so the window does not roll mid-test.
        let now = app.wb.clock().now_ms();
        app.clock.advance_ms(60_000 - now.rem_euclid(60_000) + 1);
        let call = json!([{ "tool": "vault_list", "args": {} }]);
        for _ in 0..2 {
            assert!(execute(&app, &key, call.clone()).await[0]
                .get("result")
                .is_some());
        }
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&key)
            .json(&json!({ "tool": "vault_list", "arguments": {} }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "the third call of the minute");
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&key)
            .json(&json!({ "tool": "vault_list", "arguments": {} }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
        let retry: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");
        assert_eq!(body["error"]["meta"]["retry_after_s"], retry);
        let out = execute(&app, &key, call.clone()).await;
        assert_eq!(out[0]["code"], "RATE_LIMITED", "{}", out[0]);
        assert!(out[0]["retry_after_s"].as_u64().unwrap() >= 1);
        assert!(
            execute(&app, &admin, call.clone()).await[0]
                .get("result")
                .is_some(),
            "other keys are not limited"
        );

        // The next minute it runs again; an admin can lift the limit.
        app.clock.advance_ms(60_000);
        assert!(execute(&app, &key, call.clone()).await[0]
            .get("result")
            .is_some());
        for bad in [
            json!({ "rate_limit_per_minute": 0 }),
            json!({ "rate_limit_per_minute": "many" }),
            json!({ "other": 1 }),
        ] {
            let (status, _) = send(
                &app,
                &admin,
                reqwest::Method::PATCH,
                &format!("/v1/api-keys/{key_id}"),
                Some(bad.clone()),
            )
            .await;
            assert_eq!(status, 422, "{bad}");
        }
        let (status, patched) = send(
            &app,
            &admin,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            Some(json!({ "rate_limit_per_minute": null })),
        )
        .await;
        assert_eq!(status, 200, "{patched}");
        assert_eq!(patched["rate_limit_per_minute"], Value::Null);
        for _ in 0..5 {
            assert!(execute(&app, &key, call.clone()).await[0]
                .get("result")
                .is_some());
        }
    }
);

db_test!(
    the_policies_page_checks_patterns_as_they_are_typed_with_the_apis_rules,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let b = app.browser();
        b.sign_in("ada@example.com", crate::helpers::PASSWORD).await;
        let check = |text: &'static str| {
            let b = &b;
            async move {
                b.call("check_patterns", &[("text", text)])
                    .await
                    .json::<Value>()
                    .await
                    .unwrap()
            }
        };
        let ok = check("storage.*\nhttp.fetch\n\n").await;
        assert_eq!(ok, json!({ "problems": [], "unmatched": [] }));
        let bad = check("a*b\nhttp.fetch\nnosuch.tool\n*\nx y").await;
        let problems = bad["problems"].as_array().unwrap();
        assert_eq!(problems.len(), 2, "{bad}");
        assert!(problems[0].as_str().unwrap().contains("\"a*b\""), "{bad}");
        assert!(problems[1].as_str().unwrap().contains("' '"), "{bad}");
        assert_eq!(
            bad["unmatched"],
            json!(["nosuch.tool"]),
            "a bare '*' matches every tool; a name no tool has is flagged"
        );
        // The same text is refused on save with the same reason.
        let (status, e) = post(
            &app,
            &key,
            "/v1/policies",
            json!({ "name": "typo", "tool_allowlist": { "mode": "open", "deny": ["a*b"] } }),
        )
        .await;
        assert_eq!(status, 422);
        assert!(e["error"]["message"].as_str().unwrap().contains("\"a*b\""));
        // Signed out: nothing is answered.
        assert_ne!(
            app.browser()
                .call("check_patterns", &[("text", "x")])
                .await
                .status(),
            200
        );
    }
);

db_test!(
    rest_search_ranks_like_search_tools_and_hides_what_the_policy_hides,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let (status, out) = get(&app, &admin, "/v1/tools?q=create%20jira%20issue").await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["object"], "list");
        assert_eq!(out["no_match"], false, "{out}");
        let data = out["data"].as_array().unwrap();
        assert_eq!(data.len(), 10);
        assert_eq!(data[0]["name"], "jira_create_issue");
        assert!(data[0]["input_schema"].is_object());
        // The same order and scores as search_tools.
        let (searched, _) = crate::helpers::mcp_call(
            &app,
            &admin,
            "search_tools",
            json!({ "query": "create jira issue" }),
        )
        .await;
        let pick = |v: &Value| -> Vec<(String, f64)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_owned(),
                        t["score"].as_f64().unwrap(),
                    )
                })
                .collect()
        };
        assert_eq!(pick(&out["data"]), pick(&searched["tools"]));

        let (_, out) = get(&app, &admin, "/v1/tools?q=book+a+flight+to+Lisbon&limit=3").await;
        assert_eq!(out["no_match"], true, "{out}");
        assert!(out["hint"].is_string());
        assert!(out["data"].as_array().unwrap().len() <= 3);

        for (path, words) in [
            ("/v1/tools?q=jira&limit=abc", "limit"),
            ("/v1/tools?q=jira&limit=0", "limit"),
            ("/v1/tools?q=jira&limit=51", "limit"),
            ("/v1/tools?limit=5", "only taken with q"),
            ("/v1/tools?q=", "empty"),
        ] {
            let (status, out) = get(&app, &admin, path).await;
            assert_eq!(status, 400, "{path}: {out}");
            assert!(
                out["error"]["message"].as_str().unwrap().contains(words),
                "{path}: {out}"
            );
        }

        // A key whose policy denies Jira finds no Jira tool, however it asks.
        let p = policy(
            &app,
            &admin,
            "no jira",
            json!({ "mode": "open", "deny": ["jira_*"] }),
            false,
        )
        .await;
        let (_, limited) = key_with(&app, &admin, Some(&p)).await;
        let (_, out) = get(&app, &limited, "/v1/tools?q=create%20jira%20issue&limit=50").await;
        let names: Vec<&str> = out["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(!names.is_empty());
        assert!(names.iter().all(|n| !n.starts_with("jira_")), "{names:?}");
    }
);

db_test!(
    bodies_that_are_not_json_objects_are_refused_before_anything_changes,
    |backend| {
        // serde would read ["a", …] as a struct's fields in order; every REST body that is a
        // struct is an object, and anything else is a 422 that says what was expected.
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        for (method, path, body) in [
            (reqwest::Method::POST, "/v1/api-keys", json!(["sneaky"])),
            (
                reqwest::Method::POST,
                "/v1/policies",
                json!(["p", { "mode": "open" }]),
            ),
            (
                reqwest::Method::POST,
                "/v1/tools/confirmations/x_none",
                json!(["approve"]),
            ),
            (
                reqwest::Method::POST,
                "/v1/mcp/servers/x_none/approve",
                json!([["all"]]),
            ),
            (
                reqwest::Method::PATCH,
                "/v1/mcp/servers/x_none/tools/t",
                json!(["none"]),
            ),
            (
                reqwest::Method::POST,
                "/v1/email/domains",
                json!(["example.com"]),
            ),
            (
                reqwest::Method::POST,
                "/v1/members",
                json!(["e@example.com", "pw-pw-pw-pw", "admin"]),
            ),
            (reqwest::Method::POST, "/v1/egress", json!(["example.com"])),
        ] {
            let (status, out) = send(&app, &admin, method.clone(), path, Some(body)).await;
            assert_eq!(status, 422, "{method} {path}: {out}");
            assert_eq!(out["error"]["code"], "invalid_request", "{out}");
            let message = out["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("expected {")
                    && message.ends_with("the body is not a JSON object"),
                "{method} {path}: {message}"
            );
        }
        let (_, keys) = send(&app, &admin, reqwest::Method::GET, "/v1/api-keys", None).await;
        assert_eq!(
            keys["data"].as_array().unwrap().len(),
            1,
            "no key was made: {keys}"
        );
        let (_, policies) = send(&app, &admin, reqwest::Method::GET, "/v1/policies", None).await;
        assert!(
            !policies.to_string().contains("\"name\":\"p\""),
            "no policy was made: {policies}"
        );
    }
);
