//! `schedule.callback`: have workbench call a URL back later (after a delay or at a time, at
//! most 30 days ahead) with a JSON payload, durably and at least once. Checking the time and
//! shaping the call is here; storing and delivering is `crate::schedule`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, SideEffects, ToolHandler, ToolSpec};
use crate::clock::rfc3339;
use crate::egress::FetchError;
use crate::schedule::{
    CallbackStatus, NewCallback, ScheduleError, Schedules, MAX_AHEAD_MS, MAX_PAYLOAD_BYTES,
    MAX_SCHEDULED_PER_PROJECT,
};
use crate::Result;

pub fn spec() -> Result<ToolSpec> {
    make_spec(
        "schedule.callback",
        "Schedule a callback: have an HTTP URL called back later (a reminder, a timer, \"call me back in an hour\", a delayed job) \
         after a delay in seconds or at a given time up to 30 days ahead, with a JSON payload. Delivery is durable and retried; \
         the request is signed so the receiver can check it came from workbench.",
        SideEffects::Write,
        json!({
            "type": "object",
            "required": ["url"],
            "additionalProperties": false,
            "properties": {
                "url": { "type": "string", "format": "uri", "maxLength": 2048, "description": "Where to send the callback; its host must be in the project's egress allowlist." },
                "delay_seconds": { "type": "integer", "minimum": 1, "maximum": MAX_AHEAD_MS / 1000, "description": "Call back this many seconds from now (e.g. 3600 for an hour). Give this or at." },
                "at": { "type": "string", "format": "date-time", "description": "Call back at this time (RFC 3339, e.g. 2026-12-24T09:00:00Z), at most 30 days ahead. Give this or delay_seconds." },
                "payload": { "description": "Any JSON to send back in the callback's body, as payload." },
                "method": { "type": "string", "enum": ["POST", "PUT", "PATCH"], "default": "POST" }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": { "id": { "type": "string" }, "scheduled_for": { "type": "string" }, "status": { "type": "string" } }
        })),
    )
}

pub struct ScheduleCallback(pub Arc<Schedules>);

/// When the callback is due, from `delay_seconds` or `at` (exactly one), checked against now.
fn due_at(args: &Value, now: i64) -> Result<i64, HandlerError> {
    match (args.get("delay_seconds"), args.get("at")) {
        (Some(_), Some(_)) => Err(HandlerError::invalid(
            "",
            "give delay_seconds or at, not both",
        )),
        (None, None) => Err(HandlerError::invalid(
            "",
            "say when: delay_seconds (e.g. 3600) or at (an RFC 3339 time)",
        )),
        (Some(d), None) => {
            let secs = d
                .as_i64()
                .filter(|s| (1..=MAX_AHEAD_MS / 1000).contains(s))
                .ok_or_else(|| {
                    HandlerError::invalid(
                        "/delay_seconds",
                        format!(
                            "delay_seconds is a whole number from 1 to {}",
                            MAX_AHEAD_MS / 1000
                        ),
                    )
                })?;
            Ok(now + secs * 1000)
        }
        (None, Some(at)) => {
            let text = at.as_str().unwrap_or_default();
            let t =
                time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                    .map_err(|_| {
                    HandlerError::invalid(
                        "/at",
                        format!("{text:?} is not an RFC 3339 time such as 2026-12-24T09:00:00Z"),
                    )
                })?;
            let ms = (t.unix_timestamp_nanos() / 1_000_000) as i64;
            if ms <= now {
                return Err(HandlerError::invalid(
                    "/at",
                    format!("{text} is in the past (it is now {})", rfc3339(now)),
                ));
            }
            if ms > now + MAX_AHEAD_MS {
                return Err(HandlerError::invalid(
                    "/at",
                    format!(
                        "{text} is more than 30 days ahead (the latest is {})",
                        rfc3339(now + MAX_AHEAD_MS)
                    ),
                ));
            }
            Ok(ms)
        }
    }
}

