//! The execution pipeline every surface calls (MCP execute_tools, REST invoke and batch, portal
//! approvals): resolve → policy → connection → substitution → validation with defaults →
//! handler under a timeout → size cap → one tool_call row, one audit row and usage counters.
//! See README.md in this folder for the design.

mod batch;
mod compose;
mod error;
mod idempotency;
mod record;
pub mod template;
mod validate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

pub use batch::{entry, parse_request, valid_ref_id, ExecuteRequest, ExecutionSpec, RequestError};
pub use error::{EntryContext, FieldError, ToolError, RESULT_CAP_CHARS};
pub use compose::ExecuteOutcome;
pub use idempotency::{Begin, Idempotency, IDEMPOTENCY_TTL_MS};
pub use record::ToolCallView;
pub use crate::vault::Scrubber;
pub use validate::{apply_defaults, violations};

use crate::auth::Principal;
use crate::catalog::{CallContext, Catalog, SideEffects, Snapshot, Tool, ToolStatus};
use crate::clock::Clock;
use crate::connections::Connections;
use crate::ids::new_id;
use crate::store::Db;
use crate::vault::Vault;
use crate::Result;

/// Executions per batch (D5).
pub const BATCH_MAX: usize = 50;
/// Executions per compose run (D5).
pub const COMPOSE_MAX: usize = 8;
/// Executions of one batch running at once (D5).
pub const POOL_SIZE: usize = 8;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// Most results search_tools returns.
pub const SEARCH_LIMIT_MAX: usize = 50;
pub const SEARCH_LIMIT_DEFAULT: usize = 10;

/// One search_tools match.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchResult {
    pub name: String,
    pub description: String,
    pub integration: String,
    pub score: f32,
}

/// Which surface asked, recorded in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Mcp,
    Rest,
    RestBatch,
    Portal,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Mcp => "mcp",
            Surface::Rest => "rest",
            Surface::RestBatch => "rest_batch",
            Surface::Portal => "portal",
        }
    }
}

/// One requested execution: a tool name and the caller's arguments.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub tool: String,
    pub args: Value,
}

#[derive(Debug, Clone)]
pub struct CallOptions {
    pub timeout: Duration,
    pub end_user_id: Option<String>,
    pub surface: Surface,
}

impl CallOptions {
    pub fn new(surface: Surface) -> Self {
        CallOptions { timeout: DEFAULT_TIMEOUT, end_user_id: None, surface }
    }
}

/// How one execution ended.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub id: String,
    pub tool: String,
    pub result: std::result::Result<Value, ToolError>,
    /// Handler wall time (0 when the handler did not run).
    pub duration_ms: u64,
    /// The same in microseconds, for measurements.
    pub duration_us: u64,
    pub egress_bytes: u64,
    /// The record was written as `running` before the handler ran.
    pub(crate) begun: bool,
}

impl CallOutcome {
    pub fn status(&self) -> &'static str {
        match &self.result {
            Ok(_) => "succeeded",
            Err(e) => e.call_status(),
        }
    }
}

/// Earlier results a step may reference (compose) and the ref_ids that failed.
pub(crate) struct Steps<'a> {
    results: Option<&'a std::collections::HashMap<String, Value>>,
    failed: &'a std::collections::HashSet<String>,
}

static NO_FAILURES: std::sync::LazyLock<std::collections::HashSet<String>> = std::sync::LazyLock::new(Default::default);

impl Steps<'static> {
    fn none() -> Steps<'static> {
        Steps { results: None, failed: &NO_FAILURES }
    }
}

#[derive(Clone)]
pub struct Engine {
    catalog: Arc<Catalog>,
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    connections: Connections,
}

impl Engine {
    pub fn new(catalog: Arc<Catalog>, db: Db, clock: Arc<dyn Clock>, vault: Vault, connections: Connections) -> Engine {
        Engine { catalog, db, clock, vault, connections }
    }

