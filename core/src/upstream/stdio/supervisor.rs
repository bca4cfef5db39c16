//! Runs one stdio server's process on this instance: started on first use (or at load for
//! `start: boot`), with the MCP handshake within the server's timeout; a process that exits
//! is restarted with exponential backoff (calls meanwhile fail at once as UNAVAILABLE, which
//! opens the server's breaker), a `boot` server proactively; stopped when idle past
//! `idle_shutdown_s`, when the server is removed, and when workbench ends (its guard sees the
//! lifeline close). The state, restarts, uptime and memory are what the registry view shows.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use super::session::{StdioSession, Tail};
use super::{guard, landlock};
use super::{Start, StdioConfig, StdioSettings};
use crate::clock::Clock;
use crate::upstream::client::{OnToolsChanged, RpcError, PROTOCOL_VERSION};
use crate::vault::Vault;
pub use workbench_model::upstream::ProcessState;

/// Restart delays: 500 ms doubling up to a minute.
const BACKOFF_FIRST_MS: i64 = 500;
const BACKOFF_MAX_MS: i64 = 60_000;
/// A process that lived this long before it exited starts the backoff afresh.
const HEALTHY_AFTER_MS: i64 = 30_000;

/// What the registry view and /metrics show of a server's process on this instance.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ProcessView {
    pub state: ProcessState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_start_in_ms: Option<i64>,
    /// What confines the process (always: environment, descriptors, limits, process group;
    /// the filesystem where the kernel has Landlock).
    pub confinement: Vec<String>,
    /// The last stderr lines, scrubbed of the project's secrets.
    pub stderr_tail: Vec<String>,
}

/// One running process.
struct Running {
    session: Arc<StdioSession>,
    /// The guard's pid (the server is its only child).
    guard_pid: u32,
    started_at: i64,
    /// True once the process's exit is recorded.
    exited: tokio::sync::watch::Receiver<bool>,
    /// Set when workbench stops the process itself (idle, removal, a failed start): its exit
    /// is then no crash.
    on_purpose: Arc<std::sync::atomic::AtomicBool>,
}

/// How long to wait for an ended process's exit to be recorded: the guard's whole grace.
const EXIT_WAIT: Duration =
    Duration::from_millis((guard::STDIN_GRACE_MS + guard::TERM_GRACE_MS + 2_000) as u64);

pub struct Supervisor {
    project_id: String,
    name: String,
    config: StdioConfig,
    work_dir: std::path::PathBuf,
    vault: Vault,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    on_changed: OnToolsChanged,
    run: tokio::sync::Mutex<Option<Running>>,
    /// The write end of the running process's lifeline: dropping it stops the process.
    lifeline: Mutex<Option<OwnedFd>>,
    tail: Tail,
    restarts: AtomicU64,
    failures: AtomicU64,
    next_start_at: AtomicI64,
    last_used: AtomicI64,
    /// Why the last process ended or could not start, with its last stderr line: for the
    /// registry view (admins) and the log.
    last_exit: Mutex<Option<String>>,
    /// The same without stderr: what callers are told (stderr may hold anything).
    last_reason: Mutex<Option<String>>,
    /// Set when the server is removed: nothing starts again.
    retired: std::sync::atomic::AtomicBool,
    /// Why workbench stopped the running process (its memory, a broken session), reported
    /// as its exit.
    killed_for: Mutex<Option<String>>,
    me: Weak<Supervisor>,
}

/// What every process of one server is started with, besides its `StdioConfig`.
#[derive(Clone)]
pub struct Context<'a> {
    pub project_id: &'a str,
    pub server_id: &'a str,
    pub name: &'a str,
    pub settings: &'a StdioSettings,
    pub vault: Vault,
    pub clock: Arc<dyn Clock>,
    /// The handshake's (and each call's) timeout.
    pub timeout: Duration,
    pub on_changed: OnToolsChanged,
}

