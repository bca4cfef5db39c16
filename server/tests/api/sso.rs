//! Single sign-on through an OpenID Connect provider (issue 34): registering a provider over
//! REST, the browser flow against a real provider on loopback (sso_idp.rs), group mappings that
//! give a role and cap every key of the person's with a policy, refusals of tampered tokens and
//! forged callbacks, linking existing accounts, password sign-in turned off, and the background
//! re-check with refresh tokens (offline_access) that ends or changes a membership when the
//! person is disabled or their groups change at the provider.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::store;
use workbench_core::store::testing::StoredIdentity;

use crate::change_notices::rest;
use crate::helpers::{
    admin_with_key, execute, spawn_app_with, Backend, Browser, Options, TestApp, PASSWORD,
};
use crate::sso_idp::{self, FakeIdp, Person, Tamper, CLIENT_ID, CLIENT_SECRET};
use crate::{app, db_test};

/// The slug the tests register their provider under.
const SLUG: &str = "acme";

/// An app allowed to reach loopback, its admin's key, a provider registered as `acme` that maps
/// `wb-admins` to admin and `eng` to member capped with `eng_policy` (which denies storage.put),
/// and lets no one else in.
pub(crate) struct Sso {
    pub app: TestApp,
    pub admin: String,
    pub idp: FakeIdp,
    pub eng_policy: String,
}

pub(crate) async fn setup(backend: Backend) -> Option<Sso> {
    let app = spawn_app_with(backend, Options::loopback()).await?;
    let (_, admin) = admin_with_key(&app).await;
    store_client_secret(&app, &admin).await;
    let eng_policy = policy(
        &app,
        &admin,
        "eng",
        json!({ "mode": "open", "deny": ["storage.put"] }),
    )
    .await;
    let idp = sso_idp::start(app.clock.clone()).await;
    let (status, out) = put_provider(&app, &admin, SLUG, provider_body(&idp, &eng_policy)).await;
    assert_eq!(status, 201, "{out}");
    Some(Sso {
        app,
        admin,
        idp,
        eng_policy,
    })
}

