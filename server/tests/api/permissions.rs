//! The authorization boundary (issue 27, D21): every route the server mounts and every portal
//! server function, called by every kind of principal, answers as core's permission table
//! says; the nine meta-tools under a limited key; and the specific escapes the outside review
//! found (a limited admin key administering, the proxy outside the policy, a member reading
//! the project's records).

use std::collections::HashMap;

use serde_json::{json, Value};
use workbench_core::auth::{Access, Operation, Principal, Role};
use workbench_core::policy::{Mode, PolicyInput, ToolAllowlist};
use workbench_server::routes::{self, Credential, RouteSpec};

use crate::helpers::{mcp_call, Browser, TestApp, PASSWORD};
use crate::{app, db_test};

/// Every kind of caller the boundary must tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Anonymous,
    MemberKey,
    MemberSession,
    AdminKey,
    AdminSession,
    LimitedAdminKey,
    SetLimitedAdminKey,
    OAuthGrant,
    ProxyToken,
    OtherProjectAdminKey,
}

const KINDS: [Kind; 10] = [
    Kind::Anonymous,
    Kind::MemberKey,
    Kind::MemberSession,
    Kind::AdminKey,
    Kind::AdminSession,
    Kind::LimitedAdminKey,
    Kind::SetLimitedAdminKey,
    Kind::OAuthGrant,
    Kind::ProxyToken,
    Kind::OtherProjectAdminKey,
];

/// One caller: its credential and the principal core resolves it to.
struct Caller {
    bearer: Option<String>,
    browser: Option<Browser>,
    principal: Option<Principal>,
}

struct World {
    callers: HashMap<Kind, Caller>,
    admin: Principal,
    admin_key: String,
    limited_key: String,
}

