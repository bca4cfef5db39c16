//! People, keys and the project's own lists: roles, the signed-in viewer, members, API keys,
//! vault secret names and the egress allowlist, as the portal shows them.

use serde::{Deserialize, Serialize};

text_enum! {
    /// A member's role in a project.
    pub enum Role ("role") {
        Admin = "admin",
        Member = "member",
    }
}

/// The signed-in person as the layout shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewerInfo {
    pub email: String,
    pub project: String,
    pub is_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    pub user_id: String,
    pub email: String,
    pub role: Role,
    pub joined: String,
    pub is_you: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersData {
    pub members: Vec<MemberView>,
    pub can_manage: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub owner: String,
    pub created: String,
    pub last_used: Option<String>,
    pub revoked: Option<String>,
    /// The attached policy's id (None: the project's default applies).
    pub policy_id: Option<String>,
}

/// A key just created: the only time its secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewApiKeyView {
    pub name: String,
    pub secret: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeysData {
    pub keys: Vec<ApiKeyView>,
    /// The project's policies `(id, name)`, for admins who may attach them.
    pub policies: Vec<(String, String)>,
    pub can_manage_policies: bool,
    /// A key created by a plain form post (no JavaScript), carried once through the session.
    pub just_created: Option<NewApiKeyView>,
}

/// A vault secret as the portal lists it: name and times, never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretView {
    pub name: String,
    pub id: String,
    pub created: String,
    pub updated: String,
}

/// The project's egress allowlist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressData {
    pub patterns: Vec<String>,
    pub can_manage: bool,
}
