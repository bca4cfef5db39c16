//! The one permission table (D21): every operation any surface offers (REST, MCP, portal
//! server functions, the `/c` proxy) names the access it needs here, and every check asks
//! `Principal::require`. A route or server function cannot exist without naming an operation
//! (the server's route table and the route-by-principal test see to it).

use super::{Principal, Via};
use crate::{Error, Result};

/// Who may perform an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Anyone, signed in or not (health, sign-in, OAuth and discovery endpoints).
    Public,
    /// Any principal of the project: a signed-in person, an API key (a policy-limited admin key
    /// included) or an MCP OAuth grant. What it sees is narrowed to its own records and the
    /// tools its policy allows.
    Agent,
    /// A person signed in to the portal, or an unrestricted admin key: deciding confirmations,
    /// managing one's own keys, connections and MCP clients. Never an OAuth grant and never a
    /// policy-limited key.
    Person,
    /// An unrestricted admin: a signed-in admin, or an admin's API key with no policy attached.
    Admin,
    /// A curl_session proxy token, on the `/c` proxy only.
    ProxyToken,
    /// The operator's metrics token.
    Operator,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Public => "public",
            Access::Agent => "agent",
            Access::Person => "person",
            Access::Admin => "admin",
            Access::ProxyToken => "proxy token",
            Access::Operator => "operator",
        }
    }

    /// Who that is, in words, for the README and error messages.
    pub fn who(self) -> &'static str {
        match self {
            Access::Public => "anyone",
            Access::Agent => "any signed-in person, API key or MCP OAuth grant of the project",
            Access::Person => {
                "a person signed in to the portal, or an admin API key with no policy"
            }
            Access::Admin => "a signed-in admin, or an admin API key with no policy attached",
            Access::ProxyToken => {
                "a curl_session proxy token (checked against the key or grant that minted it)"
            }
            Access::Operator => "the operator's metrics token",
        }
    }
}

