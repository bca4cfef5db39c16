//! Every shipped plugin tool against a recording fake of its provider on loopback, from the
//! cases in `contract/<integration>.json` (format: core/plugins/README.md): the request it sends
//! (method, path, query, body, the injected credential, the integration's fixed headers) is the
//! one the provider documents, and the reply is shaped as its definition says (pagination,
//! errors on HTTP 200, each API's error body). Tools whose Rust handler sends several requests
//! have their own tests below. So have the JSON examples of the two source documents
//! (`contract/seed_examples.txt`, copied byte for byte): each runs as written, against these
//! fakes, a fake upstream MCP server and the real app, and answers its documented shape.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::Engine as _;
use serde_json::{json, Value};
use workbench_core::connections::Credential;
use workbench_core::integrations::{AuthDef, IntegrationDef, IntegrationSettings};

use crate::db_test;
use crate::helpers::{admin_with_key, execute, mcp_call, Options};

/// Handler tools that send several requests: tested in Rust below.
const RUST_TESTED: &[&str] = &[
    "hackernews_top_stories",
    "gmail_send_email",
    "google_drive_upload",
    "superset_export_csv",
];

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Clone)]
struct FakeReply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl FakeReply {
    fn json(v: Value) -> FakeReply {
        FakeReply {
            status: 200,
            content_type: "application/json",
            body: serde_json::to_vec(&v).unwrap(),
            headers: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    /// "METHOD /path" → reply; anything else is 404 `{"message": "Not Found"}`.
    replies: Mutex<HashMap<String, FakeReply>>,
}

impl Recorder {
    fn reply(&self, key: &str, r: FakeReply) {
        self.replies.lock().unwrap().insert(key.to_owned(), r);
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    fn reset(&self) {
        self.seen.lock().unwrap().clear();
        self.replies.lock().unwrap().clear();
    }
}

async fn record(
    State(r): State<Arc<Recorder>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    r.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query,
        headers,
        body,
    });
    let reply = r
        .replies
        .lock()
        .unwrap()
        .get(&format!("{method} {}", uri.path()))
        .cloned();
    match reply {
        Some(f) => {
            let mut res = (StatusCode::from_u16(f.status).unwrap(), f.body).into_response();
            res.headers_mut()
                .insert("content-type", HeaderValue::from_static(f.content_type));
            for (k, v) in f.headers {
                res.headers_mut().insert(
                    HeaderName::try_from(k.as_str()).unwrap(),
                    HeaderValue::from_str(&v).unwrap(),
                );
            }
            res
        }
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({ "message": "Not Found" })),
        )
            .into_response(),
    }
}

async fn start() -> (SocketAddr, Arc<Recorder>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Recorder::default());
    let app = Router::new().fallback(record).with_state(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, state)
}

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The shipped definitions, read from `core/plugins/` (the same files the binary embeds).
fn definitions() -> Vec<IntegrationDef> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest("../core/plugins"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files
        .into_iter()
        .filter(|f| f.extension().is_some_and(|x| x == "json"))
    {
        out.push(
            IntegrationDef::parse(
                &std::fs::read_to_string(&f).unwrap(),
                &f.display().to_string(),
            )
            .unwrap(),
        );
    }
    out
}

/// Each integration pointed at the fake, keeping its base URL's own path prefix (`/api` for
/// Slack, `/api/v4` for GitLab).
fn settings(addr: SocketAddr, defs: &[IntegrationDef]) -> BTreeMap<String, IntegrationSettings> {
    defs.iter()
        .map(|d| {
            let prefix = url::Url::parse(&d.base_url)
                .unwrap()
                .path()
                .trim_end_matches('/')
                .to_owned();
            (
                d.name.clone(),
                IntegrationSettings {
                    base_url: Some(format!("http://{addr}{prefix}")),
                    // An OAuth integration without a client is unavailable (nobody can connect
                    // it); the stored credentials below stand in for a connection made.
                    client_id: Some("contract-client".into()),
                    ..Default::default()
                },
            )
        })
        .collect()
}

fn token(integration: &str) -> String {
    format!("tok-{integration}")
}

/// The credential stored for each integration's user.
fn credential(d: &IntegrationDef) -> Option<Credential> {
    let t = token(&d.name);
    match &d.auth {
        AuthDef::None => None,
        AuthDef::Oauth2 { .. } => Some(Credential::Oauth2 {
            access_token: t,
            refresh_token: None,
            expires_at: None,
        }),
        AuthDef::ApiKey { .. } => Some(Credential::ApiKey { key: t }),
        AuthDef::Cookie { .. } => Some(Credential::Cookie { value: t }),
    }
}

/// Where the credential must arrive: a header and its value, or a query parameter.
enum Carried {
    Nothing,
    Header(String, String),
    Query(String, String),
}

fn carried(d: &IntegrationDef) -> Carried {
    let t = token(&d.name);
    let via = |inject: &workbench_core::integrations::definition::Inject| match &inject.query {
        Some(q) => Carried::Query(q.clone(), t.clone()),
        None => Carried::Header(
            inject.header.to_ascii_lowercase(),
            inject.format.replace("{token}", &t),
        ),
    };
    match &d.auth {
        AuthDef::None => Carried::Nothing,
        AuthDef::Oauth2 { inject, .. } | AuthDef::ApiKey { inject, .. } => via(inject),
        AuthDef::Cookie { cookie_name, .. } => {
            Carried::Header("cookie".into(), format!("{cookie_name}={t}"))
        }
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), as_text(v))).collect())
        .unwrap_or_default()
}

fn fake_reply(reply: Option<&Value>) -> FakeReply {
    let reply = reply.cloned().unwrap_or(json!({}));
    let status = reply.get("status").and_then(Value::as_u64).unwrap_or(200) as u16;
    let (content_type, body) = match (reply.get("text"), reply.get("json")) {
        (Some(t), _) => (
            "text/plain; charset=utf-8",
            t.as_str().unwrap_or_default().as_bytes().to_vec(),
        ),
        (None, Some(j)) => ("application/json", serde_json::to_vec(j).unwrap()),
        (None, None) => ("application/json", Vec::new()),
    };
    let headers = string_map(reply.get("headers")).into_iter().collect();
    FakeReply {
        status,
        content_type,
        body,
        headers,
    }
}