/// A project with an admin, a member, a policy-limited admin key (allowed `hackernews_*` only),
/// an MCP OAuth grant, a proxy token, and a second project with its own admin.
async fn world(app: &TestApp) -> World {
    let admin = app.user("ada@example.com", Role::Admin).await;
    let member = app.user("mo@example.com", Role::Member).await;
    let admin_key = app.api_key(&admin).await;
    let member_key = app.api_key(&member).await;
    let policy = app
        .wb
        .policies()
        .create(
            &admin,
            &PolicyInput {
                limits: vec![],
                name: "hn only".into(),
                tool_allowlist: ToolAllowlist {
                    mode: Mode::Allowlist,
                    allow: vec!["hackernews_*".into()],
                    deny: vec![],
                    require_confirmation: vec![],
                },
                default: false,
            },
        )
        .await
        .unwrap();
    let limited_key = app
        .wb
        .accounts()
        .create_api_key_with_policy(&admin, "limited", Some(&policy.id))
        .await
        .unwrap()
        .secret
        .expose()
        .to_owned();
    app.wb
        .tool_sets()
        .create(
            &admin,
            &workbench_core::toolsets::ToolSetInput {
                slug: "vault".into(),
                name: "Vault".into(),
                description: String::new(),
                tools: vec![serde_json::from_value(json!({ "tool": "vault_list" })).unwrap()],
                prompts_and_resources: false,
            },
        )
        .await
        .unwrap();
    let set_key = app
        .wb
        .accounts()
        .create_api_key_with_policy(&admin, "set-limited", None)
        .await
        .unwrap();
    app.wb
        .tool_sets()
        .limit_key(&admin, &set_key.info.id, Some(&["vault".to_owned()]))
        .await
        .unwrap();
    let set_key = set_key.secret.expose().to_owned();
    let (other_user, _) = app
        .wb
        .accounts()
        .create_user("eve@example.com", PASSWORD, Some("elsewhere"), Role::Admin)
        .await
        .unwrap();
    let other = app
        .wb
        .accounts()
        .principal_for_user(&other_user.id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(other.project_id, admin.project_id);
    let other_key = app.api_key(&other).await;

    let member_browser = crate::mcp_oauth::signed_in(app, "mo@example.com").await;
    let admin_browser = crate::mcp_oauth::signed_in(app, "ada@example.com").await;
    let client_id = crate::mcp_oauth::client(app).await;
    let grant = crate::mcp_oauth::authorized(app, &admin_browser, &client_id).await;
    let access = grant["access_token"].as_str().unwrap().to_owned();
    let ctx = workbench_core::oauth::OAuthContext::for_public_url(&app.base);
    let grant_principal = app.wb.oauth().authenticate(&ctx, &access).await.unwrap();
    let admin_by_key = app
        .wb
        .accounts()
        .authenticate_api_key(&admin_key)
        .await
        .unwrap();
    let (proxy, _) = app
        .wb
        .proxy_tokens()
        .mint(&admin_by_key, vec!["github".into()], 900)
        .await
        .unwrap();
    let mut proxy_principal = admin_by_key.clone();
    proxy_principal.via = workbench_core::auth::Via::ProxyToken;

    let key = |k: &str| {
        let (wb, k) = (app.wb.clone(), k.to_owned());
        async move { wb.accounts().authenticate_api_key(&k).await.unwrap() }
    };
    let mut callers = HashMap::new();
    callers.insert(
        Kind::Anonymous,
        Caller {
            bearer: None,
            browser: None,
            principal: None,
        },
    );
    callers.insert(
        Kind::MemberKey,
        Caller {
            bearer: Some(member_key.clone()),
            browser: None,
            principal: Some(key(&member_key).await),
        },
    );
    callers.insert(
        Kind::AdminKey,
        Caller {
            bearer: Some(admin_key.clone()),
            browser: None,
            principal: Some(admin_by_key),
        },
    );
    callers.insert(
        Kind::LimitedAdminKey,
        Caller {
            bearer: Some(limited_key.clone()),
            browser: None,
            principal: Some(key(&limited_key).await),
        },
    );
    callers.insert(
        Kind::SetLimitedAdminKey,
        Caller {
            bearer: Some(set_key.clone()),
            browser: None,
            principal: Some(key(&set_key).await),
        },
    );
    callers.insert(
        Kind::OtherProjectAdminKey,
        Caller {
            bearer: Some(other_key.clone()),
            browser: None,
            principal: Some(key(&other_key).await),
        },
    );
    callers.insert(
        Kind::OAuthGrant,
        Caller {
            bearer: Some(access),
            browser: None,
            principal: Some(grant_principal),
        },
    );
    callers.insert(
        Kind::ProxyToken,
        Caller {
            bearer: Some(proxy),
            browser: None,
            principal: Some(proxy_principal),
        },
    );
    callers.insert(
        Kind::MemberSession,
        Caller {
            bearer: None,
            browser: Some(member_browser),
            principal: Some(member.clone()),
        },
    );
    callers.insert(
        Kind::AdminSession,
        Caller {
            bearer: None,
            browser: Some(admin_browser),
            principal: Some(admin.clone()),
        },
    );
    World {
        callers,
        admin,
        admin_key,
        limited_key,
    }
}

/// The concrete path of a route: placeholders become ids nobody has.
fn concrete(path: &str) -> String {
    path.replace("{integration}", "github")
        .replace("{id}", "x_none")
        .replace("{name}", "none_such")
        .replace("{pattern}", "none.example")
        .replace("{slug}", "none-such")
        .replace("{*rest}", "nothing/here")
}

/// Whether a caller of `kind` presents the credential `credential` wants.
fn presents(kind: Kind, credential: Credential) -> bool {
    use Kind::*;
    match credential {
        Credential::None | Credential::MetricsToken => true,
        Credential::ApiKey => matches!(
            kind,
            MemberKey | AdminKey | LimitedAdminKey | SetLimitedAdminKey | OtherProjectAdminKey
        ),
        // The grant's token is issued for /mcp: a set's endpoint refuses it like any stranger's.
        Credential::ApiKeyOrSetOAuth => matches!(
            kind,
            MemberKey | AdminKey | LimitedAdminKey | SetLimitedAdminKey | OtherProjectAdminKey
        ),
        Credential::ApiKeyOrOAuth => matches!(
            kind,
            MemberKey
                | AdminKey
                | LimitedAdminKey
                | SetLimitedAdminKey
                | OtherProjectAdminKey
                | OAuthGrant
        ),
        Credential::Session | Credential::SessionPage => {
            matches!(kind, MemberSession | AdminSession)
        }
        Credential::ProxyToken => kind == ProxyToken,
    }
}

async fn send(
    app: &TestApp,
    caller: &Caller,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> u16 {
    let client = match &caller.browser {
        Some(b) => b.client.clone(),
        None => app.http(),
    };
    let method = if method == "ANY" { "GET" } else { method };
    let mut req = client.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        app.url(path),
    );
    if let Some(token) = &caller.bearer {
        req = req.bearer_auth(token);
    }
    // The sign-in page's form: a browser posts it with our origin (the CSRF layer refuses a
    // POST without one, whoever sends it; that refusal is tested in sso.rs).
    if path.starts_with("/sso/") && method == "POST" {
        req = req.header("origin", &app.origin);
    }
    if path == "/mcp" && method == "POST" {
        req = req
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} }));
    } else if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap().status().as_u16()
}

