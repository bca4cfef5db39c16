//! The execution pipeline every surface calls (MCP execute_tools, REST invoke and batch, portal
//! approvals): resolve → policy → connection → substitution → validation with defaults →
//! handler under a timeout → size cap → one tool_call row, one audit row and usage counters.
//! This file is the facade: the engine's services, the shapes of a call and its entry points;
//! each request runs in one `CallScope` (scope.rs). See README.md in this folder for the design.

mod batch;
mod compose;
mod confirm;
mod error;
mod idempotency;
mod listing;
mod pipeline;
mod reach;
mod record;
mod scope;
mod span;
pub mod template;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use crate::vault::Scrubber;
pub use batch::{entry, parse_request, valid_ref_id, ExecuteRequest, ExecutionSpec, RequestError};
pub use compose::ExecuteOutcome;
pub use confirm::{ConfirmSettings, ConfirmationView, DecideError, DEFAULT_CONFIRMATION_TTL_SECS};
pub use error::{EntryContext, FieldError, ToolError, RESULT_CAP_CHARS};
pub use idempotency::{Begin, Idempotency, LeaseGuard, IDEMPOTENCY_TTL_MS, LEASE_MS};
pub use listing::{Matches, SearchResult, ToolSearch, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX};
pub use reach::{curl_permission, may_curl};
pub use record::ToolCallView;
pub use span::TRACE_TARGET;
pub use validate::{apply_defaults, violations};

use crate::audit::Recorder;
use crate::auth::{Accounts, Principal};
use crate::catalog::{Catalog, Snapshot};
use crate::clock::Clock;
use crate::connections::Connections;
use crate::limits::Limits;
use crate::notify::Webhooks;
use crate::policy::Policies;
use crate::store::{tool_calls::CallStatus, Db};
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
    /// The tool set (its slug) the call came through, recorded on its audit row.
    pub tool_set: Option<String>,
    /// The MCP client that made the call, when it can be asked things while the call runs.
    pub client: Option<Client>,
}

/// An MCP client the calls of a request may ask things of (`ClientRelay`).
#[derive(Clone)]
pub struct Client(pub std::sync::Arc<dyn crate::catalog::ClientRelay>);

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
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
            tool_set: None,
            client: None,
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

    pub fn status(&self) -> CallStatus {
        match &self.result {
            Ok(_) => CallStatus::Succeeded,
            Err(e) => e.call_status(),
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
    limits: Limits,
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
    /// Rate limits and quotas, counted for every call.
    pub limits: Limits,
    pub confirm: ConfirmSettings,
    /// Tells the project's webhook about held calls.
    pub webhooks: Webhooks,
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
            limits: p.limits,
            confirm: Arc::new(p.confirm),
            webhooks: p.webhooks,
        }
    }

    /// The limiter every call is counted by (its windows are purged by the server's upkeep).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The catalog `who`'s project sees right now. A request takes it once and passes it down,
    /// so a registration never changes the catalog under a running request.
    pub fn snapshot(&self, who: &Principal) -> Arc<Snapshot> {
        self.catalog.snapshot(&who.project_id)
    }

    /// Runs one execution through the whole pipeline and records it (REST invoke).
    pub async fn run(&self, who: &Principal, inv: Invocation, opts: &CallOptions) -> CallOutcome {
        self.scope(who, opts).await.run(inv, None).await
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
        self.scope(who, opts).await.run_all(invocations).await
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