/// Checks one request against the case's `request`; `label` names the case in failures.
fn check_request(label: &str, d: &IntegrationDef, want: &Value, s: &Seen) {
    assert_eq!(
        (s.method.as_str(), s.path.as_str()),
        (
            want["method"].as_str().unwrap(),
            want["path"].as_str().unwrap()
        ),
        "{label}: request line"
    );
    let mut query = s.query.clone();
    let carried = carried(d);
    match &carried {
        Carried::Query(param, value) => assert_eq!(
            query.remove(param).as_deref(),
            Some(value.as_str()),
            "{label}: credential in the query"
        ),
        Carried::Header(h, v) => assert_eq!(
            s.headers.get(h).and_then(|x| x.to_str().ok()),
            Some(v.as_str()),
            "{label}: credential"
        ),
        Carried::Nothing => assert!(
            s.headers.get("authorization").is_none() && s.headers.get("cookie").is_none(),
            "{label}: no credential"
        ),
    }
    assert_eq!(query, string_map(want.get("query")), "{label}: query");
    for (h, v) in &d.headers {
        assert_eq!(
            s.headers
                .get(h.to_ascii_lowercase())
                .and_then(|x| x.to_str().ok()),
            Some(v.as_str()),
            "{label}: the integration's {h} header"
        );
    }
    for (h, v) in string_map(want.get("headers")) {
        assert_eq!(
            s.headers.get(h.as_str()).and_then(|x| x.to_str().ok()),
            Some(v.as_str()),
            "{label}: header {h}"
        );
    }
    let content_type = s
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if let Some(j) = want.get("json") {
        assert!(
            content_type.starts_with("application/json"),
            "{label}: content type {content_type:?}"
        );
        let got: Value = serde_json::from_slice(&s.body).unwrap_or_else(|_| {
            panic!(
                "{label}: the body is not JSON: {:?}",
                String::from_utf8_lossy(&s.body)
            )
        });
        assert_eq!(&got, j, "{label}: body");
    } else if let Some(f) = want.get("form") {
        assert!(
            content_type.starts_with("application/x-www-form-urlencoded"),
            "{label}: content type {content_type:?}"
        );
        let got: BTreeMap<String, String> =
            url::form_urlencoded::parse(&s.body).into_owned().collect();
        assert_eq!(got, string_map(Some(f)), "{label}: form body");
    } else if let Some(parts) = want.get("contains").and_then(Value::as_array) {
        let text = String::from_utf8_lossy(&s.body);
        for p in parts {
            assert!(
                text.contains(p.as_str().unwrap()),
                "{label}: the body lacks {p}: {text}"
            );
        }
    } else {
        assert!(
            s.body.is_empty(),
            "{label}: no body expected, got {:?}",
            String::from_utf8_lossy(&s.body)
        );
    }
}

/// Coverage the README promises: a result case per tool, an error case per integration, both
/// pages of every paginated tool.
fn check_coverage(d: &IntegrationDef, cases: &[Value]) {
    let with_result: BTreeSet<&str> = cases
        .iter()
        .filter(|c| c.get("result").is_some())
        .filter_map(|c| c["tool"].as_str())
        .collect();
    for t in &d.tools {
        if RUST_TESTED.contains(&t.name.as_str()) {
            continue;
        }
        assert!(
            with_result.contains(t.name.as_str()),
            "{} has no contract case with a result",
            t.name
        );
        if t.result.as_ref().is_some_and(|r| r.next.is_some()) {
            let pages: Vec<&Value> = cases
                .iter()
                .filter(|c| c["tool"] == t.name.as_str())
                .filter_map(|c| c.get("result"))
                .collect();
            let next = |v: &Value| v.get("next_cursor").or_else(|| v.get("next_page")).cloned();
            assert!(
                pages.iter().any(|p| next(p).is_some_and(|n| !n.is_null())),
                "{}: no case with a next page",
                t.name
            );
            assert!(
                pages.iter().any(|p| next(p).is_some_and(|n| n.is_null())),
                "{}: no case on the last page",
                t.name
            );
        }
    }
    assert!(
        cases
            .iter()
            .any(|c| c.get("error").is_some()
                && c["reply"]["status"].as_u64().is_some_and(|s| s >= 400)),
        "{}: no case with an HTTP error answer",
        d.name
    );
}