/// Keeps the provider's client secret in the project's vault as OIDC_SECRET.
async fn store_client_secret(app: &TestApp, admin: &str) {
    let (status, out) = rest(
        app,
        admin,
        "POST",
        "/v1/tools/invoke",
        json!({ "tool": "vault_set", "arguments": { "name": "OIDC_SECRET", "value": CLIENT_SECRET } }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
}

/// Creates a policy; answers its id.
async fn policy(app: &TestApp, admin: &str, name: &str, rules: Value) -> String {
    let (status, out) = rest(
        app,
        admin,
        "POST",
        "/v1/policies",
        json!({ "name": name, "tool_allowlist": rules }),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    out["id"].as_str().unwrap().to_owned()
}

/// The registration of the test provider: admins and engineers get in, no one else.
fn provider_body(idp: &FakeIdp, eng_policy: &str) -> Value {
    json!({
        "name": "Acme",
        "issuer": idp.issuer(),
        "client_id": CLIENT_ID,
        "client_secret_ref": "vault:OIDC_SECRET",
        "scopes": ["openid", "email", "profile", "groups"],
        "groups_claim": "groups",
        "mappings": [
            { "group": "wb-admins", "role": "admin", "policy_id": null },
            { "group": "eng", "role": "member", "policy_id": eng_policy },
        ],
        "default_role": null,
    })
}

async fn put_provider(app: &TestApp, key: &str, slug: &str, body: Value) -> (u16, Value) {
    rest(app, key, "PUT", &format!("/v1/sso/providers/{slug}"), body).await
}

async fn preview(app: &TestApp, key: &str, groups: &[&str]) -> Value {
    let (status, out) = rest(
        app,
        key,
        "POST",
        &format!("/v1/sso/providers/{SLUG}/preview"),
        json!({ "groups": groups }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    out
}

fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get("location")
        .unwrap_or_else(|| panic!("no Location on a {} answer", res.status()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// Where `res` redirects to, resolved against the app (the Location may be relative).
fn target(app: &TestApp, res: &reqwest::Response) -> url::Url {
    url::Url::parse(&app.base)
        .unwrap()
        .join(&location(res))
        .unwrap()
}

/// Starts a sign-in through `slug` in `browser` and lets the provider answer: the callback URL
/// the provider sends the browser back to (not visited yet).
async fn through_idp(app: &TestApp, browser: &Browser, slug: &str) -> String {
    let res = start(browser, slug, None).await;
    assert_eq!(res.status(), 303, "start");
    let authorize = location(&res);
    // The provider is another site: the browser's workbench cookies do not go there.
    let res = app.http().get(authorize.as_str()).send().await.unwrap();
    let status = res.status();
    if status != 302 {
        let body = res.text().await.unwrap_or_default();
        panic!("the provider's authorization endpoint ({authorize}) answered {status}: {body}");
    }
    let callback = location(&res);
    assert!(
        callback.starts_with(&app.url(&format!("/sso/{slug}/callback?"))),
        "{callback}"
    );
    callback
}

/// Starts a sign-in through `slug` as the sign-in page's button does (a form POST from our
/// origin, which the browser client sends on every request).
async fn start(browser: &Browser, slug: &str, next: Option<&str>) -> reqwest::Response {
    let form: Vec<(&str, &str)> = next.map(|n| ("next", n)).into_iter().collect();
    browser
        .client
        .post(format!("{}/sso/{slug}/start", browser.base))
        .form(&form)
        .send()
        .await
        .unwrap()
}

/// Visits `url` in `browser` (its cookies), as following a redirect does.
async fn visit(browser: &Browser, url: &str) -> reqwest::Response {
    browser
        .client
        .get(url)
        .header(
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .send()
        .await
        .unwrap()
}

/// Signs in through provider `slug` in `browser`: start, provider, callback. The callback's
/// answer.
pub(crate) async fn sso_sign_in(app: &TestApp, browser: &Browser, slug: &str) -> reqwest::Response {
    let callback = through_idp(app, browser, slug).await;
    visit(browser, &callback).await
}

/// Asserts that `res` (a callback's answer) signed the person in: 303 to `next`.
pub(crate) fn assert_landed(app: &TestApp, res: &reqwest::Response, next: &str) {
    assert_eq!(res.status(), 303, "the callback redirects");
    let to = target(app, res);
    assert!(
        to.query_pairs().all(|(k, _)| k != "sso_error"),
        "the sign-in was refused: {to}"
    );
    assert_eq!(to.path(), next, "{to}");
}

/// Asserts that `res` refused a sign-in (303 to /login?sso_error=...): the message.
pub(crate) fn refusal(app: &TestApp, res: &reqwest::Response, what: &str) -> String {
    assert_eq!(res.status(), 303, "{what}: the callback redirects");
    let to = target(app, res);
    assert_eq!(to.path(), "/login", "{what}: {to}");
    let message = to
        .query_pairs()
        .find(|(k, _)| k == "sso_error")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("{what}: no sso_error in {to}"));
    assert!(!message.is_empty(), "{what}: the refusal says why");
    message
}

/// Whether `browser` holds a signed-in portal session: the home page answers instead of
/// sending it to /login.
async fn signed_in(browser: &Browser) -> bool {
    let res = browser.get("/").await;
    match res.status().as_u16() {
        200 => true,
        303 => {
            let to = location(&res);
            assert!(to.starts_with("/login"), "{to}");
            false
        }
        other => panic!("GET / answered {other}"),
    }
}

/// A new API key made in the portal by whoever `browser` is signed in as: its secret.
pub(crate) async fn portal_key(browser: &Browser) -> String {
    let res = browser.call("create_api_key", &[("name", "laptop")]).await;
    assert_eq!(res.status(), 200);
    let created: Value = res.json().await.unwrap();
    created["secret"].as_str().unwrap().to_owned()
}

async fn me(app: &TestApp, key: &str) -> (u16, Value) {
    rest(app, key, "GET", "/v1/me", Value::Null).await
}

/// A REST call of `tool`: (status, body).
async fn invoke(app: &TestApp, key: &str, tool: &str, args: Value) -> (u16, Value) {
    rest(
        app,
        key,
        "POST",
        "/v1/tools/invoke",
        json!({ "tool": tool, "arguments": args }),
    )
    .await
}

async fn user_exists(app: &TestApp, email: &str) -> bool {
    store::users::by_email(app.wb.db().pool(), email)
        .await
        .unwrap()
        .is_some()
}

db_test!(
    a_person_in_a_mapped_group_signs_in_with_its_role_and_its_policy_caps_every_key,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        idp.set_person(Person::new("idp-bo", "bo@example.com", &["staff", "eng"]));
        // The sign-in page offers the provider.
        let html = app.browser().get("/login").await.text().await.unwrap();
        assert!(html.contains("data-testid=\"sso-acme\""), "{html}");
        assert!(
            html.contains("Sign in with") && html.contains("Acme"),
            "{html}"
        );
        assert!(html.contains("/sso/acme/start"), "{html}");

        let b = app.browser();
        let res = start(&b, "acme", Some("/api-keys")).await;
        assert_eq!(res.status(), 303);
        let authorize = location(&res);
        assert!(
            authorize.starts_with(&idp.url("/authorize?")),
            "{authorize}"
        );
        let asked: HashMap<String, String> = url::Url::parse(&authorize)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(asked["response_type"], "code");
        assert_eq!(asked["client_id"], CLIENT_ID);
        assert_eq!(asked["redirect_uri"], app.url("/sso/acme/callback"));
        let mut scopes: Vec<&str> = asked["scope"].split(' ').collect();
        scopes.sort_unstable();
        assert_eq!(scopes, ["email", "groups", "openid", "profile"]);
        assert_eq!(asked["code_challenge_method"], "S256");
        for p in ["state", "nonce", "code_challenge"] {
            assert!(
                asked.get(p).is_some_and(|v| v.len() >= 16),
                "{p}: {asked:?}"
            );
        }
        let res = app.http().get(authorize.as_str()).send().await.unwrap();
        assert_eq!(res.status(), 302);
        let res = visit(&b, &location(&res)).await;
        assert_landed(app, &res, "/api-keys");
        // The code was exchanged with the secret (HTTP Basic) and the PKCE verifier, which the
        // provider checked against the challenge.
        let (authorization, form) = idp.last_token_request();
        assert!(authorization.unwrap_or_default().starts_with("Basic "));
        assert!(form.contains_key("code_verifier"), "{form:?}");
        assert!(!form.contains_key("client_secret"), "{form:?}");
        assert!(signed_in(&b).await);

        // A key the person makes has no policy of its own, but their groups' policy applies.
        let key = portal_key(&b).await;
        let (status, who) = me(app, &key).await;
        assert_eq!(status, 200, "{who}");
        assert_eq!(who["email"], "bo@example.com");
        assert_eq!(who["role"], "member");
        assert_eq!(who["project"]["name"], "default");
        assert_eq!(who["policy_id"], Value::Null, "{who}");
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");
        let put = json!({ "key": "k", "content": "v" });
        let (status, out) = invoke(app, &key, "storage.put", put.clone()).await;
        assert_eq!(status, 403, "{out}");
        assert_eq!(out["error"]["code"], "tool_not_allowed", "{out}");
        let out = execute(app, &key, json!([{ "tool": "storage.put", "args": put }])).await;
        assert_eq!(out[0]["code"], "NOT_ALLOWED", "{}", out[0]);
        let (status, out) = invoke(app, &key, "vault_list", json!({})).await;
        assert_eq!(status, 200, "a tool the policy allows runs: {out}");
        // The project itself allows storage.put: the admin, not capped, may call it.
        let (status, out) = invoke(app, &s.admin, "storage.put", put).await;
        assert_eq!(status, 200, "{out}");

        // The account made for the person has no password.
        let res = app.browser().sign_in("bo@example.com", PASSWORD).await;
        assert!(!res.status().is_success());
        let body = res.text().await.unwrap();
        assert!(body.contains("invalid email or password"), "{body}");
    }
);

db_test!(
    a_person_in_no_mapped_group_is_refused_and_the_preview_says_who_gets_in,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp, admin) = (&s.app, &s.idp, &s.admin);
        idp.set_person(Person::new("idp-dee", "dee@example.com", &["sales"]));
        let b = app.browser();
        let res = sso_sign_in(app, &b, SLUG).await;
        refusal(app, &res, "no mapped group");
        assert!(!signed_in(&b).await);
        assert!(!user_exists(app, "dee@example.com").await);
        // The sign-in page shows why.
        let to = target(app, &res);
        let page = b
            .get(&format!("{}?{}", to.path(), to.query().unwrap()))
            .await;
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.contains("data-testid=\"sso-error\""), "{html}");

        assert_eq!(
            preview(app, admin, &["sales"]).await,
            json!({ "object": "sso_preview", "signs_in": false, "role": null, "policy_id": null, "matched": null })
        );
        assert_eq!(
            preview(app, admin, &["sales", "eng"]).await,
            json!({ "object": "sso_preview", "signs_in": true, "role": "member", "policy_id": s.eng_policy, "matched": "eng" })
        );
        // The first mapping the person is in decides, whatever the order of their groups.
        assert_eq!(
            preview(app, admin, &["eng", "wb-admins"]).await,
            json!({ "object": "sso_preview", "signs_in": true, "role": "admin", "policy_id": null, "matched": "wb-admins" })
        );
        // An unknown provider is refused the same way.
        let res = start(&app.browser(), "nope", None).await;
        refusal(app, &res, "unknown provider");
    }
);

db_test!(
    a_groups_claim_sent_as_one_string_counts_as_one_group_and_a_missing_one_as_none,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        idp.set_person(
            Person::new("idp-ivy", "ivy@example.com", &[]).with_groups_claim(Some(json!("eng"))),
        );
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let (_, who) = me(app, &portal_key(&b).await).await;
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");

        idp.set_person(Person::new("idp-jo", "jo@example.com", &[]).with_groups_claim(None));
        let b = app.browser();
        refusal(app, &sso_sign_in(app, &b, SLUG).await, "no groups claim");
        assert!(!signed_in(&b).await);
        assert!(!user_exists(app, "jo@example.com").await);
    }
);

db_test!(
    a_person_in_no_mapped_group_gets_the_default_role_and_policy_when_there_is_one,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp, admin) = (&s.app, &s.idp, &s.admin);
        let reads = policy(
            app,
            admin,
            "reads",
            json!({ "mode": "allowlist", "allow": ["vault_list"] }),
        )
        .await;
        let mut body = provider_body(idp, &s.eng_policy);
        body["default_role"] = json!("member");
        body["default_policy_id"] = json!(reads);
        let (status, out) = put_provider(app, admin, SLUG, body).await;
        assert_eq!(status, 200, "replaced: {out}");
        assert_eq!(out["default_policy_id"], reads.as_str());
        assert_eq!(
            preview(app, admin, &["sales"]).await,
            json!({ "object": "sso_preview", "signs_in": true, "role": "member", "policy_id": reads, "matched": null })
        );

        idp.set_person(Person::new("idp-lu", "lu@example.com", &["sales"]));
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let key = portal_key(&b).await;
        let (_, who) = me(app, &key).await;
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], reads.as_str(), "{who}");
        assert_eq!(invoke(app, &key, "vault_list", json!({})).await.0, 200);
        let (status, out) = invoke(app, &key, "storage.get", json!({ "key": "k" })).await;
        assert_eq!(status, 403, "{out}");
    }
);

