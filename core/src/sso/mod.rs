//! Single sign-on for the portal through OpenID Connect providers a project's admins register
//! (issue 34). A sign-in starts at `start` (state, nonce and PKCE verifier kept by the surface
//! in the person's session) and ends at `complete`: the code is exchanged, the ID token
//! validated, the identity linked to a user (an identity seen before; else an account with the
//! same, verified, email; else a new account; never an account that belongs to another
//! project, which this provider does not speak for) and the provider's group mapping applied to the
//! membership in its project: a role and a policy that caps every call the person makes. A
//! person whose groups no longer map loses the membership the provider gave, and with it their
//! keys and grants. providers.rs registers providers, oidc.rs speaks the protocol, mapping.rs
//! maps groups, recheck.rs asks providers in the background whether people are still active.

pub mod mapping;
pub mod oidc;
mod providers;
mod recheck;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use providers::{problems, redirect_uri, secret_env_var, Provider, RECHECK_MINUTES};
pub use recheck::Rechecked;

use crate::clock::Clock;
use crate::connections::Connections;
use crate::egress::GuardedClient;
use crate::ids::new_id;
use crate::store::{self, users::UserRow, Db};
use crate::vault::{Sealed, Vault};
use crate::{Error, Result};
use workbench_model::sso::{SignInChoices, SignInProvider};

/// Client secrets in the environment are in variables named `WB_SSO_<SLUG>_SECRET`: an admin
/// cannot have any other variable of the server (a master key, another project's provider's
/// secret) sent to a provider of their choosing.
pub const SECRET_ENV_PREFIX: &str = "WB_SSO_";
/// How long a started sign-in may take.
pub const ATTEMPT_TTL_MS: i64 = 10 * 60 * 1000;

/// A sign-in under way, kept in the person's session between `start` and `complete`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub slug: String,
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    pub next: String,
    pub started_at: i64,
}

/// A completed sign-in: who, where to go, and when the sign-in must be checked again.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub user_id: String,
    pub next: String,
    /// The session ends at this time (ms); the person signs in through the provider again.
    pub recheck_at: i64,
}

#[derive(Clone)]
pub struct Sso {
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    /// To revoke, at their providers, the tokens of connections of a membership that ends.
    connections: Connections,
    oidc: oidc::Oidc,
    public_url: String,
}

