//! Requests back to the client (issue 33): an upstream server's `elicitation/create` and
//! `sampling/createMessage` during a call reach the MCP client that made the call (the official
//! Python SDK, in a session because it declared both) and its answer completes the call, on a
//! set endpoint and on `/mcp`; a client that cannot answer gets the call refused by the
//! upstream instead of a hang; what is relayed is scrubbed; a session is its opener's only.

use serde_json::{json, Value};

use crate::confirmations::post;
use crate::db_test;
use crate::fake_upstream;
use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::mcp_sdk::{run_client, run_script};
use crate::policies::send;
use crate::upstream_items::everything_set;

fn texts(call: &Value) -> String {
    call["texts"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

db_test!(
    an_upstreams_elicitation_and_sampling_reach_the_sdk_client_and_complete_the_call,
    |backend| {
        let Some((app, key, _child)) = everything_set(backend).await else {
            return;
        };
        let (status, set) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "ask", "name": "Ask", "tools": [
            { "tool": "ev.trigger-elicitation-request", "name": "elicit" },
            { "tool": "ev.trigger-sampling-request", "name": "sample" }
        ] }),
        )
        .await;
        assert_eq!(status, 201, "{set}");
        let report = run_script(
            "relay_client.py",
            app.url("/mcp/sets/ask"),
            key.clone(),
            json!([["elicit", {}], ["sample", { "prompt": "gateways" }]]),
        )
        .await;
        if report.is_null() {
            return;
        }
        let asked = report["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 2, "{report}");
        assert_eq!(asked[0]["method"], "elicitation/create");
        assert!(
            asked[0]["params"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Please provide inputs"),
            "{report}"
        );
        let elicit = &report["calls"][0];
        assert_eq!(elicit["is_error"], false, "{report}");
        assert!(
            texts(elicit).contains("- Name: Ada"),
            "the answer completed the call: {report}"
        );
        assert_eq!(asked[1]["method"], "sampling/createMessage");
        assert!(
            asked[1]["params"].to_string().contains("gateways"),
            "{report}"
        );
        assert!(
            texts(&report["calls"][1]).contains("A haiku about gateways."),
            "{report}"
        );

        // The same through /mcp's execute_tools.
        let report = run_script(
            "relay_client.py",
            app.url("/mcp"),
            key.clone(),
            json!([["execute_tools", { "executions": [{ "tool": "ev.trigger-elicitation-request", "args": {} }] }]]),
        )
        .await;
        assert_eq!(
            report["asked"][0]["method"], "elicitation/create",
            "{report}"
        );
        assert!(
            report["calls"][0].to_string().contains("- Name: Ada"),
            "{report}"
        );

        // A client that declared neither (stateless) is not asked: the upstream hears that it
        // cannot, and the call fails instead of waiting.
        let report = run_client(app.url("/mcp/sets/ask"), key, json!([["elicit", {}]])).await;
        let call = &report["calls"][0];
        assert_eq!(call["is_error"], true, "{report}");
        assert!(
            call.to_string().contains("does not support elicitation"),
            "{report}"
        );
    }
);

db_test!(
    what_an_upstream_asks_the_client_carries_no_secrets,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::loopback()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let out = execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "CRM_TOKEN", "value": "crm-secret-4d8e1b7a" } }])).await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let up = fake_upstream::start().await;
        up.set_tool(
            "ask",
            "Asks who you are.",
            json!({ "type": "object" }),
            false,
        );
        let (status, server) = post(&app, &key, "/v1/mcp/servers", json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm.", "auth": { "type": "bearer", "secret_ref": "CRM_TOKEN" }, "timeout_ms": 10000 })).await;
        assert_eq!(status, 201, "{server}");
        let (status, _) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "desk", "name": "Desk", "tools": [{ "tool": "crm.ask" }] }),
        )
        .await;
        assert_eq!(status, 201);
        let report = run_script(
            "relay_client.py",
            app.url("/mcp/sets/desk"),
            key,
            json!([["crm.ask", {}]]),
        )
        .await;
        if report.is_null() {
            return;
        }
        let said = report.to_string();
        assert!(!said.contains("crm-secret-4d8e1b7a"), "{said}");
        let asked = report["asked"][0]["params"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            asked.starts_with("Who are you? I was called with Bearer "),
            "{report}"
        );
        assert!(
            asked.contains("CRM_TOKEN"),
            "the secret is named, not shown: {report}"
        );
        let progress = &report["progress"];
        assert_eq!(
            progress[0]["progress"], 1.0,
            "the upstream's progress reached the client: {report}"
        );
        assert!(
            progress[0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("CRM_TOKEN"),
            "{report}"
        );
        let call = &report["calls"][0];
        assert_eq!(call["is_error"], false, "{report}");
        assert!(
            texts(call).contains("Ada"),
            "the client's answer went back: {report}"
        );
    }
);

