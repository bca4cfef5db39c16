//! email.send and sender domains against a real SMTP conversation (a recording server on
//! loopback) and real DNS lookups (a responder on loopback): a domain is added, proven with its
//! TXT record and sent from; an unproven domain, a refused recipient, the hourly limit and bad
//! input each answer a clear error with nothing sent; credentials are used and never shown.

use clap::Parser;
use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::email::{EmailSettings, SmtpUrl};

use crate::fake_mail::{DnsResponder, SmtpSink};
use crate::helpers::{admin_with_key, execute, Options, TestApp, PASSWORD};
use crate::{app, db_test};

struct Mail {
    app: TestApp,
    key: String,
    sink: SmtpSink,
    dns: DnsResponder,
}

async fn options(sink: &SmtpSink, dns: &DnsResponder, hourly_limit: u32) -> Options {
    Options {
        email: EmailSettings {
            smtp: Some(SmtpUrl::parse(&sink.url()).unwrap()),
            dns_server: Some(dns.addr),
            hourly_limit,
        },
        ..Default::default()
    }
}

macro_rules! mail {
    ($backend:expr) => {
        mail!($backend, 100)
    };
    ($backend:expr, $limit:expr) => {{
        let sink = SmtpSink::start().await;
        let dns = DnsResponder::start().await;
        let app = app!($backend, options(&sink, &dns, $limit).await);
        let (_, key) = admin_with_key(&app).await;
        Mail {
            app,
            key,
            sink,
            dns,
        }
    }};
}

async fn rest(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app.http().request(method, app.url(path)).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Adds `domain` and answers its id and the record to publish.
async fn add_domain(m: &Mail, domain: &str) -> (String, Value) {
    let (status, d) = rest(
        &m.app,
        &m.key,
        reqwest::Method::POST,
        "/v1/email/domains",
        Some(json!({ "domain": domain })),
    )
    .await;
    assert_eq!(status, 201, "{d}");
    (
        d["id"].as_str().unwrap().to_owned(),
        d["dns_record"].clone(),
    )
}

async fn verify(m: &Mail, id: &str) -> (u16, Value) {
    rest(
        &m.app,
        &m.key,
        reqwest::Method::POST,
        &format!("/v1/email/domains/{id}/verify"),
        None,
    )
    .await
}

/// A domain added, published and verified.
async fn verified(m: &Mail, domain: &str) -> String {
    let (id, record) = add_domain(m, domain).await;
    m.dns.publish(
        record["name"].as_str().unwrap(),
        record["value"].as_str().unwrap(),
    );
    let (status, d) = verify(m, &id).await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["status"], "verified", "{d}");
    id
}

async fn send(m: &Mail, args: Value) -> Value {
    execute(
        &m.app,
        &m.key,
        json!([{ "tool": "email.send", "args": args }]),
    )
    .await
    .remove(0)
}

