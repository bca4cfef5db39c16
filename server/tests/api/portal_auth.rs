//! First-admin setup, sign-in, sessions, sign-out, throttling and CSRF on the portal.

use workbench_core::auth::Role;

use crate::helpers::{Options, PASSWORD};
use crate::{app, db_test};

fn location(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
}

fn session_cookie(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.contains("wb_session="))
}

db_test!(an_empty_instance_sends_every_page_to_setup, |backend| {
    let app = app!(backend);
    let b = app.browser();
    for path in ["/", "/login", "/api-keys", "/members"] {
        let res = b.get(path).await;
        assert_eq!(res.status(), 303, "{path}");
        assert_eq!(location(&res).as_deref(), Some("/setup"), "{path}");
    }
    let res = b.get("/setup").await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("Create the first admin"));
    assert!(
        html.contains("action=\"/api/set_up\""),
        "form must post without JavaScript"
    );
});

db_test!(first_admin_setup_signs_in_and_closes_setup, |backend| {
    let app = app!(backend);
    let b = app.browser();
    let res = b
        .call(
            "set_up",
            &[
                ("email", "Root@Example.com"),
                ("password", PASSWORD),
                ("project", "acme"),
            ],
        )
        .await;
    assert!(
        res.status().is_success() || res.status().is_redirection(),
        "{}",
        res.status()
    );
    let res = b.get("/").await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(
        html.contains("root@example.com"),
        "signed-in page names the admin"
    );
    assert!(html.contains("acme"));
    // Setup is closed for everyone now, also for a stranger.
    let stranger = app.browser();
    assert_eq!(
        location(&stranger.get("/setup").await).as_deref(),
        Some("/login")
    );
    let res = stranger
        .call(
            "set_up",
            &[
                ("email", "evil@example.com"),
                ("password", PASSWORD),
                ("project", "x"),
            ],
        )
        .await;
    assert!(res.status().is_server_error() || res.status().is_client_error());
    assert!(res.text().await.unwrap().contains("already set up"));
    assert!(
        stranger
            .sign_in("evil@example.com", PASSWORD)
            .await
            .status()
            != 200
    );
});

db_test!(racing_setups_create_exactly_one_admin, |backend| {
    let app = app!(backend);
    let attempts = (0..6).map(|i| {
        let b = app.browser();
        async move {
            let email = format!("admin{i}@example.com");
            let res = b
                .call(
                    "set_up",
                    &[("email", &email), ("password", PASSWORD), ("project", "p")],
                )
                .await;
            res.status().is_success()
        }
    });
    let wins = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|ok| *ok)
        .count();
    assert_eq!(wins, 1);
});

db_test!(setup_rejects_a_short_password_and_bad_email, |backend| {
    let app = app!(backend);
    let b = app.browser();
    let res = b
        .call(
            "set_up",
            &[
                ("email", "root@example.com"),
                ("password", "short"),
                ("project", "p"),
            ],
        )
        .await;
    assert!(res.text().await.unwrap().contains("password too short"));
    let res = b
        .call(
            "set_up",
            &[
                ("email", "not-an-email"),
                ("password", PASSWORD),
                ("project", "p"),
            ],
        )
        .await;
    assert!(res.text().await.unwrap().contains("invalid email"));
    assert!(!app.wb.accounts().is_set_up().await.unwrap());
});

db_test!(
    unknown_email_and_wrong_password_get_the_same_answer,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let wrong = b.sign_in("ada@example.com", "not the password").await;
        let wrong_status = wrong.status();
        let wrong_body = wrong.text().await.unwrap();
        let unknown = b.sign_in("nobody@example.com", "not the password").await;
        assert_eq!(unknown.status(), wrong_status);
        assert_eq!(unknown.text().await.unwrap(), wrong_body);
        assert!(
            wrong_body.contains("invalid email or password"),
            "{wrong_body}"
        );
        // Neither created a signed-in session.
        assert_eq!(location(&b.get("/").await).as_deref(), Some("/login"));
    }
);

