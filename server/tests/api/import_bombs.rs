//! `POST /v1/apps/import` against a real `workbench serve` process under an address-space cap:
//! documents of at most 1 MiB that expand to gigabytes (a `$ref` fan-out in JSON, one large
//! YAML string aliased many times, YAML aliases nested in each other) are refused with 413
//! before memory grows, and the process stays up, serves, and its peak resident memory (VmHWM)
//! grows by less than 256 MiB.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::cli::provision_with_cli;
use crate::db_test;
use crate::helpers::{database_url, temp_dir};

/// The server's address-space cap (`ulimit -v`). Idle, the debug binary maps about 190 MiB with
/// two worker threads and two allocator arenas (450 MiB with the defaults on two cores) and
/// keeps 75 MiB resident; 1 GiB leaves ordinary work ample room and stops a process that tries
/// to materialise gigabytes at once, where an uncapped one would take the machine's memory.
const ADDRESS_SPACE_CAP_KIB: u64 = 1024 * 1024;
/// How much the server's peak resident memory may grow while it refuses every bomb.
const PEAK_GROWTH_LIMIT_KIB: u64 = 256 * 1024;

/// One `workbench serve` process with the cap, killed when dropped.
struct Capped {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Capped {
    async fn start(database_url: &str) -> Capped {
        let dir = temp_dir("import-bombs");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("serve.log");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v {ADDRESS_SPACE_CAP_KIB} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_workbench"))
            .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--database-url", database_url, "--data-dir"])
            .arg(&dir)
            .arg("--site-root")
            .arg(dir.join("site"))
            .env_remove("WB_DATABASE_URL")
            .env("WB_LOG", "warn")
            // Mapped memory then does not scale with the machine's cores (a worker thread's
            // stack and allocator arena each).
            .env("TOKIO_WORKER_THREADS", "2")
            .env("MALLOC_ARENA_MAX", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = Capped {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        for _ in 0..300 {
            if server.healthy().await {
                return server;
            }
            server.assert_alive("starting");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the server did not start within 30 s:\n{}",
            server.log_text()
        );
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn healthy(&self) -> bool {
        reqwest::get(format!("{}/healthz", self.base))
            .await
            .is_ok_and(|r| r.status() == 200)
    }

    fn assert_alive(&mut self, when: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "the server exited ({status}) while {when}:\n{}",
                self.log_text()
            );
        }
    }

    /// A `/proc/<pid>/status` field in KiB (`VmHWM`: peak resident memory; `VmSize`: mapped).
    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .strip_prefix(':')?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no {field} in {status}"))
    }

    /// Posts an import; the status and body, or a panic naming how the process died.
    async fn import(&mut self, key: &str, body: &Value) -> (u16, Value) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let res = http
            .post(format!("{}/v1/apps/import", self.base))
            .bearer_auth(key)
            .json(body)
            .send()
            .await;
        match res {
            Ok(res) => (
                res.status().as_u16(),
                res.json().await.unwrap_or(Value::Null),
            ),
            Err(e) => {
                // Give a dying process a moment to be reaped, to report how it ended.
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.assert_alive(&format!("answering an import ({e})"));
                panic!(
                    "the import request failed ({e}) though the server is still running:\n{}",
                    self.log_text()
                );
            }
        }
    }
}

impl Drop for Capped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ordinary document: the server must still import it before and after the bombs.
fn ordinary() -> String {
    r##"openapi: 3.0.3
info: { title: Inventory, version: 1.0.0 }
servers: [{ url: "https://inventory.example/api" }]
paths:
  /items:
    post:
      operationId: createItem
      requestBody: { required: true, content: { application/json: { schema: { $ref: "#/components/schemas/Item" } } } }
  /items/{id}:
    get:
      operationId: getItem
      parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
components:
  schemas:
    Item:
      type: object
      properties: { sku: { type: string }, name: { type: string }, parent: { $ref: "#/components/schemas/Item" } }
"##
    .to_owned()
}

/// Each schema refers to the next eight times, four levels deep, and the last carries a 16 KiB
/// description: one request body inlines to 8^4 × 16 KiB = 64 MiB in about 14,000 nodes (under
/// the per-operation node bound), and 200 operations use it (12.5 GiB). As a JSON object, ~40 KiB.
fn ref_fan_out_bomb() -> Value {
    let mut schemas = Map::new();
    for level in 0..4 {
        let next = json!({ "$ref": format!("#/components/schemas/L{}", level + 1) });
        let props: Map<String, Value> = "abcdefgh"
            .chars()
            .map(|c| (c.to_string(), next.clone()))
            .collect();
        schemas.insert(
            format!("L{level}"),
            json!({ "type": "object", "properties": props }),
        );
    }
    schemas.insert(
        "L4".into(),
        json!({ "type": "string", "description": "d".repeat(16 * 1024) }),
    );
    let body = json!({ "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/L0" } } } });
    let paths: Map<String, Value> = (0..200)
        .map(|i| {
            (
                format!("/p{i}"),
                json!({ "post": { "operationId": format!("op{i}"), "requestBody": body } }),
            )
        })
        .collect();
    let doc = json!({ "openapi": "3.1.0", "info": { "title": "bomb", "version": "1" }, "servers": [{ "url": "https://bomb.example" }], "paths": paths, "components": { "schemas": schemas } });
    assert!(serde_json::to_vec(&doc).unwrap().len() <= 1024 * 1024);
    doc
}