db_test!(
    a_message_goes_out_from_a_verified_domain_with_bcc_only_in_the_envelope,
    |backend| {
        let m = mail!(backend);
        let (id, record) = add_domain(&m, "Example.COM").await;
        assert_eq!(record["type"], "TXT");
        assert_eq!(record["name"], "_workbench.example.com");
        let value = record["value"].as_str().unwrap();
        assert!(
            value.starts_with("workbench-verification=") && value.len() > 40,
            "{record}"
        );

        // Another value at the name does not prove anything; the right one (beside it) does.
        m.dns.publish("_workbench.example.com", "v=spf1 -all");
        m.dns.publish("_workbench.example.com", value);
        let (status, d) = verify(&m, &id).await;
        assert_eq!(status, 200, "{d}");
        assert_eq!(d["status"], "verified");
        assert!(d["verified_at"].is_string(), "{d}");
        assert!(
            m.dns
                .queries()
                .contains(&"_workbench.example.com".to_owned()),
            "{:?}",
            m.dns.queries()
        );

        let out = send(
        &m,
        json!({
            "from": "Reports <reports@example.com>",
            "to": ["Ann <ann@example.org>"],
            "cc": ["cc@example.org"],
            "bcc": ["hidden@example.net"],
            "reply_to": "help@example.com",
            "subject": "Quarterly numbers",
            "text": "See the attached CSV.\n.\nA line that was only a dot.",
            "html": "<p>See the attached <b>CSV</b>.</p>",
            "attachments": [{ "filename": "q3.csv", "content_type": "text/csv", "content_base64": "cmVnaW9uLHRvdGFsCmV1LDQyCg==" }]
        }),
    )
    .await;
        assert!(out.get("result").is_some(), "{out}");
        let message_id = out["result"]["message_id"].as_str().unwrap();
        assert!(
            message_id.starts_with('<') && message_id.ends_with("@example.com>"),
            "{out}"
        );
        assert_eq!(
            out["result"]["accepted"],
            json!(["ann@example.org", "cc@example.org", "hidden@example.net"]),
            "{out}"
        );

        let got = m.sink.messages();
        assert_eq!(got.len(), 1);
        let msg = &got[0];
        assert_eq!(msg.mail_from, "reports@example.com");
        assert_eq!(
            msg.rcpt_to,
            ["ann@example.org", "cc@example.org", "hidden@example.net"]
        );
        assert!(
            msg.data.contains(&format!("Message-ID: {message_id}")),
            "{}",
            msg.data
        );
        assert!(
            msg.data.contains("Subject: Quarterly numbers"),
            "{}",
            msg.data
        );
        assert!(
            msg.data.contains("Reply-To: help@example.com"),
            "{}",
            msg.data
        );
        assert!(
            !msg.data.contains("hidden@example.net"),
            "bcc is in the envelope only: {}",
            msg.data
        );
        assert!(
            msg.data.contains("multipart/alternative") && msg.data.contains("text/html"),
            "{}",
            msg.data
        );
        assert!(
            msg.data.contains("filename=\"q3.csv\"")
                && msg.data.contains("region,total")
                && msg.data.contains("eu,42"),
            "{}",
            msg.data
        );
        assert!(
            msg.data.lines().any(|l| l.trim_end() == ".")
                && msg.data.contains("A line that was only a dot."),
            "a lone dot survives transparency: {}",
            msg.data
        );

        // The project's sending count and the tool's honest side effects.
        let (_, list) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(
            list["sending"],
            json!({ "configured": true, "sent_last_hour": 1, "hourly_limit": 100, "project_hourly_limit": null, "operator_hourly_limit": 100 }),
            "{list}"
        );
        assert_eq!(list["data"][0]["domain"], "example.com");
        let (_, tool) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/tools/email.send",
            None,
        )
        .await;
        assert_eq!(tool["side_effects"], "destructive", "{tool}");

        // The call is audited like any other.
        let (_, audit) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/audit?tool=email.send",
            None,
        )
        .await;
        assert_eq!(audit["data"][0]["tool"], "email.send", "{audit}");
        assert_eq!(audit["data"][0]["status"], "succeeded", "{audit}");
    }
);

db_test!(
    an_unverified_sender_domain_is_named_with_how_to_verify_and_nothing_is_sent,
    |backend| {
        let m = mail!(backend);
        let args = |from: &str| json!({ "from": from, "to": ["ann@example.org"], "subject": "hi", "text": "hello" });
        let out = send(&m, args("noreply@acme.test")).await;
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        let text = out.to_string();
        assert!(
            text.contains("acme.test is not a verified sender domain")
                && text.contains("POST /v1/email/domains"),
            "{out}"
        );

        let (id, _) = add_domain(&m, "acme.test").await;
        let out = send(&m, args("noreply@acme.test")).await;
        assert!(
            out.to_string().contains("acme.test is not verified yet")
                && out.to_string().contains("_workbench.acme.test"),
            "{out}"
        );

        // A subdomain is its own sender domain: proving acme.test does not cover mail.acme.test.
        m.dns.publish(
            "_workbench.acme.test",
            rest(
                &m.app,
                &m.key,
                reqwest::Method::GET,
                &format!("/v1/email/domains/{id}"),
                None,
            )
            .await
            .1["dns_record"]["value"]
                .as_str()
                .unwrap(),
        );
        assert_eq!(verify(&m, &id).await.0, 200);
        let out = send(&m, args("noreply@mail.acme.test")).await;
        assert!(
            out.to_string()
                .contains("mail.acme.test is not a verified sender domain"),
            "{out}"
        );
        assert!(m.sink.messages().is_empty(), "nothing was sent");
        assert_eq!(
            m.sink.connections(),
            0,
            "the mail server was never contacted"
        );
    }
);

