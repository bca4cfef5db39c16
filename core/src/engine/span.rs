//! The `tool.execute` span of one execution: what a trace shows of a call (tool, surface,
//! outcome, call id, handler time), never its arguments, result or credentials. Core only
//! opens `tracing` spans, under their own target so log lines keep the request's span; the
//! server's subscriber exports them over OpenTelemetry when tracing is on, and otherwise
//! nothing enables them.

use tracing::field::Empty;
use tracing::Span;

use super::{record, CallOptions, CallOutcome};
use crate::store::tool_calls::CallStatus;

/// The target of spans meant for traces, not log lines.
pub const TRACE_TARGET: &str = "workbench::trace";

/// A span for an execution about to start (a child of the request's span).
pub(super) fn open(opts: &CallOptions) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "tool.execute",
        tool.name = Empty,
        tool.surface = opts.surface.as_str(),
        tool.outcome = Empty,
        tool.status = Empty,
        tool.call_id = Empty,
        tool.duration_ms = Empty,
        otel.status_code = Empty,
    )
}

/// Records how the execution ended: the tool as the meters name it (calls to unknown tools
/// share one name), the outcome (`ok` or the error code), the call's status and id, and the
/// handler time.
pub(super) fn close(span: &Span, o: &CallOutcome) {
    if span.is_disabled() {
        return;
    }
    span.record("tool.name", record::metered_tool(o));
    span.record("tool.outcome", record::outcome_label(o));
    span.record("tool.status", o.status().as_str());
    span.record("tool.call_id", o.id.as_str());
    span.record("tool.duration_ms", o.duration_ms);
    if o.status() == CallStatus::Failed {
        span.record("otel.status_code", "ERROR");
    }
}