/// One 256 KiB string aliased 180,000 times: 44 GiB once expanded, in under 1 MiB of YAML (and
/// under both the parser's alias limit and the value count).
fn yaml_wide_alias_bomb() -> String {
    let mut doc = format!("openapi: 3.1.0\ninfo: {{ title: bomb, version: '1' }}\npaths: {{}}\nx-big: &b \"{}\"\nx-uses: [", "a".repeat(256 * 1024));
    doc.push_str(&vec!["*b"; 180_000].join(", "));
    doc.push_str("]\n");
    assert!(doc.len() <= 1024 * 1024, "{}", doc.len());
    doc
}

/// A billion laughs with 16 KiB leaves: six levels of eight aliases each (8^6 × 16 KiB = 4 GiB,
/// 300,000 values, under the value count), padded with enough plain values that the parser's
/// alias limit (a multiple of the document's events) lets it through.
fn yaml_nested_alias_bomb() -> String {
    let mut doc = format!("openapi: 3.1.0\ninfo: {{ title: bomb, version: '1' }}\npaths: {{}}\nx-pad: [{}]\nx-l0: &l0 \"{}\"\n", vec!["0"; 5_000].join(", "), "l".repeat(16 * 1024));
    for level in 1..=6 {
        doc.push_str(&format!(
            "x-l{level}: &l{level} [{}]\n",
            vec![format!("*l{}", level - 1); 8].join(", ")
        ));
    }
    assert!(doc.len() <= 1024 * 1024, "{}", doc.len());
    doc
}

db_test!(
    import_bombs_are_refused_before_memory_grows_and_the_process_keeps_serving,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let key = provision_with_cli(&url);
        let mut server = Capped::start(&url).await;
        // Warm up (first import, schema compiler, connection pool) before the baseline.
        let (status, preview) = server
            .import(
                &key,
                &json!({ "name": "inventory", "document": ordinary() }),
            )
            .await;
        assert_eq!(
            (status, preview["tools"].as_u64()),
            (200, Some(2)),
            "{preview}"
        );
        let (size_kib, hwm_before) = (server.status_kib("VmSize"), server.status_kib("VmHWM"));
        eprintln!(
            "import bombs: idle VmSize {} MiB, VmHWM {} MiB (cap {} MiB)",
            size_kib / 1024,
            hwm_before / 1024,
            ADDRESS_SPACE_CAP_KIB / 1024
        );

        let bombs = [
            (
                "a $ref fan-out (JSON)",
                json!({ "name": "bomb", "document": ref_fan_out_bomb() }),
            ),
            (
                "one YAML string aliased 180,000 times",
                json!({ "name": "bomb", "document": yaml_wide_alias_bomb() }),
            ),
            (
                "nested YAML aliases",
                json!({ "name": "bomb", "document": yaml_nested_alias_bomb() }),
            ),
        ];
        for (what, body) in &bombs {
            let started = Instant::now();
            let (status, out) = server.import(&key, body).await;
            let hwm = server.status_kib("VmHWM");
            eprintln!(
                "import bombs: {what}: {status} in {:?}, VmHWM {} MiB",
                started.elapsed(),
                hwm / 1024
            );
            assert_eq!(
                (status, out["error"]["code"].as_str()),
                (413, Some("payload_too_large")),
                "{what}: {out}"
            );
            let message = out["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("expands") && message.contains("MiB"),
                "{what}: {message}"
            );
            assert!(
                out["error"]["meta"].is_object(),
                "the documented error shape: {out}"
            );
            server.assert_alive(what);
        }

        assert!(server.healthy().await, "the server still answers /healthz");
        let (status, preview) = server
            .import(
                &key,
                &json!({ "name": "inventory", "document": ordinary() }),
            )
            .await;
        assert_eq!(
            (status, preview["tools"].as_u64()),
            (200, Some(2)),
            "an ordinary document still imports: {preview}"
        );
        let growth = server.status_kib("VmHWM").saturating_sub(hwm_before);
        eprintln!(
            "import bombs: peak resident memory grew by {} MiB",
            growth / 1024
        );
        assert!(
            growth < PEAK_GROWTH_LIMIT_KIB,
            "peak resident memory grew by {} MiB:\n{}",
            growth / 1024,
            server.log_text()
        );
    }
);
