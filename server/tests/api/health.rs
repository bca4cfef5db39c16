use crate::{app, db_test};

/// `workbench health [--ready]` against the app's address: exit success and stderr.
async fn health_command(app: &crate::helpers::TestApp, ready: bool) -> (bool, String) {
    let bind = app
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_workbench"));
    cmd.args(["health", "--bind", &bind]);
    if ready {
        cmd.arg("--ready");
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

db_test!(
    healthz_and_readyz_answer_ok_with_a_live_database,
    |backend| {
        let app = app!(backend);
        let res = app.http().get(app.url("/healthz")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.json::<serde_json::Value>().await.unwrap()["status"],
            "ok"
        );
        let res = app.http().get(app.url("/readyz")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.json::<serde_json::Value>().await.unwrap()["database"],
            "ok"
        );
        // The container image's health check says the same.
        assert_eq!(health_command(&app, false).await, (true, String::new()));
        assert_eq!(health_command(&app, true).await, (true, String::new()));
    }
);

db_test!(readyz_is_unavailable_when_the_database_is_gone, |backend| {
    let app = app!(backend);
    app.wb.db().close().await;
    let res = app.http().get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), 503);
    // The process itself is still up.
    let res = app.http().get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(health_command(&app, false).await.0);
    let (ok, err) = health_command(&app, true).await;
    assert!(!ok, "--ready fails while the database is gone");
    assert!(
        err.contains("/readyz answered") && err.contains("503"),
        "{err}"
    );
});

#[tokio::test]
async fn the_health_command_fails_when_nothing_listens() {
    // A port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(["health", "--bind", &format!("0.0.0.0:{port}")])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("nothing answers on 127.0.0.1:{port}")),
        "an unspecified bind address is asked on loopback: {err}"
    );
}