db_test!(
    every_plugin_tool_sends_its_providers_documented_request,
    |backend| {
        let Some(Fixture {
            app,
            key,
            who,
            recorder,
            defs,
        }) = connected(backend).await
        else {
            return;
        };
        let shipped: BTreeSet<String> = app
            .wb
            .integrations()
            .all()
            .iter()
            .map(|i| i.def.name.clone())
            .collect();
        assert_eq!(
            shipped,
            defs.iter().map(|d| d.name.clone()).collect::<BTreeSet<_>>(),
            "the binary ships exactly core/plugins/*.json"
        );
        let mut files: BTreeSet<String> = BTreeSet::new();
        let mut total = 0;
        for d in &defs {
            let path = manifest(&format!("tests/api/contract/{}.json", d.name));
            let file: Value = serde_json::from_str(
                &std::fs::read_to_string(&path)
                    .unwrap_or_else(|_| panic!("{} has no case file {}", d.name, path.display())),
            )
            .unwrap();
            assert_eq!(file["integration"], d.name.as_str(), "{}", path.display());
            files.insert(d.name.clone());
            let cases = file["cases"].as_array().unwrap();
            check_coverage(d, cases);
            for (i, c) in cases.iter().enumerate() {
                let tool = c["tool"].as_str().unwrap();
                let label = format!("{} case {i} ({tool})", d.name);
                assert!(d.tool(tool).is_some(), "{label}: no such tool");
                recorder.reset();
                // A case that answered an OAuth 401 leaves the connection expired: start afresh.
                connect(&app, &who, d).await;
                let want = c.get("request").cloned().unwrap_or(Value::Null);
                if !want.is_null() {
                    recorder.reply(
                        &format!(
                            "{} {}",
                            want["method"].as_str().unwrap(),
                            want["path"].as_str().unwrap()
                        ),
                        fake_reply(c.get("reply")),
                    );
                }
                let out = execute(&app, &key, json!([{ "tool": tool, "args": c["args"] }])).await;
                let seen = recorder.seen();
                if want.is_null() {
                    assert!(
                        seen.is_empty(),
                        "{label}: no request may be sent, saw {seen:?}"
                    );
                } else {
                    assert_eq!(
                        seen.len(),
                        1,
                        "{label}: one request, saw {seen:?}; answer {:?}",
                        out[0]
                    );
                    check_request(&label, d, &want, &seen[0]);
                }
                if let Some(r) = c.get("result") {
                    assert_eq!(&out[0]["result"], r, "{label}: {:?}", out[0]);
                } else if let Some(why) = c.get("error").and_then(Value::as_str) {
                    assert_eq!(out[0]["code"], "TOOL_ERROR", "{label}: {:?}", out[0]);
                    let text = out[0]["handler_error"].as_str().unwrap_or_default();
                    assert!(text.contains(why), "{label}: {text:?} lacks {why:?}");
                } else {
                    assert_eq!(out[0]["code"], c["code"], "{label}: {:?}", out[0]);
                }
                total += 1;
            }
        }
        let on_disk: BTreeSet<String> = std::fs::read_dir(manifest("tests/api/contract"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            on_disk, files,
            "every case file belongs to a shipped integration"
        );
        let tools: usize = defs.iter().map(|d| d.tools.len()).sum();
        assert!(tools >= 194, "the catalog ships {tools} plugin tools");
        assert!(total >= tools, "{total} cases for {tools} tools");
    }
);

/// An app whose integrations all point at one recording fake, with its admin connected to each.
struct Fixture {
    app: crate::helpers::TestApp,
    key: String,
    who: workbench_core::auth::Principal,
    recorder: Arc<Recorder>,
    defs: Vec<IntegrationDef>,
}

async fn connected(backend: crate::helpers::Backend) -> Option<Fixture> {
    let defs = definitions();
    let (addr, recorder) = start().await;
    let app = crate::helpers::spawn_app_with(
        backend,
        Options {
            integrations: settings(addr, &defs),
            ..Default::default()
        },
    )
    .await?;
    let (who, key) = admin_with_key(&app).await;
    for d in &defs {
        connect(&app, &who, d).await;
    }
    Some(Fixture {
        app,
        key,
        who,
        recorder,
        defs,
    })
}

/// Stores (again) `who`'s credential for the integration, as a fresh connection.
async fn connect(
    app: &crate::helpers::TestApp,
    who: &workbench_core::auth::Principal,
    d: &IntegrationDef,
) {
    if let Some(c) = credential(d) {
        app.wb
            .connections()
            .store(&who.project_id, &who.user_id, &d.name, &c)
            .await
            .unwrap();
    }
}

db_test!(
    hacker_news_top_stories_reads_the_list_then_each_item,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        recorder.reply(
            "GET /v0/newstories.json",
            FakeReply::json(json!([30, 20, 10])),
        );
        for (id, title) in [(30, "Thirty"), (20, "Twenty"), (10, "Ten")] {
            recorder.reply(&format!("GET /v0/item/{id}.json"), FakeReply::json(json!({ "id": id, "title": title, "url": "u", "score": id, "by": "pg", "descendants": 1, "kids": [1] })));
        }
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "hackernews_top_stories", "args": { "list": "new", "limit": 2 } }]),
        )
        .await;
        assert_eq!(
            out[0]["result"],
            json!({ "items": [
            { "id": 30, "title": "Thirty", "url": "u", "score": 30, "by": "pg", "comments": 1 },
            { "id": 20, "title": "Twenty", "url": "u", "score": 20, "by": "pg", "comments": 1 }
        ], "next_page": 2 }),
            "{:?}",
            out[0]
        );
        let mut paths: Vec<String> = recorder.seen().iter().map(|s| s.path.clone()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                "/v0/item/20.json",
                "/v0/item/30.json",
                "/v0/newstories.json"
            ],
            "only the first `limit` items are fetched"
        );
        // The next page starts at next_page; the list's end has none.
        recorder.reset();
        recorder.reply(
            "GET /v0/newstories.json",
            FakeReply::json(json!([30, 20, 10])),
        );
        recorder.reply("GET /v0/item/10.json", FakeReply::json(json!({ "id": 10, "title": "Ten", "url": "u", "score": 10, "by": "pg", "descendants": 1 })));
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "hackernews_top_stories", "args": { "list": "new", "limit": 2, "offset": 2 } }]),
        )
        .await;
        assert_eq!(
            out[0]["result"],
            json!({ "items": [
            { "id": 10, "title": "Ten", "url": "u", "score": 10, "by": "pg", "comments": 1 }
        ], "next_page": null }),
            "{:?}",
            out[0]
        );
        let mut paths: Vec<String> = recorder.seen().iter().map(|s| s.path.clone()).collect();
        paths.sort();
        assert_eq!(paths, ["/v0/item/10.json", "/v0/newstories.json"]);
        // A list name outside the schema's enum never reaches the API.
        recorder.reset();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "hackernews_top_stories", "args": { "list": "../admin" } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "INVALID_ARGUMENTS");
        assert!(recorder.seen().is_empty());
    }
);

