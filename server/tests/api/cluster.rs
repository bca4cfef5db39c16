//! Real `workbench serve` processes sharing one database and data directory, as several
//! instances behind a load balancer run: the multi-instance and fault tests start them, stop
//! them with SIGTERM or SIGKILL, and restart them. The test itself opens the same database
//! (`Cluster::wb`) to create users and keys and to inspect what the instances wrote.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use workbench_core::integrations::IntegrationSettings;
use workbench_core::{Workbench, WorkbenchOptions};
use workbench_server::keys::Keys;

use crate::helpers::{temp_dir, TestApp};

/// How a cluster's instances are started.
#[derive(Clone, Default)]
pub struct ClusterOptions {
    /// Integration settings, passed as `WB_INTEGRATION_<NAME>_<SETTING>` variables.
    pub integrations: BTreeMap<String, IntegrationSettings>,
    /// More `serve` arguments for every instance.
    pub args: Vec<String>,
}

/// One `workbench serve` process.
pub struct Instance {
    pub addr: SocketAddr,
    command: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Instance {
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_workbench"))
            .args(&self.command)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("WB_DATABASE_URL")
            .env("WB_LOG", "info,sqlx=warn,rmcp=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until `/healthz` answers (the process has migrated and listens).
    pub async fn wait_up(&mut self) {
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if http
                .get(format!("{}/healthz", self.base()))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "instance {} exited ({status}) while starting:\n{}",
                    self.addr,
                    self.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "instance {} did not start within 30 s:\n{}",
            self.addr,
            self.log_text()
        );
    }

    /// What the process wrote to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} {}", self.pid());
    }

    /// SIGKILL: the process stops at once, mid-request, writing nothing more.
    pub fn kill(&mut self) {
        self.signal("KILL");
        self.child.take().unwrap().wait().unwrap();
    }

    /// SIGTERM: the process drains and exits on its own (see `wait_exit`).
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Waits up to `limit` for the process to exit; its status, or None if it is still running.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.as_mut().expect("running").try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            if tokio::time::Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts the process again on the same address (after `kill` or an exit).
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the instance first");
        self.spawn();
        self.wait_up().await;
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Instances of one deployment: one database, one data directory (master and signing keys),
/// one public URL (the first instance's address, as a load balancer's would be).
pub struct Cluster {
    pub wb: Workbench,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub public_url: String,
    pub instances: Vec<Instance>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `WB_INTEGRATION_<NAME>_<SETTING>` variables for integration settings.
fn integration_env(settings: &BTreeMap<String, IntegrationSettings>) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (name, s) in settings {
        let name = name.to_ascii_uppercase();
        for (suffix, value) in [
            ("BASE_URL", &s.base_url),
            ("AUTHORIZE_URL", &s.authorize_url),
            ("TOKEN_URL", &s.token_url),
            ("CLIENT_ID", &s.client_id),
            ("CLIENT_SECRET", &s.client_secret),
            ("ISSUER", &s.issuer),
        ] {
            if let Some(v) = value {
                env.push((format!("WB_INTEGRATION_{name}_{suffix}"), v.clone()));
            }
        }
    }
    env
}

impl Cluster {
    /// `n` instances on `database_url`, each up and answering.
    pub async fn start(database_url: &str, n: usize, options: ClusterOptions) -> Cluster {
        let data_dir = temp_dir("cluster");
        let keys = Keys::load_or_create(&data_dir).unwrap();
        let wb = Workbench::open(
            database_url,
            WorkbenchOptions {
                master_keys: keys.master.clone(),
                proxy_token_key: *keys.jwt.bytes(),
                object_store_url: url::Url::from_directory_path(data_dir.join("objects"))
                    .unwrap()
                    .to_string(),
                ..Default::default()
            },
        )
        .await
        .expect("open the cluster's database");
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let public_url = format!("http://127.0.0.1:{}", ports[0]);
        let env = integration_env(&options.integrations);
        let mut instances = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let mut command: Vec<String> = [
                "serve",
                "--database-url",
                database_url,
                "--bind",
                &format!("127.0.0.1:{port}"),
                "--public-url",
                &public_url,
                "--egress-allow-private",
                "127.0.0.1",
                "--advertise-url",
                &format!("http://127.0.0.1:{port}"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            command.extend([
                "--data-dir".into(),
                path(&data_dir),
                "--site-root".into(),
                path(&data_dir.join("site")),
            ]);
            command.extend(options.args.iter().cloned());
            let mut instance = Instance {
                addr: SocketAddr::from(([127, 0, 0, 1], *port)),
                command,
                env: env.clone(),
                log: data_dir.join(format!("instance-{i}.log")),
                child: None,
            };
            instance.spawn();
            instances.push(instance);
        }
        for instance in &mut instances {
            instance.wait_up().await;
        }
        Cluster {
            wb,
            database_url: database_url.to_owned(),
            data_dir,
            public_url,
            instances,
        }
    }

    /// Instance `i` as a `TestApp`: requests go to it directly, and its browser sends the
    /// deployment's public origin, as behind a load balancer.
    pub fn app(&self, i: usize) -> TestApp {
        TestApp::external(
            self.instances[i].base(),
            self.public_url.clone(),
            self.wb.clone(),
            self.database_url.clone(),
            self.data_dir.clone(),
        )
    }

    /// Stops every instance with SIGTERM (each drains and exits) and closes the test's own
    /// connections, so nothing holds the database open.
    pub async fn shutdown(mut self) {
        for i in &self.instances {
            if i.child.is_some() {
                i.terminate();
            }
        }
        for i in &mut self.instances {
            if i.child.is_some() {
                assert!(
                    i.wait_exit(Duration::from_secs(30)).await.is_some(),
                    "instance {} did not exit",
                    i.addr
                );
            }
        }
        self.wb.db().close().await;
    }

    /// Every instance's log, for a failure message.
    pub fn logs(&self) -> String {
        self.instances
            .iter()
            .map(|i| format!("--- {} ---\n{}", i.addr, i.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}
