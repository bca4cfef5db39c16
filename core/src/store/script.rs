//! Scripts: the statements of one transaction built once and sent the cheapest way each engine
//! allows. SQLite runs every statement of a connection on that connection's worker thread, and
//! each query sent there costs a thread wake-up on both sides (the largest cost of a proxied
//! call on SQLite, docs/benchmarks.md); a joined script sends `BEGIN; …; COMMIT` as one query,
//! numbering its placeholders across the statements. PostgreSQL's extended protocol takes one
//! statement per query, so there the same script runs statement by statement in a transaction.

use sqlx::any::AnyArguments;
use sqlx::error::BoxDynError;
use sqlx::{Any, AnyConnection, Arguments, Connection, Encode, Executor, Type};

use super::{Db, Engine, Exec};
use crate::Result;

/// Statements with their arguments, built by the store's `push_*` functions.
pub struct Script<'q> {
    /// Joined: one query whose placeholders are numbered across statements.
    joined: bool,
    /// Joined: one entry; otherwise one per statement.
    queries: Vec<(String, AnyArguments<'q>)>,
    /// Placeholders numbered so far in the last query.
    params: usize,
    /// The first argument that could not be encoded; reported when the script runs.
    error: Option<BoxDynError>,
}

impl<'q> Script<'q> {
    /// A script sent statement by statement (any engine).
    pub fn separate() -> Script<'q> {
        Script {
            joined: false,
            queries: Vec::new(),
            params: 0,
            error: None,
        }
    }

    /// A script sent as one query: SQLite only (PostgreSQL refuses several statements in a
    /// prepared query).
    pub fn joined() -> Script<'q> {
        Script {
            joined: true,
            ..Script::separate()
        }
    }

    /// Starts a statement; `text` is its first SQL.
    pub(crate) fn statement(&mut self, text: &str) {
        match self.queries.last_mut() {
            Some((sql, _)) if self.joined => {
                sql.push_str(";\n");
                sql.push_str(text);
            }
            _ => {
                self.queries
                    .push((text.to_string(), AnyArguments::default()));
                self.params = 0;
            }
        }
    }

    /// Appends SQL to the current statement.
    pub(crate) fn sql(&mut self, text: &str) {
        if let Some((sql, _)) = self.queries.last_mut() {
            sql.push_str(text);
        }
    }

    /// Numbers `n` new placeholders; the first one's number (bind them in order).
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        let first = self.params + 1;
        self.params += n;
        first
    }

    /// Appends `(…), (…)`: a VALUES list of `rows` rows of `cols` new placeholders.
    pub(crate) fn values(&mut self, rows: usize, cols: usize) {
        let first = self.reserve(rows * cols);
        let Some((sql, _)) = self.queries.last_mut() else {
            return;
        };
        for r in 0..rows {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for c in 0..cols {
                if c > 0 {
                    sql.push_str(", ");
                }
                sql.push('$');
                sql.push_str(&(first + r * cols + c).to_string());
            }
            sql.push(')');
        }
    }

    /// Binds the next placeholder's value.
    pub(crate) fn bind<T>(&mut self, value: T)
    where
        T: 'q + Encode<'q, Any> + Type<Any>,
    {
        if let Some((_, args)) = self.queries.last_mut() {
            if let Err(e) = args.add(value) {
                self.error.get_or_insert(e);
            }
        }
    }

    /// Runs a script of one statement on `ex` (a store function's own statement); an empty
    /// script does nothing.
    pub async fn execute<'e>(self, ex: impl Exec<'e>) -> Result<()> {
        if let Some(e) = self.error {
            return Err(sqlx::Error::Encode(e).into());
        }
        let mut queries = self.queries.into_iter();
        let (sql, args) = match (queries.next(), queries.next()) {
            (None, _) => return Ok(()),
            (Some(query), None) => query,
            (Some(_), Some(_)) => {
                return Err(crate::Error::internal(
                    "Script::execute runs one statement at most",
                ))
            }
        };
        sqlx::query_with(&sql, args).execute(ex).await?;
        Ok(())
    }

    /// Runs the statements in one transaction on `conn`: joined, as one query
    /// `BEGIN; …; COMMIT`; separate, in a transaction of the driver's. After an error, close
    /// `conn` rather than return it to a pool: a joined script's rollback is best effort, and a
    /// pool does not see a transaction it did not begin.
    pub async fn transaction(self, conn: &mut AnyConnection) -> Result<()> {
        if let Some(e) = self.error {
            return Err(sqlx::Error::Encode(e).into());
        }
        if self.joined {
            // A joined script is one query (or none).
            let Some((body, args)) = self.queries.into_iter().next() else {
                return Ok(());
            };
            let sql = format!("BEGIN;\n{body};\nCOMMIT");
            if let Err(e) = sqlx::query_with(&sql, args).execute(&mut *conn).await {
                // The statements stop at the first failure, inside the open transaction. The
                // caller must not give this connection back to a pool (`transaction` says so).
                let _ = conn.execute("ROLLBACK").await;
                return Err(e.into());
            }
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        for (sql, args) in self.queries {
            sqlx::query_with(&sql, args).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// A connection a long-lived writer keeps for its transactions, taken out of the pool: a
/// transaction then pays neither the pool's acquire nor its check on release (each one more
/// trip to SQLite's worker thread), and closing the pool does not wait for it. It is closed
/// after a failed transaction and a fresh one taken at the next.
pub struct WriterConnection {
    db: Db,
    conn: Option<AnyConnection>,
}

impl WriterConnection {
    pub fn new(db: Db) -> WriterConnection {
        WriterConnection { db, conn: None }
    }

    pub fn engine(&self) -> Engine {
        self.db.engine()
    }

    /// Runs `script` in one transaction (`Script::transaction`).
    pub async fn transaction(&mut self, script: Script<'_>) -> Result<()> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self.conn.insert(self.db.pool().acquire().await?.detach()),
        };
        let result = script.transaction(conn).await;
        if result.is_err() {
            if let Some(conn) = self.conn.take() {
                let _ = conn.close().await;
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'s>(s: &'s Script<'_>) -> Vec<&'s str> {
        s.queries.iter().map(|(sql, _)| sql.as_str()).collect()
    }

    #[test]
    fn a_joined_script_numbers_placeholders_across_statements() {
        let mut s = Script::joined();
        s.statement("INSERT INTO a VALUES ");
        s.values(2, 2);
        s.statement("UPDATE b SET x = $");
        let n = s.reserve(1);
        s.sql(&n.to_string());
        assert_eq!(
            texts(&s),
            ["INSERT INTO a VALUES ($1, $2), ($3, $4);\nUPDATE b SET x = $5"]
        );
    }

    #[test]
    fn a_separate_script_numbers_each_statement_from_one() {
        let mut s = Script::separate();
        s.statement("INSERT INTO a VALUES ");
        s.values(1, 3);
        s.statement("INSERT INTO b VALUES ");
        s.values(1, 1);
        assert_eq!(
            texts(&s),
            [
                "INSERT INTO a VALUES ($1, $2, $3)",
                "INSERT INTO b VALUES ($1)"
            ]
        );
    }

    /// A joined script that fails half-way must leave nothing of itself and no open
    /// transaction: the same connection's next script begins and commits normally.
    #[tokio::test]
    async fn a_failed_joined_script_leaves_nothing_and_the_connection_writes_again() {
        let (db, path) = crate::store::temp_sqlite("script").await;
        sqlx::query("CREATE TABLE t (v TEXT PRIMARY KEY)")
            .execute(db.pool())
            .await
            .unwrap();
        let mut conn = db.pool().acquire().await.unwrap().detach();
        let insert = |s: &mut Script<'static>, v: &'static str| {
            s.statement("INSERT INTO t (v) VALUES ");
            s.values(1, 1);
            s.bind(v);
        };
        let mut failing = Script::joined();
        insert(&mut failing, "a");
        insert(&mut failing, "b");
        insert(&mut failing, "a");
        assert!(
            failing.transaction(&mut conn).await.is_err(),
            "duplicate key"
        );
        let mut next = Script::joined();
        insert(&mut next, "c");
        insert(&mut next, "d");
        next.transaction(&mut conn).await.unwrap();
        let rows: Vec<(String,)> = sqlx::query_as("SELECT v FROM t ORDER BY v")
            .fetch_all(db.pool())
            .await
            .unwrap();
        assert_eq!(rows, [("c".to_string(),), ("d".to_string(),)]);
        drop(conn);
        db.close().await;
        let _ = std::fs::remove_file(&path);
    }
}