impl Supervisor {
    pub fn new(config: StdioConfig, cx: Context<'_>) -> Arc<Supervisor> {
        let Context {
            project_id,
            server_id,
            name,
            settings,
            vault,
            clock,
            timeout,
            on_changed,
        } = cx;
        let s = Arc::new_cyclic(|me| Supervisor {
            project_id: project_id.to_owned(),
            name: name.to_owned(),
            work_dir: config
                .cwd
                .clone()
                .map(Into::into)
                .unwrap_or_else(|| settings.work_root.join(server_id)),
            config,
            vault,
            clock,
            timeout,
            on_changed,
            run: tokio::sync::Mutex::new(None),
            lifeline: Mutex::new(None),
            tail: Arc::default(),
            restarts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            next_start_at: AtomicI64::new(0),
            last_used: AtomicI64::new(0),
            last_exit: Mutex::new(None),
            last_reason: Mutex::new(None),
            retired: Default::default(),
            killed_for: Mutex::new(None),
            me: me.clone(),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(tend(Arc::downgrade(&s)));
        }
        s
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The running session, starting the process when there is none (or it ended). While a
    /// restart waits out its backoff the answer is at once `NotSent` (the breaker counts it).
    pub async fn session(&self) -> Result<Arc<StdioSession>, RpcError> {
        self.last_used.store(self.now(), Ordering::Relaxed);
        let mut run = self.run.lock().await;
        if let Some(r) = run.as_ref() {
            if r.session.ended().is_none() && !*r.exited.borrow() {
                return Ok(r.session.clone());
            }
        }
        if let Some(old) = run.take() {
            // It ended by itself: its exit (a crash, and the backoff it starts) is recorded
            // before anything starts again.
            self.note_broken(&old);
            old.session.close_stdin().await;
            let mut exited = old.exited.clone();
            let _ = tokio::time::timeout(EXIT_WAIT, exited.wait_for(|e| *e)).await;
            self.lifeline.lock().expect("lifeline lock").take();
        }
        if self.retired.load(Ordering::Relaxed) {
            return Err(RpcError::NotSent("the server was removed".into()));
        }
        let wait = self.next_start_at.load(Ordering::Relaxed) - self.now();
        if wait > 0 {
            let why = self.last_reason.lock().expect("exit lock").clone();
            return Err(RpcError::NotSent(format!(
                "the server's process {}; it starts again in {} ms",
                why.unwrap_or_else(|| "failed".into()),
                wait
            )));
        }
        match self.start().await {
            Ok(r) => {
                let s = r.session.clone();
                *run = Some(r);
                Ok(s)
            }
            Err(e) => {
                self.failed(format!("could not start: {e}"));
                Err(e)
            }
        }
    }

    /// Records a failure: the next start waits out the backoff.
    fn failed(&self, why: String) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let delay = (BACKOFF_FIRST_MS << (n - 1).min(16)).min(BACKOFF_MAX_MS);
        self.next_start_at
            .store(self.now() + delay, Ordering::Relaxed);
        let full = self.with_stderr(why.clone());
        tracing::warn!(server = %self.name, why = %full, retry_in_ms = delay, "stdio server process failed");
        *self.last_exit.lock().expect("exit lock") = Some(full);
        *self.last_reason.lock().expect("exit lock") = Some(why);
    }

    /// The process's last stderr line (scrubbed of the project's secrets), for admins.
    pub fn last_stderr(&self) -> Option<String> {
        self.tail.lock().expect("tail lock").back().cloned()
    }

    async fn start(&self) -> Result<Running, RpcError> {
        let not_started = |why: String| RpcError::NotSent(why);
        let mut env = Vec::with_capacity(self.config.env.len());
        let refs: Vec<String> = self
            .config
            .vault_refs()
            .map(|(_, n)| n.to_owned())
            .collect();
        let secrets = if refs.is_empty() {
            Default::default()
        } else {
            self.vault
                .reveal(&self.project_id, &refs)
                .await
                .map_err(|_| not_started("the vault cannot be read right now".into()))?
        };
        for (k, v) in &self.config.env {
            match super::vault_ref(v) {
                Some(name) => match secrets.get(name) {
                    Some(secret) => {
                        env.push((k.clone(), zeroize::Zeroizing::new(secret.to_string())))
                    }
                    None => {
                        return Err(not_started(format!(
                            "the vault secret {name} (env {k}) is missing"
                        )))
                    }
                },
                None => env.push((k.clone(), zeroize::Zeroizing::new(v.clone()))),
            }
        }
        std::fs::create_dir_all(&self.work_dir).map_err(|e| {
            not_started(format!(
                "cannot make the working directory {}: {e}",
                self.work_dir.display()
            ))
        })?;
        let (read, write) =
            guard::lifeline().map_err(|e| not_started(format!("cannot make a pipe: {e}")))?;
        let mut cmd = tokio::process::Command::new(&self.config.command);
        cmd.args(&self.config.args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&self.work_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        let rules = landlock::Rules::new(
            std::path::Path::new(&self.config.command),
            &self.work_dir,
            &self.config.filesystem.read,
            &self.config.filesystem.write,
        );
        guard::install(&mut cmd, &read, &self.config.limits, rules);
        let mut child = cmd
            .spawn()
            .map_err(|e| not_started(format!("cannot start {}: {e}", self.config.command)))?;
        drop(read);
        let guard_pid = child.id().unwrap_or(0);
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped stdin"),
            child.stdout.take().expect("piped stdout"),
            child.stderr.take().expect("piped stderr"),
        );
        let mut scrubber = self
            .vault
            .scrubber(&self.project_id)
            .await
            .unwrap_or_default();
        for (k, v) in &env {
            if super::vault_ref(&self.config.env[k]).is_some() {
                scrubber.add(k, v);
            }
        }
        let session = StdioSession::start(
            &self.name,
            stdin,
            stdout,
            stderr,
            scrubber,
            self.tail.clone(),
            self.on_changed.clone(),
        );
        *self.lifeline.lock().expect("lifeline lock") = Some(write);
        let (tx, exited) = tokio::sync::watch::channel(false);
        let started_at = self.now();
        let me = self.me.clone();
        let on_purpose: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let purpose = on_purpose.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            if let Some(me) = me.upgrade() {
                me.exited(started_at, status, purpose.load(Ordering::Relaxed));
            }
            let _ = tx.send(true);
        });
        let give_up = || {
            on_purpose.store(true, Ordering::Relaxed);
            self.lifeline.lock().expect("lifeline lock").take();
        };
        let hello = session
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": crate::upstream::client::offered(),
                    "clientInfo": { "name": "workbench", "version": env!("CARGO_PKG_VERSION") },
                }),
                self.timeout,
            )
            .await;
        let hello = match hello {
            Ok(h) => h,
            Err(e) => {
                give_up();
                session.close_stdin().await;
                let why = match e {
                    RpcError::Timeout(ms) => {
                        format!("the server did not answer initialize within {ms} ms")
                    }
                    other => other.to_string(),
                };
                return Err(not_started(why));
            }
        };
        if hello
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            give_up();
            return Err(not_started(
                "the server's initialize answer has no protocolVersion".into(),
            ));
        }
        let _ = session
            .capabilities
            .set(crate::upstream::client::capabilities_of(&hello));
        if let Err(e) = session.notify("notifications/initialized").await {
            give_up();
            return Err(e);
        }
        tracing::info!(server = %self.name, pid = guard_pid, "stdio server started");
        Ok(Running {
            session,
            guard_pid,
            started_at,
            exited,
            on_purpose,
        })
    }

    /// `why`, with the last stderr line when there is one.
    fn with_stderr(&self, why: String) -> String {
        match self.last_stderr() {
            Some(last) => format!("{why}; its last stderr line: {last}"),
            None => why,
        }
    }

    /// The process of a start at `started_at` exited; unless workbench stopped it, that is
    /// a crash: counted, and the next start waits out the backoff.
    fn exited(
        &self,
        started_at: i64,
        status: std::io::Result<std::process::ExitStatus>,
        on_purpose: bool,
    ) {
        let killed_for = self.killed_for.lock().expect("killed lock").take();
        if on_purpose || self.retired.load(Ordering::Relaxed) {
            return;
        }
        self.lifeline.lock().expect("lifeline lock").take();
        let code = status.ok().and_then(|s| s.code());
        let why = match (killed_for, code) {
            (Some(why), _) => why,
            (None, Some(c)) if c > 128 => format!("was killed by signal {}", c - 128),
            (None, Some(c)) => format!("exited with status {c}"),
            (None, None) => "ended".to_owned(),
        };
        if self.now() - started_at >= HEALTHY_AFTER_MS {
            self.failures.store(0, Ordering::Relaxed);
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        self.failed(why);
    }

    /// Stops the process now (the guard takes it through stdin EOF, SIGTERM, SIGKILL) and
    /// starts nothing again: the server was removed.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        self.lifeline.lock().expect("lifeline lock").take();
    }

    /// Stops the running process, if any, and waits (bounded) until it is gone.
    pub async fn stop(&self) {
        let Some(r) = self.run.lock().await.take() else {
            return;
        };
        r.on_purpose.store(true, Ordering::Relaxed);
        self.lifeline.lock().expect("lifeline lock").take();
        r.session.close_stdin().await;
        let mut exited = r.exited.clone();
        let _ = tokio::time::timeout(EXIT_WAIT, exited.wait_for(|e| *e)).await;
        tracing::info!(server = %self.name, "stdio server stopped");
    }

    /// What the registry view shows.
    pub async fn view(&self) -> ProcessView {
        let now = self.now();
        let run = self.run.lock().await;
        let alive = run
            .as_ref()
            .filter(|r| r.session.ended().is_none() && !*r.exited.borrow());
        let next = self.next_start_at.load(Ordering::Relaxed) - now;
        let server_pid = alive.and_then(|r| server_pid(r.guard_pid));
        let memory = alive.map(|r| tree_resident_bytes(r.guard_pid));
        ProcessView {
            state: match alive {
                Some(_) => ProcessState::Running,
                None if next > 0 => ProcessState::Restarting,
                None => ProcessState::Stopped,
            },
            pid: server_pid,
            restarts: self.restarts.load(Ordering::Relaxed),
            uptime_ms: alive.map(|r| now - r.started_at),
            memory_bytes: memory,
            last_exit: self.last_exit.lock().expect("exit lock").clone(),
            next_start_in_ms: (alive.is_none() && next > 0).then_some(next),
            confinement: confinement(),
            stderr_tail: self
                .tail
                .lock()
                .expect("tail lock")
                .iter()
                .cloned()
                .collect(),
        }
    }
}

