//! The execution pipeline every surface calls (MCP execute_tools, REST invoke and batch, portal
//! approvals): resolve → policy → connection → substitution → validation with defaults →
//! handler under a timeout → size cap → one tool_call row, one audit row and usage counters.
//! See README.md in this folder for the design.

mod batch;
mod compose;
mod confirm;
mod error;
mod idempotency;
mod reach;
mod record;
mod span;
pub mod template;
mod validate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use tracing::Instrument;

pub use crate::vault::Scrubber;
pub use batch::{entry, parse_request, valid_ref_id, ExecuteRequest, ExecutionSpec, RequestError};
pub use compose::ExecuteOutcome;
pub use confirm::{ConfirmSettings, ConfirmationView, DecideError, DEFAULT_CONFIRMATION_TTL_SECS};
pub use error::{EntryContext, FieldError, ToolError, RESULT_CAP_CHARS};
pub use idempotency::{Begin, Idempotency, LeaseGuard, IDEMPOTENCY_TTL_MS, LEASE_MS};
pub use reach::{curl_permission, may_curl};
pub use record::ToolCallView;
pub use span::TRACE_TARGET;
pub use validate::{apply_defaults, violations};

use crate::audit::Recorder;
use crate::auth::{Accounts, Principal};
use crate::catalog::{CallContext, Catalog, SideEffects, Snapshot, Tool, ToolStatus};
use crate::clock::Clock;
use crate::connections::Connections;
use crate::ids::new_id;
use crate::notify::Webhooks;
use crate::policy::{Applied, Decision, Policies};
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
    /// REST invoke's own ceiling on a result, in bytes of JSON, instead of the 60,000-character
    /// cap that protects a model's context on MCP (None: that cap).
    pub rest_result_max_bytes: Option<usize>,
    /// The `Idempotency-Key` the request came with, kept on the call's record.
    pub idempotency_key: Option<String>,
}

/// REST invoke's default result ceiling.
pub const REST_RESULT_MAX_BYTES: usize = 10 * 1024 * 1024;

impl CallOptions {
    pub fn new(surface: Surface) -> Self {
        CallOptions {
            timeout: DEFAULT_TIMEOUT,
            end_user_id: None,
            surface,
            rest_result_max_bytes: None,
            idempotency_key: None,
        }
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
    /// Which rows the record writes (new ones, or finishing existing ones).
    pub(crate) rows: record::Rows,
    /// The confirmation the call was held for, if any.
    pub confirmation_id: Option<String>,
}

impl CallOutcome {
    fn new(id: String, tool: String) -> CallOutcome {
        CallOutcome {
            id,
            tool,
            result: Ok(Value::Null),
            duration_ms: 0,
            duration_us: 0,
            egress_bytes: 0,
            rows: record::Rows::New,
            confirmation_id: None,
        }
    }

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

static NO_FAILURES: std::sync::LazyLock<std::collections::HashSet<String>> =
    std::sync::LazyLock::new(Default::default);

impl Steps<'static> {
    fn none() -> Steps<'static> {
        Steps {
            results: None,
            failed: &NO_FAILURES,
        }
    }
}

#[derive(Clone)]
pub struct Engine {
    catalog: Arc<Catalog>,
    db: Db,
    recorder: Recorder,
    clock: Arc<dyn Clock>,
    vault: Vault,
    connections: Connections,
    policies: Policies,
    accounts: Accounts,
    confirm: Arc<ConfirmSettings>,
    webhooks: Webhooks,
}

/// The services the engine works with.
pub struct EngineParts {
    pub db: Db,
    pub recorder: Recorder,
    pub clock: Arc<dyn Clock>,
    pub vault: Vault,
    /// Only to collect the caller's credentials for scrubbing.
    pub connections: Connections,
    pub policies: Policies,
    /// To run an approved call as the key that made it.
    pub accounts: Accounts,
    pub confirm: ConfirmSettings,
    /// Tells the project's webhook about held calls.
    pub webhooks: Webhooks,
}