db_test!(
    sign_in_cycles_the_session_id_and_sign_out_ends_it_on_the_server,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let first = b.sign_in("ada@example.com", PASSWORD).await;
        assert!(first.status().is_success(), "{}", first.status());
        let first_cookie = session_cookie(&first).expect("sign-in sets the session cookie");
        assert!(first_cookie.contains("HttpOnly"), "{first_cookie}");
        assert!(first_cookie.contains("SameSite=Lax"), "{first_cookie}");
        assert!(
            !first_cookie.contains("Secure"),
            "plain http public url: no Secure flag"
        );
        assert_eq!(b.get("/").await.status(), 200);

        // Signing in again (from a session that already exists) issues a new id.
        let second = b.sign_in("ada@example.com", PASSWORD).await;
        let second_cookie = session_cookie(&second).expect("a new cookie");
        let id = |c: &str| c.split(';').next().unwrap().to_owned();
        assert_ne!(id(&first_cookie), id(&second_cookie));
        // The old id no longer works.
        let old = app
            .http()
            .get(app.url("/"))
            .header("cookie", id(&first_cookie))
            .send()
            .await
            .unwrap();
        assert_eq!(old.headers().get("location").unwrap(), "/login");

        let out = b.call("sign_out", &[]).await;
        assert!(out.status().is_success() || out.status().is_redirection());
        // Replaying the cookie after sign-out: the session is gone server-side.
        let replay = app
            .http()
            .get(app.url("/"))
            .header("cookie", id(&second_cookie))
            .send()
            .await
            .unwrap();
        assert_eq!(replay.headers().get("location").unwrap(), "/login");
    }
);

db_test!(sign_in_redirects_only_to_local_paths, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    for (next, expected) in [
        ("/api-keys", "/api-keys"),
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
        ("/\\evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("/ /evil.example", "/"),
    ] {
        let b = app.browser();
        let res = b
            .call(
                "sign_in",
                &[
                    ("email", "ada@example.com"),
                    ("password", PASSWORD),
                    ("next", next),
                ],
            )
            .await;
        assert_eq!(location(&res).as_deref(), Some(expected), "next={next}");
    }
});

db_test!(
    pages_need_a_session_and_remember_where_you_were_going,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let res = b.get("/api-keys").await;
        assert_eq!(location(&res).as_deref(), Some("/login?next=%2Fapi-keys"));
        let res = b.get("/login").await;
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        assert!(html.contains("action=\"/api/sign_in\""));
        // Server functions refuse without a session too.
        let res = b.call("api_keys_page", &[]).await;
        assert!(!res.status().is_success());
        let body = res.text().await.unwrap();
        assert!(body.contains("NotSignedIn"), "{body}");
    }
);

db_test!(
    repeated_failures_throttle_the_account_even_with_the_right_password,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        for _ in 0..5 {
            let body = b
                .sign_in("ada@example.com", "wrong password!")
                .await
                .text()
                .await
                .unwrap();
            assert!(body.contains("invalid email or password"), "{body}");
        }
        let body = b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .text()
            .await
            .unwrap();
        assert!(body.contains("too many attempts"), "{body}");
        // Another account is not affected.
        app.user("bob@example.com", Role::Member).await;
        assert!(b
            .sign_in("bob@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        // After the window the account can sign in again.
        app.clock.advance_ms(16 * 60 * 1000);
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
    }
);

db_test!(
    repeated_failures_from_one_address_throttle_that_address,
    |backend| {
        let app = app!(
            backend,
            Options {
                trust_forwarded_for: true,
                ..Default::default()
            }
        );
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let from = |ip: &'static str, email: String| {
            let client = b.client.clone();
            let url = format!("{}/api/sign_in", b.base);
            async move {
                client
                    .post(url)
                    .header("x-forwarded-for", ip)
                    .form(&[("email", email.as_str()), ("password", PASSWORD)])
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            }
        };
        for i in 0..20 {
            let body = from("203.0.113.9", format!("guess{i}@example.com")).await;
            assert!(body.contains("invalid email or password"), "{body}");
        }
        let body = from("203.0.113.9", "ada@example.com".into()).await;
        assert!(body.contains("too many attempts"), "{body}");
        let body = from("198.51.100.7", "ada@example.com".into()).await;
        assert!(!body.contains("too many attempts"), "{body}");
    }
);

