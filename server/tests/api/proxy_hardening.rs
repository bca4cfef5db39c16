//! The curl proxy's hardening: what streams back is scrubbed of the injected credential and the
//! project's secrets (headers and body, whatever the chunking), only ordinary methods pass, a
//! total deadline answers 504, requests in flight per user are capped, and refusals are
//! audited too.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use crate::db_test;
use crate::fake_provider::{self, FakeProvider, LINEAR_KEY};
use crate::helpers::{admin_with_key, execute, mcp_call, Options, TestApp, PASSWORD};

/// An app whose Linear points at the fake, with Linear connected and a proxy token for it.
async fn connected(
    backend: crate::helpers::Backend,
    options: Options,
) -> Option<(
    TestApp,
    FakeProvider,
    String,
    String,
    workbench_core::auth::Principal,
)> {
    let fake = fake_provider::start().await;
    let app = crate::helpers::spawn_app_with(
        backend,
        Options {
            integrations: fake.settings(None),
            ..options
        },
    )
    .await?;
    let (admin, key) = admin_with_key(&app).await;
    let b = app.browser();
    assert!(b
        .sign_in("ada@example.com", PASSWORD)
        .await
        .status()
        .is_success());
    let (link, _) = mcp_call(&app, &key, "connect", json!({ "integration": "linear" })).await;
    assert_eq!(
        b.call(
            "submit_connection",
            &[
                ("id", link["connectionId"].as_str().unwrap()),
                ("value", LINEAR_KEY)
            ]
        )
        .await
        .status(),
        200
    );
    let (out, is_error) = mcp_call(
        &app,
        &key,
        "curl_session",
        json!({ "integrations": ["linear"] }),
    )
    .await;
    assert!(!is_error, "{out}");
    let token = out["token"].as_str().unwrap().to_owned();
    Some((app, fake, key, token, admin))
}

db_test!(
    the_curl_proxy_scrubs_the_credential_and_project_secrets_from_what_it_sends_back,
    |backend| {
        let Some((app, fake, key, token, _)) = connected(backend, Options::default()).await else {
            return;
        };
        let out = execute(&app, &key, json!([{ "tool": "vault_set", "args": { "name": "CRM_TOKEN", "value": "crm_tok_5e6f7a8b" } }])).await;
        assert!(out[0].get("result").is_some(), "{out:?}");
        let res = app
            .http()
            .get(app.url("/c/linear/echo-key?v=crm_tok_5e6f7a8b"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            fake.state
                .last_headers
                .lock()
                .unwrap()
                .clone()
                .unwrap()
                .get("authorization")
                .unwrap(),
            LINEAR_KEY,
            "the key was injected"
        );
        let link = res
            .headers()
            .get("link")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            !link.contains(LINEAR_KEY) && link.contains("[redacted:linear_credential]"),
            "{link}"
        );
        let body = res.text().await.unwrap();
        assert!(
            !body.contains(LINEAR_KEY),
            "the body streamed back one byte at a time, still scrubbed: {body}"
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["you_sent"], "[redacted:linear_credential]");
        assert_eq!(v["echo"], "[redacted:CRM_TOKEN]", "project secrets too");
    }
);

db_test!(
    the_curl_proxy_forwards_only_ordinary_methods_and_audits_refusals,
    |backend| {
        let Some((app, fake, _key, token, ada)) = connected(backend, Options::default()).await
        else {
            return;
        };
        let before = fake.state.api_requests.load(Ordering::SeqCst);
        for method in ["TRACE", "PROPFIND", "MKCOL"] {
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let res = app
                .http()
                .request(m, app.url("/c/linear/echo-key"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 405, "{method}");
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["code"], "method_not_allowed");
        }
        assert_eq!(
            fake.state.api_requests.load(Ordering::SeqCst),
            before,
            "nothing was forwarded"
        );
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let res = app
                .http()
                .request(m, app.url("/c/linear/echo-key"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{method}");
        }
        app.wb.flush_records().await;
        let audit = workbench_core::store::audit::list(
            app.wb.db().pool(),
            &ada.project_id,
            &Default::default(),
            100,
        )
        .await
        .unwrap();
        let refused: Vec<_> = audit
            .iter()
            .filter(|r| {
                r.action == "proxy.request"
                    && r.status.as_str() == "failed"
                    && r.error_code.as_deref() == Some("HTTP_405")
            })
            .collect();
        assert_eq!(
            refused.len(),
            3,
            "every refused request has its audit row: {audit:?}"
        );
        assert!(refused.iter().any(|r| r
            .detail
            .as_deref()
            .unwrap_or("")
            .starts_with("TRACE /echo-key")));
    }
);

db_test!(a_slow_upstream_gets_504_at_the_proxy_deadline, |backend| {
    let Some((app, _fake, _key, token, _)) = connected(
        backend,
        Options {
            proxy_timeout_secs: Some(1),
            ..Default::default()
        },
    )
    .await
    else {
        return;
    };
    let res = app
        .http()
        .get(app.url("/c/linear/slow?ms=5000"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_timeout");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("did not answer within 1 s"));
});

db_test!(
    requests_in_flight_through_the_proxy_are_capped_per_user,
    |backend| {
        let Some((app, _fake, _key, token, _)) = connected(
            backend,
            Options {
                proxy_max_concurrent: Some(2),
                ..Default::default()
            },
        )
        .await
        else {
            return;
        };
        let slow = || {
            app.http()
                .get(app.url("/c/linear/slow?ms=3000"))
                .bearer_auth(&token)
                .send()
        };
        let (a, b) = (tokio::spawn(slow()), tokio::spawn(slow()));
        // Both slow requests are upstream now; a third waits for nothing and is refused.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let res = app
            .http()
            .get(app.url("/c/linear/echo-key"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers().get("retry-after").unwrap(), "1");
        assert_eq!(a.await.unwrap().unwrap().status(), 200);
        assert_eq!(b.await.unwrap().unwrap().status(), 200);
        let res = app
            .http()
            .get(app.url("/c/linear/echo-key"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "the slots came back");
    }
);
