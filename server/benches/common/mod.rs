//! What the benches share: a fresh workbench on SQLite in a temp dir with an admin and an API
//! key, served on a loopback port by the real router.

use std::net::SocketAddr;

use workbench_core::auth::{Principal, Role};
use workbench_core::{Workbench, WorkbenchOptions};
use workbench_server::keys::Keys;
use workbench_server::{AppState, ServeArgs, ServerConfig};

/// The admin's sign-in.
#[allow(dead_code)]
pub const EMAIL: &str = "bench@example.com";
#[allow(dead_code)]
pub const PASSWORD: &str = "bench password 1";

#[allow(dead_code)] // each bench uses the parts it needs
pub struct Bench {
    pub wb: Workbench,
    /// The temp dir holding the database and data (remove it when done).
    pub dir: std::path::PathBuf,
    pub admin: Principal,
    pub key: String,
    pub addr: SocketAddr,
}

/// Opens workbench (with `configure` applied to its options), creates an admin and a key, and
/// serves it on 127.0.0.1 until the process ends.
pub async fn start(tag: &str, configure: impl FnOnce(&mut WorkbenchOptions)) -> Bench {
    let dir = std::env::temp_dir().join(format!("wb-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite://{}", dir.join("bench.db").display());
    let mut options = WorkbenchOptions {
        object_store_url: url::Url::from_directory_path(dir.join("objects"))
            .unwrap()
            .to_string(),
        ..WorkbenchOptions::default()
    };
    configure(&mut options);
    let wb = Workbench::open(&db, options).await.unwrap();
    let (user, _) = wb
        .accounts()
        .create_user(EMAIL, PASSWORD, None, Role::Admin)
        .await
        .unwrap();
    let admin = wb
        .accounts()
        .principal_for_user(&user.id)
        .await
        .unwrap()
        .unwrap();
    let key = wb
        .accounts()
        .create_api_key(&admin, "bench")
        .await
        .unwrap()
        .secret
        .expose()
        .to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let args = ServeArgs {
        bind: addr,
        database_url: db,
        public_url: None,
        advertise_url: None,
        data_dir: dir.join("data"),
        site_root: dir.join("site"),
        trust_forwarded_for: false,
        password_sign_in: "on".into(),
        object_store_url: None,
        egress_allow_private: vec![],
        allowed_hosts: vec![],
        connect_ttl_seconds: 600,
        confirmation_ttl_seconds: 900,
        rest_result_max_bytes: 10 * 1024 * 1024,
        proxy_timeout_seconds: 60,
        proxy_max_concurrent_per_user: 8,
        searxng_url: None,
        brave_search_api_key: None,
        brave_search_url: workbench_core::builtin::BRAVE_DEFAULT_URL.parse().unwrap(),
        smtp_url: None,
        dns_resolver: None,
        email_hourly_limit: workbench_core::email::DEFAULT_HOURLY_LIMIT,
        metrics_token: None,
        otlp_endpoint: None,
        stdio_commands: Vec::new(),
    };
    let state = AppState::new(
        wb.clone(),
        ServerConfig::from_args(&args).unwrap(),
        Keys::load_or_create(&args.data_dir).unwrap(),
    );
    tokio::spawn(workbench_server::serve(
        listener,
        state,
        std::future::pending(),
    ));
    Bench {
        wb,
        dir,
        admin,
        key,
        addr,
    }
}
