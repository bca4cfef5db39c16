//! Sealing a credential at rest: serialized, encrypted with the vault's master key ring, the
//! associated data binding project, user and integration; and re-sealing under a newer key.

use super::{Connections, Credential};
use crate::store::{self, connections::ConnectionRow};
use crate::vault::Sealed;
use crate::{Error, Result};

fn context(user_id: &str, integration: &str) -> String {
    format!("connection:{user_id}:{integration}")
}

impl Connections {
    pub(super) fn seal(&self, row: &mut ConnectionRow, c: &Credential) -> Result<()> {
        let bytes = zeroize::Zeroizing::new(
            serde_json::to_vec(c).map_err(|e| Error::internal(e.to_string()))?,
        );
        let sealed = self.vault.seal(
            &row.project_id,
            &context(&row.user_id, &row.integration),
            &bytes,
        )?;
        row.ciphertext = Some(sealed.ciphertext);
        row.nonce = Some(sealed.nonce);
        row.key_version = Some(sealed.key_version);
        row.expires_at = c.expires_at();
        Ok(())
    }

    pub(super) fn open(&self, row: &ConnectionRow) -> Result<Credential> {
        let sealed = Sealed {
            ciphertext: row.ciphertext.clone().unwrap_or_default(),
            nonce: row.nonce.clone().unwrap_or_default(),
            key_version: row.key_version.unwrap_or_default(),
        };
        let bytes = self.vault.open(
            &row.project_id,
            &context(&row.user_id, &row.integration),
            &sealed,
        )?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::internal(format!("stored credential does not parse: {e}")))
    }

    /// Re-seals every stored credential that is not under the vault's newest key version (the
    /// second half of `rotate-master-key`). Re-runnable like the vault's; returns the count.
    pub async fn reseal_all(&self) -> Result<u64> {
        let version = self
            .vault
            .current_key_version()
            .ok_or_else(|| Error::internal("no master key configured"))?;
        crate::vault::reseal_in_batches(|| self.reseal_batch(version)).await
    }

    async fn reseal_batch(&self, version: i64) -> Result<u64> {
        let mut done = 0;
        for row in
            store::connections::not_on_version(self.db.pool(), version, crate::vault::RESEAL_BATCH)
                .await?
        {
            let credential = self.open(&row)?;
            let mut next = row.clone();
            self.seal(&mut next, &credential)?;
            let (Some(old), Some(ct), Some(nonce), Some(v)) = (
                &row.ciphertext,
                &next.ciphertext,
                &next.nonce,
                next.key_version,
            ) else {
                continue;
            };
            if store::connections::reseal(self.db.pool(), &row.id, old, ct, nonce, v).await? {
                done += 1;
            }
        }
        Ok(done)
    }
}
