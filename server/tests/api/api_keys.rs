//! API keys through the portal: created once-visible, listed, used, revoked.

use serde_json::Value;
use workbench_core::auth::Role;

use crate::helpers::PASSWORD;
use crate::{app, db_test};

db_test!(a_key_created_in_the_portal_works_until_revoked, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let b = app.browser();
    b.sign_in("ada@example.com", PASSWORD).await;
    let res = b.call("create_api_key", &[("name", "laptop")]).await;
    assert_eq!(res.status(), 200);
    let created: Value = res.json().await.unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("wb_") && secret.len() == 43, "{secret}");

    let me = app
        .http()
        .get(app.url("/v1/me"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);

    let page: Value = b.call("api_keys_page", &[]).await.json().await.unwrap();
    let keys = page["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["name"], "laptop");
    assert_eq!(keys[0]["owner"], "ada@example.com");
    assert!(secret.starts_with(keys[0]["prefix"].as_str().unwrap()));
    let listed = serde_json::to_string(&page).unwrap();
    assert!(
        !listed.contains(&secret[10..]),
        "the list never carries the secret"
    );
    // The HTML page does not carry it either, once created.
    let html = b.get("/api-keys").await.text().await.unwrap();
    assert!(html.contains("laptop"));
    assert!(!html.contains(&secret[10..]));

    let id = keys[0]["id"].as_str().unwrap();
    let res = b.call("revoke_api_key", &[("id", id)]).await;
    assert_eq!(res.status(), 200);
    let me = app
        .http()
        .get(app.url("/v1/me"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401);
    let page: Value = b.call("api_keys_page", &[]).await.json().await.unwrap();
    assert!(page["keys"][0]["revoked"].is_string());
});

db_test!(
    without_javascript_the_new_key_is_shown_once_after_the_redirect,
    |backend| {
        let app = app!(backend);
        app.user("ada@example.com", Role::Admin).await;
        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let res = b
            .client
            .post(format!("{}/api/create_api_key", b.base))
            .header("accept", "text/html")
            .header("referer", format!("{}/api-keys", b.base))
            .form(&[("name", "nojs")])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 302);
        let location = res.headers().get("location").unwrap().to_str().unwrap();
        assert!(
            location.starts_with(&format!("{}/api-keys", b.base)),
            "{location}"
        );
        let html = b.get("/api-keys").await.text().await.unwrap();
        let start = html.find("wb_").expect("the new key is on the page");
        let secret: String = html[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        assert_eq!(secret.len(), 43, "{secret}");
        assert_eq!(
            app.http()
                .get(app.url("/v1/me"))
                .bearer_auth(&secret)
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let again = b.get("/api-keys").await.text().await.unwrap();
        assert!(!again.contains(&secret), "shown once only");
    }
);

db_test!(
    members_cannot_see_or_revoke_other_peoples_keys_but_admins_can,
    |backend| {
        let app = app!(backend);
        let ada = app.user("ada@example.com", Role::Admin).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let cat = app.user("cat@example.com", Role::Member).await;
        let bobs = app
            .wb
            .accounts()
            .create_api_key(&bob, "bob's")
            .await
            .unwrap();
        let cats = app
            .wb
            .accounts()
            .create_api_key(&cat, "cat's")
            .await
            .unwrap();

        let b = app.browser();
        b.sign_in("bob@example.com", PASSWORD).await;
        let page: Value = b.call("api_keys_page", &[]).await.json().await.unwrap();
        let names: Vec<&str> = page["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["bob's"]);
        let res = b.call("revoke_api_key", &[("id", &cats.info.id)]).await;
        assert!(res.text().await.unwrap().contains("not found"));
        let me = app
            .http()
            .get(app.url("/v1/me"))
            .bearer_auth(cats.secret.expose())
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 200, "cat's key still works");

        let a = app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        let page: Value = a.call("api_keys_page", &[]).await.json().await.unwrap();
        assert_eq!(page["keys"].as_array().unwrap().len(), 2);
        assert!(a
            .call("revoke_api_key", &[("id", &bobs.info.id)])
            .await
            .status()
            .is_success());
        let me = app
            .http()
            .get(app.url("/v1/me"))
            .bearer_auth(bobs.secret.expose())
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 401);
        let _ = ada;
    }
);

db_test!(key_names_are_validated, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let b = app.browser();
    b.sign_in("ada@example.com", PASSWORD).await;
    for bad in ["", "   ", &"x".repeat(101), "bad\u{7}name"] {
        let res = b.call("create_api_key", &[("name", bad)]).await;
        assert!(!res.status().is_success());
        assert!(res.text().await.unwrap().contains("invalid key name"));
    }
});