/// The parts of a multipart/related body, as (headers, content).
fn multipart_parts(content_type: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let boundary = content_type
        .split("boundary=")
        .nth(1)
        .expect("a boundary")
        .trim_matches('"');
    let delim = format!("--{boundary}");
    let text = body.to_vec();
    let mut parts = Vec::new();
    let mut rest: &[u8] = &text;
    while let Some(i) = find(rest, delim.as_bytes()) {
        rest = &rest[i + delim.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        let end = find(rest, format!("\r\n{delim}").as_bytes()).expect("a closing delimiter");
        let part = &rest[..end];
        let split = find(part, b"\r\n\r\n").expect("part headers");
        parts.push((
            String::from_utf8_lossy(&part[..split]).into_owned(),
            part[split + 4..].to_vec(),
        ));
        rest = &rest[end + 2..];
    }
    parts
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

db_test!(
    google_drive_upload_sends_one_multipart_request_with_metadata_then_bytes,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        let file = json!({ "id": "f1", "name": "q3.bin", "mimeType": "application/octet-stream", "webViewLink": "https://drive.google.com/file/d/f1/view", "size": "4", "kind": "drive#file" });
        recorder.reply("POST /upload/drive/v3/files", FakeReply::json(file));
        let bytes = [0u8, 159, 146, 150];
        let args = json!({ "name": "q3.bin", "content_base64": base64::engine::general_purpose::STANDARD.encode(bytes), "mime_type": "application/octet-stream", "folder_id": "fold_9" });
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "google_drive_upload", "args": args }]),
        )
        .await;
        assert_eq!(
            out[0]["result"],
            json!({ "id": "f1", "name": "q3.bin", "mimeType": "application/octet-stream", "webViewLink": "https://drive.google.com/file/d/f1/view", "size": "4" }),
            "{:?}",
            out[0]
        );
        let seen = recorder.seen();
        assert_eq!(seen.len(), 1);
        let s = &seen[0];
        assert_eq!(
            s.headers.get("authorization").unwrap(),
            "Bearer tok-google_drive"
        );
        assert_eq!(
            s.query.get("uploadType").map(String::as_str),
            Some("multipart")
        );
        let ct = s.headers.get("content-type").unwrap().to_str().unwrap();
        assert!(ct.starts_with("multipart/related; boundary="), "{ct}");
        let parts = multipart_parts(ct, &s.body);
        assert_eq!(parts.len(), 2, "metadata and media");
        assert!(parts[0].0.contains("application/json"));
        let meta: Value = serde_json::from_slice(&parts[0].1).unwrap();
        assert_eq!(
            meta,
            json!({ "name": "q3.bin", "mimeType": "application/octet-stream", "parents": ["fold_9"] })
        );
        assert!(parts[1]
            .0
            .contains("Content-Type: application/octet-stream"));
        assert_eq!(parts[1].1, bytes, "binary content arrives byte for byte");

        // A MIME type that tries to add a part header, or both contents at once, never leaves.
        for bad in [
            json!({ "name": "x", "content": "a", "mime_type": "text/plain\r\nX-Evil: 1" }),
            json!({ "name": "x", "content": "a", "content_base64": "YQ==" }),
            json!({ "name": "x" }),
        ] {
            recorder.reset();
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "google_drive_upload", "args": bad }]),
            )
            .await;
            assert_eq!(out[0]["code"], "INVALID_ARGUMENTS", "{bad}: {:?}", out[0]);
            assert!(recorder.seen().is_empty());
        }
        // Drive's own error reaches the agent.
        recorder.reply("POST /upload/drive/v3/files", FakeReply { status: 403, ..FakeReply::json(json!({ "error": { "code": 403, "message": "The user's Drive storage quota has been exceeded.", "status": "PERMISSION_DENIED" } })) });
        let out = execute(&app, &key, json!([{ "tool": "google_drive_upload", "args": { "name": "a.txt", "content": "hi" } }])).await;
        assert_eq!(out[0]["code"], "TOOL_ERROR");
        assert!(
            out[0]["handler_error"]
                .as_str()
                .unwrap()
                .contains("storage quota has been exceeded"),
            "{:?}",
            out[0]
        );
    }
);

db_test!(
    gmail_send_email_builds_the_message_gmail_sends_bcc_included,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        recorder.reply(
            "GET /gmail/v1/users/me/profile",
            FakeReply::json(json!({ "emailAddress": "ada@example.com", "messagesTotal": 3 })),
        );
        recorder.reply(
            "POST /gmail/v1/users/me/messages/send",
            FakeReply::json(json!({ "id": "m1", "threadId": "t1", "labelIds": ["SENT"] })),
        );
        let args = json!({
            "to": ["Bob <bob@example.org>"], "cc": ["carol@example.org"], "bcc": ["dan@example.org"],
            "subject": "Q3 numbers", "text": "See attached", "thread_id": "t1", "in_reply_to": "<orig@mail.gmail.com>"
        });
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "gmail_send_email", "args": args }]),
        )
        .await;
        assert_eq!(
            out[0]["result"],
            json!({ "id": "m1", "threadId": "t1", "labelIds": ["SENT"] }),
            "{:?}",
            out[0]
        );
        let seen = recorder.seen();
        assert_eq!(
            seen.iter()
                .map(|s| (s.method.as_str(), s.path.as_str()))
                .collect::<Vec<_>>(),
            [
                ("GET", "/gmail/v1/users/me/profile"),
                ("POST", "/gmail/v1/users/me/messages/send")
            ]
        );
        assert!(seen
            .iter()
            .all(|s| s.headers.get("authorization").unwrap() == "Bearer tok-gmail"));
        let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
        assert_eq!(sent["threadId"], "t1");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sent["raw"].as_str().unwrap())
            .unwrap();
        let raw = String::from_utf8(raw).unwrap();
        for header in [
            "From: ada@example.com",
            "To: Bob <bob@example.org>",
            "Cc: carol@example.org",
            "Bcc: dan@example.org",
            "Subject: Q3 numbers",
            "In-Reply-To: <orig@mail.gmail.com>",
            "References: <orig@mail.gmail.com>",
        ] {
            assert!(raw.contains(header), "{header:?} missing from\n{raw}");
        }
        assert!(raw.contains("See attached"));

        // A subject or reply id that would add a header never reaches Gmail.
        for bad in [
            json!({ "to": ["b@example.org"], "subject": "Hi\r\nBcc: eve@evil.example" }),
            json!({ "to": ["b@example.org"], "subject": "x", "in_reply_to": "<a@b>\r\nX: y" }),
            json!({ "to": ["not an address"], "subject": "x" }),
        ] {
            recorder.reset();
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "gmail_send_email", "args": bad }]),
            )
            .await;
            assert_eq!(out[0]["code"], "INVALID_ARGUMENTS", "{bad}: {:?}", out[0]);
            assert!(recorder.seen().is_empty(), "{bad}");
        }
    }
);

