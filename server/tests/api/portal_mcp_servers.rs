//! Issue 31 part 6: the portal's MCP server form offers every registration option REST has
//! (transport, bearer, OAuth client credentials, per-user sign-in, auto-approve) and answers
//! with REST's validation, since both hand the same body to core.

use serde_json::{json, Value};

use crate::helpers::{admin_with_key, execute, Browser, Options, TestApp, PASSWORD};
use crate::{app, db_test, fake_provider, fake_upstream};

/// Submits the registration form with `fields`; the answer's status and text.
async fn submit(b: &Browser, fields: &[(&str, &str)]) -> (u16, String) {
    let res = b.call("register_mcp_server", fields).await;
    (res.status().as_u16(), res.text().await.unwrap())
}

/// The project's servers as REST lists them, by name.
async fn listed(app: &TestApp, key: &str, name: &str) -> Option<Value> {
    let all: Value = app
        .http()
        .get(app.url("/v1/mcp/servers"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    all["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

db_test!(
    the_portal_registers_servers_with_every_option_rest_has,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let out = execute(&app, &key, json!([
            { "tool": "vault_set", "args": { "name": "FAKE_TOKEN", "value": "upstream-token-7f3a9c" } },
            { "tool": "vault_set", "args": { "name": "CC_SECRET", "value": fake_provider::CLIENT_SECRET } },
        ]))
        .await;
        assert!(out.iter().all(|o| o.get("result").is_some()), "{out:?}");
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let up = fake_upstream::start().await;
        let url = up.url();

        // A bearer secret and auto-approve.
        let (status, text) = submit(
            &b,
            &[
                ("name", "crm"),
                ("url", &url),
                ("transport", "http"),
                ("auth", "bearer"),
                ("secret", "FAKE_TOKEN"),
                ("auto_approve", "on"),
            ],
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let crm = listed(&app, &key, "crm").await.unwrap();
        assert_eq!(
            (
                crm["auth_type"].as_str(),
                crm["transport"].as_str(),
                crm["auto_approve"].as_bool()
            ),
            (Some("bearer"), Some("http"), Some(true)),
            "{crm}"
        );
        assert_eq!(
            up.state.last_authorization.lock().unwrap().as_deref(),
            Some("Bearer upstream-token-7f3a9c")
        );

        // OAuth 2.0 client credentials, with scopes; no auto-approve unless ticked.
        let provider = fake_provider::start().await;
        let token_url = provider.url("/token");
        let (status, text) = submit(
            &b,
            &[
                ("name", "cc"),
                ("url", &url),
                ("auth", "oauth2"),
                ("token_url", &token_url),
                ("client_id", fake_provider::CLIENT_ID),
                ("secret", "CC_SECRET"),
                ("scopes", "tools:read"),
                ("tool_prefix", "cc."),
            ],
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let cc = listed(&app, &key, "cc").await.unwrap();
        assert_eq!(
            (cc["auth_type"].as_str(), cc["auto_approve"].as_bool()),
            (Some("oauth2"), Some(false)),
            "{cc}"
        );
        let sent = up.state.last_authorization.lock().unwrap().clone().unwrap();
        assert!(sent.starts_with("Bearer cc_"), "{sent}");

        // REST's validation answers the form, and nothing is stored.
        for (fields, says) in [
            (
                vec![
                    ("name", "bad1"),
                    ("url", url.as_str()),
                    ("auth", "oauth2"),
                    ("token_url", token_url.as_str()),
                    ("secret", "CC_SECRET"),
                ],
                "client_id",
            ),
            (
                vec![("name", "bad2"), ("url", url.as_str()), ("auth", "bearer")],
                "secret_ref",
            ),
            (
                vec![
                    ("name", "bad3"),
                    ("url", url.as_str()),
                    ("auth", "bearer"),
                    ("secret", "NO_SUCH"),
                ],
                "names no secret",
            ),
            (
                vec![
                    ("name", "bad4"),
                    ("url", url.as_str()),
                    ("transport", "ftp"),
                ],
                "transport",
            ),
            (
                vec![
                    ("name", "bad5"),
                    ("url", url.as_str()),
                    ("auth", "kerberos"),
                ],
                "unknown authentication",
            ),
            (
                vec![
                    ("name", "bad6"),
                    ("url", url.as_str()),
                    ("timeout_ms", "soon"),
                ],
                "timeout_ms must be a whole number",
            ),
        ] {
            let (status, text) = submit(&b, &fields).await;
            assert!(text.contains(says), "{fields:?}: {status} {text}");
            let name = fields[0].1;
            assert_eq!(listed(&app, &key, name).await, None, "{name} stored");
        }

        // Each user signs in: discovery runs at once and the server awaits its admin's sign-in.
        let remote = app!(backend, Options::loopback());
        let remote_url = remote.url("/mcp");
        let (status, text) = submit(
            &b,
            &[
                ("name", "remote"),
                ("url", &remote_url),
                ("auth", "user_oauth"),
                ("scopes", "mcp"),
                ("client_id", ""),
                ("secret", ""),
            ],
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let r = listed(&app, &key, "remote").await.unwrap();
        assert_eq!(
            (r["auth_type"].as_str(), r["state"].as_str()),
            (Some("user_oauth"), Some("awaiting_sign_in")),
            "{r}"
        );
    }
);

db_test!(
    the_portal_registers_a_local_stdio_server_and_shows_its_processes,
    |backend| {
        let python = "/usr/bin/python3";
        let app = app!(
            backend,
            Options {
                stdio_commands: vec![python.to_owned()],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let secret = "portal-stdio-secret-5Kd";
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "vault_set", "args": { "name": "LOCAL_TOKEN", "value": secret } }]),
        )
        .await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let raw = std::fs::canonicalize(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../core/tests/fixtures/stdio/raw_server.py"
        ))
        .unwrap()
        .display()
        .to_string();
        let args = format!("-I\n-S\n{raw}\n");

        // A malformed environment line is refused with what is wrong, and nothing is stored.
        let (status, text) = submit(
            &b,
            &[
                ("name", "local"),
                ("transport", "stdio"),
                ("command", "python3"),
                ("args", &args),
                ("env", "JUST_A_NAME"),
            ],
        )
        .await;
        assert_ne!(status, 200, "{text}");
        assert!(text.contains("must be VAR=value"), "{text}");
        assert!(listed(&app, &key, "local").await.is_none());

        let (status, text) = submit(
            &b,
            &[
                ("name", "local"),
                ("url", ""),
                ("transport", "stdio"),
                ("auth", "none"),
                ("command", "python3"),
                ("args", &args),
                ("env", "API_TOKEN={{vault:LOCAL_TOKEN}}\r\nMODE=portal\r\n"),
                ("filesystem_read", &raw),
                ("memory_mb", "256"),
                ("pool", "2"),
                ("start", "on_use"),
                ("idle_shutdown_s", "600"),
                ("tool_prefix", "loc."),
            ],
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let local = listed(&app, &key, "local").await.unwrap();
        assert_eq!(local["transport"], "stdio", "{local}");
        let stdio = &local["stdio"];
        assert_eq!(stdio["command"], python, "{local}");
        assert_eq!(stdio["args"], json!(["-I", "-S", raw]), "{local}");
        assert_eq!(
            stdio["env"],
            json!({ "API_TOKEN": "{{vault:LOCAL_TOKEN}}", "MODE": "portal" }),
            "{local}"
        );
        assert_eq!(stdio["filesystem"]["read"], json!([raw]), "{local}");
        assert_eq!(
            (
                stdio["limits"]["memory_mb"].as_u64(),
                stdio["pool"].as_u64(),
                stdio["idle_shutdown_s"].as_u64()
            ),
            (Some(256), Some(2), Some(600)),
            "{local}"
        );
        let echo = execute(
            &app,
            &key,
            json!([{ "tool": "loc.echo", "args": { "text": "from the portal" } }]),
        )
        .await;
        assert_eq!(echo[0]["result"]["text"], "from the portal", "{echo:?}");

        // Its page shows the command line and each process, never the secret.
        let id = local["id"].as_str().unwrap();
        let page = b
            .get(&format!("/mcp-servers/{id}"))
            .await
            .text()
            .await
            .unwrap();
        assert!(page.contains("Processes on this instance"), "{page}");
        assert!(page.contains(&format!("{python} -I -S {raw}")), "{page}");
        assert_eq!(
            page.matches("data-testid=\"mcp-process\"").count(),
            2,
            "{page}"
        );
        assert!(page.contains(">running<"), "{page}");
        assert!(!page.contains(secret), "{page}");
    }
);
