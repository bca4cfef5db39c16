//! Making a connection: `connect` mints a pending connection (contacting no provider), the
//! /connect page shows it to the same user only, OAuth with PKCE S256 and a single-use state,
//! and the API key / cookie form checked by the integration's probe.

use super::oauth;
use super::{ConnectPage, Connections, Credential, Pending, OAUTH_STATE_TTL_MS};
use crate::auth::Principal;
use crate::ids::new_id;
use crate::integrations::{AuthDef, Integration};
use crate::store::{
    self,
    pending_connections::{PendingRow, PendingStatus},
};
use crate::{Error, Result};

/// What `connect` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectOutcome {
    /// The integration needs no account (auth none): nothing to do.
    NoAccountNeeded,
    /// A pending connection for the user to finish at /connect/<id>.
    Pending(Pending),
}

impl Connections {
    /// The `connect` meta-tool: an unknown integration is refused naming the known ones; one
    /// without auth is connected already; anything else mints a pending connection.
    pub async fn connect(&self, who: &Principal, name: &str) -> Result<ConnectOutcome> {
        let Some(i) = self.lookup(&who.project_id, name) else {
            let known: Vec<String> = self
                .all_for(&who.project_id)
                .iter()
                .map(|i| i.name().to_owned())
                .collect();
            return Err(Error::invalid(format!(
                "unknown integration {name}; known: {}",
                known.join(", ")
            )));
        };
        if !i.needs_connection() {
            return Ok(ConnectOutcome::NoAccountNeeded);
        }
        Ok(ConnectOutcome::Pending(self.begin(who, &i).await?))
    }

    /// A pending connection the user opens at /connect/<id>. Contacts no provider.
    pub async fn begin(&self, who: &Principal, i: &Integration) -> Result<Pending> {
        let now = self.now();
        let row = PendingRow {
            id: new_id("conn"),
            project_id: who.project_id.clone(),
            user_id: who.user_id.clone(),
            integration: i.name().to_owned(),
            status: PendingStatus::Pending,
            oauth_state: None,
            pkce_verifier: None,
            state_expires_at: None,
            created_at: now,
            expires_at: now + self.connect_ttl_secs * 1000,
        };
        store::pending_connections::insert(self.db.pool(), &row).await?;
        Ok(Pending {
            id: row.id,
            integration: row.integration,
            auth_type: i.def.auth.kind(),
            expires_at: row.expires_at,
        })
    }

    /// The pending connection `id` if it is `user_id`'s, unexpired and still pending; anything
    /// else is `NotFound` (no existence oracle).
    pub async fn page(&self, user_id: &str, id: &str) -> Result<ConnectPage> {
        let page = self.link(user_id, id).await?;
        if page.pending.status != PendingStatus::Pending {
            return Err(Error::NotFound);
        }
        Ok(page)
    }

    /// The pending connection `id` if it is `user_id`'s and unexpired, pending or already
    /// connected (the page says so); anything else is `NotFound`.
    pub async fn link(&self, user_id: &str, id: &str) -> Result<ConnectPage> {
        let row = store::pending_connections::get(self.db.pool(), id)
            .await?
            .ok_or(Error::NotFound)?;
        if row.user_id != user_id || row.expires_at <= self.now() {
            return Err(Error::NotFound);
        }
        let integration = self
            .lookup(&row.project_id, &row.integration)
            .ok_or(Error::NotFound)?;
        Ok(ConnectPage {
            pending: row,
            integration,
        })
    }

    /// Starts the OAuth flow for a pending connection: a fresh single-use state and PKCE
    /// verifier, and the provider's authorization URL to redirect to. It asks for the
    /// integration's scopes and those an upstream asked the user's connection for (step-up).
    pub async fn authorization_url(
        &self,
        user_id: &str,
        id: &str,
        redirect_uri: &str,
    ) -> Result<String> {
        let page = self.page(user_id, id).await?;
        let mut cfg = page
            .integration
            .oauth
            .clone()
            .ok_or_else(|| Error::invalid("this integration does not use OAuth"))?;
        // A step-up: scopes an upstream asked this user's connection for, beyond its own.
        for s in store::connections::wanted_scopes(
            self.db.pool(),
            &page.pending.project_id,
            user_id,
            page.integration.name(),
        )
        .await?
        {
            if !cfg.scopes.contains(&s) {
                cfg.scopes.push(s);
            }
        }
        let (url, state, verifier) =
            oauth::authorization(&cfg, page.integration.name(), redirect_uri)?;
        store::pending_connections::set_oauth_state(
            self.db.pool(),
            id,
            &state,
            &verifier,
            self.now() + OAUTH_STATE_TTL_MS,
        )
        .await?;
        Ok(url)
    }

    /// The OAuth callback: consumes the state (once), checks the user and `iss`, exchanges the
    /// code with PKCE and stores the tokens. Returns the pending connection's id.
    pub async fn complete_oauth(
        &self,
        user_id: &str,
        state: &str,
        code: &str,
        iss: Option<&str>,
        redirect_uri: &str,
    ) -> Result<String> {
        let row = store::pending_connections::take_by_state(self.db.pool(), state)
            .await?
            .ok_or(Error::NotFound)?;
        let now = self.now();
        if row.user_id != user_id
            || row.state_expires_at.is_none_or(|t| t <= now)
            || row.expires_at <= now
        {
            return Err(Error::NotFound);
        }
        let integration = self
            .lookup(&row.project_id, &row.integration)
            .ok_or(Error::NotFound)?;
        let display = &integration.def.display_name;
        let cfg = self
            .oauth_config(&row.project_id, &integration)
            .await
            .map_err(|why| Error::invalid(format!("{display} cannot finish connecting: {why}")))?
            .ok_or(Error::NotFound)?;
        if let Some(expected) = &cfg.issuer {
            if iss != Some(expected.as_str()) {
                return Err(Error::invalid(
                    "the authorization server's issuer does not match; connection refused",
                ));
            }
        }
        let verifier = row.pkce_verifier.clone().ok_or(Error::NotFound)?;
        let http = integration
            .token_client(&cfg.token_url)
            .map_err(|e| Error::invalid(format!("{display} did not issue a token: {e}")))?;
        let credential = oauth::exchange(http, &cfg, code, &verifier, redirect_uri, now)
            .await
            .map_err(|why| Error::invalid(format!("{display} did not issue a token: {why}")))?;
        self.store(&row.project_id, &row.user_id, &row.integration, &credential)
            .await?;
        store::pending_connections::mark_connected(self.db.pool(), &row.id).await?;
        tracing::info!(integration = %row.integration, %user_id, "connected with oauth");
        self.connected(&row.project_id, &row.integration, user_id);
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
            AuthDef::ApiKey { probe, .. } => (
                Credential::ApiKey {
                    key: value.to_owned(),
                },
                probe,
            ),
            AuthDef::Cookie { probe, .. } => (
                Credential::Cookie {
                    value: value.to_owned(),
                },
                probe,
            ),
            _ => return Err(Error::invalid("this integration does not take a key")),
        };
        oauth::probe(i, probe, &credential)
            .await
            .map_err(|why| Error::invalid(format!("{} {why}", i.def.display_name)))?;
        self.store(&page.pending.project_id, user_id, i.name(), &credential)
            .await?;
        store::pending_connections::mark_connected(self.db.pool(), id).await?;
        Ok(i.def.display_name.clone())
    }
}
