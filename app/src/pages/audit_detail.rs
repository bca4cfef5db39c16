//! One audit row in full (`/audit/<id>`): outcome, error, duration, result size, surface, key
//! and user, `end_user_id`, the Idempotency-Key, the arguments as the agent sent them (vault
//! references kept, secrets redacted) and the confirmation it was held under with who decided.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::audit_detail;
use crate::components::{Loaded, Page, CARD};
use crate::pages::audit::status_class;

fn row(label: &'static str, value: Option<String>, testid: &'static str) -> impl IntoView {
    value.filter(|v| !v.is_empty()).map(|v| {
        view! {
            <dt class="text-slate-500">{label}</dt>
            <dd class="break-all" data-testid=testid>{v}</dd>
        }
    })
}

#[component]
pub fn AuditEventPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let data = Resource::new(id, audit_detail);
    view! {
        <Page current="/audit" title="Audit entry"
            subtitle="One execution attempt in full.">
            <Loaded data=data content=move |d| {
                let status_class = status_class(d.status);
                view! {
                    <section class=CARD data-testid="audit-detail">
                        <div class="mb-3 flex items-center gap-2">
                            <h2 class="font-mono text-sm font-semibold">{d.tool.clone()}</h2>
                            <span class=status_class data-testid="detail-status">{d.status.as_str()}</span>
                            <span class="text-xs text-slate-500">{d.error_code.clone()}</span>
                            <span class="ml-auto font-mono text-xs text-slate-400">{d.id.clone()}</span>
                        </div>
                        <dl class="grid grid-cols-[12rem_1fr] gap-x-3 gap-y-1 text-sm">
                            {row("When", Some(d.at.clone()), "detail-at")}
                            {row("Action", Some(d.action.clone()), "detail-action")}
                            {row("Handler time", d.duration_ms.map(|ms| format!("{ms} ms")), "detail-duration")}
                            {row("Result size", d.result_bytes.map(|b| format!("{b} bytes")), "detail-result-size")}
                            {row("Via", Some(d.surface.clone()), "detail-surface")}
                            {row("User", Some(d.user.clone()), "detail-user")}
                            {row("Key", Some(d.key.clone()), "detail-key")}
                            {row("On behalf of", d.end_user_id.clone(), "detail-end-user")}
                            {row("Idempotency-Key", d.idempotency_key.clone(), "detail-idempotency-key")}
                            {row("Tool call", d.tool_call_id.clone(), "detail-call")}
                            {row("Detail", d.detail.clone(), "detail-detail")}
                            {d.confirmation_id.clone().map(|c| view! {
                                <dt class="text-slate-500">"Confirmation"</dt>
                                <dd><a href=format!("/confirmations/{c}") class="font-mono text-indigo-700 underline" data-testid="detail-confirmation">{c.clone()}</a>
                                    " " {d.confirmation_status.map(|s| s.as_str()).unwrap_or_default()}</dd>
                            })}
                            {row("Decided by", d.decided_by.clone().map(|who| format!("{who} at {}", d.decided_at.clone().unwrap_or_default())), "detail-decided-by")}
                            {row("Reason", d.decision_reason.clone(), "detail-reason")}
                        </dl>
                        {d.arguments.clone().map(|a| view! {
                            <h3 class="mb-1 mt-4 text-sm font-semibold">"Arguments"</h3>
                            <pre class="overflow-x-auto rounded bg-slate-50 p-3 text-xs" data-testid="detail-arguments">{a}</pre>
                        })}
                        {d.error.clone().map(|e| view! {
                            <h3 class="mb-1 mt-4 text-sm font-semibold">"Error"</h3>
                            <pre class="overflow-x-auto rounded bg-red-50 p-3 text-xs" data-testid="detail-error">{e}</pre>
                        })}
                    </section>
                }.into_any()
            }/>
            <a href="/audit" class="mt-4 inline-block text-sm text-indigo-600 underline">"Audit log"</a>
        </Page>
    }
}