db_test!(cross_site_posts_are_refused, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let http = app.http();
    let form = [("email", "ada@example.com"), ("password", PASSWORD)];
    let cases: [&[(&str, &str)]; 4] = [
        &[("origin", "https://evil.example")],
        &[("origin", "null")],
        &[("sec-fetch-site", "cross-site")],
        &[],
    ];
    for headers in cases {
        let mut req = http.post(app.url("/api/sign_in")).form(&form);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 403, "{headers:?}");
        assert!(res.headers().get("set-cookie").is_none());
    }
    let ok = http
        .post(app.url("/api/sign_in"))
        .header("origin", app.base.as_str())
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(ok.status().is_success());
});

db_test!(portal_pages_refuse_to_be_framed, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let res = app.browser().get("/login").await;
    assert_eq!(
        res.headers().get("content-security-policy").unwrap(),
        "frame-ancestors 'none'"
    );
    assert_eq!(res.headers().get("x-frame-options").unwrap(), "DENY");
});

db_test!(
    https_public_urls_get_secure_host_prefixed_cookies,
    |backend| {
        let app = app!(
            backend,
            Options {
                public_url: Some("https://wb.example.com".into()),
                ..Default::default()
            }
        );
        app.user("ada@example.com", Role::Admin).await;
        let res = app
            .http()
            .post(app.url("/api/sign_in"))
            .header("origin", "https://wb.example.com")
            .form(&[("email", "ada@example.com"), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .find(|c| c.starts_with("__Host-wb_session="))
            .expect("__Host- prefixed cookie");
        assert!(
            cookie.contains("Secure") && cookie.contains("Path=/") && !cookie.contains("Domain"),
            "{cookie}"
        );
    }
);

db_test!(me_answers_for_the_session_and_not_for_api_keys, |backend| {
    let app = app!(backend);
    let ada = app.user("ada@example.com", Role::Admin).await;
    let key = app.api_key(&ada).await;
    let res = app
        .http()
        .get(app.url("/me"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let b = app.browser();
    b.sign_in("ada@example.com", PASSWORD).await;
    let body: serde_json::Value = b.get("/me").await.json().await.unwrap();
    assert_eq!(body["id"], ada.user_id.as_str());
    assert_eq!(body["email"], "ada@example.com");
});

db_test!(
    a_dns_rebinding_page_cannot_set_up_a_fresh_instance,
    |backend| {
        let app = app!(backend);
        let port = app.base.rsplit(':').next().unwrap().to_owned();
        let evil = format!("evil.example:{port}");
        // The page's origin and the Host it sends agree, so only the Host check can tell.
        let res = app
            .http()
            .post(app.url("/api/set_up"))
            .header("host", &evil)
            .header("origin", format!("http://{evil}"))
            .form(&[
                ("email", "evil@example.com"),
                ("password", PASSWORD),
                ("project", "x"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 421);
        assert!(
            !app.wb.accounts().is_set_up().await.unwrap(),
            "no admin was created"
        );
        let res = app
            .http()
            .get(app.url("/login"))
            .header("host", &evil)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 421, "pages too");
        // Our own names still work.
        let res = app
            .http()
            .get(app.url("/healthz"))
            .header("host", &evil)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "health probes answer whatever the host");
        let res = app.http().get(app.url("/login")).send().await.unwrap();
        assert!(
            res.status().is_success() || res.status().is_redirection(),
            "{}",
            res.status()
        );
    }
);

db_test!(
    parallel_wrong_guesses_are_counted_before_any_is_checked,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let guesses = (0..40).map(|i| {
            let client = b.client.clone();
            let url = format!("{}/api/sign_in", b.base);
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .form(&[
                        ("email", "ada@example.com".to_string()),
                        ("password", format!("guess number {i}")),
                    ])
                    .send()
                    .await
                    .unwrap();
                (
                    res.status().as_u16(),
                    res.headers().get("retry-after").is_some(),
                )
            })
        });
        let mut answers = Vec::new();
        for g in guesses {
            answers.push(g.await.unwrap());
        }
        let checked = answers.iter().filter(|(s, _)| *s == 401).count();
        let throttled = answers
            .iter()
            .filter(|(s, retry)| *s == 429 && *retry)
            .count();
        assert_eq!(
            checked, 5,
            "only the account's limit of guesses is evaluated: {answers:?}"
        );
        assert_eq!(throttled, 35, "{answers:?}");
    }
);

db_test!(
    sign_in_failures_answer_401_and_throttling_429_with_retry_after,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        let wrong = b
            .call(
                "sign_in",
                &[
                    ("email", "ada@example.com"),
                    ("password", "not the password"),
                ],
            )
            .await;
        assert_eq!(wrong.status(), 401);
        let wrong_body = wrong.text().await.unwrap();
        let unknown = b
            .call(
                "sign_in",
                &[
                    ("email", "nobody@example.com"),
                    ("password", "not the password"),
                ],
            )
            .await;
        assert_eq!(
            unknown.status(),
            401,
            "an unknown email answers exactly like a wrong password"
        );
        assert_eq!(unknown.text().await.unwrap(), wrong_body);
        for _ in 0..4 {
            b.call(
                "sign_in",
                &[
                    ("email", "ada@example.com"),
                    ("password", "not the password"),
                ],
            )
            .await;
        }
        let throttled = b
            .call(
                "sign_in",
                &[("email", "ada@example.com"), ("password", PASSWORD)],
            )
            .await;
        assert_eq!(throttled.status(), 429);
        let retry: u64 = throttled
            .headers()
            .get("retry-after")
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=900).contains(&retry), "{retry}");
        assert!(throttled
            .text()
            .await
            .unwrap()
            .contains("too many attempts"));
    }
);