    /// What every output of a request by `who` is scrubbed of (D7): every live vault secret
    /// of the project and every credential of the caller's connections. Secrets the request
    /// reveals or stores are added as it runs. Without it nothing may be returned.
    pub async fn scrubber(&self, who: &Principal) -> std::result::Result<Scrubber, ToolError> {
        let unavailable = |e: crate::Error| {
            tracing::error!(error = ?e, "secrets for scrubbing cannot be read");
            ToolError::Unavailable { reason: "the vault cannot be read right now".into() }
        };
        let mut s = self.vault.scrubber(&who.project_id).await.map_err(unavailable)?;
        for (name, value) in self.connections.credential_secrets(who).await.map_err(unavailable)? {
            s.add(&name, &value);
        }
        s.prepare();
        Ok(s)
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The catalog `who`'s project sees right now. A request takes it once and passes it down,
    /// so a registration never changes the catalog under a running request.
    pub fn snapshot(&self, who: &Principal) -> Arc<Snapshot> {
        self.catalog.snapshot(&who.project_id)
    }

    /// Whether `who` may run `tool` (D2). Confirmation-gated tools count as runnable.
    pub fn can_run(&self, _who: &Principal, _tool: &Tool) -> bool {
        true
    }

    /// Runs one execution through the whole pipeline and records it.
    pub async fn run(&self, who: &Principal, inv: Invocation, opts: &CallOptions) -> CallOutcome {
        let snapshot = self.snapshot(who);
        self.run_on(&snapshot, who, inv, opts).await
    }

    /// `run` on a catalog snapshot the caller already took.
    pub async fn run_on(&self, snapshot: &Snapshot, who: &Principal, inv: Invocation, opts: &CallOptions) -> CallOutcome {
        let base = self.scrubber(who).await;
        self.run_scrubbed(snapshot, who, inv, opts, base).await
    }

    /// One execution with the request's scrubber (or why it could not be had: then nothing
    /// runs and the call answers UNAVAILABLE).
    async fn run_scrubbed(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
        base: std::result::Result<Scrubber, ToolError>,
    ) -> CallOutcome {
        match base {
            Ok(mut scrubber) => self.run_step(snapshot, who, inv, opts, &Steps::none(), true, &mut scrubber).await,
            Err(e) => self.refuse(who, inv, opts, e).await,
        }
    }

    /// Records and answers an execution that did not start.
    pub(crate) async fn refuse(&self, who: &Principal, inv: Invocation, opts: &CallOptions, e: ToolError) -> CallOutcome {
        let outcome = CallOutcome { id: new_id("tcall"), tool: inv.tool, result: Err(e), duration_ms: 0, duration_us: 0, egress_bytes: 0, begun: false };
        record::write(&self.db, who, &json!({}), opts, &outcome, self.clock.now_ms(), false).await;
        outcome
    }

    /// One execution with what a compose run adds: earlier step results to reference, whether
    /// the result cap applies (compose intermediates are not capped, D6), and the secrets the
    /// run has used so far (a compose run is one call: every secret any step used is scrubbed
    /// from every later result). Secrets this step reveals are added to `scrubber`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_step(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
        steps: &Steps<'_>,
        cap: bool,
        scrubber: &mut Scrubber,
    ) -> CallOutcome {
        let id = new_id("tcall");
        let started_at = self.clock.now_ms();
        let mut outcome =
            CallOutcome { id, tool: inv.tool.clone(), result: Ok(Value::Null), duration_ms: 0, duration_us: 0, egress_bytes: 0, begun: false };
        outcome.result = self.execute(who, snapshot, &inv, opts, steps, scrubber, &mut outcome, started_at).await;
        match &mut outcome.result {
            Ok(v) => scrubber.scrub(v),
            Err(e) => e.scrub(&scrubber),
        }
        if cap {
            if let Ok(v) = &outcome.result {
                let size = json!({ "result": v }).to_string().chars().count();
                if size > RESULT_CAP_CHARS {
                    outcome.result = Err(ToolError::ResultTooLarge { size });
                }
            }
        }
        let mut recorded_args = inv.args.clone();
        scrubber.scrub(&mut recorded_args);
        record::write(&self.db, who, &recorded_args, opts, &outcome, started_at, outcome.begun).await;
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        who: &Principal,
        snapshot: &Snapshot,
        inv: &Invocation,
        opts: &CallOptions,
        steps: &Steps<'_>,
        scrubber: &mut Scrubber,
        outcome: &mut CallOutcome,
        started_at: i64,
    ) -> std::result::Result<Value, ToolError> {
        let tool = snapshot
            .get(&inv.tool)
            .filter(|t| self.can_run(who, t))
            .ok_or_else(|| ToolError::NotFound { tool: inv.tool.clone(), integration: None })?;
        if tool.status == ToolStatus::Unavailable {
            return Err(ToolError::Unavailable { reason: "the tool's source no longer offers it".into() });
        }
        let connection = tool.connection();
        let credential = match connection {
            Some(source) => {
                // The connection step (D5): the user's credential (refreshed if due), or
                // NOT_CONNECTED. Its secrets join the scrubber.
                let c = source.credential(who).await.map_err(ToolError::from)?;
                for secret in c.secrets() {
                    scrubber.add(&format!("{}_credential", source.integration()), secret);
                }
                Some(c)
            }
            None => None,
        };
        let template = match &inv.args {
            Value::Null => json!({}),
            other => other.clone(),
        };
        let template_for_messages = template.clone();
        let mut args = if tool.spec.literal_args {
            template
        } else {
            self.substitute(who, &template, steps, scrubber).await?
        };
        if let Some(secret) = tool.spec.secret_arg {
            // The value being stored is a secret (vault_set): scrub it under its name.
            if let (Some(name), Some(value)) = (args.get(secret.name).and_then(Value::as_str), args.get(secret.value).and_then(Value::as_str)) {
                scrubber.add_exact(name, value);
            }
        }
        apply_defaults(&tool.spec.input_schema, &mut args);
        let errors = violations(&tool.validator, &args);
        if !errors.is_empty() {
            return Err(ToolError::InvalidArguments { errors });
        }
        if matches!(tool.spec.side_effects, SideEffects::Write | SideEffects::Destructive) {
            // No record, no call: a tool that changes things runs only once its audit row exists.
            let mut recorded_args = inv.args.clone();
            scrubber.scrub(&mut recorded_args);
            if let Err(e) = record::begin(&self.db, who, &recorded_args, opts, &outcome.id, tool.name(), started_at).await {
                record::AUDIT_WRITE_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(error = %e, tool = %tool.name(), "audit log unwritable; a side-effecting call was not started");
                return Err(ToolError::Unavailable { reason: "the audit log cannot be written right now, and tools that change things do not run without it".into() });
            }
            outcome.begun = true;
        }
        let mut ctx = CallContext::new(&outcome.id, tool.name(), who, opts.end_user_id.as_deref());
        ctx.template = Some(&template_for_messages);
        ctx.credential = credential;
        ctx.connection = connection.map(|c| &**c);
        let started = Instant::now();
        let result = tokio::time::timeout(opts.timeout, tool.handler.call(&ctx, args)).await;
        outcome.duration_us = started.elapsed().as_micros() as u64;
        outcome.duration_ms = outcome.duration_us / 1000;
        outcome.egress_bytes = ctx.egress_bytes();
        match result {
            Err(_) => Err(ToolError::Timeout { timeout_ms: opts.timeout.as_millis() as u64 }),
            Ok(r) => r.map_err(ToolError::from),
        }
    }

