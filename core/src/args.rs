//! Typed tool arguments that keep what the caller sent when it has the wrong type, so a
//! surface can deserialize a request with serde and core can still answer every problem in
//! the caller's words (all-or-nothing validation lists each bad field).

use serde::Deserialize;
use serde_json::Value;

/// A field as sent: the expected type, or the value that was not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Arg<T> {
    Ok(T),
    Wrong(Value),
}

impl<T> Arg<T> {
    /// The value, or `None` when it had the wrong type.
    pub fn ok(self) -> Option<T> {
        match self {
            Arg::Ok(v) => Some(v),
            Arg::Wrong(_) => None,
        }
    }
}
