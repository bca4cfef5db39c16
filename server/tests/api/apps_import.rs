//! `POST /v1/apps/import`: an OpenAPI document (inline YAML or JSON, or fetched from a URL with
//! the address rules) becomes an app definition to review; created through `POST /v1/apps`, its
//! tools call the API as the document describes.

use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

fn document(server: &str) -> String {
    format!(
        r##"openapi: 3.1.0
info: {{ title: Inventory, version: 3.0.0 }}
servers: [{{ url: "{server}" }}]
paths:
  /echo/items/{{itemId}}:
    get:
      operationId: getItem
      tags: [items]
      summary: Get an inventory item
      description: One item with its stock level.
      parameters:
        - {{ name: itemId, in: path, required: true, schema: {{ type: string }} }}
        - {{ name: includeStock, in: query, schema: {{ type: boolean }} }}
  /echo/items:
    post:
      operationId: createItem
      tags: [items]
      summary: Create an inventory item
      requestBody:
        required: true
        content:
          application/json:
            schema: {{ $ref: "#/components/schemas/Item" }}
  /echo/items/{{itemId}}/image:
    put:
      operationId: putImage
      tags: [items]
      parameters: [{{ name: itemId, in: path, required: true, schema: {{ type: string }} }}]
      requestBody: {{ required: true, content: {{ image/png: {{ schema: {{ type: string, format: binary }} }} }} }}
  /echo/admin/reset:
    delete:
      operationId: resetAll
      tags: [admin]
components:
  schemas:
    Item:
      type: object
      required: [sku, name]
      properties:
        id: {{ type: string, readOnly: true }}
        sku: {{ type: string }}
        name: {{ type: string }}
        quantity: {{ type: integer, minimum: 0 }}
"##
    )
}

/// An API on loopback that answers every request with what it received.
async fn echo_api() -> String {
    async fn echo(
        method: axum::http::Method,
        uri: axum::http::Uri,
        body: String,
    ) -> axum::Json<Value> {
        axum::Json(
            json!({ "method": method.as_str(), "path": uri.path(), "query": uri.query().unwrap_or_default(), "body": body }),
        )
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, Router::new().fallback(echo)).await;
    });
    format!("http://{addr}")
}

async fn import(app: &TestApp, key: &str, body: &Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url("/v1/apps/import"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

db_test!(
    an_imported_openapi_document_becomes_an_app_whose_tools_call_the_api,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let api = echo_api().await;
        let (status, preview) = import(&app, &key, &json!({ "name": "inventory", "document": document(&api), "filter": { "tags": ["items"] } })).await;
        assert_eq!(status, 200, "{preview}");
        assert_eq!(preview["object"], "app_import");
        assert_eq!(preview["tools"], 2, "{preview}");
        assert!(preview["problem"].is_null());
        let ops: Vec<(String, bool, Option<String>)> = preview["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["operation_id"].as_str().unwrap().to_owned(),
                    o["selected"].as_bool().unwrap(),
                    o["tool"].as_str().map(str::to_owned),
                )
            })
            .collect();
        assert!(
            ops.contains(&("getItem".into(), true, Some("inventory_get_item".into()))),
            "{ops:?}"
        );
        assert!(
            ops.contains(&("resetAll".into(), false, None)),
            "an operation outside the filter is listed, not selected"
        );
        let image = preview["operations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["operation_id"] == "putImage")
            .unwrap();
        assert!(
            image["skipped"].as_str().unwrap().contains("image/png"),
            "{image}"
        );
        let def = preview["definition"].clone();
        assert_eq!(def["display_name"], "Inventory");
        let create = def["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "inventory_create_item")
            .unwrap();
        assert_eq!(create["side_effects"], "write");
        assert!(
            create["input_schema"]["properties"]["body"]["properties"]
                .get("id")
                .is_none(),
            "read-only fields are not inputs"
        );

        // Nothing is stored until the admin creates the app from the definition.
        assert_eq!(
            app.http()
                .get(app.url("/v1/apps"))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()["data"],
            json!([])
        );
        let res = app
            .http()
            .post(app.url("/v1/apps"))
            .bearer_auth(&key)
            .json(&def)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let out = execute(&app, &key, json!([{ "tool": "inventory_get_item", "args": { "item_id": "sku 7/a", "include_stock": true } }])).await;
        assert_eq!(out[0]["result"]["method"], "GET", "{:?}", out[0]);
        assert_eq!(out[0]["result"]["path"], "/echo/items/sku%207%2Fa");
        assert_eq!(out[0]["result"]["query"], "includeStock=true");
        let out = execute(&app, &key, json!([{ "tool": "inventory_create_item", "args": { "body": { "sku": "A1", "name": "Anvil", "quantity": 3 } } }])).await;
        let sent: Value = serde_json::from_str(out[0]["result"]["body"].as_str().unwrap()).unwrap();
        assert_eq!(sent, json!({ "sku": "A1", "name": "Anvil", "quantity": 3 }));
        let out = execute(&app, &key, json!([{ "tool": "inventory_create_item", "args": { "body": { "sku": "A1", "quantity": -1 } } }])).await;
        assert_eq!(
            out[0]["code"], "INVALID_ARGUMENTS",
            "the document's schema is enforced: {:?}",
            out[0]
        );

        // The same name again is a conflict, before anything is parsed.
        let (status, body) = import(
            &app,
            &key,
            &json!({ "name": "inventory", "document": document(&api) }),
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("conflict")),
            "{body}"
        );
    }
);