/// The examples of `contract/seed_examples.txt` by name, each as its exact text.
fn seed_examples() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(manifest("tests/api/contract/seed_examples.txt")).unwrap();
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("=== ") {
            if let Some((name, body)) = current.take() {
                out.insert(name, body.join("\n"));
            }
            let name = head.split(" | ").next().unwrap().to_owned();
            current = Some((name, Vec::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push(line);
        }
    }
    if let Some((name, body)) = current {
        out.insert(name, body.join("\n"));
    }
    out
}

/// One example, parsed.
fn seed_example(name: &str) -> Value {
    let all = seed_examples();
    let text = all.get(name).unwrap_or_else(|| panic!("no example {name}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("example {name}: {e}"))
}

/// `got` has the documented shape `want`: every key of a documented object, with a value of the
/// same JSON type (each element of an array against the documented first one); documented
/// values themselves are examples ("…", ids, latencies), so only the type is compared.
fn assert_shape(label: &str, want: &Value, got: &Value) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{label}: no {k:?} in {got}"));
                assert_shape(&format!("{label}.{k}"), wv, gv);
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if let Some(first) = w.first() {
                assert!(!g.is_empty(), "{label}: empty, documented {want}");
                for (i, gv) in g.iter().enumerate() {
                    assert_shape(&format!("{label}[{i}]"), first, gv);
                }
            }
        }
        (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Null, Value::Null) => {}
        _ => panic!("{label}: documented {want}, got {got}"),
    }
}

/// Calls `/mcp` `tools/call` with an example's `{name, arguments}` exactly as written.
async fn call_example(app: &crate::helpers::TestApp, key: &str, name: &str) -> (Value, bool) {
    let call = seed_example(name);
    mcp_call(
        app,
        key,
        call["name"].as_str().unwrap(),
        call["arguments"].clone(),
    )
    .await
}

/// What SQL Lab's execute answers for a synchronous query (Superset's QueryExecutionResponseSchema):
/// `rows` rows of `region,revenue`.
fn sqllab_answer(rows: usize) -> Value {
    let data: Vec<Value> = (0..rows)
        .map(|i| json!({ "region": format!("r{i}"), "revenue": i * 10 }))
        .collect();
    json!({
        "status": "success",
        "query_id": 77,
        "columns": [
            { "name": "region", "column_name": "region", "type": "STRING", "is_dttm": false },
            { "name": "revenue", "column_name": "revenue", "type": "BIGINT", "is_dttm": false }
        ],
        "selected_columns": [],
        "expanded_columns": [],
        "data": data,
        "query": { "queryId": 77, "rows": rows, "state": "success", "limitingFactor": "NOT_LIMITED" }
    })
}

fn superset_databases(ids: &[(u64, &str)]) -> FakeReply {
    FakeReply::json(json!({
        "count": ids.len(),
        "result": ids.iter().map(|(id, name)| json!({ "id": id, "database_name": name, "backend": "postgresql" })).collect::<Vec<_>>()
    }))
}

db_test!(
    the_documented_compose_example_runs_verbatim_from_superset_sql_to_google_drive,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        recorder.reply(
            "GET /api/v1/database/",
            superset_databases(&[(1, "examples")]),
        );
        recorder.reply(
            "GET /api/v1/security/csrf_token/",
            FakeReply::json(json!({ "result": "csrf-7" })),
        );
        recorder.reply(
            "POST /api/v1/sqllab/execute/",
            FakeReply::json(sqllab_answer(1200)),
        );
        recorder.reply("POST /upload/drive/v3/files", FakeReply::json(json!({ "id": "f9", "name": "superset_query_77.csv", "mimeType": "text/plain", "webViewLink": "https://drive.google.com/file/d/f9/view", "size": "12345" })));

        let (out, is_error) = call_example(&app, &key, "execute_tools_compose").await;
        assert!(!is_error, "{out}");
        let documented = seed_example("execute_tools_compose_response");
        assert_shape("compose answer", &documented, &out);
        assert_eq!(
            out,
            json!({ "result": { "file_id": "f9", "link": "https://drive.google.com/file/d/f9/view", "rows": 1200 } }),
            "only the projection comes back, rows as a number"
        );
        assert_eq!(out["result"]["rows"], documented["result"]["rows"]);

        let seen = recorder.seen();
        let execute = seen
            .iter()
            .find(|s| s.path == "/api/v1/sqllab/execute/")
            .expect("the SQL Lab request");
        let sent: Value = serde_json::from_slice(&execute.body).unwrap();
        assert_eq!(sent["sql"], "SELECT …", "the agent's SQL, as written");
        assert_eq!(sent["database_id"], 1, "the only database");
        assert_eq!(sent["runAsync"], false);
        assert!(sent["client_id"].as_str().is_some_and(|c| c.len() <= 11));
        assert_eq!(execute.headers.get("x-csrftoken").unwrap(), "csrf-7");
        assert!(seen
            .iter()
            .filter(|s| s.path.starts_with("/api/v1/"))
            .all(|s| s.headers.get("cookie").unwrap() == "session=tok-superset"));
        let upload = seen
            .iter()
            .find(|s| s.path == "/upload/drive/v3/files")
            .expect("the upload request");
        let parts = multipart_parts(
            upload
                .headers
                .get("content-type")
                .unwrap()
                .to_str()
                .unwrap(),
            &upload.body,
        );
        let meta: Value = serde_json::from_slice(&parts[0].1).unwrap();
        assert_eq!(
            meta["name"], "superset_query_77.csv",
            "{{step:export.filename}}"
        );
        let csv = String::from_utf8(parts[1].1.clone()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1201, "a header and 1200 rows reach Drive");
        assert_eq!(lines[0], "region,revenue");
        assert_eq!(lines[1], "r0,0");
        assert_eq!(lines[1200], "r1199,11990");
    }
);