db_test!(
    what_an_upstream_asks_the_client_carries_no_client_credentials_token,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::loopback()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let provider = crate::fake_provider::start().await;
        let out = execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "CC_SECRET", "value": crate::fake_provider::CLIENT_SECRET } }])).await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let up = fake_upstream::start().await;
        up.set_tool(
            "ask",
            "Asks who you are.",
            json!({ "type": "object" }),
            false,
        );
        let (status, server) = post(&app, &key, "/v1/mcp/servers", json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm.", "timeout_ms": 10000,
            "auth": { "type": "oauth2", "token_url": provider.url("/token"), "client_id": crate::fake_provider::CLIENT_ID, "secret_ref": "CC_SECRET", "scope": "tools:read" } })).await;
        assert_eq!(status, 201, "{server}");
        let token = up.state.last_authorization.lock().unwrap().clone().unwrap();
        assert!(token.starts_with("Bearer cc_"), "{token}");
        let token = token.trim_start_matches("Bearer ").to_owned();
        let (status, _) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "desk", "name": "Desk", "tools": [{ "tool": "crm.ask" }] }),
        )
        .await;
        assert_eq!(status, 201);
        let report = run_script(
            "relay_client.py",
            app.url("/mcp/sets/desk"),
            key,
            json!([["crm.ask", {}]]),
        )
        .await;
        if report.is_null() {
            return;
        }
        let said = report.to_string();
        assert!(!said.contains(&token), "{said}");
        assert!(
            report["asked"][0]["params"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("crm_token"),
            "the token is named, not shown: {report}"
        );
        assert!(
            report["progress"][0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("crm_token"),
            "{report}"
        );
    }
);

/// An `initialize` on `path` with `capabilities`: (status, the session id it opened).
async fn initialize(
    app: &TestApp,
    key: &str,
    path: &str,
    capabilities: Value,
) -> (u16, Option<String>) {
    let res = app
        .http()
        .post(app.url(path))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": { "name": "t", "version": "1" } } }))
        .send()
        .await
        .unwrap();
    let id = res
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (res.status().as_u16(), id)
}

