//! Connections' words (a stored connection's status, a pending one's, and a person's account
//! at an integration as the portal shows it) and the Connections and connect-link views.

use serde::{Deserialize, Serialize};

text_enum! {
    /// A stored connection's state.
    pub enum ConnectionStatus ("connection status") {
        Connected = "connected",
        /// The refresh failed or was impossible: the user must connect again.
        Expired = "expired",
        /// Disconnected by the user.
        Revoked = "revoked",
    }
}

text_enum! {
    /// Where a pending connection stands.
    pub enum PendingStatus ("pending connection status") {
        /// Waiting for the user to open the link and finish.
        Pending = "pending",
        /// The user finished; wait_for_connection answers CONNECTED.
        Connected = "connected",
    }
}

text_enum! {
    /// A person's account at an integration, as the portal shows it: a stored connection's
    /// status, none, or none needed.
    pub enum AccountState ("account state") {
        Connected = "connected",
        Expired = "expired",
        Revoked = "revoked",
        NotConnected = "not connected",
        /// The integration needs no credential (`auth: none`).
        NoAccountNeeded = "no account needed",
    }
}

impl AccountState {
    /// The state of an integration that needs an account, given the person's connection to it.
    pub fn of(connection: Option<ConnectionStatus>) -> AccountState {
        match connection {
            None => AccountState::NotConnected,
            Some(ConnectionStatus::Connected) => AccountState::Connected,
            Some(ConnectionStatus::Expired) => AccountState::Expired,
            Some(ConnectionStatus::Revoked) => AccountState::Revoked,
        }
    }

    /// Tools of the integration can run now.
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            AccountState::Connected | AccountState::NoAccountNeeded
        )
    }
}

/// One integration on the Connections page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrationView {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub logo: Option<String>,
    pub auth_type: String,
    pub tool_count: usize,
    pub status: AccountState,
}

/// What /connect/<id> shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectView {
    /// Not this user's, unknown or expired: all look the same.
    NotFound,
    /// Off to the provider (OAuth).
    Redirecting {
        display_name: String,
    },
    /// A key or cookie form.
    Form {
        display_name: String,
        auth_type: String,
        label: String,
        help: Option<String>,
    },
    Connected {
        display_name: String,
    },
}