#[async_trait]
impl ToolHandler for ScheduleCallback {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let scheduled_for = due_at(&args, self.0.now_ms())?;
        let url = args["url"].as_str().unwrap_or_default().to_owned();
        let payload = args.get("payload").cloned().unwrap_or(Value::Null);
        let size = payload.to_string().len();
        if size > MAX_PAYLOAD_BYTES {
            return Err(HandlerError::invalid(
                "/payload",
                format!("the payload is {size} bytes of JSON; at most {MAX_PAYLOAD_BYTES}"),
            ));
        }
        let written = |field: &str| ctx.template.and_then(|t| t.get(field)).cloned();
        let callback = NewCallback {
            url_shown: written("url")
                .and_then(|u| u.as_str().map(str::to_owned))
                .unwrap_or_else(|| url.clone()),
            payload_shown: written("payload").unwrap_or_else(|| payload.clone()),
            url,
            method: args["method"].as_str().unwrap_or("POST").to_owned(),
            payload,
            scheduled_for,
        };
        let shown_url = ctx.quote("url", &callback.url);
        let substituted = ctx.substituted("url", &callback.url);
        let (id, at) = self.0.schedule(ctx.principal, callback).await.map_err(|e| match e {
            ScheduleError::Url(FetchError::InvalidUrl(m)) => HandlerError::invalid("/url", m),
            // A url that held a reference is named as the agent wrote it, never by its host.
            ScheduleError::Url(FetchError::NotAllowlisted(host)) if !substituted => HandlerError::failed(format!(
                "{host} is not in this project's egress allowlist; an admin can add it on the Egress page"
            )),
            ScheduleError::Url(FetchError::NotAllowlisted(_)) => {
                HandlerError::failed(format!("the host of {shown_url} is not in this project's egress allowlist"))
            }
            ScheduleError::Url(FetchError::Blocked { reason, .. }) => HandlerError::failed(format!("refusing to call back {shown_url}: {reason}")),
            ScheduleError::Url(other) => HandlerError::failed(other.to_string()),
            ScheduleError::TooMany => HandlerError::failed(format!(
                "this project already has {MAX_SCHEDULED_PER_PROJECT} callbacks waiting; cancel some (DELETE /v1/schedules/{{id}}) first"
            )),
            ScheduleError::Store(e) => {
                tracing::error!(error = ?e, "scheduling a callback failed");
                HandlerError::Unavailable("callbacks cannot be scheduled right now; try again".into())
            }
        })?;
        Ok(json!({ "id": id, "scheduled_for": rfc3339(at), "status": CallbackStatus::Scheduled }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_590_400_000; // 2025-12-01T12:00:00Z

    #[test]
    fn the_time_is_a_delay_or_an_instant_ahead_never_both_never_past() {
        assert_eq!(
            due_at(&json!({ "delay_seconds": 3600 }), NOW).unwrap(),
            NOW + 3_600_000
        );
        assert_eq!(
            due_at(&json!({ "at": "2025-12-01T13:00:00Z" }), NOW).unwrap(),
            NOW + 3_600_000
        );
        assert_eq!(
            due_at(&json!({ "at": "2025-12-01T14:00:00+01:00" }), NOW).unwrap(),
            NOW + 3_600_000
        );
        let msg = |v: Value| match due_at(&v, NOW).unwrap_err() {
            HandlerError::InvalidArgument { message, .. } => message,
            other => panic!("{other:?}"),
        };
        assert!(msg(json!({ "at": "2025-12-01T11:59:59Z" })).contains("in the past"));
        assert!(msg(json!({ "at": "2026-01-01T12:00:01Z" })).contains("more than 30 days ahead"));
        assert!(msg(json!({ "at": "tomorrow" })).contains("not an RFC 3339 time"));
        assert!(
            msg(json!({ "delay_seconds": 60, "at": "2025-12-01T13:00:00Z" })).contains("not both")
        );
        assert!(msg(json!({})).contains("say when"));
    }
}
