//! One audit row in full: the row, the tool call it belongs to (arguments as the agent sent
//! them, re-scrubbed with the project's secrets of today; outcome, error, result size,
//! Idempotency-Key), the key and user by name, and the confirmation it was held under with who
//! decided. Members see their own rows only; anything else is not found.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AuditLog;
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::store::{
    self, audit::AuditStatus, confirmations::ConfirmationStatus, tool_calls::CallStatus,
};
use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditDetail {
    pub id: String,
    pub object: String,
    pub at: String,
    pub action: String,
    pub status: AuditStatus,
    pub error_code: Option<String>,
    pub duration_ms: Option<i64>,
    pub surface: String,
    /// The tool set (slug) the call came through.
    #[serde(default)]
    pub tool_set: Option<String>,
    pub tool: Option<String>,
    pub tool_call_id: Option<String>,
    pub user_id: Option<String>,
    pub user_email: Option<String>,
    pub api_key_id: Option<String>,
    pub api_key_name: Option<String>,
    pub end_user_id: Option<String>,
    /// What the row says beyond its columns (a proxied request's method and path, ...).
    pub detail: Option<String>,
    pub call: Option<CallDetail>,
    pub confirmation: Option<ConfirmationDetail>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallDetail {
    pub status: CallStatus,
    /// The agent's arguments (vault references stay references; pasted secrets redacted).
    pub arguments: Value,
    /// The error the caller got, if the call failed.
    pub error: Option<Value>,
    /// Bytes of the result's JSON as the caller got it.
    pub result_bytes: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationDetail {
    pub id: String,
    pub status: ConfirmationStatus,
    pub decided_by: Option<String>,
    pub decided_by_email: Option<String>,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
    pub expires_at: String,
}

impl AuditLog {
    pub async fn detail(&self, who: &Principal, id: &str) -> Result<AuditDetail> {
        self.recorder.flush().await;
        let pool = self.db.pool();
        let row = store::audit::get(pool, &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        if !who.sees_project_records() && row.user_id.as_deref() != Some(who.user_id.as_str()) {
            return Err(Error::NotFound);
        }
        let scrubber = self.vault.scrubber(&who.project_id).await?;
        let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
        let call = match &row.tool_call_id {
            Some(tc) => store::tool_calls::get(pool, &who.project_id, tc)
                .await?
                .map(|c| {
                    let mut arguments = parse(&c.arguments);
                    scrubber.scrub(&mut arguments);
                    let mut error = c.error.as_deref().map(parse);
                    if let Some(e) = error.as_mut() {
                        scrubber.scrub(e);
                    }
                    CallDetail {
                        status: c.status,
                        arguments,
                        error,
                        result_bytes: c.result_bytes,
                        idempotency_key: c.idempotency_key,
                    }
                }),
            None => None,
        };
        let confirmation = match &row.tool_call_id {
            Some(tc) => {
                match store::confirmations::by_tool_call(pool, &who.project_id, tc).await? {
                    Some(c) => {
                        let decided_by_email = match &c.decided_by {
                            Some(u) => store::users::by_id(pool, u).await?.map(|u| u.email),
                            None => None,
                        };
                        let now = self.clock.now_ms();
                        Some(ConfirmationDetail {
                            id: c.id,
                            status: c.status.as_of(c.expires_at, now),
                            decided_by: c.decided_by,
                            decided_by_email,
                            decided_at: c.decided_at.map(rfc3339),
                            reason: c
                                .reason
                                .as_deref()
                                .map(|r| scrubber.scrub_str(r).unwrap_or_else(|| r.to_owned())),
                            expires_at: rfc3339(c.expires_at),
                        })
                    }
                    None => None,
                }
            }
            None => None,
        };
        let user_email = match &row.user_id {
            Some(u) => store::users::by_id(pool, u).await?.map(|u| u.email),
            None => None,
        };
        let api_key_name = match &row.api_key_id {
            Some(k) => store::api_keys::by_id(pool, &who.project_id, k)
                .await?
                .map(|k| k.name),
            None => None,
        };
        Ok(AuditDetail {
            object: "audit_event".into(),
            at: rfc3339(row.created_at),
            action: row.action,
            status: row.status,
            error_code: row.error_code,
            duration_ms: row.duration_ms,
            surface: row.surface,
            tool_set: row.tool_set,
            tool: row.tool,
            tool_call_id: row.tool_call_id,
            user_id: row.user_id,
            user_email,
            api_key_id: row.api_key_id,
            api_key_name,
            end_user_id: row.end_user_id,
            detail: row
                .detail
                .as_deref()
                .map(|d| scrubber.scrub_str(d).unwrap_or_else(|| d.to_owned())),
            call,
            confirmation,
            id: row.id,
        })
    }
}
