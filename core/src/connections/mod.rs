//! Connections: a user's credential for an integration (sealed like vault values, sealing.rs),
//! how it is made (flow.rs: pending connections minted by `connect`, OAuth with PKCE S256 and
//! single-use state, API key and cookie forms checked by the integration's probe; wait.rs:
//! wait_for_connection), kept fresh (refresh.rs: OAuth refresh before expiry and once after a
//! 401; a failed refresh marks the connection expired) and revoked. curl_session's checks are
//! in curl.rs, its tokens in proxy_token.rs.

mod curl;
mod flow;
mod oauth;
pub mod proxy_token;
mod refresh;
mod sealing;
mod wait;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

pub use crate::catalog::Credential;
pub use crate::store::connections::ConnectionStatus;
pub use crate::store::pending_connections::PendingStatus;
pub use curl::{CurlSession, CurlSessionRequest};
pub use flow::ConnectOutcome;
pub use oauth::{OAuthError, ProbeError};
pub use proxy_token::{ProxyBinding, ProxyClaims, ProxyTokens};
pub use refresh::ToolConnection;

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::ids::new_id;
use crate::integrations::{AppRegistry, AuthDef, Integration, Integrations};
use crate::store::{self, connections::ConnectionRow, pending_connections::PendingRow, Db};
use crate::vault::Vault;
use crate::{Error, Result};

/// How long a pending connection lives (`CONNECT_TTL_SECONDS`, default 600).
pub const DEFAULT_CONNECT_TTL_SECS: i64 = 600;
/// How long an OAuth state stays valid once the user opened the link.
pub const OAUTH_STATE_TTL_MS: i64 = 10 * 60 * 1000;
/// Access tokens this close to expiry are refreshed before use.
const REFRESH_MARGIN_MS: i64 = 60 * 1000;
pub const MAX_WAIT_SECS: u64 = 600;

/// (project id, user id).
type ProjectUser = (String, String);

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
    pub status: ConnectionStatus,
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
    /// Set when the process shuts down: waits answer TIMEOUT at once.
    stopping: Arc<tokio::sync::watch::Sender<bool>>,
    /// Per (project, user): the credentials generation the copy was read at, and the user's
    /// live credential values, for scrubbing without a query per request.
    credential_cache: Arc<std::sync::RwLock<HashMap<ProjectUser, (i64, CredentialSecrets)>>>,
    /// Told (project, integration, user) when a user finishes connecting.
    on_connected: Arc<std::sync::RwLock<Vec<OnConnected>>>,
}

/// A listener for finished connections: (project id, integration, user id).
pub type OnConnected = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// A user's live credential values, named `<integration>_credential`.
pub type CredentialSecrets = Arc<Vec<(String, zeroize::Zeroizing<String>)>>;

/// Users whose credentials an instance keeps a copy of at most; past it the copy starts over.
const CREDENTIAL_CACHE_USERS: usize = 10_000;