db_test!(
    every_route_answers_every_kind_of_principal_as_the_permission_table_says,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        let table: Vec<RouteSpec> = workbench_server::route_table(app.state());
        assert!(
            table.len() > 60,
            "the table lists every route ({} found)",
            table.len()
        );
        let mut checked = 0;
        for route in &table {
            let path = concrete(route.path);
            let body = matches!(route.method, "POST" | "PUT" | "PATCH").then(|| json!({}));
            for kind in KINDS {
                let caller = &w.callers[&kind];
                let status = send(&app, caller, route.method, &path, body.clone()).await;
                let what = format!(
                    "{kind:?} {} {} ({:?}, {:?})",
                    route.method, route.path, route.op, route.credential
                );
                match route.credential {
                    Credential::MetricsToken => {
                        assert!(matches!(status, 401 | 404), "{what}: {status}")
                    }
                    Credential::None => assert!(
                        status != 401 && status != 403,
                        "{what}: public, got {status}"
                    ),
                    Credential::SessionPage if !presents(kind, route.credential) => {
                        assert_eq!(status, 303, "{what}: sent to sign in")
                    }
                    credential if !presents(kind, credential) => {
                        assert_eq!(status, 401, "{what}: wrong credential")
                    }
                    _ => {
                        let allowed = caller.principal.as_ref().unwrap().allows(route.op);
                        if allowed {
                            assert!(
                                status != 401 && status != 403,
                                "{what}: allowed by the table, got {status}"
                            );
                        } else {
                            assert_eq!(status, 403, "{what}: refused by the table");
                        }
                    }
                }
                checked += 1;
            }
        }
        assert_eq!(checked, table.len() * KINDS.len());
    }
);

db_test!(
    every_portal_server_function_is_declared_and_answers_as_the_table_says,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        assert_eq!(
            routes::undeclared_server_fns(),
            Vec::<String>::new(),
            "server functions without a declared operation"
        );
        for (endpoint, op) in routes::SERVER_FNS {
            // Signing out would end the sessions the walk uses; it is public and tested elsewhere.
            if *endpoint == "sign_out" {
                continue;
            }
            for kind in [
                Kind::Anonymous,
                Kind::AdminKey,
                Kind::MemberSession,
                Kind::AdminSession,
            ] {
                let caller = &w.callers[&kind];
                let client = caller
                    .browser
                    .as_ref()
                    .map(|b| b.client.clone())
                    .unwrap_or_else(|| app.browser().client);
                let mut req = client
                    .post(app.url(&format!("/api/{endpoint}")))
                    .header("origin", &app.origin)
                    .form(&[("x", "")]);
                if let Some(token) = &caller.bearer {
                    req = req.bearer_auth(token);
                }
                let status = req.send().await.unwrap().status().as_u16();
                let what = format!("{kind:?} /api/{endpoint} ({op:?})");
                let allowed = match (&caller.browser, op.access()) {
                    (_, Access::Public) => true,
                    (None, _) => false,
                    (Some(_), _) => caller.principal.as_ref().unwrap().allows(*op),
                };
                if allowed {
                    assert!(
                        status != 401 && status != 403,
                        "{what}: allowed, got {status}"
                    );
                } else {
                    assert!(matches!(status, 401 | 403), "{what}: refused, got {status}");
                }
            }
        }
        // Undeclared endpoints are refused before any server function code runs.
        let res = w.callers[&Kind::AdminSession]
            .browser
            .as_ref()
            .unwrap()
            .call("no_such_function", &[])
            .await;
        assert_eq!(res.status(), 404);
    }
);

