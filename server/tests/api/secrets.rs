//! The secret boundary (D7): no path hands a vault value or a connection credential back to an
//! agent — not storage, not another execution of the same batch, not an error message that
//! quotes a transformed argument, not a redirect.

use serde_json::json;

use crate::fakes;
use crate::helpers::{admin_with_key, execute, Options};
use crate::{app, db_test};

async fn set(app: &crate::helpers::TestApp, key: &str, name: &str, value: &str) {
    let out = execute(
        app,
        key,
        json!([{ "tool": "vault_set", "args": { "name": name, "value": value } }]),
    )
    .await
    .remove(0);
    assert!(out.get("result").is_some(), "{out}");
}

db_test!(
    a_secret_stored_through_storage_never_comes_back_out_of_it,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let secret = "sk_live_51Hq8ZrT2v";
        set(&app, &key, "STRIPE", secret).await;
        let put = execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "leak.txt", "content": "{{vault:STRIPE}}" } }])).await.remove(0);
        assert!(
            put["result"].get("sha256").is_none(),
            "no content hash to guess a short secret against: {put}"
        );
        // A later call, which used no secret at all, reads it back.
        let got = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "leak.txt" } }]),
        )
        .await
        .remove(0);
        assert_eq!(got["result"]["content"], "[redacted:STRIPE]", "{got}");
        let b64 = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "leak.txt", "encoding": "base64" } }]),
        )
        .await
        .remove(0);
        assert!(!b64.to_string().contains(&base64_of(secret)[..12]), "{b64}");
        // Nor inside one batch, where each execution used to have its own scrubber.
        let both = execute(
        &app,
        &key,
        json!([
            { "tool": "storage.put", "args": { "key": "b.txt", "content": "x {{vault:STRIPE}} y" } },
            { "tool": "storage.get", "args": { "key": "leak.txt" } },
        ]),
    )
    .await;
        assert!(
            !serde_json::to_string(&both).unwrap().contains(secret),
            "{both:?}"
        );
        // A secret changed on the vault is scrubbed under its new value at once.
        set(&app, &key, "STRIPE", "sk_live_rotated_9Xy").await;
        execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "new.txt", "content": "{{vault:STRIPE}}" } }])).await;
        let got = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "new.txt" } }]),
        )
        .await
        .remove(0);
        assert_eq!(got["result"]["content"], "[redacted:STRIPE]");
    }
);

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

db_test!(
    a_secret_set_on_another_instance_is_scrubbed_here,
    |backend| {
        let a = app!(backend);
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                data_dir: Some(a.data_dir.clone()),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&a).await;
        execute(&b, &key, json!([{ "tool": "storage.put", "args": { "key": "k", "content": "token is gh_pat_77aa99" } }])).await;
        let before = execute(
            &b,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k" } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            before["result"]["content"], "token is gh_pat_77aa99",
            "not a secret yet"
        );
        set(&a, &key, "GH", "gh_pat_77aa99").await;
        let after = execute(
            &b,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k" } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            after["result"]["content"], "token is [redacted:GH]",
            "B saw A's change"
        );
    }
);

db_test!(
    a_credential_connected_on_another_instance_is_scrubbed_here,
    |backend| {
        // B keeps a copy of the caller's credentials for scrubbing; a connection made on A bumps
        // the generation B reads with the key, so B's next call re-reads them.
        let a = app!(backend);
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                data_dir: Some(a.data_dir.clone()),
                ..Default::default()
            }
        );
        let (who, key) = admin_with_key(&a).await;
        execute(&b, &key, json!([{ "tool": "storage.put", "args": { "key": "k", "content": "key is lin_api_c0ffee1234" } }])).await;
        let before = execute(
            &b,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k" } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            before["result"]["content"], "key is lin_api_c0ffee1234",
            "not a credential yet"
        );
        let credential = workbench_core::catalog::Credential::ApiKey {
            key: "lin_api_c0ffee1234".into(),
        };
        a.wb.connections()
            .store(&who.project_id, &who.user_id, "linear", &credential)
            .await
            .unwrap();
        let after = execute(
            &b,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k" } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            after["result"]["content"], "key is [redacted:linear_credential]",
            "B saw A's connection: {after}"
        );
        // A credential replacing the first is scrubbed as soon as it is stored.
        let next = workbench_core::catalog::Credential::ApiKey {
            key: "lin_api_beefcafe5678".into(),
        };
        a.wb.connections()
            .store(&who.project_id, &who.user_id, "linear", &next)
            .await
            .unwrap();
        execute(&b, &key, json!([{ "tool": "storage.put", "args": { "key": "k2", "content": "now lin_api_beefcafe5678" } }])).await;
        let again = execute(
            &b,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k2" } }]),
        )
        .await
        .remove(0);
        assert_eq!(
            again["result"]["content"], "now [redacted:linear_credential]",
            "{again}"
        );
    }
);