async fn list_in(app: &TestApp, key: &str, session: &str) -> u16 {
    app.http()
        .post(app.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

db_test!(
    only_clients_that_can_be_asked_get_a_session_and_it_is_theirs_alone,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::default()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let (status, none) = initialize(&app, &key, "/mcp", json!({})).await;
        assert_eq!(
            (status, none),
            (200, None),
            "a plain client stays stateless"
        );
        let (status, session) = initialize(&app, &key, "/mcp", json!({ "elicitation": {} })).await;
        assert_eq!(status, 200);
        let session = session.expect("a client that can be asked gets a session");
        let initialized = app
            .http()
            .post(app.url("/mcp"))
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .send()
            .await
            .unwrap();
        assert!(
            initialized.status().is_success(),
            "{}",
            initialized.status()
        );
        assert_eq!(list_in(&app, &key, &session).await, 200);

        // Another key of the same project presenting the id is told it does not exist.
        let other = app
            .user("mo@example.com", workbench_core::auth::Role::Admin)
            .await;
        let other_key = app.api_key(&other).await;
        assert_eq!(list_in(&app, &other_key, &session).await, 404);
        assert_eq!(list_in(&app, &key, "not-a-session").await, 404);
        // Without a credential, nothing at all.
        let res = app
            .http()
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .json(&json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
    }
);

db_test!(
    a_credential_holds_a_bounded_number_of_sessions_and_its_oldest_ends_first,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::default()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let open = |key: String| {
            let app = &app;
            async move {
                let (status, id) = initialize(app, &key, "/mcp", json!({ "sampling": {} })).await;
                assert_eq!(status, 200);
                let id = id.expect("a session");
                let res = in_session(
                    app,
                    &key,
                    &id,
                    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
                )
                .await;
                assert!(res.status().is_success(), "{}", res.status());
                id
            }
        };
        let first = open(key.clone()).await;
        let other = app
            .user("mo@example.com", workbench_core::auth::Role::Admin)
            .await;
        let other_key = app.api_key(&other).await;
        let theirs = open(other_key.clone()).await;
        let mut last = String::new();
        for _ in 0..workbench_server::mcp::sessions::MAX_SESSIONS_PER_OWNER {
            last = open(key.clone()).await;
        }
        assert_eq!(
            list_in(&app, &key, &first).await,
            404,
            "the oldest session of the credential ended"
        );
        assert_eq!(list_in(&app, &key, &last).await, 200);
        assert_eq!(
            list_in(&app, &other_key, &theirs).await,
            200,
            "another credential's sessions are not touched"
        );
    }
);

/// A JSON-RPC message to `/mcp` in `session`; the response.
pub(crate) async fn in_session(
    app: &TestApp,
    key: &str,
    session: &str,
    body: Value,
) -> reqwest::Response {
    app.http()
        .post(app.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .await
        .unwrap()
}

db_test!(
    a_client_that_cancels_a_call_cancels_the_upstream_request,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::loopback()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        up.state
            .slow_ms
            .store(20_000, std::sync::atomic::Ordering::SeqCst);
        let (status, server) = post(&app, &key, "/v1/mcp/servers", json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm.", "timeout_ms": 30000 })).await;
        assert_eq!(status, 201, "{server}");
        let (_, session) = initialize(&app, &key, "/mcp", json!({ "sampling": {} })).await;
        let session = session.unwrap();
        in_session(
            &app,
            &key,
            &session,
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        )
        .await;
        let call = {
            let (app_url, key, session) = (app.url("/mcp"), key.clone(), session.clone());
            let http = app.http();
            tokio::spawn(async move {
                http.post(app_url)
                    .bearer_auth(key)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-06-18")
                    .json(&json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": { "name": "execute_tools",
                        "arguments": { "executions": [{ "tool": "crm.slow", "args": {} }] } } }))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
            })
        };
        let methods = |up: &fake_upstream::FakeUpstream| -> Vec<String> {
            up.state
                .traceparents
                .lock()
                .unwrap()
                .iter()
                .map(|(m, _)| m.clone())
                .collect()
        };
        for _ in 0..500 {
            if methods(&up).iter().any(|m| m == "tools/call") {
                break;
            }
            if call.is_finished() {
                panic!(
                    "the call ended before reaching the upstream: {:?} {:?}",
                    call.await,
                    methods(&up)
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(
            methods(&up).iter().any(|m| m == "tools/call"),
            "{:?}",
            methods(&up)
        );
        let res = in_session(&app, &key, &session, json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 5, "reason": "changed my mind" } })).await;
        assert!(res.status().is_success(), "{}", res.status());
        crate::helpers::within(
            "the upstream hears the cancellation",
            std::time::Duration::from_secs(10),
            async || methods(&up).iter().any(|m| m == "notifications/cancelled"),
        )
        .await;
        call.abort();
        // The call ends, on record like any failed call (not left running).
        crate::helpers::within(
            "the cancelled call is on record",
            std::time::Duration::from_secs(10),
            async || {
                let (_, audit) = send(
                    &app,
                    &key,
                    reqwest::Method::GET,
                    "/v1/audit?tool=crm.slow",
                    None,
                )
                .await;
                audit["entries"]
                    .as_array()
                    .or(audit["data"].as_array())
                    .is_some_and(|rows| rows.iter().any(|r| r["status"] == "failed"))
            },
        )
        .await;
    }
);

