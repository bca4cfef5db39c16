//! The vault: project-scoped secrets with `sec_` ids and unique names, sealed at rest under the
//! versioned master key (see keyring.rs). Values leave this module only to be substituted into
//! a tool call (`{{vault:NAME}}`), and the pipeline scrubs them from everything it returns or
//! records. See README.md in this folder.

mod keyring;
mod scrub;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

pub use keyring::{format_keyring, parse_keyring, KeyRing, KeyRingError, MasterKey, Sealed};
pub use scrub::{Needles, Scrubber, StreamScrubber};

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::ids::new_id;
use crate::store::{self, vault::SecretRow, Db};
use crate::{Error, Result};

/// A secret value in transit (a form field, say): wiped from memory when dropped.
pub type Secret = Zeroizing<String>;

/// Values shorter than this are refused (D7): too short to scrub reliably.
pub const MIN_SECRET_CHARS: usize = 6;
pub const MAX_SECRET_BYTES: usize = 64 * 1024;
pub const MAX_NAME_CHARS: usize = 64;

/// A secret's name: a letter or '_' first, then letters, digits, '_', '.' or '-' (≤ 64).
pub fn validate_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = name.len() <= MAX_NAME_CHARS
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid secret name {name:?}; start with a letter or '_' and use letters, digits, '_', '.' or '-' (at most {MAX_NAME_CHARS})"
        )))
    }
}

/// What anyone may know about a secret: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    pub id: String,
    pub name: String,
    pub created_at: String,
    pub updated_at: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl From<&SecretRow> for SecretInfo {
    fn from(r: &SecretRow) -> Self {
        SecretInfo {
            id: r.id.clone(),
            name: r.name.clone(),
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            created_at_ms: r.created_at,
            updated_at_ms: r.updated_at,
        }
    }
}

/// A value cached with the generation it was built at.
type Generation<T> = (i64, T);

#[derive(Clone)]
pub struct Vault {
    db: Db,
    clock: Arc<dyn Clock>,
    ring: Arc<RwLock<KeyRing>>,
    /// Per project: the vault generation the patterns were built at, and the patterns of
    /// every live secret (rebuilt when another set or delete bumps the generation).
    patterns: Arc<RwLock<HashMap<String, Generation<Arc<Needles>>>>>,
}

impl Vault {
    pub fn new(db: Db, clock: Arc<dyn Clock>, ring: KeyRing) -> Vault {
        Vault {
            db,
            clock,
            ring: Arc::new(RwLock::new(ring)),
            patterns: Arc::default(),
        }
    }

    /// The scrubbing patterns of every live secret of the project (D7: scrubbing is
    /// project-wide). One read of the project's vault generation; the secrets are decrypted and
    /// the automaton rebuilt only after a value changed, on any instance.
    pub async fn project_patterns(&self, project_id: &str) -> Result<Arc<Needles>> {
        self.project_patterns_at(project_id, None).await
    }

    /// `project_patterns`, given the generation when the caller read it already (with the API
    /// key, in the same query): then a current cache costs no query at all.
    pub async fn project_patterns_at(
        &self,
        project_id: &str,
        known: Option<i64>,
    ) -> Result<Arc<Needles>> {
        let generation = match known {
            Some(g) => g,
            None => store::vault::generation(self.db.pool(), project_id).await?,
        };
        if let Some((g, n)) = self
            .patterns
            .read()
            .expect("vault patterns lock")
            .get(project_id)
        {
            if *g == generation {
                return Ok(n.clone());
            }
        }
        // Read the generation before the values: a change meanwhile leaves a newer generation,
        // so the next call rebuilds again.
        let rows = store::vault::list(self.db.pool(), project_id).await?;
        let mut values: Vec<(String, Zeroizing<String>)> = Vec::with_capacity(rows.len());
        for row in &rows {
            let plain = self.ring().open(project_id, &row.name, &sealed_of(row))?;
            let text = String::from_utf8(plain.to_vec())
                .map_err(|_| Error::internal("secret is not UTF-8"))?;
            values.push((row.name.clone(), Zeroizing::new(text)));
        }
        let needles = Arc::new(Needles::build(
            values.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        ));
        self.patterns
            .write()
            .expect("vault patterns lock")
            .insert(project_id.to_owned(), (generation, needles.clone()));
        Ok(needles)
    }

    /// A scrubber that knows every live secret of the project.
    pub async fn scrubber(&self, project_id: &str) -> Result<Scrubber> {
        Ok(Scrubber::for_project(
            self.project_patterns(project_id).await?,
        ))
    }

