//! The reference MCP server (`@modelcontextprotocol/server-everything`, the official TypeScript
//! SDK, installed by the test setup into end2end/node_modules) as a real upstream: registered
//! over its streamable HTTP endpoint and over its HTTP+SSE endpoint, its tools federated, its
//! `echo` run through execute_tools and REST invoke. Skipped when node or the package is missing, unless
//! `WB_TEST_SERVER_EVERYTHING=required` (set by scripts/test.sh).

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::helpers::{admin_with_key, execute, mcp_call, Options};
use crate::{app, db_test};

fn end2end() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end")
}

/// server-everything as a stdio server: (node's path, for `stdio_commands`; the registration
/// body, named `name` with `prefix`); None (skip) when it cannot run here.
pub(crate) fn everything_over_stdio(name: &str, prefix: &str) -> Option<(String, Value)> {
    let entry =
        end2end().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let required = std::env::var("WB_TEST_SERVER_EVERYTHING").is_ok_and(|v| v == "required");
    let node = std::path::Path::new("/usr/bin/node");
    if !entry.exists() || !node.exists() {
        assert!(
            !required,
            "server-everything over stdio needs {} and node",
            entry.display()
        );
        crate::helpers::skipped(
            "server-everything is not installed (run scripts/setup.sh --with-browser)",
        );
        return None;
    }
    let modules = end2end().join("node_modules").canonicalize().unwrap();
    Some((
        node.display().to_string(),
        json!({ "name": name, "transport": "stdio", "command": "node",
                "args": [entry.canonicalize().unwrap().display().to_string(), "stdio"],
                "filesystem": { "read": [modules.display().to_string()] },
                "tool_prefix": prefix }),
    ))
}

/// Starts server-everything on a free loopback port; None (skip) when it cannot run here.
pub(crate) async fn start_everything(mode: &str) -> Option<(tokio::process::Child, u16)> {
    let entry =
        end2end().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let required = std::env::var("WB_TEST_SERVER_EVERYTHING").is_ok_and(|v| v == "required");
    if !entry.exists() {
        assert!(
            !required,
            "server-everything is required but {} is missing; run scripts/setup.sh --with-browser",
            entry.display()
        );
        crate::helpers::skipped(
            "server-everything is not installed (run scripts/setup.sh --with-browser)",
        );
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_path = crate::helpers::temp_dir("everything").join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = tokio::process::Command::new("node")
        .arg("--import")
        .arg(end2end().join("upstream/bind-loopback.mjs"))
        .arg(&entry)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                !required,
                "server-everything is required but node cannot start: {e}"
            );
            return None;
        }
    };
    // Node reads a few thousand files on its first start in a fresh clone; on a loaded
    // two-core machine that took more than 10 s. Wait up to a minute, but not for a child
    // that has exited.
    let mut child = child;
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Some((child, port));
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "server-everything exited ({status}) before listening; see {}",
                log_path.display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!(
        "server-everything did not start listening on 127.0.0.1:{port} within 60 s; see {}",
        log_path.display()
    );
}