db_test!(
    superset_sql_export_asks_for_a_database_when_there_are_several_and_reports_superset_errors,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        // Several databases: the agent is told which, and nothing runs.
        recorder.reply(
            "GET /api/v1/database/",
            superset_databases(&[(1, "examples"), (2, "warehouse")]),
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "superset_export_csv", "args": { "sql": "SELECT 1" } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "INVALID_ARGUMENTS", "{:?}", out[0]);
        assert!(out[0].to_string().contains("2 warehouse"), "{:?}", out[0]);
        assert!(recorder.seen().iter().all(|s| s.method == "GET"));

        // A named database skips the listing; Superset's own error reaches the agent.
        recorder.reset();
        recorder.reply(
            "GET /api/v1/security/csrf_token/",
            FakeReply::json(json!({ "result": "csrf-7" })),
        );
        recorder.reply(
            "POST /api/v1/sqllab/execute/",
            FakeReply {
                status: 400,
                ..FakeReply::json(json!({ "message": "relation \"nope\" does not exist" }))
            },
        );
        let out = execute(&app, &key, json!([{ "tool": "superset_export_csv", "args": { "sql": "SELECT * FROM nope", "database_id": 2, "schema": "public" } }])).await;
        assert_eq!(out[0]["code"], "TOOL_ERROR", "{:?}", out[0]);
        assert!(
            out[0]["handler_error"]
                .as_str()
                .unwrap()
                .contains("relation \"nope\" does not exist"),
            "{:?}",
            out[0]
        );
        let seen = recorder.seen();
        assert!(seen.iter().all(|s| s.path != "/api/v1/database/"));
        let sent: Value = serde_json::from_slice(&seen.last().unwrap().body).unwrap();
        assert_eq!(
            (sent["database_id"].clone(), sent["schema"].clone()),
            (json!(2), json!("public"))
        );

        // A database Superset runs asynchronously answers 202: no rows to export.
        recorder.reply(
            "POST /api/v1/sqllab/execute/",
            FakeReply {
                status: 202,
                ..FakeReply::json(json!({ "query": { "state": "pending" } }))
            },
        );
        let out = execute(&app, &key, json!([{ "tool": "superset_export_csv", "args": { "sql": "SELECT 1", "database_id": 2 } }])).await;
        assert_eq!(out[0]["code"], "TOOL_ERROR", "{:?}", out[0]);
        assert!(out[0]["handler_error"]
            .as_str()
            .unwrap()
            .contains("asynchronously"));
    }
);

db_test!(
    the_documented_meta_tool_examples_run_verbatim_and_answer_their_documented_shapes,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        // search_tools: the tool the seed names is found, first.
        let (out, _) = call_example(&app, &key, "search_tools").await;
        assert_shape(
            "search_tools",
            &json!({ "tools": [{ "name": "", "description": "", "integration": "", "score": 0.5 }] }),
            &out,
        );
        assert_eq!(out["tools"][0]["name"], "jira_create_issue", "{out}");
        assert_eq!(out["tools"][0]["integration"], "jira");

        // get_tool_schema: portable JSON Schema.
        let (out, _) = call_example(&app, &key, "get_tool_schema").await;
        assert_eq!(out["schema"]["type"], "object", "{out}");
        assert!(out["schema"]["properties"]["owner"].is_object(), "{out}");

        // execute_tools: a batch, index-aligned, each entry `{ result }`.
        recorder.reply("GET /repos/acme/demo-repo/pulls", FakeReply::json(json!([{ "number": 7, "title": "Fix", "state": "open", "user": { "login": "ada" }, "html_url": "https://github.com/acme/demo-repo/pull/7" }])));
        recorder.reply("POST /api/chat.postMessage", FakeReply::json(json!({ "ok": true, "channel": "C123", "ts": "1700000000.000100", "message": { "text": "PRs listed" } })));
        let (out, is_error) = call_example(&app, &key, "execute_tools_batch").await;
        assert!(!is_error, "{out}");
        let results = out["results"].as_array().expect("results");
        assert_eq!(results.len(), 2, "{out}");
        assert!(results.iter().all(|r| r.get("result").is_some()), "{out}");
        let seen = recorder.seen();
        assert!(seen.iter().any(|s| s.path == "/repos/acme/demo-repo/pulls"));
        let slack = seen
            .iter()
            .find(|s| s.path == "/api/chat.postMessage")
            .expect("the Slack request");
        let sent: Value = serde_json::from_slice(&slack.body).unwrap();
        assert_eq!(
            (sent["channel"].clone(), sent["text"].clone()),
            (json!("C123"), json!("PRs listed"))
        );

        // whoami and list_integrations.
        let (out, _) = call_example(&app, &key, "whoami").await;
        assert_eq!(out["email"], "ada@example.com", "{out}");
        assert!(out["id"].as_str().is_some_and(|i| i.starts_with("usr_")));
        let (out, _) = call_example(&app, &key, "list_integrations").await;
        let list = out["integrations"].as_array().expect("integrations");
        assert!(list.iter().any(|i| i["name"] == "github"), "{out}");
        for i in list {
            let keys: BTreeSet<&str> = i.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                BTreeSet::from(["name", "version", "connected"]),
                "{i}"
            );
        }

        // connect: a link back to workbench, and a connectionId wait_for_connection knows.
        let (out, _) = call_example(&app, &key, "connect").await;
        assert_eq!(out["integration"], "github", "{out}");
        let id = out["connectionId"].as_str().expect("connectionId");
        assert_eq!(out["url"], app.url(&format!("/connect/{id}")), "{out}");
        // wait_for_connection with the seed's placeholder id: no such connection.
        let (out, _) = call_example(&app, &key, "wait_for_connection").await;
        assert_eq!(out, json!({ "error": "Unknown connectionId" }));

        // curl_session: the documented success, word for word but the token and URLs.
        let (out, is_error) = call_example(&app, &key, "curl_session").await;
        assert!(!is_error, "{out}");
        let documented = seed_example("curl_session_response");
        assert_shape("curl_session", &documented, &out);
        let keys: BTreeSet<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, documented.as_object().unwrap().keys().collect());
        assert_eq!(out["expiresIn"], documented["expiresIn"]);
        let proxy = out["proxyBaseUrl"].as_str().unwrap();
        assert_eq!(proxy, app.url("/c"));
        assert_eq!(
            out["usage"],
            documented["usage"]
                .as_str()
                .unwrap()
                .replace("https://workbench.example.com/c", proxy)
        );
    }
);