db_test!(
    a_policy_limited_admin_key_cannot_administer_anything,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        let http = app.http();
        let attempts: Vec<(&str, &str, Value)> = vec![
            (
                "POST",
                "/v1/mcp/servers",
                json!({ "name": "evil", "transport": "http", "url": "https://evil.example/mcp", "auth": { "type": "bearer", "secret_ref": "GITHUB_TOKEN" } }),
            ),
            (
                "POST",
                "/v1/mcp/servers/x_none/approve",
                json!({ "tools": ["all"] }),
            ),
            (
                "PATCH",
                "/v1/mcp/servers/x_none/tools/t",
                json!({ "side_effects": "none" }),
            ),
            ("POST", "/v1/apps", json!({ "name": "evil" })),
            (
                "POST",
                "/v1/apps/import",
                json!({ "url": "https://evil.example/openapi.json" }),
            ),
            (
                "POST",
                "/v1/email/domains",
                json!({ "domain": "evil.example" }),
            ),
            ("GET", "/v1/schedules/signing-secret", Value::Null),
            ("GET", "/v1/settings", Value::Null),
            (
                "PATCH",
                "/v1/settings",
                json!({ "audit_retention_days": 1 }),
            ),
            ("GET", "/v1/webhooks/deliveries", Value::Null),
            ("GET", "/v1/policies", Value::Null),
            ("POST", "/v1/egress", json!({ "pattern": "evil.example" })),
            ("DELETE", "/v1/egress/none.example", Value::Null),
            (
                "POST",
                "/v1/members",
                json!({ "email": "sock@evil.example", "password": "correct horse battery", "role": "admin" }),
            ),
            ("DELETE", "/v1/members/x_none", Value::Null),
            ("POST", "/v1/api-keys", json!({ "name": "escalate" })),
        ];
        for (method, path, body) in attempts {
            let mut req = http
                .request(
                    reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                    app.url(path),
                )
                .bearer_auth(&w.limited_key);
            if !body.is_null() {
                req = req.json(&body);
            }
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap();
            assert_eq!(status, 403, "{method} {path}: {body}");
            assert_eq!(body["error"]["code"], "forbidden", "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("policy"),
                "the refusal says why: {body}"
            );
        }
        // The unrestricted admin key still can.
        let res = http
            .get(app.url("/v1/settings"))
            .bearer_auth(&w.admin_key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let res = http
            .get(app.url("/v1/schedules/signing-secret"))
            .bearer_auth(&w.admin_key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
);

db_test!(
    an_oauth_grant_of_an_admin_neither_administers_nor_decides_confirmations,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        let grant = w.callers[&Kind::OAuthGrant].principal.clone().unwrap();
        assert!(grant.is_admin(), "the grant is an admin's");
        for op in [
            Operation::ConfirmationsDecide,
            Operation::McpServersManage,
            Operation::SettingsManage,
        ] {
            assert!(grant.require(op).is_err(), "{op:?}");
        }
        let err = app
            .wb
            .engine()
            .confirmations(&grant, None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, workbench_core::Error::Forbidden(_)),
            "{err:?}"
        );
        let err = app
            .wb
            .upstreams()
            .register(
                &grant,
                &json!({ "name": "x", "transport": "http", "url": "https://example.com/mcp" }),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, workbench_core::Error::Forbidden(_)),
            "{err:?}"
        );
    }
);