db_test!(
    the_mapping_is_applied_again_at_every_sign_in_and_changes_what_earlier_keys_may_do,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        let kim = Person::new("idp-kim", "kim@example.com", &["eng", "wb-admins"]);
        idp.set_person(kim.clone());
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let key = portal_key(&b).await;
        let (_, who) = me(app, &key).await;
        assert_eq!(who["role"], "admin", "the first mapping decides: {who}");
        assert_eq!(who["user_policy_id"], Value::Null, "{who}");
        let (status, out) = rest(app, &key, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(status, 200, "an admin manages providers: {out}");

        // Out of the admins group: the next sign-in makes them a capped member, keys included.
        idp.set_person(kim.in_groups(&["eng"]));
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let (_, who) = me(app, &key).await;
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");
        let (status, out) = rest(app, &key, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(status, 403, "{out}");
        let (status, out) = invoke(
            app,
            &key,
            "storage.put",
            json!({ "key": "k", "content": "v" }),
        )
        .await;
        assert_eq!(status, 403, "{out}");
    }
);

db_test!(
    a_person_removed_from_the_group_is_refused_next_time_and_their_keys_stop_working,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        let eve = Person::new("idp-eve", "eve@example.com", &["eng"]);
        idp.set_person(eve.clone());
        let first = app.browser();
        assert_landed(app, &sso_sign_in(app, &first, SLUG).await, "/");
        let key = portal_key(&first).await;
        assert_eq!(me(app, &key).await.0, 200);
        assert_eq!(invoke(app, &key, "vault_list", json!({})).await.0, 200);

        idp.set_person(eve.clone().in_groups(&["sales"]));
        let again = app.browser();
        let res = sso_sign_in(app, &again, SLUG).await;
        refusal(app, &res, "no longer in a mapped group");
        assert!(!signed_in(&again).await);
        // The membership the provider gave is gone: the earlier key and session are no use.
        let (status, out) = me(app, &key).await;
        assert_eq!(status, 401, "{out}");
        assert_eq!(invoke(app, &key, "vault_list", json!({})).await.0, 401);
        assert!(!signed_in(&first).await);
        // Revoked, as removing a member revokes: mapped again later, the old key stays dead.
        idp.set_person(eve.clone());
        let back = app.browser();
        assert_landed(app, &sso_sign_in(app, &back, SLUG).await, "/");
        assert_eq!(
            me(app, &key).await.0,
            401,
            "the key came back with the membership"
        );
        assert_eq!(me(app, &portal_key(&back).await).await.0, 200);
    }
);

db_test!(
    a_sign_in_after_the_provider_rotates_its_key_fetches_the_keys_again,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        idp.set_person(Person::new("idp-fay", "fay@example.com", &["eng"]));
        let first = app.browser();
        assert_landed(app, &sso_sign_in(app, &first, SLUG).await, "/");
        let fetched = idp.jwks_requests();
        assert!(fetched >= 1);

        let old = idp.current_kid();
        idp.rotate_key();
        assert_ne!(idp.current_kid(), old);
        // Keys are fetched again for an unknown key id, though not more than every few seconds.
        app.clock.advance_ms(60_000);
        let second = app.browser();
        assert_landed(app, &sso_sign_in(app, &second, SLUG).await, "/");
        assert!(signed_in(&second).await);
        assert!(idp.jwks_requests() > fetched, "the key set was read again");
    }
);

db_test!(
    every_tampered_id_token_is_refused_and_signs_no_one_in,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        idp.set_person(Person::new("idp-gus", "gus@example.com", &["eng"]));
        for how in [
            Tamper::WrongAudience,
            Tamper::WrongIssuer,
            Tamper::WrongNonce,
            Tamper::Expired,
            Tamper::UnknownKey,
            Tamper::ForgedKid,
            Tamper::Hs256,
            Tamper::AlgNone,
        ] {
            let what = format!("{how:?}");
            let issued = idp.id_tokens_issued();
            idp.tamper_next(how);
            let b = app.browser();
            let res = sso_sign_in(app, &b, SLUG).await;
            assert_eq!(
                idp.id_tokens_issued(),
                issued + 1,
                "{what}: the provider issued the token"
            );
            refusal(app, &res, &what);
            assert!(!signed_in(&b).await, "{what}");
            assert!(!user_exists(app, "gus@example.com").await, "{what}");
        }
        // The same person with a sound token signs in.
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        assert!(signed_in(&b).await);
    }
);

db_test!(
    a_callback_works_once_and_only_in_the_browser_that_started_the_sign_in,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        idp.set_person(Person::new("idp-hal", "hal@example.com", &["eng"]));
        let started = app.browser();
        let callback = through_idp(app, &started, SLUG).await;
        let exchanges = idp.token_requests();

        // Login CSRF: another browser, with no sign-in under way, is handed the callback.
        let other = app.browser();
        let res = visit(&other, &callback).await;
        refusal(app, &res, "a browser that started no sign-in");
        assert!(!signed_in(&other).await);
        // Nor does one whose own sign-in is under way (another state) accept it.
        let busy = app.browser();
        through_idp(app, &busy, SLUG).await;
        let res = visit(&busy, &callback).await;
        refusal(app, &res, "a browser with another sign-in under way");
        assert!(!signed_in(&busy).await);
        assert_eq!(
            idp.token_requests(),
            exchanges,
            "no code was exchanged for them"
        );
        assert!(!user_exists(app, "hal@example.com").await);

        // The browser that started it signs in, once.
        let res = visit(&started, &callback).await;
        assert_landed(app, &res, "/");
        assert!(signed_in(&started).await);
        assert_eq!(idp.token_requests(), exchanges + 1);
        let res = visit(&started, &callback).await;
        refusal(app, &res, "the same callback again");
        assert_eq!(
            idp.token_requests(),
            exchanges + 1,
            "a used state is refused before any exchange"
        );
    }
);

