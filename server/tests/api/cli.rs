//! The `workbench` binary's commands, as outside scripts call them.

use std::io::Write;
use std::process::{Command, Stdio};

use workbench_core::connections::Credential;
use workbench_core::vault::KeyRing;

use crate::db_test;
use crate::helpers::{database_url, Backend, PASSWORD};

/// Runs the workbench binary with `args`, writing `stdin` (then closing it): its output.
pub(crate) fn workbench(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(args)
        .env_remove("WB_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// Migrates the database at `url` and makes an admin (ops@example.com) with an API key through
/// the CLI, as an operator would: the key.
pub(crate) fn provision_with_cli(url: &str) -> String {
    let run = |args: &[&str], stdin: Option<&str>| {
        let out = workbench(args, stdin);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["migrate", "--database-url", url], None);
    run(
        &[
            "admin",
            "create-user",
            "--database-url",
            url,
            "--email",
            "ops@example.com",
            "--password-stdin",
            "--admin",
        ],
        Some(PASSWORD),
    );
    run(
        &[
            "admin",
            "create-api-key",
            "--database-url",
            url,
            "--email",
            "ops@example.com",
            "--name",
            "agent",
        ],
        None,
    )
    .trim()
    .to_owned()
}

db_test!(cli_creates_users_and_prints_an_api_key_alone, |backend| {
    let Some(url) = database_url(backend).await else {
        return;
    };
    let out = workbench(&["migrate", "--database-url", &url], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = workbench(
        &[
            "admin",
            "create-user",
            "--database-url",
            &url,
            "--email",
            "ops@example.com",
            "--password-stdin",
            "--admin",
            "--project",
            "ops",
        ],
        Some(&format!("{PASSWORD}\n")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = workbench(
        &[
            "admin",
            "create-api-key",
            "--database-url",
            &url,
            "--email",
            "ops@example.com",
            "--name",
            "deploy",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout:?}");
    let key = lines[0];
    assert!(key.starts_with("wb_") && key.len() == 43);

    let wb = workbench_core::Workbench::open(&url, Default::default())
        .await
        .unwrap();
    let p = wb.accounts().authenticate_api_key(key).await.unwrap();
    assert_eq!(p.email, "ops@example.com");
    assert_eq!(p.project_name, "ops");
    assert!(p.is_admin());
    assert!(
        wb.accounts().is_set_up().await.unwrap(),
        "the portal no longer offers setup"
    );
    let _ = Backend::Sqlite;
});

db_test!(
    cli_refuses_a_duplicate_user_and_an_unknown_email,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let args = [
            "admin",
            "create-user",
            "--database-url",
            &url,
            "--email",
            "ops@example.com",
            "--password-stdin",
        ];
        assert!(workbench(&args, Some(PASSWORD)).status.success());
        let out = workbench(&args, Some(PASSWORD));
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
        let out = workbench(
            &[
                "admin",
                "create-api-key",
                "--database-url",
                &url,
                "--email",
                "nobody@example.com",
            ],
            None,
        );
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("no user with email"));
        assert!(out.stdout.is_empty());
    }
);

#[test]
fn cli_password_must_come_on_stdin() {
    let out = workbench(
        &[
            "admin",
            "create-user",
            "--database-url",
            "sqlite://x.db",
            "--email",
            "a@example.com",
            "--password-stdin",
        ],
        Some(""),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no password on standard input"));
}

#[test]
fn a_bad_database_url_stops_the_process_with_a_clear_message() {
    let out = workbench(&["migrate", "--database-url", "mysql://nope"], None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unsupported database url scheme"), "{err}");
    let out = workbench(
        &[
            "migrate",
            "--database-url",
            "postgres://postgres:hunter2secret@127.0.0.1:1/nope",
        ],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open database"), "{err}");
    assert!(
        !err.contains("hunter2secret"),
        "the password is redacted: {err}"
    );
}

#[test]
fn serve_stops_with_a_clear_message_when_the_port_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = crate::helpers::temp_dir("cli");
    let db = format!("sqlite://{}", dir.join("wb.db").display());
    let data = dir.join("data");
    let out = workbench(
        &[
            "serve",
            "--bind",
            &addr,
            "--database-url",
            &db,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on"));
}

#[test]
fn help_documents_every_serve_flag_and_its_variable() {
    let out = workbench(&["serve", "--help"], None);
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--bind",
        "--database-url",
        "--public-url",
        "--data-dir",
        "--trust-forwarded-for",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
    for var in ["WB_BIND", "WB_DATABASE_URL", "WB_PUBLIC_URL", "WB_DATA_DIR"] {
        assert!(help.contains(var), "{var} missing from help");
    }
}

db_test!(
    rotate_master_key_re_encrypts_every_secret_and_connection_and_can_run_again,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let dir = crate::helpers::temp_dir("rotate");
        let data = dir.join("data");
        let data = data.to_str().unwrap();
        assert!(workbench(&["migrate", "--database-url", &url], None)
            .status
            .success());
        assert!(workbench(
            &[
                "admin",
                "create-user",
                "--database-url",
                &url,
                "--email",
                "ops@example.com",
                "--password-stdin",
                "--admin"
            ],
            Some(PASSWORD)
        )
        .status
        .success());
        let keys =
            workbench_server::keys::Keys::load_or_create(std::path::Path::new(data)).unwrap();
        let options = workbench_core::WorkbenchOptions {
            master_keys: keys.master.clone(),
            ..Default::default()
        };
        let wb = workbench_core::Workbench::open(&url, options)
            .await
            .unwrap();
        let user = wb
            .accounts()
            .create_api_key_for_email("ops@example.com", "k", None)
            .await
            .unwrap();
        let who = wb
            .accounts()
            .authenticate_api_key(user.secret.expose())
            .await
            .unwrap();
        for i in 0..3 {
            wb.vault()
                .set(&who, &format!("S{i}"), &format!("secret-value-{i}"))
                .await
                .unwrap();
        }
        let linear_key = Credential::ApiKey {
            key: "lin_api_rotate_me".into(),
        };
        wb.connections()
            .store(&who.project_id, &who.user_id, "linear", &linear_key)
            .await
            .unwrap();
        // A scheduled callback's sealed target and the project's callback signing secret.
        wb.egress().add(&who, "hooks.example.com").await.unwrap();
        let callback = workbench_core::schedule::NewCallback {
            url: "https://hooks.example.com/cb?token=abc".into(),
            url_shown: "https://hooks.example.com/cb?token={{vault:S0}}".into(),
            method: "POST".into(),
            payload: serde_json::json!({ "n": 1 }),
            payload_shown: serde_json::json!({ "n": 1 }),
            scheduled_for: wb.clock().now_ms() + 3_600_000,
        };
        let (callback_id, _) = wb.schedules().schedule(&who, callback).await.unwrap();
        let signing = wb
            .schedules()
            .signing_secret(&who)
            .await
            .unwrap()
            .to_string();
        for expected_version in [2, 3] {
            let out = workbench(
                &[
                    "admin",
                    "rotate-master-key",
                    "--database-url",
                    &url,
                    "--data-dir",
                    data,
                ],
                None,
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains(&format!("re-encrypted 3 secrets, 1 connection credentials and 2 callback payloads and signing secrets under new master key version {expected_version}")),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
            // Only the newest key: everything must have moved to it.
            let full = workbench_server::keys::Keys::load_or_create(std::path::Path::new(data))
                .unwrap()
                .master;
            let (v, k) = full.versions().last().unwrap();
            let mut ring = KeyRing::new();
            ring.insert(*v, k.clone());
            let wb = workbench_core::Workbench::open(
                &url,
                workbench_core::WorkbenchOptions {
                    master_keys: ring,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            let linear = wb.integrations().get("linear").unwrap().clone();
            assert_eq!(
                wb.connections()
                    .credential(&who, &linear)
                    .await
                    .unwrap()
                    .ok(),
                Some(linear_key.clone())
            );
            let row = workbench_core::store::connections::get(
                wb.db().pool(),
                &who.project_id,
                &who.user_id,
                "linear",
            )
            .await
            .unwrap()
            .unwrap();
            assert_eq!(
                (row.key_version, row.status.as_str()),
                (Some(expected_version), "connected")
            );
            for i in 0..3 {
                let name = format!("S{i}");
                let row = workbench_core::store::vault::get(wb.db().pool(), &who.project_id, &name)
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(row.key_version, expected_version);
                let values = wb
                    .vault()
                    .reveal(&who.project_id, std::slice::from_ref(&name))
                    .await
                    .unwrap();
                assert_eq!(values[&name].as_str(), format!("secret-value-{i}"));
            }
            assert_eq!(
                wb.schedules().signing_secret(&who).await.unwrap().as_str(),
                signing
            );
            let row = workbench_core::store::deliveries::get(
                wb.db().pool(),
                &who.project_id,
                &callback_id,
            )
            .await
            .unwrap()
            .unwrap();
            assert_eq!(row.key_version, Some(expected_version));
        }
    }
);

db_test!(
    cli_backs_up_the_sqlite_database_while_it_is_in_use,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let dir = std::env::temp_dir().join(format!(
            "wb-backup-{}-{}",
            std::process::id(),
            workbench_core::crypto::random_base62(6)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let to = dir.join("copy.db");
        let to_arg = to.to_str().unwrap();
        assert!(workbench(&["migrate", "--database-url", &url], None)
            .status
            .success());
        assert!(workbench(
            &[
                "admin",
                "create-user",
                "--database-url",
                &url,
                "--email",
                "ops@example.com",
                "--password-stdin",
                "--admin"
            ],
            Some(PASSWORD)
        )
        .status
        .success());
        let out = workbench(
            &["admin", "backup", "--database-url", &url, "--to", to_arg],
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if url.starts_with("postgres") {
            assert!(
                !out.status.success() && stderr.contains("pg_dump"),
                "{stderr}"
            );
            assert!(!to.exists());
            return;
        }
        // The original stays open (a live instance) while the copy is written.
        let live = workbench_core::Workbench::open(&url, Default::default())
            .await
            .unwrap();
        assert!(out.status.success(), "{stderr}");
        let copy = workbench_core::Workbench::open(
            &format!("sqlite://{}", to.display()),
            Default::default(),
        )
        .await
        .unwrap();
        let who = copy
            .accounts()
            .sign_in("ops@example.com", PASSWORD, None)
            .await
            .unwrap();
        assert_eq!(who.email, "ops@example.com", "the copy holds the data");
        drop(live);
        // A backup never overwrites.
        let again = workbench(
            &["admin", "backup", "--database-url", &url, "--to", to_arg],
            None,
        );
        assert!(
            !again.status.success()
                && String::from_utf8_lossy(&again.stderr).contains("exists already")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
);