/// Runs `tests/mcp_sdk/ts_client.mjs` (the official TypeScript SDK) against `url`; its report.
async fn run_ts_client(url: String, key: String, steps: Value) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_sdk/ts_client.mjs");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .arg(url)
        .arg(key)
        .arg(steps.to_string())
        .output()
        .await
        .expect("node runs (installed with server-everything's setup)");
    assert!(
        out.status.success(),
        "the TypeScript client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

db_test!(
    the_official_typescript_sdk_is_asked_and_reads_prompts_and_resources_through_a_set,
    |backend| {
        let Some((app, key, _child)) = everything_set(backend).await else {
            return;
        };
        let (status, set) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "ts", "name": "TypeScript", "prompts_and_resources": true, "tools": [
            { "tool": "ev.echo" },
            { "tool": "ev.trigger-elicitation-request", "name": "elicit" },
            { "tool": "ev.trigger-sampling-request", "name": "sample" }
        ] }),
        )
        .await;
        assert_eq!(status, 201, "{set}");
        let doc = "wb://everything/demo://resource/static/document/features.md";
        let report = run_ts_client(
            app.url("/mcp/sets/ts"),
            key,
            json!([
                ["tools/call", "elicit", {}],
                ["tools/call", "sample", { "prompt": "sets" }],
                ["prompts/get", "ev.args-prompt", { "city": "Lagos" }],
                ["resources/read", doc],
                ["resources/read", "wb://everything/demo://resource/static/document/missing.md"]
            ]),
        )
        .await;
        assert_eq!(report["server"], "workbench: TypeScript", "{report}");
        assert_eq!(
            report["tools"],
            json!(["ev.echo", "elicit", "sample"]),
            "{report}"
        );
        assert!(
            report["prompts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "ev.args-prompt"),
            "{report}"
        );
        assert!(
            report["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == doc),
            "{report}"
        );
        let steps = report["steps"].as_array().unwrap();
        assert_eq!(
            report["asked"][0]["method"], "elicitation/create",
            "{report}"
        );
        assert!(steps[0].to_string().contains("- Name: Grace"), "{report}");
        assert_eq!(
            report["asked"][1]["method"], "sampling/createMessage",
            "{report}"
        );
        assert!(
            steps[1].to_string().contains("Sampled by TypeScript."),
            "{report}"
        );
        assert_eq!(
            steps[2]["messages"][0]["content"]["text"], "What's weather in Lagos?",
            "{report}"
        );
        assert_eq!(steps[3]["contents"][0]["uri"], doc, "{report}");
        assert!(
            steps[4]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("-32002"),
            "{report}"
        );
    }
);