db_test!(
    an_existing_account_is_linked_only_when_the_provider_verified_the_email,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        let cy = app.user("cy@example.com", Role::Member).await;
        let cy_key = app.api_key(&cy).await;
        let person = Person::new("idp-cy", "cy@example.com", &["eng"]);

        idp.set_person(person.clone().verified(false));
        let b = app.browser();
        let message = refusal(app, &sso_sign_in(app, &b, SLUG).await, "unverified email");
        assert!(message.contains("verified"), "{message}");
        assert!(!signed_in(&b).await);
        // The account is as it was: same role, no cap, and the password still signs in.
        let (_, who) = me(app, &cy_key).await;
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], Value::Null, "{who}");
        let m = store::projects::membership(app.wb.db().pool(), &cy.project_id, &cy.user_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((m.role.as_str(), m.policy_id), ("member", None));
        let res = app.browser().sign_in("cy@example.com", PASSWORD).await;
        assert!(res.status().is_success(), "{}", res.status());

        // Verified: the same account, now with the mapping applied.
        idp.set_person(person);
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let (_, who) = me(app, &portal_key(&b).await).await;
        assert_eq!(
            who["id"],
            cy.user_id.as_str(),
            "linked, not a new account: {who}"
        );
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");

        // From now on the subject finds the account, whatever email the provider sends.
        idp.set_person(Person::new("idp-cy", "cy.renamed@example.com", &["eng"]).verified(false));
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let (_, who) = me(app, &portal_key(&b).await).await;
        assert_eq!(who["id"], cy.user_id.as_str(), "{who}");
    }
);

db_test!(
    an_sso_session_ends_after_recheck_minutes_and_the_next_sign_in_maps_again,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp, admin) = (&s.app, &s.idp, &s.admin);
        let mut body = provider_body(idp, &s.eng_policy);
        body["recheck_minutes"] = json!(5);
        let (status, out) = put_provider(app, admin, SLUG, body).await;
        assert_eq!(status, 200, "{out}");
        let lee = Person::new("idp-lee", "lee@example.com", &["eng"]);
        idp.set_person(lee.clone());
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let ada = app.browser();
        assert!(ada
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());

        app.clock.advance_ms(4 * 60_000);
        assert!(signed_in(&b).await, "within recheck_minutes");
        app.clock.advance_ms(2 * 60_000);
        assert!(
            !signed_in(&b).await,
            "after recheck_minutes: through the provider again"
        );
        assert!(signed_in(&ada).await, "a password session is not cut short");

        // The next sign-in applies the groups as they are now.
        idp.set_person(lee.in_groups(&["sales"]));
        refusal(
            app,
            &sso_sign_in(app, &b, SLUG).await,
            "no longer in a mapped group",
        );
        assert!(!signed_in(&b).await);
    }
);

db_test!(
    with_password_sign_in_off_only_break_glass_accounts_use_a_password,
    |backend| {
        let app = app!(
            backend,
            Options {
                password_sign_in_off: true,
                ..Default::default()
            }
        );
        app.user("ada@example.com", Role::Admin).await;
        app.user("root@example.com", Role::Admin).await;
        app.wb
            .accounts()
            .set_break_glass("root@example.com", true)
            .await
            .unwrap();

        let b = app.browser();
        let res = b.sign_in("ada@example.com", PASSWORD).await;
        assert!(!res.status().is_success(), "{}", res.status());
        let body = res.text().await.unwrap();
        assert!(body.contains("password sign-in is turned off"), "{body}");
        assert!(!signed_in(&b).await);
        // A wrong password answers as it always does.
        let body = b
            .sign_in("ada@example.com", "not the password")
            .await
            .text()
            .await
            .unwrap();
        assert!(body.contains("invalid email or password"), "{body}");

        let root = app.browser();
        let res = root.sign_in("root@example.com", PASSWORD).await;
        assert!(res.status().is_success(), "{}", res.status());
        assert!(signed_in(&root).await);
        let body = app
            .browser()
            .sign_in("root@example.com", "not the password")
            .await
            .text()
            .await
            .unwrap();
        assert!(body.contains("invalid email or password"), "{body}");

        // The sign-in page keeps the password form behind the break-glass link.
        let html = app.browser().get("/login").await.text().await.unwrap();
        assert!(html.contains("data-testid=\"break-glass\""), "{html}");
        let html = app
            .browser()
            .get("/login?break_glass=1")
            .await
            .text()
            .await
            .unwrap();
        assert!(html.contains("action=\"/api/sign_in\""), "{html}");

        // No longer break-glass: refused like everyone else.
        app.wb
            .accounts()
            .set_break_glass("root@example.com", false)
            .await
            .unwrap();
        let body = app
            .browser()
            .sign_in("root@example.com", PASSWORD)
            .await
            .text()
            .await
            .unwrap();
        assert!(body.contains("password sign-in is turned off"), "{body}");
    }
);