    /// `{{vault:…}}` and `{{step:…}}` in one pass over the agent's template (D7); every secret
    /// revealed is registered with the scrubber.
    async fn substitute(
        &self,
        who: &Principal,
        template: &Value,
        steps: &Steps<'_>,
        scrubber: &mut Scrubber,
    ) -> std::result::Result<Value, ToolError> {
        let names = template::vault_names(template);
        let values = if names.is_empty() {
            Default::default()
        } else {
            self.vault.reveal(&who.project_id, &names).await.map_err(|e| {
                tracing::error!(error = ?e, "vault read failed");
                ToolError::Unavailable { reason: "the vault cannot be read right now".into() }
            })?
        };
        for (name, value) in &values {
            scrubber.add(name, value);
        }
        let ctx = template::Context { vault: Some(&values), steps: steps.results, failed: steps.failed };
        template::resolve(template, &ctx).map_err(|e| match e {
            template::TemplateError::BadRef(message) => ToolError::BadRef { message, ref_id: None },
            template::TemplateError::UnknownSecret { path, message } => {
                ToolError::InvalidArguments { errors: vec![FieldError { path, message }] }
            }
        })
    }

    /// Runs up to `BATCH_MAX` executions, at most `POOL_SIZE` at a time; outcomes are
    /// index-aligned with `invocations` whatever the completion order, and one failure does not
    /// stop the others.
    pub async fn run_batch(&self, who: &Principal, invocations: Vec<Invocation>, opts: &CallOptions) -> Vec<CallOutcome> {
        let snapshot = self.snapshot(who);
        self.run_batch_on(&snapshot, who, invocations, opts).await
    }