/// What every execution of one request shares: the scrubber (D7) and the caller's policy (D14).
#[derive(Clone)]
pub(crate) struct Prepared {
    pub scrubber: Scrubber,
    pub policy: Applied,
}

impl Engine {
    pub fn new(catalog: Arc<Catalog>, p: EngineParts) -> Engine {
        Engine {
            catalog,
            db: p.db,
            recorder: p.recorder,
            clock: p.clock,
            vault: p.vault,
            connections: p.connections,
            policies: p.policies,
            accounts: p.accounts,
            confirm: Arc::new(p.confirm),
            webhooks: p.webhooks,
        }
    }

    /// The policy `who` runs under (D14).
    pub async fn policy(&self, who: &Principal) -> std::result::Result<Applied, ToolError> {
        self.policies.applied(who).await.map_err(|e| {
            tracing::error!(error = ?e, "policies cannot be read");
            ToolError::Unavailable {
                reason: "policies cannot be read right now".into(),
            }
        })
    }

    /// The request's scrubber and policy, read at once.
    pub(crate) async fn prepare(
        &self,
        who: &Principal,
    ) -> std::result::Result<Prepared, ToolError> {
        let (scrubber, policy) = tokio::join!(self.scrubber(who), self.policy(who));
        Ok(Prepared {
            scrubber: scrubber?,
            policy: policy?,
        })
    }

