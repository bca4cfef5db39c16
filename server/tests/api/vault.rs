//! The vault (D7, D8): built-in vault tools, {{vault:NAME}} references, scrubbing, encryption at
//! rest and master key rotation.

use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::store;

use crate::fakes;
use crate::helpers::{admin_with_key, execute, Options};
use crate::{app, db_test};

const SECRET: &str = "tok_live_4f9a8b7c6d5e";

async fn set(app: &crate::helpers::TestApp, key: &str, name: &str, value: &str) -> Value {
    execute(
        app,
        key,
        json!([{ "tool": "vault_set", "args": { "name": name, "value": value } }]),
    )
    .await
    .remove(0)
}

/// Every stored text of the project's tool calls and audit rows, for leak checks.
async fn recorded_text(
    app: &crate::helpers::TestApp,
    who: &workbench_core::auth::Principal,
) -> String {
    let mut text = String::new();
    app.wb.flush_records().await;
    let audit = store::audit::list(
        app.wb.db().pool(),
        &who.project_id,
        &Default::default(),
        1000,
    )
    .await
    .unwrap();
    for row in audit {
        text.push_str(&format!("{row:?}"));
        if let Some(id) = row.tool_call_id {
            let call = store::tool_calls::get(app.wb.db().pool(), &who.project_id, &id)
                .await
                .unwrap()
                .unwrap();
            text.push_str(&format!("{call:?}"));
        }
    }
    text
}

db_test!(
    vault_tools_manage_secrets_without_ever_returning_values,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let created = set(&app, &key, "STRIPE_KEY", SECRET).await;
        assert_eq!(created["result"]["name"], "STRIPE_KEY");
        assert!(created["result"]["id"]
            .as_str()
            .unwrap()
            .starts_with("sec_"));
        assert!(!created.to_string().contains(SECRET));
        let results = execute(
            &app,
            &key,
            json!([
                { "tool": "vault_list", "args": {} },
                { "tool": "vault_describe", "args": { "name": "STRIPE_KEY" } },
                { "tool": "vault_describe", "args": { "name": "NOPE" } },
            ]),
        )
        .await;
        assert_eq!(results[0]["result"]["secrets"][0]["name"], "STRIPE_KEY");
        assert_eq!(results[1]["result"]["id"], created["result"]["id"]);
        assert!(results[1]["result"]["updated_at"].is_string());
        assert_eq!(results[2]["code"], "TOOL_ERROR");
        assert!(!serde_json::to_string(&results).unwrap().contains(SECRET));
        // Replacing keeps the id.
        let replaced = set(&app, &key, "STRIPE_KEY", "another-value-2").await;
        assert_eq!(replaced["result"]["id"], created["result"]["id"]);
        let deleted = execute(
            &app,
            &key,
            json!([{ "tool": "vault_delete", "args": { "name": "STRIPE_KEY" } }]),
        )
        .await;
        assert_eq!(deleted[0]["result"]["deleted"], "STRIPE_KEY");
        let listed = execute(&app, &key, json!([{ "tool": "vault_list", "args": {} }])).await;
        assert_eq!(listed[0]["result"]["secrets"], json!([]));
        let recorded = recorded_text(&app, &admin).await;
        assert!(
            !recorded.contains(SECRET),
            "the value never reaches tool_calls or audit rows"
        );
        assert!(recorded.contains("[redacted:STRIPE_KEY]"));
    }
);

db_test!(vault_set_refuses_short_values_and_bad_names, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let short = set(&app, &key, "PIN", "12345").await;
    assert_eq!(short["code"], "INVALID_ARGUMENTS");
    assert_eq!(short["errors"][0]["path"], "/value");
    assert!(
        !short.to_string().contains("12345"),
        "the refused value is not echoed: {short}"
    );
    let bad = set(&app, &key, "has space", "long enough value").await;
    assert_eq!(bad["code"], "INVALID_ARGUMENTS");
});

