//! Vector namespaces and their vectors (vector.upsert / vector.query). Values are stored as
//! base64 of little-endian float32 so both engines keep them in a TEXT column.

use sqlx::FromRow;

use super::{Db, Exec};
use crate::Result;

#[derive(Debug, Clone, Copy, FromRow, PartialEq, Eq)]
pub struct NamespaceRow {
    pub dimension: i64,
    pub generation: i64,
    pub vector_count: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct VectorRow {
    pub id: String,
    pub vals: String,
    pub metadata: Option<String>,
}

/// One vector to write.
pub struct NewVector<'a> {
    pub id: &'a str,
    pub vals: String,
    pub metadata: Option<String>,
}

/// Rows per INSERT statement (6 parameters each).
const CHUNK: usize = 100;

pub async fn namespace<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    name: &str,
) -> Result<Option<NamespaceRow>> {
    Ok(sqlx::query_as("SELECT dimension, generation, vector_count FROM vector_namespaces WHERE project_id = $1 AND name = $2")
        .bind(project_id)
        .bind(name)
        .fetch_optional(ex)
        .await?)
}

pub async fn all_vectors<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    name: &str,
) -> Result<Vec<VectorRow>> {
    Ok(sqlx::query_as(
        "SELECT id, vals, metadata FROM vectors WHERE project_id = $1 AND namespace = $2",
    )
    .bind(project_id)
    .bind(name)
    .fetch_all(ex)
    .await?)
}

/// What an upsert found: the namespace's dimension (fixed by its first upsert) and, when it
/// matched, the new generation and vector count.
pub enum Upserted {
    Done {
        generation: i64,
        vector_count: i64,
    },
    /// The namespace holds vectors of another dimension; nothing was written.
    DimensionMismatch {
        dimension: i64,
    },
    /// The vectors would make the namespace hold more than `limit` vectors; nothing was written.
    TooMany {
        would_hold: i64,
    },
}

/// Writes `vectors` (ids unique) into the namespace in one transaction, creating the
/// namespace with `dimension` if it is new. Concurrent upserts to one namespace serialize on
/// its row; `max_vectors` caps the namespace (the transaction is rolled back past it).
pub async fn upsert(
    db: &Db,
    project_id: &str,
    name: &str,
    dimension: i64,
    vectors: &[NewVector<'_>],
    max_vectors: i64,
    now: i64,
) -> Result<Upserted> {
    let mut tx = db.begin_write().await?;
    sqlx::query(
        "INSERT INTO vector_namespaces (project_id, name, dimension, generation, vector_count, created_at, updated_at) \
         VALUES ($1, $2, $3, 0, 0, $4, $4) ON CONFLICT (project_id, name) DO NOTHING",
    )
    .bind(project_id)
    .bind(name)
    .bind(dimension)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    // Takes the namespace's row lock for the rest of the transaction. An emptied namespace
    // keeps its row (so its generation never goes back) and takes this upsert's dimension.
    let (stored_dimension, generation): (i64, i64) = sqlx::query_as(
        "UPDATE vector_namespaces SET generation = generation + 1, updated_at = $3, \
         dimension = CASE WHEN vector_count = 0 THEN $4 ELSE dimension END \
         WHERE project_id = $1 AND name = $2 RETURNING dimension, generation",
    )
    .bind(project_id)
    .bind(name)
    .bind(now)
    .bind(dimension)
    .fetch_one(&mut *tx)
    .await?;
    if stored_dimension != dimension {
        tx.rollback().await?;
        return Ok(Upserted::DimensionMismatch {
            dimension: stored_dimension,
        });
    }
    for chunk in vectors.chunks(CHUNK) {
        let mut sql = String::from(
            "INSERT INTO vectors (project_id, namespace, id, vals, metadata, updated_at) VALUES ",
        );
        for i in 0..chunk.len() {
            let b = i * 6;
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!(
                "(${}, ${}, ${}, ${}, ${}, ${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5,
                b + 6
            ));
        }
        sql.push_str(
            " ON CONFLICT (project_id, namespace, id) DO UPDATE SET vals = excluded.vals, metadata = excluded.metadata, \
             updated_at = excluded.updated_at",
        );
        let mut q = sqlx::query(&sql);
        for v in chunk {
            q = q
                .bind(project_id)
                .bind(name)
                .bind(v.id)
                .bind(&v.vals)
                .bind(v.metadata.as_deref())
                .bind(now);
        }
        q.execute(&mut *tx).await?;
    }
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM vectors WHERE project_id = $1 AND namespace = $2")
            .bind(project_id)
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
    if count > max_vectors {
        tx.rollback().await?;
        return Ok(Upserted::TooMany { would_hold: count });
    }
    sqlx::query(
        "UPDATE vector_namespaces SET vector_count = $3 WHERE project_id = $1 AND name = $2",
    )
    .bind(project_id)
    .bind(name)
    .bind(count)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Upserted::Done {
        generation,
        vector_count: count,
    })
}

/// What a delete did: the namespace's new generation, how many vectors went and how many are
/// left. A namespace left empty keeps its row (its generation must never go back, or another
/// instance's old copy would look current) and its next upsert may choose a new dimension.
pub struct Deleted {
    pub generation: i64,
    pub deleted: i64,
    pub vector_count: i64,
}

/// Deletes the vectors with `ids` from the namespace, or every vector with `None`; `None` back
/// when the namespace does not exist or is empty.
pub async fn delete(
    db: &Db,
    project_id: &str,
    name: &str,
    ids: Option<&[String]>,
    now: i64,
) -> Result<Option<Deleted>> {
    let mut tx = db.begin_write().await?;
    let bumped: Option<(i64, i64)> = sqlx::query_as(
        "UPDATE vector_namespaces SET generation = generation + 1, updated_at = $3 \
         WHERE project_id = $1 AND name = $2 RETURNING generation, vector_count",
    )
    .bind(project_id)
    .bind(name)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((generation, before)) = bumped.filter(|(_, before)| *before > 0) else {
        tx.rollback().await?;
        return Ok(None);
    };
    let deleted = match ids {
        None => sqlx::query("DELETE FROM vectors WHERE project_id = $1 AND namespace = $2")
            .bind(project_id)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected() as i64,
        Some(ids) => {
            let mut n = 0;
            for chunk in ids.chunks(CHUNK) {
                let marks: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "DELETE FROM vectors WHERE project_id = $1 AND namespace = $2 AND id IN ({})",
                    marks.join(", ")
                );
                let mut q = sqlx::query(&sql).bind(project_id).bind(name);
                for id in chunk {
                    q = q.bind(id);
                }
                n += q.execute(&mut *tx).await?.rows_affected() as i64;
            }
            n
        }
    };
    let left = (before - deleted).max(0);
    sqlx::query(
        "UPDATE vector_namespaces SET vector_count = $3 WHERE project_id = $1 AND name = $2",
    )
    .bind(project_id)
    .bind(name)
    .bind(left)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(Deleted {
        generation,
        deleted,
        vector_count: left,
    }))
}
