//! The services handle every surface holds: one database, one clock, and the domain services
//! built on them (accounts, catalog and engine, egress rules, audit). Cheap to clone.

use std::sync::Arc;

use crate::audit::{AuditLog, Recorder};
use crate::auth::Accounts;
use crate::builtin::{self, BuiltinServices, ObjectStorage};
use crate::catalog::Catalog;
use crate::clock::{Clock, SystemClock};
use crate::connections::{Connections, ProxyTokens, DEFAULT_CONNECT_TTL_SECS};
use crate::delivery::Deliveries;
use crate::egress::{AddrRange, EgressRules, GuardedClient, PrivateAllowance};
use crate::email::{Email, EmailSettings};
use crate::engine::{ConfirmSettings, Engine, EngineParts, Idempotency};
use crate::integrations::{AppRegistry, IntegrationSettings, Integrations, Outbound};
use crate::metering::Metering;
use crate::notify::Webhooks;
use crate::oauth::OAuthServer;
use crate::plugins::Apps;
use crate::policy::Policies;
use crate::schedule::Schedules;
use crate::sso::Sso;
use crate::store::Db;
use crate::toolsets::ToolSets;
use crate::upstream::Upstreams;
use crate::vault::{KeyRing, Vault};
use crate::Result;

#[derive(Clone)]
pub struct WorkbenchOptions {
    pub clock: Arc<dyn Clock>,
    /// Where project storage keeps bytes (`file:///dir`, `s3://bucket/prefix`, `memory:///`).
    pub object_store_url: String,
    /// Addresses outbound requests may reach despite being private (operator setting).
    pub egress_allow_private: Vec<AddrRange>,
    /// Master keys sealing the vault (empty: vault operations fail with a clear error).
    pub master_keys: KeyRing,
    /// Operator settings per integration (base URLs, OAuth clients).
    pub integrations: std::collections::BTreeMap<String, IntegrationSettings>,
    /// Signing key of curl_session proxy tokens.
    pub proxy_token_key: [u8; 32],
    /// Lifetime of pending connections (`CONNECT_TTL_SECONDS`).
    pub connect_ttl_secs: i64,
    /// Where confirmation links point and how long held calls wait (D15).
    pub confirmations: ConfirmSettings,
    /// The search provider search.web uses (operator setting).
    pub web_search: Option<builtin::SearchProvider>,
    /// The mail server, DNS server and hourly limit email.send uses (operator settings).
    pub email: EmailSettings,
    /// The programs stdio MCP servers may run and where they work (operator settings).
    pub stdio: crate::upstream::stdio::StdioSettings,
    /// Whether the portal accepts passwords (off: break-glass accounts only; single sign-on).
    pub password_sign_in: bool,
}

impl Default for WorkbenchOptions {
    fn default() -> Self {
        WorkbenchOptions {
            clock: Arc::new(SystemClock),
            object_store_url: "memory:///".into(),
            egress_allow_private: Vec::new(),
            master_keys: KeyRing::new(),
            integrations: Default::default(),
            proxy_token_key: crate::crypto::random_bytes::<32>(),
            connect_ttl_secs: DEFAULT_CONNECT_TTL_SECS,
            confirmations: ConfirmSettings::default(),
            web_search: None,
            email: EmailSettings::default(),
            stdio: Default::default(),
            password_sign_in: true,
        }
    }
}

/// The assembled services. Cloned into every request's handler, so a clone is one reference
/// count: the services live once, in [`Parts`].
#[derive(Clone)]
pub struct Workbench(Arc<Parts>);

#[doc(hidden)]
pub struct Parts {
    db: Db,
    clock: Arc<dyn Clock>,
    accounts: Accounts,
    engine: Engine,
    egress: EgressRules,
    audit: AuditLog,
    mcp_sessions: crate::mcp_sessions::McpSessions,
    vault: Vault,
    idempotency: Idempotency,
    connections: Connections,
    proxy_tokens: ProxyTokens,
    oauth: OAuthServer,
    apps: Apps,
    metering: Metering,
    upstreams: Upstreams,
    policies: Policies,
    tool_sets: ToolSets,
    webhooks: Webhooks,
    schedules: Schedules,
    deliveries: Deliveries,
    email: Arc<Email>,
    sso: Sso,
}

