//! Online backups of the embedded SQLite database: `VACUUM INTO` writes a consistent copy of
//! the whole database (a snapshot of one read transaction) while workbench keeps serving.
//! PostgreSQL is backed up with its own tools (`pg_dump`), which this refuses to imitate.

use std::path::Path;

use super::{Db, Engine};
use crate::{Error, Result};

/// Writes a consistent copy of the database to `to`, which must not exist yet.
pub async fn sqlite_copy(db: &Db, to: &Path) -> Result<u64> {
    if db.engine() != Engine::Sqlite {
        return Err(Error::invalid("this database is PostgreSQL: back it up with pg_dump (for example pg_dump -Fc -f workbench.dump \"$WB_DATABASE_URL\") and restore with pg_restore"));
    }
    if to.exists() {
        return Err(Error::invalid(format!(
            "{} exists already; a backup never overwrites a file",
            to.display()
        )));
    }
    let target = to
        .to_str()
        .ok_or_else(|| Error::invalid("the backup path must be valid UTF-8"))?;
    // VACUUM INTO takes an expression: the path goes in as a bound value, never spliced in.
    sqlx::query("VACUUM INTO $1")
        .bind(target)
        .execute(db.pool())
        .await
        .map_err(|e| Error::invalid(format!("cannot write the backup to {}: {e}", to.display())))?;
    let size = std::fs::metadata(to)
        .map(|m| m.len())
        .map_err(|e| Error::internal(format!("reading the backup: {e}")))?;
    Ok(size)
}
