//! vector.upsert / vector.query through execute_tools: cosine ranking, metadata filters, the
//! fixed dimension of a namespace, limits answered with clear errors and nothing half-written,
//! project isolation, and a change on another instance seen at once.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

async fn upsert(app: &TestApp, key: &str, namespace: &str, vectors: Value) -> Value {
    execute(app, key, json!([{ "tool": "vector.upsert", "args": { "namespace": namespace, "vectors": vectors } }])).await.remove(0)
}

async fn query(app: &TestApp, key: &str, args: Value) -> Value {
    execute(app, key, json!([{ "tool": "vector.query", "args": args }]))
        .await
        .remove(0)
}

fn ids(out: &Value) -> Vec<String> {
    out["result"]["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no matches in {out}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn invalid(out: &Value) -> String {
    assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
    out.to_string()
}

db_test!(
    vectors_are_found_best_first_by_cosine_and_filtered_by_metadata,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let up = upsert(
        &app,
        &key,
        "notes",
        json!([
            { "id": "rust", "values": [0.9, 0.1, 0.0], "metadata": { "text": "Rust is a systems language", "lang": "en", "year": 2024 } },
            { "id": "tokio", "values": [0.7, 0.7, 0.0], "metadata": { "text": "tokio runs async Rust", "lang": "en", "year": 2023 } },
            { "id": "kaffee", "values": [0.0, 0.2, 0.9], "metadata": { "text": "Kaffee am Morgen", "lang": "de" } },
            { "id": "opposite", "values": [-1.0, 0.0, 0.0] }
        ]),
    )
    .await;
        assert_eq!(
            up["result"],
            json!({ "upserted": 4, "namespace": "notes", "dimension": 3, "vector_count": 4 }),
            "{up}"
        );

        let all = query(
            &app,
            &key,
            json!({ "namespace": "notes", "vector": [1.0, 0.0, 0.0] }),
        )
        .await;
        assert_eq!(ids(&all), ["rust", "tokio", "kaffee", "opposite"]);
        let m = &all["result"]["matches"];
        let score = |i: usize| m[i]["score"].as_f64().unwrap();
        assert!((score(0) - 0.9 / (0.82f64).sqrt()).abs() < 1e-5, "{all}");
        assert!(
            (score(3) + 1.0).abs() < 1e-6,
            "the opposite direction scores -1: {all}"
        );
        assert_eq!(m[0]["metadata"]["text"], "Rust is a systems language");
        assert_eq!(m[3]["metadata"], json!({}));
        assert!(
            m[0].get("values").is_none(),
            "values only when asked: {all}"
        );

        let top = query(&app, &key, json!({ "namespace": "notes", "vector": [1.0, 0.0, 0.0], "top_k": 2, "include_values": true })).await;
        assert_eq!(ids(&top), ["rust", "tokio"]);
        assert_eq!(
            top["result"]["matches"][0]["values"],
            json!([0.9, 0.1, 0.0]),
            "values come back as they were given: {top}"
        );

        let en = query(
            &app,
            &key,
            json!({ "namespace": "notes", "vector": [0.0, 1.0, 0.0], "filter": { "lang": "en" } }),
        )
        .await;
        assert_eq!(ids(&en), ["tokio", "rust"]);
        let years = query(&app, &key, json!({ "namespace": "notes", "vector": [1.0, 0.0, 0.0], "filter": { "year": { "$in": [2023, 1999] } } })).await;
        assert_eq!(ids(&years), ["tokio"]);
        let none = query(
            &app,
            &key,
            json!({ "namespace": "notes", "vector": [1.0, 0.0, 0.0], "filter": { "lang": "fr" } }),
        )
        .await;
        assert_eq!(ids(&none), Vec::<String>::new());

        // The same id replaces the vector and its metadata.
        let again = upsert(&app, &key, "notes", json!([{ "id": "opposite", "values": [1.0, 0.0, 0.0], "metadata": { "text": "now aligned" } }])).await;
        assert_eq!(again["result"]["vector_count"], 4, "{again}");
        let now = query(
            &app,
            &key,
            json!({ "namespace": "notes", "vector": [1.0, 0.0, 0.0], "top_k": 1 }),
        )
        .await;
        assert_eq!(ids(&now), ["opposite"]);
        assert_eq!(
            now["result"]["matches"][0]["metadata"]["text"],
            "now aligned"
        );

        // Side effects are honest: the write asks nothing a read-only key could not see coming.
        let res = app
            .http()
            .get(app.url("/v1/tools/vector.upsert"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        let tool: Value = res.json().await.unwrap();
        assert_eq!(tool["side_effects"], "write", "{tool}");
        let res = app
            .http()
            .get(app.url("/v1/tools/vector.query"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        let tool: Value = res.json().await.unwrap();
        assert_eq!(tool["side_effects"], "none", "{tool}");
    }
);

db_test!(
    a_namespace_keeps_the_dimension_of_its_first_upsert,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        upsert(
            &app,
            &key,
            "docs",
            json!([{ "id": "a", "values": [1.0, 0.0, 0.0] }]),
        )
        .await;
        let wrong = invalid(&upsert(&app, &key, "docs", json!([{ "id": "b", "values": [1.0, 0.0, 0.0, 0.0] }, { "id": "c", "values": [0.0, 1.0, 0.0, 0.0] }])).await);
        assert!(
            wrong.contains("holds vectors of 3 dimensions; these have 4"),
            "{wrong}"
        );
        let q = invalid(
            &query(
                &app,
                &key,
                json!({ "namespace": "docs", "vector": [1.0, 0.0] }),
            )
            .await,
        );
        assert!(
            q.contains("holds vectors of 3 dimensions; this vector has 2"),
            "{q}"
        );
        // Nothing of the refused call was written.
        let all = query(
            &app,
            &key,
            json!({ "namespace": "docs", "vector": [1.0, 1.0, 1.0] }),
        )
        .await;
        assert_eq!(ids(&all), ["a"]);
        // Within one call, every vector has the first one's dimension; a refused first upsert
        // creates no namespace.
        let mixed = invalid(&upsert(&app, &key, "fresh", json!([{ "id": "a", "values": [1.0, 0.0] }, { "id": "b", "values": [1.0, 0.0, 0.0] }])).await);
        assert!(
            mixed.contains("/vectors/1/values")
                && mixed.contains("has 3 dimensions but the first vector of this call has 2"),
            "{mixed}"
        );
        let missing = query(
            &app,
            &key,
            json!({ "namespace": "fresh", "vector": [1.0, 0.0] }),
        )
        .await;
        assert_eq!(missing["code"], "TOOL_ERROR", "{missing}");
        assert!(
            missing["handler_error"]
                .as_str()
                .unwrap()
                .contains("namespace \"fresh\" has no vectors in this project yet"),
            "{missing}"
        );
    }
);

db_test!(
    bad_vector_input_gets_clear_errors_and_writes_nothing,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let too_many: Vec<Value> = (0..1001)
            .map(|i| json!({ "id": format!("v{i}"), "values": [1.0] }))
            .collect();
        invalid(&upsert(&app, &key, "n", Value::Array(too_many)).await);
        let big = "x".repeat(5000);
        let meta = invalid(&upsert(&app, &key, "n", json!([{ "id": "ok", "values": [1.0, 2.0] }, { "id": "fat", "values": [1.0, 2.0], "metadata": { "text": big } }])).await);
        assert!(
            meta.contains("/vectors/1/metadata") && meta.contains("at most 4096"),
            "{meta}"
        );
        let zero = invalid(
            &upsert(
                &app,
                &key,
                "n",
                json!([{ "id": "z", "values": [0.0, 0.0] }]),
            )
            .await,
        );
        assert!(zero.contains("all zero"), "{zero}");
        invalid(
            &upsert(
                &app,
                &key,
                "bad name!",
                json!([{ "id": "a", "values": [1.0] }]),
            )
            .await,
        );
        invalid(&upsert(&app, &key, "n", json!([{ "id": "a", "values": ["1.0"] }])).await);
        invalid(&upsert(&app, &key, "n", json!([{ "id": "a", "values": [1e39] }])).await);
        // Not one of those calls created the namespace.
        let missing = query(
            &app,
            &key,
            json!({ "namespace": "n", "vector": [1.0, 2.0] }),
        )
        .await;
        assert!(
            missing["handler_error"]
                .as_str()
                .unwrap_or_default()
                .contains("has no vectors"),
            "{missing}"
        );

        upsert(
            &app,
            &key,
            "n",
            json!([{ "id": "a", "values": [1.0, 2.0] }]),
        )
        .await;
        let op = invalid(&query(&app, &key, json!({ "namespace": "n", "vector": [1.0, 2.0], "filter": { "year": { "$gt": 2000 } } })).await);
        assert!(op.contains("unknown filter operator \\\"$gt\\\""), "{op}");
        invalid(
            &query(
                &app,
                &key,
                json!({ "namespace": "n", "vector": [1.0, 2.0], "top_k": 101 }),
            )
            .await,
        );
        invalid(
            &query(
                &app,
                &key,
                json!({ "namespace": "n", "vector": [0.0, 0.0] }),
            )
            .await,
        );
    }
);

db_test!(a_namespace_belongs_to_its_project, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    upsert(
        &app,
        &key,
        "private",
        json!([{ "id": "salary", "values": [1.0, 0.0], "metadata": { "text": "Ada earns 1" } }]),
    )
    .await;
    let eve = app.user_in("eve@example.com", "other", Role::Admin).await;
    let eve_key = app.api_key(&eve).await;
    let theirs = query(
        &app,
        &eve_key,
        json!({ "namespace": "private", "vector": [1.0, 0.0] }),
    )
    .await;
    assert_eq!(theirs["code"], "TOOL_ERROR", "{theirs}");
    assert!(!theirs.to_string().contains("Ada earns"), "{theirs}");
    // Eve's own namespace of the same name is hers alone, with its own dimension.
    let up = upsert(
        &app,
        &eve_key,
        "private",
        json!([{ "id": "x", "values": [1.0, 0.0, 0.0] }]),
    )
    .await;
    assert_eq!(up["result"]["dimension"], 3, "{up}");
    let mine = query(
        &app,
        &key,
        json!({ "namespace": "private", "vector": [1.0, 0.0] }),
    )
    .await;
    assert_eq!(ids(&mine), ["salary"]);
});

db_test!(
    a_vector_change_on_another_instance_is_seen_by_the_next_query_here,
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
        upsert(
            &a,
            &key,
            "kb",
            json!([{ "id": "one", "values": [1.0, 0.0] }, { "id": "two", "values": [0.0, 1.0] }]),
        )
        .await;
        // A's copy is loaded and current.
        assert_eq!(
            ids(&query(
                &a,
                &key,
                json!({ "namespace": "kb", "vector": [0.0, 1.0], "top_k": 1 })
            )
            .await),
            ["two"]
        );
        // B replaces one vector and adds another.
        upsert(
            &b,
            &key,
            "kb",
            json!([{ "id": "two", "values": [1.0, 0.1] }, { "id": "three", "values": [0.0, 1.0] }]),
        )
        .await;
        assert_eq!(
            ids(&query(
                &a,
                &key,
                json!({ "namespace": "kb", "vector": [0.0, 1.0], "top_k": 1 })
            )
            .await),
            ["three"]
        );
        // B changes it again; then A writes while its copy is one change behind: A must not
        // apply its write to a stale copy.
        upsert(
            &b,
            &key,
            "kb",
            json!([{ "id": "four", "values": [-1.0, 0.0] }]),
        )
        .await;
        upsert(
            &a,
            &key,
            "kb",
            json!([{ "id": "five", "values": [0.5, 0.5] }]),
        )
        .await;
        let all = query(
            &a,
            &key,
            json!({ "namespace": "kb", "vector": [1.0, 0.0], "top_k": 10 }),
        )
        .await;
        assert_eq!(ids(&all), ["one", "two", "five", "three", "four"], "{all}");
        let on_b = query(
            &b,
            &key,
            json!({ "namespace": "kb", "vector": [1.0, 0.0], "top_k": 10 }),
        )
        .await;
        assert_eq!(ids(&on_b), ids(&all));
    }
);