impl std::ops::Deref for Workbench {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl Workbench {
    /// Connects, migrates and assembles the services.
    pub async fn open(database_url: &str, options: WorkbenchOptions) -> Result<Workbench> {
        let db = Db::connect(database_url).await?;
        db.migrate().await?;
        let wb = Workbench::with_db(db, options)?;
        wb.apps.reload_all().await?;
        wb.upstreams.reload_all().await?;
        Ok(wb)
    }

    pub fn with_db(db: Db, options: WorkbenchOptions) -> Result<Workbench> {
        let clock = options.clock;
        let storage = Arc::new(ObjectStorage::open(
            &options.object_store_url,
            db.clone(),
            clock.clone(),
        )?);
        let vault = Vault::new(db.clone(), clock.clone(), options.master_keys);
        let allowance = PrivateAllowance(options.egress_allow_private);
        let guarded = GuardedClient::new(allowance.clone());
        let vectors = Arc::new(builtin::VectorNamespaces::new(db.clone(), clock.clone()));
        let deliveries = Deliveries::new(
            db.clone(),
            clock.clone(),
            vault.clone(),
            guarded.clone(),
            allowance.clone(),
        );
        let schedules = Schedules::new(
            db.clone(),
            clock.clone(),
            vault.clone(),
            guarded.clone(),
            deliveries.clone(),
        );
        let email = Arc::new(Email::new(db.clone(), clock.clone(), options.email)?);
        let services = BuiltinServices {
            db: db.clone(),
            http: guarded.clone(),
            storage,
            vault: vault.clone(),
            vectors,
            search: options.web_search,
            schedules: Arc::new(schedules.clone()),
            email: email.clone(),
        };
        let api = crate::integrations::api_client();
        let integrations = Arc::new(crate::plugins::load_integrations(
            &options.integrations,
            &api,
        )?);
        let registry = Arc::new(AppRegistry::default());
        let connections = Connections::new(
            db.clone(),
            clock.clone(),
            vault.clone(),
            integrations.clone(),
            registry.clone(),
            options.connect_ttl_secs,
        );
        let mut tools = builtin::tools(&services)?;
        tools.extend(crate::plugins::plugin_tools(&integrations, &connections)?);
        let catalog = Arc::new(Catalog::new(tools)?);
        let upstreams = Upstreams::new(
            db.clone(),
            clock.clone(),
            catalog.clone(),
            vault.clone(),
            guarded.clone(),
            allowance.clone(),
            crate::upstream::SignInParts {
                connections: connections.clone(),
                registry: registry.clone(),
                ours: crate::upstream::discovery::OurClient::for_public_url(
                    &options.confirmations.public_url,
                ),
            },
            options.stdio,
        );
        let webhooks = Webhooks::new(
            db.clone(),
            clock.clone(),
            vault.clone(),
            deliveries.clone(),
            allowance.clone(),
        );
        let apps = Apps::new(
            db.clone(),
            clock.clone(),
            registry,
            catalog.clone(),
            integrations.clone(),
            connections.clone(),
            vault.clone(),
            Outbound::guarded(guarded.reqwest(), allowance),
            guarded.clone(),
        );
        let recorder = Recorder::start(db.clone());
        let accounts = Accounts::new(db.clone(), clock.clone())
            .with_password_sign_in(options.password_sign_in);
        let sso = Sso::new(
            db.clone(),
            clock.clone(),
            vault.clone(),
            connections.clone(),
            guarded.clone(),
            options.confirmations.public_url.clone(),
        );
        let policies = Policies::new(db.clone(), clock.clone());
        let engine = Engine::new(
            catalog,
            EngineParts {
                db: db.clone(),
                recorder: recorder.clone(),
                clock: clock.clone(),
                vault: vault.clone(),
                connections: connections.clone(),
                policies: policies.clone(),
                accounts: accounts.clone(),
                limits: crate::limits::Limits::new(db.clone(), clock.clone()),
                confirm: options.confirmations,
                webhooks: webhooks.clone(),
            },
        );
        let audit = AuditLog::new(db.clone(), recorder.clone(), vault.clone(), clock.clone());
        Ok(Workbench(Arc::new(Parts {
            apps,
            tool_sets: ToolSets::new(
                db.clone(),
                clock.clone(),
                engine.clone(),
                upstreams.clone(),
                audit.clone(),
            ),
            upstreams,
            engine,
            oauth: OAuthServer::new(db.clone(), clock.clone(), accounts.clone(), guarded.clone()),
            accounts,
            policies,
            webhooks,
            schedules,
            deliveries,
            email,
            sso,
            metering: Metering::new(db.clone(), recorder.clone(), clock.clone()),
            proxy_tokens: ProxyTokens::new(db.clone(), clock.clone(), options.proxy_token_key),
            connections,
            idempotency: Idempotency::new(db.clone(), clock.clone()),
            audit,
            mcp_sessions: crate::mcp_sessions::McpSessions::new(db.clone(), clock.clone()),
            vault,
            egress: EgressRules::new(db.clone(), clock.clone()),
            db,
            clock,
        })))
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Everything /metrics shows, in the Prometheus text format: calls and their latency
    /// since this process started, then gauges read now (upstream breakers and in-flight
    /// calls, the database pool, pending confirmations, deliveries due, record write failures).
    pub async fn metrics_text(&self) -> Result<String> {
        use crate::metrics::{escape, gauge};
        let mut out = String::new();
        self.metering.calls().render(&mut out);
        let now = self.clock.now_ms();
        let ups = self.upstreams.gauges().await;
        let mut states = Vec::new();
        let mut in_flight = Vec::new();
        let (mut p_states, mut p_restarts, mut p_uptime, mut p_memory) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for u in &ups {
            let labels = format!(
                "server=\"{}\",name=\"{}\"",
                escape(&u.server_id),
                escape(&u.name)
            );
            for &s in crate::upstream::BreakerState::ALL {
                states.push((
                    format!("{labels},state=\"{s}\""),
                    if u.breaker == s { 1.0 } else { 0.0 },
                ));
            }
            for (slot, p) in u.processes.iter().enumerate() {
                let labels = format!("{labels},slot=\"{slot}\"");
                for &s in crate::upstream::stdio::supervisor::ProcessState::ALL {
                    p_states.push((
                        format!("{labels},state=\"{s}\""),
                        if p.state == s { 1.0 } else { 0.0 },
                    ));
                }
                p_restarts.push((labels.clone(), p.restarts as f64));
                p_uptime.push((labels.clone(), p.uptime_ms.unwrap_or(0) as f64 / 1000.0));
                p_memory.push((labels, p.memory_bytes.unwrap_or(0) as f64));
            }
            in_flight.push((labels, u.in_flight as f64));
        }
        gauge(
            &mut out,
            "workbench_upstream_breaker_state",
            "1 for the state each upstream MCP server's circuit breaker is in.",
            &states,
        );
        gauge(
            &mut out,
            "workbench_upstream_in_flight",
            "Calls running on each upstream MCP server (at most its max_concurrency).",
            &in_flight,
        );
        for (name, help, samples) in [
            ("workbench_stdio_process_state", "1 for the state each stdio MCP server process on this instance is in (slot: its place in the server's pool).", &p_states),
            ("workbench_stdio_process_restarts", "Times each stdio MCP server process was restarted after it ended by itself.", &p_restarts),
            ("workbench_stdio_process_uptime_seconds", "How long each running stdio MCP server process has run (0 when not running).", &p_uptime),
            ("workbench_stdio_process_memory_bytes", "Resident memory of each stdio MCP server process and everything it started.", &p_memory),
        ] {
            gauge(&mut out, name, help, samples);
        }
        let pool = self.db.pool();
        let (size, idle) = (pool.size() as f64, pool.num_idle() as f64);
        gauge(
            &mut out,
            "workbench_db_connections",
            "Database pool connections by state.",
            &[
                ("state=\"in_use\"".into(), (size - idle).max(0.0)),
                ("state=\"idle\"".into(), idle),
            ],
        );
        gauge(
            &mut out,
            "workbench_change_listener_up",
            "1 while this instance hears the database's change notices and answers keys from memory; 0 while every call reads the database (fail closed). Always 1 on SQLite.",
            &[(String::new(), if self.db.changes().is_live() { 1.0 } else { 0.0 })],
        );
        let pending = crate::store::confirmations::count_all_pending(pool, now).await?;
        gauge(
            &mut out,
            "workbench_confirmations_pending",
            "Held calls waiting for a person's decision.",
            &[(String::new(), pending as f64)],
        );
        let due = crate::store::deliveries::count_due(&self.db, now).await?;
        gauge(
            &mut out,
            "workbench_callbacks_due",
            "Outbound deliveries (scheduled callbacks and webhook events) due now and not being delivered.",
            &[(String::new(), due as f64)],
        );
        let failures =
            crate::audit::AUDIT_WRITE_FAILURES.load(std::sync::atomic::Ordering::Relaxed);
        out.push_str("# HELP workbench_record_write_failures_total Call records that could not be written.\n# TYPE workbench_record_write_failures_total counter\n");
        out.push_str(&format!(
            "workbench_record_write_failures_total {failures}\n"
        ));
        Ok(out)
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    pub fn sso(&self) -> &Sso {
        &self.sso
    }

    pub fn tool_sets(&self) -> &ToolSets {
        &self.tool_sets
    }

    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    pub fn schedules(&self) -> &Schedules {
        &self.schedules
    }

    /// The outbox every outbound delivery (webhook events, callbacks) goes through.
    pub fn deliveries(&self) -> &Deliveries {
        &self.deliveries
    }

    pub fn email(&self) -> &Email {
        &self.email
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn egress(&self) -> &EgressRules {
        &self.egress
    }

    /// Where each MCP session lives, for forwarding its requests.
    pub fn mcp_sessions(&self) -> &crate::mcp_sessions::McpSessions {
        &self.mcp_sessions
    }

    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    pub fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }

    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    pub fn integrations(&self) -> &Arc<Integrations> {
        self.connections.integrations()
    }

    pub fn apps(&self) -> &Apps {
        &self.apps
    }

    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    pub fn webhooks(&self) -> &Webhooks {
        &self.webhooks
    }

    pub fn metering(&self) -> &Metering {
        &self.metering
    }

    /// An admin removes someone from their project: their keys, approved MCP clients, proxy
    /// tokens and connections end at once (`Accounts::remove_member`), then the tokens of
    /// their connections are revoked at the providers that offer it, as a disconnect does.
    pub async fn remove_member(&self, admin: &crate::auth::Principal, user_id: &str) -> Result<()> {
        let removed = self.accounts.remove_member(admin, user_id).await?;
        for row in &removed.connections {
            self.connections.revoke_upstream(row, None).await;
        }
        Ok(())
    }

    /// The process is shutting down: long waits answer now.
    pub fn begin_shutdown(&self) {
        self.connections.begin_shutdown();
    }

    /// Becomes true once the process is shutting down: long-lived streams end on it.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.connections.stopping()
    }

    /// Waits until every queued record (tool calls, audit rows, usage) is written; the server
    /// calls it after the last request, before exiting.
    pub async fn flush_records(&self) {
        self.audit.flush().await;
    }

    /// The MCP authorization server (OAuth clients, grants, tokens).
    pub fn oauth(&self) -> &OAuthServer {
        &self.oauth
    }

    pub fn proxy_tokens(&self) -> &ProxyTokens {
        &self.proxy_tokens
    }
}
