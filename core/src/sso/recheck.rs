//! The background re-check: people signed in through a provider that gave a refresh token
//! (`offline_access`) are checked with it every `recheck_minutes`, whether or not they use the
//! portal. A refused refresh (the person was disabled, or their grant revoked) ends the
//! membership the provider gave, and with it every key and grant they hold; a fresh ID token
//! is mapped again like a sign-in; a provider that cannot be reached changes nothing (it is
//! asked again at the next round), so an outage locks no one out.

use std::collections::HashMap;
use std::sync::Arc;

use super::oidc::Refreshed;
use super::{mapping, parts, refresh_context, Provider, Sso};
use crate::store::{self, sso::DueRow};
use crate::vault::Sealed;
use crate::{Error, Result};

/// Identities looked at per round.
const BATCH: i64 = 200;
/// The longest one identity's re-check may take.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What a round of re-checks did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rechecked {
    /// Identities whose provider was asked.
    pub checked: usize,
    /// Memberships that ended (refused, or no group maps any more).
    pub ended: usize,
}

impl Sso {
    /// Asks the providers about every identity whose last check is `recheck_minutes` old.
    pub async fn recheck_due(&self) -> Result<Rechecked> {
        let now = self.now();
        let rows = store::sso::due(self.db.pool(), now, BATCH).await?;
        let mut providers: HashMap<String, Option<Arc<Provider>>> = HashMap::new();
        let mut out = Rechecked::default();
        for row in rows {
            if !providers.contains_key(&row.provider_id) {
                let p = match store::sso::provider_by_id(self.db.pool(), &row.provider_id).await? {
                    Some(r) => Provider::from_row(r).ok().map(Arc::new),
                    None => None,
                };
                providers.insert(row.provider_id.clone(), p);
            }
            let Some(p) = providers.get(&row.provider_id).cloned().flatten() else {
                continue;
            };
            // Claimed first (pushed to the next interval): two instances must not both spend a
            // rotating refresh token.
            let claimed = now + p.recheck_ms();
            if !store::sso::move_check(
                self.db.pool(),
                &p.id,
                &row.subject,
                row.next_check_at,
                claimed,
            )
            .await?
            {
                continue;
            }
            out.checked += 1;
            // Bounded: a provider that never answers must not hold up the round.
            let result = tokio::time::timeout(CHECK_TIMEOUT, self.recheck_one(&p, &row, now))
                .await
                .unwrap_or_else(|_| Err(Error::invalid("the provider did not answer in time")));
            match result {
                Ok(ended) => out.ended += usize::from(ended),
                Err(e) => {
                    // Due again at the next round, behind those waiting longer.
                    tracing::warn!(provider = %p.slug, user_id = %row.user_id, error = %e, "a sign-in re-check failed; asked again at the next round");
                    store::sso::move_check(self.db.pool(), &p.id, &row.subject, claimed, now)
                        .await?;
                }
            }
        }
        Ok(out)
    }

    /// Re-checks one identity: true when its membership ended.
    async fn recheck_one(&self, p: &Provider, row: &DueRow, now: i64) -> Result<bool> {
        let sealed = Sealed {
            ciphertext: row.refresh_ciphertext.clone(),
            nonce: row.refresh_nonce.clone(),
            key_version: row.refresh_key_version,
        };
        let token = match self
            .vault
            .open(&p.project_id, &refresh_context(p, &row.subject), &sealed)
            .ok()
            .and_then(|b| String::from_utf8(b.to_vec()).ok())
        {
            Some(t) => zeroize::Zeroizing::new(t),
            None => {
                // Unreadable (a master key gone): the person is checked at their next sign-in.
                store::sso::checked(
                    self.db.pool(),
                    &p.id,
                    &row.subject,
                    now,
                    now + p.recheck_ms(),
                    None,
                    true,
                )
                .await?;
                return Ok(false);
            }
        };
        let d = self.oidc.discovery(&p.issuer, now, false).await?;
        let secret = self.client_secret(p).await?;
        let refreshed = self
            .oidc
            .refresh(
                &d,
                &p.client_id,
                secret.as_deref().map(String::as_str),
                &token,
            )
            .await?;
        let refused = matches!(refreshed, Refreshed::Refused);
        let (granted, next_token) = match refreshed {
            Refreshed::Refused => (Some(None), None),
            Refreshed::Tokens(t) => {
                let granted = match &t.id_token {
                    Some(id_token) => {
                        let who = self
                            .oidc
                            .validate(&d, &p.client_id, id_token, None, now)
                            .await?;
                        if who.subject != row.subject {
                            return Err(Error::invalid(
                                "the refreshed ID token names another person",
                            ));
                        }
                        Some(p.grant(&mapping::groups_of(&who.claims, &p.groups_claim)))
                    }
                    // Still active there; the groups are as they were.
                    None => None,
                };
                let next = match &t.refresh_token {
                    Some(t) => Some(self.seal_refresh(p, &row.subject, t)?),
                    None => None,
                };
                (granted, next)
            }
        };
        let mut tx = self.db.begin_write().await?;
        let mut revoked = None;
        let ended = match &granted {
            Some(None) => {
                revoked = self.end_membership(&mut tx, p, &row.user_id, now).await?;
                revoked.is_some()
            }
            // A provider speaks for its own project only (see `complete`).
            Some(Some(_)) if self.elsewhere(&mut tx, p, &row.user_id).await? => false,
            Some(Some(g)) => {
                store::sso::set_membership(
                    &mut *tx,
                    &p.project_id,
                    &row.user_id,
                    g.role.as_str(),
                    g.policy_id.as_deref(),
                    &p.id,
                    now,
                )
                .await?;
                false
            }
            None => false,
        };
        store::sso::checked(
            &mut *tx,
            &p.id,
            &row.subject,
            now,
            now + p.recheck_ms(),
            next_token.as_ref().map(parts),
            refused,
        )
        .await?;
        tx.commit().await?;
        self.db.changed();
        self.revoke_upstream(&revoked).await;
        Ok(ended)
    }
}