async fn delete(app: &TestApp, key: &str, args: Value) -> Value {
    execute(app, key, json!([{ "tool": "vector.delete", "args": args }]))
        .await
        .remove(0)
}

db_test!(
    vectors_are_deleted_by_id_or_all_at_once_and_every_instance_sees_it,
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
        upsert(&a, &key, "mem", json!([{ "id": "one", "values": [1.0, 0.0] }, { "id": "two", "values": [0.9, 0.1] }, { "id": "three", "values": [0.0, 1.0] }])).await;
        assert_eq!(
            ids(&query(
                &b,
                &key,
                json!({ "namespace": "mem", "vector": [1.0, 0.0] })
            )
            .await),
            ["one", "two", "three"]
        );
        assert_eq!(
            ids(&query(
                &a,
                &key,
                json!({ "namespace": "mem", "vector": [1.0, 0.0] })
            )
            .await),
            ["one", "two", "three"]
        );

        let out = delete(
            &a,
            &key,
            json!({ "namespace": "mem", "ids": ["one", "nope"] }),
        )
        .await;
        assert_eq!(
            out["result"],
            json!({ "deleted": 1, "namespace": "mem", "vector_count": 2 }),
            "{out}"
        );
        assert_eq!(
            ids(&query(
                &a,
                &key,
                json!({ "namespace": "mem", "vector": [1.0, 0.0] })
            )
            .await),
            ["two", "three"],
            "this instance's copy follows"
        );
        assert_eq!(
            ids(&query(
                &b,
                &key,
                json!({ "namespace": "mem", "vector": [1.0, 0.0] })
            )
            .await),
            ["two", "three"],
            "the other instance's copy is replaced"
        );
        // B deletes while A's copy is current; then A's copy must not keep what B removed.
        delete(&b, &key, json!({ "namespace": "mem", "ids": ["three"] })).await;
        assert_eq!(
            ids(&query(
                &a,
                &key,
                json!({ "namespace": "mem", "vector": [0.0, 1.0] })
            )
            .await),
            ["two"]
        );

        let both = delete(
            &a,
            &key,
            json!({ "namespace": "mem", "ids": ["two"], "all": true }),
        )
        .await;
        assert_eq!(both["code"], "INVALID_ARGUMENTS", "{both}");
        let neither = delete(&a, &key, json!({ "namespace": "mem" })).await;
        assert_eq!(neither["code"], "INVALID_ARGUMENTS", "{neither}");
        let all = delete(&a, &key, json!({ "namespace": "mem", "all": true })).await;
        assert_eq!(all["result"]["deleted"], 1, "{all}");
        let gone = query(
            &b,
            &key,
            json!({ "namespace": "mem", "vector": [1.0, 0.0] }),
        )
        .await;
        assert!(
            gone["handler_error"]
                .as_str()
                .unwrap_or_default()
                .contains("has no vectors"),
            "{gone}"
        );
        let missing = delete(&b, &key, json!({ "namespace": "mem", "all": true })).await;
        assert_eq!(missing["code"], "TOOL_ERROR", "{missing}");
        // An emptied namespace starts over, with a new dimension if need be.
        let up = upsert(
            &b,
            &key,
            "mem",
            json!([{ "id": "x", "values": [1.0, 0.0, 0.0] }]),
        )
        .await;
        assert_eq!(up["result"]["dimension"], 3, "{up}");
        // Neither instance answers from a copy of the namespace as it was before it was emptied.
        for on in [&a, &b] {
            assert_eq!(
                ids(&query(
                    on,
                    &key,
                    json!({ "namespace": "mem", "vector": [1.0, 0.0, 0.0] })
                )
                .await),
                ["x"]
            );
        }
        let res = a
            .http()
            .get(a.url("/v1/tools/vector.delete"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        let tool: Value = res.json().await.unwrap();
        assert_eq!(tool["side_effects"], "destructive", "{tool}");
    }
);
