//! The one domain error type. Surfaces render it into their own vocabularies (REST JSON errors,
//! MCP error entries, portal messages); messages are lowercase with an optional hint after `;`.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The thing does not exist, or the caller may not know that it does.
    #[error("not found")]
    NotFound,
    /// Input the caller can fix; the message says what is wrong.
    #[error("{0}")]
    Invalid(String),
    /// Missing or bad credentials.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// Authenticated, but not allowed to do this.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// Too many failed attempts; retry later.
    #[error("too many attempts; try again in {retry_after_secs} s")]
    Throttled { retry_after_secs: u64 },
    /// A database failure. The detail is logged, never shown.
    #[error("database error")]
    Db(#[source] DbError),
    /// Anything else that is our fault. The detail is logged, never shown.
    #[error("internal error")]
    Internal(String),
}

/// Wraps `sqlx::Error` so callers never format driver text into a response by accident.
#[derive(Debug)]
pub struct DbError(pub sqlx::Error);

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for DbError {}

impl DbError {
    /// When the database cannot serve at all right now (unreachable, restarting, its disk full
    /// or read-only), a short reason fit to show callers, who should retry later; None for
    /// failures of one statement (a constraint, a bug), which retrying would not mend.
    pub fn unavailable_reason(&self) -> Option<&'static str> {
        use sqlx::Error as E;
        match &self.0 {
            E::PoolTimedOut => Some("the database did not answer in time"),
            E::Io(_) | E::Tls(_) | E::PoolClosed | E::WorkerCrashed => {
                Some("the database is unreachable")
            }
            E::Database(e) => {
                if let Some(pg) = e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    let code = pg.code();
                    return match code {
                        _ if code.starts_with("08") => Some("the database is unreachable"),
                        "57P01" | "57P02" | "57P03" => Some("the database is restarting"),
                        "53100" => Some("the database's disk is full"),
                        "25006" => Some("the database is read-only"),
                        _ => None,
                    };
                }
                // SQLite: the primary result code is the extended code's low byte.
                let code = e.code().and_then(|c| c.parse::<i32>().ok())? & 0xff;
                match code {
                    13 => Some("the database's disk is full"),
                    8 => Some("the database is read-only"),
                    10 => Some("the database's disk failed to read or write"),
                    14 => Some("the database file cannot be opened"),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(DbError(e))
    }
}

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Error::Internal(msg.into())
    }

    /// See `DbError::unavailable_reason`: the database, not this request, is the problem.
    pub fn unavailable_reason(&self) -> Option<&'static str> {
        match self {
            Error::Db(e) => e.unavailable_reason(),
            _ => None,
        }
    }

    /// True when a unique constraint rejected the write.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            Error::Db(DbError(sqlx::Error::Database(e))) => e.is_unique_violation(),
            _ => false,
        }
    }
}