    /// The same for a caller whose vault generation was read with their key.
    pub async fn scrubber_for(&self, who: &Principal) -> Result<Scrubber> {
        Ok(Scrubber::for_project(
            self.project_patterns_at(&who.project_id, who.vault_generation)
                .await?,
        ))
    }

    fn ring(&self) -> std::sync::RwLockReadGuard<'_, KeyRing> {
        self.ring.read().expect("key ring lock poisoned")
    }

    /// The key version new seals use.
    pub fn current_key_version(&self) -> Option<i64> {
        self.ring().current_version().map(|v| v as i64)
    }

    /// Replaces the loaded key ring (after a rotation added a version).
    pub fn set_ring(&self, ring: KeyRing) {
        *self.ring.write().expect("key ring lock poisoned") = ring;
    }

    /// Seals bytes that belong to something other than a vault secret (a connection's
    /// credential), bound to `project_id` and `context` the same way.
    pub fn seal(&self, project_id: &str, context: &str, bytes: &[u8]) -> Result<Sealed> {
        self.ring().seal(project_id, context, bytes)
    }

    pub fn open(
        &self,
        project_id: &str,
        context: &str,
        sealed: &Sealed,
    ) -> Result<Zeroizing<Vec<u8>>> {
        self.ring().open(project_id, context, sealed)
    }

    pub async fn list(&self, who: &Principal) -> Result<Vec<SecretInfo>> {
        let rows = store::vault::list(self.db.pool(), &who.project_id).await?;
        Ok(rows.iter().map(SecretInfo::from).collect())
    }

    pub async fn describe(&self, who: &Principal, name: &str) -> Result<SecretInfo> {
        validate_name(name)?;
        let row = store::vault::get(self.db.pool(), &who.project_id, name)
            .await?
            .ok_or(Error::NotFound)?;
        Ok(SecretInfo::from(&row))
    }

    /// Secrets that workbench relies on (an app's client secret, an MCP server's credential,
    /// the project webhook's signing secret) can be changed or deleted only by an unrestricted
    /// admin (D21): a member or a limited key could otherwise swap the credential a
    /// registration sends, or the key receivers check signatures with.
    async fn check_may_change(&self, who: &Principal, name: &str) -> Result<()> {
        if who.allows(crate::auth::Operation::ProtectedSecretsWrite) {
            return Ok(());
        }
        let id = store::vault::get(self.db.pool(), &who.project_id, name)
            .await?
            .map(|r| r.id);
        let names_it = |reference: Option<&str>| {
            reference.is_some_and(|r| r == name || Some(r) == id.as_deref())
        };
        for app in store::apps::list(self.db.pool(), &who.project_id).await? {
            let def: serde_json::Value = serde_json::from_str(&app.definition).unwrap_or_default();
            if names_it(def["auth"]["client_secret_vault"].as_str()) {
                return Err(Error::Forbidden("this secret is used by a registered app; only an admin can change or delete it"));
            }
        }
        for server in store::mcp_servers::list_servers(self.db.pool(), &who.project_id).await? {
            let auth: serde_json::Value = serde_json::from_str(&server.auth).unwrap_or_default();
            if names_it(auth["secret_ref"].as_str()) {
                return Err(Error::Forbidden("this secret is used by a registered MCP server; only an admin can change or delete it"));
            }
        }
        for provider in store::sso::providers(self.db.pool(), &who.project_id).await? {
            let c: serde_json::Value = serde_json::from_str(&provider.config).unwrap_or_default();
            if names_it(
                c["client_secret_ref"]
                    .as_str()
                    .and_then(|r| r.strip_prefix("vault:")),
            ) {
                return Err(Error::Forbidden("this secret is the client secret of a sign-in provider; only an admin can change or delete it"));
            }
        }
        let settings = store::project_settings::get(self.db.pool(), &who.project_id).await?;
        if names_it(
            settings
                .as_ref()
                .and_then(|s| s.webhook_secret_ref.as_deref()),
        ) {
            return Err(Error::Forbidden(
                "this secret signs the project webhook; only an admin can change or delete it",
            ));
        }
        Ok(())
    }

    /// The name of the project's secret that `reference` names, by name or by `sec_` id.
    pub async fn name_of(&self, project_id: &str, reference: &str) -> Result<Option<String>> {
        let rows = store::vault::list(self.db.pool(), project_id).await?;
        Ok(rows
            .into_iter()
            .find(|r| r.name == reference || r.id == reference)
            .map(|r| r.name))
    }

    /// Creates or replaces a secret.
    pub async fn set(&self, who: &Principal, name: &str, value: &str) -> Result<SecretInfo> {
        validate_name(name)?;
        self.check_may_change(who, name).await?;
        if value.chars().count() < MIN_SECRET_CHARS {
            return Err(Error::invalid(format!(
                "secret value too short; use at least {MIN_SECRET_CHARS} characters"
            )));
        }
        if value.len() > MAX_SECRET_BYTES {
            return Err(Error::invalid(format!(
                "secret value too long; use at most {MAX_SECRET_BYTES} bytes"
            )));
        }
        let sealed = self.ring().seal(&who.project_id, name, value.as_bytes())?;
        let now = self.clock.now_ms();
        let mut tx = self.db.begin_write().await?;
        let row = store::vault::upsert(
            &mut *tx,
            &SecretRow {
                id: new_id("sec"),
                project_id: who.project_id.clone(),
                name: name.to_owned(),
                ciphertext: sealed.ciphertext,
                nonce: sealed.nonce,
                key_version: sealed.key_version,
                created_at: now,
                updated_at: now,
            },
        )
        .await?;
        store::vault::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(project_id = %who.project_id, secret = %name, by = %who.user_id, "vault secret set");
        Ok(SecretInfo::from(&row))
    }

    pub async fn delete(&self, who: &Principal, name: &str) -> Result<()> {
        validate_name(name)?;
        self.check_may_change(who, name).await?;
        let mut tx = self.db.begin_write().await?;
        if !store::vault::delete(&mut *tx, &who.project_id, name).await? {
            return Err(Error::NotFound);
        }
        store::vault::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(project_id = %who.project_id, secret = %name, by = %who.user_id, "vault secret deleted");
        Ok(())
    }

    /// The values of `names` in `project_id`; names that do not exist are absent from the map.
    pub async fn reveal(
        &self,
        project_id: &str,
        names: &[String],
    ) -> Result<HashMap<String, Zeroizing<String>>> {
        let mut out = HashMap::new();
        for name in names {
            if out.contains_key(name) || validate_name(name).is_err() {
                continue;
            }
            if let Some(row) = store::vault::get(self.db.pool(), project_id, name).await? {
                let plain = self.ring().open(project_id, name, &sealed_of(&row))?;
                let text = String::from_utf8(plain.to_vec())
                    .map_err(|_| Error::internal("secret is not UTF-8"))?;
                out.insert(name.clone(), Zeroizing::new(text));
            }
        }
        Ok(out)
    }

    /// Re-seals every secret that is not under the newest key version. Safe to run again: rows
    /// already on the newest version are skipped, and a row changed meanwhile is left to the
    /// next run. Returns how many rows were re-sealed.
    pub async fn reseal_all(&self) -> Result<u64> {
        let version = self
            .current_key_version()
            .ok_or_else(|| Error::internal("no master key configured"))?;
        reseal_in_batches(|| self.reseal_batch(version)).await
    }

    async fn reseal_batch(&self, version: i64) -> Result<u64> {
        let mut done = 0;
        for row in store::vault::not_on_version(self.db.pool(), version, RESEAL_BATCH).await? {
            let plain = self
                .ring()
                .open(&row.project_id, &row.name, &sealed_of(&row))?;
            let sealed = self.ring().seal(&row.project_id, &row.name, &plain)?;
            if store::vault::reseal(
                self.db.pool(),
                &row.id,
                &row.ciphertext,
                &sealed.ciphertext,
                &sealed.nonce,
                sealed.key_version,
            )
            .await?
            {
                done += 1;
            }
        }
        Ok(done)
    }
}

/// Rows read per re-seal batch.
pub const RESEAL_BATCH: i64 = 200;

/// Drives a re-seal to its end: `batch` re-seals one batch of rows still on older key versions
/// and says how many it changed. A batch that changes nothing ends the run: everything is on
/// the newest version, or only rows changed meanwhile are left (the next run takes them).
pub async fn reseal_in_batches<F, Fut>(mut batch: F) -> Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut done = 0;
    loop {
        match batch().await? {
            0 => return Ok(done),
            n => done += n,
        }
    }
}

fn sealed_of(row: &SecretRow) -> Sealed {
    Sealed {
        ciphertext: row.ciphertext.clone(),
        nonce: row.nonce.clone(),
        key_version: row.key_version,
    }
}
