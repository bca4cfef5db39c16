//! Human confirmations (D15): a call its policy gates is validated, then held (the agent's
//! template, never resolved values) until a person approves or denies it; approval runs it once
//! through the whole pipeline as the key that made it (policy checked again, vault read then).
//! The identical call (same key, tool and template) repeated before the hold expires answers
//! the held call's state: the same pending confirmation, or the outcome once decided.

use serde::Serialize;
use serde_json::Value;

use super::record::{self, Rows};
use super::scope::{CallScope, Held};
use super::{CallOptions, CallOutcome, Engine, Invocation, Surface, ToolCallView, ToolError};
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::ids::new_id;
use crate::policy::Rule;
use crate::store::{
    self,
    audit::AuditStatus,
    confirmations::{ConfirmationRow, ConfirmationStatus},
};
use crate::{Error, Result};

/// How long a held call waits for a decision unless configured otherwise.
pub const DEFAULT_CONFIRMATION_TTL_SECS: i64 = 15 * 60;
/// Longest reason a decider may give.
pub const MAX_REASON_CHARS: usize = 1000;
/// Most confirmations a listing shows.
pub const LIST_LIMIT: i64 = 200;

/// Where confirmation links point and how long holds last.
#[derive(Debug, Clone)]
pub struct ConfirmSettings {
    /// The portal's public URL; links are `<public_url>/confirmations/<id>`.
    pub public_url: String,
    pub ttl_secs: i64,
}

impl Default for ConfirmSettings {
    fn default() -> Self {
        ConfirmSettings {
            public_url: "http://127.0.0.1:3000".into(),
            ttl_secs: DEFAULT_CONFIRMATION_TTL_SECS,
        }
    }
}

/// A confirmation as the API and the portal show it. `arguments` is the agent's template,
/// scrubbed of the project's secrets (vault references stay references).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfirmationView {
    pub id: String,
    pub object: &'static str,
    pub tool_call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub status: ConfirmationStatus,
    pub api_key_id: Option<String>,
    pub user_id: String,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub policy_id: Option<String>,
    pub reason: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub expires_at: String,
    pub expires_at_ms: i64,
    pub created_at: String,
    pub url: String,
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    Invalid(String),
    /// Decided already, or expired: the confirmation's status says which.
    #[error("this confirmation is {status}; a decision is taken once, before it expires")]
    Closed { status: ConfirmationStatus },
    #[error(transparent)]
    Failed(#[from] Error),
}

/// The outcome identical repeats get, as stored: the result or the error.
#[derive(serde::Serialize, serde::Deserialize)]
enum Stored {
    Ok(Value),
    Err(ToolError),
}

/// The identical call: the same key (or user), tool and argument template, whatever the order
/// of the template's keys.
fn fingerprint(who: &Principal, tool: &str, template: &Value) -> String {
    fn canonical(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: std::collections::BTreeMap<&String, Value> =
                    m.iter().map(|(k, v)| (k, canonical(v))).collect();
                serde_json::to_value(sorted).unwrap_or(Value::Null)
            }
            Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let caller = match (&who.api_key_id, &who.oauth_grant_id) {
        (Some(key), _) => key.clone(),
        (None, Some(grant)) => format!("grant:{grant}"),
        (None, None) => format!("user:{}", who.user_id),
    };
    crate::crypto::sha256_hex(format!("{caller}\n{tool}\n{}", canonical(template)).as_bytes())
}

fn effective_status(row: &ConfirmationRow, now: i64) -> ConfirmationStatus {
    row.status.as_of(row.expires_at, now)
}

impl Engine {
    fn confirmation_url(&self, id: &str) -> String {
        format!(
            "{}/confirmations/{id}",
            self.confirm.public_url.trim_end_matches('/')
        )
    }

    fn awaiting(&self, row: &ConfirmationRow) -> ToolError {
        ToolError::AwaitingConfirmation {
            confirmation_id: row.id.clone(),
            expires_at: rfc3339(row.expires_at),
            url: self.confirmation_url(&row.id),
        }
    }

