//! The seam between the pipeline and whatever runs a tool: built-in Rust code, a plugin's HTTP
//! request, an upstream MCP server, a custom app. Handlers receive validated arguments (defaults
//! applied, references resolved) and report failures in a few kinds the pipeline can render.
//! A tool that needs the user's connection carries a `ConnectionSource` (implemented by the
//! connections layer above): the pipeline asks it for the credential before the call, and a
//! handler asks it, through the call context, for a fresh one after a 401.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::Value;

use super::Credential;
use crate::auth::Principal;

/// Where a tool's credential comes from: the user's connection to one integration.
#[async_trait]
pub trait ConnectionSource: Send + Sync + 'static {
    /// The integration the connection is to.
    fn integration(&self) -> &str;
    /// The credential for a call, refreshed first when it is about to expire. Missing or
    /// expired: `NotConnected`; storage trouble: `Unavailable`.
    async fn credential(&self, who: &Principal) -> Result<Credential, HandlerError>;
    /// After the API refused the credential (401): refresh it once; failing that the
    /// connection is expired (`NotConnected`).
    async fn refresh_after_unauthorized(&self, who: &Principal)
        -> Result<Credential, HandlerError>;
    /// The API said the credential lacks access (403 `insufficient_scope`) and asked for
    /// `scopes`: remembered, so the user's next connect asks for them too. Answers the error
    /// the call ends with (`ScopeNeeded`).
    async fn step_up(&self, who: &Principal, scopes: &[String]) -> HandlerError;
}

/// The MCP client a call came from, when it can be asked things while the call runs (issue 33):
/// an upstream server's `elicitation/create` and `sampling/createMessage` reach it, and so does
/// the call's progress. Implemented by the MCP surfaces for clients in a session; the pipeline
/// hands handlers a scrubbing wrapper of it.
#[async_trait]
pub trait ClientRelay: Send + Sync {
    /// Whether the client declared the capability (`elicitation`, `sampling`).
    fn supports(&self, capability: &str) -> bool;
    /// Asks the client `method` with `params` and waits for its answer: the result, or the
    /// JSON-RPC error (code, message) to pass back.
    async fn request(&self, method: &str, params: Value) -> Result<Value, (i64, String)>;
    /// The call's progress (sent only when the client asked for progress).
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
    /// Resolves when the client cancels the call (never, for a client that cannot).
    async fn cancelled(&self) {
        std::future::pending::<()>().await
    }
}

/// A `ClientRelay` whose requests and progress pass a scrubber first (the call's, or a server's
/// token): a server that echoes a secret workbench sent it, or one of the project's, cannot hand
/// it to the client, and so to a person or a model, this way. The client's answers go back as
/// given.
pub struct ScrubbedRelay<'a> {
    pub inner: &'a dyn ClientRelay,
    pub scrubber: &'a crate::vault::Scrubber,
}

#[async_trait]
impl ClientRelay for ScrubbedRelay<'_> {
    fn supports(&self, capability: &str) -> bool {
        self.inner.supports(capability)
    }

    async fn request(&self, method: &str, mut params: Value) -> Result<Value, (i64, String)> {
        self.scrubber.scrub(&mut params);
        self.inner.request(method, params).await
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let message = message.map(|m| self.scrubber.scrub_str(&m).unwrap_or(m));
        self.inner.progress(progress, total, message).await
    }

    async fn cancelled(&self) {
        self.inner.cancelled().await
    }
}

/// What a handler knows about the call it serves.
pub struct CallContext<'a> {
    pub call_id: &'a str,
    pub tool: &'a str,
    pub principal: &'a Principal,
    /// The caller's end user (REST `end_user_id`), for handlers that authorise per end user.
    pub end_user_id: Option<&'a str>,
    /// The user's credential for the tool's integration (checked and refreshed by the pipeline).
    pub credential: Option<Credential>,
    /// Where `credential` came from, for a refresh after a 401.
    pub connection: Option<&'a dyn ConnectionSource>,
    /// The arguments as the agent wrote them, before `{{vault:…}}` and `{{step:…}}` were
    /// substituted: what error messages quote (`quote`), never the substituted values.
    pub template: Option<&'a Value>,
    /// The MCP client that made the call, when it can be asked things meanwhile.
    pub client: Option<&'a dyn ClientRelay>,
    egress: AtomicU64,
}