db_test!(
    the_documented_rest_examples_run_verbatim_and_answer_their_documented_shapes,
    |backend| {
        let Some(app) = crate::helpers::spawn_app_with(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            },
        )
        .await
        else {
            return;
        };
        let (_, admin) = admin_with_key(&app).await;
        // Seed 004's CRM server, on loopback: `contact.get` under the prefix `crm.`.
        let up = crate::fake_upstream::start().await;
        up.keep_only(&[]);
        up.set_tool(
            "contact.get",
            "Look up a contact by email.",
            json!({ "type": "object", "required": ["email"], "properties": { "email": {"type":"string"} } }),
            true,
        );
        let res = app
            .http()
            .post(app.url("/v1/mcp/servers"))
            .bearer_auth(&admin)
            .json(&json!({ "name": "crm", "transport": "http", "url": up.url(), "auth": { "type": "none" }, "tool_prefix": "crm.", "timeout_ms": 10000, "max_concurrency": 20, "auto_approve": true }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());

        // Invoke, with the documented body as written.
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&admin)
            .header("Idempotency-Key", "seed-004-invoke")
            .header("content-type", "application/json")
            .body(seed_examples()["invoke_request"].clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let call: Value = res.json().await.unwrap();
        let documented = seed_example("invoke_response");
        assert_shape("invoke", &documented, &call);
        assert_eq!(call["result"], documented["result"], "{call}");
        assert_eq!(
            (
                call["object"].clone(),
                call["tool"].clone(),
                call["status"].clone(),
                call["usage"]["tool_call"].clone()
            ),
            (
                json!("tool_call"),
                json!("crm.contact.get"),
                json!("succeeded"),
                json!(1)
            )
        );
        assert!(call["id"].as_str().unwrap().starts_with("tcall_"));

        // The catalog. `avg_latency_ms` is measured: a number once the tool ran (crm.contact.get
        // just did), null before (http.fetch). The call's usage counters are written by the
        // record writer after the answer, so they are flushed first.
        app.wb.flush_records().await;
        let res = app
            .http()
            .get(app.url("/v1/tools"))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let catalog: Value = res.json().await.unwrap();
        let documented = seed_example("catalog_response");
        assert_eq!(catalog["object"], documented["object"]);
        for d in documented["data"].as_array().unwrap() {
            let name = d["name"].as_str().unwrap();
            let got = catalog["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap_or_else(|| panic!("{name} is not listed"));
            let mut d = d.clone();
            if name == "http.fetch" {
                assert!(got["avg_latency_ms"].is_null(), "{got}");
                d.as_object_mut().unwrap().remove("avg_latency_ms");
            }
            let d = &d;
            assert_shape(name, d, got);
            assert_eq!(got["side_effects"], d["side_effects"], "{name}");
            assert_eq!(
                got["input_schema"]["required"], d["input_schema"]["required"],
                "{name}"
            );
            let source = d["source"].as_str().unwrap();
            match source.split_once(':') {
                Some(("mcp", _)) => assert!(
                    got["source"].as_str().unwrap().starts_with("mcp:mcps_"),
                    "{got}"
                ),
                _ => assert_eq!(got["source"], source),
            }
        }

        // require_confirmation: 202 with the documented shape, then the documented decision.
        let res = app
            .http()
            .post(app.url("/v1/policies"))
            .bearer_auth(&admin)
            .json(&json!({ "name": "pol_support_agent", "tool_allowlist": { "mode": "allowlist", "allow": ["crm.contact.get", "crm.deal.list", "search.web", "ticket.*"], "deny": ["crm.contact.delete"], "require_confirmation": ["email.send", "crm.contact.get"] } }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let pol: Value = res.json().await.unwrap();
        let res = app
            .http()
            .post(app.url("/v1/api-keys"))
            .bearer_auth(&admin)
            .json(&json!({ "name": "support agent", "policy_id": pol["id"] }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let agent: Value = res.json().await.unwrap();
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(agent["key"].as_str().unwrap())
            .header("content-type", "application/json")
            .body(seed_examples()["invoke_request"].clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202);
        let held: Value = res.json().await.unwrap();
        assert_shape("held", &seed_example("confirmation_response"), &held);
        assert_eq!(held["status"], "awaiting_confirmation");
        let conf = held["confirmation_id"].as_str().unwrap();
        assert!(conf.starts_with("conf_"));
        let res = app
            .http()
            .post(app.url(&format!("/v1/tools/confirmations/{conf}")))
            .bearer_auth(&admin)
            .header("content-type", "application/json")
            .body(seed_examples()["confirmation_decision"].clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let done: Value = res.json().await.unwrap();
        assert_eq!(done["status"], "succeeded", "{done}");
        assert_eq!(done["result"], seed_example("invoke_response")["result"]);
    }
);

/// A page of the fake's answer: a JSON body and, for GitHub and Sentry, a `Link` header.
fn page(json: Value, link: Option<&str>) -> FakeReply {
    let mut r = FakeReply::json(json);
    if let Some(l) = link {
        r.headers.push(("link".into(), l.into()));
    }
    r
}

/// One list walked page by page against the fake.
struct Walk {
    tool: &'static str,
    /// "METHOD /path" the fake answers.
    route: &'static str,
    /// The first call's arguments.
    args: Value,
    /// The argument that takes the answer's next_cursor / next_page.
    next_arg: &'static str,
    /// What the provider answers, page by page (body cursor, Link header or a plain list).
    pages: Vec<FakeReply>,
    /// The query parameter the provider reads the position from, and its value on each call.
    sent_as: &'static str,
    sent: Vec<Option<&'static str>>,
    /// One field of every item, over all pages.
    item: &'static str,
    items: Value,
}

db_test!(
    list_tools_page_through_their_providers_documented_pagination,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        let gh = |n: u32| {
            format!("<https://api.github.com/repositories/1300192/issues?per_page=1&page={n}>; rel=\"next\", <https://api.github.com/repositories/1300192/issues?per_page=1&page=1>; rel=\"first\"")
        };
        let sentry = |next: &str, more: bool| {
            format!("<https://sentry.io/api/0/organizations/?&cursor=0:0:1>; rel=\"previous\"; results=\"false\"; cursor=\"0:0:1\", <https://sentry.io/api/0/organizations/?&cursor={next}>; rel=\"next\"; results=\"{more}\"; cursor=\"{next}\"")
        };
        let walks = vec![
            Walk {
                tool: "slack_list_channels",
                route: "GET /api/conversations.list",
                args: json!({ "limit": 1 }),
                next_arg: "cursor",
                pages: vec![
                    page(json!({ "ok": true, "channels": [{ "id": "C1", "name": "general" }], "response_metadata": { "next_cursor": "dGVhbTpDMg==" } }), None),
                    page(json!({ "ok": true, "channels": [{ "id": "C2", "name": "random" }], "response_metadata": { "next_cursor": "" } }), None),
                ],
                sent_as: "cursor",
                sent: vec![None, Some("dGVhbTpDMg==")],
                item: "id",
                items: json!(["C1", "C2"]),
            },
            Walk {
                tool: "github_list_issues",
                route: "GET /repos/acme/demo/issues",
                args: json!({ "owner": "acme", "repo": "demo", "per_page": 1 }),
                next_arg: "page",
                pages: vec![
                    page(json!([{ "number": 3, "title": "a" }]), Some(&gh(2))),
                    page(json!([{ "number": 2, "title": "b" }]), Some(&gh(3))),
                    page(json!([{ "number": 1, "title": "c" }]), Some("<https://api.github.com/repositories/1300192/issues?per_page=1&page=2>; rel=\"prev\"")),
                ],
                sent_as: "page",
                sent: vec![None, Some("2"), Some("3")],
                item: "number",
                items: json!([3, 2, 1]),
            },
            Walk {
                tool: "github_list_prs",
                route: "GET /repos/acme/demo/pulls",
                args: json!({ "owner": "acme", "repo": "demo", "per_page": 1 }),
                next_arg: "page",
                pages: vec![
                    page(json!([{ "number": 8 }]), Some(&gh(2))),
                    page(json!([{ "number": 7 }]), None),
                ],
                sent_as: "page",
                sent: vec![None, Some("2")],
                item: "number",
                items: json!([8, 7]),
            },
            Walk {
                tool: "sentry_list_organizations",
                route: "GET /api/0/organizations/",
                args: json!({}),
                next_arg: "cursor",
                pages: vec![
                    page(json!([{ "id": "1", "slug": "acme" }]), Some(&sentry("0:100:0", true))),
                    page(json!([{ "id": "2", "slug": "beta" }]), Some(&sentry("0:200:0", false))),
                ],
                sent_as: "cursor",
                sent: vec![None, Some("0:100:0")],
                item: "slug",
                items: json!(["acme", "beta"]),
            },
            Walk {
                tool: "discord_list_guilds",
                route: "GET /api/v10/users/@me/guilds",
                args: json!({ "limit": 2 }),
                next_arg: "after",
                pages: vec![
                    page(json!([{ "id": "10", "name": "a" }, { "id": "20", "name": "b" }]), None),
                    page(json!([{ "id": "30", "name": "c" }]), None),
                ],
                sent_as: "after",
                sent: vec![None, Some("20")],
                item: "id",
                items: json!(["10", "20", "30"]),
            },
            Walk {
                tool: "jira_find_users",
                route: "GET /ex/jira/your-cloud-id/rest/api/3/user/search",
                args: json!({ "query": "a", "max_results": 2 }),
                next_arg: "start_at",
                pages: vec![
                    page(json!([{ "accountId": "u1" }, { "accountId": "u2" }]), None),
                    page(json!([{ "accountId": "u3" }]), None),
                ],
                sent_as: "startAt",
                sent: vec![None, Some("2")],
                item: "accountId",
                items: json!(["u1", "u2", "u3"]),
            },
        ];
        for w in walks {
            let mut args = w.args.clone();
            let mut items = Vec::new();
            let mut sent = Vec::new();
            let last = w.pages.len() - 1;
            for (i, reply) in w.pages.into_iter().enumerate() {
                recorder.reset();
                recorder.reply(w.route, reply);
                let out = execute(&app, &key, json!([{ "tool": w.tool, "args": args }])).await;
                let r = &out[0]["result"];
                let Some(page) = r["items"].as_array() else {
                    panic!("{}: {:?}", w.tool, out[0])
                };
                items.extend(page.iter().map(|it| it[w.item].clone()));
                sent.push(recorder.seen()[0].query.get(w.sent_as).cloned());
                let next = r.get("next_cursor").or_else(|| r.get("next_page"));
                let next = next.cloned().unwrap_or(Value::Null);
                if i == last {
                    assert!(next.is_null(), "{}: the last page has no next: {r}", w.tool);
                } else {
                    assert!(!next.is_null(), "{}: page {i} has a next page: {r}", w.tool);
                    args[w.next_arg] = next;
                }
            }
            let want: Vec<Option<String>> = w.sent.iter().map(|s| s.map(str::to_owned)).collect();
            assert_eq!(
                sent, want,
                "{}: each page asked where the provider pointed",
                w.tool
            );
            assert_eq!(
                Value::Array(items),
                w.items,
                "{}: every page's items",
                w.tool
            );
        }
    }
);