db_test!(
    verification_says_what_dns_holds_and_the_domain_stays_pending,
    |backend| {
        let m = mail!(backend);
        let (id, record) = add_domain(&m, "example.com").await;
        let (status, err) = verify(&m, &id).await;
        assert_eq!(status, 422, "{err}");
        assert_eq!(err["error"]["code"], "verification_failed", "{err}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("no TXT record at _workbench.example.com")
                && msg.contains(record["value"].as_str().unwrap()),
            "{msg}"
        );

        m.dns.publish(
            "_workbench.example.com",
            "workbench-verification=someone-elses-token",
        );
        let (status, err) = verify(&m, &id).await;
        assert_eq!(status, 422, "{err}");
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains("someone-elses-token"),
            "{err}"
        );

        let (_, d) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            &format!("/v1/email/domains/{id}"),
            None,
        )
        .await;
        assert_eq!(d["status"], "pending", "{d}");
        assert!(
            d["last_error"].as_str().unwrap().contains("do not include"),
            "{d}"
        );
        assert!(d["last_checked_at"].is_string(), "{d}");

        // DNS failing is a retryable 503, distinct from "the record is wrong".
        let (id2, _) = add_domain(&m, "broken.example").await;
        m.dns.fail("_workbench.broken.example");
        let (status, err) = verify(&m, &id2).await;
        assert_eq!(status, 503, "{err}");
        assert_eq!(err["error"]["code"], "dns_unavailable", "{err}");

        // Bad domains and duplicates are refused before anything is stored.
        for bad in [
            "localhost",
            "10.0.0.1",
            "ann@example.com",
            "exa mple.com",
            "",
        ] {
            let (status, err) = rest(
                &m.app,
                &m.key,
                reqwest::Method::POST,
                "/v1/email/domains",
                Some(json!({ "domain": bad })),
            )
            .await;
            assert_eq!(status, 422, "{bad:?}: {err}");
        }
        let (status, err) = rest(
            &m.app,
            &m.key,
            reqwest::Method::POST,
            "/v1/email/domains",
            Some(json!({ "domain": "EXAMPLE.com." })),
        )
        .await;
        assert_eq!(status, 409, "{err}");
        let (status, err) = rest(
            &m.app,
            &m.key,
            reqwest::Method::POST,
            "/v1/email/domains",
            Some(json!({ "domain": "x.example", "token": "mine" })),
        )
        .await;
        assert_eq!(status, 422, "{err}");
        let (_, list) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(list["data"].as_array().unwrap().len(), 2, "{list}");

        let (status, _) = rest(
            &m.app,
            &m.key,
            reqwest::Method::DELETE,
            &format!("/v1/email/domains/{id2}"),
            None,
        )
        .await;
        assert_eq!(status, 204);
        let (status, _) = rest(
            &m.app,
            &m.key,
            reqwest::Method::DELETE,
            &format!("/v1/email/domains/{id2}"),
            None,
        )
        .await;
        assert_eq!(status, 404);
    }
);