/// Registers an upstream and expects 201; the server object.
pub(crate) async fn register(app: &crate::helpers::TestApp, key: &str, body: Value) -> Value {
    let res = app
        .http()
        .post(app.url("/v1/mcp/servers"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let server: Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{server}");
    server
}

/// `ev.echo` answers over REST invoke.
async fn assert_echoes_over_rest(app: &crate::helpers::TestApp, key: &str) {
    let res = app
        .http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(key)
        .json(&json!({ "tool": "ev.echo", "arguments": { "message": "via rest" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap()["result"],
        "Echo: via rest"
    );
}

db_test!(the_reference_mcp_server_is_a_working_upstream, |backend| {
    let Some((_child, port)) = start_everything("streamableHttp").await else {
        return;
    };
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (_, key) = admin_with_key(&app).await;
    let server = register(&app, &key, json!({ "name": "everything", "transport": "http", "url": format!("http://127.0.0.1:{port}/mcp"), "tool_prefix": "ev." })).await;
    let tools: Vec<&str> = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"ev.echo"), "{tools:?}");
    let out = execute(
        &app,
        &key,
        json!([{ "tool": "ev.echo", "args": { "message": "hello upstream" } }]),
    )
    .await;
    assert_eq!(out[0]["result"], "Echo: hello upstream", "{}", out[0]);
    assert_echoes_over_rest(&app, &key).await;
    // A refused argument is the upstream's validation answer, not a breaker failure.
    let out = execute(&app, &key, json!([{ "tool": "ev.echo", "args": {} }])).await;
    assert_eq!(
        out[0]["code"], "INVALID_ARGUMENTS",
        "our schema check runs first: {}",
        out[0]
    );
    let id = server["id"].as_str().unwrap();
    let refreshed: Value = app
        .http()
        .post(app.url(&format!("/v1/mcp/servers/{id}/refresh")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        refreshed["changes"],
        json!({ "added": [], "removed": [], "changed": [] }),
        "{refreshed}"
    );
});

db_test!(
    the_reference_mcp_server_works_over_the_older_sse_transport_too,
    |backend| {
        let Some((_child, port)) = start_everything("sse").await else {
            return;
        };
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let server = register(&app, &key, json!({ "name": "legacy", "transport": "sse", "url": format!("http://127.0.0.1:{port}/sse"), "tool_prefix": "old." })).await;
        assert_eq!(server["transport"], "sse");
        let out = execute(
            &app,
            &key,
            json!([
                { "tool": "old.echo", "args": { "message": "one" } },
                { "tool": "old.echo", "args": { "message": "two" } },
                { "tool": "old.echo", "args": { "message": "three" } },
            ]),
        )
        .await;
        let texts: Vec<&str> = out
            .iter()
            .map(|o| o["result"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            texts,
            ["Echo: one", "Echo: two", "Echo: three"],
            "answers matched to their requests by id: {out:?}"
        );
    }
);

db_test!(
    the_reference_mcp_server_runs_over_stdio_with_policy_applied,
    |backend| {
        let Some((node, body)) = everything_over_stdio("everything", "ev.") else {
            return;
        };
        let app = app!(
            backend,
            Options {
                stdio_commands: vec![node.clone()],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let mut body = body;
        body["env"] = json!({ "GREETING": "hello" });
        let server = register(&app, &key, body).await;
        assert_eq!(
            server["stdio"]["command"], node,
            "the name is resolved: {server}"
        );
        let tools: Vec<&str> = server["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            tools.contains(&"ev.echo") && tools.contains(&"ev.get-env"),
            "{tools:?}"
        );

        // REST and /mcp reach the node process.
        assert_echoes_over_rest(&app, &key).await;
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "execute_tools",
            json!({ "executions": [{ "tool": "ev.get-env", "args": {} }] }),
        )
        .await;
        assert!(!is_error, "{out}");
        let said = out.to_string();
        assert!(
            said.contains("GREETING") && said.contains("hello"),
            "{said}"
        );
        assert!(
            !said.contains("WB_") && !said.contains("\\\"PATH\\\"") && !said.contains("CARGO"),
            "the process sees only its declared environment: {said}"
        );

        // A key whose policy allows only echo runs echo, and neither sees nor runs get-env.
        let (status, pol) = crate::confirmations::post(
            &app,
            &key,
            "/v1/policies",
            json!({ "name": "echo only", "tool_allowlist": { "mode": "allowlist", "allow": ["ev.echo"], "deny": [], "require_confirmation": [] } }),
        )
        .await;
        assert_eq!(status, 201, "{pol}");
        let (status, limited) = crate::confirmations::post(
            &app,
            &key,
            "/v1/api-keys",
            json!({ "name": "agent", "policy_id": pol["id"] }),
        )
        .await;
        assert_eq!(status, 201, "{limited}");
        let limited = limited["key"].as_str().unwrap().to_owned();
        let (out, _) = mcp_call(
            &app,
            &limited,
            "execute_tools",
            json!({ "executions": [
                { "tool": "ev.echo", "args": { "message": "over mcp" } },
                { "tool": "ev.get-env", "args": {} }
            ] }),
        )
        .await;
        let said = out.to_string();
        assert!(said.contains("Echo: over mcp"), "{said}");
        assert!(!said.contains("GREETING"), "get-env did not run: {said}");
        let listed: Value = app
            .http()
            .get(app.url("/v1/tools"))
            .bearer_auth(&limited)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ev: Vec<&str> = listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.starts_with("ev."))
            .collect();
        assert_eq!(ev, vec!["ev.echo"], "{listed}");
    }
);
