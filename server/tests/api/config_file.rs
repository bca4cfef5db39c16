//! Configuration as code (issue 35): a project exported as a file (`GET /v1/config`), applied
//! to another instance (`POST /v1/config/apply`, `workbench config apply`), checked whole
//! before anything changes, secrets by vault name only.

use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::policy::{Mode, PolicyInput, ToolAllowlist};

use crate::fake_upstream::{self, FakeUpstream};
use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

const TOKEN_VALUE: &str = "upstream-token-7f3a9c";
const HOOK_VALUE: &str = "hook-signing-2b81d0";

async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let res = app
        .http()
        .request(method, app.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The project's file as YAML text.
async fn export_yaml(app: &TestApp, key: &str) -> String {
    let res = app
        .http()
        .get(app.url("/v1/config"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/yaml"));
    res.text().await.unwrap()
}

/// The project's file as JSON.
pub async fn export_json(app: &TestApp, key: &str) -> Value {
    let res = app
        .http()
        .get(app.url("/v1/config?format=json"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// Posts a file; `(status, body)`.
pub async fn apply(app: &TestApp, key: &str, yaml: &str, dry_run: bool) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url(&format!("/v1/config/apply?dry_run={dry_run}")))
        .bearer_auth(key)
        .header("content-type", "application/yaml")
        .body(yaml.to_owned())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The secrets a file names, set in this instance's vault.
async fn secrets(app: &TestApp, key: &str) {
    let out = execute(
        app,
        key,
        json!([
            { "tool": "vault_set", "args": { "name": "FAKE_TOKEN", "value": TOKEN_VALUE } },
            { "tool": "vault_set", "args": { "name": "HOOK_SIGNING", "value": HOOK_VALUE } }
        ]),
    )
    .await;
    assert!(out.iter().all(|r| r.get("result").is_some()), "{out:?}");
}

fn app_definition(base: &str) -> Value {
    json!({
        "name": "orders",
        "display_name": "Orders",
        "version": "1.0.0",
        "base_url": base,
        "auth": { "type": "none" },
        "tools": [{
            "name": "orders_echo_message",
            "description": "Echo a message back through the orders service.",
            "side_effects": "none",
            "input_schema": { "type": "object", "required": ["message"], "properties": { "message": { "type": "string" } } },
            "request": { "method": "POST", "path": "/echo", "body": { "message": "$message" } },
            "result": { "fields": ["method", "body"] }
        }]
    })
}

/// A project using every section: settings, egress, two policies, an app, and the fake MCP
/// server with a side-effect override and a tool held for review.
async fn configured(app: &TestApp, key: &str, up: &FakeUpstream) -> String {
    secrets(app, key).await;
    let post = reqwest::Method::POST;
    for (path, body) in [
        ("/v1/egress", json!({ "pattern": "api.example.com" })),
        ("/v1/egress", json!({ "pattern": "*.internal.example" })),
        (
            "/v1/policies",
            json!({ "name": "read-only", "default": true, "tool_allowlist": { "mode": "allowlist", "allow": ["fake.*", "hackernews_*"], "deny": [], "require_confirmation": [] } }),
        ),
        (
            "/v1/policies",
            json!({ "name": "careful", "tool_allowlist": { "mode": "allowlist", "allow": ["*"], "deny": ["vault_*"], "require_confirmation": ["fake.add"] } }),
        ),
        ("/v1/apps", app_definition(&format!("{}/orders", up.url()))),
        (
            "/v1/mcp/servers",
            json!({ "name": "fake", "transport": "http", "url": up.url(), "auth": { "type": "bearer", "secret_ref": "FAKE_TOKEN" }, "timeout_ms": 5000, "max_concurrency": 4 }),
        ),
    ] {
        let (status, out) = send(app, key, post.clone(), path, body).await;
        assert!(status == 200 || status == 201, "{path}: {status} {out}");
    }
    let (status, out) = send(
        app,
        key,
        reqwest::Method::PATCH,
        "/v1/settings",
        json!({ "audit_retention_days": 30, "webhook": { "url": format!("{}/hook", up.url()), "secret_ref": "HOOK_SIGNING" } }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let (status, servers) = send(
        app,
        key,
        reqwest::Method::GET,
        "/v1/mcp/servers",
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{servers}");
    let id = servers["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, out) = send(
        app,
        key,
        reqwest::Method::PATCH,
        &format!("/v1/mcp/servers/{id}/tools/add"),
        json!({ "side_effects": "destructive" }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    up.set_tool(
        "translate",
        "Translate text.",
        json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
        true,
    );
    let (status, out) = send(
        app,
        key,
        post,
        &format!("/v1/mcp/servers/{id}/refresh"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["tool_counts"]["pending_review"], 1, "{out}");
    let (status, out) = send(
        app,
        key,
        reqwest::Method::PATCH,
        &format!("/v1/mcp/servers/{id}/tools/whoami"),
        json!({ "name": "credential", "description": "Show which credential reached the server." }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let (status, out) = send(
        app,
        key,
        reqwest::Method::POST,
        "/v1/tool-sets",
        json!({ "slug": "support", "name": "Support", "description": "For the desk.", "tools": [
            { "tool": "fake.add", "name": "sum", "fixed": { "a": 40 } },
            { "tool": "orders_echo_message", "description": "Echo through orders." }
        ] }),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    id
}

db_test!(
    an_exported_project_applied_to_a_fresh_instance_exports_the_same,
    |backend| {
        let source = app!(backend, Options::loopback());
        let (_, source_key) = admin_with_key(&source).await;
        let up = fake_upstream::start().await;
        configured(&source, &source_key, &up).await;
        let yaml = export_yaml(&source, &source_key).await;
        for secret in [TOKEN_VALUE, HOOK_VALUE] {
            assert!(
                !yaml.contains(secret),
                "a secret's value is in the file:\n{yaml}"
            );
        }
        for named in [
            "FAKE_TOKEN",
            "HOOK_SIGNING",
            "Show which credential reached the server.",
            "read-only",
            "*.internal.example",
            "orders_echo_message",
            "destructive",
        ] {
            assert!(
                yaml.contains(named),
                "{named} is missing from the file:\n{yaml}"
            );
        }
        let wanted = export_json(&source, &source_key).await;
        assert!(
            wanted["mcp_servers"][0]["approved_tools"]
                .get("translate")
                .is_none(),
            "the held tool is not approved in the file: {wanted}"
        );

        let target = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&target).await;
        secrets(&target, &key).await;
        let empty = export_json(&target, &key).await;

        let (status, plan) = apply(&target, &key, &yaml, true).await;
        assert_eq!(status, 200, "{plan}");
        assert_eq!(plan["dry_run"], true);
        let diff = plan["diff"].as_str().unwrap();
        for line in [
            "~ setting audit_retention_days",
            "~ setting webhook",
            "+ egress api.example.com",
            "+ policy read-only",
            "+ app orders",
            "+ mcp_server fake",
            "+ tool_set support",
        ] {
            assert!(
                diff.lines().any(|l| l == line),
                "{line:?} not in the dry run:\n{diff}"
            );
        }
        assert_eq!(
            export_json(&target, &key).await,
            empty,
            "a dry run changes nothing"
        );

        let (status, done) = apply(&target, &key, &yaml, false).await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(
            done["changes"], plan["changes"],
            "the dry run said what applying does"
        );
        assert_eq!(export_json(&target, &key).await, wanted);

        let (_, servers) = send(
            &target,
            &key,
            reqwest::Method::GET,
            "/v1/mcp/servers",
            Value::Null,
        )
        .await;
        let pending = &servers["data"][0]["tool_counts"]["pending_review"];
        assert_eq!(pending, 1, "what was held in the source is held here too");
        let out = execute(
            &target,
            &key,
            json!([{ "tool": "fake.echo", "args": { "message": "hi" } }]),
        )
        .await;
        assert!(
            out[0].get("result").is_some(),
            "an approved tool runs: {out:?}"
        );

        let (status, again) = apply(&target, &key, &yaml, false).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(
            again["changes"],
            json!([]),
            "applying twice changes nothing: {again}"
        );
        assert_eq!(
            again["unchanged"], 10,
            "3 settings, 2 egress rules, 2 policies, 1 app, 1 server, 1 tool set: {again}"
        );
    }
);

db_test!(
    a_file_with_bad_entries_changes_nothing_and_names_every_problem,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        let before = export_json(&app, &key).await;
        let yaml = format!(
            r#"
version: 1
egress: ["api.example.com", "http://not a pattern"]
policies:
  - name: fine
    tool_allowlist: {{ mode: allowlist, allow: ["*"], deny: [], require_confirmation: [] }}
apps:
  - name: broken
mcp_servers:
  - name: fake
    transport: http
    url: {url}
    auth: {{ type: bearer, secret_ref: NOT_IN_THE_VAULT }}
settings:
  audit_retention_days: 0
"#,
            url = up.url()
        );
        let (status, out) = apply(&app, &key, &yaml, false).await;
        assert_eq!(status, 422, "{out}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("the file was not applied (4 problems)"),
            "{message}"
        );
        for part in [
            "egress \"http://not a pattern\"",
            "apps[0]",
            "mcp_server fake",
            "NOT_IN_THE_VAULT",
            "settings.audit_retention_days",
        ] {
            assert!(message.contains(part), "{part:?} not named in: {message}");
        }
        assert_eq!(export_json(&app, &key).await, before, "nothing changed");
    }
);

db_test!(
    a_section_left_out_stays_and_an_empty_one_is_cleared_but_not_a_policy_keys_use,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (admin, key) = admin_with_key(&app).await;
        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/egress",
            json!({ "pattern": "api.example.com" }),
        )
        .await;
        assert_eq!(status, 201);
        let policy = |name: &str| PolicyInput {
            limits: vec![],
            name: name.into(),
            tool_allowlist: ToolAllowlist {
                mode: Mode::Allowlist,
                allow: vec!["hackernews_*".into()],
                deny: vec![],
                require_confirmation: vec![],
            },
            default: false,
        };
        app.wb
            .policies()
            .create(&admin, &policy("unused"))
            .await
            .unwrap();
        let used = app
            .wb
            .policies()
            .create(&admin, &policy("in use"))
            .await
            .unwrap();
        app.wb
            .accounts()
            .create_api_key_with_policy(&admin, "bot", Some(&used.id))
            .await
            .unwrap();

        let (status, out) = apply(&app, &key, "version: 1\npolicies: []\n", false).await;
        assert_eq!(status, 422, "{out}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("policy in use is not in the file but keys use it (bot"),
            "{message}"
        );
        assert_eq!(
            app.wb.policies().list(&admin).await.unwrap().len(),
            2,
            "nothing was deleted"
        );

        let yaml = "version: 1\npolicies:\n  - name: in use\n    tool_allowlist: { mode: allowlist, allow: [\"hackernews_*\"], deny: [], require_confirmation: [] }\n";
        let (status, out) = apply(&app, &key, yaml, false).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["diff"], "- policy unused\n");
        let names: Vec<String> = app
            .wb
            .policies()
            .list(&admin)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["in use"]);
        assert_eq!(
            export_json(&app, &key).await["egress"],
            json!(["api.example.com"]),
            "a section the file leaves out is left alone"
        );
    }
);

db_test!(
    a_changed_server_setting_is_applied_in_place_and_keeps_its_reviews,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        let id = configured(&app, &key, &up).await;
        let mut file = export_json(&app, &key).await;
        file["mcp_servers"][0]["timeout_ms"] = json!(7000);
        file["mcp_servers"][0]["max_concurrency"] = json!(2);
        let yaml = serde_json::to_string(&file).unwrap();
        let (status, out) = apply(&app, &key, &yaml, false).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(
            out["diff"],
            "~ mcp_server fake: max_concurrency, timeout_ms\n"
        );
        let (status, server) = send(
            &app,
            &key,
            reqwest::Method::GET,
            &format!("/v1/mcp/servers/{id}"),
            Value::Null,
        )
        .await;
        assert_eq!(status, 200, "the server kept its id: {server}");
        assert_eq!(
            (
                server["timeout_ms"].as_u64(),
                server["max_concurrency"].as_u64()
            ),
            (Some(7000), Some(2)),
            "{server}"
        );
        assert_eq!(
            server["tool_counts"]["pending_review"], 1,
            "the held tool stays held: {server}"
        );
        let after = export_json(&app, &key).await;
        assert_eq!(
            after["mcp_servers"][0]["side_effects"],
            json!({ "add": "destructive" })
        );

        // A prefix change cannot happen in place: the dry run says the server is replaced.
        file["mcp_servers"][0]["tool_prefix"] = json!("f.");
        let (status, out) = apply(&app, &key, &serde_json::to_string(&file).unwrap(), true).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["diff"], "! mcp_server fake: tool_prefix\n");
        assert_eq!(
            export_json(&app, &key).await,
            after,
            "a dry run changes nothing"
        );
    }
);

db_test!(
    a_held_tool_is_approved_by_the_file_only_as_it_was_reviewed,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        let id = configured(&app, &key, &up).await;
        let mut file = export_json(&app, &key).await;
        // An admin approves `translate` in the file with the fingerprint of what they reviewed.
        let (status, review) = send(
            &app,
            &key,
            reqwest::Method::GET,
            &format!("/v1/mcp/servers/{id}/tools"),
            Value::Null,
        )
        .await;
        assert_eq!(status, 200);
        let translate = review["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "translate")
            .cloned()
            .unwrap_or_else(|| panic!("{review}"));
        let fingerprint = translate["fingerprint"]
            .as_str()
            .unwrap_or_else(|| panic!("no fingerprint: {translate}"))
            .to_owned();

        file["mcp_servers"][0]["approved_tools"]["translate"] =
            json!("0".repeat(fingerprint.len()));
        let (status, out) = apply(&app, &key, &serde_json::to_string(&file).unwrap(), false).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["changes"], json!([]), "{out}");
        assert_eq!(
            out["notes"],
            json!(["mcp_server fake: translate changed on the server since the file approved it; it stays held for review"])
        );

        file["mcp_servers"][0]["approved_tools"]["translate"] = json!(fingerprint);
        let (status, out) = apply(&app, &key, &serde_json::to_string(&file).unwrap(), false).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["diff"], "~ mcp_server_review fake: approve translate\n");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.translate", "args": { "text": "hola" } }]),
        )
        .await;
        // The fake lists `translate` but has no handler for it: the call reaching it (and
        // failing there) is what shows the catalog let it through.
        assert_eq!(
            out[0]["handler_error"], "no tool translate",
            "approved, so the call reached the server: {out:?}"
        );
    }
);

db_test!(
    apply_refuses_what_is_not_a_configuration_file_with_the_error_shape,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for (yaml, status, wants) in [
            (
                "version: 2\n",
                422,
                "version 2 is not one this workbench reads",
            ),
            ("version: 1\npolicy: []\n", 422, "unknown field `policy`"),
            ("- 1\n- 2\n", 422, "a configuration file is a mapping"),
            ("version: 1\negress: {a: 1}\n", 422, "invalid type"),
            ("version: [1\n", 422, "not valid YAML"),
        ] {
            let (got, out) = apply(&app, &key, yaml, false).await;
            assert_eq!(got, status, "{yaml:?}: {out}");
            let message = out["error"]["message"]
                .as_str()
                .unwrap_or_else(|| panic!("{out}"));
            assert!(message.contains(wants), "{yaml:?}: {message}");
        }
        let post = |content_type: &'static str, body: Vec<u8>, query: &'static str| {
            app.http()
                .post(app.url(&format!("/v1/config/apply{query}")))
                .bearer_auth(&key)
                .header("content-type", content_type)
                .body(body)
                .send()
        };
        let res = post("text/plain", b"version: 1\n".to_vec(), "")
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        let res = post(
            "application/yaml",
            b"version: 1\n".to_vec(),
            "?dry_run=maybe",
        )
        .await
        .unwrap();
        assert_eq!(res.status(), 400);
        let res = post("application/yaml", b"version: 1\n".to_vec(), "?force=1")
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        let mut big = b"version: 1\n# ".to_vec();
        big.resize(5 * 1024 * 1024, b'x');
        let res = post("application/yaml", big, "").await.unwrap();
        assert_eq!(res.status(), 413);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "payload_too_large");
        let res = app
            .http()
            .get(app.url("/v1/config?format=xml"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
    }
);

db_test!(
    a_member_and_a_policy_limited_admin_key_can_neither_export_nor_apply,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let member = app.user("mo@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        let policy = app
            .wb
            .policies()
            .create(
                &admin,
                &PolicyInput {
                    limits: vec![],
                    name: "everything".into(),
                    tool_allowlist: ToolAllowlist {
                        mode: Mode::Allowlist,
                        allow: vec!["*".into()],
                        deny: vec![],
                        require_confirmation: vec![],
                    },
                    default: false,
                },
            )
            .await
            .unwrap();
        let limited = app
            .wb
            .accounts()
            .create_api_key_with_policy(&admin, "limited", Some(&policy.id))
            .await
            .unwrap()
            .secret
            .expose()
            .to_owned();
        let before = export_json(&app, &key).await;
        // A file that would make the limited key's policy go away and add a policy of its own.
        let yaml = "version: 1\npolicies:\n  - name: mine\n    tool_allowlist: { mode: blocklist, allow: [], deny: [], require_confirmation: [] }\n";
        for k in [&member_key, &limited] {
            let res = app
                .http()
                .get(app.url("/v1/config"))
                .bearer_auth(k)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 403);
            let (status, out) = apply(&app, k, yaml, false).await;
            assert_eq!(status, 403, "{out}");
            assert_eq!(out["error"]["code"], "forbidden", "{out}");
        }
        assert_eq!(export_json(&app, &key).await, before, "nothing changed");
    }
);

/// Runs `workbench config …` against `app` off the async workers: (exit ok, stdout, stderr).
async fn cli(app: &TestApp, key: &str, args: &[&str]) -> (bool, String, String) {
    let mut all: Vec<String> = vec!["config".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.extend([
        "--url".into(),
        app.url(""),
        "--api-key".into(),
        key.to_owned(),
    ]);
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        crate::cli::workbench(&args, None)
    })
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

db_test!(
    the_cli_exports_a_project_and_applies_it_to_another_instance,
    |backend| {
        let source = app!(backend, Options::loopback());
        let (_, source_key) = admin_with_key(&source).await;
        let up = fake_upstream::start().await;
        configured(&source, &source_key, &up).await;
        let (ok, yaml, err) = cli(&source, &source_key, &["export"]).await;
        assert!(ok, "{err}");
        assert_eq!(yaml, export_yaml(&source, &source_key).await);
        let file = crate::helpers::temp_dir("config-cli").join("workbench.yaml");
        std::fs::write(&file, &yaml).unwrap();
        let path = file.to_str().unwrap();

        let target = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&target).await;
        secrets(&target, &key).await;
        let (ok, diff, err) = cli(&target, &key, &["apply", path, "--dry-run"]).await;
        assert!(ok, "{err}");
        assert!(diff.lines().any(|l| l == "+ mcp_server fake"), "{diff}");
        assert!(err.contains("workbench: dry run: "), "{err}");
        assert!(
            export_json(&target, &key).await["mcp_servers"] == json!([]),
            "a dry run changes nothing"
        );

        let (ok, applied, err) = cli(&target, &key, &["apply", path]).await;
        assert!(ok, "{err}");
        assert_eq!(applied, diff, "the dry run said what applying does");
        assert_eq!(
            export_json(&target, &key).await,
            export_json(&source, &source_key).await
        );
        let (ok, again, err) = cli(&target, &key, &["apply", path]).await;
        assert!(ok, "{err}");
        assert_eq!(again, "");
        assert!(err.contains("workbench: 0 changes made, "), "{err}");

        let (ok, _, err) = cli(&target, "wb_not_a_key", &["export"]).await;
        assert!(!ok);
        assert!(
            err.starts_with("workbench: ") && err.contains("401"),
            "{err}"
        );
        std::fs::write(&file, "version: 1\negress: [\"http://not a pattern\"]\n").unwrap();
        let (ok, _, err) = cli(&target, &key, &["apply", path]).await;
        assert!(!ok);
        assert!(
            err.contains("the file was not applied (1 problem)"),
            "{err}"
        );
    }
);

db_test!(
    a_replacement_that_fails_leaves_the_server_as_it_was,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        configured(&app, &key, &up).await;
        let before = export_json(&app, &key).await;
        // A new prefix (so the server is replaced) at an address nothing answers on: the
        // checks pass, registering the replacement cannot list its tools.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let mut file = before.clone();
        file["mcp_servers"][0]["tool_prefix"] = json!("f.");
        file["mcp_servers"][0]["url"] = json!(format!("http://127.0.0.1:{port}/mcp"));
        let (status, out) = apply(&app, &key, &serde_json::to_string(&file).unwrap(), false).await;
        assert_ne!(status, 200, "{out}");
        let message = out["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("! mcp_server fake: "), "{out}");
        assert_eq!(
            export_json(&app, &key).await,
            before,
            "the server is back as it was, reviews and overrides included"
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.echo", "args": { "message": "still here" } }]),
        )
        .await;
        assert_eq!(out[0]["result"], "Echo: still here", "{out:?}");
    }
);

db_test!(
    an_apply_refused_by_the_server_does_not_echo_its_credential,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let up = fake_upstream::start().await;
        configured(&app, &key, &up).await;
        let before = export_json(&app, &key).await;
        // The server quotes the Authorization it received in every error, as a careless one
        // might; changing its settings in place lists its tools with them.
        up.state
            .echo_auth_in_errors
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut file = before.clone();
        file["mcp_servers"][0]["timeout_ms"] = json!(9000);
        let (status, out) = apply(&app, &key, &serde_json::to_string(&file).unwrap(), false).await;
        assert_ne!(status, 200, "{out}");
        let text = out.to_string();
        assert!(
            !text.contains(TOKEN_VALUE) && text.contains("[redacted:FAKE_TOKEN]"),
            "{text}"
        );
        up.state
            .echo_auth_in_errors
            .store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(export_json(&app, &key).await, before, "nothing changed");
    }
);

db_test!(
    tool_sets_in_a_file_are_checked_whole_and_undone_with_the_rest,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let before = export_json(&app, &key).await;
        // A set naming a tool nobody has, with nothing else changing the catalog: refused.
        let (status, out) = apply(&app, &key, "version: 1\ntool_sets:\n  - { slug: s, name: S, tools: [{ tool: no_such_tool }] }\n  - { slug: s, name: T, tools: [{ tool: vault_list }] }\n", false).await;
        assert_eq!(status, 422, "{out}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("tool_sets: s is listed twice"),
            "{message}"
        );
        assert!(message.contains("no_such_tool"), "{message}");
        assert_eq!(export_json(&app, &key).await, before);

        // An app and a set over a tool the app does not have: checked after the app is made,
        // refused, and the app is taken out again.
        let yaml = format!(
            "version: 1\napps:\n  - {}\ntool_sets:\n  - {{ slug: s, name: S, tools: [{{ tool: orders_nothing }}] }}\n",
            app_definition("https://orders.example.com")
        );
        let (status, out) = apply(&app, &key, &yaml, false).await;
        assert_eq!(status, 422, "{out}");
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("+ tool_set s")
                && message.contains("orders_nothing")
                && message.contains("undone"),
            "{message}"
        );
        assert_eq!(export_json(&app, &key).await, before, "the app was undone");

        // The same with a tool the app has: made, and listed at its endpoint.
        let yaml = format!(
            "version: 1\napps:\n  - {}\ntool_sets:\n  - {{ slug: s, name: S, tools: [{{ tool: orders_echo_message, name: echo }}] }}\n",
            app_definition("https://orders.example.com")
        );
        let (status, out) = apply(&app, &key, &yaml, false).await;
        assert_eq!(status, 200, "{out}");
        let (status, sets) = send(
            &app,
            &key,
            reqwest::Method::GET,
            "/v1/tool-sets",
            Value::Null,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            sets["data"][0]["tools"],
            json!([{ "tool": "orders_echo_message", "name": "echo" }])
        );

        // A set keys are limited to stays unless they change first.
        let (status, made) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/api-keys",
            json!({ "name": "desk", "tool_sets": ["s"] }),
        )
        .await;
        assert_eq!(status, 201, "{made}");
        let (status, out) = apply(&app, &key, "version: 1\ntool_sets: []\n", false).await;
        assert_eq!(status, 422, "{out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("keys are limited to it"),
            "{out}"
        );
        let key_id = made["id"].as_str().unwrap();
        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            &format!("/v1/api-keys/{key_id}"),
            json!({ "tool_sets": null }),
        )
        .await;
        assert_eq!(status, 200);
        let (status, out) = apply(&app, &key, "version: 1\ntool_sets: []\n", false).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["diff"], "- tool_set s\n");
    }
);
