//! Admins add and remove members; members cannot. Removing someone ends every credential
//! they held in the project.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::confirmations::post;
use crate::helpers::PASSWORD;
use crate::mcp_oauth::{authorized, client, mcp_status, signed_in};
use crate::policies::send;
use crate::{app, db_test};

db_test!(an_admin_adds_a_member_who_can_then_sign_in, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    let a = app.browser();
    a.sign_in("ada@example.com", PASSWORD).await;
    let res = a
        .call(
            "add_member",
            &[
                ("email", "Bob@Example.com"),
                ("password", PASSWORD),
                ("role", "member"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200);
    let page: Value = a.call("members_page", &[]).await.json().await.unwrap();
    let emails: Vec<&str> = page["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["ada@example.com", "bob@example.com"]);
    assert_eq!(page["can_manage"], true);

    let b = app.browser();
    assert!(b
        .sign_in("bob@example.com", PASSWORD)
        .await
        .status()
        .is_success());
    let me: Value = b.get("/me").await.json().await.unwrap();
    assert_eq!(me["role"], "member");
    assert_eq!(me["project"]["name"], "default");

    // The same email twice is refused.
    let res = a
        .call(
            "add_member",
            &[
                ("email", "bob@example.com"),
                ("password", PASSWORD),
                ("role", "admin"),
            ],
        )
        .await;
    assert!(res.text().await.unwrap().contains("already exists"));
});

db_test!(a_member_cannot_add_members, |backend| {
    let app = app!(backend);
    app.user("ada@example.com", Role::Admin).await;
    app.user("bob@example.com", Role::Member).await;
    let b = app.browser();
    b.sign_in("bob@example.com", PASSWORD).await;
    let res = b
        .call(
            "add_member",
            &[
                ("email", "eve@example.com"),
                ("password", PASSWORD),
                ("role", "admin"),
            ],
        )
        .await;
    assert!(res.text().await.unwrap().contains("only project admins"));
    let page: Value = b.call("members_page", &[]).await.json().await.unwrap();
    assert_eq!(page["can_manage"], false);
    assert_eq!(page["members"].as_array().unwrap().len(), 2);
    assert!(
        app.browser()
            .sign_in("eve@example.com", PASSWORD)
            .await
            .status()
            != 200
    );
});

db_test!(
    removing_a_member_ends_their_keys_mcp_clients_and_portal_access,
    |backend| {
        let app = app!(backend);
        let ada = app.user("ada@example.com", Role::Admin).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        let b = signed_in(&app, "bob@example.com").await;
        let client_id = client(&app).await;
        let token = authorized(&app, &b, &client_id).await;
        let access = token["access_token"].as_str().unwrap().to_owned();
        assert_eq!(mcp_status(&app, &access).await, 200);
        let tools = |key: String| {
            let app = &app;
            async move {
                app.http()
                    .get(app.url("/v1/tools"))
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(tools(bob_key.clone()).await, 200);

        // A member may not remove anyone; an admin may not remove themselves.
        let res = b
            .call("remove_member", &[("id", ada.user_id.as_str())])
            .await;
        assert!(res.text().await.unwrap().contains("only project admins"));
        let a = signed_in(&app, "ada@example.com").await;
        let res = a
            .call("remove_member", &[("id", ada.user_id.as_str())])
            .await;
        assert!(res.text().await.unwrap().contains("cannot remove yourself"));

        let page: Value = a.call("members_page", &[]).await.json().await.unwrap();
        let bob_row = page["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["email"] == "bob@example.com")
            .unwrap()
            .clone();
        assert_eq!(bob_row["user_id"], bob.user_id.as_str());
        let res = a
            .call("remove_member", &[("id", bob.user_id.as_str())])
            .await;
        assert_eq!(res.status(), 200);

        assert_eq!(tools(bob_key).await, 401, "the removed member's API key");
        assert_eq!(
            mcp_status(&app, &access).await,
            401,
            "the MCP client bob approved"
        );
        let me = b.get("/me").await;
        assert_ne!(me.status(), 200, "bob's portal session");
        let page: Value = a.call("members_page", &[]).await.json().await.unwrap();
        assert_eq!(page["members"].as_array().unwrap().len(), 1, "{page}");
        // Removing again, or someone who never was a member, is not found.
        let res = a
            .call("remove_member", &[("id", bob.user_id.as_str())])
            .await;
        assert_ne!(res.status(), 200);
        let res = a.call("remove_member", &[("id", "usr_nobody")]).await;
        assert_ne!(res.status(), 200);
        // Nor can an admin reach a member of another project.
        let eve = app.user_in("eve@example.com", "other", Role::Member).await;
        let eve_key = app.api_key(&eve).await;
        let res = a
            .call("remove_member", &[("id", eve.user_id.as_str())])
            .await;
        assert_ne!(res.status(), 200);
        assert_eq!(
            tools(eve_key).await,
            200,
            "another project's member was removed"
        );
    }
);

db_test!(
    a_removed_members_held_calls_expire_and_cannot_be_approved,
    |backend| {
        let app = app!(backend);
        let (ada, admin) = crate::helpers::admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
        let (status, pol) = post(
            &app,
            &admin,
            "/v1/policies",
            json!({ "name": "careful", "tool_allowlist": rules }),
        )
        .await;
        assert_eq!(status, 201, "{pol}");
        let bob_key = app
            .wb
            .accounts()
            .create_api_key_with_policy(&bob, "agent", pol["id"].as_str())
            .await
            .unwrap()
            .secret
            .expose()
            .to_owned();
        let (status, held) = post(
            &app,
            &bob_key,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }),
        )
        .await;
        assert_eq!(status, 202, "{held}");
        let id = held["confirmation_id"].as_str().unwrap().to_owned();

        app.wb.remove_member(&ada, &bob.user_id).await.unwrap();
        let (status, out) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{id}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_ne!(status, 200, "a removed member's call was approved: {out}");
        let listed: Value = app
            .http()
            .get(app.url(&format!("/v1/tools/confirmations/{id}")))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listed["status"], "expired", "{listed}");
    }
);

db_test!(members_are_managed_over_rest_as_in_the_portal, |backend| {
    use reqwest::Method;
    let app = app!(backend);
    let ada = app.user("ada@example.com", Role::Admin).await;
    let ada_key = app.api_key(&ada).await;
    let bob = app.user("bob@example.com", Role::Member).await;
    let bob_key = app.api_key(&bob).await;

    // An admin key adds Carol; she signs in with the password given.
    let (status, out) = send(
        &app,
        &ada_key,
        Method::POST,
        "/v1/members",
        Some(json!({ "email": "Carol@Example.com", "password": PASSWORD, "role": "member" })),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    assert_eq!(out["email"], "carol@example.com");
    assert_eq!(out["role"], "member");
    assert!(out["id"].as_str().unwrap().starts_with("usr"), "{out}");
    assert!(
        !out.to_string().contains(PASSWORD),
        "the password is never sent back"
    );
    let c = app.browser();
    assert!(c
        .sign_in("carol@example.com", PASSWORD)
        .await
        .status()
        .is_success());

    // Refusals, each in the API's error shape and changing nothing.
    let (status, out) = send(
        &app,
        &ada_key,
        Method::POST,
        "/v1/members",
        Some(json!({ "email": "carol@example.com", "password": PASSWORD, "role": "admin" })),
    )
    .await;
    assert_eq!(status, 409, "{out}");
    assert_eq!(out["error"]["code"], "conflict");
    let short = "short-pw";
    let (status, out) = send(
        &app,
        &ada_key,
        Method::POST,
        "/v1/members",
        Some(json!({ "email": "dan@example.com", "password": short, "role": "member" })),
    )
    .await;
    assert_eq!(status, 422, "{out}");
    assert!(
        !out.to_string().contains(short),
        "the refusal does not repeat the password: {out}"
    );
    for body in [
        json!({ "email": "dan@example.com", "password": PASSWORD, "role": "owner" }),
        json!({ "email": "not an email", "password": PASSWORD, "role": "member" }),
        json!({ "email": "dan@example.com", "password": PASSWORD }),
        json!({ "email": "dan@example.com", "password": PASSWORD, "role": "member", "project": "other" }),
    ] {
        let (status, out) = send(
            &app,
            &ada_key,
            Method::POST,
            "/v1/members",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 422, "{body}: {out}");
        assert_eq!(out["error"]["code"], "invalid_request", "{out}");
    }
    // A member lists but cannot add or remove.
    let (status, out) = send(&app, &bob_key, Method::GET, "/v1/members", None).await;
    assert_eq!(status, 200, "{out}");
    let emails: Vec<&str> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails,
        ["ada@example.com", "bob@example.com", "carol@example.com"]
    );
    let (status, _) = send(
        &app,
        &bob_key,
        Method::POST,
        "/v1/members",
        Some(json!({ "email": "eve@example.com", "password": PASSWORD, "role": "admin" })),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = send(
        &app,
        &bob_key,
        Method::DELETE,
        &format!("/v1/members/{}", ada.user_id),
        None,
    )
    .await;
    assert_eq!(status, 403);

    // Removing Bob ends his key at once; an admin cannot remove themselves; unknown ids are 404.
    let (status, out) = send(
        &app,
        &ada_key,
        Method::DELETE,
        &format!("/v1/members/{}", bob.user_id),
        None,
    )
    .await;
    assert_eq!(status, 204, "{out}");
    let (status, _) = send(&app, &bob_key, Method::GET, "/v1/members", None).await;
    assert_eq!(status, 401, "a removed member's key stops working");
    let (status, out) = send(
        &app,
        &ada_key,
        Method::DELETE,
        &format!("/v1/members/{}", ada.user_id),
        None,
    )
    .await;
    assert_eq!(status, 422, "{out}");
    let (status, out) = send(
        &app,
        &ada_key,
        Method::DELETE,
        &format!("/v1/members/{}", bob.user_id),
        None,
    )
    .await;
    assert_eq!(status, 404, "{out}");
    let (_, out) = send(&app, &ada_key, Method::GET, "/v1/members", None).await;
    assert_eq!(out["data"].as_array().unwrap().len(), 2, "{out}");
});
