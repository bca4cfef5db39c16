//! Upstream servers each user signs in to (`auth.type: user_oauth`, issue 31): registration
//! discovers the authorization server and registers workbench with it (a pre-registered
//! client, workbench's client ID metadata document, or dynamic registration, in that order);
//! the server then is an integration users connect like a plugin (`connect`, the /connect
//! page, `wait_for_connection`), its tools run with the caller's own token, and its tool list
//! is read with the connection of the admin who registered it, once they connected.

use std::sync::Arc;

use super::discovery::{self, ClientRegistration, Discovered};
use super::live::UserOauth;
use super::{Live, Upstreams};
use crate::auth::Principal;
use crate::catalog::ToolSource;
use crate::integrations::{AuthDef, Integration, IntegrationDef, Outbound};
use crate::store::mcp_servers::ServerRow;
use crate::{Error, Result};

impl Upstreams {
    /// Completes an admin's `user_oauth` settings: discovery, then workbench's client at the
    /// authorization server. A secret dynamic registration hands out is sealed in the vault
    /// as `MCP_<NAME>_CLIENT_SECRET`. Nothing else is stored by this.
    pub(super) async fn prepare_sign_in(
        &self,
        admin: &Principal,
        name: &str,
        url: &url::Url,
        transport: &str,
        u: &mut UserOauth,
    ) -> Result<()> {
        if u.discovered.is_some() || u.client.is_some() || u.registered_by.is_some() {
            return Err(Error::invalid(
                "auth takes client_id, secret_ref and scopes; the rest is discovered",
            ));
        }
        if self.connections.lookup(&admin.project_id, name).is_some() {
            return Err(Error::Conflict(format!(
                "an integration named {name} already exists; users would not know which one they connect; choose another name"
            )));
        }
        if let Some(scopes) = &u.scopes {
            let ok = scopes.len() <= 50
                && scopes.iter().all(|s| {
                    !s.is_empty()
                        && s.len() <= 200
                        && s.chars()
                            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
                });
            if !ok {
                return Err(Error::invalid(
                    "auth.scopes must be at most 50 scope tokens (visible ASCII, no quotes)",
                ));
            }
        }
        if let Some(id) = &u.client_id {
            if id.is_empty() || id.len() > 2048 || !id.chars().all(|c| c.is_ascii_graphic()) {
                return Err(Error::invalid(
                    "auth.client_id must be 1 to 2048 visible ASCII characters",
                ));
            }
        }
        if u.secret_ref.is_some() && u.client_id.is_none() {
            return Err(Error::invalid(
                "auth.secret_ref is the secret of a pre-registered client: give auth.client_id too",
            ));
        }
        if let Some(r) = &mut u.secret_ref {
            *r = self
                .vault
                .name_of(&admin.project_id, r)
                .await?
                .ok_or_else(|| Error::invalid(format!("auth.secret_ref {r:?} names no secret in this project's vault; add it on the Vault page first")))?;
        }
        let found = discovery::discover(&self.guarded, url, transport)
            .await
            .map_err(|e| {
                Error::invalid(format!(
                    "cannot find how users sign in to {url}: {} ({})",
                    e.why, e.url
                ))
            })?;
        let scopes = u.scopes.clone().unwrap_or_else(|| found.scopes.clone());
        let client = match (&u.client_id, &found) {
            (Some(id), _) => ClientRegistration::PreRegistered {
                client_id: id.clone(),
                secret_ref: u.secret_ref.clone(),
            },
            (None, d) if d.client_id_metadata_document_supported => {
                ClientRegistration::MetadataDocument {
                    client_id: self.ours.metadata_url.clone(),
                }
            }
            (None, d @ Discovered {
                registration_endpoint: Some(endpoint),
                ..
            }) => {
                // Registered for every scope the server and its authorization server offer, so
                // a step-up beyond `scopes` is not refused as outside the client's registration.
                let mut allowed = scopes.clone();
                for s in d.scopes_supported.iter().chain(&d.authorization_server_scopes) {
                    if !allowed.contains(s) {
                        allowed.push(s.clone());
                    }
                }
                let c = discovery::register_dynamically(&self.guarded, endpoint, &self.ours, &allowed)
                    .await
                    .map_err(|e| {
                        Error::invalid(format!(
                            "cannot register workbench with the authorization server: {} ({})",
                            e.why, e.url
                        ))
                    })?;
                let secret_ref = match c.client_secret {
                    Some(secret) => {
                        let vault_name = format!(
                            "MCP_{}_CLIENT_SECRET",
                            name.to_ascii_uppercase().replace('-', "_")
                        );
                        self.vault.set(admin, &vault_name, &secret).await?;
                        Some(vault_name)
                    }
                    None => None,
                };
                ClientRegistration::Dynamic {
                    client_id: c.client_id,
                    secret_ref,
                }
            }
            (None, d) => {
                return Err(Error::invalid(format!(
                    "the authorization server {} offers neither client ID metadata documents nor dynamic registration; register a client there (redirect URI {}) and give its auth.client_id",
                    d.issuer, self.ours.redirect_uri
                )))
            }
        };
        u.scopes = Some(scopes);
        u.discovered = Some(found);
        u.client = Some(client);
        u.registered_by = Some(admin.user_id.clone());
        Ok(())
    }