impl Sso {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        connections: Connections,
        http: GuardedClient,
        public_url: String,
    ) -> Sso {
        Sso {
            db,
            clock,
            vault,
            connections,
            oidc: oidc::Oidc::new(http),
            public_url,
        }
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    async fn provider(&self, slug: &str) -> Result<Provider> {
        match store::sso::provider_by_slug(self.db.pool(), slug).await? {
            Some(r) => Provider::from_row(r),
            None => Err(Error::invalid(format!(
                "there is no sign-in provider {slug:?}"
            ))),
        }
    }

    /// What the sign-in page offers: every provider of the instance (by name), and whether
    /// passwords are accepted.
    pub async fn sign_in_options(&self, password_sign_in: bool) -> Result<SignInChoices> {
        let mut providers = Vec::new();
        for r in store::sso::all_providers(self.db.pool()).await? {
            let slug = r.slug.clone();
            match Provider::from_row(r) {
                Ok(p) => providers.push(SignInProvider { slug, name: p.name }),
                Err(e) => tracing::error!(error = %e, "an identity provider cannot be read"),
            }
        }
        Ok(SignInChoices {
            providers,
            password_sign_in,
        })
    }

    /// Starts a sign-in through `slug`: the provider's authorization URL and the attempt to
    /// keep until the browser comes back.
    pub async fn start(&self, slug: &str, next: &str) -> Result<(String, Pending)> {
        let p = self.provider(slug).await?;
        let now = self.now();
        let d = self.oidc.discovery(&p.issuer, now, false).await?;
        let pending = Pending {
            slug: p.slug.clone(),
            state: crate::crypto::random_base62(43),
            nonce: crate::crypto::random_base62(43),
            verifier: crate::crypto::random_base62(64),
            next: next.to_owned(),
            started_at: now,
        };
        let mut url = url::Url::parse(&d.authorization_endpoint)
            .map_err(|_| Error::invalid("the provider's authorization endpoint is not a URL"))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &p.client_id)
            .append_pair("redirect_uri", &redirect_uri(&self.public_url, &p.slug))
            .append_pair("scope", &p.scopes.join(" "))
            .append_pair("state", &pending.state)
            .append_pair("nonce", &pending.nonce)
            .append_pair("code_challenge", &oidc::challenge_of(&pending.verifier))
            .append_pair("code_challenge_method", "S256");
        Ok((url.to_string(), pending))
    }

    /// Ends the membership the provider gave `user_id` (if it gave one) and revokes what they
    /// held in the project, as removing a member does: None when there was none, else the
    /// connections it ended (their tokens are revoked at their providers once this commits).
    async fn end_membership(
        &self,
        tx: &mut store::Tx,
        p: &Provider,
        user_id: &str,
        now: i64,
    ) -> Result<Option<Vec<store::connections::ConnectionRow>>> {
        if !store::sso::drop_membership(&mut **tx, &p.project_id, user_id, &p.id).await? {
            return Ok(None);
        }
        let connections =
            crate::auth::revoke_what_a_member_held(tx, &p.project_id, user_id, now).await?;
        tracing::info!(user_id, provider = %p.slug, "membership ended: no mapped group, or disabled at the provider");
        Ok(Some(connections))
    }

    /// Revokes the tokens of ended connections at the providers that offer it, as a disconnect
    /// or a member's removal does.
    async fn revoke_upstream(&self, ended: &Option<Vec<store::connections::ConnectionRow>>) {
        for row in ended.iter().flatten() {
            self.connections.revoke_upstream(row, None).await;
        }
    }

    /// Whether the account belongs to a project other than the provider's.
    async fn elsewhere(&self, tx: &mut store::Tx, p: &Provider, user_id: &str) -> Result<bool> {
        Ok(store::projects::memberships_of_user(&mut **tx, user_id)
            .await?
            .iter()
            .any(|m| m.project_id != p.project_id))
    }

    /// Seals a refresh token, bound to its provider and subject.
    fn seal_refresh(&self, p: &Provider, subject: &str, token: &str) -> Result<Sealed> {
        self.vault.seal(
            &p.project_id,
            &refresh_context(p, subject),
            token.as_bytes(),
        )
    }

    async fn client_secret(&self, p: &Provider) -> Result<Option<zeroize::Zeroizing<String>>> {
        let Some(r) = &p.client_secret_ref else {
            return Ok(None);
        };
        let missing = || {
            Error::invalid(format!("the client secret of sign-in provider {} ({r}) is missing; an admin of its project sets it", p.slug))
        };
        match r.split_once(':') {
            Some(("vault", name)) => {
                let mut found = self.vault.reveal(&p.project_id, &[name.to_owned()]).await?;
                found.remove(name).map(Some).ok_or_else(missing)
            }
            Some(("env", var)) if var == secret_env_var(&p.slug) => std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| Some(zeroize::Zeroizing::new(v)))
                .ok_or_else(missing),
            _ => Err(missing()),
        }
    }

    /// Finishes the sign-in `pending` with the provider's answer. Every failure is an
    /// `Invalid` whose message can be shown to the person; none names a secret.
    pub async fn complete(&self, pending: &Pending, state: &str, code: &str) -> Result<SignedIn> {
        let now = self.now();
        if !crate::crypto::ct_eq(state.as_bytes(), pending.state.as_bytes()) {
            return Err(Error::invalid(
                "this sign-in answer is not for the sign-in this browser started; start again",
            ));
        }
        if now - pending.started_at > ATTEMPT_TTL_MS {
            return Err(Error::invalid("the sign-in took too long; start again"));
        }
        let p = self.provider(&pending.slug).await?;
        let d = self.oidc.discovery(&p.issuer, now, false).await?;
        let secret = self.client_secret(&p).await?;
        let (id_token, refresh_token) = self
            .oidc
            .exchange(
                &d,
                &p.client_id,
                secret.as_deref().map(String::as_str),
                code,
                &pending.verifier,
                &redirect_uri(&self.public_url, &p.slug),
            )
            .await?;
        let who = self
            .oidc
            .validate(&d, &p.client_id, &id_token, Some(&pending.nonce), now)
            .await?;
        // Kept only when asked for: a provider that hands one out unasked is not re-checked.
        let refresh_token =
            refresh_token.filter(|_| p.scopes.iter().any(|s| s == "offline_access"));
        let groups = mapping::groups_of(&who.claims, &p.groups_claim);
        let granted = p.grant(&groups);
        let linked = store::sso::identity_user(self.db.pool(), &p.id, &who.subject).await?;
        // A new account gets a password no one knows (it signs in through the provider only);
        // hashed before the transaction, which must not wait on it.
        let fresh_hash = match (&linked, &granted) {
            (None, Some(_)) => {
                Some(crate::auth::hash_password(&crate::crypto::random_base62(32)).await?)
            }
            _ => None,
        };
        let mut tx = self.db.begin_write().await?;
        let linked = store::sso::identity_user(&mut *tx, &p.id, &who.subject).await?;
        let Some(granted) = granted else {
            let mut ended = None;
            if let Some(user_id) = &linked {
                ended = self.end_membership(&mut tx, &p, user_id, now).await?;
            }
            tx.commit().await?;
            self.db.changed();
            self.revoke_upstream(&ended).await;
            return Err(Error::invalid(format!(
                "your groups at {} give no access to this workbench; ask an admin to map one of them",
                p.name
            )));
        };
        let user_id = match linked {
            Some(u) => u,
            None => {
                let email = who.email.as_deref().ok_or_else(|| {
                    Error::invalid(format!(
                        "{} sent no email address; its admin adds the email scope or claim",
                        p.name
                    ))
                })?;
                let email = crate::auth::normalize_email(email).map_err(|_| {
                    Error::invalid(format!(
                        "{} sent an email address workbench cannot use",
                        p.name
                    ))
                })?;
                match store::users::by_email(&mut *tx, &email).await? {
                    Some(u) if who.email_verified => {
                        // Never a break-glass account (the way in when providers fail), never
                        // one another provider already speaks for.
                        if store::users::is_break_glass(&mut *tx, &u.id).await?
                            || store::sso::linked_elsewhere(&mut *tx, &u.id, &p.id).await?
                        {
                            return Err(Error::invalid(format!(
                                "the account with the email {email} cannot be linked to {}; an operator can",
                                p.name
                            )));
                        }
                        // Whoever held a session of this account before it was linked (it may
                        // have been made by someone else, through another provider) loses it.
                        store::sessions::delete_of_user(&mut *tx, &u.id).await?;
                        tracing::info!(user_id = %u.id, provider = %p.slug, "identity linked by verified email");
                        u.id
                    }
                    Some(_) => {
                        return Err(Error::invalid(format!(
                            "an account with the email {email} exists, and {} does not say the address is verified, so the sign-in cannot be linked to it",
                            p.name
                        )))
                    }
                    None => {
                        let user = UserRow {
                            id: new_id("usr"),
                            email,
                            password_hash: fresh_hash
                                .clone()
                                .ok_or_else(|| Error::internal("no password hash"))?,
                            created_at: now,
                        };
                        store::users::insert(&mut *tx, &user).await?;
                        tracing::info!(user_id = %user.id, provider = %p.slug, "user created at first sign-in");
                        user.id
                    }
                }
            }
        };
        // A provider speaks for its own project only: an account that belongs to another
        // project too is never signed in through it (that project's admins did not choose this
        // provider, and whoever runs it could otherwise sign in as anyone it names).
        if self.elsewhere(&mut tx, &p, &user_id).await? {
            return Err(Error::invalid(format!(
                "this account belongs to other workbench projects too, so it cannot sign in through {}; sign in with your password",
                p.name
            )));
        }
        store::sso::set_membership(
            &mut *tx,
            &p.project_id,
            &user_id,
            granted.role.as_str(),
            granted.policy_id.as_deref(),
            &p.id,
            now,
        )
        .await?;
        let sealed = match &refresh_token {
            Some(t) => Some(self.seal_refresh(&p, &who.subject, t)?),
            None => None,
        };
        store::sso::link_identity(
            &mut *tx,
            &p.id,
            &who.subject,
            &user_id,
            now,
            now + p.recheck_ms(),
            sealed.as_ref().map(parts),
        )
        .await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(user_id, provider = %p.slug, role = granted.role.as_str(), "signed in through an identity provider");
        Ok(SignedIn {
            user_id,
            next: pending.next.clone(),
            recheck_at: now + p.recheck_ms(),
        })
    }
}

/// A sealed value as the store keeps it.
fn parts(s: &Sealed) -> store::sso::SealedParts<'_> {
    (&s.ciphertext, &s.nonce, s.key_version)
}

/// What a sealed refresh token is bound to.
fn refresh_context(p: &Provider, subject: &str) -> String {
    format!("sso-refresh:{}:{subject}", p.id)
}
