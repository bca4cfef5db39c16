use serde_json::Value;
use workbench_core::auth::Role;

use crate::{app, db_test};

async fn assert_unauthorized(res: reqwest::Response) {
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers().get("www-authenticate").unwrap(), "Bearer");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().len() > 5);
    assert!(body["error"]["meta"].is_object());
}

db_test!(v1_refuses_missing_malformed_and_unknown_keys, |backend| {
    let app = app!(backend);
    let http = app.http();
    assert_unauthorized(http.get(app.url("/v1/me")).send().await.unwrap()).await;
    for header in [
        "Bearer",
        "Bearer ",
        "Basic d2I6eA==",
        "Bearer wb_short",
        "Bearer wb_0123456789012345678901234567890123456789",
        "Bearer wb_0123456789012345678901234567890123456789x",
    ] {
        let res = http
            .get(app.url("/v1/me"))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_unauthorized(res).await;
    }
});

db_test!(v1_me_names_the_user_behind_a_valid_key, |backend| {
    let app = app!(backend);
    let ada = app.user("ada@example.com", Role::Admin).await;
    let key = app.api_key(&ada).await;
    let res = app
        .http()
        .get(app.url("/v1/me"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["id"], ada.user_id.as_str());
    assert_eq!(body["email"], "ada@example.com");
    assert_eq!(body["project"]["name"], "default");
});

db_test!(a_revoked_key_gets_401, |backend| {
    let app = app!(backend);
    let ada = app.user("ada@example.com", Role::Admin).await;
    let key = app.wb.accounts().create_api_key(&ada, "ci").await.unwrap();
    app.wb
        .accounts()
        .revoke_api_key(&ada, &key.info.id)
        .await
        .unwrap();
    let res = app
        .http()
        .get(app.url("/v1/me"))
        .bearer_auth(key.secret.expose())
        .send()
        .await
        .unwrap();
    assert_unauthorized(res).await;
});

db_test!(
    unknown_v1_paths_need_a_key_then_answer_404_json,
    |backend| {
        let app = app!(backend);
        let res = app.http().get(app.url("/v1/nope")).send().await.unwrap();
        assert_eq!(res.status(), 401);
        let ada = app.user("ada@example.com", Role::Admin).await;
        let key = app.api_key(&ada).await;
        let res = app
            .http()
            .post(app.url("/v1/nope/deeper"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found");
    }
);

db_test!(key_use_is_recorded_as_last_used, |backend| {
    let app = app!(backend);
    let ada = app.user("ada@example.com", Role::Admin).await;
    let key = app.api_key(&ada).await;
    let before = app.wb.accounts().list_api_keys(&ada).await.unwrap();
    assert_eq!(before[0].last_used_at, None);
    let res = app
        .http()
        .get(app.url("/v1/me"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let after = app.wb.accounts().list_api_keys(&ada).await.unwrap();
    assert!(after[0].last_used_at.is_some());
});
