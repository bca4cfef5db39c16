//! One registered upstream as this instance runs it: its MCP session (opened once, reused by
//! every call, reopened when the server forgets it or refuses a rotated credential), its
//! `max_concurrency` semaphore, its circuit breaker, and its credential (a bearer secret or a
//! client-credentials token, both from the project's vault, the token cached until it expires).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::breaker::Breaker;
use super::client::{OnToolsChanged, RpcError};
use super::connection::Connection;
use crate::catalog::ClientRelay;
use crate::clock::Clock;
use crate::vault::Vault;

/// How a server authenticates workbench; secrets are vault names, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum AuthConfig {
    None,
    Bearer {
        secret_ref: String,
    },
    Oauth2 {
        token_url: String,
        client_id: String,
        secret_ref: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
    /// Each user signs in to the server (its authorization server, found by discovery) and
    /// calls its tools with their own token, from their connection to it.
    #[serde(rename = "user_oauth")]
    UserOauth(Box<UserOauth>),
}

/// A server each user signs in to: what the admin gave, and what registration found out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserOauth {
    /// A client registered at the authorization server beforehand (else workbench's metadata
    /// document or dynamic registration), with its secret as a vault reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// The scopes to ask for; by default those the server asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Set by registration, never taken from a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovered: Option<super::discovery::Discovered>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<super::discovery::ClientRegistration>,
    /// The admin who registered it: tools are listed with their connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_by: Option<String>,
}

impl AuthConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            AuthConfig::None => "none",
            AuthConfig::Bearer { .. } => "bearer",
            AuthConfig::Oauth2 { .. } => "oauth2",
            AuthConfig::UserOauth(_) => "user_oauth",
        }
    }

    pub fn user_oauth(&self) -> Option<&UserOauth> {
        match self {
            AuthConfig::UserOauth(u) => Some(u),
            _ => None,
        }
    }
}

/// What a live server needs from the rest of workbench.
#[derive(Clone)]
pub struct Deps {
    pub vault: Vault,
    pub clock: Arc<dyn Clock>,
    /// The guarded client (checked resolver, no redirects, no proxy).
    pub http: reqwest::Client,
}

pub struct Live {
    pub project_id: String,
    pub name: String,
    pub url: url::Url,
    pub auth: AuthConfig,
    pub timeout: Duration,
    pub limit: tokio::sync::Semaphore,
    /// The semaphore's size: `max_concurrency`.
    pub max_concurrency: usize,
    pub breaker: Breaker,
    /// For a server each user signs in to: the caller's connection to it, which its tools
    /// need before they run.
    pub sign_in: Option<Arc<dyn crate::catalog::ConnectionSource>>,
    /// For a stdio server: what runs its process on this instance.
    pub stdio: Option<Arc<super::stdio::pool::Pool>>,
    /// A digest of the stored settings this was built from: when another instance changes
    /// them in place, the next reload here builds a new one instead of keeping this.
    pub built_from: String,
    session: tokio::sync::Mutex<Option<Arc<Connection>>>,
    transport: String,
    /// Called when the server says its tool list changed (the owner refreshes it).
    on_changed: OnToolsChanged,
    token: Mutex<Option<(Zeroizing<String>, i64)>>,
    /// Servers users sign in to: one session per user, opened with the token it was opened
    /// with (a refreshed token opens a new one).
    user_sessions: tokio::sync::Mutex<HashMap<String, (String, Arc<Connection>)>>,
    /// Resources this instance is subscribed to at the server, with how many subscribers
    /// each (`subscriptions.rs`).
    pub(super) subscribed: Mutex<HashMap<String, usize>>,
    deps: Deps,
}

/// Users whose sessions a server keeps open at most; past it the oldest are dropped.
const USER_SESSIONS: usize = 1000;

