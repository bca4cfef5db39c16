//! Protections that were in place without a test of their own: proxy tokens that are forged,
//! unsigned or another user's; remote `$ref`s in a custom app's schema; the plugin client's
//! response cap and its refusal to follow redirects; a bounded shutdown drain; SQLite under
//! many concurrent writers.

use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::fake_provider::{self, LINEAR_KEY};
use crate::fakes;
use crate::helpers::{admin_with_key, execute, mcp_call, Options, PASSWORD};
use crate::{app, db_test};

fn b64(v: &Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

db_test!(
    proxy_tokens_unsigned_signed_with_another_key_or_naming_another_user_are_refused,
    |backend| {
        let fake = fake_provider::start().await;
        let app = app!(
            backend,
            Options {
                integrations: fake.settings(None),
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let (link, _) = mcp_call(&app, &key, "connect", json!({ "integration": "linear" })).await;
        b.call(
            "submit_connection",
            &[
                ("id", link["connectionId"].as_str().unwrap()),
                ("value", LINEAR_KEY),
            ],
        )
        .await;
        let (out, _) = mcp_call(
            &app,
            &key,
            "curl_session",
            json!({ "integrations": ["linear"] }),
        )
        .await;
        let token = out["token"].as_str().unwrap().to_owned();
        let proxied = |t: String| {
            app.http()
                .post(app.url("/c/linear/graphql"))
                .bearer_auth(t)
                .json(&json!({ "query": "{ viewer { id } }" }))
                .send()
        };
        assert_eq!(
            proxied(token.clone()).await.unwrap().status(),
            200,
            "the genuine token works"
        );
        let claims: Value = {
            use base64::Engine as _;
            serde_json::from_slice(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(token.split('.').nth(1).unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        // alg: none, no signature.
        let unsigned = format!(
            "{}.{}.",
            b64(&json!({ "alg": "none", "typ": "JWT" })),
            b64(&claims)
        );
        assert_eq!(proxied(unsigned).await.unwrap().status(), 401);
        // Signed, but with another key.
        let other_key =
            jsonwebtoken::EncodingKey::from_secret(b"an attacker's key, not workbench's");
        let forged = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &other_key,
        )
        .unwrap();
        assert_eq!(proxied(forged).await.unwrap().status(), 401);
        // Signed with the real key (as if it leaked) but naming another user: the token id is bound
        // to the user it was minted for.
        let bob = app
            .user("bob@example.com", workbench_core::auth::Role::Member)
            .await;
        let keys = workbench_server::keys::Keys::load_or_create(&app.data_dir).unwrap();
        let mut as_bob = claims.clone();
        as_bob["sub"] = json!(bob.user_id);
        let real_key = jsonwebtoken::EncodingKey::from_secret(keys.jwt.bytes());
        let renamed = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &as_bob,
            &real_key,
        )
        .unwrap();
        assert_eq!(proxied(renamed).await.unwrap().status(), 401);
        assert_ne!(bob.user_id, admin.user_id);
    }
);

/// A listener that counts connections and never answers.
fn counting_listener() -> (String, Arc<AtomicUsize>) {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(s);
        }
    });
    (format!("http://{addr}"), count)
}

fn app_definition(base: &str, path: &str, schema: Value) -> Value {
    json!({
        "name": "probe", "display_name": "Probe", "version": "1", "base_url": base, "auth": { "type": "none" },
        "tools": [{ "name": "probe_get", "description": "Fetch a thing.", "side_effects": "none", "input_schema": schema,
                    "request": { "method": "GET", "path": path } }]
    })
}

db_test!(a_custom_apps_schema_never_fetches_a_remote_ref, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (_, key) = admin_with_key(&app).await;
    let (schema_host, fetched) = counting_listener();
    let schema = json!({ "type": "object", "properties": { "x": { "$ref": format!("{schema_host}/schema.json") } } });
    let res = app
        .http()
        .post(app.url("/v1/apps"))
        .bearer_auth(&key)
        .json(&app_definition("https://api.example.com", "/x", schema))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    assert!(matches!(status, 201 | 400), "{status}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        fetched.load(Ordering::SeqCst),
        0,
        "the remote $ref was never fetched"
    );
});

