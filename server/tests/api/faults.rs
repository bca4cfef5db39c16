//! The fault suite: real `workbench serve` processes meet the failures production brings (the
//! database restarting under load, a process killed mid-call, SIGTERM with calls open, a full
//! disk, a read-only database) and must fail clearly, lose nothing and recover without a
//! restart. Everything runs on loopback; every wait is bounded. (An upstream MCP server dropping
//! connections mid-stream: upstream.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::{Cluster, ClusterOptions};
use crate::db_test;
use crate::fakes;
use crate::helpers::{admin_with_key, database_url, temp_dir};

/// A PostgreSQL server of the test's own (initdb in a temporary directory, its own port), so
/// the test can stop and start it without touching the machine's shared server.
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl PrivatePostgres {
    /// None (skip) when PostgreSQL's server programs are not installed and PostgreSQL tests are
    /// not required.
    fn start() -> Option<PrivatePostgres> {
        let Some(bin) = postgres_bin() else {
            assert!(
                std::env::var("WB_TEST_POSTGRES").as_deref() != Ok("required"),
                "PostgreSQL is required but initdb is not installed"
            );
            crate::helpers::skipped(
                "no PostgreSQL server programs (initdb) under /usr/lib/postgresql",
            );
            return None;
        };
        let dir = temp_dir("pgdata");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = PrivatePostgres { bin, dir, port };
        if is_root() {
            // PostgreSQL refuses to run as root: its files and processes belong to `postgres`.
            assert!(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&pg.dir)
                .status()
                .unwrap()
                .success());
        }
        pg.run(
            "initdb",
            &[
                "-D",
                &pg.data(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        pg.up();
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        let out = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&exe)
                .args(args)
                .output()
                .unwrap()
        } else {
            Command::new(&exe).args(args).output().unwrap()
        };
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// A fast shutdown: open connections are closed, as in a restart or failover.
    fn down(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "fast", "-w", "-t", "60", "stop"],
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
        let _ = Command::new(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn wait_for(what: &str, limit: Duration, mut ok: impl AsyncFnMut() -> bool) {
    let until = tokio::time::Instant::now() + limit;
    while !ok().await {
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_restart_under_load_gives_clear_503s_and_the_pool_recovers_without_a_restart() {
    let Some(pg) = PrivatePostgres::start() else {
        return;
    };
    let c = Cluster::start(&pg.url(), 1, ClusterOptions::default()).await;
    let (_, key) = admin_with_key(&c.app(0)).await;
    let base = c.instances[0].base();
    let pid = c.instances[0].pid();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // Four clients write to project storage without pause for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<(u16, String)>>> = Arc::default();
    let load: Vec<_> = (0..4)
        .map(|w| {
            let (http, base, key, stop, answers) = (http.clone(), base.clone(), key.clone(), stop.clone(), answers.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let body = json!({ "tool": "storage.put", "arguments": { "key": format!("w{w}/{n}"), "content": "x" } });
                    let res = http.post(format!("{base}/v1/tools/invoke")).bearer_auth(&key).json(&body).send().await.expect("workbench answers while its database is down");
                    let status = res.status().as_u16();
                    let retry_after = res.headers().get("retry-after").is_some();
                    let v: Value = res.json().await.unwrap_or(Value::Null);
                    let code = v["error"]["code"].as_str().unwrap_or("").to_owned();
                    if status == 503 {
                        assert!(retry_after || code == "tool_unavailable", "a 503 tells when to retry: {v}");
                    }
                    answers.lock().unwrap().push((status, code));
                }
            })
        })
        .collect();
    let count = |status: u16| {
        answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.0 == status)
            .count()
    };
    wait_for("writes to succeed", Duration::from_secs(10), async || {
        count(200) >= 20
    })
    .await;

    pg.down();
    let down_at = answers.lock().unwrap().len();
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503, "readiness reports the database");
    assert_eq!(
        ready.json::<Value>().await.unwrap()["database"],
        "unreachable"
    );
    wait_for(
        "503s while PostgreSQL is down",
        Duration::from_secs(30),
        async || {
            answers.lock().unwrap()[down_at..]
                .iter()
                .filter(|a| a.0 == 503)
                .count()
                >= 4
        },
    )
    .await;
    let res = http
        .post(format!("{base}/v1/tools/invoke"))
        .bearer_auth(&key)
        .json(&json!({ "tool": "storage.get", "arguments": { "key": "w0/1" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    let v: Value = res.json().await.unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("database"),
        "{v}"
    );
    assert!(
        !v.to_string().contains("127.0.0.1") && !v.to_string().contains("postgres"),
        "no driver detail leaks: {v}"
    );

    pg.up();
    let back_at = answers.lock().unwrap().len();
    wait_for(
        "writes to succeed again",
        Duration::from_secs(30),
        async || {
            answers.lock().unwrap()[back_at..]
                .iter()
                .filter(|a| a.0 == 200)
                .count()
                >= 20
        },
    )
    .await;
    assert_eq!(
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    stop.store(true, Ordering::SeqCst);
    for l in load {
        l.await.unwrap();
    }
    assert_eq!(
        c.instances[0].pid(),
        pid,
        "the same process served throughout"
    );
    let answers = answers.lock().unwrap();
    let odd: Vec<_> = answers
        .iter()
        .filter(|a| a.0 != 200 && a.0 != 503)
        .collect();
    assert!(
        odd.is_empty(),
        "every answer was a success or a 503, not {odd:?}\n{}",
        c.logs()
    );
    let codes: std::collections::BTreeSet<&str> = answers
        .iter()
        .filter(|a| a.0 == 503)
        .map(|a| a.1.as_str())
        .collect();
    assert!(
        codes
            .iter()
            .all(|c| *c == "unavailable" || *c == "tool_unavailable"),
        "{codes:?}"
    );
}

db_test!(a_process_killed_mid_call_runs_the_call_once_and_its_idempotent_retry_is_told_it_was_interrupted, |backend| {
    let Some(url) = database_url(backend).await else { return };
    let mut c = Cluster::start(&url, 1, ClusterOptions::default()).await;
    let (admin, key) = admin_with_key(&c.app(0)).await;
    let api = fakes::start().await;
    c.wb.egress().add(&admin, &format!("127.0.0.1:{}", api.addr.port())).await.unwrap();
    let base = c.instances[0].base();
    let body = json!({ "tool": "http.fetch", "arguments": { "url": api.url("/delay?ms=5000") } });
    let send = |idem: &'static str| {
        let req = reqwest::Client::new().post(format!("{base}/v1/tools/invoke")).bearer_auth(&key).header("idempotency-key", idem).json(&body);
        async move { req.send().await }
    };

    let first = tokio::spawn(send("charge-42"));
    wait_for("the call to reach the API", Duration::from_secs(10), async || api.state.in_flight.load(Ordering::SeqCst) == 1).await;
    c.instances[0].kill();
    assert!(first.await.unwrap().is_err(), "the client lost its answer");
    c.instances[0].restart().await;

    // Until the dead instance's lease runs out the claim looks busy; then it is interrupted.
    let mut seen = Vec::new();
    let answer = loop {
        let res = send("charge-42").await.unwrap();
        let (status, v) = (res.status().as_u16(), res.json::<Value>().await.unwrap());
        let code = v["error"]["code"].as_str().unwrap_or_default().to_owned();
        seen.push(code.clone());
        if code != "idempotency_key_in_use" || seen.len() > 250 {
            break (status, v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer.0, 409, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], "idempotency_key_interrupted", "{}", answer.1);
    assert!(answer.1["error"]["message"].as_str().unwrap().contains("may have taken effect"), "{}", answer.1);
    let again = send("charge-42").await.unwrap();
    assert_eq!(again.json::<Value>().await.unwrap()["error"]["code"], "idempotency_key_interrupted", "repeats get the same answer");
    assert_eq!(api.state.requests.load(Ordering::SeqCst), 1, "the call was executed exactly once");

    let fresh = send("charge-43").await.unwrap();
    assert_eq!(fresh.status(), 200, "a new key runs");
    assert_eq!(api.state.requests.load(Ordering::SeqCst), 2);
});

db_test!(
    sigterm_lets_open_calls_finish_answers_open_waits_and_exits_within_the_deadline,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let mut c = Cluster::start(&url, 1, ClusterOptions::default()).await;
        let (admin, key) = admin_with_key(&c.app(0)).await;
        let api = fakes::start().await;
        c.wb.egress()
            .add(&admin, &format!("127.0.0.1:{}", api.addr.port()))
            .await
            .unwrap();
        let app = c.app(0);
        let mcp = |args: Value| {
            let req = app
                .http()
                .post(app.url("/mcp"))
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .json(
                    &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": args }),
                );
            async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
        };
        let (link, _) =
            crate::helpers::mcp_call(&app, &key, "connect", json!({ "integration": "github" }))
                .await;
        let wait = tokio::spawn(mcp(
            json!({ "name": "wait_for_connection", "arguments": { "connectionId": link["connectionId"], "timeoutSec": 600 } }),
        ));
        let slow = tokio::spawn(mcp(
            json!({ "name": "execute_tools", "arguments": { "executions": [{ "tool": "http.fetch", "args": { "url": api.url("/delay?ms=3000") } }] } }),
        ));
        wait_for(
            "the slow call to reach the API",
            Duration::from_secs(10),
            async || api.state.in_flight.load(Ordering::SeqCst) == 1,
        )
        .await;

        c.instances[0].terminate();
        let waited = tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .expect("the open wait answered promptly")
            .unwrap();
        assert_eq!(
            waited["result"]["structuredContent"]["status"], "TIMEOUT",
            "{waited}"
        );
        wait_for(
            "the listener to close",
            Duration::from_secs(5),
            async || reqwest::get(app.url("/healthz")).await.is_err(),
        )
        .await;
        let done = tokio::time::timeout(Duration::from_secs(10), slow)
            .await
            .expect("the open call finished")
            .unwrap();
        assert_eq!(
            done["result"]["structuredContent"]["results"][0]["result"]["body"],
            json!({ "ms": 3000 }).to_string(),
            "{done}"
        );
        let limit = workbench_server::DRAIN_DEADLINE
            + workbench_server::RECORDS_DEADLINE
            + Duration::from_secs(5);
        let status = c.instances[0]
            .wait_exit(limit)
            .await
            .unwrap_or_else(|| panic!("still running {limit:?} after SIGTERM:\n{}", c.logs()));
        assert!(
            status.success(),
            "a drained shutdown exits 0: {status}\n{}",
            c.logs()
        );

        // The finished call's record was written before the process exited.
        let page =
            c.wb.audit()
                .page(&admin, &Default::default())
                .await
                .unwrap();
        let fetched = page
            .entries
            .iter()
            .filter(|e| e.tool.as_deref() == Some("http.fetch") && e.status.as_str() == "succeeded")
            .count();
        assert_eq!(
            fetched,
            1,
            "{:?}",
            page.entries
                .iter()
                .map(|e| (&e.action, &e.tool, &e.status))
                .collect::<Vec<_>>()
        );
    }
);

/// A tmpfs of `mib` MiB mounted at a new directory; None (skip) where mounting is not allowed.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(mib: u32) -> Option<SmallDisk> {
        let dir = temp_dir("smalldisk");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&dir)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            assert!(
                std::env::var("WB_TEST_FAULTS").as_deref() != Ok("required"),
                "the fault suite is required (WB_TEST_FAULTS=required) but a tmpfs cannot be mounted here (needs root)"
            );
            crate::helpers::skipped(
                "cannot mount a tmpfs here (needs root); the full-disk test needs one",
            );
            return None;
        }
        Some(SmallDisk(dir))
    }

    fn remount(&self, mode: &str) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.0)
            .status()
            .unwrap()
            .success()
    }

    /// Fills the disk with a file until no space is left.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let small = [0u8; 512];
        while f.write_all(&small).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn integrity(db: &Path) -> String {
    let out = Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('PRAGMA integrity_check').fetchone()[0]); print(c.execute('SELECT count(*) FROM users').fetchone()[0])"])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_writes_clearly_keeps_reads_and_recovers_without_corruption() {
    let Some(disk) = SmallDisk::mount(24) else {
        return;
    };
    let db = disk.0.join("wb.db");
    let c = Cluster::start(
        &format!("sqlite://{}", db.display()),
        1,
        ClusterOptions::default(),
    )
    .await;
    let (_, key) = admin_with_key(&c.app(0)).await;
    let app = c.app(0);
    let invoke = |tool: &str, args: Value| {
        let req = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&key)
            .json(&json!({ "tool": tool, "arguments": args }));
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let (status, out) = invoke(
        "vault_set",
        json!({ "name": "BEFORE", "value": "kept-through-the-fault" }),
    )
    .await;
    assert_eq!(status, 200, "{out}");

    let filler = disk.fill();
    let big = "y".repeat(60 * 1024);
    let mut failed = None;
    for i in 0..40 {
        let (status, out) = invoke(
            "vault_set",
            json!({ "name": format!("FULL_{i}"), "value": big }),
        )
        .await;
        if status != 200 {
            failed = Some((status, out));
            break;
        }
    }
    let (status, out) = failed.expect("writes fail once the disk is full");
    eprintln!("full disk answer: {status} {out}");
    assert_eq!(status, 503, "{out}\n{}", c.logs());
    assert!(
        out.to_string().contains("disk is full") || out.to_string().contains("unavailable"),
        "{out}"
    );
    assert!(
        !out.to_string().contains(&db.display().to_string()),
        "no file path leaks: {out}"
    );
    let (status, out) = invoke("vault_list", json!({})).await;
    assert_eq!(status, 200, "reads still work: {out}");
    assert_eq!(
        app.http()
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "the process is up"
    );

    std::fs::remove_file(filler).unwrap();
    // Every pooled connection, also one whose transaction the full disk rolled back, writes again.
    for i in 0..12 {
        let (status, out) = invoke(
            "vault_set",
            json!({ "name": format!("AFTER_{i}"), "value": "written-after-space-returned" }),
        )
        .await;
        assert_eq!(
            status, 200,
            "write {i} works again without a restart: {out}"
        );
    }
    c.shutdown().await;
    let report = integrity(&db);
    assert!(
        report.starts_with("ok\n1"),
        "the database is intact: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_database_stops_start_up_with_one_clear_line_and_is_untouched() {
    let Some(disk) = SmallDisk::mount(16) else {
        return;
    };
    let db = disk.0.join("wb.db");
    let url = format!("sqlite://{}", db.display());
    let c = Cluster::start(&url, 1, ClusterOptions::default()).await;
    admin_with_key(&c.app(0)).await;
    c.shutdown().await;
    let before = integrity(&db);
    assert!(disk.remount("ro"), "remount read-only");
    let out = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(["serve", "--bind", "127.0.0.1:0", "--database-url", &url])
        .arg("--data-dir")
        .arg(temp_dir("rodata"))
        .env_remove("WB_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "it does not start on a read-only database"
    );
    assert!(
        stderr.contains("read-only") || stderr.contains("readonly"),
        "{stderr}"
    );
    assert!(
        stderr.lines().count() <= 3,
        "a clear message, not a dump: {stderr}"
    );
    assert!(disk.remount("rw"));
    assert_eq!(integrity(&db), before, "nothing was changed");
}
