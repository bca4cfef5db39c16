//! Issue 31 against the reference implementation: a remote MCP server of the official MCP
//! Python SDK, OAuth-protected by the SDK's own authorization server (`tests/mcp_sdk/
//! oauth_server.py`). workbench discovers it from its 401, registers itself dynamically (the
//! server offers no client ID metadata documents) or uses a client registered beforehand, and
//! each user signs in on the server's own sign-in page; calls carry each user's token, an
//! expired one is refreshed once after the 401, and disconnecting revokes it there.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use workbench_core::auth::Role;

use crate::connections::{location, path_of};
use crate::helpers::{admin_with_key, execute, mcp_call, within, Options, TestApp, PASSWORD};
use crate::{app, db_test};

/// The SDK's OAuth-protected server on a free loopback port, killed when dropped.
struct SdkServer {
    _child: tokio::process::Child,
    base: String,
    http: reqwest::Client,
}

impl SdkServer {
    async fn start() -> Option<SdkServer> {
        let py = crate::mcp_sdk::python()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_sdk/oauth_server.py");
        // mcp 2.3.0 refuses HTTP Basic client authentication without a client_id in the body
        // and a public client's revocation without a client_secret field (python-sdk#3545,
        // #3508); the flag makes the server accept both, as RFC 6749 and RFC 7009 do.
        let mut child = tokio::process::Command::new(py)
            .arg(script)
            .arg(port.to_string())
            .arg("--fix-sdk-client-auth")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("the SDK server did not start within a minute")
            .unwrap();
        assert_eq!(ready.as_deref(), Some("READY"));
        Some(SdkServer {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Unrevoked, unexpired tokens the server holds for `user`.
    async fn live(&self, user: &str) -> u64 {
        let v: Value = self
            .http
            .get(self.url(&format!("/test/live?user={user}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["live"].as_u64().unwrap()
    }

    /// `user` signs in on the server's page the authorization URL leads to; where the server
    /// sends the browser back.
    async fn sign_in(&self, authorize: &str, user: &str) -> String {
        let res = self.http.get(authorize).send().await.unwrap();
        assert!(res.status().is_redirection(), "{}", res.status());
        let login = location(&res);
        let request = url::Url::parse(&login)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "request")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("{login}"));
        let res = self
            .http
            .post(self.url("/login"))
            .form(&[("request", request.as_str()), ("username", user)])
            .send()
            .await
            .unwrap();
        assert!(res.status().is_redirection(), "{}", res.status());
        location(&res)
    }
}

/// The workbench user `email` (holding `key`) connects `remote`, signing in upstream as `user`;
/// the authorization URL workbench sent the browser to.
async fn connect(app: &TestApp, sdk: &SdkServer, key: &str, email: &str, user: &str) -> String {
    let (link, _) = mcp_call(app, key, "connect", json!({ "integration": "remote" })).await;
    let b = app.browser();
    assert!(b.sign_in(email, PASSWORD).await.status().is_success());
    let res = b.get(&path_of(link["url"].as_str().unwrap())).await;
    let authorize = location(&res);
    assert!(authorize.starts_with(&sdk.url("/authorize")), "{authorize}");
    let back = sdk.sign_in(&authorize, user).await;
    assert!(back.starts_with(&app.url("/oauth/callback")), "{back}");
    assert!(b.get(&path_of(&back)).await.status().is_redirection());
    let (waited, _) = mcp_call(
        app,
        key,
        "wait_for_connection",
        json!({ "connectionId": link["connectionId"], "timeoutSec": 5 }),
    )
    .await;
    assert_eq!(waited, json!({ "status": "CONNECTED" }));
    authorize
}

/// Ada (`key`) calls a tool that needs more access than she granted: the server's 403
/// insufficient_scope becomes NOT_CONNECTED naming the scopes, connecting again asks for them
/// and the call then runs; later connects keep asking for them.
async fn step_up(app: &TestApp, sdk: &SdkServer, key: &str) {
    let report = execute(
        app,
        key,
        json!([{ "tool": "remote.admin_report", "args": {} }]),
    )
    .await[0]
        .clone();
    assert_eq!(report["code"], "NOT_CONNECTED", "{report}");
    assert_eq!(
        report["required_scopes"],
        json!(["mcp:admin", "mcp:tools"]),
        "{report}"
    );
    let said = report["error"].as_str().unwrap();
    assert!(
        said.contains("mcp:admin") && said.contains("call connect"),
        "{said}"
    );
    let authorize = connect(app, sdk, key, "ada@example.com", "alice").await;
    assert_eq!(scopes_asked(&authorize), ["mcp:admin", "mcp:tools"]);
    let report = execute(
        app,
        key,
        json!([{ "tool": "remote.admin_report", "args": {} }]),
    )
    .await[0]
        .clone();
    assert_eq!(report["result"]["user"], "alice", "{report}");
    let mut granted: Vec<&str> = report["result"]["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    granted.sort();
    assert_eq!(granted, ["mcp:admin", "mcp:tools"], "{report}");
    // A later reconnect keeps asking for what the server needed.
    let authorize = connect(app, sdk, key, "ada@example.com", "alice").await;
    assert_eq!(scopes_asked(&authorize), ["mcp:admin", "mcp:tools"]);
}

/// The scopes an authorization URL asks for.
fn scopes_asked(authorize: &str) -> Vec<String> {
    let url = url::Url::parse(authorize).unwrap();
    let (_, scope) = url.query_pairs().find(|(k, _)| k == "scope").unwrap();
    let mut v: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
    v.sort();
    v
}

/// `email` disconnects `remote` on the portal's Connections page.
async fn disconnect(app: &TestApp, email: &str) {
    let b = app.browser();
    assert!(b.sign_in(email, PASSWORD).await.status().is_success());
    let res = b.call("disconnect", &[("integration", "remote")]).await;
    assert!(res.status().is_success(), "{}", res.status());
}

async fn whoami(app: &TestApp, key: &str) -> Value {
    execute(app, key, json!([{ "tool": "remote.whoami", "args": {} }])).await[0].clone()
}

async fn register(app: &TestApp, key: &str, url: &str, auth: Value) -> Value {
    let res = app
        .http()
        .post(app.url("/v1/mcp/servers"))
        .bearer_auth(key)
        .json(&json!({ "name": "remote", "url": url, "auth": auth }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (body["auth_type"].as_str(), body["state"].as_str()),
        (Some("user_oauth"), Some("awaiting_sign_in")),
        "{body}"
    );
    body
}

/// The tools are listed with the admin's connection and reach the catalog.
async fn listed(app: &TestApp, key: &str) {
    within(
        "remote.whoami in the catalog",
        std::time::Duration::from_secs(20),
        async || {
            app.http()
                .get(app.url("/v1/tools/remote.whoami"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
                == 200
        },
    )
    .await;
}

db_test!(
    each_user_signs_in_to_the_python_sdks_oauth_server_through_dynamic_registration,
    |backend| {
        let Some(sdk) = SdkServer::start().await else {
            return;
        };
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        register(
            &app,
            &key,
            &sdk.url("/mcp"),
            json!({ "type": "user_oauth" }),
        )
        .await;

        connect(&app, &sdk, &key, "ada@example.com", "alice").await;
        listed(&app, &key).await;
        let ada = whoami(&app, &key).await;
        assert_eq!(ada["result"]["user"], "alice", "{ada}");
        assert_eq!(ada["result"]["scopes"], json!(["mcp:tools"]), "{ada}");
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["code"], "NOT_CONNECTED", "{bob_out}");
        // workbench registered itself for every scope the authorization server offers, so the
        // SDK (which checks requested scopes against the registration) allows a step-up.
        step_up(&app, &sdk, &key).await;

        connect(&app, &sdk, &bob_key, "bob@example.com", "bobby").await;
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["result"]["user"], "bobby", "{bob_out}");
        assert_eq!(
            bob_out["result"]["client_id"], ada["result"]["client_id"],
            "one client, registered once"
        );

        // Every access token expires at the server: the next call gets its 401, refreshes
        // once and is made again.
        let res = sdk.http.post(sdk.url("/test/expire")).send().await.unwrap();
        assert!(res.status().is_success());
        let ada = whoami(&app, &key).await;
        assert_eq!(ada["result"]["user"], "alice", "{ada}");
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["result"]["user"], "bobby", "{bob_out}");

        // Bob disconnects: the server revoked his tokens; his next call is not connected.
        assert!(sdk.live("bobby").await > 0);
        disconnect(&app, "bob@example.com").await;
        assert_eq!(
            sdk.live("bobby").await,
            0,
            "tokens live upstream after disconnect"
        );
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["code"], "NOT_CONNECTED", "{bob_out}");
        assert!(sdk.live("alice").await > 0, "ada's tokens untouched");
    }
);

db_test!(
    a_client_registered_beforehand_signs_in_to_the_python_sdks_server_with_its_secret,
    |backend| {
        let Some(sdk) = SdkServer::start().await else {
            return;
        };
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        // The server's owner registers a confidential client for this workbench.
        let client: Value = sdk
            .http
            .post(sdk.url("/register"))
            .json(&json!({
                "redirect_uris": [app.url("/oauth/callback")],
                "token_endpoint_auth_method": "client_secret_basic",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "scope": "mcp:tools mcp:admin",
                "client_name": "workbench (pre-registered)"
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let client_id = client["client_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{client}"));
        let secret = client["client_secret"].as_str().unwrap();
        let out = execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "SDK_CLIENT_SECRET", "value": secret } }])).await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        register(
            &app,
            &key,
            &sdk.url("/mcp"),
            json!({ "type": "user_oauth", "client_id": client_id, "secret_ref": "SDK_CLIENT_SECRET" }),
        )
        .await;

        connect(&app, &sdk, &key, "ada@example.com", "alice").await;
        listed(&app, &key).await;
        let ada = whoami(&app, &key).await;
        assert_eq!(
            (
                ada["result"]["user"].as_str(),
                ada["result"]["client_id"].as_str()
            ),
            (Some("alice"), Some(client_id)),
            "{ada}"
        );
        // The secret never comes back, not even from the upstream's own answer.
        assert!(!ada.to_string().contains(secret));

        step_up(&app, &sdk, &key).await;

        disconnect(&app, "ada@example.com").await;
        assert_eq!(
            sdk.live("alice").await,
            0,
            "tokens live upstream after disconnect"
        );
    }
);

db_test!(
    a_set_gives_each_user_the_prompts_and_resources_of_a_server_they_sign_in_to_as_themselves,
    |backend| {
        let Some(sdk) = SdkServer::start().await else {
            return;
        };
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        register(
            &app,
            &key,
            &sdk.url("/mcp"),
            json!({ "type": "user_oauth" }),
        )
        .await;
        connect(&app, &sdk, &key, "ada@example.com", "alice").await;
        listed(&app, &key).await;
        let (status, set) = crate::confirmations::post(
            &app,
            &key,
            "/v1/tool-sets",
            json!({ "slug": "remote", "name": "Remote", "prompts_and_resources": true,
                    "tools": [{ "tool": "remote.whoami" }] }),
        )
        .await;
        assert_eq!(status, 201, "{set}");
        let rpc = |key: String, method: &'static str, params: Value| {
            let app = &app;
            async move {
                crate::tool_sets::set_rpc(app, &key, "remote", method, params)
                    .await
                    .1
            }
        };

        // Listed with the registering admin's connection, approved as that first listing is.
        let prompts = rpc(key.clone(), "prompts/list", json!({})).await;
        assert_eq!(
            prompts["result"]["prompts"][0]["name"], "remote.greeting",
            "{prompts}"
        );
        let resources = rpc(key.clone(), "resources/list", json!({})).await;
        assert_eq!(
            resources["result"]["resources"][0]["uri"], "wb://remote/whoami://me",
            "{resources}"
        );

        // Each user gets and reads them as themselves, with their own connection.
        let greeting = json!({ "name": "remote.greeting" });
        let me = json!({ "uri": "wb://remote/whoami://me" });
        let out = rpc(key.clone(), "prompts/get", greeting.clone()).await;
        assert_eq!(
            out["result"]["messages"][0]["content"]["text"], "Hello, alice!",
            "{out}"
        );
        let out = rpc(key.clone(), "resources/read", me.clone()).await;
        assert_eq!(out["result"]["contents"][0]["text"], "alice", "{out}");
        let out = rpc(bob_key.clone(), "prompts/get", greeting.clone()).await;
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("you have not connected remote"),
            "bob is not handed ada's session: {out}"
        );
        connect(&app, &sdk, &bob_key, "bob@example.com", "bobby").await;
        let out = rpc(bob_key.clone(), "prompts/get", greeting).await;
        assert_eq!(
            out["result"]["messages"][0]["content"]["text"], "Hello, bobby!",
            "{out}"
        );
        let out = rpc(bob_key.clone(), "resources/read", me.clone()).await;
        assert_eq!(out["result"]["contents"][0]["text"], "bobby", "{out}");

        // An expired token is refreshed once, as for tools.
        let res = sdk.http.post(sdk.url("/test/expire")).send().await.unwrap();
        assert!(res.status().is_success());
        let out = rpc(bob_key.clone(), "resources/read", me.clone()).await;
        assert_eq!(out["result"]["contents"][0]["text"], "bobby", "{out}");
    }
);
