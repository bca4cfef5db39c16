//! Test harness: `spawn_app` runs the real application (router + serve) on port 0 against a
//! fresh database: a temporary SQLite file, or a new PostgreSQL database per test.
//!
//! PostgreSQL: `WB_TEST_POSTGRES_URL` (default postgres://postgres@127.0.0.1:5432/test) names
//! the server; `WB_TEST_POSTGRES=required` (set by the test script and CI) turns "unreachable"
//! into a failure instead of a skip.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::redirect::Policy;
use sqlx::Connection;
use tokio::sync::{oneshot, OnceCell};
use workbench_core::auth::{Principal, Role};
use workbench_core::clock::ManualClock;
use workbench_core::{Workbench, WorkbenchOptions};
use workbench_server::keys::Keys;
use workbench_server::{AppState, ServeArgs, ServerConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub public_url: Option<String>,
    pub trust_forwarded_for: bool,
    /// Reuse the database of another app (two instances behind a load balancer).
    pub database_url: Option<String>,
    /// Private addresses http.fetch may reach (the operator setting), e.g. "127.0.0.1".
    pub egress_allow_private: Vec<&'static str>,
    /// Integration settings (base URLs of fakes, OAuth clients).
    pub integrations:
        std::collections::BTreeMap<String, workbench_core::integrations::IntegrationSettings>,
    pub connect_ttl_secs: Option<i64>,
    /// Reuse the data directory (master key, signing key, object storage) of another app: the
    /// second instance of one deployment.
    pub data_dir: Option<PathBuf>,
    /// `--proxy-timeout-seconds` (default 60) and `--proxy-max-concurrent-per-user` (default 8).
    pub proxy_timeout_secs: Option<u64>,
    pub proxy_max_concurrent: Option<u64>,
    /// `--rest-result-max-bytes` (default 10 MiB).
    pub rest_result_max_bytes: Option<u64>,
    /// How long held calls wait for a decision (default 900 s).
    pub confirmation_ttl_secs: Option<i64>,
    /// The search provider search.web uses (a fake on loopback).
    pub web_search: Option<workbench_core::builtin::SearchProvider>,
    /// Run the background delivery worker (off: tests call `deliveries().run_due()`).
    pub callback_worker: bool,
    /// The mail server (a sink on loopback), DNS server (a responder on loopback) and hourly
    /// limit email.send uses.
    pub email: workbench_core::email::EmailSettings,
    /// `--metrics-token`: /metrics is served to requests bearing it.
    pub metrics_token: Option<String>,
    /// `--stdio-commands`: the programs stdio MCP servers may run.
    pub stdio_commands: Vec<String>,
    /// `--password-sign-in off`: only break-glass accounts sign in with a password.
    pub password_sign_in_off: bool,
}

impl Options {
    /// An app allowed to reach loopback (fake upstreams, fake providers, another app).
    pub fn loopback() -> Options {
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    }
}