db_test!(
    the_plugin_client_caps_replies_at_5_mib_and_follows_no_redirects,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        let other = fakes::start().await;
        let big = json!({ "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] });
        let mut def = app_definition(&fake.url(""), "/big", big);
        def["tools"][0]["request"]["query"] = json!({ "n": "{n}" });
        def["tools"].as_array_mut().unwrap().push(json!({
        "name": "probe_moved", "description": "Follow a moved thing.", "side_effects": "none",
        "input_schema": { "type": "object", "properties": { "to": { "type": "string" } }, "required": ["to"] },
        "request": { "method": "GET", "path": "/redirect", "query": { "to": "{to}" } }
    }));
        let res = app
            .http()
            .post(app.url("/v1/apps"))
            .bearer_auth(&key)
            .json(&def)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "probe_get", "args": { "n": 6 * 1024 * 1024 } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            out["code"],
            "TOOL_ERROR",
            "{}",
            &out.to_string()[..200.min(out.to_string().len())]
        );
        assert!(
            out["handler_error"]
                .as_str()
                .unwrap()
                .contains("sent more than 5242880 bytes"),
            "{out}"
        );
        let ok = execute(
            &app,
            &key,
            json!([{ "tool": "probe_get", "args": { "n": 1000 } }]),
        )
        .await
        .remove(0);
        assert!(ok.get("result").is_some(), "a small reply passes");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "probe_moved", "args": { "to": other.url("/echo") } }]),
        )
        .await
        .remove(0);
        assert!(
            out["handler_error"]
                .as_str()
                .unwrap_or_default()
                .contains("answered 302"),
            "{out}"
        );
        assert!(
            other.state.last.lock().unwrap().is_none(),
            "the redirect was not followed"
        );
    }
);

db_test!(
    shutdown_answers_open_waits_and_drains_within_the_deadline,
    |backend| {
        let mut app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (link, _) = mcp_call(&app, &key, "connect", json!({ "integration": "github" })).await;
        let id = link["connectionId"].as_str().unwrap().to_owned();
        let (base, key2) = (app.base.clone(), key.clone());
        let waiting = tokio::spawn(async move {
            let client = reqwest::Client::new();
            let res = client
            .post(format!("{base}/mcp"))
            .bearer_auth(key2)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "wait_for_connection", "arguments": { "connectionId": id, "timeoutSec": 600 } } }))
            .send()
            .await
            .unwrap();
            res.json::<Value>().await.unwrap()
        });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let started = std::time::Instant::now();
        let server = app.stop();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(12), waiting)
            .await
            .expect("the wait answered")
            .unwrap();
        assert_eq!(
            answer["result"]["structuredContent"]["status"], "TIMEOUT",
            "{answer}"
        );
        tokio::time::timeout(std::time::Duration::from_secs(12), server)
            .await
            .expect("the server finished draining")
            .unwrap()
            .unwrap();
        assert!(
            started.elapsed()
                < workbench_server::DRAIN_DEADLINE + std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_takes_64_concurrent_writers_without_busy_errors() {
    let Some(app) = crate::helpers::spawn_app(crate::helpers::Backend::Sqlite).await else {
        return;
    };
    let (admin, key) = admin_with_key(&app).await;
    let writers = (0..64).map(|i| {
        let (wb, admin, key, app_url, http) = (app.wb.clone(), admin.clone(), key.clone(), app.url("/v1/tools/invoke"), app.http());
        tokio::spawn(async move {
            if i % 2 == 0 {
                wb.vault().set(&admin, &format!("S{i}"), &format!("value-{i:06}")).await.map(|_| ()).map_err(|e| e.to_string())
            } else {
                let res = http.post(app_url).bearer_auth(key).json(&json!({ "tool": "storage.put", "arguments": { "key": format!("k{i}"), "content": "x" } })).send().await.unwrap();
                if res.status() == 200 { Ok(()) } else { Err(res.text().await.unwrap()) }
            }
        })
    });
    let mut failures = Vec::new();
    for w in writers {
        if let Err(e) = w.await.unwrap() {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 64 writers failed: {failures:?}",
        failures.len()
    );
    assert_eq!(app.wb.vault().list(&admin).await.unwrap().len(), 32);
}