db_test!(
    registering_a_provider_checks_discovery_and_the_body_and_never_shows_the_secret,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, admin) = admin_with_key(&app).await;
        store_client_secret(&app, &admin).await;
        let eng = policy(&app, &admin, "eng", json!({ "mode": "open" })).await;
        let idp = sso_idp::start(app.clock.clone()).await;
        let good = provider_body(&idp, &eng);

        // Discovery naming another issuer, or none to be had: 422, nothing stored (every
        // registration problem is 422 invalid_request in this API).
        let impostor = sso_idp::start(app.clock.clone()).await;
        impostor.set_discovery_issuer("https://login.attacker.example");
        let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for (what, issuer) in [
            ("another issuer", impostor.issuer()),
            ("unreachable", format!("http://127.0.0.1:{closed_port}")),
        ] {
            let mut body = good.clone();
            body["issuer"] = json!(issuer);
            let (status, out) = put_provider(&app, &admin, SLUG, body).await;
            assert_eq!(status, 422, "{what}: {out}");
            assert_eq!(out["error"]["code"], "invalid_request", "{what}: {out}");
        }
        assert!(impostor.discovery_requests() >= 1);

        // Bad bodies: 422 too.
        let unknown_policy = "pol_doesnotexist000000";
        for (what, change) in [
            (
                "scopes without openid",
                json!({ "scopes": ["email", "profile"] }),
            ),
            (
                "an unknown policy in a mapping",
                json!({ "mappings": [{ "group": "eng", "role": "member", "policy_id": unknown_policy }] }),
            ),
            (
                "an unknown default policy",
                json!({ "default_policy_id": unknown_policy }),
            ),
            (
                "an unknown role",
                json!({ "mappings": [{ "group": "eng", "role": "owner", "policy_id": null }] }),
            ),
            (
                "an unknown default role",
                json!({ "default_role": "owner" }),
            ),
            (
                "a secret instead of a reference",
                json!({ "client_secret_ref": CLIENT_SECRET }),
            ),
            (
                "a vault secret that does not exist",
                json!({ "client_secret_ref": "vault:NO_SUCH_SECRET" }),
            ),
            (
                "another provider's environment variable",
                json!({ "client_secret_ref": "env:WB_SSO_OTHER_SECRET" }),
            ),
            (
                "any other environment variable",
                json!({ "client_secret_ref": "env:WB_MASTER_KEY" }),
            ),
            (
                "an admin capped by a policy",
                json!({ "mappings": [{ "group": "eng", "role": "admin", "policy_id": eng }] }),
            ),
            ("recheck_minutes too short", json!({ "recheck_minutes": 4 })),
            (
                "recheck_minutes too long",
                json!({ "recheck_minutes": 1441 }),
            ),
            (
                "an unknown field",
                json!({ "client_secret": CLIENT_SECRET }),
            ),
        ] {
            let mut body = good.clone();
            for (k, v) in change.as_object().unwrap() {
                body[k] = v.clone();
            }
            let (status, out) = put_provider(&app, &admin, SLUG, body).await;
            assert_eq!(status, 422, "{what}: {out}");
            assert_eq!(out["error"]["code"], "invalid_request", "{what}: {out}");
            assert!(!out.to_string().contains(CLIENT_SECRET), "{what}: {out}");
        }
        let long = "x".repeat(49);
        for slug in ["Acme", "a_b", long.as_str()] {
            let (status, out) = put_provider(&app, &admin, slug, good.clone()).await;
            assert_eq!(status, 422, "slug {slug:?}: {out}");
        }
        let (status, list) = rest(&app, &admin, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(list, json!({ "object": "list", "data": [] }));

        // Only an admin key without a policy manages providers.
        let member = app.user("bo@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        let (status, limited) = rest(
            &app,
            &admin,
            "POST",
            "/v1/api-keys",
            json!({ "name": "agent", "policy_id": eng }),
        )
        .await;
        assert_eq!(status, 201, "{limited}");
        let limited = limited["key"].as_str().unwrap().to_owned();
        for (who, key) in [("a member", &member_key), ("a key with a policy", &limited)] {
            let (status, out) = put_provider(&app, key, SLUG, good.clone()).await;
            assert_eq!(status, 403, "{who}: {out}");
            assert_eq!(out["error"]["code"], "forbidden", "{who}: {out}");
            let (status, _) = rest(&app, key, "GET", "/v1/sso/providers", Value::Null).await;
            assert_eq!(status, 403, "{who}");
        }
        let (status, list) = rest(&app, &admin, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!((status, list["data"].clone()), (200, json!([])));

        // Created, then replaced.
        let (status, created) = put_provider(&app, &admin, SLUG, good.clone()).await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["object"], "sso_provider");
        assert_eq!(created["slug"], SLUG);
        assert_eq!(created["issuer"], idp.issuer());
        assert_eq!(created["client_id"], CLIENT_ID);
        assert_eq!(created["client_secret_ref"], "vault:OIDC_SECRET");
        assert_eq!(created["mappings"], good["mappings"]);
        assert_eq!(created["default_role"], Value::Null);
        assert_eq!(created["recheck_minutes"], 60);
        assert_eq!(created["redirect_uri"], app.url("/sso/acme/callback"));
        assert!(!created.to_string().contains(CLIENT_SECRET), "{created}");
        let mut renamed = good;
        renamed["name"] = json!("Acme SSO");
        let (status, replaced) = put_provider(&app, &admin, SLUG, renamed).await;
        assert_eq!(status, 200, "{replaced}");
        assert_eq!(replaced["name"], "Acme SSO");
        assert_eq!(replaced["created_at"], created["created_at"]);
        // Defaults for what a registration leaves out.
        let (status, minimal) = put_provider(
            &app,
            &admin,
            "min",
            json!({ "name": "Min", "issuer": idp.issuer(), "client_id": CLIENT_ID, "client_secret_ref": "vault:OIDC_SECRET" }),
        )
        .await;
        assert_eq!(status, 201, "{minimal}");
        assert_eq!(minimal["scopes"], json!(["openid", "email", "profile"]));
        assert_eq!(minimal["groups_claim"], "groups");
        assert_eq!(minimal["mappings"], json!([]));
        assert_eq!(minimal["default_role"], Value::Null);
        assert_eq!(minimal["default_policy_id"], Value::Null);

        let (status, list) = rest(&app, &admin, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(status, 200);
        assert_eq!(list["data"].as_array().unwrap().len(), 2, "{list}");
        assert!(!list.to_string().contains(CLIENT_SECRET), "{list}");
        let (status, _) = rest(&app, &admin, "DELETE", "/v1/sso/providers/min", Value::Null).await;
        assert_eq!(status, 204);
        let (status, out) =
            rest(&app, &admin, "DELETE", "/v1/sso/providers/min", Value::Null).await;
        assert_eq!(status, 404, "{out}");
        assert_eq!(out["error"]["code"], "not_found");
        let (_, list) = rest(&app, &admin, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(list["data"][0]["slug"], SLUG, "{list}");
        assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    }
);

db_test!(
    the_sso_page_lists_providers_with_their_mappings_and_never_the_secret,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let app = &s.app;
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let res = b.get("/sso").await;
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        assert_eq!(
            html.matches("data-testid=\"sso-provider\"").count(),
            1,
            "{html}"
        );
        assert_eq!(
            html.matches("data-testid=\"sso-mapping\"").count(),
            2,
            "{html}"
        );
        assert!(html.contains(&s.idp.issuer()), "{html}");
        assert!(html.contains(&app.url("/sso/acme/callback")), "{html}");
        assert!(
            html.contains("data-testid=\"sso-preview-groups\""),
            "{html}"
        );
        assert!(!html.contains(CLIENT_SECRET));
    }
);

// The background re-check (refresh tokens, offline_access).

/// The `recheck_minutes` the re-check tests register their provider with.
const RECHECK_MINUTES: i64 = 5;
const MINUTE_MS: i64 = 60_000;

/// Registers the test provider again with a re-check every RECHECK_MINUTES, and `scopes`.
async fn reregister(s: &Sso, scopes: Value) {
    let mut body = provider_body(&s.idp, &s.eng_policy);
    body["scopes"] = scopes;
    body["recheck_minutes"] = json!(RECHECK_MINUTES);
    let (status, out) = put_provider(&s.app, &s.admin, SLUG, body).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["recheck_minutes"], RECHECK_MINUTES, "{out}");
}

/// Registers the test provider again asking for offline_access (refresh tokens), re-checked
/// every RECHECK_MINUTES.
async fn with_offline_access(s: &Sso) {
    reregister(
        s,
        json!(["openid", "email", "profile", "groups", "offline_access"]),
    )
    .await;
}

/// Signs `person` in through the provider in a new browser: an API key they make in the portal.
async fn signed_in_key(s: &Sso, person: Person) -> String {
    s.idp.set_person(person);
    let b = s.app.browser();
    assert_landed(&s.app, &sso_sign_in(&s.app, &b, SLUG).await, "/");
    portal_key(&b).await
}

/// One round of the background re-check, as the server's upkeep runs it: (checked, ended).
async fn recheck(app: &TestApp) -> (usize, usize) {
    let done = app
        .wb
        .sso()
        .recheck_due()
        .await
        .expect("a round of re-checks");
    (done.checked, done.ended)
}

/// The refresh token the last token request presented, asserting that it was a refresh that
/// authenticated the client with HTTP Basic (no secret in the form), as the code exchange does.
fn last_refresh_request(idp: &FakeIdp) -> String {
    let (authorization, form) = idp.last_token_request();
    assert_eq!(
        form.get("grant_type").map(String::as_str),
        Some("refresh_token"),
        "{form:?}"
    );
    assert!(
        authorization.unwrap_or_default().starts_with("Basic "),
        "client authentication as at the code exchange"
    );
    assert!(!form.contains_key("client_secret"), "{form:?}");
    form.get("refresh_token").cloned().unwrap_or_default()
}

