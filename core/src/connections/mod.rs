//! Connections: a user's credential for an integration (sealed like vault values), how it is
//! made (pending connections minted by `connect`, OAuth with PKCE S256 and single-use state,
//! API key and cookie forms checked by the integration's probe), kept fresh (OAuth refresh
//! before expiry and once after a 401; a failed refresh marks the connection expired) and
//! revoked. Proxy tokens for curl_session live in proxy_token.rs.

mod credential;
mod oauth;
pub mod proxy_token;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use credential::Credential;
pub use proxy_token::{ProxyClaims, ProxyTokens};

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::engine::HandlerError;
use crate::ids::new_id;
use crate::plugins::{AppRegistry, AuthDef, Integration, Integrations, OAuthConfig};
use crate::store::{self, connections::ConnectionRow, connections::PendingRow, Db};
use crate::vault::{Sealed, Vault};
use crate::{Error, Result};

/// How long a pending connection lives (`CONNECT_TTL_SECONDS`, default 600).
pub const DEFAULT_CONNECT_TTL_SECS: i64 = 600;
/// How long an OAuth state stays valid once the user opened the link.
pub const OAUTH_STATE_TTL_MS: i64 = 10 * 60 * 1000;
/// Access tokens this close to expiry are refreshed before use.
const REFRESH_MARGIN_MS: i64 = 60 * 1000;
pub const MAX_WAIT_SECS: u64 = 600;

/// Why a tool of an integration cannot run for this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionProblem {
    NotConnected,
    /// The refresh failed or was impossible: the user must connect again.
    Expired,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionInfo {
    pub integration: String,
    pub status: String,
    pub updated_at: String,
}

/// A pending connection as `connect` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub integration: String,
    pub auth_type: &'static str,
    pub expires_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    Connected,
    Timeout,
    Expired,
    Unknown,
}

/// What the /connect page shows for a pending connection.
#[derive(Debug, Clone)]
pub struct ConnectPage {
    pub pending: PendingRow,
    pub integration: Arc<Integration>,
}

#[derive(Clone)]
pub struct Connections {
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    integrations: Arc<Integrations>,
    apps: Arc<AppRegistry>,
    connect_ttl_secs: i64,
}

fn context(user_id: &str, integration: &str) -> String {
    format!("connection:{user_id}:{integration}")
}