db_test!(
    an_upstreams_requests_reach_the_client_over_stdio_and_the_older_sse_transport,
    |backend| {
        let Some((node, stdio)) =
            crate::upstream_everything::everything_over_stdio("local", "local.")
        else {
            return;
        };
        let Some((_child, port)) = crate::upstream_everything::start_everything("sse").await else {
            return;
        };
        let Some(app) = crate::helpers::spawn_app_with(
            backend,
            Options {
                stdio_commands: vec![node],
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            },
        )
        .await
        else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        crate::upstream_everything::register(&app, &key, stdio).await;
        crate::upstream_everything::register(&app, &key, json!({ "name": "legacy", "transport": "sse", "url": format!("http://127.0.0.1:{port}/sse"), "tool_prefix": "old." })).await;
        let (status, set) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "both", "name": "Both", "tools": [
                { "tool": "local.trigger-elicitation-request", "name": "elicit_stdio" },
                { "tool": "local.trigger-sampling-request", "name": "sample_stdio" },
                { "tool": "local.trigger-long-running-operation", "name": "long_stdio" },
                { "tool": "old.trigger-elicitation-request", "name": "elicit_sse" },
            ] }),
        )
        .await;
        assert_eq!(status, 201, "{set}");
        let report = run_script(
            "relay_client.py",
            app.url("/mcp/sets/both"),
            key,
            json!([
                ["elicit_stdio", {}],
                ["sample_stdio", { "prompt": "pipes" }],
                ["long_stdio", { "duration": 1, "steps": 2 }],
                ["elicit_sse", {}]
            ]),
        )
        .await;
        if report.is_null() {
            return;
        }
        let methods: Vec<&str> = report["asked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["method"].as_str().unwrap())
            .collect();
        assert_eq!(
            methods,
            [
                "elicitation/create",
                "sampling/createMessage",
                "elicitation/create"
            ],
            "{report}"
        );
        let calls = report["calls"].as_array().unwrap();
        assert!(calls.iter().all(|c| c["is_error"] == false), "{report}");
        assert!(texts(&calls[0]).contains("- Name: Ada"), "{report}");
        assert!(
            report["asked"][1]["params"].to_string().contains("pipes")
                && texts(&calls[1]).contains("A haiku about gateways."),
            "{report}"
        );
        assert_eq!(
            report["progress"].as_array().map(Vec::len),
            Some(2),
            "the stdio server's progress reached the client, by its token: {report}"
        );
        assert!(texts(&calls[3]).contains("- Name: Ada"), "{report}");
    }
);

db_test!(
    an_upstream_withdrawing_its_question_takes_it_down_at_the_client,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::loopback()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        up.set_tool(
            "ask_then_withdraw",
            "Asks, then withdraws the question.",
            json!({ "type": "object", "properties": { "heard": { "type": "string" } } }),
            false,
        );
        let (status, server) = post(&app, &key, "/v1/mcp/servers", json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm.", "timeout_ms": 60000 })).await;
        assert_eq!(status, 201, "{server}");
        let (status, _) = post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "desk", "name": "Desk", "tools": [{ "tool": "crm.ask_then_withdraw" }] }),
        )
        .await;
        assert_eq!(status, 201);
        let report = run_script(
            "relay_client.py",
            app.url("/mcp/sets/desk"),
            key,
            json!([["crm.ask_then_withdraw", { "heard": format!("http://{}/heard", up.addr) }]]),
        )
        .await;
        if report.is_null() {
            return;
        }
        assert_eq!(
            texts(&report["calls"][0]),
            "withdrawn, and the client let go",
            "{report}"
        );
        assert_eq!(
            report["withdrawn"].as_array().map(Vec::len),
            Some(1),
            "{report}"
        );
    }
);

db_test!(
    an_upstream_asking_outside_any_call_is_answered_not_left_waiting,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(backend, Options::loopback()).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        let (status, server) = post(
            &app,
            &key,
            "/v1/mcp/servers",
            json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm." }),
        )
        .await;
        assert_eq!(status, 201, "{server}");
        // The session workbench listed the tools on; its standalone stream is open.
        let peer = up.state.peer.lock().unwrap().clone().expect("listed");
        crate::helpers::within(
            "workbench answers the server's ping on its standalone stream",
            std::time::Duration::from_secs(10),
            async || {
                tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    peer.send_request(rmcp::model::ServerRequest::PingRequest(Default::default())),
                )
                .await
                .is_ok_and(|r| r.is_ok())
            },
        )
        .await;
        // A question with nobody to ask is refused at once rather than left unanswered.
        let ask = rmcp::model::ServerRequest::CustomRequest(rmcp::model::CustomRequest::new(
            "elicitation/create",
            Some(json!({ "message": "anyone?", "requestedSchema": { "type": "object" } })),
        ));
        let answer =
            tokio::time::timeout(std::time::Duration::from_secs(5), peer.send_request(ask))
                .await
                .expect("answered, not left waiting");
        let refused = format!("{answer:?}");
        assert!(refused.contains("only during a call"), "{refused}");
    }
);
