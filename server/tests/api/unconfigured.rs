//! Tools whose configuration is missing (issue 29): a built-in without its provider or mail
//! server, a plugin whose OAuth client the operator did not configure. They stay in the catalog
//! as `unavailable` with the reason core gives, on every surface (search_tools,
//! get_tool_schema, REST, the portal's Tools page), and a call answers UNAVAILABLE with it.

use serde_json::{json, Value};
use workbench_core::builtin::SearchProvider;
use workbench_core::email::{EmailSettings, SmtpUrl};

use crate::fake_mail::SmtpSink;
use crate::fake_provider;
use crate::helpers::{admin_with_key, execute, mcp_call, Options, TestApp, PASSWORD};
use crate::{app, db_test};

async fn rest_tool(app: &TestApp, key: &str, name: &str) -> Value {
    app.http()
        .get(app.url(&format!("/v1/tools/{name}")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The search_tools entry for `name` among the hits for `query`.
async fn search_hit(app: &TestApp, key: &str, query: &str, name: &str) -> Value {
    let (found, _) = mcp_call(
        app,
        key,
        "search_tools",
        json!({ "query": query, "limit": 50 }),
    )
    .await;
    found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not found for {query:?}: {found}"))
}

/// The reason every surface shows for `tool`, checked to be the same words everywhere, and
/// that a call answers UNAVAILABLE with them.
async fn reason_everywhere(
    app: &TestApp,
    key: &str,
    query: &str,
    tool: &str,
    args: Value,
) -> String {
    let rest = rest_tool(app, key, tool).await;
    assert_eq!(rest["status"], "unavailable", "{rest}");
    let reason = rest["unavailable_reason"]
        .as_str()
        .unwrap_or_else(|| panic!("no reason: {rest}"))
        .to_owned();
    let hit = search_hit(app, key, query, tool).await;
    assert_eq!(
        (hit["status"].as_str(), hit["unavailable_reason"].as_str()),
        (Some("unavailable"), Some(reason.as_str())),
        "{hit}"
    );
    let (schema, is_error) = mcp_call(app, key, "get_tool_schema", json!({ "tool": tool })).await;
    assert!(!is_error, "{schema}");
    assert_eq!(
        (
            schema["status"].as_str(),
            schema["unavailable_reason"].as_str()
        ),
        (Some("unavailable"), Some(reason.as_str())),
        "{schema}"
    );
    let out = execute(app, key, json!([{ "tool": tool, "args": args }])).await;
    assert_eq!(out[0]["code"], "UNAVAILABLE", "{}", out[0]);
    assert_eq!(
        out[0]["error"].as_str(),
        Some(format!("tool unavailable: {reason}").as_str())
    );
    reason
}

db_test!(
    builtins_without_their_provider_or_mail_server_are_listed_unavailable_naming_the_setting,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let search = reason_everywhere(
            &app,
            &key,
            "search the web",
            "search.web",
            json!({ "query": "rust" }),
        )
        .await;
        assert!(
            search.starts_with("no search provider is configured")
                && search.contains("WB_SEARXNG_URL")
                && search.contains("BRAVE_SEARCH_API_KEY"),
            "{search}"
        );
        let email = reason_everywhere(
            &app,
            &key,
            "send an email",
            "email.send",
            json!({ "from": "a@example.com", "to": ["b@example.org"], "subject": "s", "text": "t" }),
        )
        .await;
        assert!(
            email.contains("--smtp-url") && email.contains("WB_SMTP_URL"),
            "{email}"
        );
        // What needs no configuration stays available, with no reason.
        let fetch = rest_tool(&app, &key, "http.fetch").await;
        assert_eq!(fetch["status"], "available");
        assert!(fetch.get("unavailable_reason").is_none(), "{fetch}");
        assert_eq!(
            search_hit(&app, &key, "fetch a url", "http.fetch").await["status"],
            "available"
        );

        // The portal's Tools page shows the same status and words.
        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let page: Value = b.call("tools_page", &[]).await.json().await.unwrap();
        let row = |name: &str| {
            page["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .cloned()
                .unwrap()
        };
        assert_eq!(
            (
                row("search.web")["status"].as_str(),
                row("search.web")["unavailable_reason"].as_str()
            ),
            (Some("unavailable"), Some(search.as_str()))
        );
        assert_eq!(row("http.fetch")["unavailable_reason"], Value::Null);
        let html = b.get("/tools?q=search+the+web").await.text().await.unwrap();
        assert!(
            html.contains("no search provider is configured"),
            "the page says why"
        );
    }
);

db_test!(configured_builtins_are_listed_available, |backend| {
    let sink = SmtpSink::start().await;
    let options = Options {
        web_search: Some(SearchProvider::searxng(
            "http://127.0.0.1:9/searx".parse().unwrap(),
        )),
        email: EmailSettings {
            smtp: Some(SmtpUrl::parse(&sink.url()).unwrap()),
            dns_server: None,
            hourly_limit: 100,
        },
        ..Default::default()
    };
    let app = app!(backend, options);
    let (_, key) = admin_with_key(&app).await;
    for tool in ["search.web", "email.send"] {
        let rest = rest_tool(&app, &key, tool).await;
        assert_eq!(rest["status"], "available", "{rest}");
        assert!(rest.get("unavailable_reason").is_none(), "{rest}");
    }
});

db_test!(
    an_oauth_plugin_without_a_client_id_is_listed_unavailable_naming_its_settings,
    |backend| {
        let app = app!(backend);
        let (ada, key) = admin_with_key(&app).await;
        let reason = reason_everywhere(
            &app,
            &key,
            "get the authenticated github user",
            "github_get_user",
            json!({}),
        )
        .await;
        assert!(
            reason.contains("WB_INTEGRATION_GITHUB_CLIENT_ID")
                && reason.contains("WB_INTEGRATION_GITHUB_CLIENT_SECRET"),
            "{reason}"
        );
        // An API-key integration needs no operator configuration: available, waiting for the
        // user's connection.
        let linear = app
            .wb
            .engine()
            .tools(&ada)
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.spec.integration == "linear")
            .unwrap();
        let rest = rest_tool(&app, &key, linear.name()).await;
        assert_eq!(rest["status"], "available", "{rest}");
    }
);

db_test!(
    an_oauth_plugin_with_its_client_configured_is_available_and_asks_for_a_connection,
    |backend| {
        let fake = fake_provider::start().await;
        let options = Options {
            egress_allow_private: vec!["127.0.0.1"],
            integrations: fake.settings(None),
            ..Default::default()
        };
        let app = app!(backend, options);
        let (_, key) = admin_with_key(&app).await;
        let rest = rest_tool(&app, &key, "github_get_user").await;
        assert_eq!(rest["status"], "available", "{rest}");
        assert!(rest.get("unavailable_reason").is_none(), "{rest}");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_CONNECTED", "{}", out[0]);
    }
);
