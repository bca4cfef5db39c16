//! http.fetch: the egress allowlist and SSRF refusals, redirects, metering.

use serde_json::{json, Value};

use crate::fakes;
use crate::helpers::{admin_with_key, execute, Options};
use crate::policies::send;
use crate::{app, db_test};

async fn fetch(app: &crate::helpers::TestApp, key: &str, url: &str) -> Value {
    execute(
        app,
        key,
        json!([{ "tool": "http.fetch", "args": { "url": url } }]),
    )
    .await
    .remove(0)
}

fn refused(entry: &Value) -> String {
    assert_eq!(entry["code"], "TOOL_ERROR", "{entry}");
    entry["handler_error"].as_str().unwrap().to_owned()
}

db_test!(
    private_and_metadata_addresses_are_refused_in_every_spelling,
    |backend| {
        // No operator exception: loopback is off limits too.
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        let port = fake.addr.port();
        for pattern in [
            "169.254.169.254",
            "127.0.0.1",
            "localhost",
            "[::ffff:127.0.0.1]",
            "[::1]",
            "10.0.0.1",
            "100.64.0.1",
        ] {
            app.wb.egress().add(&admin, pattern).await.unwrap();
        }
        for url in [
            "http://169.254.169.254/latest/meta-data/".to_string(),
            format!("http://127.0.0.1:{port}/echo"),
            format!("http://2130706433:{port}/echo"),
            format!("http://0x7f000001:{port}/echo"),
            format!("http://0177.0.0.1:{port}/echo"),
            format!("http://0x7f.1:{port}/echo"),
            format!("http://[::ffff:127.0.0.1]:{port}/echo"),
            format!("http://[::1]:{port}/echo"),
            format!("http://localhost:{port}/echo"),
            "http://10.0.0.1/".to_string(),
            "http://100.64.0.1/".to_string(),
        ] {
            let msg = refused(&fetch(&app, &key, &url).await);
            assert!(msg.starts_with("refusing to connect to"), "{url}: {msg}");
        }
        assert_eq!(
            fake.state
                .requests
                .load(std::sync::atomic::Ordering::SeqCst),
            0
        );
        let _ = fake
            .state
            .in_flight
            .load(std::sync::atomic::Ordering::SeqCst);
    }
);

db_test!(hosts_outside_the_egress_allowlist_are_refused, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (admin, key) = admin_with_key(&app).await;
    let fake = fakes::start().await;
    let url = fake.url("/echo");
    let msg = refused(&fetch(&app, &key, &url).await);
    assert!(
        msg.contains("is not in this project's egress allowlist"),
        "{msg}"
    );
    // A pattern for another port does not cover this one.
    app.wb.egress().add(&admin, "127.0.0.1:1").await.unwrap();
    assert!(refused(&fetch(&app, &key, &url).await).contains("egress allowlist"));
    app.wb
        .egress()
        .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
        .await
        .unwrap();
    let ok = fetch(&app, &key, &url).await;
    assert_eq!(ok["result"]["status"], 200, "{ok}");
});

db_test!(a_redirect_to_a_private_address_is_refused, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (admin, key) = admin_with_key(&app).await;
    let fake = fakes::start().await;
    app.wb
        .egress()
        .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
        .await
        .unwrap();
    app.wb
        .egress()
        .add(&admin, "169.254.169.254")
        .await
        .unwrap();
    let url = fake.url("/redirect?to=http://169.254.169.254/latest/meta-data/");
    let msg = refused(&fetch(&app, &key, &url).await);
    assert!(
        msg.contains("refusing to connect to 169.254.169.254"),
        "{msg}"
    );
    // And a redirect to a host outside the allowlist.
    let url = fake.url("/redirect?to=http://example.org/");
    assert!(refused(&fetch(&app, &key, &url).await).contains("egress allowlist"));
    // A redirect within the allowlist is followed.
    let url = fake.url(&format!("/redirect?to={}", fake.url("/echo")));
    let ok = fetch(&app, &key, &url).await;
    assert_eq!(ok["result"]["status"], 200);
    assert!(ok["result"]["url"].as_str().unwrap().ends_with("/echo"));
});

db_test!(
    http_fetch_sends_method_headers_body_and_meters_egress,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        app.wb
            .egress()
            .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
            .await
            .unwrap();
        let results = execute(
        &app,
        &key,
        json!([
            { "tool": "http.fetch", "args": { "url": fake.url("/echo"), "method": "POST", "headers": { "x-demo": "1", "host": "evil.example" }, "body": "payload" } },
            { "tool": "http.fetch", "args": { "url": fake.url("/binary") } },
            { "tool": "http.fetch", "args": { "url": fake.url("/echo"), "headers": { "x-n": 5 } } },
            { "tool": "http.fetch", "args": { "url": "ftp://127.0.0.1/x" } },
        ]),
    )
    .await;
        let echoed: Value =
            serde_json::from_str(results[0]["result"]["body"].as_str().unwrap()).unwrap();
        assert_eq!(echoed["method"], "POST");
        assert_eq!(echoed["body"], "payload");
        assert_eq!(echoed["headers"]["x-demo"], "1");
        assert_ne!(
            echoed["headers"]["host"], "evil.example",
            "the Host header cannot be overridden"
        );
        assert_eq!(results[1]["result"]["body_encoding"], "base64");
        assert_eq!(results[1]["result"]["body"], "/wD+AQ==");
        assert_eq!(results[2]["code"], "INVALID_ARGUMENTS");
        assert_eq!(results[2]["errors"][0]["path"], "/headers/x-n");
        assert_eq!(results[3]["code"], "INVALID_ARGUMENTS");
        let usage = app
            .wb
            .metering()
            .usage(&admin, "2000-01-01", "2999-12-31")
            .await
            .unwrap();
        let egress: i64 = usage
            .iter()
            .filter(|u| u.meter.as_str() == "egress_bytes")
            .map(|u| u.value)
            .sum();
        assert!(
            egress >= "payload".len() as i64 + 4,
            "egress metered: {egress}"
        );
    }
);

