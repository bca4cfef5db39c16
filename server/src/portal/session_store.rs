//! tower-sessions storage in the workbench database, so every instance sees every session.
//! Rows are keyed by a SHA-256 of the session id: a leaked database copy yields no live cookies.

use async_trait::async_trait;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};
use workbench_core::auth::{SESSION_RECHECK_KEY, SESSION_USER_KEY};
use workbench_core::crypto::sha256_hex;
use workbench_core::store::sessions::{self, SessionRow};
use workbench_core::Workbench;

#[derive(Clone)]
pub struct DbSessionStore {
    wb: Workbench,
}

impl std::fmt::Debug for DbSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbSessionStore")
    }
}

impl DbSessionStore {
    pub fn new(wb: Workbench) -> Self {
        DbSessionStore { wb }
    }

    fn row(record: &Record) -> session_store::Result<SessionRow> {
        Ok(SessionRow {
            id: key(&record.id),
            data: serde_json::to_string(&record.data)
                .map_err(|e| session_store::Error::Encode(e.to_string()))?,
            user_id: record
                .data
                .get(SESSION_USER_KEY)
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            // A sign-in through an identity provider ends at its re-check time.
            expires_at: record
                .data
                .get(SESSION_RECHECK_KEY)
                .and_then(|v| v.as_i64())
                .into_iter()
                .fold(
                    (record.expiry_date.unix_timestamp_nanos() / 1_000_000) as i64,
                    i64::min,
                ),
        })
    }
}

fn key(id: &Id) -> String {
    sha256_hex(id.to_string().as_bytes())
}

fn backend(e: workbench_core::Error) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        loop {
            let row = Self::row(record)?;
            if sessions::create(self.wb.db().pool(), &row)
                .await
                .map_err(backend)?
            {
                return Ok(());
            }
            record.id = Id::default();
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        sessions::save(self.wb.db().pool(), &Self::row(record)?)
            .await
            .map_err(backend)
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let now = self.wb.clock().now_ms();
        let Some(row) = sessions::load(self.wb.db().pool(), &key(id), now)
            .await
            .map_err(backend)?
        else {
            return Ok(None);
        };
        let data = serde_json::from_str(&row.data)
            .map_err(|e| session_store::Error::Decode(e.to_string()))?;
        let expiry_date =
            time::OffsetDateTime::from_unix_timestamp_nanos(row.expires_at as i128 * 1_000_000)
                .map_err(|e| session_store::Error::Decode(e.to_string()))?;
        Ok(Some(Record {
            id: *id,
            data,
            expiry_date,
        }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        sessions::delete(self.wb.db().pool(), &key(id))
            .await
            .map_err(backend)
    }
}
