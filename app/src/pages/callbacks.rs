//! Callbacks: what agents scheduled with schedule.callback, each with its status, when it is
//! due and every delivery attempt (time, answer, error), with cancel for those still waiting.
//! Admins can show the signing secret receivers check `Workbench-Signature` with.

use leptos::prelude::*;
use workbench_model::delivery::CallbackStatus;

use crate::api::{callbacks_page, CallbackItem, CallbackSigningSecret, CancelCallback};
use crate::components::{ActionError, Loaded, Page, RowAction, BUTTON, CARD};

fn status_badge(status: CallbackStatus) -> &'static str {
    match status {
        CallbackStatus::Delivered => {
            "rounded bg-emerald-100 px-1.5 py-0.5 text-xs font-medium text-emerald-800"
        }
        CallbackStatus::Failed => {
            "rounded bg-red-100 px-1.5 py-0.5 text-xs font-medium text-red-800"
        }
        CallbackStatus::Scheduled => {
            "rounded bg-indigo-100 px-1.5 py-0.5 text-xs font-medium text-indigo-800"
        }
        CallbackStatus::Cancelled => {
            "rounded bg-slate-100 px-1.5 py-0.5 text-xs font-medium text-slate-700"
        }
    }
}

#[component]
fn Callback(c: CallbackItem, cancel: ServerAction<CancelCallback>) -> impl IntoView {
    let waiting = c.status == CallbackStatus::Scheduled;
    let deliveries = c.deliveries.clone();
    let none_yet = deliveries.is_empty();
    let id = c.id.clone();
    view! {
        <article class=format!("{CARD} mb-4") data-testid="callback" data-id=c.id.clone()>
            <div class="flex flex-wrap items-center gap-2">
                <span class="font-mono text-sm font-semibold">{c.method.clone()} " " {c.url.clone()}</span>
                <span class=status_badge(c.status) data-testid="callback-status">{c.status.as_str()}</span>
                {waiting.then(|| view! {
                    <RowAction action=cancel id=id.clone() label="Cancel" class="ml-auto" testid="cancel-callback"/>
                })}
            </div>
            <dl class="mt-2 grid grid-cols-[10rem_1fr] gap-x-3 gap-y-1 text-sm">
                <dt class="text-slate-500">"Due"</dt><dd>{c.scheduled_for.clone()}</dd>
                <dt class="text-slate-500">"Scheduled by"</dt><dd>{c.created_by.clone()}</dd>
                <dt class="text-slate-500">"Id"</dt><dd class="font-mono text-xs">{c.id.clone()}</dd>
                {c.next_attempt_at.clone().filter(|_| c.attempts > 0).map(|t| view! { <dt class="text-slate-500">"Next attempt"</dt><dd>{t}</dd> })}
                {c.delivered_at.clone().map(|t| view! { <dt class="text-slate-500">"Delivered"</dt><dd>{t}</dd> })}
                {c.last_error.clone().filter(|_| c.status == CallbackStatus::Failed).map(|e| view! { <dt class="text-slate-500">"Why"</dt><dd class="text-red-700">{e}</dd> })}
            </dl>
            <details class="mt-2">
                <summary class="cursor-pointer text-sm text-slate-600">"Payload"</summary>
                <pre class="mt-1 overflow-x-auto rounded bg-slate-50 p-2 text-xs">{c.payload.clone()}</pre>
            </details>
            <h3 class="mt-3 text-xs font-semibold uppercase tracking-wide text-slate-500">"Deliveries"</h3>
            {if none_yet {
                view! { <p class="text-sm text-slate-500">"None yet."</p> }.into_any()
            } else {
                view! {
                    <table class="mt-1 w-full text-left text-sm" data-testid="deliveries">
                        <thead class="text-xs text-slate-500"><tr><th>"#"</th><th>"When"</th><th>"Answer"</th><th>"Took"</th><th>"Error"</th></tr></thead>
                        <tbody>
                            {deliveries.into_iter().map(|a| view! {
                                <tr class="border-t border-slate-100" data-testid="delivery">
                                    <td>{a.attempt}</td>
                                    <td>{a.started_at}</td>
                                    <td>{a.response_status.map(|s| s.to_string()).unwrap_or_else(|| "—".into())}</td>
                                    <td>{format!("{} ms", a.duration_ms)}</td>
                                    <td class="text-red-700">{a.error.unwrap_or_default()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </article>
    }
}

#[component]
pub fn Callbacks() -> impl IntoView {
    let cancel = ServerAction::<CancelCallback>::new();
    let reveal = ServerAction::<CallbackSigningSecret>::new();
    let data = reloaded_after!(callbacks_page(); cancel);
    view! {
        <Page current="/callbacks" title="Callbacks"
            subtitle="Calls back agents scheduled with schedule.callback: retried for about a day (408, 429, 5xx and network errors) until the receiver answers 2xx, each request signed.">
            <Loaded data=data content=move |d| {
                let empty = d.callbacks.is_empty();
                let list = d.callbacks.into_iter().map(|c| view! { <Callback c cancel/> }).collect_view();
                view! {
                    {d.is_admin.then(|| view! {
                        <section class=format!("{CARD} mb-6 max-w-2xl")>
                            <h2 class="text-sm font-semibold">"Signing secret"</h2>
                            <p class="mt-1 text-sm text-slate-600">
                                "Receivers check the " <code>"Workbench-Signature: t=<unix>,v1=<hex>"</code>
                                " header: v1 is the HMAC-SHA256 of " <code>"<t>.<raw body>"</code> " under this secret."
                            </p>
                            <ActionForm action=reveal attr:class="mt-3">
                                <button type="submit" class=BUTTON data-testid="reveal-signing-secret">"Show signing secret"</button>
                            </ActionForm>
                            {move || reveal.value().get().and_then(Result::ok).map(|s| view! {
                                <code class="mt-2 block break-all rounded bg-slate-50 p-2 font-mono text-xs" data-testid="signing-secret">{s}</code>
                            })}
                            <ActionError value=reveal.value()/>
                        </section>
                    })}
                    <ActionError value=cancel.value()/>
                    {if empty {
                        view! { <section class=format!("{CARD} max-w-2xl")><p class="text-sm text-slate-600">"No callbacks scheduled yet."</p></section> }.into_any()
                    } else {
                        view! { <div class="max-w-4xl">{list}</div> }.into_any()
                    }}
                }.into_any()
            }/>
        </Page>
    }
}