/// The rows of sso_identities, by subject.
async fn stored_identities(app: &TestApp) -> Vec<StoredIdentity> {
    store::testing::sso_identities(app.wb.db()).await.unwrap()
}

/// Asserts that `stored` holds `token` sealed: a ciphertext, its nonce and key version, and
/// the token nowhere in clear (nor merely base64-encoded).
fn assert_sealed(stored: &StoredIdentity, token: &str) {
    let ciphertext = stored
        .refresh_ciphertext
        .as_deref()
        .unwrap_or_else(|| panic!("no refresh token kept: {stored:?}"));
    assert!(!ciphertext.is_empty(), "{stored:?}");
    assert_ne!(ciphertext, token);
    assert!(
        stored
            .refresh_nonce
            .as_deref()
            .is_some_and(|n| !n.is_empty()),
        "{stored:?}"
    );
    assert!(stored.refresh_key_version.is_some(), "{stored:?}");
    let encodings = [
        token.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(token),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token),
    ];
    assert!(
        stored.texts.len() >= 3,
        "the text columns were read: {stored:?}"
    );
    for text in &stored.texts {
        for clear in &encodings {
            assert!(
                !text.contains(clear.as_str()),
                "the refresh token is kept in clear: {stored:?}"
            );
        }
    }
}

db_test!(
    a_person_disabled_at_the_provider_loses_access_at_the_first_recheck_after_recheck_minutes,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        with_offline_access(&s).await;
        let key = signed_in_key(&s, Person::new("idp-nia", "nia@example.com", &["eng"])).await;
        // Workbench asked for offline_access, so the provider handed out a refresh token.
        let issued = idp
            .last_refresh_token()
            .expect("a refresh token at the code exchange");
        assert_eq!(me(app, &key).await.0, 200);

        // Disabled at the provider: nothing asks the provider within recheck_minutes.
        idp.disable("idp-nia");
        assert_eq!(recheck(app).await, (0, 0), "just signed in");
        app.clock.advance_ms((RECHECK_MINUTES - 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (0, 0), "within recheck_minutes");
        assert_eq!(idp.refresh_requests(), 0, "no refresh request yet");
        assert_eq!(me(app, &key).await.0, 200, "not re-checked yet");

        // The first round after recheck_minutes asks, is refused, and ends the membership.
        app.clock.advance_ms(2 * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 1), "re-checked, membership ended");
        assert_eq!(idp.refresh_requests(), 1);
        assert_eq!(last_refresh_request(idp), issued);
        let (status, out) = me(app, &key).await;
        assert_eq!(status, 401, "{out}");
        assert_eq!(invoke(app, &key, "vault_list", json!({})).await.0, 401);
        // The admin, who signs in with a password, is not affected.
        assert_eq!(me(app, &s.admin).await.0, 200);
    }
);

db_test!(
    a_person_whose_groups_change_at_the_provider_gets_the_new_mapping_at_the_recheck,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        with_offline_access(&s).await;
        let kim = Person::new("idp-kim", "kim@example.com", &["wb-admins"]);
        let key = signed_in_key(&s, kim.clone()).await;
        let (_, who) = me(app, &key).await;
        assert_eq!(who["role"], "admin", "{who}");
        assert_eq!(who["user_policy_id"], Value::Null, "{who}");
        let first = idp.last_refresh_token().expect("a refresh token");

        // Moved from the admins to eng at the provider: the re-check applies it, no sign-in
        // needed. The refreshed ID token carries no nonce.
        idp.set_person(kim.clone().in_groups(&["eng"]));
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 0), "re-checked, still a member");
        assert_eq!(last_refresh_request(idp), first);
        let (status, who) = me(app, &key).await;
        assert_eq!(status, 200, "{who}");
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");
        let (status, out) = rest(app, &key, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(status, 403, "no longer an admin: {out}");
        let (status, out) = invoke(
            app,
            &key,
            "storage.put",
            json!({ "key": "k", "content": "v" }),
        )
        .await;
        assert_eq!(status, 403, "capped by eng's policy now: {out}");
        // The provider rotated the refresh token; the re-check counts as the last check.
        let second = idp.last_refresh_token().unwrap();
        assert_ne!(second, first);
        assert!(!idp.refresh_token_works(&first));
        assert_eq!(recheck(app).await, (0, 0), "checked just now");
        assert_eq!(idp.refresh_requests(), 1);

        // Out of every mapped group: the next re-check, with the new token (the old one no
        // longer works), ends the membership.
        idp.set_person(kim.in_groups(&["sales"]));
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 1), "re-checked, membership ended");
        assert_eq!(
            last_refresh_request(idp),
            second,
            "the rotated token was kept"
        );
        let (status, out) = me(app, &key).await;
        assert_eq!(status, 401, "{out}");
    }
);

db_test!(
    a_provider_that_cannot_answer_changes_nothing_and_the_next_recheck_after_it_recovers_applies,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        with_offline_access(&s).await;
        let key = signed_in_key(&s, Person::new("idp-oz", "oz@example.com", &["eng"])).await;
        let token = idp.last_refresh_token().expect("a refresh token");

        // Disabled, but the provider's token endpoint is down (503): no one is locked out.
        idp.disable("idp-oz");
        idp.set_refresh_unavailable(true);
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await.1, 0, "nothing ended");
        assert_eq!(idp.refresh_requests(), 1, "the provider was asked");
        let (status, who) = me(app, &key).await;
        assert_eq!(status, 200, "{who}");
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");
        // Asked again at the next round, without waiting another recheck_minutes.
        assert_eq!(recheck(app).await.1, 0);
        assert_eq!(idp.refresh_requests(), 2, "tried again at the next round");
        assert_eq!(last_refresh_request(idp), token);
        assert_eq!(me(app, &key).await.0, 200);

        // Back up: the next round applies the refusal.
        idp.set_refresh_unavailable(false);
        assert_eq!(recheck(app).await, (1, 1), "re-checked, membership ended");
        assert_eq!(idp.refresh_requests(), 3);
        assert_eq!(last_refresh_request(idp), token);
        let (status, out) = me(app, &key).await;
        assert_eq!(status, 401, "{out}");
    }
);

db_test!(
    a_refresh_answered_without_an_id_token_keeps_the_person_as_they_are_and_keeps_the_new_token,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        with_offline_access(&s).await;
        let ray = Person::new("idp-ray", "ray@example.com", &["eng"]);
        let key = signed_in_key(&s, ray.clone()).await;
        let first = idp.last_refresh_token().expect("a refresh token");

        // Groups that map to nothing, but the answer has no ID token to say so: the grant
        // still holds, nothing changes.
        idp.set_person(ray.in_groups(&["sales"]));
        idp.set_refresh_without_id_token(true);
        let issued = idp.id_tokens_issued();
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 0), "re-checked, still active");
        assert_eq!(idp.id_tokens_issued(), issued, "no ID token was sent");
        assert_eq!(last_refresh_request(idp), first);
        let (status, who) = me(app, &key).await;
        assert_eq!(status, 200, "{who}");
        assert_eq!(who["role"], "member", "{who}");
        assert_eq!(who["user_policy_id"], s.eng_policy.as_str(), "{who}");
        assert_eq!(recheck(app).await, (0, 0), "the answer counts as a check");

        // The token that answer carried replaced the old one, which no longer works.
        let second = idp.last_refresh_token().unwrap();
        assert_ne!(second, first);
        idp.set_refresh_without_id_token(false);
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 1), "the groups map to nothing now");
        assert_eq!(last_refresh_request(idp), second);
        assert_eq!(me(app, &key).await.0, 401);
    }
);

