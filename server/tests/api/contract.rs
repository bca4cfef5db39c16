//! Every shipped plugin tool against a recording fake of its provider on loopback, from the
//! cases in `contract/<integration>.json` (format: core/plugins/README.md): the request it sends
//! (method, path, query, body, the injected credential, the integration's fixed headers) is the
//! one the provider documents, and the reply is shaped as its definition says (pagination,
//! errors on HTTP 200, each API's error body). Tools whose Rust handler sends several requests
//! have their own tests below, as has the compose example the product documents.

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
            .filter_map(|e| {
                e.unwrap()
                    .path()
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
            })
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
            json!({ "stories": [
            { "id": 30, "title": "Thirty", "url": "u", "score": 30, "by": "pg", "comments": 1 },
            { "id": 20, "title": "Twenty", "url": "u", "score": 20, "by": "pg", "comments": 1 }
        ] }),
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

db_test!(
    the_documented_compose_exports_a_superset_chart_as_csv_into_google_drive,
    |backend| {
        let Some(Fixture {
            app, key, recorder, ..
        }) = connected(backend).await
        else {
            return;
        };
        let csv = "region,revenue\nemea,1200\namer,3400\n";
        recorder.reply(
            "GET /api/v1/chart/42/data/",
            FakeReply {
                content_type: "text/csv; charset=utf-8",
                body: csv.as_bytes().to_vec(),
                ..FakeReply::json(json!(null))
            },
        );
        recorder.reply("POST /upload/drive/v3/files", FakeReply::json(json!({ "id": "f9", "name": "revenue.csv", "mimeType": "text/csv", "webViewLink": "https://drive.google.com/file/d/f9/view", "size": "43" })));
        let (out, is_error) = mcp_call(
        &app,
        &key,
        "execute_tools",
        json!({
            "compose": true,
            "executions": [
                { "ref_id": "export", "tool": "superset_export_csv", "args": { "chart_id": 42 } },
                { "ref_id": "upload", "tool": "google_drive_upload", "args": { "name": "revenue.csv", "mime_type": "text/csv", "content": "{{step:export.csv}}" } }
            ],
            "return": { "file": "{{step:upload.webViewLink}}" }
        }),
    )
    .await;
        assert!(!is_error, "{out}");
        assert_eq!(
            out["result"]["file"], "https://drive.google.com/file/d/f9/view",
            "{out}"
        );
        let seen = recorder.seen();
        let export = seen
            .iter()
            .find(|s| s.path == "/api/v1/chart/42/data/")
            .expect("the export request");
        assert_eq!(export.query.get("format").map(String::as_str), Some("csv"));
        assert_eq!(
            export.headers.get("cookie").unwrap(),
            "session=tok-superset"
        );
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
        assert_eq!(
            String::from_utf8_lossy(&parts[1].1),
            csv,
            "the CSV arrives in Drive as exported"
        );
    }
);