db_test!(vault_tools_take_names_and_values_literally, |backend| {
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
    set(&app, &key, "REAL", SECRET).await;
    // The value is stored as the literal text, not resolved.
    set(&app, &key, "LITERAL", "{{vault:REAL}}").await;
    let out = execute(&app, &key, json!([{ "tool": "http.fetch", "args": { "url": fake.url("/echo"), "headers": { "x-t": "{{vault:LITERAL}}" } } }])).await;
    assert!(out[0]["result"].is_object(), "{out:?}");
    let (headers, _) = fake.state.last.lock().unwrap().clone().unwrap();
    assert_eq!(headers.get("x-t").unwrap(), "{{vault:REAL}}");
});

db_test!(
    vault_references_reach_the_tool_and_are_scrubbed_from_results_in_every_encoding,
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
        set(&app, &key, "API_TOKEN", SECRET).await;
        let out = execute(&app, &key, json!([{ "tool": "http.fetch", "args": { "url": fake.url("/reflect"), "headers": { "x-secret": "{{vault:API_TOKEN}}" } } }])).await;
        let (headers, _) = fake.state.last.lock().unwrap().clone().unwrap();
        assert_eq!(
            headers.get("x-secret").unwrap(),
            SECRET,
            "the tool received the real value"
        );
        let body: Value = serde_json::from_str(out[0]["result"]["body"].as_str().unwrap()).unwrap();
        for field in ["raw", "b64", "basic", "url", "json"] {
            let v = body[field].as_str().unwrap();
            assert!(v.contains("[redacted:API_TOKEN]"), "{field}: {v}");
        }
        let text = out[0].to_string();
        assert!(!text.contains(SECRET));
        assert!(!text.contains(&base64_of(SECRET)[..12]));
        let recorded = recorded_text(&app, &admin).await;
        assert!(!recorded.contains(SECRET));
        assert!(
            recorded.contains("{{vault:API_TOKEN}}"),
            "the recorded arguments are the agent's template"
        );
    }
);

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

db_test!(
    an_unknown_vault_name_is_invalid_arguments_without_an_oracle,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        // A secret of the same name in another project must not change the answer.
        let eve = app.user_in("eve@example.com", "other", Role::Admin).await;
        let eve_key = app.api_key(&eve).await;
        set(&app, &eve_key, "EVES", "eve-secret-value").await;
        for name in ["EVES", "NEVER_EXISTED"] {
            let out = execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "k", "content": format!("{{{{vault:{name}}}}}") } }])).await;
            assert_eq!(out[0]["code"], "INVALID_ARGUMENTS");
            assert_eq!(out[0]["errors"][0]["path"], "/content");
            assert_eq!(
                out[0]["errors"][0]["message"],
                format!("no vault secret named {name} in this project")
            );
        }
    }
);

db_test!(
    secrets_are_sealed_at_rest_and_bound_to_their_row,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        set(&app, &key, "A", SECRET).await;
        set(&app, &key, "B", "second-secret-value").await;
        let a = store::vault::get(app.wb.db().pool(), &admin.project_id, "A")
            .await
            .unwrap()
            .unwrap();
        assert!(!a.ciphertext.contains(SECRET) && !a.ciphertext.contains(&base64_of(SECRET)));
        assert_eq!(a.key_version, 1);
        // Copy A's ciphertext into B's row: B no longer opens.
        let mut b = store::vault::get(app.wb.db().pool(), &admin.project_id, "B")
            .await
            .unwrap()
            .unwrap();
        b.ciphertext = a.ciphertext.clone();
        b.nonce = a.nonce.clone();
        store::vault::upsert(app.wb.db().pool(), &b).await.unwrap();
        assert!(app
            .wb
            .vault()
            .reveal(&admin.project_id, &["B".to_string()])
            .await
            .is_err());
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "k", "content": "{{vault:B}}" } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "UNAVAILABLE");
        assert!(!out[0].to_string().contains(SECRET));
        // A still opens.
        assert_eq!(
            app.wb
                .vault()
                .reveal(&admin.project_id, &["A".to_string()])
                .await
                .unwrap()["A"]
                .as_str(),
            SECRET
        );
    }
);