    /// What every output of a request by `who` is scrubbed of (D7): every live vault secret
    /// of the project and every credential of the caller's connections. Secrets the request
    /// reveals or stores are added as it runs. Without it nothing may be returned.
    pub async fn scrubber(&self, who: &Principal) -> std::result::Result<Scrubber, ToolError> {
        let unavailable = |e: crate::Error| {
            tracing::error!(error = ?e, "secrets for scrubbing cannot be read");
            ToolError::Unavailable {
                reason: "the vault cannot be read right now".into(),
            }
        };
        let mut s = self.vault.scrubber_for(who).await.map_err(unavailable)?;
        for (name, value) in self
            .connections
            .credential_secrets(who)
            .await
            .map_err(unavailable)?
            .iter()
        {
            s.add(name, value);
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

    /// Runs one execution through the whole pipeline and records it.
    pub async fn run(&self, who: &Principal, inv: Invocation, opts: &CallOptions) -> CallOutcome {
        let snapshot = self.snapshot(who);
        self.run_on(&snapshot, who, inv, opts).await
    }

    /// `run` on a catalog snapshot the caller already took.
    pub async fn run_on(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
    ) -> CallOutcome {
        let base = self.prepare(who).await;
        self.run_prepared(snapshot, who, inv, opts, base).await
    }

    /// One execution with the request's scrubber and policy (or why they could not be had:
    /// then nothing runs and the call answers UNAVAILABLE).
    async fn run_prepared(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
        base: std::result::Result<Prepared, ToolError>,
    ) -> CallOutcome {
        match base {
            Ok(Prepared {
                mut scrubber,
                policy,
            }) => {
                self.run_step(
                    snapshot,
                    who,
                    inv,
                    opts,
                    &Steps::none(),
                    true,
                    &mut scrubber,
                    &policy,
                    None,
                )
                .await
            }
            Err(e) => self.refuse(who, inv, opts, e).await,
        }
    }

    /// Records and answers an execution that did not start.
    pub(crate) async fn refuse(
        &self,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
        e: ToolError,
    ) -> CallOutcome {
        let span = span::open(opts);
        let mut outcome = CallOutcome::new(new_id("tcall"), inv.tool);
        outcome.result = Err(e);
        record::write(
            &self.recorder,
            who,
            &json!({}),
            opts,
            &outcome,
            self.clock.now_ms(),
        )
        .instrument(span.clone())
        .await;
        span::close(&span, &outcome);
        outcome
    }

    /// One execution with what a compose run adds: earlier step results to reference, whether
    /// the result cap applies (compose intermediates are not capped, D6), and the secrets the
    /// run has used so far (a compose run is one call: every secret any step used is scrubbed
    /// from every later result). Secrets this step reveals are added to `scrubber`. It runs in
    /// its own `tool.execute` span (span.rs), which outbound requests take their trace context
    /// from.
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
        policy: &Applied,
        held: Option<&confirm::Held>,
    ) -> CallOutcome {
        let span = span::open(opts);
        let outcome = self
            .run_step_in_span(snapshot, who, inv, opts, steps, cap, scrubber, policy, held)
            .instrument(span.clone())
            .await;
        span::close(&span, &outcome);
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_step_in_span(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        inv: Invocation,
        opts: &CallOptions,
        steps: &Steps<'_>,
        cap: bool,
        scrubber: &mut Scrubber,
        policy: &Applied,
        held: Option<&confirm::Held>,
    ) -> CallOutcome {
        let started_at = self.clock.now_ms();
        let mut outcome = match held {
            // An approved call runs under the id it was held with, finishing its rows.
            Some(h) => {
                let mut o = CallOutcome::new(h.tool_call_id.clone(), inv.tool.clone());
                o.rows = record::Rows::Existing;
                o.confirmation_id = Some(h.confirmation_id.clone());
                o
            }
            None => CallOutcome::new(new_id("tcall"), inv.tool.clone()),
        };
        outcome.result = self
            .execute(
                who,
                snapshot,
                &inv,
                opts,
                steps,
                scrubber,
                policy,
                held,
                &mut outcome,
                started_at,
            )
            .await;
        match &mut outcome.result {
            Ok(v) => scrubber.scrub(v),
            Err(e) => e.scrub(&scrubber),
        }
        if cap {
            if let Ok(v) = &outcome.result {
                match opts.rest_result_max_bytes {
                    // REST: a ceiling in bytes, reported as the handler's failure (502).
                    Some(max) => {
                        let size = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
                        if size > max {
                            outcome.result = Err(ToolError::Handler {
                                handler_error: format!("the result is {size} bytes of JSON, over this server's REST ceiling of {max} bytes"),
                            });
                        }
                    }
                    None => {
                        let size = json!({ "result": v }).to_string().chars().count();
                        if size > RESULT_CAP_CHARS {
                            outcome.result = Err(ToolError::ResultTooLarge { size });
                        }
                    }
                }
            }
        }
        let mut recorded_args = inv.args.clone();
        scrubber.scrub(&mut recorded_args);
        record::write(
            &self.recorder,
            who,
            &recorded_args,
            opts,
            &outcome,
            started_at,
        )
        .await;
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
        policy: &Applied,
        held: Option<&confirm::Held>,
        outcome: &mut CallOutcome,
        started_at: i64,
    ) -> std::result::Result<Value, ToolError> {
        let tool = snapshot.get(&inv.tool).ok_or_else(|| ToolError::NotFound {
            tool: inv.tool.clone(),
            integration: None,
        })?;
        // The policy step (D14), right after the tool is known: a hidden tool called by name
        // answers why, not "not found". An approved call is checked again; its approval
        // answers the confirmation gate.
        let gate = match policy.decide(tool.name()) {
            Decision::Run => None,
            Decision::Deny(rule) => {
                return Err(ToolError::NotAllowed {
                    tool: inv.tool.clone(),
                    rule,
                })
            }
            Decision::Confirm(_) if held.is_some() => None,
            Decision::Confirm(rule) => Some(rule),
        };
        // The key's rate limit (calls per minute, across instances); an approved call was
        // counted when it was made.
        if held.is_none() {
            match self.accounts.take_rate(who).await {
                Ok(Ok(())) => {}
                Ok(Err(retry_after_s)) => return Err(ToolError::RateLimited { retry_after_s }),
                Err(e) => {
                    tracing::error!(error = ?e, "rate limit cannot be counted");
                    return Err(ToolError::Unavailable {
                        reason: "the rate limit cannot be counted right now".into(),
                    });
                }
            }
        }
        if tool.status == ToolStatus::Unavailable {
            return Err(ToolError::Unavailable {
                reason: "the tool's source no longer offers it".into(),
            });
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
        if tool.spec.no_vault_refs && !template::vault_names(&template).is_empty() {
            return Err(ToolError::InvalidArguments {
                errors: vec![FieldError {
                    path: String::new(),
                    message: format!("{} does not take {{{{vault:…}}}} references: its arguments leave for outside recipients", tool.name()),
                }],
            });
        }
        let mut args = if tool.spec.literal_args {
            template
        } else {
            self.substitute(who, &template, steps, scrubber).await?
        };
        if let Some(secret) = tool.spec.secret_arg {
            // The value being stored is a secret (vault_set): scrub it under its name.
            if let (Some(name), Some(value)) = (
                args.get(secret.name).and_then(Value::as_str),
                args.get(secret.value).and_then(Value::as_str),
            ) {
                scrubber.add_exact(name, value);
            }
        }
        apply_defaults(&tool.spec.input_schema, &mut args);
        let errors = violations(&tool.validator, &args);
        if !errors.is_empty() {
            return Err(ToolError::InvalidArguments { errors });
        }
        if let Some(rule) = gate {
            // Valid, and a person must say yes first (D15): hold it (the agent's template, not
            // the resolved arguments), or answer what an identical held call came to.
            return self
                .hold(who, tool.name(), &inv.args, opts, rule, outcome)
                .await;
        }
        if matches!(
            tool.spec.side_effects,
            SideEffects::Write | SideEffects::Destructive
        ) {
            // No record, no call: a tool that changes things runs only once its audit row exists.
            let mut recorded_args = inv.args.clone();
            scrubber.scrub(&mut recorded_args);
            let existing = outcome.rows == record::Rows::Existing;
            if let Err(e) = record::begin(
                &self.db,
                who,
                &recorded_args,
                opts,
                &outcome.id,
                tool.name(),
                started_at,
                existing,
            )
            .await
            {
                record::AUDIT_WRITE_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(error = %e, tool = %tool.name(), "audit log unwritable; a side-effecting call was not started");
                return Err(ToolError::Unavailable { reason: "the audit log cannot be written right now, and tools that change things do not run without it".into() });
            }
            outcome.rows = record::Rows::Existing;
        }
        let mut ctx = CallContext::new(&outcome.id, tool.name(), who, opts.end_user_id.as_deref());
        ctx.template = Some(&template_for_messages);
        ctx.credential = credential;
        ctx.connection = connection.map(|c| &**c);
        let started = Instant::now();
        // A handler that panics fails its own call, recorded like any failure; it never takes
        // the request (or a batch's other calls) down with it.
        let call = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
            tool.handler.call(&ctx, args),
        ));
        let result = tokio::time::timeout(opts.timeout, call).await;
        outcome.duration_us = started.elapsed().as_micros() as u64;
        outcome.duration_ms = outcome.duration_us / 1000;
        outcome.egress_bytes = ctx.egress_bytes();
        match result {
            Err(_) => Err(ToolError::Timeout {
                timeout_ms: opts.timeout.as_millis() as u64,
            }),
            Ok(Err(panic)) => {
                let mut message = Value::String(panic_text(panic.as_ref()));
                scrubber.scrub(&mut message);
                tracing::error!(tool = %tool.name(), call_id = %outcome.id, panic = %message, "a tool handler panicked");
                Err(ToolError::Handler {
                    handler_error:
                        "the tool failed with an internal error; the operator's log has the details"
                            .into(),
                })
            }
            Ok(Ok(r)) => r.map_err(ToolError::from),
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
            self.vault
                .reveal(&who.project_id, &names)
                .await
                .map_err(|e| {
                    tracing::error!(error = ?e, "vault read failed");
                    ToolError::Unavailable {
                        reason: "the vault cannot be read right now".into(),
                    }
                })?
        };
        for (name, value) in &values {
            scrubber.add(name, value);
        }
        let ctx = template::Context {
            vault: Some(&values),
            steps: steps.results,
            failed: steps.failed,
        };
        template::resolve(template, &ctx).map_err(|e| match e {
            template::TemplateError::BadRef(message) => ToolError::BadRef {
                message,
                ref_id: None,
            },
            template::TemplateError::UnknownSecret { path, message } => {
                ToolError::InvalidArguments {
                    errors: vec![FieldError { path, message }],
                }
            }
        })
    }

    /// Runs up to `BATCH_MAX` executions, at most `POOL_SIZE` at a time; outcomes are
    /// index-aligned with `invocations` whatever the completion order, and one failure does not
    /// stop the others.
    pub async fn run_batch(
        &self,
        who: &Principal,
        invocations: Vec<Invocation>,
        opts: &CallOptions,
    ) -> Vec<CallOutcome> {
        let snapshot = self.snapshot(who);
        self.run_batch_on(&snapshot, who, invocations, opts).await
    }

    /// `run_batch` on a catalog snapshot the caller already took; the request's scrubber is
    /// read once and each execution starts from a copy.
    pub(crate) async fn run_batch_on(
        &self,
        snapshot: &Snapshot,
        who: &Principal,
        invocations: Vec<Invocation>,
        opts: &CallOptions,
    ) -> Vec<CallOutcome> {
        let n = invocations.len();
        let base = self.prepare(who).await;
        let base = &base;
        let mut slots: Vec<Option<CallOutcome>> = (0..n).map(|_| None).collect();
        let mut done = stream::iter(invocations.into_iter().enumerate())
            .map(|(i, inv)| async move {
                (
                    i,
                    self.run_prepared(snapshot, who, inv, opts, base.clone())
                        .await,
                )
            })
            .buffer_unordered(POOL_SIZE);
        while let Some((i, outcome)) = done.next().await {
            slots[i] = Some(outcome);
        }
        slots
            .into_iter()
            .map(|o| o.expect("every execution yields an outcome"))
            .collect()
    }

    /// The tools `who` can run that best match `query` (D2), best first; `limit` is 1..=50.
    pub async fn search(
        &self,
        who: &Principal,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchResult>> {
        if !(1..=SEARCH_LIMIT_MAX).contains(&limit) {
            return Err(crate::Error::invalid(format!(
                "limit must be between 1 and {SEARCH_LIMIT_MAX}"
            )));
        }
        if query.trim().is_empty() {
            return Err(crate::Error::invalid(
                "query is empty; describe what you want to do, e.g. \"send email\"",
            ));
        }
        if query.len() > 1000 {
            return Err(crate::Error::invalid(
                "query too long; use at most 1000 characters",
            ));
        }
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        Ok(snapshot
            .search(query, limit, |t| policy.decide(t.name()).visible())
            .into_iter()
            .map(|(t, score)| SearchResult {
                name: t.spec.name.to_string(),
                description: t.spec.description.clone(),
                integration: t.spec.integration.clone(),
                score,
            })
            .collect())
    }

    /// A tool `who` can run (now or after a confirmation), by name (D2: others are "not found").
    pub async fn tool(&self, who: &Principal, name: &str) -> Result<Option<Arc<Tool>>> {
        let policy = self.policies.applied(who).await?;
        Ok(self
            .snapshot(who)
            .get(name)
            .filter(|t| policy.decide(t.name()).visible())
            .cloned())
    }

    /// Every tool `who` can run (now or after a confirmation), in catalog order.
    pub async fn tools(&self, who: &Principal) -> Result<Vec<Arc<Tool>>> {
        let policy = self.policies.applied(who).await?;
        Ok(self
            .snapshot(who)
            .tools()
            .iter()
            .filter(|t| policy.decide(t.name()).visible())
            .cloned()
            .collect())
    }

    /// Audit rows that could not be written since start.
    pub fn audit_write_failures(&self) -> u64 {
        record::AUDIT_WRITE_FAILURES.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A recorded call of the caller's project.
    pub async fn get_call(&self, who: &Principal, id: &str) -> Result<Option<ToolCallView>> {
        record::get(&self.db, &self.recorder, who, id).await
    }
}

/// What a panic said, when it said it with a string.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "(no message)".into(),
    }
}