db_test!(
    members_see_domains_but_only_admins_change_them_and_projects_are_apart,
    |backend| {
        let m = mail!(backend);
        let id = verified(&m, "example.com").await;
        let bob = m.app.user("bob@example.com", Role::Member).await;
        let bob_key = m.app.api_key(&bob).await;
        let (status, list) = rest(
            &m.app,
            &bob_key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(list["data"][0]["status"], "verified", "{list}");
        let (status, _) = rest(
            &m.app,
            &bob_key,
            reqwest::Method::POST,
            "/v1/email/domains",
            Some(json!({ "domain": "bob.example" })),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = rest(
            &m.app,
            &bob_key,
            reqwest::Method::POST,
            &format!("/v1/email/domains/{id}/verify"),
            None,
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = rest(
            &m.app,
            &bob_key,
            reqwest::Method::DELETE,
            &format!("/v1/email/domains/{id}"),
            None,
        )
        .await;
        assert_eq!(status, 403);
        // A member may send from the project's verified domain.
        let out = execute(&m.app, &bob_key, json!([{ "tool": "email.send", "args": { "from": "bob@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" } }])).await.remove(0);
        assert!(out.get("result").is_some(), "{out}");

        // Another project neither sees the domain nor sends from it, and proves it on its own.
        let (eve, _) = m
            .app
            .wb
            .accounts()
            .create_user("eve@example.com", PASSWORD, Some("other"), Role::Admin)
            .await
            .unwrap();
        let eve = m
            .app
            .wb
            .accounts()
            .principal_for_user(&eve.id)
            .await
            .unwrap()
            .unwrap();
        let eve_key = m.app.api_key(&eve).await;
        let (status, _) = rest(
            &m.app,
            &eve_key,
            reqwest::Method::GET,
            &format!("/v1/email/domains/{id}"),
            None,
        )
        .await;
        assert_eq!(status, 404);
        let (status, _) = rest(
            &m.app,
            &eve_key,
            reqwest::Method::POST,
            &format!("/v1/email/domains/{id}/verify"),
            None,
        )
        .await;
        assert_eq!(status, 404);
        let (_, list) = rest(
            &m.app,
            &eve_key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(list["data"], json!([]), "{list}");
        let out = execute(&m.app, &eve_key, json!([{ "tool": "email.send", "args": { "from": "eve@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" } }])).await.remove(0);
        assert_eq!(out["code"], "INVALID_ARGUMENTS", "{out}");
        let (status, d) = rest(
            &m.app,
            &eve_key,
            reqwest::Method::POST,
            "/v1/email/domains",
            Some(json!({ "domain": "example.com" })),
        )
        .await;
        assert_eq!(
            status, 201,
            "the same domain in another project is that project's own claim: {d}"
        );
        let (status, _) = rest(
            &m.app,
            &eve_key,
            reqwest::Method::POST,
            &format!("/v1/email/domains/{}/verify", d["id"].as_str().unwrap()),
            None,
        )
        .await;
        assert_eq!(
            status, 422,
            "the first project's record does not prove the second project's token"
        );
        assert_eq!(m.sink.messages().len(), 1);
    }
);

db_test!(
    limits_and_bad_input_are_refused_before_anything_is_sent,
    |backend| {
        let m = mail!(backend);
        verified(&m, "example.com").await;
        let base = || json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" });
        let with = |patch: Value| {
            let mut v = base();
            for (k, val) in patch.as_object().unwrap() {
                if val.is_null() {
                    v.as_object_mut().unwrap().remove(k);
                } else {
                    v[k] = val.clone();
                }
            }
            v
        };
        let many: Vec<String> = (0..30).map(|i| format!("r{i}@example.org")).collect();
        let cases = [
            (with(json!({ "to": many, "cc": many })), "at most 50"),
            (
                with(json!({ "to": ["not an address"] })),
                "not an email address",
            ),
            (with(json!({ "to": [] })), ""),
            (
                with(json!({ "from": "a@example.com\r\nBcc: x@evil.example" })),
                "",
            ),
            (
                with(json!({ "subject": "one\r\nBcc: x@evil.example" })),
                "one line",
            ),
            (with(json!({ "text": null })), "text, html or both"),
            (
                with(json!({ "attachments": [{ "filename": "a.bin", "content_base64": "!!!" }] })),
                "not valid base64",
            ),
            (
                with(json!({ "attachments": [{ "filename": "a.bin" }] })),
                "exactly one",
            ),
            (
                with(
                    json!({ "attachments": [{ "filename": "../a.bin", "content_base64": "AA==" }] }),
                ),
                "slashes",
            ),
            (
                with(
                    json!({ "attachments": [{ "filename": "a.bin", "content_type": "pdf", "content_base64": "AA==" }] }),
                ),
                "MIME type",
            ),
            (
                with(
                    json!({ "attachments": [{ "filename": "a.bin", "storage_key": "missing/file.pdf" }] }),
                ),
                "no object",
            ),
            (
                with(json!({ "text": "your key: {{vault:API_KEY}}" })),
                "does not take {{vault:",
            ),
            (with(json!({ "unknown": 1 })), ""),
        ];
        execute(&m.app, &m.key, json!([{ "tool": "vault_set", "args": { "name": "API_KEY", "value": "sk-live-123456789" } }])).await;
        for (args, says) in cases {
            let out = send(&m, args.clone()).await;
            assert_eq!(out["code"], "INVALID_ARGUMENTS", "{args}: {out}");
            assert!(
                out.to_string().contains(says),
                "{args}: expected {says:?} in {out}"
            );
            assert!(!out.to_string().contains("sk-live-123456789"), "{out}");
        }

        // Attachments from project storage, over 10 MiB together (each object small enough to put
        // through a 4 MiB request).
        let chunk = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            vec![7u8; 2560 * 1024],
        );
        for k in [
            "big/1.bin",
            "big/2.bin",
            "big/3.bin",
            "big/4.bin",
            "big/5.bin",
        ] {
            let put = execute(&m.app, &m.key, json!([{ "tool": "storage.put", "args": { "key": k, "content": chunk, "encoding": "base64", "content_type": "application/zip" } }])).await.remove(0);
            assert!(put.get("result").is_some(), "{put}");
        }
        let five: Vec<Value> = (1..=5).map(|i| json!({ "filename": format!("{i}.bin"), "storage_key": format!("big/{i}.bin") })).collect();
        let out = send(&m, with(json!({ "attachments": five }))).await;
        assert!(out.to_string().contains("at most 10485760 bytes"), "{out}");
        assert!(m.sink.messages().is_empty(), "nothing was sent");

        // Two of them fit, and go out with the stored content type.
        let two = json!([{ "filename": "1.bin", "storage_key": "big/1.bin" }, { "filename": "2.bin", "storage_key": "big/2.bin", "content_type": "application/pdf" }]);
        let out = send(&m, with(json!({ "attachments": two }))).await;
        assert!(out.get("result").is_some(), "{out}");
        let data = &m.sink.messages()[0].data;
        assert!(
            data.contains("Content-Type: application/zip")
                && data.contains("Content-Type: application/pdf")
                && data.contains("filename=\"2.bin\""),
            "{}",
            &data[..2000.min(data.len())]
        );
    }
);

db_test!(
    the_hourly_limit_refuses_the_next_message_until_the_hour_has_passed,
    |backend| {
        let m = mail!(backend, 2);
        verified(&m, "example.com").await;
        let args = json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" });
        for _ in 0..2 {
            assert!(send(&m, args.clone()).await.get("result").is_some());
        }
        let out = send(&m, args.clone()).await;
        assert_eq!(out["code"], "UNAVAILABLE", "{out}");
        assert!(
            out.to_string()
                .contains("sent its 2 messages for this hour"),
            "{out}"
        );
        assert_eq!(m.sink.messages().len(), 2);

        m.app.clock.advance_ms(30 * 60 * 1000);
        assert_eq!(
            send(&m, args.clone()).await["code"],
            "UNAVAILABLE",
            "still within the hour"
        );
        m.app.clock.advance_ms(31 * 60 * 1000);
        let out = send(&m, args.clone()).await;
        assert!(
            out.get("result").is_some(),
            "an hour after the first, there is room: {out}"
        );
        assert_eq!(m.sink.messages().len(), 3);
    }
);

db_test!(
    a_project_admin_may_lower_the_hourly_limit_but_not_raise_it_past_the_operators,
    |backend| {
        let m = mail!(backend, 5);
        verified(&m, "example.com").await;
        let patch = |body: Value| {
            rest(
                &m.app,
                &m.key,
                reqwest::Method::PATCH,
                "/v1/settings",
                Some(body),
            )
        };
        let (status, s) = patch(json!({ "email_hourly_limit": 6 })).await;
        assert_eq!(status, 422, "{s}");
        assert!(
            s["error"]["message"]
                .as_str()
                .unwrap()
                .contains("1 to 5 (the operator's limit)"),
            "{s}"
        );
        let (status, _) = patch(json!({ "email_hourly_limit": "lots" })).await;
        assert_eq!(status, 422);
        let (status, s) = patch(json!({ "email_hourly_limit": 1 })).await;
        assert_eq!(status, 200, "{s}");
        assert_eq!(
            (
                s["email_hourly_limit"].clone(),
                s["email_hourly_limit_max"].clone()
            ),
            (json!(1), json!(5)),
            "{s}"
        );

        let args = json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" });
        assert!(send(&m, args.clone()).await.get("result").is_some());
        let out = send(&m, args.clone()).await;
        assert!(
            out.to_string()
                .contains("sent its 1 messages for this hour"),
            "{out}"
        );
        let (_, list) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(
            (
                list["sending"]["hourly_limit"].clone(),
                list["sending"]["project_hourly_limit"].clone()
            ),
            (json!(1), json!(1)),
            "{list}"
        );

        // A member cannot change it; null goes back to the operator's limit.
        let bob = m.app.user("bob@example.com", Role::Member).await;
        let bob_key = m.app.api_key(&bob).await;
        let (status, _) = rest(
            &m.app,
            &bob_key,
            reqwest::Method::PATCH,
            "/v1/settings",
            Some(json!({ "email_hourly_limit": 5 })),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = patch(json!({ "email_hourly_limit": null })).await;
        assert_eq!(status, 200);
        assert!(
            send(&m, args.clone()).await.get("result").is_some(),
            "back to the operator's 5"
        );
        assert_eq!(m.sink.messages().len(), 2);
    }
);

db_test!(
    a_refused_recipient_is_a_tool_error_that_does_not_count_toward_the_limit,
    |backend| {
        let m = mail!(backend);
        verified(&m, "example.com").await;
        m.sink.reject("gone@example.org");
        let out = send(&m, json!({ "from": "a@example.com", "to": ["ann@example.org", "gone@example.org"], "subject": "s", "text": "t" })).await;
        assert_eq!(out["code"], "TOOL_ERROR", "{out}");
        assert!(
            out.to_string().contains("550") && out.to_string().contains("nothing was sent"),
            "{out}"
        );
        assert!(m.sink.messages().is_empty());
        let (_, list) = rest(
            &m.app,
            &m.key,
            reqwest::Method::GET,
            "/v1/email/domains",
            None,
        )
        .await;
        assert_eq!(list["sending"]["sent_last_hour"], 0, "{list}");
        // The pooled connection is still good for the next message.
        let out = send(&m, json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" })).await;
        assert!(out.get("result").is_some(), "{out}");
    }
);

db_test!(
    without_a_mail_server_email_send_is_unavailable_naming_the_setting,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let out = execute(&app, &key, json!([{ "tool": "email.send", "args": { "from": "a@example.com", "to": ["b@example.org"], "subject": "s", "text": "t" } }])).await.remove(0);
        assert_eq!(out["code"], "UNAVAILABLE", "{out}");
        assert!(
            out.to_string().contains("--smtp-url") && out.to_string().contains("WB_SMTP_URL"),
            "{out}"
        );
        let (_, list) = rest(&app, &key, reqwest::Method::GET, "/v1/email/domains", None).await;
        assert_eq!(list["sending"]["configured"], false, "{list}");
    }
);

db_test!(smtp_credentials_are_used_and_never_shown, |backend| {
    const PASS: &str = "smtp-pass-9c1e77";
    let sink = SmtpSink::start_with(Some(("mailer", PASS))).await;
    let dns = DnsResponder::start().await;
    let url = format!("smtp://mailer:{PASS}@{}", sink.addr);
    let options = Options {
        email: EmailSettings {
            smtp: Some(SmtpUrl::parse(&url).unwrap()),
            dns_server: Some(dns.addr),
            hourly_limit: 100,
        },
        ..Default::default()
    };
    let app = app!(backend, options);
    let (_, key) = admin_with_key(&app).await;
    let m = Mail {
        app,
        key,
        sink,
        dns,
    };
    verified(&m, "example.com").await;
    let out = send(
        &m,
        json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" }),
    )
    .await;
    assert!(out.get("result").is_some(), "{out}");
    assert_eq!(m.sink.messages()[0].auth_user.as_deref(), Some("mailer"));

    // A wrong password is the server's refusal, and the configured one never shows.
    let wrong = SmtpSink::start_with(Some(("mailer", "other"))).await;
    let options = Options {
        email: EmailSettings {
            smtp: Some(SmtpUrl::parse(&format!("smtp://mailer:{PASS}@{}", wrong.addr)).unwrap()),
            dns_server: Some(m.dns.addr),
            hourly_limit: 100,
        },
        ..Default::default()
    };
    let app2 = app!(backend, options);
    let (_, key2) = admin_with_key(&app2).await;
    let m2 = Mail {
        app: app2,
        key: key2,
        sink: wrong,
        dns: m.dns.clone(),
    };
    verified(&m2, "example.com").await;
    let out = send(
        &m2,
        json!({ "from": "a@example.com", "to": ["ann@example.org"], "subject": "s", "text": "t" }),
    )
    .await;
    assert_eq!(out["code"], "TOOL_ERROR", "{out}");
    assert!(out.to_string().contains("535"), "{out}");
    assert!(!out.to_string().contains(PASS), "{out}");
    let (_, audit) = rest(&m2.app, &m2.key, reqwest::Method::GET, "/v1/audit", None).await;
    assert!(!audit.to_string().contains(PASS), "{audit}");
});

#[test]
fn smtp_settings_that_could_never_work_stop_start_up_without_showing_the_password() {
    let parse = |args: &[&str]| {
        let cli = workbench_server::cli::Cli::try_parse_from(
            std::iter::once("workbench").chain(args.iter().copied()),
        )
        .unwrap();
        workbench_server::config::ServerConfig::from_args(&cli.serve)
    };
    let err = parse(&["--smtp-url", "smtp://u:hunter22@mail.example.com:587"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--smtp-url") && err.contains("unencrypted") && !err.contains("hunter22"),
        "{err}"
    );
    let err = parse(&["--smtp-url", "https://mail.example.com"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("smtps://"), "{err}");
    let ok = parse(&[
        "--smtp-url",
        "smtps://u:hunter22@mail.example.com",
        "--dns-resolver",
        "127.0.0.1:5353",
        "--email-hourly-limit",
        "7",
    ])
    .unwrap();
    assert_eq!(ok.email.hourly_limit, 7);
    assert_eq!(ok.email.dns_server, Some("127.0.0.1:5353".parse().unwrap()));
    assert!(!format!("{:?}", ok.email).contains("hunter22"));
    assert_eq!(
        parse(&["--dns-resolver", "10.0.0.2"])
            .unwrap()
            .email
            .dns_server,
        Some("10.0.0.2:53".parse().unwrap())
    );
}

db_test!(
    the_email_page_shows_the_record_to_publish_and_lets_admins_verify,
    |backend| {
        let m = mail!(backend);
        let a = m.app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        assert_eq!(
            a.call("add_email_domain", &[("domain", "Example.com")])
                .await
                .status(),
            200
        );
        let res = a
            .call("add_email_domain", &[("domain", "not a domain")])
            .await;
        assert!(res.text().await.unwrap().contains("not a domain name"));
        let page: Value = a.call("email_page", &[]).await.json().await.unwrap();
        let d = &page["domains"][0];
        assert_eq!(d["domain"], "example.com", "{page}");
        assert_eq!(d["status"], "pending");
        assert_eq!(d["record_name"], "_workbench.example.com");
        assert_eq!(page["configured"], true);
        assert_eq!(page["can_manage"], true);
        let html = a.get("/email").await.text().await.unwrap();
        assert!(
            html.contains("_workbench.example.com")
                && html.contains(d["record_value"].as_str().unwrap()),
            "the record is on the page"
        );

        // Verifying before publishing says what is missing; after publishing it is ready.
        let id = d["id"].as_str().unwrap().to_owned();
        let res = a.call("verify_email_domain", &[("id", &id)]).await;
        assert!(res
            .text()
            .await
            .unwrap()
            .contains("no TXT record at _workbench.example.com"));
        m.dns.publish(
            "_workbench.example.com",
            d["record_value"].as_str().unwrap(),
        );
        assert_eq!(
            a.call("verify_email_domain", &[("id", &id)]).await.status(),
            200
        );
        let page: Value = a.call("email_page", &[]).await.json().await.unwrap();
        assert_eq!(page["domains"][0]["status"], "verified", "{page}");

        // A member sees the domains but cannot change them.
        m.app.user("bob@example.com", Role::Member).await;
        let b = m.app.browser();
        b.sign_in("bob@example.com", PASSWORD).await;
        let page: Value = b.call("email_page", &[]).await.json().await.unwrap();
        assert_eq!(page["can_manage"], false);
        assert_eq!(page["domains"][0]["domain"], "example.com");
        let res = b.call("remove_email_domain", &[("id", &id)]).await;
        assert!(res.text().await.unwrap().contains("only project admins"));
        assert_eq!(
            a.call("remove_email_domain", &[("id", &id)]).await.status(),
            200
        );
        let page: Value = a.call("email_page", &[]).await.json().await.unwrap();
        assert_eq!(page["domains"], json!([]));
    }
);

db_test!(
    a_secret_an_earlier_step_echoed_back_is_scrubbed_before_it_can_be_mailed,
    |backend| {
        // An allowlisted server that echoes the header it got: the secret comes back in a result.
        let echo = axum::Router::new().route(
            "/echo",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                format!(
                    "you sent key={}",
                    headers
                        .get("x-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, echo).await });
        let sink = SmtpSink::start().await;
        let dns = DnsResponder::start().await;
        let mut opts = options(&sink, &dns, 100).await;
        opts.egress_allow_private = vec!["127.0.0.1"];
        let app = app!(backend, opts);
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .egress()
            .add(&admin, &format!("127.0.0.1:{}", echo_addr.port()))
            .await
            .unwrap();
        let m = Mail {
            app,
            key,
            sink,
            dns,
        };
        verified(&m, "example.com").await;
        const SECRET: &str = "sk-live-echoed-77f1c2";
        execute(
            &m.app,
            &m.key,
            json!([{ "tool": "vault_set", "args": { "name": "PARTNER_KEY", "value": SECRET } }]),
        )
        .await;

        let (out, _) = crate::helpers::mcp_call(
        &m.app,
        &m.key,
        "execute_tools",
        json!({
            "compose": true,
            "executions": [
                { "ref_id": "echo", "tool": "http.fetch", "args": { "url": format!("http://{echo_addr}/echo"), "headers": { "x-key": "{{vault:PARTNER_KEY}}" } } },
                { "ref_id": "mail", "tool": "email.send", "args": { "from": "a@example.com", "to": ["out@elsewhere.example"], "subject": "leak?", "text": "{{step:echo.body}}" } }
            ]
        }),
    )
    .await;
        assert!(out.get("result").is_some(), "{out}");
        let sent = m.sink.messages();
        assert_eq!(sent.len(), 1, "{out}");
        assert!(
            sent[0].data.contains("you sent key="),
            "the step's text went out: {}",
            sent[0].data
        );
        assert!(
            !sent[0].data.contains(SECRET),
            "the echoed secret was scrubbed before the message was made: {}",
            sent[0].data
        );
    }
);
