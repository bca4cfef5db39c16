use crate::{app, db_test};

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
});