db_test!(
    an_openapi_document_is_fetched_by_url_with_the_address_rules,
    |backend| {
        // Without the operator's allowance, a loopback document URL is refused.
        let strict = app!(backend);
        let (_, key) = admin_with_key(&strict).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let doc = document("https://inventory.example/api");
        let served = doc.clone();
        let router = Router::new()
            .route("/openapi.yaml", get(move || async move { served }))
            .route(
                "/moved",
                get(|| async {
                    axum::response::Redirect::temporary("http://169.254.169.254/latest/meta-data/")
                }),
            );
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let (status, body) = import(
            &strict,
            &key,
            &json!({ "name": "inv", "url": format!("http://{addr}/openapi.yaml") }),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("refusing to connect"),
            "{body}"
        );

        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let (status, preview) = import(
            &app,
            &key,
            &json!({ "name": "inv", "url": format!("http://{addr}/openapi.yaml") }),
        )
        .await;
        assert_eq!(status, 200, "{preview}");
        assert_eq!(
            preview["definition"]["base_url"],
            "https://inventory.example/api"
        );
        // A redirect to the metadata address is checked like the first hop.
        let (status, body) = import(
            &app,
            &key,
            &json!({ "name": "inv", "url": format!("http://{addr}/moved") }),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("169.254.169.254"),
            "{body}"
        );
    }
);

db_test!(
    a_bad_import_request_gets_a_clear_error_and_stores_nothing,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let doc = document("https://inventory.example");
        // 256 KiB aliased 40 times: 10 MiB once expanded (import_bombs.rs: the gigabyte ones).
        let aliased = format!(
            "openapi: 3.1.0\npaths: {{}}\nx-big: &b \"{}\"\nx-uses: [{}]\n",
            "a".repeat(256 * 1024),
            vec!["*b"; 40].join(", ")
        );
        for (body, status, needle) in [
            (json!({ "name": "inv" }), 400, "give the OpenAPI document"),
            (
                json!({ "name": "inv", "document": doc, "url": "https://x.example/o.json" }),
                400,
                "not both",
            ),
            (
                json!({ "name": "Bad Name", "document": doc }),
                400,
                "lowercase",
            ),
            (
                json!({ "name": "github", "document": doc }),
                409,
                "already exists",
            ),
            (
                json!({ "name": "inv", "document": { "swagger": "2.0", "paths": {} } }),
                400,
                "Swagger 2.0",
            ),
            (
                json!({ "name": "inv", "document": "openapi: [unclosed" }),
                400,
                "not valid YAML",
            ),
            (
                json!({ "name": "inv", "document": doc, "auth": { "type": "password" } }),
                400,
                "auth",
            ),
            (
                json!({ "name": "inv", "document": doc, "extra": 1 }),
                400,
                "unknown field",
            ),
            (
                json!({ "name": "inv", "document": doc.replace("https://inventory.example", "http://169.254.169.254") }),
                400,
                "public APIs",
            ),
            (
                json!({ "name": "inv", "document": aliased }),
                413,
                "expands past 8 MiB through YAML aliases",
            ),
        ] {
            let (got, out) = import(&app, &key, &body).await;
            assert_eq!(got, status, "{body}: {out}");
            assert!(
                out["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(needle),
                "{needle:?} not in {out}"
            );
        }
        // Over 5 MiB is refused as too large.
        let huge = format!(
            "{{\"openapi\": \"3.1.0\", \"paths\": {{}}, \"x\": \"{}\"}}",
            "a".repeat(5 * 1024 * 1024)
        );
        let (got, out) = import(&app, &key, &json!({ "name": "inv", "document": huge })).await;
        assert_eq!(
            (got, out["error"]["code"].as_str()),
            (413, Some("payload_too_large")),
            "{out}"
        );
        // A member may not import.
        let member = app.user("bob@example.com", Role::Member).await;
        assert_eq!(member.project_id, admin.project_id);
        let member_key = app.api_key(&member).await;
        let (got, _) = import(
            &app,
            &member_key,
            &json!({ "name": "inv", "document": doc }),
        )
        .await;
        assert_eq!(got, 403);
        let apps: Value = app
            .http()
            .get(app.url("/v1/apps"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(apps["data"], json!([]));
    }
);
