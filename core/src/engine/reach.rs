//! What the caller's policy lets it reach through the integration meta-tools (D14, D21):
//! `list_integrations` and `connect` see only integrations at least one of whose tools the
//! policy lets run (or hold for confirmation); `curl_session` and every `/c` request need the
//! curl permission `curl:<integration>`, because the proxy can send any request the
//! integration's API takes, writes included.

use super::Engine;
use crate::auth::Principal;
use crate::connections::{
    ConnectOutcome, CurlSession, CurlSessionRequest, IntegrationStatus, ProxyTokens,
};
use crate::policy::{Applied, Decision};
use crate::{Error, Result};

/// The policy name of the curl permission for `integration`: `curl:github`.
pub fn curl_permission(integration: &str) -> String {
    format!("curl:{integration}")
}

/// Whether `policy` lets raw proxy requests reach `integration`: only when it runs
/// `curl:<integration>` without a confirmation (a raw request cannot be held for a person). A
/// policy in `open` mode that denies or gates any tool of the integration must allow
/// `curl:<integration>` explicitly, since the proxy could do what those tools do.
pub fn may_curl(policy: &Applied, integration: &str, tools: &[&str]) -> bool {
    let curl = curl_permission(integration);
    match policy.decide(&curl) {
        Decision::Run => {
            policy.explicitly_allows(&curl)
                || tools.iter().all(|t| policy.decide(t) == Decision::Run)
        }
        Decision::Confirm(_) | Decision::Deny(_) => false,
    }
}

impl Engine {
    /// The names of the project's tools of `integration`.
    fn tools_of<'a>(
        &self,
        snapshot: &'a crate::catalog::Snapshot,
        integration: &str,
    ) -> Vec<&'a str> {
        snapshot
            .tools()
            .iter()
            .filter(|t| t.spec.integration == integration)
            .map(|t| t.name())
            .collect()
    }

    /// Whether `policy` lets `who` use at least one tool of `integration`.
    /// A server users sign in to whose tools are not listed yet is reached only by the admin
    /// who registered it (their connection lists them).
    fn reaches(
        &self,
        who: &Principal,
        snapshot: &crate::catalog::Snapshot,
        policy: &Applied,
        integration: &str,
    ) -> bool {
        if let Some(admin) = self
            .connections
            .lookup(&who.project_id, integration)
            .and_then(|i| i.awaiting_sign_in_by.clone())
        {
            return admin == who.user_id;
        }
        self.tools_of(snapshot, integration)
            .iter()
            .any(|t| policy.decide(t).visible())
    }

    /// list_integrations: the integrations `who`'s policy reaches, with the connection state.
    pub async fn integrations(&self, who: &Principal) -> Result<Vec<IntegrationStatus>> {
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        let all = self.connections.statuses(who).await?;
        Ok(all
            .into_iter()
            .filter(|s| self.reaches(who, &snapshot, &policy, &s.name))
            .collect())
    }

    /// connect: refused for an integration none of whose tools `who`'s policy lets run, in the
    /// words an unknown integration gets (the caller learns nothing of integrations it may
    /// not use).
    pub async fn connect(&self, who: &Principal, integration: &str) -> Result<ConnectOutcome> {
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        if self
            .connections
            .lookup(&who.project_id, integration)
            .is_some()
            && !self.reaches(who, &snapshot, &policy, integration)
        {
            return Err(Error::invalid(format!(
                "integration {integration} is not allowed by your policy; none of its tools may run"
            )));
        }
        self.connections.connect(who, integration).await
    }

    /// curl_session: every named integration needs the curl permission (see `may_curl`); then
    /// the connection rules. The token is bound to `who`'s key or grant.
    pub async fn curl_session(
        &self,
        tokens: &ProxyTokens,
        who: &Principal,
        req: CurlSessionRequest,
    ) -> Result<CurlSession> {
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        let refused: Vec<String> = req
            .names()
            .into_iter()
            .filter(|name| self.connections.lookup(&who.project_id, name).is_some())
            .filter(|name| !may_curl(&policy, name, &self.tools_of(&snapshot, name)))
            .collect();
        if !refused.is_empty() {
            return Err(Error::invalid(refused.iter().map(|n| format!(
                "your policy does not allow the curl proxy for {n}; an admin can allow it with the pattern {}", curl_permission(n)
            )).collect::<Vec<_>>().join("; ")));
        }
        self.connections.curl_session(tokens, who, req).await
    }

    /// Whether `who` (rebuilt from the key or grant that minted a proxy token) may still send a
    /// raw request to `integration` now (checked on every `/c` request).
    pub async fn may_proxy(&self, who: &Principal, integration: &str) -> Result<bool> {
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        Ok(may_curl(
            &policy,
            integration,
            &self.tools_of(&snapshot, integration),
        ))
    }
}