macro_rules! operations {
    ($($(#[doc = $doc:literal])* $op:ident => $access:ident, $what:literal;)*) => {
        /// Every operation a surface offers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        pub enum Operation {
            $($(#[doc = $doc])* $op,)*
        }

        impl Operation {
            /// Every operation, in table order.
            pub const ALL: &'static [Operation] = &[$(Operation::$op,)*];

            /// The access the operation needs: the table itself.
            pub const fn access(self) -> Access {
                match self {
                    $(Operation::$op => Access::$access,)*
                }
            }

            /// What the operation is, in a few words.
            pub const fn what(self) -> &'static str {
                match self {
                    $(Operation::$op => $what,)*
                }
            }

            pub const fn name(self) -> &'static str {
                match self {
                    $(Operation::$op => stringify!($op),)*
                }
            }
        }
    };
}

operations! {
    Health => Public, "health and readiness probes";
    Discovery => Public, "the OpenAPI document and OAuth metadata";
    SignIn => Public, "first-run setup, sign-in and sign-out";
    OAuthAuthorization => Public, "MCP OAuth registration, token and revocation endpoints";
    Metrics => Operator, "Prometheus metrics";

    Identity => Agent, "who am I (whoami, /v1/me, /me)";
    ToolsRead => Agent, "search and read tools (only those the caller's policy allows)";
    ToolsRun => Agent, "run tools (execute_tools, invoke, /rest), under the caller's policy";
    CallsRead => Agent, "read tool calls (one's own; all for admins)";
    UsageRead => Agent, "read usage (one's own; the project's for admins)";
    AuditRead => Agent, "read the audit log (one's own; the project's for admins)";
    SchedulesRead => Agent, "read and cancel scheduled callbacks (one's own; all for admins)";
    IntegrationsRead => Agent, "list integrations and one's connections (policy-narrowed)";
    Connect => Agent, "start or wait for a connection (integrations the policy allows)";
    ProxyMint => Agent, "mint a curl_session proxy token (integrations the policy allows to curl)";
    McpServersRead => Agent, "read the MCP server registry (URLs masked, reviewed tools only)";
    AppsRead => Agent, "read custom apps";
    VaultRead => Agent, "list and describe vault secrets (never values)";
    VaultWrite => Agent, "set and delete vault secrets (not those workbench relies on)";
    MembersRead => Agent, "list the project's members";
    EgressRead => Agent, "read the egress allowlist";
    EmailDomainsRead => Agent, "list sender domains and the sending limit";

    ToolSetsRead => Agent, "list the project's tool sets and their endpoints";
    ToolSetCall => Agent, "list and call a tool set's tools at its endpoint (a key limited to sets: only those)";

    ConfirmationsDecide => Person, "read and decide held calls (never the key that made them)";
    OwnKeys => Person, "create, list and revoke one's own API keys in the portal";
    OwnConnections => Person, "complete, list and disconnect one's own connections";
    OwnMcpClients => Person, "approve and revoke one's own MCP OAuth clients";

    ProjectRecordsRead => Admin, "read every member's calls, usage, audit rows and callbacks";
    ApiKeysManage => Admin, "manage every API key";
    PoliciesManage => Admin, "read and manage policies";
    MembersManage => Admin, "invite and manage members";
    SettingsManage => Admin, "read and change project settings, the webhook and its deliveries";
    SigningSecretRead => Admin, "read the callback signing secret";
    McpServersManage => Admin, "register, change, refresh and delete MCP servers";
    McpServersReview => Admin, "review upstream tools (approve, side-effect overrides, see held tools)";
    AppsManage => Admin, "create, import and delete custom apps";
    EmailDomainsManage => Admin, "add, verify and remove sender domains; set the sending limit";
    EgressManage => Admin, "manage the egress allowlist";
    AuditManage => Admin, "set audit retention";
    ConfigExport => Admin, "export the project's configuration as a file (secrets by name only)";
    ConfigApply => Admin, "make the project match a configuration file (checked whole first)";
    ToolSetsManage => Admin, "create, replace and delete tool sets; limit keys to them";
    SsoManage => Admin, "register, change and remove sign-in providers (single sign-on) and preview their group mapping";
    ProtectedSecretsWrite => Admin, "change or delete secrets that registrations and the webhook rely on";

    ProxyRequest => ProxyToken, "a raw request through the /c proxy";
}

impl Principal {
    /// Whether `self` may perform `op` (D21). A key limited to tool sets may only say who it
    /// is and use those sets' endpoints.
    pub fn allows(&self, op: Operation) -> bool {
        if self.tool_sets.is_some()
            && op.access() != Access::Public
            && !matches!(op, Operation::Identity | Operation::ToolSetCall)
        {
            return false;
        }
        match op.access() {
            Access::Public => true,
            Access::Agent => matches!(self.via, Via::Session | Via::ApiKey | Via::OAuthGrant),
            Access::Person => match self.via {
                Via::Session => true,
                Via::ApiKey => self.is_unrestricted_admin(),
                Via::OAuthGrant | Via::ProxyToken => false,
            },
            Access::Admin => self.is_unrestricted_admin(),
            Access::ProxyToken => self.via == Via::ProxyToken,
            Access::Operator => false,
        }
    }

    /// `Ok` when `self` may perform `op`, else 403 saying why.
    pub fn require(&self, op: Operation) -> Result<()> {
        if self.allows(op) {
            return Ok(());
        }
        Err(Error::Forbidden(match op.access() {
            _ if self.tool_sets.is_some() && op.access() != Access::ProxyToken => {
                "this key is limited to tool sets: it can only use their endpoints, /mcp/sets/<slug>"
            }
            Access::Admin if self.is_admin() && self.via == Via::OAuthGrant => {
                "an MCP OAuth grant acts as an agent; this needs a signed-in admin or an admin API key with no policy attached"
            }
            Access::Admin if self.is_admin() => {
                "a key with a policy attached is an agent key; this needs an admin API key with no policy attached"
            }
            Access::Admin => "only project admins can do this",
            Access::Person => {
                "only a person signed in to the portal, or an admin API key with no policy attached, can do this"
            }
            _ => "this credential cannot do this",
        }))
    }

    /// Whether `self` sees every member's records (calls, usage, audit, callbacks) or only its
    /// own user's.
    pub fn sees_project_records(&self) -> bool {
        self.allows(Operation::ProjectRecordsRead)
    }
}

/// The permission table as Markdown rows (`| operation | who | what |`), for the README.
pub fn markdown_table() -> String {
    let mut out = String::from("| operation | who may | what |\n|---|---|---|\n");
    for op in Operation::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            op.name(),
            op.access().who(),
            op.what()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    /// The permission table in docs/security.md is this table, generated: `WB_WRITE_README=1` rewrites it.
    #[test]
    fn readme_lists_the_permission_table_as_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- permissions:begin -->\n", "<!-- permissions:end -->");
        let start = readme
            .find(begin)
            .expect("README has the permissions:begin marker")
            + begin.len();
        let stop = readme
            .find(end)
            .expect("README has the permissions:end marker");
        let generated = markdown_table();
        if std::env::var("WB_WRITE_README").is_ok_and(|v| v == "1") {
            std::fs::write(
                path,
                format!("{}{generated}{}", &readme[..start], &readme[stop..]),
            )
            .unwrap();
            return;
        }
        assert_eq!(&readme[start..stop], generated, "docs/security.md's permission table drifted; run WB_WRITE_README=1 cargo test -p workbench-core readme");
    }

    fn principal(role: Role, via: Via, policy: Option<&str>) -> Principal {
        Principal {
            user_id: "usr_1".into(),
            email: "a@example.com".into(),
            project_id: "prj_1".into(),
            project_name: "p".into(),
            role,
            api_key_id: (via == Via::ApiKey).then(|| "key_1".into()),
            via,
            oauth_grant_id: (via == Via::OAuthGrant).then(|| "grt_1".into()),
            policy_id: policy.map(str::to_owned),
            policy_generation: None,
            vault_generation: None,
            credentials_generation: None,
            rate_limit_per_minute: None,
            tool_sets: None,
            user_policy_id: None,
        }
    }

    #[test]
    fn a_policy_limited_admin_key_is_an_agent_key_everywhere() {
        let limited = principal(Role::Admin, Via::ApiKey, Some("pol_1"));
        let member_key = principal(Role::Member, Via::ApiKey, None);
        for op in Operation::ALL {
            assert_eq!(limited.allows(*op), member_key.allows(*op), "{op:?}");
        }
        assert!(limited.require(Operation::McpServersManage).is_err());
        assert!(limited.require(Operation::ToolsRun).is_ok());
    }

    #[test]
    fn an_oauth_grant_never_administers_or_decides_even_for_an_admin() {
        let grant = principal(Role::Admin, Via::OAuthGrant, None);
        for op in Operation::ALL {
            let expected = matches!(op.access(), Access::Public | Access::Agent);
            assert_eq!(grant.allows(*op), expected, "{op:?}");
        }
    }

    #[test]
    fn unrestricted_admins_do_everything_but_the_proxy_and_metrics() {
        for admin in [
            principal(Role::Admin, Via::Session, None),
            principal(Role::Admin, Via::ApiKey, None),
        ] {
            for op in Operation::ALL {
                let expected = !matches!(op.access(), Access::ProxyToken | Access::Operator);
                assert_eq!(admin.allows(*op), expected, "{op:?}");
            }
        }
    }

    #[test]
    fn a_signed_in_member_decides_confirmations_but_a_member_key_does_not() {
        assert!(principal(Role::Member, Via::Session, None).allows(Operation::ConfirmationsDecide));
        assert!(!principal(Role::Member, Via::ApiKey, None).allows(Operation::ConfirmationsDecide));
        assert!(!principal(Role::Member, Via::Session, None).allows(Operation::SettingsManage));
    }

    #[test]
    fn a_key_limited_to_tool_sets_may_only_use_set_endpoints_even_for_an_admin() {
        let mut limited = principal(Role::Admin, Via::ApiKey, None);
        limited.tool_sets = Some(vec!["support".into()]);
        for op in Operation::ALL {
            let expected = op.access() == Access::Public
                || matches!(op, Operation::Identity | Operation::ToolSetCall);
            assert_eq!(limited.allows(*op), expected, "{op:?}");
        }
        let e = limited
            .require(Operation::ToolsRun)
            .unwrap_err()
            .to_string();
        assert!(e.contains("limited to tool sets"), "{e}");
        assert!(!limited.is_unrestricted_admin());
    }

    #[test]
    fn a_proxy_token_may_only_use_the_proxy() {
        let token = principal(Role::Admin, Via::ProxyToken, None);
        for op in Operation::ALL {
            let expected = matches!(op.access(), Access::Public | Access::ProxyToken);
            assert_eq!(token.allows(*op), expected, "{op:?}");
        }
    }
}