impl Supervisor {
    /// When `r`'s session ended because of what the server wrote (not because it exited),
    /// stops its process with that reason as its exit, which counts as a crash.
    fn note_broken(&self, r: &Running) {
        let Some(why) = r.session.ended() else {
            return;
        };
        if why.contains("closed its stdout") || r.on_purpose.load(Ordering::Relaxed) {
            return;
        }
        {
            let mut killed = self.killed_for.lock().expect("killed lock");
            if killed.is_none() {
                *killed = Some(format!("was stopped: {why}"));
            }
        }
        self.lifeline.lock().expect("lifeline lock").take();
    }

    /// Kills the running process when it and what it started use more resident memory than
    /// its limit; its exit then reports why.
    fn watch_memory(&self, r: &Running) {
        let limit = self.config.limits.memory_mb.saturating_mul(1024 * 1024);
        if limit == 0 {
            return;
        }
        let used = tree_resident_bytes(r.guard_pid);
        if used <= limit {
            return;
        }
        let Some(server) = server_pid(r.guard_pid) else {
            return;
        };
        let why = format!(
            "was killed: it used {} MiB of memory, past its limit of {} MiB",
            used / (1024 * 1024),
            self.config.limits.memory_mb
        );
        tracing::warn!(server = %self.name, used, limit, "stdio server past its memory limit; killing it");
        *self.killed_for.lock().expect("killed lock") = Some(why);
        // The guard then kills the rest of its group and descendants, and exits.
        // SAFETY: a signal to a pid this supervisor's guard owns (its only child).
        unsafe { libc::kill(server as libc::pid_t, libc::SIGKILL) };
    }
}

