//! The MCP client consent page's views and the list of clients a person approved.

use serde::{Deserialize, Serialize};

text_enum! {
    /// How an MCP client is known to workbench.
    pub enum ClientKind ("client kind") {
        /// It registered itself (`/oauth/register`).
        Registered = "registered",
        /// Its client id is the URL of its metadata document.
        Metadata = "metadata",
    }
}

/// The authorization request's parameters, as the client put them in the URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizeQuery {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub state: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
}

/// What the consent page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsentView {
    /// Ask the person.
    Ask {
        client_name: String,
        client_id: String,
        redirect_host: String,
        kind: ClientKind,
        client_uri: Option<String>,
        /// The project's policies `(id, name)`, for an admin to choose from.
        policies: Vec<(String, String)>,
        /// An admin may choose the policy and a rate limit.
        admin: bool,
        project_name: String,
        /// The tool set whose endpoint the client asks for (None: `/mcp`).
        #[serde(default)]
        tool_set: Option<String>,
    },
    /// The client or its redirect URI cannot be trusted: shown, never redirected.
    Refused { reason: String },
}

/// An approved client, as the MCP clients page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizedClientView {
    pub id: String,
    pub client_name: String,
    pub client_id: String,
    pub redirect_host: String,
    pub policy: String,
    pub approved: String,
    pub last_used: Option<String>,
}
