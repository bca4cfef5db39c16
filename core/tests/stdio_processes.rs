//! Issue 32: what running local (stdio) MCP servers leaves behind and what it lets them touch,
//! with real processes: 1,000 start/stop cycles of a server that forks grandchildren (some
//! leaving its process group, as daemons do) leave no process, and Landlock keeps a server to
//! the paths it declared. The server is `fixtures/stdio/raw_server.py` on the system Python.

#[path = "support/instance.rs"]
mod instance;
#[path = "support/processes.rs"]
mod processes;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use processes::{children, marked};
use serde_json::{json, Value};
use workbench_core::upstream::stdio::pool::Pool;
use workbench_core::upstream::stdio::supervisor::{Context, ProcessState};
use workbench_core::upstream::stdio::{Filesystem, Limits, Start, StdioConfig, StdioSettings};

const PYTHON: &str = "/usr/bin/python3";

fn script() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/stdio/raw_server.py"
    )
    .to_owned()
}

fn temp(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "wb-{label}-{}-{}",
        std::process::id(),
        workbench_core::crypto::random_base62(6)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config(args: &[&str], env: &[(&str, &str)], filesystem: Filesystem) -> StdioConfig {
    let mut all = vec!["-I".to_owned(), "-S".to_owned(), script()];
    all.extend(args.iter().map(|a| a.to_string()));
    StdioConfig {
        command: PYTHON.into(),
        args: all,
        cwd: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        limits: Limits::default(),
        filesystem,
        start: Start::OnUse,
        pool: 1,
        idle_shutdown_s: 0,
    }
}

async fn pool(label: &str, config: StdioConfig) -> Arc<Pool> {
    let (wb, admin) = instance::with_admin(label).await;
    let settings = StdioSettings {
        commands: vec![PYTHON.into()],
        work_root: temp(label),
    };
    Pool::new(
        config,
        Context {
            project_id: &admin.project_id,
            server_id: "mcps_test",
            name: "raw",
            settings: &settings,
            vault: wb.vault().clone(),
            clock: wb.clock().clone(),
            timeout: Duration::from_secs(10),
            on_changed: Arc::new(|_| {}),
        },
    )
}

async fn call(pool: &Pool, tool: &str, arguments: Value) -> Value {
    let session = pool.session().await.unwrap();
    session
        .request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
            Duration::from_secs(10),
        )
        .await
        .unwrap()["structuredContent"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_start_stop_cycles_of_a_forking_server_leave_no_process_behind() {
    let mark = workbench_core::crypto::random_base62(12);
    let pool = pool(
        "stdio-cycles",
        config(
            &["--fork", "2"],
            &[("WB_TEST_MARK", &mark)],
            Filesystem {
                read: vec![script()],
                write: vec![],
            },
        ),
    )
    .await;
    let mut pids = std::collections::BTreeSet::new();
    for cycle in 0..1000 {
        let session = pool
            .session()
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        if cycle % 100 == 0 {
            // The server and both grandchildren run while it does.
            let answer = session
                .request(
                    "tools/call",
                    json!({ "name": "echo", "arguments": { "text": "hi" } }),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            pids.insert(answer["structuredContent"]["pid"].as_u64().unwrap());
            let mut alive = marked(&mark);
            for _ in 0..100 {
                if alive.len() >= 3 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                alive = marked(&mark);
            }
            assert_eq!(
                alive.len(),
                3,
                "cycle {cycle}: the server and its two grandchildren: {alive:?}"
            );
        }
        drop(session);
        pool.stop().await;
    }
    assert_eq!(
        pids.len(),
        10,
        "each sampled cycle ran a process of its own"
    );
    let (left, guards) = (marked(&mark), children());
    assert!(
        left.is_empty(),
        "servers or grandchildren left after 1,000 cycles: {left:?}"
    );
    assert!(
        guards.is_empty(),
        "guards (or zombies) left after 1,000 cycles: {guards:?}"
    );
    let view = pool.view().await;
    assert_eq!(view[0].state, ProcessState::Stopped);
    assert_eq!(
        view[0].restarts, 0,
        "stopping on purpose is no crash: {view:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_keeps_a_server_to_its_declared_paths() {
    if workbench_core::upstream::stdio::landlock::abi().is_none() {
        eprintln!("this kernel has no Landlock; nothing to test");
        return;
    }
    let shared = temp("stdio-shared");
    std::fs::write(shared.join("readme.txt"), "declared").unwrap();
    let private = temp("stdio-private");
    std::fs::write(private.join("master.key"), "not for servers").unwrap();
    let pool = pool(
        "stdio-landlock",
        config(
            &[],
            &[],
            Filesystem {
                read: vec![script(), shared.display().to_string()],
                write: vec![],
            },
        ),
    )
    .await;
    let read = |p: PathBuf| json!({ "path": p.display().to_string() });
    assert_eq!(
        call(&pool, "read_file", read(shared.join("readme.txt"))).await,
        json!({ "ok": true, "text": "declared" })
    );
    assert_eq!(
        call(&pool, "read_file", read(private.join("master.key"))).await,
        json!({ "ok": false, "error": "PermissionError" }),
        "a path nobody declared is out of reach"
    );
    let write = |p: PathBuf| json!({ "path": p.display().to_string(), "text": "x" });
    assert_eq!(
        call(&pool, "write_file", write(shared.join("new.txt"))).await,
        json!({ "ok": false, "error": "PermissionError" }),
        "a path declared readable is not writable"
    );
    assert!(!shared.join("new.txt").exists());
    // Its own working directory is writable (a relative path is relative to it).
    assert_eq!(
        call(
            &pool,
            "write_file",
            json!({ "path": "notes.txt", "text": "mine" })
        )
        .await,
        json!({ "ok": true })
    );
    if workbench_core::upstream::stdio::landlock::abi() >= Some(6) {
        assert_eq!(
            call(&pool, "signal", json!({ "pid": std::process::id() })).await,
            json!({ "ok": false, "error": "PermissionError" }),
            "workbench is outside the server's sandbox"
        );
    }
    let view = pool.view().await;
    assert!(
        view[0]
            .confinement
            .iter()
            .any(|c| c.starts_with("landlock filesystem")),
        "{view:?}"
    );
    pool.stop().await;
}
