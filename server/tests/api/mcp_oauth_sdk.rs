//! The official MCP Python SDK's OAuth client against the real server: from a bare 401 on /mcp
//! it discovers the metadata, registers itself, a portal user signs in and approves on the
//! consent page (without a browser: the same form posts), and the SDK then lists and calls the
//! meta-tools as that user; a refresh rotates the tokens and replaying the old refresh token
//! revokes the family. The script (tests/mcp_sdk/oauth_client.py) checks each step itself and
//! reports what it saw; this test asserts on that report. Like mcp_sdk.rs, the SDK lives in
//! `.venv` (scripts/setup.sh) and `WB_TEST_MCP_SDK=required` turns a missing SDK into a failure.

use std::process::Command;

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::PASSWORD;
use crate::mcp_sdk::python;
use crate::{app, db_test};

/// Runs the OAuth client script; None when the SDK is missing (skipped).
async fn run_oauth_client(base: String, email: &str) -> Option<Value> {
    let py = python()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_sdk/oauth_client.py");
    let email = email.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(script)
            .arg(base)
            .arg(email)
            .arg(PASSWORD)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python OAuth client failed:\n{}\nreport: {stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {stdout}")))
}

db_test!(
    the_official_python_sdk_authorizes_itself_with_oauth,
    |backend| {
        let app = app!(backend);
        let ada = app.user("ada@example.com", Role::Admin).await;
        // A policy in the project, so that the consent page offers an admin the policy chooser.
        let key = app.api_key(&ada).await;
        let policy = app
            .http()
            .post(app.url("/v1/policies"))
            .bearer_auth(&key)
            .json(&json!({ "name": "oauth agents", "tool_allowlist": { "mode": "open" } }))
            .send()
            .await
            .unwrap();
        assert_eq!(policy.status(), 201);
        // The public URL is derived from the bind address: the test app's base URL.
        let Some(report) = run_oauth_client(app.url(""), "ada@example.com").await else {
            return;
        };
        let public = app.url("");
        assert_eq!(report["failures"], json!([]), "{report}");

        // Found from the 401: metadata, registration, the code exchange, then the retried call.
        let requests = report["requests"].as_array().unwrap();
        assert_eq!(requests[0]["path"], "/mcp");
        assert_eq!(requests[0]["status"], 401);
        assert_eq!(
            requests[0]["www_authenticate"],
            format!(
                "Bearer resource_metadata=\"{public}/.well-known/oauth-protected-resource/mcp\""
            )
        );
        let step = |method: &str, path: &str| {
            requests
                .iter()
                .position(|r| r["method"] == method && r["path"] == path)
                .unwrap_or_else(|| panic!("no {method} {path} in {requests:?}"))
        };
        let order = [
            step("GET", "/.well-known/oauth-protected-resource/mcp"),
            step("GET", "/.well-known/oauth-authorization-server"),
            step("POST", "/oauth/register"),
            step("POST", "/oauth/token"),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{requests:?}");
        assert_eq!(requests[order[2]]["status"], 201);

        assert_eq!(
            report["protected_resource"]["resource"],
            format!("{public}/mcp")
        );
        assert_eq!(
            report["protected_resource"]["authorization_servers"],
            json!([public])
        );
        assert_eq!(
            report["protected_resource"]["scopes_supported"],
            json!(["mcp"])
        );
        let asm = &report["authorization_server"];
        assert_eq!(asm["issuer"], public);
        assert_eq!(
            asm["authorization_endpoint"],
            format!("{public}/oauth/authorize")
        );
        assert_eq!(asm["token_endpoint"], format!("{public}/oauth/token"));
        assert_eq!(
            asm["registration_endpoint"],
            format!("{public}/oauth/register")
        );
        assert_eq!(asm["revocation_endpoint"], format!("{public}/oauth/revoke"));
        assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(
            report["client"],
            json!({ "client_id_prefix": "mcpc_", "token_endpoint_auth_method": "none" })
        );

        // The person's part: login, consent page, the redirect back with code, state and issuer.
        let consent = &report["consent"];
        assert_eq!(consent["anonymous"]["location_path"], "/login");
        assert_eq!(consent["anonymous"]["next_keeps_request"], true);
        assert_eq!(consent["sign_in"]["returns_to_authorize"], true);
        assert_eq!(consent["page"]["shows_client_name"], true);
        assert_eq!(consent["page"]["shows_redirect_host"], true);
        assert_eq!(consent["page"]["shows_what_it_may_do"], true);
        assert_eq!(consent["page"]["admin_sees_policy_select"], true);
        assert_eq!(consent["decision"]["state_echoed"], true);
        assert_eq!(consent["decision"]["iss"], public);

        // Acting as the person who approved.
        assert_eq!(
            report["tokens"],
            json!({ "access_prefix": "wbat_", "refresh_prefix": "wbrt_", "token_type": "Bearer", "expires_in": 3600, "scope": "mcp" })
        );
        let mut tools: Vec<&str> = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        tools.sort_unstable();
        let mut expected = [
            "search_tools",
            "get_tool_schema",
            "execute_tools",
            "whoami",
            "list_integrations",
            "connect",
            "wait_for_connection",
            "get_auth_url",
            "curl_session",
        ];
        expected.sort_unstable();
        assert_eq!(tools, expected);
        assert_eq!(
            report["whoami"],
            json!({ "id": ada.user_id, "email": "ada@example.com" })
        );

        // Rotation, then reuse detection.
        let refresh = &report["refresh"];
        assert_eq!(refresh["status"], 200);
        assert_eq!(refresh["access_rotated"], true);
        assert_eq!(refresh["refresh_rotated"], true);
        assert_eq!(refresh["new_access_whoami"], "ada@example.com");
        assert_eq!(refresh["new_access_mcp_status"], 200);
        assert_eq!(refresh["replay_status"], 400);
        assert_eq!(refresh["replay_error"], "invalid_grant");
        assert_eq!(refresh["after_replay_mcp_status"], 401);
        assert_eq!(refresh["newest_refresh_error"], "invalid_grant");
    }
);