db_test!(
    the_meta_tools_follow_the_limited_keys_policy_for_integrations_and_the_proxy,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        // list_integrations shows only what the policy reaches.
        let (out, _) = mcp_call(&app, &w.limited_key, "list_integrations", json!({})).await;
        let names: Vec<&str> = out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"hackernews"), "{names:?}");
        assert!(!names.contains(&"github"), "{names:?}");
        let (out, _) = mcp_call(&app, &w.admin_key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "github"));
        // connect refuses an integration none of whose tools may run.
        let (out, is_error) = mcp_call(
            &app,
            &w.limited_key,
            "connect",
            json!({ "integration": "github" }),
        )
        .await;
        assert!(is_error, "{out}");
        assert!(
            out["error"]
                .as_str()
                .unwrap()
                .contains("not allowed by your policy"),
            "{out}"
        );
        let (out, is_error) = mcp_call(
            &app,
            &w.admin_key,
            "connect",
            json!({ "integration": "github" }),
        )
        .await;
        assert!(!is_error && out["connectionId"].is_string(), "{out}");
        // curl_session needs curl:<integration>: the limited key is refused, whatever it connected.
        let (out, is_error) = mcp_call(
            &app,
            &w.limited_key,
            "curl_session",
            json!({ "integrations": ["github"] }),
        )
        .await;
        assert!(is_error, "{out}");
        assert!(
            out["error"].as_str().unwrap().contains("curl:github"),
            "{out}"
        );
        // Every meta-tool answers the limited key (none is refused at the door).
        for (tool, args) in [
            ("search_tools", json!({ "query": "github pull request" })),
            (
                "get_tool_schema",
                json!({ "tool": "hackernews_top_stories" }),
            ),
            ("whoami", json!({})),
            (
                "wait_for_connection",
                json!({ "connectionId": "conn_none", "timeoutSec": 1 }),
            ),
            ("get_auth_url", json!({ "integration": "hackernews" })),
        ] {
            let (out, _) = mcp_call(&app, &w.limited_key, tool, args).await;
            assert_ne!(
                out["code"], "NOT_ALLOWED",
                "{tool} is refused at the door: {out}"
            );
        }
        // Running a tool outside the policy is refused per execution, naming the rule.
        let results = crate::helpers::execute(
            &app,
            &w.limited_key,
            json!([{ "tool": "github_merge_pr", "args": {} }]),
        )
        .await;
        assert_eq!(results[0]["code"], "NOT_ALLOWED", "{results:?}");
        let (out, _) = mcp_call(
            &app,
            &w.limited_key,
            "search_tools",
            json!({ "query": "github pull request" }),
        )
        .await;
        assert!(
            out["tools"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| !t["name"].as_str().unwrap().starts_with("github_")),
            "{out}"
        );
    }
);