db_test!(egress_rules_are_admin_only_and_validated, |backend| {
    let app = app!(backend);
    let (admin, _) = admin_with_key(&app).await;
    let bob = app
        .user("bob@example.com", workbench_core::auth::Role::Member)
        .await;
    assert!(app.wb.egress().add(&bob, "api.example.com").await.is_err());
    assert!(app
        .wb
        .egress()
        .add(&admin, "http://api.example.com/x")
        .await
        .is_err());
    assert_eq!(
        app.wb
            .egress()
            .add(&admin, "API.example.com")
            .await
            .unwrap(),
        "api.example.com"
    );
    assert_eq!(
        app.wb.egress().list(&bob).await.unwrap(),
        vec!["api.example.com".to_string()]
    );
    assert!(app
        .wb
        .egress()
        .remove(&bob, "api.example.com")
        .await
        .is_err());
    app.wb
        .egress()
        .remove(&admin, "api.example.com")
        .await
        .unwrap();
    assert!(app.wb.egress().list(&admin).await.unwrap().is_empty());
});

db_test!(
    the_egress_allowlist_is_managed_over_rest_and_governs_fetch,
    |backend| {
        use reqwest::Method;
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, admin_key) = admin_with_key(&app).await;
        let bob = app
            .user("bob@example.com", workbench_core::auth::Role::Member)
            .await;
        let bob_key = app.api_key(&bob).await;
        let fake = fakes::start().await;
        let url = fake.url("/echo");
        let pattern = format!("127.0.0.1:{}", fake.addr.port());
        assert!(refused(&fetch(&app, &admin_key, &url).await).contains("egress allowlist"));

        // A member reads the list but cannot change it.
        let (status, out) = send(
            &app,
            &bob_key,
            Method::POST,
            "/v1/egress",
            Some(json!({ "pattern": pattern })),
        )
        .await;
        assert_eq!(status, 403, "{out}");
        assert_eq!(out["error"]["code"], "forbidden");

        let (status, out) = send(
            &app,
            &admin_key,
            Method::POST,
            "/v1/egress",
            Some(json!({ "pattern": pattern })),
        )
        .await;
        assert_eq!(status, 201, "{out}");
        assert_eq!(out, json!({ "object": "egress_rule", "pattern": pattern }));
        let (status, out) = send(
            &app,
            &admin_key,
            Method::POST,
            "/v1/egress",
            Some(json!({ "pattern": " *.API.Example.com " })),
        )
        .await;
        assert_eq!(status, 201, "{out}");
        assert_eq!(out["pattern"], "*.api.example.com", "stored normalised");
        let ok = fetch(&app, &bob_key, &url).await;
        assert_eq!(
            ok["result"]["status"], 200,
            "the rule added over REST lets fetch through: {ok}"
        );

        let (status, out) = send(&app, &bob_key, Method::GET, "/v1/egress", None).await;
        assert_eq!(status, 200, "{out}");
        let listed: Vec<&str> = out["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["pattern"].as_str().unwrap())
            .collect();
        assert_eq!(listed.len(), 2, "{out}");
        assert!(
            listed.contains(&pattern.as_str()) && listed.contains(&"*.api.example.com"),
            "{out}"
        );

        // Bad input: a URL, an unknown field, no body; each a 422 in the API's shape, nothing stored.
        for body in [
            json!({ "pattern": "http://evil.example/x" }),
            json!({ "pattern": "ok.example", "extra": 1 }),
            json!({}),
            json!(["ok.example"]),
        ] {
            let (status, out) = send(
                &app,
                &admin_key,
                Method::POST,
                "/v1/egress",
                Some(body.clone()),
            )
            .await;
            assert_eq!(status, 422, "{body}: {out}");
            assert_eq!(out["error"]["code"], "invalid_request", "{out}");
        }
        let (_, out) = send(&app, &admin_key, Method::GET, "/v1/egress", None).await;
        assert_eq!(out["data"].as_array().unwrap().len(), 2, "{out}");

        // Removing: a member cannot; the admin can, with the pattern URL-encoded; then fetch is refused.
        let path = format!("/v1/egress/{}", pattern.replace(':', "%3A"));
        let (status, _) = send(&app, &bob_key, Method::DELETE, &path, None).await;
        assert_eq!(status, 403);
        let (status, out) = send(&app, &admin_key, Method::DELETE, &path, None).await;
        assert_eq!(status, 204, "{out}");
        assert!(refused(&fetch(&app, &admin_key, &url).await).contains("egress allowlist"));
        let (status, out) = send(
            &app,
            &admin_key,
            Method::DELETE,
            "/v1/egress/%2A.api.example.com",
            None,
        )
        .await;
        assert_eq!(status, 204, "{out}");
        let (status, out) = send(&app, &admin_key, Method::DELETE, &path, None).await;
        assert_eq!(status, 404, "{out}");
        assert_eq!(out["error"]["code"], "not_found");
        let (_, out) = send(&app, &admin_key, Method::GET, "/v1/egress", None).await;
        assert_eq!(out["data"], json!([]));
    }
);