/// What confines a server's process on this kernel.
fn confinement() -> Vec<String> {
    let mut c: Vec<String> = [
        "clean environment",
        "no inherited descriptors",
        "resource limits",
        "own process group, stopped with workbench",
        "no new privileges",
    ]
    .map(String::from)
    .to_vec();
    c.push(match landlock::abi() {
        Some(v) if v >= 6 => format!("landlock filesystem (ABI {v}): system directories read-only, working directory and declared paths; no signals or abstract unix sockets outside its sandbox"),
        Some(v) => format!("landlock filesystem (ABI {v}): system directories read-only, working directory and declared paths"),
        None => "filesystem not confined: this kernel has no Landlock".into(),
    });
    c
}

/// Starts `boot` servers, restarts them after a crash, and stops idle processes.
async fn tend(me: Weak<Supervisor>) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let Some(s) = me.upgrade() else { return };
        if s.retired.load(Ordering::Relaxed) {
            return;
        }
        let idle = s.config.idle_shutdown_s as i64 * 1000;
        let running = s.lifeline.lock().expect("lifeline lock").is_some();
        // The running process (not while a start or a stop holds it: the next tick sees it):
        // past its memory it is killed, and a session that broke (a line that is not
        // JSON-RPC, an oversized one) stops it now, not at the next call.
        if running {
            if let Ok(run) = s.run.try_lock() {
                if let Some(r) = run.as_ref().filter(|r| !*r.exited.borrow()) {
                    s.watch_memory(r);
                    s.note_broken(r);
                }
            }
        }
        if idle > 0 && running && s.now() - s.last_used.load(Ordering::Relaxed) >= idle {
            tracing::info!(server = %s.name, "stdio server idle; stopping it");
            s.stop().await;
        } else if s.config.start == Start::Boot
            && !running
            && s.next_start_at.load(Ordering::Relaxed) <= s.now()
            && (idle == 0 || s.last_used.load(Ordering::Relaxed) == 0)
        {
            let _ = s.session().await;
        }
    }
}

/// The server's pid: the guard's only child.
fn server_pid(guard: u32) -> Option<u32> {
    children_of(guard).first().copied()
}

/// Resident memory of every process under `guard` (the server and all it started; the guard
/// itself, a fork of workbench, not counted).
fn tree_resident_bytes(guard: u32) -> u64 {
    let mut total = 0;
    let mut todo = children_of(guard);
    let mut seen = 0;
    while let Some(pid) = todo.pop() {
        seen += 1;
        if seen > 4096 {
            break;
        }
        total += resident_bytes(pid).unwrap_or(0);
        todo.extend(children_of(pid));
    }
    total
}

/// The children of `pid`, whichever of its threads started them.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            std::fs::read_to_string(t.path().join("children")).ok()
        })
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Resident memory of `pid` (VmRSS).
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
