//! Who is calling: users and their passwords, project memberships and roles, API keys, and
//! sign-in with throttling. Surfaces authenticate through `Accounts` and then carry a
//! `Principal` into every other core call.

mod accounts;
mod api_key;
mod members;
mod password;
mod permissions;
pub(crate) mod principals;
mod redirect;

pub use accounts::{Accounts, ApiKeyInfo, NewApiKey, User, MAX_RATE_LIMIT};
pub use api_key::ApiKey;
pub(crate) use members::revoke_what_a_member_held;
pub use members::{Member, Removed};
pub use password::{hash_password, validate_password, verify_password};
pub use permissions::{markdown_table, Access, Operation};
pub use redirect::safe_next;

use serde::{Deserialize, Serialize};

pub use workbench_model::accounts::Role;

/// The credential a request came through (D21): what a principal may do depends on it as
/// much as on the person's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// A person signed in to the portal.
    Session,
    /// One of the person's API keys (`api_key_id`).
    ApiKey,
    /// An MCP OAuth access token (`oauth_grant_id`).
    OAuthGrant,
    /// A curl_session proxy token on `/c`.
    ProxyToken,
}

/// An authenticated caller acting in one project: a signed-in person, a program holding one of
/// that person's API keys, or an MCP client the person approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub user_id: String,
    pub email: String,
    pub project_id: String,
    pub project_name: String,
    pub role: Role,
    pub api_key_id: Option<String>,
    /// The credential the request came through.
    pub via: Via,
    /// The MCP OAuth grant behind an access token (`Via::OAuthGrant`).
    #[serde(default)]
    pub oauth_grant_id: Option<String>,
    /// The policy attached to the caller's key; None: the project's default (if any) applies.
    #[serde(default)]
    pub policy_id: Option<String>,
    /// The project's policy generation as read with the key (spares a query per request).
    #[serde(skip)]
    pub policy_generation: Option<i64>,
    /// The project's vault generation as read with the key: the scrubber's cached patterns are
    /// current when it matches (spares a query per request).
    #[serde(skip)]
    pub vault_generation: Option<i64>,
    /// The caller's credentials generation as read with the key: their cached credentials (for
    /// scrubbing) are current when it matches.
    #[serde(skip)]
    pub credentials_generation: Option<i64>,
    /// Calls per minute the key may make (None: no limit).
    #[serde(default)]
    pub rate_limit_per_minute: Option<i64>,
    /// The tool sets (slugs) the key is limited to: it may list and call their tools at their
    /// endpoints and do nothing else (None: not limited).
    #[serde(default)]
    pub tool_sets: Option<Vec<String>>,
    /// The policy the user's groups cap them with (single sign-on): every call they make, with
    /// any key or grant, is checked against it as well as against `policy_id`.
    #[serde(default)]
    pub user_policy_id: Option<String>,
}

impl Principal {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// An unrestricted admin (D20, D21): a signed-in admin, or an admin's API key with no
    /// policy attached and no tool-set limit. Never an OAuth grant or a proxy token.
    pub fn is_unrestricted_admin(&self) -> bool {
        self.is_admin()
            && self.policy_id.is_none()
            && self.tool_sets.is_none()
            && matches!(self.via, Via::Session | Via::ApiKey)
    }
}

/// Normalises and checks an email address: trimmed, lowercase, one `@`, a dotted domain.
pub fn normalize_email(raw: &str) -> crate::Result<String> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && match email.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            }
            None => false,
        };
    if valid {
        Ok(email)
    } else {
        Err(crate::Error::invalid(
            "invalid email address; expected name@example.com",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(
            normalize_email("  Ada@Example.COM ").unwrap(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "a@b@c.de",
        ] {
            assert!(normalize_email(bad).is_err(), "{bad:?} accepted");
        }
    }
}

/// The client address a request came from (after the operator's proxy-trust setting), used to
/// throttle sign-in per address. Surfaces put it in request extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub Option<std::net::IpAddr>);

/// The portal session entry that holds the signed-in user's id.
pub const SESSION_USER_KEY: &str = "user_id";
/// A portal session holding this key (ms since the epoch) ends then, whatever its idle expiry:
/// a sign-in through an identity provider is checked again by signing in again.
pub const SESSION_RECHECK_KEY: &str = "recheck_at";