    /// `run_batch` on a catalog snapshot the caller already took; the request's scrubber is
    /// read once and each execution starts from a copy.
    pub(crate) async fn run_batch_on(&self, snapshot: &Snapshot, who: &Principal, invocations: Vec<Invocation>, opts: &CallOptions) -> Vec<CallOutcome> {
        let n = invocations.len();
        let base = self.scrubber(who).await;
        let base = &base;
        let mut slots: Vec<Option<CallOutcome>> = (0..n).map(|_| None).collect();
        let mut done = stream::iter(invocations.into_iter().enumerate())
            .map(|(i, inv)| async move { (i, self.run_scrubbed(snapshot, who, inv, opts, base.clone()).await) })
            .buffer_unordered(POOL_SIZE);
        while let Some((i, outcome)) = done.next().await {
            slots[i] = Some(outcome);
        }
        slots.into_iter().map(|o| o.expect("every execution yields an outcome")).collect()
    }

    /// The tools `who` can run that best match `query` (D2), best first; `limit` is 1..=50.
    pub fn search(&self, who: &Principal, query: &str, limit: usize) -> Result<Vec<SearchResult>> {
        if !(1..=SEARCH_LIMIT_MAX).contains(&limit) {
            return Err(crate::Error::invalid(format!("limit must be between 1 and {SEARCH_LIMIT_MAX}")));
        }
        if query.trim().is_empty() {
            return Err(crate::Error::invalid("query is empty; describe what you want to do, e.g. \"send email\""));
        }
        if query.len() > 1000 {
            return Err(crate::Error::invalid("query too long; use at most 1000 characters"));
        }
        let snapshot = self.snapshot(who);
        Ok(snapshot
            .search(query, limit, |t| self.can_run(who, t))
            .into_iter()
            .map(|(t, score)| SearchResult {
                name: t.spec.name.to_string(),
                description: t.spec.description.clone(),
                integration: t.spec.integration.clone(),
                score,
            })
            .collect())
    }

    /// A tool `who` can run, by name (D2: others are "not found").
    pub fn tool(&self, who: &Principal, name: &str) -> Option<Arc<Tool>> {
        self.snapshot(who).get(name).filter(|t| self.can_run(who, t)).cloned()
    }

    /// Every tool `who` can run, in catalog order.
    pub fn tools(&self, who: &Principal) -> Vec<Arc<Tool>> {
        self.snapshot(who).tools().iter().filter(|t| self.can_run(who, t)).cloned().collect()
    }

    /// Audit rows that could not be written since start.
    pub fn audit_write_failures(&self) -> u64 {
        record::AUDIT_WRITE_FAILURES.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A recorded call of the caller's project.
    pub async fn get_call(&self, who: &Principal, id: &str) -> Result<Option<ToolCallView>> {
        record::get(&self.db, who, id).await
    }
}