impl Live {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        project_id: String,
        name: String,
        transport: String,
        url: url::Url,
        auth: AuthConfig,
        timeout: Duration,
        max_concurrency: usize,
        deps: Deps,
        on_changed: OnToolsChanged,
    ) -> Live {
        Live {
            transport,
            on_changed,
            project_id,
            name,
            url,
            auth,
            timeout,
            limit: tokio::sync::Semaphore::new(max_concurrency.max(1)),
            max_concurrency: max_concurrency.max(1),
            breaker: Breaker::default(),
            sign_in: None,
            stdio: None,
            built_from: String::new(),
            session: tokio::sync::Mutex::new(None),
            token: Mutex::new(None),
            user_sessions: tokio::sync::Mutex::default(),
            subscribed: Mutex::default(),
            deps,
        }
    }

    pub fn now(&self) -> i64 {
        self.deps.clock.now_ms()
    }

    /// What the server's `notifications/tools/list_changed` calls.
    pub fn on_changed(&self) -> OnToolsChanged {
        self.on_changed.clone()
    }

    /// The client-credentials token in use, if any (not a vault value, so the handler scrubs
    /// it from what the server sends back itself).
    pub fn current_token(&self) -> Option<Zeroizing<String>> {
        self.token
            .lock()
            .expect("token lock")
            .as_ref()
            .map(|(t, _)| t.clone())
    }

    /// Adds the client-credentials token in use, if any, to `scrubber` (under
    /// `<server>_token`): it is no vault value, so whatever the server sends back is cleaned
    /// of it here.
    pub fn scrub_token_into(&self, scrubber: &mut crate::vault::Scrubber) {
        if let Some(t) = self.current_token() {
            scrubber.add(&format!("{}_token", self.name), &t);
        }
    }

    async fn secret(&self, name: &str) -> Result<Zeroizing<String>, RpcError> {
        let mut found = self
            .deps
            .vault
            .reveal(&self.project_id, std::slice::from_ref(&name.to_owned()))
            .await
            .map_err(|_| RpcError::Protocol("the vault cannot be read right now".into()))?;
        found.remove(name).ok_or_else(|| {
            RpcError::Protocol(format!(
                "the vault secret {name} (this server's credential) is missing"
            ))
        })
    }

    /// The Authorization header value, if the server takes one.
    async fn authorization(&self, fresh: bool) -> Result<Option<Zeroizing<String>>, RpcError> {
        match &self.auth {
            AuthConfig::None => Ok(None),
            AuthConfig::UserOauth(_) => Err(RpcError::Protocol(
                "each user signs in to this server; there is no shared session".into(),
            )),
            AuthConfig::Bearer { secret_ref } => Ok(Some(Zeroizing::new(format!(
                "Bearer {}",
                self.secret(secret_ref).await?.as_str()
            )))),
            AuthConfig::Oauth2 {
                token_url,
                client_id,
                secret_ref,
                scope,
            } => {
                if !fresh {
                    if let Some((t, expires)) = self.token.lock().expect("token lock").clone() {
                        if expires - self.now() > 60_000 {
                            return Ok(Some(Zeroizing::new(format!("Bearer {}", t.as_str()))));
                        }
                    }
                }
                let secret = self.secret(secret_ref).await?;
                let (token, expires) = client_credentials(
                    &self.deps.http,
                    token_url,
                    client_id,
                    &secret,
                    scope.as_deref(),
                    self.now(),
                )
                .await?;
                *self.token.lock().expect("token lock") = Some((token.clone(), expires));
                Ok(Some(Zeroizing::new(format!("Bearer {}", token.as_str()))))
            }
        }
    }

    async fn session(&self, fresh_credential: bool) -> Result<Arc<Connection>, RpcError> {
        // A stdio server's session is its supervisor's, which restarts a process that ended.
        if let Some(s) = &self.stdio {
            return Ok(Arc::new(Connection::Stdio(s.session().await?)));
        }
        let mut slot = self.session.lock().await;
        if let Some(s) = slot.as_ref() {
            if !fresh_credential {
                return Ok(s.clone());
            }
        }
        let authorization = self.authorization(fresh_credential).await?;
        let s = Arc::new(
            Connection::open(
                &self.transport,
                self.deps.http.clone(),
                self.url.clone(),
                authorization,
                self.timeout,
                self.on_changed.clone(),
            )
            .await?,
        );
        *slot = Some(s.clone());
        self.resubscribe(s.clone());
        Ok(s)
    }

    /// Subscribes a session just opened to what this instance is subscribed to at the server
    /// (`subscriptions.rs`).
    fn resubscribe(&self, session: Arc<Connection>) {
        let uris: Vec<String> = self
            .subscribed
            .lock()
            .expect("subscribed lock")
            .keys()
            .cloned()
            .collect();
        if uris.is_empty() || !super::connection::offers_subscriptions(&session.capabilities()) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (name, timeout) = (self.name.clone(), self.timeout);
        rt.spawn(async move {
            for uri in uris {
                if let Err(e) = session
                    .request("resources/subscribe", json!({ "uri": uri }), timeout)
                    .await
                {
                    tracing::warn!(server = %name, error = %e, "subscribing a new session to a resource failed");
                }
            }
        });
    }

    async fn forget_session(&self) {
        *self.session.lock().await = None;
    }

    /// `op` on the pooled session. A forgotten session, or a refused (rotated) credential,
    /// reopens the session once and repeats `op` (the server did not act on it); after a
    /// server failure the next call opens a new session.
    async fn on_session<T, F, Fut>(&self, op: F) -> Result<T, RpcError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, RpcError>>,
    {
        match op(self.session(false).await?).await {
            Err(RpcError::SessionGone) => {
                self.forget_session().await;
                op(self.session(false).await?).await
            }
            Err(RpcError::Unauthorized(_)) => {
                self.forget_session().await;
                op(self.session(true).await?).await
            }
            Err(e) if e.is_server_failure() => {
                self.forget_session().await;
                Err(e)
            }
            other => other,
        }
    }

    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        self.on_session(|s| {
            let params = params.clone();
            async move { s.request(method, params, timeout).await }
        })
        .await
    }

    pub async fn list_tools(&self) -> Result<Vec<Value>, RpcError> {
        let timeout = self.timeout;
        self.on_session(|s| async move { s.list_tools(timeout).await })
            .await
    }

    /// What the server offers, from its initialize answer (opening the session if need be).
    pub async fn capabilities(&self) -> Result<Value, RpcError> {
        self.on_session(|s| async move { Ok(s.capabilities()) })
            .await
    }

    /// Every entry of one of the server's paginated lists (`prompts/list`, …).
    pub async fn list_all(&self, method: &str, field: &str) -> Result<Vec<Value>, RpcError> {
        let timeout = self.timeout;
        self.on_session(|s| async move { s.list_all(method, field, timeout).await })
            .await
    }

    /// The session of `user` opened with `token` (a new one when the token changed).
    async fn user_session(&self, user: &str, token: &str) -> Result<Arc<Connection>, RpcError> {
        let mark = crate::crypto::sha256_hex(token.as_bytes());
        let mut sessions = self.user_sessions.lock().await;
        if let Some((m, s)) = sessions.get(user) {
            if *m == mark {
                return Ok(s.clone());
            }
        }
        let s = Arc::new(
            Connection::open(
                &self.transport,
                self.deps.http.clone(),
                self.url.clone(),
                Some(Zeroizing::new(format!("Bearer {token}"))),
                self.timeout,
                self.on_changed.clone(),
            )
            .await?,
        );
        if sessions.len() >= USER_SESSIONS {
            sessions.clear();
        }
        sessions.insert(user.to_owned(), (mark, s.clone()));
        Ok(s)
    }

    /// `op` on `user`'s session, reopened once when the server forgot it. A refused token is
    /// the caller's to refresh (`RpcError::Unauthorized`).
    async fn as_user<T, F, Fut>(&self, user: &str, token: &str, op: F) -> Result<T, RpcError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, RpcError>>,
    {
        match op(self.user_session(user, token).await?).await {
            Err(RpcError::SessionGone) => {
                self.user_sessions.lock().await.remove(user);
                op(self.user_session(user, token).await?).await
            }
            Err(e) if e.is_server_failure() || matches!(e, RpcError::Unauthorized(_)) => {
                self.user_sessions.lock().await.remove(user);
                Err(e)
            }
            other => other,
        }
    }

    /// `tools/call` as `user`, with their token.
    pub async fn call_tool_as(
        &self,
        user: &str,
        token: &str,
        name: &str,
        arguments: Value,
        meta: Option<Value>,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        let timeout = self.timeout;
        let params = call_params(name, arguments, meta);
        self.as_user(user, token, |s| {
            let params = params.clone();
            async move {
                s.request_relayed("tools/call", params, timeout, relay)
                    .await
            }
        })
        .await
    }

    /// A request as `user`, with their token.
    pub async fn request_as(
        &self,
        user: &str,
        token: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, RpcError> {
        let timeout = self.timeout;
        self.as_user(user, token, |s| {
            let params = params.clone();
            async move { s.request(method, params, timeout).await }
        })
        .await
    }

    /// What the server offers, as `user` opened their session.
    pub async fn capabilities_as(&self, user: &str, token: &str) -> Result<Value, RpcError> {
        self.as_user(user, token, |s| async move { Ok(s.capabilities()) })
            .await
    }

    /// Every entry of one of the server's paginated lists, as `user` sees it.
    pub async fn list_all_as(
        &self,
        user: &str,
        token: &str,
        method: &str,
        field: &str,
    ) -> Result<Vec<Value>, RpcError> {
        let timeout = self.timeout;
        self.as_user(user, token, |s| async move {
            s.list_all(method, field, timeout).await
        })
        .await
    }

    /// The tool list as `user` sees it.
    pub async fn list_tools_as(&self, user: &str, token: &str) -> Result<Vec<Value>, RpcError> {
        let timeout = self.timeout;
        self.as_user(user, token, |s| async move { s.list_tools(timeout).await })
            .await
    }

    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        meta: Option<Value>,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        let params = call_params(name, arguments, meta);
        let timeout = self.timeout;
        self.on_session(|s| {
            let params = params.clone();
            async move {
                s.request_relayed("tools/call", params, timeout, relay)
                    .await
            }
        })
        .await
    }
}