// leptos lists a router's pages with a process-wide flag up that leaves any resource polled
// meanwhile pending forever; the portal lists them once per process, so pages keep rendering
// while other routers are built (each test server in this process builds one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_render_their_data_while_another_router_is_built() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    let app = app!(crate::helpers::Backend::Sqlite);
    let admin = app.user("root@example.com", Role::Admin).await;
    let b = app.browser();
    assert!(b
        .sign_in(&admin.email, PASSWORD)
        .await
        .status()
        .is_success());
    let stop = Arc::new(AtomicBool::new(false));
    let builder = {
        let (stop, state, runtime) = (
            stop.clone(),
            app.state().clone(),
            tokio::runtime::Handle::current(),
        );
        std::thread::spawn(move || {
            let _runtime = runtime.enter();
            let mut built = 0;
            while !stop.load(Ordering::Relaxed) {
                drop(workbench_server::router(state.clone()));
                built += 1;
            }
            built
        })
    };
    for round in 0..20 {
        let res = tokio::time::timeout(Duration::from_secs(30), b.get("/"))
            .await
            .unwrap_or_else(|_| panic!("round {round}: the page never answered"));
        assert_eq!(res.status(), 200, "round {round}");
        let html = res.text().await.unwrap();
        assert!(
            html.contains("root@example.com"),
            "round {round}: the viewer loaded"
        );
    }
    stop.store(true, Ordering::Relaxed);
    assert!(builder.join().unwrap() > 0, "routers were built meanwhile");
}