impl Connections {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        integrations: Arc<Integrations>,
        apps: Arc<AppRegistry>,
        connect_ttl_secs: i64,
    ) -> Self {
        Connections {
            db,
            clock,
            vault,
            integrations,
            apps,
            connect_ttl_secs,
            stopping: Arc::new(tokio::sync::watch::channel(false).0),
            credential_cache: Arc::default(),
            on_connected: Arc::default(),
        }
    }

    /// Calls `f` each time a user finishes connecting an integration on this instance.
    pub fn on_connected(&self, f: OnConnected) {
        self.on_connected.write().expect("listeners lock").push(f);
    }

    fn connected(&self, project_id: &str, integration: &str, user_id: &str) {
        let listeners = self.on_connected.read().expect("listeners lock").clone();
        for f in listeners {
            f(project_id, integration, user_id);
        }
    }

    /// An integration a project can connect: a shipped plugin or one of its custom apps.
    pub fn lookup(&self, project_id: &str, name: &str) -> Option<Arc<Integration>> {
        self.integrations
            .get(name)
            .cloned()
            .or_else(|| self.apps.get(project_id, name))
    }

    /// Every integration of a project: plugins, then its apps.
    pub fn all_for(&self, project_id: &str) -> Vec<Arc<Integration>> {
        let mut all: Vec<Arc<Integration>> = self.integrations.all().to_vec();
        all.extend(self.apps.all(project_id));
        all
    }

    /// The process is shutting down: every wait_for_connection answers TIMEOUT now.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    /// Becomes true once the process is shutting down (other long waits end on it too).
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn integrations(&self) -> &Arc<Integrations> {
        &self.integrations
    }

    /// Stores a credential as the user's connection to `integration`; tokens of the
    /// connection it replaces (a reconnect, a step-up) are revoked at the provider.
    pub async fn store(
        &self,
        project_id: &str,
        user_id: &str,
        integration: &str,
        c: &Credential,
    ) -> Result<()> {
        let now = self.now();
        let mut row = ConnectionRow {
            id: new_id("conn"),
            project_id: project_id.to_owned(),
            user_id: user_id.to_owned(),
            integration: integration.to_owned(),
            status: ConnectionStatus::Connected,
            ciphertext: None,
            nonce: None,
            key_version: None,
            expires_at: None,
            created_at: now,
            updated_at: now,
        };
        self.seal(&mut row, c)?;
        let replaced =
            store::connections::get(self.db.pool(), project_id, user_id, integration).await?;
        store::connections::upsert(&self.db, &row).await?;
        if let Some(old) = replaced.filter(|r| r.status == ConnectionStatus::Connected) {
            self.revoke_upstream(&old, Some(c)).await;
        }
        Ok(())
    }

    /// The user's connections in the project.
    pub async fn list(&self, who: &Principal) -> Result<Vec<ConnectionInfo>> {
        let rows = store::connections::list_for_user(self.db.pool(), &who.project_id, &who.user_id)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| ConnectionInfo {
                integration: r.integration,
                status: r.status,
                updated_at: rfc3339(r.updated_at),
            })
            .collect())
    }

    /// Every secret of the user's live connections in the project, named `<integration>_credential`,
    /// for scrubbing (D7: a call's output is scrubbed of all of the caller's credentials, not only
    /// those it used).
    pub async fn credential_secrets(&self, who: &Principal) -> Result<CredentialSecrets> {
        let key = (who.project_id.clone(), who.user_id.clone());
        // The generation read with the caller's key (before the rows below): a copy made at it
        // holds every credential added up to it; a change since bumps it in the same
        // transaction, so the copy is never older than it claims.
        let known = who.credentials_generation;
        if let Some(g) = known {
            if let Some((at, secrets)) = self
                .credential_cache
                .read()
                .expect("credential cache lock")
                .get(&key)
            {
                if *at == g {
                    return Ok(secrets.clone());
                }
            }
        }
        let rows = store::connections::list_for_user(self.db.pool(), &who.project_id, &who.user_id)
            .await?;
        let mut out = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.status == ConnectionStatus::Connected)
        {
            let c = self.open(row)?;
            for secret in c.secrets() {
                out.push((
                    format!("{}_credential", row.integration),
                    zeroize::Zeroizing::new(secret.to_owned()),
                ));
            }
        }
        let out: CredentialSecrets = Arc::new(out);
        if let Some(g) = known {
            let mut cache = self
                .credential_cache
                .write()
                .expect("credential cache lock");
            if cache.len() >= CREDENTIAL_CACHE_USERS {
                cache.clear();
            }
            cache.insert(key, (g, out.clone()));
        }
        Ok(out)
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
                Some(r) if r.status == ConnectionStatus::Connected
            )),
        }
    }

    /// Disconnects: forgets the credential and revokes the user's proxy tokens for it.
    pub async fn disconnect(&self, who: &Principal, integration: &str) -> Result<()> {
        let Some(row) =
            store::connections::get(self.db.pool(), &who.project_id, &who.user_id, integration)
                .await?
        else {
            return Err(Error::NotFound);
        };
        store::connections::set_status(
            self.db.pool(),
            &row.id,
            ConnectionStatus::Revoked,
            self.now(),
        )
        .await?;
        self.revoke_upstream(&row, None).await;
        store::proxy_tokens::revoke_for_user(
            self.db.pool(),
            &who.user_id,
            Some(integration),
            self.now(),
        )
        .await?;
        tracing::info!(integration, user_id = %who.user_id, "disconnected");
        Ok(())
    }
}

impl Connections {
    /// Revokes a forgotten or replaced connection's tokens at the provider (RFC 7009) when it
    /// offers a revocation endpoint: the refresh token (which takes its access tokens with it
    /// at most providers), then the access token; none that `keep` (the replacing credential)
    /// holds too. Best effort: the connection is forgotten here whatever the provider answers,
    /// and a failure is logged without the token.
    pub(crate) async fn revoke_upstream(&self, row: &ConnectionRow, keep: Option<&Credential>) {
        let Some(i) = self.lookup(&row.project_id, &row.integration) else {
            return;
        };
        let Some(url) = i.oauth.as_ref().and_then(|o| o.revocation_url.clone()) else {
            return;
        };
        let Ok(credential) = self.open(row) else {
            return;
        };
        let Credential::Oauth2 {
            access_token,
            refresh_token,
            ..
        } = &credential
        else {
            return;
        };
        let cfg = match self.oauth_config(&row.project_id, &i).await {
            Ok(Some(cfg)) => cfg,
            _ => return,
        };
        let Ok(http) = i.token_client(&url) else {
            return;
        };
        let kept: Vec<&str> = keep.map(Credential::secrets).unwrap_or_default();
        let tokens = refresh_token
            .iter()
            .map(|t| (t.as_str(), "refresh_token"))
            .chain([(access_token.as_str(), "access_token")])
            .filter(|(t, _)| !kept.contains(t));
        for (token, hint) in tokens {
            if let Err(why) = oauth::revoke(http, &cfg, &url, token, hint).await {
                tracing::warn!(integration = %row.integration, user_id = %row.user_id, %why, "the provider did not revoke a disconnected token");
            }
        }
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
}
