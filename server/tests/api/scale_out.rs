//! Two instances on one database behave as one: a session started on one is valid on the other.

use workbench_core::auth::Role;

use crate::helpers::{Options, PASSWORD};
use crate::{app, db_test};

db_test!(
    a_session_started_on_one_instance_works_on_another,
    |backend| {
        let a = app!(backend);
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                ..Default::default()
            }
        );
        a.user("ada@example.com", Role::Admin).await;
        let on_a = a.browser();
        on_a.sign_in("ada@example.com", PASSWORD).await;
        // Reuse the cookie jar's cookie against instance B.
        let cookie = {
            let res = on_a
                .call(
                    "sign_in",
                    &[("email", "ada@example.com"), ("password", PASSWORD)],
                )
                .await;
            res.headers()
                .get("set-cookie")
                .unwrap()
                .to_str()
                .unwrap()
                .split(';')
                .next()
                .unwrap()
                .to_owned()
        };
        let res = b
            .http()
            .get(b.url("/me"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["email"], "ada@example.com");
    }
);