pub struct TestApp {
    pub base: String,
    /// The Origin a browser sends: the public URL's origin (`base` unless the app is one
    /// instance of a deployment behind a public URL).
    pub origin: String,
    pub wb: Workbench,
    pub clock: ManualClock,
    pub database_url: String,
    pub data_dir: PathBuf,
    /// The application state the in-process server runs with (None for `external`).
    state: Option<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// `http()`'s client, built once: building one reads and parses the system's certificate
    /// bundle (reqwest's native roots, which object_store turns on), tens of milliseconds
    /// unoptimised, and some tests send thousands of requests.
    http: reqwest::Client,
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "wb-test-{tag}-{}",
        workbench_core::crypto::random_base62(10)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Says that the running test is skipped and why: on stderr, and as one line
/// `<test>\t<reason>` appended to the file `WB_TEST_SKIP_LOG` names (scripts/test.sh sets it
/// and counts the lines per suite), so no test skips silently. Every skip goes through here.
pub fn skipped(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_owned();
    eprintln!("skipping {test}: {reason}");
    if let Ok(path) = std::env::var("WB_TEST_SKIP_LOG") {
        use std::io::Write;
        let line = format!("{test}\t{}\n", reason.replace(['\t', '\n'], " "));
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

fn pg_server_url() -> String {
    std::env::var("WB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn pg_required() -> bool {
    std::env::var("WB_TEST_POSTGRES")
        .map(|v| v == "required")
        .unwrap_or(false)
}

/// Creates a fresh PostgreSQL database and returns its URL, or None (skip) when PostgreSQL is
/// unreachable and not required.
pub async fn fresh_pg_database() -> Option<String> {
    static CLEANED: OnceCell<bool> = OnceCell::const_new();
    let server = pg_server_url();
    let mut conn = match sqlx::PgConnection::connect(&server).await {
        Ok(c) => c,
        Err(e) if pg_required() => panic!(
            "PostgreSQL is required (WB_TEST_POSTGRES=required) but {server} is unreachable: {e}"
        ),
        Err(e) => {
            skipped(&format!(
                "PostgreSQL unreachable at {server} ({e}); set WB_TEST_POSTGRES=required to fail instead"
            ));
            return None;
        }
    };
    CLEANED
        .get_or_init(|| async {
            // Databases left behind by earlier runs (a test process cannot drop its own at exit).
            let _ = workbench_core::store::testing::drop_stale_databases(&mut conn, "wbt_").await;
            true
        })
        .await;
    let name = format!(
        "wbt_{}_{}",
        std::process::id(),
        workbench_core::crypto::random_base62(10).to_lowercase()
    );
    workbench_core::store::testing::create_database(&mut conn, &name)
        .await
        .expect("create test database");
    let mut url = url::Url::parse(&server).unwrap();
    url.set_path(&format!("/{name}"));
    Some(url.to_string())
}

pub async fn database_url(backend: Backend) -> Option<String> {
    match backend {
        Backend::Sqlite => Some(format!(
            "sqlite://{}",
            temp_dir("db").join("wb.db").display()
        )),
        Backend::Postgres => fresh_pg_database().await,
    }
}

/// Spawns the app; None when the backend is PostgreSQL and it is unavailable (skipped).
pub async fn spawn_app(backend: Backend) -> Option<TestApp> {
    spawn_app_with(backend, Options::default()).await
}

/// With `WB_TEST_LOG` set (an env filter such as `info,workbench_core=debug`), the in-process
/// servers log to the test's captured output, which the harness prints for a failing test.
fn init_test_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("WB_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

pub async fn spawn_app_with(backend: Backend, options: Options) -> Option<TestApp> {
    init_test_log();
    let database_url = match options.database_url.clone() {
        Some(u) => u,
        None => database_url(backend).await?,
    };
    let clock = ManualClock::default();
    let data_dir = options.data_dir.clone().unwrap_or_else(|| temp_dir("data"));
    let keys = Keys::load_or_create(&data_dir).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let args = ServeArgs {
        bind: addr,
        database_url: database_url.clone(),
        public_url: options.public_url.as_deref().map(|u| u.parse().unwrap()),
        advertise_url: None,
        data_dir: data_dir.clone(),
        site_root: temp_dir("site"),
        trust_forwarded_for: options.trust_forwarded_for,
        password_sign_in: if options.password_sign_in_off {
            "off"
        } else {
            "on"
        }
        .into(),
        object_store_url: None,
        egress_allow_private: Vec::new(),
        allowed_hosts: Vec::new(),
        connect_ttl_seconds: 600,
        confirmation_ttl_seconds: 900,
        rest_result_max_bytes: options.rest_result_max_bytes.unwrap_or(10 * 1024 * 1024),
        proxy_timeout_seconds: options.proxy_timeout_secs.unwrap_or(60),
        proxy_max_concurrent_per_user: options.proxy_max_concurrent.unwrap_or(8),
        searxng_url: None,
        brave_search_api_key: None,
        brave_search_url: workbench_core::builtin::BRAVE_DEFAULT_URL.parse().unwrap(),
        smtp_url: None,
        dns_resolver: None,
        email_hourly_limit: workbench_core::email::DEFAULT_HOURLY_LIMIT,
        metrics_token: options.metrics_token.clone(),
        otlp_endpoint: None,
        stdio_commands: options.stdio_commands.clone(),
    };
    let mut config = ServerConfig::from_args(&args).unwrap();
    let wb = Workbench::open(
        &database_url,
        WorkbenchOptions {
            clock: Arc::new(clock.clone()),
            object_store_url: url::Url::from_directory_path(data_dir.join("objects"))
                .unwrap()
                .to_string(),
            egress_allow_private: options
                .egress_allow_private
                .iter()
                .map(|r| r.parse().unwrap())
                .collect(),
            master_keys: keys.master.clone(),
            integrations: options.integrations.clone(),
            proxy_token_key: *keys.jwt.bytes(),
            connect_ttl_secs: options.connect_ttl_secs.unwrap_or(600),
            confirmations: workbench_core::engine::ConfirmSettings {
                ttl_secs: options.confirmation_ttl_secs.unwrap_or(900),
                public_url: options
                    .public_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{addr}")),
            },
            web_search: options.web_search.clone(),
            email: options.email.clone(),
            stdio: config.stdio.clone(),
            password_sign_in: !options.password_sign_in_off,
        },
    )
    .await
    .expect("open test database");
    // Tests reload custom apps explicitly (see apps.rs), never behind their back, and deliver
    // callbacks by hand unless they ask for the worker.
    config.apps_reload_every = Duration::from_secs(3600);
    // Tests run sign-in re-checks themselves (`sso().recheck_due()`).
    config.sso_recheck_every = Duration::from_secs(3600);
    config.callback_worker = options.callback_worker;
    let state = AppState::new(wb.clone(), config, keys);
    let kept = state.clone();
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        workbench_server::serve(listener, state, async {
            let _ = rx.await;
        })
        .await
    });
    Some(TestApp {
        base: format!("http://{addr}"),
        origin: format!("http://{addr}"),
        wb,
        clock,
        database_url,
        data_dir,
        state: Some(kept),
        shutdown: Some(tx),
        server: Some(server),
        http: plain_client(),
    })
}

pub const PASSWORD: &str = "correct horse battery staple";

/// The longest a test's HTTP request may go unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A test's client: plain HTTP to loopback servers, so no certificates are loaded; no redirects
/// followed; a request unanswered for 120 s fails with its URL instead of hanging the suite.
fn client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tls_built_in_native_certs(false)
        .redirect(Policy::none())
        .timeout(REQUEST_TIMEOUT)
}

fn plain_client() -> reqwest::Client {
    client().build().unwrap()
}

impl TestApp {
    /// A view of a server this test did not start in-process (a `workbench serve` process at
    /// `base`), with `wb` opened on the same database for setup and inspection.
    pub fn external(
        base: String,
        origin: String,
        wb: Workbench,
        database_url: String,
        data_dir: PathBuf,
    ) -> TestApp {
        TestApp {
            base,
            origin,
            wb,
            clock: ManualClock::default(),
            database_url,
            data_dir,
            state: None,
            shutdown: None,
            server: None,
            http: plain_client(),
        }
    }

    /// Sends the shutdown signal (as SIGTERM would) and returns the server task, which ends
    /// once the server has drained.
    pub fn stop(&mut self) -> tokio::task::JoinHandle<std::io::Result<()>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.server.take().expect("the server runs until stopped")
    }

    /// The in-process server's state (the route table is built from it).
    pub fn state(&self) -> &AppState {
        self.state.as_ref().expect("an in-process app")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A user created the way the CLI does it; returns their principal.
    pub async fn user(&self, email: &str, role: Role) -> Principal {
        self.user_in(email, "default", role).await
    }

    /// A user of the project named `project` (created when new), as `user` makes them.
    pub async fn user_in(&self, email: &str, project: &str, role: Role) -> Principal {
        let (user, _) = self
            .wb
            .accounts()
            .create_user(email, PASSWORD, Some(project), role)
            .await
            .unwrap();
        self.wb
            .accounts()
            .principal_for_user(&user.id)
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn api_key(&self, who: &Principal) -> String {
        self.wb
            .accounts()
            .create_api_key(who, "test")
            .await
            .unwrap()
            .secret
            .expose()
            .to_owned()
    }

    /// A plain HTTP client: no cookies, no redirects followed (`client`).
    pub fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// A browser-like client: keeps cookies, sends our Origin on every request, follows no
    /// redirects (tests look at them).
    pub fn browser(&self) -> Browser {
        let mut headers = HeaderMap::new();
        headers.insert("origin", HeaderValue::from_str(&self.origin).unwrap());
        let client = client()
            .cookie_store(true)
            .default_headers(headers)
            .build()
            .unwrap();
        Browser {
            client,
            base: self.base.clone(),
        }
    }
}

pub struct Browser {
    pub client: reqwest::Client,
    pub base: String,
}

impl Browser {
    /// A page navigation, with the Accept header browsers send.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .header(
                "accept",
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            )
            .send()
            .await
            .unwrap()
    }

    /// Calls a portal server function the way the hydrated page does (form-encoded body).
    pub async fn call(&self, endpoint: &str, form: &[(&str, &str)]) -> reqwest::Response {
        self.client
            .post(format!("{}/api/{endpoint}", self.base))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    pub async fn sign_in(&self, email: &str, password: &str) -> reqwest::Response {
        self.call("sign_in", &[("email", email), ("password", password)])
            .await
    }
}

/// Runs the body once on SQLite and once on PostgreSQL, as `<name>::sqlite` and
/// `<name>::postgres`.
#[macro_export]
macro_rules! db_test {
    ($name:ident, |$backend:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $backend = $crate::helpers::Backend::Sqlite;
                $body
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let $backend = $crate::helpers::Backend::Postgres;
                $body
            }
        }
    };
}