db_test!(
    a_refreshed_id_token_that_fails_validation_changes_nothing,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        with_offline_access(&s).await;
        let max = Person::new("idp-max", "max@example.com", &["wb-admins"]);
        let key = signed_in_key(&s, max.clone()).await;
        // Out of every mapped group: only a sound ID token may say so.
        idp.set_person(max.in_groups(&["sales"]));
        for how in [
            Tamper::WrongAudience,
            Tamper::WrongIssuer,
            Tamper::Expired,
            Tamper::UnknownKey,
            Tamper::ForgedKid,
            Tamper::Hs256,
            Tamper::AlgNone,
        ] {
            let issued = idp.id_tokens_issued();
            idp.tamper_next(how);
            app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
            let (_, ended) = recheck(app).await;
            assert_eq!(
                idp.id_tokens_issued(),
                issued + 1,
                "{how:?}: the provider answered with the spoiled token"
            );
            assert_eq!(ended, 0, "{how:?}");
            let (status, who) = me(app, &key).await;
            assert_eq!(status, 200, "{how:?}: {who}");
            assert_eq!(who["role"], "admin", "{how:?}: {who}");
        }
        // A sound one is applied.
        app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
        assert_eq!(recheck(app).await, (1, 1), "re-checked, membership ended");
        assert_eq!(me(app, &key).await.0, 401);
    }
);

db_test!(the_refresh_token_is_kept_sealed_never_in_clear, |backend| {
    let Some(s) = setup(backend).await else {
        return;
    };
    let (app, idp) = (&s.app, &s.idp);
    with_offline_access(&s).await;
    let key = signed_in_key(&s, Person::new("idp-pia", "pia@example.com", &["eng"])).await;
    let token = idp.last_refresh_token().expect("a refresh token");
    let mut stored = stored_identities(app).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].subject, "idp-pia");
    assert_sealed(&stored[0], &token);
    let before = stored.remove(0);

    // A re-check keeps the rotated token, sealed as well, and records when it checked.
    app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
    assert_eq!(recheck(app).await, (1, 0));
    let rotated = idp.last_refresh_token().unwrap();
    assert_ne!(rotated, token);
    let after = stored_identities(app).await.remove(0);
    assert_sealed(&after, &rotated);
    assert_ne!(after.refresh_ciphertext, before.refresh_ciphertext);
    assert!(
        after.checked_at > before.checked_at,
        "{before:?} then {after:?}"
    );
    assert_eq!(me(app, &key).await.0, 200);
});

db_test!(
    a_provider_registered_without_offline_access_is_never_refreshed,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        reregister(&s, json!(["openid", "email", "profile", "groups"])).await;
        // Like some providers, this one hands out a refresh token though none was asked for.
        idp.set_refresh_tokens_unasked(true);
        let key = signed_in_key(&s, Person::new("idp-quin", "quin@example.com", &["eng"])).await;
        assert_eq!(idp.refresh_tokens_issued(), 1, "sent unasked");
        let token = idp.last_refresh_token().unwrap();
        // Not asked for, so not kept.
        let stored = stored_identities(app).await;
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(stored[0].refresh_ciphertext, None, "{stored:?}");
        assert!(
            stored[0].texts.iter().all(|t| !t.contains(token.as_str())),
            "{stored:?}"
        );

        // Disabled at the provider: without a refresh token the person is checked at their
        // next sign-in only, never in the background.
        idp.disable("idp-quin");
        for _ in 0..3 {
            app.clock.advance_ms((RECHECK_MINUTES + 1) * MINUTE_MS);
            assert_eq!(recheck(app).await, (0, 0));
        }
        assert_eq!(idp.refresh_requests(), 0, "never refreshed");
        assert_eq!(me(app, &key).await.0, 200);
    }
);

db_test!(
    a_provider_of_one_project_cannot_sign_in_an_account_of_another_project,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        // ada (the admin of the first project) and dee, who is in both projects.
        let (other, _) = app
            .wb
            .accounts()
            .create_user("eve@example.com", PASSWORD, Some("other"), Role::Admin)
            .await
            .unwrap();
        assert_ne!(other.email, "ada@example.com");
        let dee = app.user("dee@example.com", Role::Member).await;
        let (_, project) = app
            .wb
            .accounts()
            .create_user("dee2@example.com", PASSWORD, Some("other"), Role::Member)
            .await
            .unwrap();
        store::projects::upsert_membership(
            app.wb.db().pool(),
            &project.id,
            &dee.user_id,
            "member",
            0,
        )
        .await
        .unwrap();
        let eve_key = app
            .wb
            .accounts()
            .create_api_key_for_email("eve@example.com", "eve", None)
            .await
            .unwrap()
            .secret
            .expose()
            .to_owned();
        // eve registers a provider she runs in her project ("other"), which names ada and dee
        // with verified emails: neither account may be signed in through it.
        store_client_secret(app, &eve_key).await;
        let mut body = provider_body(idp, &s.eng_policy);
        body["mappings"] = json!([{ "group": "eng", "role": "admin", "policy_id": null }]);
        let (status, out) = put_provider(app, &eve_key, "evil", body).await;
        assert_eq!(status, 201, "{out}");
        for (sub, email) in [("x-ada", "ada@example.com"), ("x-dee", "dee@example.com")] {
            idp.set_person(Person::new(sub, email, &["eng"]));
            let b = app.browser();
            let message = refusal(app, &sso_sign_in(app, &b, "evil").await, email);
            assert!(message.contains("other workbench projects"), "{message}");
            assert!(
                !signed_in(&b).await,
                "{email} was signed in through another project's provider"
            );
        }
        // Nothing was linked or changed: ada is still the admin of her project only.
        let ada = store::users::by_email(app.wb.db().pool(), "ada@example.com")
            .await
            .unwrap()
            .unwrap();
        let memberships = store::projects::memberships_of_user(app.wb.db().pool(), &ada.id)
            .await
            .unwrap();
        assert_eq!(memberships.len(), 1, "{memberships:?}");
        assert_eq!(memberships[0].role, "admin");
        let linked = stored_identities(app)
            .await
            .into_iter()
            .filter(|i| i.user_id == ada.id)
            .count();
        assert_eq!(linked, 0);
    }
);