    /// The integration users connect to sign in to the server; `awaiting`: none of its tools
    /// is listed yet.
    pub(super) fn integration_of(
        &self,
        row: &ServerRow,
        u: &UserOauth,
        awaiting: bool,
    ) -> Option<Arc<Integration>> {
        let (d, client) = (u.discovered.as_ref()?, u.client.as_ref()?);
        let def = IntegrationDef {
            name: row.name.clone(),
            display_name: row.name.clone(),
            version: "mcp".into(),
            description: format!(
                "The MCP server at {}; each user signs in with their own account.",
                row.url
            ),
            logo: None,
            base_url: row.url.clone(),
            curl_proxy: false,
            auth: AuthDef::Oauth2 {
                authorize_url: d.authorization_endpoint.clone(),
                token_url: d.token_endpoint.clone(),
                scopes: u.scopes.clone().unwrap_or_default(),
                scope_separator: None,
                inject: Default::default(),
                client_id: Some(client.client_id().to_owned()),
                client_secret_vault: client.secret_ref().map(str::to_owned),
            },
            headers: Default::default(),
            tools: Vec::new(),
        };
        let mut i = Integration::new(
            def,
            None,
            ToolSource::Mcp(row.id.clone()),
            Outbound::guarded(self.guarded.reqwest(), self.allowance.clone()),
        )
        .ok()?;
        if awaiting {
            i.awaiting_sign_in_by = u.registered_by.clone();
        }
        if let Some(o) = i.oauth.as_mut() {
            o.resource = Some(d.resource.clone());
            o.revocation_url = d.revocation_endpoint.clone();
            o.issuer = d.iss_parameter_supported.then(|| d.issuer.clone());
        }
        Some(Arc::new(i))
    }

    /// A user finished connecting `name`: when it is a server users sign in to and they are
    /// the admin who registered it, its tools are listed now.
    pub(super) async fn connected(
        &self,
        project_id: &str,
        name: &str,
        user_id: &str,
    ) -> Result<()> {
        let servers = crate::store::mcp_servers::list_servers(self.db.pool(), project_id).await?;
        let Some(row) = servers.into_iter().find(|s| s.name == name) else {
            return Ok(());
        };
        let auth: super::AuthConfig = serde_json::from_str(&row.auth)
            .map_err(|e| Error::internal(format!("stored server auth: {e}")))?;
        if auth.user_oauth().and_then(|u| u.registered_by.as_deref()) != Some(user_id) {
            return Ok(());
        }
        self.refresh_row(&row).await.map(|_| ())
    }

    /// The token of the admin who registered the server, to read its tool list with; an
    /// `Invalid` error says what is missing.
    pub(super) async fn lister_token(
        &self,
        row: &ServerRow,
        live: &Live,
    ) -> Result<(String, String)> {
        let u = live
            .auth
            .user_oauth()
            .ok_or_else(|| Error::internal("not a server users sign in to"))?;
        let admin = u.registered_by.clone().unwrap_or_default();
        let i = self
            .integration_of(row, u, false)
            .ok_or_else(|| Error::internal("stored sign-in settings are incomplete"))?;
        let waiting = || {
            Error::invalid(format!(
                "waiting for the admin who registered {} to connect it (connect {}), so its tools can be listed",
                row.name, row.name
            ))
        };
        match self
            .connections
            .credential_of(&row.project_id, &admin, &i)
            .await?
        {
            Ok(c) => Ok((admin, c.token().to_owned())),
            Err(_) => Err(waiting()),
        }
    }
}
