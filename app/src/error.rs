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

/// A status word core handed over that the model does not know: a bug, reported generically.
#[cfg(feature = "ssr")]
impl From<workbench_model::UnknownText> for AppError {
    fn from(e: workbench_model::UnknownText) -> Self {
        workbench_core::Error::internal(e.to_string()).into()
    }
}

#[cfg(feature = "ssr")]
impl From<workbench_core::Error> for AppError {
    /// Also gives the response the error's HTTP status (401 for a wrong password, 429 with
    /// Retry-After when throttled, …) unless the request is a plain HTML form post, which
    /// leptos answers with a redirect back to the form.
    fn from(e: workbench_core::Error) -> Self {
        use workbench_core::Error;
        let unavailable = e.unavailable_reason();
        let status = match &e {
            _ if unavailable.is_some() => 503,
            Error::NotFound => 404,
            Error::Invalid(_) => 400,
            Error::Unauthorized(_) => 401,
            Error::Forbidden(_) => 403,
            Error::Conflict(_) => 409,
            Error::Throttled { .. } => 429,
            Error::Db(_) | Error::Internal(_) => 500,
        };
        let retry_after = match &e {
            Error::Throttled { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        };
        crate::ssr::error_status(status, retry_after);
        if let Some(reason) = unavailable {
            tracing::error!(error = ?e, "portal request failed: database unavailable");
            return AppError::Message(format!(
                "workbench cannot reach its database ({reason}); try again in a moment"
            ));
        }
        match e {
            Error::Db(_) | Error::Internal(_) => {
                tracing::error!(error = ?e, "portal request failed");
                AppError::Message("something went wrong on our side; try again".into())
            }
            other => AppError::Message(other.to_string()),
        }
    }
}