    /// The outcome answers under the held call's id and records only an audit row.
    fn answer_as_repeat(outcome: &mut CallOutcome, held: &ConfirmationRow) {
        outcome.id = held.tool_call_id.clone();
        outcome.rows = Rows::Replay;
        outcome.confirmation_id = Some(held.id.clone());
    }
}

impl CallScope<'_> {
    /// Holds a gated call, or answers what the identical held call came to. `template` is what
    /// the agent sent. Sets `outcome`'s id and rows: a new hold is a new call; a repeat
    /// answers under the held call's id and writes only an audit row.
    pub(super) async fn hold(
        &self,
        tool: &str,
        template: &Value,
        rule: Rule,
        outcome: &mut CallOutcome,
    ) -> std::result::Result<Value, ToolError> {
        let (engine, who, opts) = (self.engine, self.who, self.opts);
        let unavailable = |e: Error| {
            tracing::error!(error = ?e, "confirmations cannot be stored");
            ToolError::Unavailable {
                reason: "confirmations cannot be stored right now".into(),
            }
        };
        let now = engine.clock.now_ms();
        let fp = fingerprint(who, tool, template);
        let live =
            store::confirmations::live_by_fingerprint(engine.db.pool(), &who.project_id, &fp, now)
                .await
                .map_err(unavailable)?;
        if let Some(row) = live {
            Engine::answer_as_repeat(outcome, &row);
            return match (row.status, row.outcome.as_deref()) {
                (ConfirmationStatus::Denied, _) => Err(ToolError::Denied {
                    tool: tool.to_owned(),
                    confirmation_id: row.id,
                    reason: row.reason,
                }),
                (ConfirmationStatus::Approved, Some(stored)) => {
                    match serde_json::from_str::<Stored>(stored) {
                        Ok(Stored::Ok(v)) => Ok(v),
                        Ok(Stored::Err(e)) => Err(e),
                        Err(_) => Err(ToolError::Unavailable {
                            reason: "the approved call's outcome cannot be read".into(),
                        }),
                    }
                }
                // Pending, or approved and still running: the same confirmation.
                _ => Err(engine.awaiting(&row)),
            };
        }
        let row = ConfirmationRow {
            id: new_id("conf"),
            project_id: who.project_id.clone(),
            tool_call_id: outcome.id.clone(),
            tool: tool.to_owned(),
            arguments: template.to_string(),
            fingerprint: fp,
            api_key_id: who.api_key_id.clone(),
            user_id: who.user_id.clone(),
            end_user_id: opts.end_user_id.clone(),
            surface: opts.surface.as_str().to_owned(),
            timeout_ms: opts.timeout.as_millis() as i64,
            policy_id: Some(rule.policy_id),
            status: ConfirmationStatus::Pending,
            reason: None,
            decided_by: None,
            decided_at: None,
            outcome: None,
            expires_at: now + engine.confirm.ttl_secs * 1000,
            created_at: now,
            oauth_grant_id: who.oauth_grant_id.clone(),
        };
        // At most one pending confirmation per identical call (a unique index): an expired one
        // steps aside first; losing a race to another instance answers the winner's.
        store::confirmations::expire_fingerprint(
            engine.db.pool(),
            &who.project_id,
            &row.fingerprint,
            now,
        )
        .await
        .map_err(unavailable)?;
        if let Err(e) = store::confirmations::insert(engine.db.pool(), &row).await {
            return match store::confirmations::live_by_fingerprint(
                engine.db.pool(),
                &who.project_id,
                &row.fingerprint,
                now,
            )
            .await
            {
                Ok(Some(winner)) => {
                    Engine::answer_as_repeat(outcome, &winner);
                    Err(engine.awaiting(&winner))
                }
                _ => Err(unavailable(e)),
            };
        }
        outcome.confirmation_id = Some(row.id.clone());
        tracing::info!(confirmation_id = %row.id, tool, "call held for confirmation");
        // Approvers are told through the project's webhook, if one is set: the delivery is in the
        // outbox before the call is answered and is sent in the background.
        match engine.view(who, row.clone(), now).await {
            Ok(view) => {
                engine
                    .webhooks
                    .notify(
                        &who.project_id,
                        crate::notify::CONFIRMATION_CREATED,
                        &view.id,
                        serde_json::to_value(&view).unwrap_or(Value::Null),
                    )
                    .await
            }
            Err(e) => {
                tracing::warn!(error = %e, confirmation_id = %row.id, "the webhook is not told of a held call")
            }
        }
        Err(engine.awaiting(&row))
    }
}