db_test!(
    http_fetch_errors_quote_the_agents_template_never_a_transformed_secret,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for (name, value, leak) in [
            (
                "MIXED",
                "Int3rnal-Billing.Example",
                "int3rnal-billing.example",
            ),
            ("NUMERIC", "2130706433", "127.0.0.1"),
            ("SLASHED", "tenant42/AbCdEf9", "tenant42"),
        ] {
            set(&app, &key, name, value).await;
            let url = format!("https://{{{{vault:{name}}}}}/status");
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "http.fetch", "args": { "url": url } }]),
            )
            .await
            .remove(0);
            let text = out.to_string();
            assert_eq!(out["code"], "TOOL_ERROR", "{out}");
            assert!(
                !text.to_lowercase().contains(&leak.to_lowercase()),
                "{name}: {text}"
            );
            assert!(
                out["handler_error"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("{{{{vault:{name}}}}}")),
                "the template is quoted: {text}"
            );
        }
    }
);

db_test!(
    http_fetch_sends_no_credential_or_secret_header_to_another_origin_after_a_redirect,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let first = fakes::start().await;
        let other = fakes::start().await;
        for f in [&first, &other] {
            app.wb
                .egress()
                .add(&admin, &format!("127.0.0.1:{}", f.addr.port()))
                .await
                .unwrap();
        }
        set(&app, &key, "API_KEY", "key_9c8b7a6d5e4f").await;
        let headers = json!({ "Authorization": "Bearer {{vault:API_KEY}}", "X-Api-Key": "{{vault:API_KEY}}", "Cookie": "session=abc123", "X-Plain": "hello" });
        // Another origin (another port): credentials and secret-bearing headers are dropped.
        let url = first.url(&format!("/redirect?to={}", other.url("/echo")));
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "http.fetch", "args": { "url": url, "headers": headers } }]),
        )
        .await
        .remove(0);
        assert_eq!(out["result"]["status"], 200, "{out}");
        let (got, _) = other.state.last.lock().unwrap().clone().unwrap();
        for h in ["authorization", "x-api-key", "cookie"] {
            assert!(got.get(h).is_none(), "{h} reached the other origin");
        }
        assert_eq!(got.get("x-plain").unwrap(), "hello");
        // The same origin keeps them.
        let url = first.url(&format!("/redirect?to={}", first.url("/echo")));
        execute(
            &app,
            &key,
            json!([{ "tool": "http.fetch", "args": { "url": url, "headers": headers } }]),
        )
        .await;
        let (got, _) = first.state.last.lock().unwrap().clone().unwrap();
        assert_eq!(got.get("authorization").unwrap(), "Bearer key_9c8b7a6d5e4f");
        // A 307 would re-send the body: one carrying a secret is not sent to another origin.
        let url = first.url(&format!("/redirect?code=307&to={}", other.url("/echo")));
        *other.state.last.lock().unwrap() = None;
        let out = execute(&app, &key, json!([{ "tool": "http.fetch", "args": { "url": url, "method": "POST", "body": "key={{vault:API_KEY}}" } }])).await.remove(0);
        assert!(
            out["handler_error"]
                .as_str()
                .unwrap()
                .contains("refusing to send a body that carries a secret"),
            "{out}"
        );
        assert!(other.state.last.lock().unwrap().is_none());
        // A body without secrets follows the 307 as HTTP says.
        let out = execute(&app, &key, json!([{ "tool": "http.fetch", "args": { "url": url, "method": "POST", "body": "plain" } }])).await.remove(0);
        assert_eq!(out["result"]["status"], 200, "{out}");
        assert_eq!(other.state.last.lock().unwrap().clone().unwrap().1, "plain");
    }
);

db_test!(
    a_side_effecting_call_does_not_run_when_its_audit_row_cannot_be_written,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        // Break only the audit log (test support; the product never does this).
        workbench_core::store::testing::break_audit_log(app.wb.db(), true)
            .await
            .unwrap();
        let before = app.wb.engine().audit_write_failures();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "unaudited", "content": "x" } }]),
        )
        .await
        .remove(0);
        assert_eq!(out["code"], "UNAVAILABLE", "{out}");
        assert!(
            out["error"].as_str().unwrap().contains("audit log"),
            "{out}"
        );
        // A read-only tool still answers, and the failure is counted.
        let read = execute(&app, &key, json!([{ "tool": "vault_list", "args": {} }]))
            .await
            .remove(0);
        assert!(read.get("result").is_some(), "{read}");
        app.wb.flush_records().await;
        assert!(app.wb.engine().audit_write_failures() >= before + 2);
        workbench_core::store::testing::break_audit_log(app.wb.db(), false)
            .await
            .unwrap();
        let got = execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "unaudited" } }]),
        )
        .await
        .remove(0);
        assert_eq!(got["code"], "TOOL_ERROR", "the write never happened: {got}");
        // With the log back, a write is recorded as running first and finished after.
        let done = execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "audited", "content": "x" } }]),
        )
        .await
        .remove(0);
        assert!(done.get("result").is_some(), "{done}");
        let ready: serde_json::Value = app
            .http()
            .get(app.url("/readyz"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(ready["audit_write_failures"].as_u64().unwrap() >= 2);
    }
);
