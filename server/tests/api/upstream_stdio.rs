//! Issue 32: a local MCP server over stdio, the official MCP Python SDK's stdio transport
//! (`tests/mcp_sdk/stdio_server.py`), started by workbench as a guarded, confined child.

use serde_json::{json, Value};

use crate::helpers::{admin_with_key, execute, within, Options, TestApp};
use crate::{app, db_test};

fn script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_sdk/stdio_server.py").to_owned()
}

/// Registers an MCP server.
async fn post(app: &TestApp, key: &str, body: Value) -> (u16, Value) {
    crate::confirmations::post(app, key, "/v1/mcp/servers", body).await
}

/// What the SDK server reads beyond the system directories and its interpreter's installation
/// (its virtual environment): its script's directory (Landlock holds it to these).
pub fn sdk_filesystem() -> Value {
    let scripts = std::path::Path::new(&script()).parent().unwrap().to_owned();
    json!({ "read": [scripts.display().to_string()] })
}

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

db_test!(
    a_python_sdk_stdio_server_runs_confined_with_its_vault_secret_and_stops_with_removal,
    |backend| {
        let Some(py) = crate::mcp_sdk::python() else {
            return;
        };
        let py = py.display().to_string();
        let app = app!(
            backend,
            Options {
                stdio_commands: vec![py.clone()],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let secret = "stdio-secret-value-7Hq2";
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "vault_set", "args": { "name": "LOCAL_TOKEN", "value": secret } }]),
        )
        .await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let (status, view) = post(
            &app,
            &key,
            json!({ "name": "local", "transport": "stdio", "command": py, "args": [script()], "filesystem": sdk_filesystem(),
                    "env": { "API_TOKEN": "{{vault:LOCAL_TOKEN}}", "PLAIN": "x" } }),
        )
        .await;
        assert_eq!(status, 201, "{view}");
        assert!(
            view["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "local.echo"),
            "{view}"
        );
        let id = view["id"].as_str().unwrap().to_owned();

        let echo = execute(
            &app,
            &key,
            json!([{ "tool": "local.echo", "args": { "text": "hi" } }]),
        )
        .await[0]
            .clone();
        assert_eq!(echo["result"]["text"], "hi", "{echo}");
        let first = echo["result"]["pid"].as_u64().unwrap();
        let names = execute(
            &app,
            &key,
            json!([{ "tool": "local.environment", "args": {} }]),
        )
        .await[0]
            .clone();
        let names: Vec<&str> = names["result"]["names"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            names.contains(&"API_TOKEN") && names.contains(&"PLAIN"),
            "{names:?}"
        );
        assert!(
            !names
                .iter()
                .any(|n| *n == "PATH" || *n == "HOME" || n.starts_with("WB_")),
            "{names:?}"
        );
        let digest = execute(
            &app,
            &key,
            json!([{ "tool": "local.secret_digest", "args": { "name": "API_TOKEN" } }]),
        )
        .await[0]
            .clone();
        assert_eq!(
            digest["result"]["sha256"],
            workbench_core::crypto::sha256_hex(secret.as_bytes()),
            "{digest}"
        );

        // stderr is read beside stdout, so its line may land just after the answer.
        let mut view = Value::Null;
        within(
            "the stderr line to be kept",
            std::time::Duration::from_secs(10),
            async || {
                view = app
                    .http()
                    .get(app.url(&format!("/v1/mcp/servers/{id}")))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                view["processes"][0]["stderr_tail"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty())
            },
        )
        .await;
        assert_eq!(view["processes"][0]["state"], "running", "{view}");
        assert!(!view.to_string().contains(secret), "{view}");
        assert!(
            view["processes"][0]["stderr_tail"]
                .to_string()
                .contains("redacted"),
            "{view}"
        );

        // A crash: callers are told how the process ended, never what it wrote on stderr;
        // admins see both, and after the backoff the next call starts a new process.
        let member = app
            .user("bob@example.com", workbench_core::auth::Role::Member)
            .await;
        let member_key = app.api_key(&member).await;
        execute(
            &app,
            &key,
            json!([{ "tool": "local.crash", "args": { "code": 3 } }]),
        )
        .await;
        within(
            "the crash to be seen",
            std::time::Duration::from_secs(10),
            async || {
                let out = execute(
                    &app,
                    &member_key,
                    json!([{ "tool": "local.echo", "args": { "text": "again" } }]),
                )
                .await[0]
                    .clone();
                let said = out.to_string();
                assert!(!said.contains("crashing with status"), "{said}");
                said.contains("exited with status 3")
            },
        )
        .await;
        let view: Value = app
            .http()
            .get(app.url(&format!("/v1/mcp/servers/{id}")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(view["processes"][0]["restarts"], 1, "{view}");
        assert!(
            view["processes"][0]["last_exit"]
                .as_str()
                .unwrap()
                .contains("crashing with status 3"),
            "{view}"
        );
        // How it is started and what it wrote are for whoever may edit servers.
        let seen: Value = app
            .http()
            .get(app.url(&format!("/v1/mcp/servers/{id}")))
            .bearer_auth(&member_key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(seen["stdio"]["env"], json!({}), "{seen}");
        assert_eq!(seen["stdio"]["args"], json!([]), "{seen}");
        assert_eq!(seen["processes"][0]["stderr_tail"], json!([]), "{seen}");
        assert!(!seen.to_string().contains("crashing"), "{seen}");
        app.clock.advance_ms(1_000);
        let echo = execute(
            &app,
            &key,
            json!([{ "tool": "local.echo", "args": { "text": "back" } }]),
        )
        .await[0]
            .clone();
        assert_eq!(echo["result"]["text"], "back", "{echo}");
        let pid = echo["result"]["pid"].as_u64().unwrap();
        assert!(
            pid != first && !alive(first),
            "a new process replaced the crashed one"
        );

        let res = app
            .http()
            .delete(app.url(&format!("/v1/mcp/servers/{id}")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success());
        within(
            "the server process to end",
            std::time::Duration::from_secs(10),
            async || !alive(pid),
        )
        .await;
    }
);

db_test!(
    stdio_servers_are_refused_unless_the_operator_allows_the_program,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (status, body) = post(&app, &key, json!({ "name": "local", "transport": "stdio", "command": "/bin/sh", "args": ["-c", "id"] })).await;
        assert_eq!(status, 422, "{body}");
        assert!(body.to_string().contains("WB_STDIO_COMMANDS"), "{body}");
    }
);