impl Engine {
    async fn view(
        &self,
        who: &Principal,
        row: ConfirmationRow,
        now: i64,
    ) -> Result<ConfirmationView> {
        let mut arguments: Value = serde_json::from_str(&row.arguments).unwrap_or(Value::Null);
        self.vault.scrubber_for(who).await?.scrub(&mut arguments);
        let status = effective_status(&row, now);
        Ok(ConfirmationView {
            url: self.confirmation_url(&row.id),
            id: row.id,
            object: "confirmation",
            tool_call_id: row.tool_call_id,
            tool: row.tool,
            arguments,
            status,
            api_key_id: row.api_key_id,
            user_id: row.user_id,
            end_user_id: row.end_user_id,
            surface: row.surface,
            policy_id: row.policy_id,
            reason: row.reason,
            decided_by: row.decided_by,
            decided_at: row.decided_at.map(rfc3339),
            expires_at: rfc3339(row.expires_at),
            expires_at_ms: row.expires_at,
            created_at: rfc3339(row.created_at),
        })
    }

    /// Who may see and decide confirmations (D15, D21): a person signed in to the portal or
    /// an unrestricted admin key; never an OAuth grant or a policy-limited key.
    fn may_decide(who: &Principal) -> std::result::Result<(), &'static str> {
        if who.allows(crate::auth::Operation::ConfirmationsDecide) {
            Ok(())
        } else {
            Err("only a project member in the portal, or an admin key with no policy attached, can see and decide confirmations")
        }
    }

    /// Confirmations of `who`'s project, newest first; `status` narrows.
    pub async fn confirmations(
        &self,
        who: &Principal,
        status: Option<&str>,
    ) -> Result<Vec<ConfirmationView>> {
        Self::may_decide(who).map_err(Error::Forbidden)?;
        let status = match status.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(ConfirmationStatus::parse(s).ok_or_else(|| {
                Error::invalid("status must be pending, approved, denied or expired")
            })?),
        };
        let now = self.clock.now_ms();
        let rows =
            store::confirmations::list(self.db.pool(), &who.project_id, status, now, LIST_LIMIT)
                .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(self.view(who, row, now).await?);
        }
        Ok(out)
    }

    /// One confirmation: for deciders, and for the key that made the call.
    pub async fn confirmation(&self, who: &Principal, id: &str) -> Result<ConfirmationView> {
        let row = store::confirmations::get(self.db.pool(), &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        let own = who.api_key_id.is_some() && row.api_key_id == who.api_key_id;
        if !own && Self::may_decide(who).is_err() {
            return Err(Error::NotFound);
        }
        self.view(who, row, self.clock.now_ms()).await
    }

    /// Held calls waiting for a decision in `who`'s project.
    pub async fn pending_confirmations(&self, who: &Principal) -> Result<i64> {
        store::confirmations::count_pending(self.db.pool(), &who.project_id, self.clock.now_ms())
            .await
    }

    /// Approves (runs the held call once, as the key that made it) or denies a pending
    /// confirmation; answers the call as it ended.
    pub async fn decide(
        &self,
        who: &Principal,
        id: &str,
        approve: bool,
        reason: Option<String>,
    ) -> std::result::Result<ToolCallView, DecideError> {
        Self::may_decide(who).map_err(DecideError::Forbidden)?;
        let reason = reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        if reason.as_ref().is_some_and(|r| {
            r.chars().count() > MAX_REASON_CHARS || r.chars().any(|c| c.is_control() && c != '\n')
        }) {
            return Err(DecideError::Invalid(format!(
                "reason must be at most {MAX_REASON_CHARS} printable characters"
            )));
        }
        let row = store::confirmations::get(self.db.pool(), &who.project_id, id)
            .await?
            .ok_or(DecideError::NotFound)?;
        if who.api_key_id.is_some() && row.api_key_id == who.api_key_id {
            return Err(DecideError::Forbidden(
                "the key that made a call cannot decide its confirmation",
            ));
        }
        let now = self.clock.now_ms();
        let status = if approve {
            ConfirmationStatus::Approved
        } else {
            ConfirmationStatus::Denied
        };
        // The first decision wins, on any instance: the update only takes a pending,
        // unexpired row.
        if !store::confirmations::decide(
            self.db.pool(),
            &who.project_id,
            id,
            status,
            &who.user_id,
            reason.as_deref(),
            now,
        )
        .await?
        {
            store::confirmations::expire(self.db.pool(), &who.project_id, id, now).await?;
            let row = store::confirmations::get(self.db.pool(), &who.project_id, id)
                .await?
                .ok_or(DecideError::NotFound)?;
            return Err(DecideError::Closed {
                status: effective_status(&row, now),
            });
        }
        self.audit_decision(who, &row, approve, reason.as_deref(), now)
            .await;
        tracing::info!(confirmation_id = id, approve, by = %who.user_id, "confirmation decided");
        let opts = CallOptions {
            timeout: std::time::Duration::from_millis(
                row.timeout_ms
                    .clamp(1, super::MAX_TIMEOUT.as_millis() as i64) as u64,
            ),
            end_user_id: row.end_user_id.clone(),
            surface: match row.surface.as_str() {
                "rest" => Surface::Rest,
                "rest_batch" => Surface::RestBatch,
                "portal" => Surface::Portal,
                _ => Surface::Mcp,
            },
            // A call held from REST invoke keeps REST's ceiling.
            rest_result_max_bytes: (row.surface == "rest").then_some(super::REST_RESULT_MAX_BYTES),
            // The held call's record keeps the key it came with.
            idempotency_key: None,
            // And its audit row the tool set it came through.
            tool_set: None,
            // A person approved it later: the client that asked is not waiting on it.
            client: None,
        };
        let held = Held {
            tool_call_id: row.tool_call_id.clone(),
            confirmation_id: row.id.clone(),
        };
        // The caller as it is now, rebuilt from what made the call (D21): the key, or the OAuth
        // grant with the policy chosen at consent; revoked, the call does not run.
        let caller = match (&row.api_key_id, &row.oauth_grant_id) {
            (Some(key), _) => {
                self.accounts
                    .principal_for_key(&row.project_id, key)
                    .await?
            }
            (None, Some(grant)) => self.accounts.principal_for_grant(grant).await?,
            (None, None) => self.accounts.principal_for_user(&row.user_id).await?,
        }
        .filter(|p| p.project_id == row.project_id && p.user_id == row.user_id);
        let result = if !approve {
            self.finish_unrun(
                &held,
                &row,
                caller.as_ref().unwrap_or(who),
                &opts,
                ToolError::Denied {
                    tool: row.tool.clone(),
                    confirmation_id: row.id.clone(),
                    reason,
                },
            )
            .await
        } else if let Some(caller) = caller {
            let template: Value = serde_json::from_str(&row.arguments).unwrap_or(Value::Null);
            let inv = Invocation {
                tool: row.tool.clone(),
                args: template,
            };
            let scope = self.scope(&caller, &opts).await.held(held);
            scope.run(inv, None).await.result
        } else {
            let e = ToolError::Unavailable { reason: "the API key or authorization that made this call was revoked, so it does not run".into() };
            self.finish_unrun(&held, &row, who, &opts, e).await
        };
        let stored = match &result {
            Ok(v) => Stored::Ok(v.clone()),
            Err(e) => Stored::Err(e.clone()),
        };
        if let Ok(json) = serde_json::to_string(&stored) {
            store::confirmations::set_outcome(self.db.pool(), &who.project_id, id, &json).await?;
        }
        let caller_view = Principal {
            role: crate::auth::Role::Admin,
            ..who.clone()
        };
        self.get_call(&caller_view, &row.tool_call_id)
            .await?
            .ok_or(DecideError::NotFound)
    }

    /// Finishes a held call's rows without running it (denied, or its key is gone).
    async fn finish_unrun(
        &self,
        held: &Held,
        row: &ConfirmationRow,
        who: &Principal,
        opts: &CallOptions,
        e: ToolError,
    ) -> std::result::Result<Value, ToolError> {
        let mut o = CallOutcome::new(held.tool_call_id.clone(), row.tool.clone());
        o.rows = Rows::Existing;
        o.confirmation_id = Some(held.confirmation_id.clone());
        o.result = Err(e);
        let args: Value = serde_json::from_str(&row.arguments).unwrap_or(Value::Null);
        let call = record::Call {
            who,
            opts,
            args: &args,
            at: self.clock.now_ms(),
        };
        record::write(&self.recorder, &call, &o).await;
        o.result
    }

    /// One audit row per decision: who decided which call, and why.
    async fn audit_decision(
        &self,
        who: &Principal,
        row: &ConfirmationRow,
        approve: bool,
        reason: Option<&str>,
        now: i64,
    ) {
        let mut detail = format!("confirmation {}", row.id);
        if let Some(r) = reason {
            detail.push_str(": ");
            detail.extend(r.chars().take(300));
        }
        let audit = store::audit::AuditRow {
            id: new_id("aud"),
            project_id: row.project_id.clone(),
            user_id: Some(who.user_id.clone()),
            api_key_id: who.api_key_id.clone(),
            action: if approve {
                "confirmation.approve".into()
            } else {
                "confirmation.deny".into()
            },
            tool: Some(row.tool.clone()),
            tool_call_id: Some(row.tool_call_id.clone()),
            status: if approve {
                AuditStatus::Approved
            } else {
                AuditStatus::Denied
            },
            error_code: None,
            duration_ms: None,
            end_user_id: row.end_user_id.clone(),
            surface: if who.api_key_id.is_some() {
                "rest".into()
            } else {
                "portal".into()
            },
            detail: Some(detail),
            created_at: now,
            tool_set: None,
        };
        self.recorder
            .write(crate::audit::Record {
                call: None,
                audit: Some((audit, crate::audit::Write::Insert)),
                usage: None,
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn who(key: &str) -> Principal {
        Principal {
            user_id: "usr_1".into(),
            email: "a@example.com".into(),
            project_id: "prj_1".into(),
            project_name: "p".into(),
            role: crate::auth::Role::Admin,
            api_key_id: Some(key.into()),
            via: crate::auth::Via::ApiKey,
            oauth_grant_id: None,
            policy_id: None,
            policy_generation: None,
            vault_generation: None,
            credentials_generation: None,
            rate_limit_per_minute: None,
            tool_sets: None,
            user_policy_id: None,
        }
    }

    #[test]
    fn the_identical_call_is_the_same_key_tool_and_template_in_any_key_order() {
        let a = fingerprint(
            &who("key_1"),
            "email.send",
            &json!({ "to": "x@example.com", "body": { "a": 1, "b": 2 } }),
        );
        assert_eq!(
            a,
            fingerprint(
                &who("key_1"),
                "email.send",
                &json!({ "body": { "b": 2, "a": 1 }, "to": "x@example.com" })
            )
        );
        assert_ne!(
            a,
            fingerprint(
                &who("key_2"),
                "email.send",
                &json!({ "to": "x@example.com", "body": { "a": 1, "b": 2 } })
            )
        );
        assert_ne!(
            a,
            fingerprint(
                &who("key_1"),
                "email.draft",
                &json!({ "to": "x@example.com", "body": { "a": 1, "b": 2 } })
            )
        );
        assert_ne!(
            a,
            fingerprint(
                &who("key_1"),
                "email.send",
                &json!({ "to": "y@example.com", "body": { "a": 1, "b": 2 } })
            )
        );
    }
}
