//! The portal's error type: what a server function reports to the page. Domain errors become
//! user-facing messages; internal failures are logged on the server and shown generically.

use serde::{Deserialize, Serialize};
use server_fn::codec::JsonEncoding;
use server_fn::error::{FromServerFnError, ServerFnErrorErr};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    /// A message for the person at the screen.
    #[error("{0}")]
    Message(String),
    /// The session is gone (signed out elsewhere, expired).
    #[error("you are signed out; sign in again")]
    NotSignedIn,
    /// The request itself failed (network, encoding).
    #[error("request failed: {0}")]
    Transport(String),
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}

#[cfg(feature = "ssr")]
impl From<workbench_core::Error> for AppError {
    fn from(e: workbench_core::Error) -> Self {
        use workbench_core::Error;
        match e {
            Error::Db(_) | Error::Internal(_) => {
                tracing::error!(error = ?e, "portal request failed");
                AppError::Message("something went wrong on our side; try again".into())
            }
            other => AppError::Message(other.to_string()),
        }
    }
}