impl<'a> CallContext<'a> {
    pub fn new(
        call_id: &'a str,
        tool: &'a str,
        principal: &'a Principal,
        end_user_id: Option<&'a str>,
    ) -> Self {
        CallContext {
            call_id,
            tool,
            principal,
            end_user_id,
            credential: None,
            connection: None,
            template: None,
            client: None,
            egress: AtomicU64::new(0),
        }
    }

    /// How an error message may show the top-level string argument `field` whose value after
    /// substitution is `value`: quoted as the agent wrote it (`"https://{{vault:HOST}}/"`),
    /// so a message never carries a substituted secret in any transformed form.
    pub fn quote(&self, field: &str, value: &str) -> String {
        let written = self
            .template
            .and_then(|t| t.get(field))
            .and_then(Value::as_str)
            .unwrap_or(value);
        format!("{written:?}")
    }

    /// Whether the agent's `field` was changed by substitution (it held a reference).
    pub fn substituted(&self, field: &str, value: &str) -> bool {
        self.template
            .and_then(|t| t.get(field))
            .and_then(Value::as_str)
            .is_some_and(|w| w != value)
    }

    /// A fresh credential after the API refused the current one (401); `None` when the tool
    /// has no connection to refresh.
    pub async fn refresh_credential(&self) -> Result<Option<Credential>, HandlerError> {
        match self.connection {
            Some(c) => c.refresh_after_unauthorized(self.principal).await.map(Some),
            None => Ok(None),
        }
    }

    /// Counts bytes the handler sent or received over the network (metered as egress).
    pub fn add_egress(&self, bytes: u64) {
        self.egress.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn egress_bytes(&self) -> u64 {
        self.egress.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerError {
    /// The tool ran and failed; the message goes to the caller as `handler_error`.
    Failed(String),
    /// The arguments are valid by schema but wrong in substance (`INVALID_ARGUMENTS`).
    InvalidArgument { path: String, message: String },
    /// The tool cannot run right now (`UNAVAILABLE`).
    Unavailable(String),
    /// The user's connection is missing or expired (`NOT_CONNECTED`).
    NotConnected { integration: String, expired: bool },
    /// The user's connection lacks access the API asked for: connecting again asks for
    /// `scopes` (`NOT_CONNECTED`, a step-up).
    ScopeNeeded {
        integration: String,
        scopes: Vec<String>,
    },
    /// The tool's own deadline passed (`TIMEOUT`), e.g. an upstream server's `timeout_ms`.
    Timeout { timeout_ms: u64 },
}

impl HandlerError {
    pub fn failed(msg: impl Into<String>) -> Self {
        HandlerError::Failed(msg.into())
    }

    /// A store the tool needs (`what`: "the vault", "project storage") failed: UNAVAILABLE,
    /// saying what is wrong with the database when that is the cause (never driver text).
    pub fn store_unavailable(what: &str, e: &crate::Error) -> Self {
        match e.unavailable_reason() {
            Some(reason) => HandlerError::Unavailable(format!(
                "{what} is unavailable right now: {reason}; try again later"
            )),
            None => HandlerError::Unavailable(format!(
                "{what} is unavailable right now; try again later"
            )),
        }
    }

    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        HandlerError::InvalidArgument {
            path: path.into(),
            message: message.into(),
        }
    }
}

#[async_trait]
pub trait ToolHandler: Send + Sync + 'static {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError>;

    /// Why the tool cannot run right now, when it cannot (an upstream server's open breaker);
    /// `None` when it can. The words are what every surface shows.
    fn unavailable(&self) -> Option<String> {
        None
    }
}
