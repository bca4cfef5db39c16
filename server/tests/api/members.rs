//! Admins add members; members cannot.

use serde_json::Value;
use workbench_core::auth::Role;

use crate::helpers::PASSWORD;
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