db_test!(
    proxy_tokens_die_with_the_key_that_minted_them_and_follow_its_policy,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        let admin_by_key = app
            .wb
            .accounts()
            .authenticate_api_key(&w.admin_key)
            .await
            .unwrap();
        let (token, _) = app
            .wb
            .proxy_tokens()
            .mint(&admin_by_key, vec!["github".into()], 900)
            .await
            .unwrap();
        let status = |t: String| {
            let http = app.http();
            let url = app.url("/c/github/user");
            async move {
                http.get(url)
                    .bearer_auth(t)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        // Not connected: the proxy gets as far as the credential.
        assert_eq!(status(token.clone()).await, 409);
        // A policy attached to the key afterwards is asked on the next request.
        let policy = app
            .wb
            .policies()
            .create(
                &w.admin,
                &PolicyInput {
                    limits: vec![],
                    name: "read only".into(),
                    tool_allowlist: ToolAllowlist {
                        mode: Mode::Allowlist,
                        allow: vec!["github_get_*".into()],
                        deny: vec![],
                        require_confirmation: vec![],
                    },
                    default: false,
                },
            )
            .await
            .unwrap();
        let key_id = admin_by_key.api_key_id.clone().unwrap();
        app.wb
            .policies()
            .attach(&w.admin, &key_id, Some(&policy.id))
            .await
            .unwrap();
        assert_eq!(
            status(token.clone()).await,
            403,
            "the key's new policy does not allow curl:github"
        );
        app.wb
            .policies()
            .attach(&w.admin, &key_id, None)
            .await
            .unwrap();
        assert_eq!(status(token.clone()).await, 409);
        // Revoking the key ends its tokens at once.
        app.wb
            .accounts()
            .revoke_api_key(&w.admin, &key_id)
            .await
            .unwrap();
        assert_eq!(status(token).await, 401);
    }
);

db_test!(
    a_member_sees_only_its_own_usage_and_cannot_touch_the_webhook_signing_secret,
    |backend| {
        let app = app!(backend);
        let w = world(&app).await;
        let member = w.callers[&Kind::MemberKey].principal.clone().unwrap();
        let member_key = w.callers[&Kind::MemberKey].bearer.clone().unwrap();
        // The admin makes calls; the member makes one.
        for _ in 0..3 {
            crate::helpers::execute(
                &app,
                &w.admin_key,
                json!([{ "tool": "vault_list", "args": {} }]),
            )
            .await;
        }
        crate::helpers::execute(
            &app,
            &member_key,
            json!([{ "tool": "vault_list", "args": {} }]),
        )
        .await;
        let day = &workbench_core::clock::rfc3339(app.wb.clock().now_ms())[..10];
        let usage = |key: String| {
            let http = app.http();
            let url = app.url(&format!("/v1/usage?from={day}&to={day}&group_by=key"));
            async move {
                http.get(url)
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap()
            }
        };
        let total = |v: &Value| -> i64 {
            v["data"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|g| g["tool_call"].as_i64().unwrap_or(0))
                .sum()
        };
        let member_view = usage(member_key.clone()).await;
        let admin_view = usage(w.admin_key.clone()).await;
        assert_eq!(total(&member_view), 1, "{member_view}");
        assert_eq!(total(&admin_view), 4, "{admin_view}");
        // The webhook's signing secret is protected like app and server secrets.
        app.wb
            .vault()
            .set(&w.admin, "HOOK_SIGNING", "s3cret-signing-value")
            .await
            .unwrap();
        app.wb
            .webhooks()
            .set(
                &w.admin,
                Some(workbench_core::notify::WebhookConfig {
                    url: "https://hooks.example.com/wb".into(),
                    secret_ref: "HOOK_SIGNING".into(),
                }),
            )
            .await
            .unwrap();
        let err = app
            .wb
            .vault()
            .set(&member, "HOOK_SIGNING", "attacker-chosen-value")
            .await
            .unwrap_err();
        assert!(
            matches!(err, workbench_core::Error::Forbidden(_)),
            "{err:?}"
        );
        let err = app
            .wb
            .vault()
            .delete(&member, "HOOK_SIGNING")
            .await
            .unwrap_err();
        assert!(
            matches!(err, workbench_core::Error::Forbidden(_)),
            "{err:?}"
        );
        app.wb
            .vault()
            .set(&w.admin, "HOOK_SIGNING", "rotated-signing-value")
            .await
            .unwrap();
    }
);

db_test!(
    the_registry_masks_credentials_and_held_tools_for_whoever_may_not_edit_or_review,
    |backend| {
        let app = app!(
            backend,
            crate::helpers::Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let w = world(&app).await;
        let upstream = crate::fake_upstream::start().await;
        let url = format!("{}?token=registry-url-secret", upstream.url());
        let res = app
            .http()
            .post(app.url("/v1/mcp/servers"))
            .bearer_auth(&w.admin_key)
            .json(&json!({ "name": "fake", "transport": "http", "url": url }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let list = |key: String| {
            let http = app.http();
            let url = app.url("/v1/mcp/servers");
            async move {
                http.get(url)
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            }
        };
        assert!(
            list(w.admin_key.clone())
                .await
                .contains("registry-url-secret"),
            "the admin sees what it registered"
        );
        for kind in [Kind::MemberKey, Kind::LimitedAdminKey] {
            let text = list(w.callers[&kind].bearer.clone().unwrap()).await;
            assert!(!text.contains("registry-url-secret"), "{kind:?}: {text}");
            assert!(text.contains("parts hidden"), "{kind:?}: {text}");
        }
        let text = list(
            w.callers[&Kind::OtherProjectAdminKey]
                .bearer
                .clone()
                .unwrap(),
        )
        .await;
        assert!(
            !text.contains("fake"),
            "another project sees nothing: {text}"
        );
    }
);

db_test!(
    approving_a_call_held_for_an_oauth_client_runs_it_under_the_grants_policy_now,
    |backend| {
        let app = app!(backend);
        let admin = app.user("ada@example.com", Role::Admin).await;
        let policy = app
            .wb
            .policies()
            .create(
                &admin,
                &PolicyInput {
                    limits: vec![],
                    name: "ask first".into(),
                    tool_allowlist: ToolAllowlist {
                        mode: Mode::Allowlist,
                        allow: vec![],
                        deny: vec![],
                        require_confirmation: vec!["storage.put".into()],
                    },
                    default: false,
                },
            )
            .await
            .unwrap();
        let b = crate::mcp_oauth::signed_in(&app, "ada@example.com").await;
        let client_id = crate::mcp_oauth::client(&app).await;
        let grant =
            crate::mcp_oauth::authorized_with_policy(&app, &b, &client_id, &policy.id).await;
        let token = grant["access_token"].as_str().unwrap().to_owned();
        let put = json!([{ "tool": "storage.put", "args": { "key": "notes/a.txt", "content": "hello" } }]);
        let held = crate::helpers::execute(&app, &token, put.clone()).await;
        assert_eq!(held[0]["code"], "AWAITING_CONFIRMATION", "{held:?}");
        let first = held[0]["confirmation_id"].as_str().unwrap().to_owned();
        // The grant is held under its own identity: the same call again is the same confirmation.
        let again = crate::helpers::execute(&app, &token, put.clone()).await;
        assert_eq!(
            again[0]["confirmation_id"].as_str(),
            Some(first.as_str()),
            "{again:?}"
        );
        // The admin tightens the grant's policy before anyone approves: storage.put no longer runs.
        app.wb
            .policies()
            .replace(
                &admin,
                &policy.id,
                &PolicyInput {
                    limits: vec![],
                    name: "ask first".into(),
                    tool_allowlist: ToolAllowlist {
                        mode: Mode::Allowlist,
                        allow: vec![],
                        deny: vec!["storage.put".into()],
                        require_confirmation: vec![],
                    },
                    default: false,
                },
            )
            .await
            .unwrap();
        let call = app
            .wb
            .engine()
            .decide(&admin, &first, true, None)
            .await
            .unwrap();
        let call = serde_json::to_value(&call).unwrap();
        assert_eq!(
            call["error"]["code"], "NOT_ALLOWED",
            "the approval re-checks the grant's policy: {call}"
        );
        assert_eq!(call["error"]["rule"]["list"], "deny", "{call}");
        assert_ne!(call["status"], "succeeded", "{call}");
    }
);

db_test!(an_oauth_grant_is_rate_limited_like_an_api_key, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let b = crate::mcp_oauth::signed_in(&app, "ada@example.com").await;
    let client_id = crate::mcp_oauth::client(&app).await;
    let grant = crate::mcp_oauth::authorized_with(
        &app,
        &b,
        &client_id,
        &[("policy_id", ""), ("rate_limit_per_minute", "2")],
    )
    .await;
    let token = grant["access_token"].as_str().unwrap().to_owned();
    let list = json!([{ "tool": "vault_list", "args": {} }]);
    for _ in 0..2 {
        let out = crate::helpers::execute(&app, &token, list.clone()).await;
        assert!(out[0]["code"].is_null(), "{out:?}");
    }
    let out = crate::helpers::execute(&app, &token, list.clone()).await;
    assert_eq!(out[0]["code"], "RATE_LIMITED", "{out:?}");
    // The next minute opens a new window.
    app.clock.advance_ms(61_000);
    let out = crate::helpers::execute(&app, &token, list).await;
    assert!(out[0]["code"].is_null(), "{out:?}");
});
