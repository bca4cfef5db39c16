//! No vault value leaves by an outbound channel other than the upstream it was sent to: a
//! secret an upstream echoes back in a JSON writer's escapes is redacted from the result;
//! storage.put keeps text with secrets redacted and refuses bytes that hold one; email.send
//! scrubs subject, bodies and text attachments (inline or from storage) and refuses a binary
//! attachment holding a secret, nothing sent; callback payloads and webhook bodies reach their
//! receivers scrubbed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::any;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use workbench_core::auth::Principal;
use workbench_core::email::{EmailSettings, SmtpUrl};
use workbench_core::vault::Scrubber;

use crate::fake_mail::{DnsResponder, SmtpSink};
use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::policies::send as rest;
use crate::{app, db_test};

/// A vault value with the characters JSON writers escape (`&`, `<`, `>`, `=`, `'`, `/`, `+`).
const SECRET: &str = "sk-Live&Go=1/2+3<xyz>'Q9";
/// A fragment that is in the secret and in nothing else a test sends.
const FRAGMENT: &str = "Go=1/2+3";

/// `value` as a JSON writer sends it with the characters `escape` picks as `\u00XX`.
fn u_escaped(value: &str, escape: impl Fn(char) -> bool) -> String {
    value
        .chars()
        .map(|c| {
            if escape(c) {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Go's encoding/json: `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026`; `'` and `=` as they are.
fn go_json(value: &str) -> String {
    u_escaped(value, |c| matches!(c, '<' | '>' | '&'))
}

/// JSON string escapes decoded (surrogate pairs too), independently of the scrubber's own code.
fn json_unescaped(text: &str) -> String {
    let units: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut pending: Option<u32> = None;
    let mut i = 0;
    while i < units.len() {
        let c = units[i];
        if c == '\\' && i + 1 < units.len() {
            let hex: String = units[i + 1..].iter().skip(1).take(4).collect();
            match units[i + 1] {
                'u' if hex.len() == 4 && u32::from_str_radix(&hex, 16).is_ok() => {
                    let u = u32::from_str_radix(&hex, 16).unwrap();
                    match (pending.take(), u) {
                        (None, 0xD800..=0xDBFF) => pending = Some(u),
                        (Some(high), 0xDC00..=0xDFFF) => out.extend(char::from_u32(
                            0x10000 + ((high - 0xD800) << 10) + (u - 0xDC00),
                        )),
                        (_, u) => out.extend(char::from_u32(u)),
                    }
                    i += 6;
                    continue;
                }
                e @ ('"' | '\\' | '/') => out.push(e),
                'n' => out.push('\n'),
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// HTML character references decoded (the common named ones and numeric ones).
fn html_unescaped(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let c = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                .ok()
                .and_then(char::from_u32),
            n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where `text` still carries SECRET: its fragment, plainly or once escapes are decoded, or any
/// form the scrubber knows.
fn leaks(text: &str) -> Vec<String> {
    let mut checker = Scrubber::new();
    checker.add("CHECK", SECRET);
    let mut found = Vec::new();
    let once = json_unescaped(text);
    for (what, view) in [
        ("as is", text.to_owned()),
        ("json-unescaped", once.clone()),
        ("json-unescaped twice", json_unescaped(&once)),
        ("html-unescaped", html_unescaped(text)),
    ] {
        if view.to_lowercase().contains(&FRAGMENT.to_lowercase()) {
            found.push(format!("the fragment, {what}"));
        }
    }
    if let Some(clean) = checker.scrub_str(text) {
        let at = clean.find("[redacted:CHECK]").unwrap_or(0);
        found.push(format!(
            "an encoded form near {:?}",
            &clean[at.saturating_sub(40).min(clean.len())..(at + 60).min(clean.len())]
        ));
    }
    found
}

/// A loopback HTTP server answering every request with the body it is given, recording what
/// it receives.
#[derive(Default)]
struct Receiver {
    answer: Mutex<String>,
    got: Mutex<Vec<Bytes>>,
}

async fn answer(
    State(r): State<Arc<Receiver>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], String) {
    r.got.lock().unwrap().push(body);
    (
        [("content-type", "application/json")],
        r.answer.lock().unwrap().clone(),
    )
}

async fn receiver() -> (String, Arc<Receiver>) {
    let state = Arc::new(Receiver::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .fallback(any(answer))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

/// An app on loopback with email set up (a verified sender domain, example.com), an admin key
/// and SECRET in the project's vault as `API_TOKEN`.
struct Setup {
    app: TestApp,
    admin: Principal,
    key: String,
    sink: SmtpSink,
}

macro_rules! setup {
    ($backend:expr) => {{
        let sink = SmtpSink::start().await;
        let dns = DnsResponder::start().await;
        let options = Options {
            egress_allow_private: vec!["127.0.0.1"],
            email: EmailSettings { smtp: Some(SmtpUrl::parse(&sink.url()).unwrap()), dns_server: Some(dns.addr), hourly_limit: 100 },
            ..Default::default()
        };
        let app = app!($backend, options);
        let (admin, key) = admin_with_key(&app).await;
        let (status, d) = rest(&app, &key, reqwest::Method::POST, "/v1/email/domains", Some(json!({ "domain": "example.com" }))).await;
        assert_eq!(status, 201, "{d}");
        dns.publish(d["dns_record"]["name"].as_str().unwrap(), d["dns_record"]["value"].as_str().unwrap());
        let (status, v) = rest(&app, &key, reqwest::Method::POST, &format!("/v1/email/domains/{}/verify", d["id"].as_str().unwrap()), None).await;
        assert_eq!(status, 200, "{v}");
        Setup { app, admin, key, sink }
    }};
}

async fn call(s: &Setup, tool: &str, args: Value) -> Value {
    execute(&s.app, &s.key, json!([{ "tool": tool, "args": args }]))
        .await
        .remove(0)
}

async fn set_secret(s: &Setup) {
    s.app
        .wb
        .vault()
        .set(&s.admin, "API_TOKEN", SECRET)
        .await
        .unwrap();
}

/// The stored bytes of `key`, read from the object store's directory, if there are any.
fn stored(s: &Setup, key: &str) -> Option<Vec<u8>> {
    std::fs::read(
        s.app
            .data_dir
            .join("objects")
            .join(&s.admin.project_id)
            .join(key),
    )
    .ok()
}

db_test!(
    a_secret_echoed_back_in_json_writer_escapes_is_redacted_from_the_result,
    |backend| {
        let s = setup!(backend);
        set_secret(&s).await;
        let (base, echo) = receiver().await;
        s.app
            .wb
            .egress()
            .add(&s.admin, base.trim_start_matches("http://"))
            .await
            .unwrap();
        let forms = [
            ("go", go_json(SECRET)),
            ("php: slashes escaped", SECRET.replace('/', "\\/")),
            (
                "slash and ampersand",
                SECRET.replace('/', "\\/").replace('&', "\\u0026"),
            ),
            ("plus escaped", u_escaped(SECRET, |c| c == '+')),
            (
                "every character, upper-case hex",
                SECRET
                    .chars()
                    .map(|c| format!("\\u{:04X}", c as u32))
                    .collect(),
            ),
        ];
        for (what, form) in forms {
            *echo.answer.lock().unwrap() = format!("{{\"token\":\"{form}\",\"ok\":true}}");
            let out = call(&s, "http.fetch", json!({ "url": format!("{base}/echo") })).await;
            assert_eq!(out["result"]["status"], 200, "{out}");
            let text = out.to_string();
            assert!(
                leaks(&text).is_empty(),
                "{what}: the secret came back: {:?} in {text}",
                leaks(&text)
            );
            assert!(text.contains("[redacted:API_TOKEN]"), "{what}: {text}");
        }
    }
);

db_test!(
    storage_keeps_text_with_secrets_redacted_and_refuses_bytes_that_hold_one,
    |backend| {
        let s = setup!(backend);
        set_secret(&s).await;

        // Text: stored as the scrubber leaves it, and the result says what was redacted.
        let out = call(&s, "storage.put", json!({ "key": "notes/config.txt", "content": "token={{vault:API_TOKEN}}\nescaped: \"{{vault:API_TOKEN}}\"" })).await;
        let bytes = stored(&s, "notes/config.txt").expect("the text object is stored");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            leaks(&text).is_empty(),
            "the secret is in the stored object: {:?} in {text}",
            leaks(&text)
        );
        assert_eq!(
            text,
            "token=[redacted:API_TOKEN]\nescaped: \"[redacted:API_TOKEN]\""
        );
        assert_eq!(out["result"]["redacted"], json!(["API_TOKEN"]), "{out}");
        assert_eq!(out["result"]["size"], text.len(), "{out}");
        let go = call(&s, "storage.put", json!({ "key": "notes/go.json", "content": format!("{{\"t\":\"{}\"}}", go_json(SECRET)) })).await;
        assert_eq!(go["result"]["redacted"], json!(["API_TOKEN"]), "{go}");
        assert_eq!(
            stored(&s, "notes/go.json").unwrap(),
            b"{\"t\":\"[redacted:API_TOKEN]\"}"
        );
        // Text without a secret is stored as given, and nothing is said about redaction.
        let plain = call(
            &s,
            "storage.put",
            json!({ "key": "notes/plain.txt", "content": "nothing secret" }),
        )
        .await;
        assert!(plain["result"].get("redacted").is_none(), "{plain}");
        assert_eq!(stored(&s, "notes/plain.txt").unwrap(), b"nothing secret");

        // Bytes holding the secret (raw, or as its base64) are refused; nothing is stored.
        let mut binary = vec![0u8, 0x9f, 0x92, 0x96, 0xff];
        binary.extend_from_slice(SECRET.as_bytes());
        binary.extend_from_slice(&[0xfe, 0x00]);
        for (what, bytes) in [
            ("raw", binary.clone()),
            (
                "base64 inside",
                [&[0xffu8, 0x01][..], STANDARD.encode(SECRET).as_bytes()].concat(),
            ),
        ] {
            let out = call(&s, "storage.put", json!({ "key": "bin/blob", "encoding": "base64", "content": STANDARD.encode(&bytes), "content_type": "application/octet-stream" })).await;
            assert_eq!(out["code"], "INVALID_ARGUMENTS", "{what}: {out}");
            let message = out.to_string();
            assert!(
                message.contains("API_TOKEN") && message.contains("base64"),
                "{what}: {message}"
            );
            assert!(leaks(&message).is_empty(), "{message}");
            assert!(
                stored(&s, "bin/blob").is_none(),
                "{what}: nothing is stored"
            );
        }
        // The template path: base64 content that decodes to the secret's bytes (the reference's
        // value is the base64 text itself) is refused too.
        s.app
            .wb
            .vault()
            .set(
                &s.admin,
                "B64_TOKEN",
                &STANDARD.encode(b"\x00\x01binary-token-Bytes\xff"),
            )
            .await
            .unwrap();
        let out = call(
            &s,
            "storage.put",
            json!({ "key": "bin/blob", "encoding": "base64", "content": "{{vault:B64_TOKEN}}" }),
        )
        .await;
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        assert!(out.to_string().contains("B64_TOKEN"), "{out}");
        assert!(stored(&s, "bin/blob").is_none());
        // Binary content without a secret is stored byte for byte.
        let out = call(&s, "storage.put", json!({ "key": "bin/ok", "encoding": "base64", "content": STANDARD.encode([0u8, 1, 2, 255]) })).await;
        assert_eq!(out["result"]["size"], 4, "{out}");
        assert_eq!(stored(&s, "bin/ok").unwrap(), [0u8, 1, 2, 255]);
    }
);

/// Every view of a received message a reader could decode: the raw text, its quoted-printable
/// decoding, and each base64 body or encoded word decoded.
fn message_views(data: &str) -> Vec<String> {
    let mut views = vec![data.to_owned()];
    let unfolded = data.replace("=\r\n", "");
    let mut qp = Vec::new();
    let b = unfolded.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'=' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&unfolded[i + 1..i + 3], 16) {
                qp.push(v);
                i += 3;
                continue;
            }
        }
        qp.push(b[i]);
        i += 1;
    }
    views.push(String::from_utf8_lossy(&qp).into_owned());
    let mut run = String::new();
    for line in data.lines().chain(std::iter::once("")) {
        let l = line.trim_end();
        if !l.is_empty()
            && l.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c))
        {
            run.push_str(l);
        } else {
            if let Ok(decoded) = STANDARD.decode(&run) {
                views.push(String::from_utf8_lossy(&decoded).into_owned());
            }
            run.clear();
        }
    }
    for word in data
        .split("=?")
        .skip(1)
        .filter_map(|w| w.split("?=").next())
    {
        let mut parts = word.splitn(3, '?');
        let (_, enc, text) = (
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        if enc.eq_ignore_ascii_case("b") {
            if let Ok(decoded) = STANDARD.decode(text) {
                views.push(String::from_utf8_lossy(&decoded).into_owned());
            }
        } else {
            views.push(text.replace('_', " "));
        }
    }
    views
}

fn message_leaks(data: &str) -> Vec<String> {
    message_views(data).iter().flat_map(|v| leaks(v)).collect()
}

db_test!(
    email_goes_out_scrubbed_and_a_binary_attachment_holding_a_secret_is_refused,
    |backend| {
        let s = setup!(backend);
        // Objects stored before the secret was in the vault hold it as they were written.
        let csv = format!("name,token\nprod,{SECRET}\n");
        let out = call(
            &s,
            "storage.put",
            json!({ "key": "exports/tokens.csv", "content": csv, "content_type": "text/csv" }),
        )
        .await;
        assert!(out.get("result").is_some(), "{out}");
        let mut pdf = b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n".to_vec();
        pdf.extend_from_slice(format!("stream token {SECRET} endstream").as_bytes());
        pdf.extend_from_slice(b"\n\x00\xff%%EOF");
        let out = call(&s, "storage.put", json!({ "key": "exports/report.pdf", "encoding": "base64", "content": STANDARD.encode(&pdf), "content_type": "application/pdf" })).await;
        assert!(out.get("result").is_some(), "{out}");
        set_secret(&s).await;

        let message = json!({
            "from": "Reports <reports@example.com>",
            "to": ["ann@example.org"],
            "subject": format!("token {SECRET}"),
            "text": format!("raw {SECRET}\ngo {}\nbase64 {}", go_json(SECRET), STANDARD.encode(SECRET)),
            "html": format!("<p>{}</p><script>var t = \"{}\";</script>", SECRET.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;"), go_json(SECRET)),
            "attachments": [
                { "filename": "inline.json", "content_type": "application/json", "content_base64": STANDARD.encode(format!("{{\"t\":\"{}\"}}", go_json(SECRET))) },
                { "filename": "tokens.csv", "storage_key": "exports/tokens.csv" }
            ]
        });
        let out = call(&s, "email.send", message.clone()).await;
        assert!(out.get("result").is_some(), "{out}");
        let got = s.sink.messages();
        assert_eq!(got.len(), 1);
        let data = &got[0].data;
        let found = message_leaks(data);
        assert!(
            found.is_empty(),
            "the secret reached the mail server: {found:?}\n{data}"
        );
        assert_eq!(out["result"]["redacted"], json!(["API_TOKEN"]), "{out}");
        let views = message_views(data);
        for part in [
            "token [redacted:API_TOKEN]",
            "raw [redacted:API_TOKEN]",
            "prod,[redacted:API_TOKEN]",
            "{\"t\":\"[redacted:API_TOKEN]\"}",
        ] {
            assert!(
                views.iter().any(|v| v.contains(part)),
                "{part:?} is in the message: {data}"
            );
        }

        // A binary attachment holding the secret is refused, naming it; nothing is sent.
        let mut with_pdf = message.clone();
        with_pdf["attachments"] =
            json!([{ "filename": "report.pdf", "storage_key": "exports/report.pdf" }]);
        let out = call(&s, "email.send", with_pdf).await;
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        let text = out.to_string();
        assert!(
            text.contains("report.pdf")
                && text.contains("API_TOKEN")
                && text.contains("nothing was sent"),
            "{text}"
        );
        assert!(leaks(&text).is_empty(), "{text}");
        // Inline bytes too, and the secret's base64 inside them.
        for bytes in [
            pdf.clone(),
            [&b"\xff\x00"[..], STANDARD.encode(SECRET).as_bytes()].concat(),
        ] {
            let mut inline = message.clone();
            inline["attachments"] =
                json!([{ "filename": "blob.bin", "content_base64": STANDARD.encode(&bytes) }]);
            let out = call(&s, "email.send", inline).await;
            assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
            assert!(out.to_string().contains("blob.bin"), "{out}");
        }
        // A recipient address holding the secret is refused as well.
        let mut to_secret = message.clone();
        to_secret["to"] = json!(["sk-live-Go12@example.org"]);
        s.app
            .wb
            .vault()
            .set(&s.admin, "ADDRESS_TOKEN", "sk-live-Go12")
            .await
            .unwrap();
        let out = call(&s, "email.send", to_secret).await;
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        assert_eq!(s.sink.messages().len(), 1, "nothing more was sent");
    }
);

db_test!(
    a_callback_payload_reaches_its_receiver_scrubbed,
    |backend| {
        let s = setup!(backend);
        set_secret(&s).await;
        let (base, got) = receiver().await;
        s.app
            .wb
            .egress()
            .add(&s.admin, base.trim_start_matches("http://"))
            .await
            .unwrap();
        let out = call(
        &s,
        "schedule.callback",
        json!({ "url": format!("{base}/hook"), "delay_seconds": 5, "payload": { "auth": "{{vault:API_TOKEN}}", "note": format!("go {}", go_json(SECRET)), "n": 1 } }),
    )
    .await;
        assert!(out.get("result").is_some(), "{out}");
        s.app.clock.advance_ms(6_000);
        assert_eq!(s.app.wb.deliveries().run_due().await.unwrap(), 1);
        let bodies = got.got.lock().unwrap().clone();
        assert_eq!(bodies.len(), 1);
        let text = String::from_utf8(bodies[0].to_vec()).unwrap();
        assert!(
            leaks(&text).is_empty(),
            "the secret reached the receiver: {:?} in {text}",
            leaks(&text)
        );
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            body["payload"],
            json!({ "auth": "[redacted:API_TOKEN]", "note": "go [redacted:API_TOKEN]", "n": 1 }),
            "{text}"
        );
    }
);

db_test!(a_webhook_body_reaches_its_receiver_scrubbed, |backend| {
    let s = setup!(backend);
    set_secret(&s).await;
    s.app
        .wb
        .vault()
        .set(&s.admin, "HOOK_SIGNING", "whsec-signing-Key-0123456789")
        .await
        .unwrap();
    let (base, got) = receiver().await;
    let (status, v) = rest(
        &s.app,
        &s.key,
        reqwest::Method::PATCH,
        "/v1/settings",
        Some(json!({ "webhook": { "url": format!("{base}/hook"), "secret_ref": "HOOK_SIGNING" } })),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
    let (_, pol) = rest(
        &s.app,
        &s.key,
        reqwest::Method::POST,
        "/v1/policies",
        Some(json!({ "name": "careful", "tool_allowlist": rules })),
    )
    .await;
    let (_, agent) = rest(
        &s.app,
        &s.key,
        reqwest::Method::POST,
        "/v1/api-keys",
        Some(json!({ "name": "agent", "policy_id": pol["id"] })),
    )
    .await;
    let agent = agent["key"].as_str().unwrap().to_owned();
    // The agent's arguments hold the secret as a JSON writer escaped it (a document in a string).
    let content = format!("{{\"token\":\"{}\"}}", go_json(SECRET));
    let (status, held) = rest(
        &s.app,
        &agent,
        reqwest::Method::POST,
        "/v1/tools/invoke",
        Some(json!({ "tool": "storage.put", "arguments": { "key": "a", "content": content } })),
    )
    .await;
    assert_eq!(status, 202, "{held}");
    let mut body = None;
    for _ in 0..300 {
        if let Some(b) = got.got.lock().unwrap().first() {
            body = Some(b.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = String::from_utf8(body.expect("the webhook was called").to_vec()).unwrap();
    assert!(
        leaks(&text).is_empty(),
        "the secret reached the webhook: {:?} in {text}",
        leaks(&text)
    );
    let event: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        event["data"]["arguments"]["content"], "{\"token\":\"[redacted:API_TOKEN]\"}",
        "{text}"
    );
});