impl Connections {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        integrations: Arc<Integrations>,
        apps: Arc<AppRegistry>,
        connect_ttl_secs: i64,
    ) -> Self {
        Connections { db, clock, vault, integrations, apps, connect_ttl_secs }
    }

    /// An integration a project can connect: a shipped plugin or one of its custom apps.
    pub fn lookup(&self, project_id: &str, name: &str) -> Option<Arc<Integration>> {
        self.integrations.get(name).cloned().or_else(|| self.apps.get(project_id, name))
    }

    /// Every integration of a project: plugins, then its apps.
    pub fn all_for(&self, project_id: &str) -> Vec<Arc<Integration>> {
        let mut all: Vec<Arc<Integration>> = self.integrations.all().to_vec();
        all.extend(self.apps.all(project_id));
        all
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn integrations(&self) -> &Arc<Integrations> {
        &self.integrations
    }

    fn seal(&self, row: &mut ConnectionRow, c: &Credential) -> Result<()> {
        let bytes = zeroize::Zeroizing::new(serde_json::to_vec(c).map_err(|e| Error::internal(e.to_string()))?);
        let sealed = self.vault.seal(&row.project_id, &context(&row.user_id, &row.integration), &bytes)?;
        row.ciphertext = Some(sealed.ciphertext);
        row.nonce = Some(sealed.nonce);
        row.key_version = Some(sealed.key_version);
        row.expires_at = c.expires_at();
        Ok(())
    }

    fn open(&self, row: &ConnectionRow) -> Result<Credential> {
        let sealed = Sealed {
            ciphertext: row.ciphertext.clone().unwrap_or_default(),
            nonce: row.nonce.clone().unwrap_or_default(),
            key_version: row.key_version.unwrap_or_default(),
        };
        let bytes = self.vault.open(&row.project_id, &context(&row.user_id, &row.integration), &sealed)?;
        serde_json::from_slice(&bytes).map_err(|e| Error::internal(format!("stored credential does not parse: {e}")))
    }

    /// Re-seals every stored credential that is not under the vault's newest key version (the
    /// second half of `rotate-master-key`). Re-runnable like the vault's; returns the count.
    pub async fn reseal_all(&self) -> Result<u64> {
        let version = self.vault.current_key_version().ok_or_else(|| Error::internal("no master key configured"))?;
        crate::vault::reseal_in_batches(|| self.reseal_batch(version)).await
    }

    async fn reseal_batch(&self, version: i64) -> Result<u64> {
        let mut done = 0;
        for row in store::connections::not_on_version(self.db.pool(), version, crate::vault::RESEAL_BATCH).await? {
            let credential = self.open(&row)?;
            let mut next = row.clone();
            self.seal(&mut next, &credential)?;
            let (Some(old), Some(ct), Some(nonce), Some(v)) = (&row.ciphertext, &next.ciphertext, &next.nonce, next.key_version) else {
                continue;
            };
            if store::connections::reseal(self.db.pool(), &row.id, old, ct, nonce, v).await? {
                done += 1;
            }
        }
        Ok(done)
    }

    /// Stores a credential as the user's connection to `integration`.
    pub async fn store(&self, project_id: &str, user_id: &str, integration: &str, c: &Credential) -> Result<()> {
        let now = self.now();
        let mut row = ConnectionRow {
            id: new_id("conn"),
            project_id: project_id.to_owned(),
            user_id: user_id.to_owned(),
            integration: integration.to_owned(),
            status: "connected".into(),
            ciphertext: None,
            nonce: None,
            key_version: None,
            expires_at: None,
            created_at: now,
            updated_at: now,
        };
        self.seal(&mut row, c)?;
        store::connections::upsert(self.db.pool(), &row).await
    }

    /// The credential to use for a call, refreshed first when an OAuth token is about to expire.
    pub async fn credential(&self, who: &Principal, i: &Integration) -> Result<std::result::Result<Credential, ConnectionProblem>> {
        let Some(row) = store::connections::get(self.db.pool(), &who.project_id, &who.user_id, i.name()).await? else {
            return Ok(Err(ConnectionProblem::NotConnected));
        };
        match row.status.as_str() {
            "connected" => {}
            "expired" => return Ok(Err(ConnectionProblem::Expired)),
            _ => return Ok(Err(ConnectionProblem::NotConnected)),
        }
        let c = self.open(&row)?;
        let due = c.expires_at().is_some_and(|e| e - self.now() < REFRESH_MARGIN_MS);
        if due {
            return self.refresh(i, row, c).await;
        }
        Ok(Ok(c))
    }

    /// After a 401: refresh the OAuth token once; failing that the connection is expired.
    pub async fn refresh_after_unauthorized(&self, who: &Principal, i: &Integration) -> std::result::Result<Credential, HandlerError> {
        let problem = |p: ConnectionProblem| HandlerError::NotConnected {
            integration: i.name().to_owned(),
            expired: p == ConnectionProblem::Expired,
        };
        let row = store::connections::get(self.db.pool(), &who.project_id, &who.user_id, i.name())
            .await
            .map_err(|_| HandlerError::Unavailable("connections are unavailable".into()))?
            .ok_or(problem(ConnectionProblem::NotConnected))?;
        let c = self.open(&row).map_err(|_| problem(ConnectionProblem::Expired))?;
        match self.refresh(i, row, c).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(p)) => Err(problem(p)),
            Err(_) => Err(HandlerError::Unavailable("connections are unavailable".into())),
        }
    }

    /// The integration's OAuth settings with the client secret filled in: the operator's, or
    /// for a custom app the project's vault secret it names.
    async fn oauth_config(&self, project_id: &str, i: &Integration) -> std::result::Result<Option<OAuthConfig>, String> {
        let Some(mut cfg) = i.oauth.clone() else { return Ok(None) };
        if let Some(name) = cfg.client_secret_vault.clone() {
            let mut found = self.vault.reveal(project_id, std::slice::from_ref(&name)).await.map_err(|e| e.to_string())?;
            let secret = found.remove(&name).ok_or_else(|| format!("the vault secret {name} (the OAuth client secret) is missing"))?;
            cfg.client_secret = Some(secret.to_string());
        }
        Ok(Some(cfg))
    }

    async fn refresh(&self, i: &Integration, row: ConnectionRow, c: Credential) -> Result<std::result::Result<Credential, ConnectionProblem>> {
        let refreshed = match (&c, self.oauth_config(&row.project_id, i).await) {
            (Credential::Oauth2 { refresh_token: Some(rt), .. }, Ok(Some(cfg))) => match i.token_client(&cfg.token_url) {
                Ok(http) => oauth::refresh(http, &cfg, rt, self.now()).await,
                Err(e) => Err(e.to_string()),
            },
            (_, Err(why)) => Err(why),
            _ => Err("no refresh token".into()),
        };
        match refreshed {
            Ok(mut fresh) => {
                // Keep the refresh token when the provider does not rotate it.
                if let (Credential::Oauth2 { refresh_token: new_rt, .. }, Credential::Oauth2 { refresh_token: old_rt, .. }) = (&mut fresh, &c) {
                    if new_rt.is_none() {
                        *new_rt = old_rt.clone();
                    }
                }
                let mut next = row.clone();
                next.updated_at = self.now();
                self.seal(&mut next, &fresh)?;
                let old = row.ciphertext.clone().unwrap_or_default();
                if !store::connections::replace_credential(self.db.pool(), &row.id, &old, &next).await? {
                    // Another instance refreshed first: use its token.
                    if let Some(current) = store::connections::get(self.db.pool(), &row.project_id, &row.user_id, &row.integration).await? {
                        if current.status == "connected" {
                            return Ok(Ok(self.open(&current)?));
                        }
                    }
                    return Ok(Err(ConnectionProblem::Expired));
                }
                tracing::info!(integration = %i.name(), user_id = %row.user_id, "oauth token refreshed");
                Ok(Ok(fresh))
            }
            Err(why) => {
                tracing::warn!(integration = %i.name(), user_id = %row.user_id, %why, "oauth refresh failed; connection expired");
                store::connections::set_status(self.db.pool(), &row.id, "expired", self.now()).await?;
                Ok(Err(ConnectionProblem::Expired))
            }
        }
    }

    /// The user's connections in the project.
    pub async fn list(&self, who: &Principal) -> Result<Vec<ConnectionInfo>> {
        let rows = store::connections::list_for_user(self.db.pool(), &who.project_id, &who.user_id).await?;
        Ok(rows.into_iter().map(|r| ConnectionInfo { integration: r.integration, status: r.status, updated_at: rfc3339(r.updated_at) }).collect())
    }

    /// list_integrations' `connected`: true for auth none, a live probe for cookies, a stored
    /// connection otherwise.
    pub async fn is_connected(&self, who: &Principal, i: &Integration) -> Result<bool> {
        match &i.def.auth {
            AuthDef::None => Ok(true),
            AuthDef::Cookie { probe, .. } => match self.credential(who, i).await? {
                Ok(c) => Ok(oauth::probe(i, probe, &c).await.is_ok()),
                Err(_) => Ok(false),
            },
            _ => Ok(matches!(
                store::connections::get(self.db.pool(), &who.project_id, &who.user_id, i.name()).await?,
                Some(r) if r.status == "connected"
            )),
        }
    }

    /// Disconnects: forgets the credential and revokes the user's proxy tokens for it.
    pub async fn disconnect(&self, who: &Principal, integration: &str) -> Result<()> {
        let Some(row) = store::connections::get(self.db.pool(), &who.project_id, &who.user_id, integration).await? else {
            return Err(Error::NotFound);
        };
        store::connections::set_status(self.db.pool(), &row.id, "revoked", self.now()).await?;
        store::connections::revoke_proxy_tokens(self.db.pool(), &who.user_id, Some(integration), self.now()).await?;
        tracing::info!(integration, user_id = %who.user_id, "disconnected");
        Ok(())
    }

    /// `connect`: a pending connection the user opens at /connect/<id>. Contacts no provider.
    pub async fn begin(&self, who: &Principal, i: &Integration) -> Result<Pending> {
        let now = self.now();
        let row = PendingRow {
            id: new_id("conn"),
            project_id: who.project_id.clone(),
            user_id: who.user_id.clone(),
            integration: i.name().to_owned(),
            status: "pending".into(),
            oauth_state: None,
            pkce_verifier: None,
            state_expires_at: None,
            created_at: now,
            expires_at: now + self.connect_ttl_secs * 1000,
        };
        store::connections::insert_pending(self.db.pool(), &row).await?;
        Ok(Pending { id: row.id, integration: row.integration, auth_type: i.def.auth.kind(), expires_at: row.expires_at })
    }

    /// The pending connection `id` if it is `user_id`'s, unexpired and still pending; anything
    /// else is `NotFound` (no existence oracle).
    pub async fn page(&self, user_id: &str, id: &str) -> Result<ConnectPage> {
        let page = self.link(user_id, id).await?;
        if page.pending.status != "pending" {
            return Err(Error::NotFound);
        }
        Ok(page)
    }

    /// The pending connection `id` if it is `user_id`'s and unexpired, pending or already
    /// connected (the page says so); anything else is `NotFound`.
    pub async fn link(&self, user_id: &str, id: &str) -> Result<ConnectPage> {
        let row = store::connections::get_pending(self.db.pool(), id).await?.ok_or(Error::NotFound)?;
        if row.user_id != user_id || row.expires_at <= self.now() {
            return Err(Error::NotFound);
        }
        let integration = self.lookup(&row.project_id, &row.integration).ok_or(Error::NotFound)?;
        Ok(ConnectPage { pending: row, integration })
    }

    /// Starts the OAuth flow for a pending connection: a fresh single-use state and PKCE
    /// verifier, and the provider's authorization URL to redirect to.
    pub async fn authorization_url(&self, user_id: &str, id: &str, redirect_uri: &str) -> Result<String> {
        let page = self.page(user_id, id).await?;
        let cfg = page.integration.oauth.clone().ok_or_else(|| Error::invalid("this integration does not use OAuth"))?;
        let (url, state, verifier) = oauth::authorization(&cfg, page.integration.name(), redirect_uri)?;
        store::connections::set_oauth_state(self.db.pool(), id, &state, &verifier, self.now() + OAUTH_STATE_TTL_MS).await?;
        Ok(url)
    }

    /// The OAuth callback: consumes the state (once), checks the user and `iss`, exchanges the
    /// code with PKCE and stores the tokens. Returns the pending connection's id.
    pub async fn complete_oauth(&self, user_id: &str, state: &str, code: &str, iss: Option<&str>, redirect_uri: &str) -> Result<String> {
        let row = store::connections::take_by_state(self.db.pool(), state).await?.ok_or(Error::NotFound)?;
        let now = self.now();
        if row.user_id != user_id || row.state_expires_at.is_none_or(|t| t <= now) || row.expires_at <= now {
            return Err(Error::NotFound);
        }
        let integration = self.lookup(&row.project_id, &row.integration).ok_or(Error::NotFound)?;
        let display = &integration.def.display_name;
        let cfg = self
            .oauth_config(&row.project_id, &integration)
            .await
            .map_err(|why| Error::invalid(format!("{display} cannot finish connecting: {why}")))?
            .ok_or(Error::NotFound)?;
        if let Some(expected) = &cfg.issuer {
            if iss != Some(expected.as_str()) {
                return Err(Error::invalid("the authorization server's issuer does not match; connection refused"));
            }
        }
        let verifier = row.pkce_verifier.clone().ok_or(Error::NotFound)?;
        let http = integration.token_client(&cfg.token_url).map_err(|e| Error::invalid(format!("{display} did not issue a token: {e}")))?;
        let credential = oauth::exchange(http, &cfg, code, &verifier, redirect_uri, now)
            .await
            .map_err(|why| Error::invalid(format!("{display} did not issue a token: {why}")))?;
        self.store(&row.project_id, &row.user_id, &row.integration, &credential).await?;
        store::connections::mark_pending_connected(self.db.pool(), &row.id).await?;
        tracing::info!(integration = %row.integration, %user_id, "connected with oauth");
        Ok(row.id)
    }

    /// The API key / cookie form: the value is checked with the integration's probe before it
    /// is stored.
    pub async fn submit_secret(&self, user_id: &str, id: &str, value: &str) -> Result<String> {
        let page = self.page(user_id, id).await?;
        let value = value.trim();
        if value.is_empty() || value.len() > 8192 {
            return Err(Error::invalid("enter the value (at most 8192 characters)"));
        }
        let i = &page.integration;
        let (credential, probe) = match &i.def.auth {
            AuthDef::ApiKey { probe, .. } => (Credential::ApiKey { key: value.to_owned() }, probe),
            AuthDef::Cookie { probe, .. } => (Credential::Cookie { value: value.to_owned() }, probe),
            _ => return Err(Error::invalid("this integration does not take a key")),
        };
        oauth::probe(i, probe, &credential)
            .await
            .map_err(|why| Error::invalid(format!("{} {why}", i.def.display_name)))?;
        self.store(&page.pending.project_id, user_id, i.name(), &credential).await?;
        store::connections::mark_pending_connected(self.db.pool(), id).await?;
        Ok(i.def.display_name.clone())
    }

    /// wait_for_connection: polls the database once a second (so another instance may finish
    /// the flow). A timeout reaps the pending record.
    pub async fn wait(&self, who: &Principal, id: &str, timeout: Duration) -> Result<WaitOutcome> {
        let started = std::time::Instant::now();
        loop {
            let Some(row) = store::connections::get_pending(self.db.pool(), id).await? else {
                return Ok(WaitOutcome::Unknown);
            };
            if row.user_id != who.user_id || row.project_id != who.project_id {
                return Ok(WaitOutcome::Unknown);
            }
            if row.status == "connected" {
                return Ok(WaitOutcome::Connected);
            }
            if row.expires_at <= self.now() {
                store::connections::delete_pending(self.db.pool(), id).await?;
                return Ok(WaitOutcome::Expired);
            }
            if started.elapsed() >= timeout {
                store::connections::delete_pending(self.db.pool(), id).await?;
                return Ok(WaitOutcome::Timeout);
            }
            tokio::time::sleep(Duration::from_secs(1).min(timeout.saturating_sub(started.elapsed())).max(Duration::from_millis(10))).await;
        }
    }

    /// Removes pending connections long past their expiry.
    pub async fn purge_expired(&self) -> Result<u64> {
        store::connections::delete_pending_before(self.db.pool(), self.now() - 24 * 3600 * 1000).await
    }
}