/// `spawn_app` or skip the test (PostgreSQL unavailable and not required).
#[macro_export]
macro_rules! app {
    ($backend:expr) => {
        match $crate::helpers::spawn_app($backend).await {
            Some(app) => app,
            None => return,
        }
    };
    ($backend:expr, $options:expr) => {
        match $crate::helpers::spawn_app_with($backend, $options).await {
            Some(app) => app,
            None => return,
        }
    };
}

/// Calls an MCP method on /mcp with a bearer key and returns the HTTP response.
pub async fn mcp_request(
    app: &TestApp,
    key: &str,
    method: &str,
    params: serde_json::Value,
) -> reqwest::Response {
    app.http()
        .post(app.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
        .send()
        .await
        .unwrap()
}

/// Calls a meta-tool and returns (structured content, is_error).
pub async fn mcp_call(
    app: &TestApp,
    key: &str,
    tool: &str,
    args: serde_json::Value,
) -> (serde_json::Value, bool) {
    let res = mcp_request(
        app,
        key,
        "tools/call",
        serde_json::json!({ "name": tool, "arguments": args }),
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    let result = &body["result"];
    assert!(result.is_object(), "no result in {body}");
    let text = result["content"][0]["text"]
        .as_str()
        .expect("JSON text content");
    let structured = result["structuredContent"].clone();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap(),
        structured,
        "text and structured content agree"
    );
    (structured, result["isError"].as_bool().unwrap_or(false))
}

/// Runs execute_tools and returns the results array.
pub async fn execute(
    app: &TestApp,
    key: &str,
    executions: serde_json::Value,
) -> Vec<serde_json::Value> {
    let (out, _) = mcp_call(
        app,
        key,
        "execute_tools",
        serde_json::json!({ "executions": executions }),
    )
    .await;
    out["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {out}"))
        .clone()
}

/// An admin with an API key in a fresh project, ready to call tools.
pub async fn admin_with_key(app: &TestApp) -> (Principal, String) {
    let p = app.user("ada@example.com", Role::Admin).await;
    let key = app.api_key(&p).await;
    (p, key)
}

/// The first time `f` answers true, polling every 10 ms up to `limit`: how long it took.
pub async fn within(what: &str, limit: Duration, mut f: impl AsyncFnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}