/// The params of `tools/call`, with `_meta` when the call carries any.
fn call_params(name: &str, arguments: Value, meta: Option<Value>) -> Value {
    let mut params = json!({ "name": name, "arguments": arguments });
    if let Some(m) = meta {
        params["_meta"] = m;
    }
    params
}

/// The OAuth 2 client-credentials grant: a token and when it expires (an hour when unsaid).
async fn client_credentials(
    http: &reqwest::Client,
    token_url: &str,
    client_id: &str,
    secret: &str,
    scope: Option<&str>,
    now: i64,
) -> Result<(Zeroizing<String>, i64), RpcError> {
    use oauth2::basic::BasicClient;
    use oauth2::{ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};
    let url = TokenUrl::new(token_url.to_owned())
        .map_err(|e| RpcError::Protocol(format!("token_url: {e}")))?;
    let client = BasicClient::new(ClientId::new(client_id.to_owned()))
        .set_client_secret(ClientSecret::new(secret.to_owned()))
        .set_token_uri(url);
    let mut req = client.exchange_client_credentials();
    if let Some(s) = scope {
        for part in s.split_whitespace() {
            req = req.add_scope(Scope::new(part.to_owned()));
        }
    }
    let t = req.request_async(http).await.map_err(|e| match e {
        oauth2::RequestTokenError::ServerResponse(r) => RpcError::Protocol(format!(
            "the token endpoint refused: {}",
            serde_json::to_string(&r).unwrap_or_default()
        )),
        oauth2::RequestTokenError::Request(_) => {
            RpcError::NotSent("the token endpoint is unreachable".into())
        }
        _ => RpcError::Protocol("the token endpoint sent an unexpected answer".into()),
    })?;
    let lifetime = t
        .expires_in()
        .map(|d| d.as_millis().min(86_400_000) as i64)
        .unwrap_or(3_600_000);
    Ok((
        Zeroizing::new(t.access_token().secret().to_owned()),
        now.saturating_add(lifetime),
    ))
}