db_test!(a_sign_in_cannot_be_started_by_another_site, |backend| {
    let Some(s) = setup(backend).await else {
        return;
    };
    let (app, idp) = (&s.app, &s.idp);
    idp.set_person(Person::new("idp-zed", "zed@example.com", &["eng"]));
    // A page elsewhere posting the sign-in form (or linking to it) leads nowhere: a browser
    // led through someone's provider would otherwise end up signed in as them.
    let res = app
        .http()
        .post(app.url("/sso/acme/start"))
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .form(&[("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = app.browser().get("/sso/acme/start").await;
    assert_eq!(res.status(), 405, "no GET: a link cannot start it");
    assert_eq!(idp.token_requests(), 0);
    assert!(!user_exists(app, "zed@example.com").await);
});

db_test!(
    a_provider_pointed_at_another_issuer_forgets_who_it_signed_in,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp, admin) = (&s.app, &s.idp, &s.admin);
        idp.set_person(Person::new("idp-gil", "gil@example.com", &["eng"]));
        assert_landed(app, &sso_sign_in(app, &app.browser(), SLUG).await, "/");
        let count = || async { stored_identities(app).await.len() };
        assert_eq!(count().await, 1);
        // Renamed only: the identities stay.
        let mut body = provider_body(idp, &s.eng_policy);
        body["name"] = json!("Acme SSO");
        assert_eq!(put_provider(app, admin, SLUG, body).await.0, 200);
        assert_eq!(count().await, 1);
        // Another issuer names other people by the same subjects: forgotten.
        let other = sso_idp::start(app.clock.clone()).await;
        let body = provider_body(&other, &s.eng_policy);
        assert_eq!(put_provider(app, admin, SLUG, body).await.0, 200);
        assert_eq!(count().await, 0);
    }
);

db_test!(
    a_break_glass_account_is_never_linked_to_a_provider,
    |backend| {
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp) = (&s.app, &s.idp);
        app.user("ops@example.com", Role::Admin).await;
        app.wb
            .accounts()
            .set_break_glass("ops@example.com", true)
            .await
            .unwrap();
        idp.set_person(Person::new("idp-ops", "ops@example.com", &["wb-admins"]));
        let b = app.browser();
        let message = refusal(app, &sso_sign_in(app, &b, SLUG).await, "break-glass");
        assert!(message.contains("cannot be linked"), "{message}");
        assert!(!signed_in(&b).await);
        // Its password still works.
        let res = app.browser().sign_in("ops@example.com", PASSWORD).await;
        assert!(res.status().is_success(), "{}", res.status());
    }
);

db_test!(
    a_membership_a_provider_ends_revokes_its_connections_at_the_remote_server,
    |backend| {
        use crate::upstream_sign_in::{
            admin_connects, connect_in, live_upstream_tokens, register, whoami,
        };
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, idp, admin) = (&s.app, &s.idp, &s.admin);
        let up = app!(backend, Options::loopback());
        up.user("ada@upstream.test", Role::Admin).await;
        let carol_up = up.user("carol@upstream.test", Role::Member).await;
        let id = register(app, &up, admin).await;
        admin_connects(app, &up, admin, &id).await;
        // carol signs in through the provider and connects the remote server as herself.
        let carol = Person::new("idp-carol", "carol@example.com", &["eng"]);
        idp.set_person(carol.clone());
        let b = app.browser();
        assert_landed(app, &sso_sign_in(app, &b, SLUG).await, "/");
        let key = portal_key(&b).await;
        connect_in(app, &up, &key, &b, "carol@upstream.test").await;
        let out = whoami(app, &key).await;
        assert_eq!(out["result"]["email"], "carol@upstream.test", "{out}");

        // Out of the mapped groups: the next sign-in ends the membership, and the tokens the
        // remote server issued for her are revoked there, as removing her would.
        idp.set_person(carol.in_groups(&["sales"]));
        refusal(
            app,
            &sso_sign_in(app, &app.browser(), SLUG).await,
            "no mapped group",
        );
        assert_eq!(
            live_upstream_tokens(app, &up, &carol_up).await,
            0,
            "tokens still live upstream after the provider ended the membership"
        );
        // The admin's own connection is untouched.
        let out = whoami(app, admin).await;
        assert_eq!(out["result"]["email"], "ada@upstream.test", "{out}");
    }
);

db_test!(
    sign_in_providers_live_in_the_configuration_file_with_policies_by_name,
    |backend| {
        use crate::config_file::{apply, export_json};
        let Some(s) = setup(backend).await else {
            return;
        };
        let (app, admin) = (&s.app, &s.admin);
        let mut file = export_json(app, admin).await;
        let acme = &file["sign_in_providers"][0];
        assert_eq!(acme["slug"], SLUG, "{file}");
        assert_eq!(acme["client_secret_ref"], "vault:OIDC_SECRET");
        assert_eq!(
            acme["mappings"],
            json!([
                { "group": "wb-admins", "role": "admin" },
                { "group": "eng", "role": "member", "policy": "eng" },
            ]),
            "policies by name: {file}"
        );
        assert!(!file.to_string().contains(CLIENT_SECRET));

        // One file adds a policy and maps a group to it by name.
        file["policies"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "name": "contractors", "tool_allowlist": { "mode": "allowlist", "allow": ["vault_list"] } }));
        file["sign_in_providers"][0]["mappings"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "group": "contractors", "role": "member", "policy": "contractors" }));
        let yaml = file.to_string();
        let (status, out) = apply(app, admin, &yaml, false).await;
        assert_eq!(status, 200, "{out}");
        let diff = out["diff"].as_str().unwrap();
        assert!(diff.contains("+ policy contractors"), "{diff}");
        assert!(diff.contains("~ sign_in_provider acme: mappings"), "{diff}");
        let (_, listed) = rest(app, admin, "GET", "/v1/sso/providers", Value::Null).await;
        let contractors = policy_id_named(app, admin, "contractors").await;
        assert_eq!(
            listed["data"][0]["mappings"][2],
            json!({ "group": "contractors", "role": "member", "policy_id": contractors }),
            "{listed}"
        );
        let (status, again) = apply(app, admin, &yaml, false).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(
            again["changes"],
            json!([]),
            "applying twice changes nothing: {again}"
        );

        // A policy name nothing has refuses the whole file.
        let mut bad = file.clone();
        bad["sign_in_providers"][0]["default_policy"] = json!("nobody");
        bad["egress"] = json!(["api.example.com"]);
        let (status, out) = apply(app, admin, &bad.to_string(), false).await;
        assert_eq!(status, 422, "{out}");
        assert!(out.to_string().contains("no policy is named"), "{out}");
        let (_, now) = rest(app, admin, "GET", "/v1/egress", Value::Null).await;
        assert!(
            !now.to_string().contains("api.example.com"),
            "nothing applied: {now}"
        );

        // Left out of the list, the provider goes (before the policy it maps could).
        let mut gone = file.clone();
        gone["sign_in_providers"] = json!([]);
        let (status, out) = apply(app, admin, &gone.to_string(), false).await;
        assert_eq!(status, 200, "{out}");
        assert!(
            out["diff"]
                .as_str()
                .unwrap()
                .contains("- sign_in_provider acme"),
            "{out}"
        );
        let (_, listed) = rest(app, admin, "GET", "/v1/sso/providers", Value::Null).await;
        assert_eq!(listed["data"], json!([]));
    }
);

/// The id of the project's policy named `name`.
async fn policy_id_named(app: &TestApp, admin: &str, name: &str) -> String {
    let (_, list) = rest(app, admin, "GET", "/v1/policies", Value::Null).await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no policy {name}: {list}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