/// One entry of list_integrations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntegrationStatus {
    pub name: String,
    pub version: String,
    pub connected: bool,
}

impl Connections {
    /// list_integrations: every integration with the user's connection state.
    pub async fn statuses(&self, who: &Principal) -> Result<Vec<IntegrationStatus>> {
        let mut out = Vec::new();
        for i in &self.all_for(&who.project_id) {
            out.push(IntegrationStatus {
                name: i.name().to_owned(),
                version: i.def.version.clone(),
                connected: self.is_connected(who, i).await?,
            });
        }
        Ok(out)
    }

    /// Checks a curl_session request: every name must be a known integration with the curl
    /// proxy enabled that the user has connected. All-or-nothing: the failures are joined by
    /// "; ".
    pub async fn check_proxy_request(&self, who: &Principal, names: &[String]) -> std::result::Result<Vec<String>, String> {
        let mut problems = Vec::new();
        let mut ok = Vec::new();
        if names.is_empty() {
            return Err("integrations is empty; name at least one".into());
        }
        for name in names {
            if ok.contains(name) {
                continue;
            }
            match self.lookup(&who.project_id, name).as_deref() {
                None => problems.push(format!("unknown integration {name}")),
                Some(i) if !i.def.curl_proxy => problems.push(format!("{name} does not have the curl proxy enabled")),
                Some(i) if i.needs_connection() => match self.credential(who, i).await {
                    Ok(Ok(_)) => ok.push(name.clone()),
                    Ok(Err(_)) => problems.push(format!("{name} is not connected; call connect first")),
                    Err(_) => problems.push(format!("{name}: connections cannot be read right now")),
                },
                Some(_) => ok.push(name.clone()),
            }
        }
        if problems.is_empty() {
            Ok(ok)
        } else {
            Err(problems.join("; "))
        }
    }
}
