//! Keeping credentials fresh: the credential for a call (an OAuth token close to expiry is
//! refreshed first), one refresh after a 401, and a failed refresh marking the connection
//! expired. `ToolConnection` is the hook the catalog's tools carry to reach it.

use std::sync::Arc;

use async_trait::async_trait;

use super::oauth::{self, OAuthError};
use super::{ConnectionProblem, ConnectionStatus, Connections, Credential, REFRESH_MARGIN_MS};
use crate::auth::Principal;
use crate::catalog::{ConnectionSource, HandlerError};
use crate::integrations::{Integration, OAuthConfig};
use crate::store::{self, connections::ConnectionRow};
use crate::Result;

/// The user's connection to one integration, as a tool of that integration reaches it: the
/// pipeline asks it for the credential, the plugin handler for a refresh after a 401.
pub struct ToolConnection {
    connections: Connections,
    integration: Arc<Integration>,
}

impl ToolConnection {
    fn problem(&self, p: ConnectionProblem) -> HandlerError {
        HandlerError::NotConnected {
            integration: self.integration.name().to_owned(),
            expired: p == ConnectionProblem::Expired,
        }
    }
}

#[async_trait]
impl ConnectionSource for ToolConnection {
    fn integration(&self) -> &str {
        self.integration.name()
    }

    async fn credential(&self, who: &Principal) -> std::result::Result<Credential, HandlerError> {
        match self.connections.credential(who, &self.integration).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(p)) => Err(self.problem(p)),
            Err(e) => {
                tracing::error!(error = ?e, "connection lookup failed");
                Err(HandlerError::Unavailable(
                    "connections cannot be read right now".into(),
                ))
            }
        }
    }

    async fn refresh_after_unauthorized(
        &self,
        who: &Principal,
    ) -> std::result::Result<Credential, HandlerError> {
        let unavailable = || HandlerError::Unavailable("connections are unavailable".into());
        let c = &self.connections;
        let row = store::connections::get(
            c.db.pool(),
            &who.project_id,
            &who.user_id,
            self.integration.name(),
        )
        .await
        .map_err(|_| unavailable())?
        .ok_or(self.problem(ConnectionProblem::NotConnected))?;
        let credential = c
            .open(&row)
            .map_err(|_| self.problem(ConnectionProblem::Expired))?;
        match c.refresh(&self.integration, row, credential).await {
            Ok(Ok(fresh)) => Ok(fresh),
            Ok(Err(p)) => Err(self.problem(p)),
            Err(_) => Err(unavailable()),
        }
    }

    async fn step_up(&self, who: &Principal, scopes: &[String]) -> HandlerError {
        let name = self.integration.name();
        let c = &self.connections;
        if let Err(e) = store::connections::add_wanted_scopes(
            &c.db,
            &who.project_id,
            &who.user_id,
            name,
            scopes,
        )
        .await
        {
            tracing::error!(error = ?e, integration = name, "remembering the scopes a step-up needs failed");
            return HandlerError::Unavailable("connections cannot be written right now".into());
        }
        HandlerError::ScopeNeeded {
            integration: name.to_owned(),
            scopes: scopes.to_vec(),
        }
    }
}

impl Connections {
    /// The hook a tool of `integration` carries to reach the user's connection.
    pub fn source_for(&self, integration: Arc<Integration>) -> Arc<dyn ConnectionSource> {
        Arc::new(ToolConnection {
            connections: self.clone(),
            integration,
        })
    }

    /// The credential to use for a call, refreshed first when an OAuth token is about to expire.
    pub async fn credential(
        &self,
        who: &Principal,
        i: &Integration,
    ) -> Result<std::result::Result<Credential, ConnectionProblem>> {
        self.credential_of(&who.project_id, &who.user_id, i).await
    }

    /// `credential` for a user named by id (an upstream server's tools are listed with the
    /// connection of the admin who registered it).
    pub async fn credential_of(
        &self,
        project_id: &str,
        user_id: &str,
        i: &Integration,
    ) -> Result<std::result::Result<Credential, ConnectionProblem>> {
        let Some(row) =
            store::connections::get(self.db.pool(), project_id, user_id, i.name()).await?
        else {
            return Ok(Err(ConnectionProblem::NotConnected));
        };
        match row.status {
            ConnectionStatus::Connected => {}
            ConnectionStatus::Expired => return Ok(Err(ConnectionProblem::Expired)),
            ConnectionStatus::Revoked => return Ok(Err(ConnectionProblem::NotConnected)),
        }
        let c = self.open(&row)?;
        let due = c
            .expires_at()
            .is_some_and(|e| e - self.now() < REFRESH_MARGIN_MS);
        if due {
            return self.refresh(i, row, c).await;
        }
        Ok(Ok(c))
    }

    /// The integration's OAuth settings with the client secret filled in: the operator's, or
    /// for a custom app the project's vault secret it names.
    pub(super) async fn oauth_config(
        &self,
        project_id: &str,
        i: &Integration,
    ) -> std::result::Result<Option<OAuthConfig>, OAuthError> {
        let Some(mut cfg) = i.oauth.clone() else {
            return Ok(None);
        };
        if let Some(name) = cfg.client_secret_vault.clone() {
            let mut found = self
                .vault
                .reveal(project_id, std::slice::from_ref(&name))
                .await
                .map_err(|e| OAuthError::Vault(e.to_string()))?;
            let secret = found
                .remove(&name)
                .ok_or(OAuthError::MissingClientSecret(name))?;
            cfg.client_secret = Some(secret.to_string());
        }
        Ok(Some(cfg))
    }

    async fn refresh(
        &self,
        i: &Integration,
        row: ConnectionRow,
        c: Credential,
    ) -> Result<std::result::Result<Credential, ConnectionProblem>> {
        let refreshed = match (&c, self.oauth_config(&row.project_id, i).await) {
            (
                Credential::Oauth2 {
                    refresh_token: Some(rt),
                    ..
                },
                Ok(Some(cfg)),
            ) => match i.token_client(&cfg.token_url) {
                Ok(http) => oauth::refresh(http, &cfg, rt, self.now()).await,
                Err(e) => Err(OAuthError::Destination(e.to_string())),
            },
            (_, Err(why)) => Err(why),
            _ => Err(OAuthError::NoRefreshToken),
        };
        match refreshed {
            Ok(mut fresh) => {
                // Keep the refresh token when the provider does not rotate it.
                if let (
                    Credential::Oauth2 {
                        refresh_token: new_rt,
                        ..
                    },
                    Credential::Oauth2 {
                        refresh_token: old_rt,
                        ..
                    },
                ) = (&mut fresh, &c)
                {
                    if new_rt.is_none() {
                        *new_rt = old_rt.clone();
                    }
                }
                let mut next = row.clone();
                next.updated_at = self.now();
                self.seal(&mut next, &fresh)?;
                let old = row.ciphertext.clone().unwrap_or_default();
                if !store::connections::replace_credential(&self.db, &row.id, &old, &next).await? {
                    // Another instance refreshed first: use its token.
                    if let Some(current) = store::connections::get(
                        self.db.pool(),
                        &row.project_id,
                        &row.user_id,
                        &row.integration,
                    )
                    .await?
                    {
                        if current.status == ConnectionStatus::Connected {
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
                store::connections::set_status(
                    self.db.pool(),
                    &row.id,
                    ConnectionStatus::Expired,
                    self.now(),
                )
                .await?;
                Ok(Err(ConnectionProblem::Expired))
            }
        }
    }
}
