//! Confirmations: calls an agent made that its policy holds for a person (D15). The list shows
//! what is waiting (tool, side effects, who asked, the arguments as the agent sent them, time
//! left) with approve and deny, and the history with who decided; `/confirmations/<id>` is the
//! page the agent's link opens. Admins set the webhook that tells approvers of held calls, and
//! see how its newest deliveries went.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::{
    confirmation_page, confirmations_page, webhook_settings, ConfirmationItem, ConfirmationStatus,
    DecideConfirmation, SaveWebhook, SideEffects, WebhookData,
};
use crate::components::{
    ActionError, LoadError, Loaded, Page, BUTTON, BUTTON_DANGER, CARD, INPUT, LABEL,
};

fn time_left(expires_at_ms: i64, now_ms: i64) -> String {
    let secs = (expires_at_ms - now_ms).max(0) / 1000;
    if secs >= 60 {
        format!("{} min left", secs / 60)
    } else {
        format!("{secs} s left")
    }
}

fn badge(side_effects: Option<SideEffects>) -> &'static str {
    match side_effects {
        Some(SideEffects::Destructive) => {
            "rounded bg-red-100 px-1.5 py-0.5 text-xs font-medium text-red-800"
        }
        Some(SideEffects::Write) => {
            "rounded bg-amber-100 px-1.5 py-0.5 text-xs font-medium text-amber-800"
        }
        _ => "rounded bg-slate-100 px-1.5 py-0.5 text-xs font-medium text-slate-700",
    }
}

/// Approve and deny, with an optional reason.
#[component]
fn DecisionForm(id: String, action: ServerAction<DecideConfirmation>) -> impl IntoView {
    let reason_id = format!("reason-{id}");
    view! {
        <ActionForm action=action attr:class="mt-3 flex flex-wrap items-end gap-3">
            <input type="hidden" name="id" value=id.clone()/>
            <div class="min-w-64 flex-1">
                <label for=reason_id.clone() class=LABEL>"Reason (optional)"</label>
                <input id=reason_id name="reason" type="text" maxlength="1000" class=INPUT/>
            </div>
            <button type="submit" name="decision" value="approve" class=BUTTON data-testid="approve">"Approve and run"</button>
            <button type="submit" name="decision" value="deny" class=BUTTON_DANGER data-testid="deny">"Deny"</button>
        </ActionForm>
    }
}

#[component]
fn Held(
    c: ConfirmationItem,
    now_ms: i64,
    action: Option<ServerAction<DecideConfirmation>>,
) -> impl IntoView {
    let pending = c.status == ConfirmationStatus::Pending;
    view! {
        <article class=format!("{CARD} mb-4") data-testid="confirmation" data-id=c.id.clone()>
            <div class="flex flex-wrap items-center gap-2">
                <a href=format!("/confirmations/{}", c.id) class="font-mono text-sm font-semibold text-indigo-700 underline">{c.tool.clone()}</a>
                <span class=badge(c.side_effects)>{c.side_effects_text()}</span>
                <span class="text-xs text-slate-500" data-testid="confirmation-status">{c.status.as_str()}</span>
                {pending.then(|| view! { <span class="ml-auto text-xs text-slate-500">{time_left(c.expires_at_ms, now_ms)}</span> })}
            </div>
            <dl class="mt-2 grid grid-cols-[10rem_1fr] gap-x-3 gap-y-1 text-sm">
                <dt class="text-slate-500">"Requested by"</dt><dd>{c.requested_by.clone()} " · key " {c.api_key.clone()} " · " {c.surface.clone()}</dd>
                {c.end_user_id.clone().map(|u| view! { <dt class="text-slate-500">"On behalf of"</dt><dd class="font-mono">{u}</dd> })}
                <dt class="text-slate-500">"Asked at"</dt><dd>{c.created_at.clone()}</dd>
                {c.decided_by.clone().map(|d| view! {
                    <dt class="text-slate-500">"Decided by"</dt>
                    <dd>{d} " at " {c.decided_at.clone().unwrap_or_default()}</dd>
                })}
                {c.reason.clone().map(|r| view! { <dt class="text-slate-500">"Reason"</dt><dd>{r}</dd> })}
            </dl>
            <pre class="mt-3 overflow-x-auto rounded bg-slate-50 p-3 text-xs" data-testid="confirmation-arguments">{c.arguments.clone()}</pre>
            {match (pending, action) {
                (true, Some(a)) => Some(view! { <DecisionForm id=c.id.clone() action=a/> }),
                _ => None,
            }}
        </article>
    }
}

/// The project webhook: where held calls are announced, signed with a vault secret.
#[component]
fn Webhook(w: WebhookData, save: ServerAction<SaveWebhook>) -> impl IntoView {
    let current = w.secret_ref.clone();
    let deliveries = w.deliveries.clone();
    let none = deliveries.is_empty();
    let rows = deliveries
        .into_iter()
        .map(|d| {
            let outcome = match (d.response_status, &d.error) {
                (Some(code), None) => format!("{code}"),
                (_, Some(e)) => e.clone(),
                _ => String::new(),
            };
            let state = d.status.as_str();
            view! {
                <tr class="border-t border-slate-100" data-testid="delivery" data-status=state>
                    <td class="py-1 pr-3 text-xs text-slate-600">{d.at}</td>
                    <td class="py-1 pr-3 font-mono text-xs">{d.subject_id}</td>
                    <td class="py-1 pr-3 text-xs">{d.status.as_str()}</td>
                    <td class="py-1 pr-3 text-xs">{format!("{} attempt(s)", d.attempts)}</td>
                    <td class="py-1 text-xs text-slate-600">{outcome}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class=format!("{CARD} mt-8") data-testid="webhook">
            <h2 class="mb-1 text-base font-semibold">"Webhook"</h2>
            <p class="mb-3 text-sm text-slate-600">
                "When a call is held, workbench POSTs it (event confirmation.created) to this URL, signed under the vault secret you choose: Workbench-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">; refuse a t more than 300 s old. The old sha256=<hex> value is sent as Workbench-Signature-Legacy until 2027-03-31."
            </p>
            {if w.can_manage {
                view! {
                    <ActionForm action=save attr:class="grid grid-cols-3 items-end gap-3">
                        <div class="col-span-2">
                            <label for="webhook-url" class=LABEL>"URL (empty: no webhook)"</label>
                            <input id="webhook-url" name="url" type="url" maxlength="2048" value=w.url.clone() class=INPUT placeholder="https://chat.example.com/hooks/approvals"/>
                        </div>
                        <div>
                            <label for="webhook-secret" class=LABEL>"Signing secret (vault)"</label>
                            <select id="webhook-secret" name="secret_ref" class=INPUT>
                                <option value="">"Choose a secret"</option>
                                {w.secrets.iter().map(|name| {
                                    let selected = *name == current;
                                    view! { <option value=name.clone() selected=selected>{name.clone()}</option> }
                                }).collect_view()}
                            </select>
                        </div>
                        <div class="col-span-3 text-right"><button type="submit" class=BUTTON>"Save webhook"</button></div>
                    </ActionForm>
                }.into_any()
            } else {
                view! { <p class="text-sm" data-testid="webhook-url">{if w.url.is_empty() { "No webhook is set.".to_owned() } else { w.url.clone() }}</p> }.into_any()
            }}
            <h3 class="mb-1 mt-4 text-sm font-semibold">"Recent deliveries"</h3>
            {if none {
                view! { <p class="text-sm text-slate-600">"None yet."</p> }.into_any()
            } else {
                view! { <table class="w-full text-left"><tbody>{rows}</tbody></table> }.into_any()
            }}
        </section>
    }
}

#[component]
pub fn Confirmations() -> impl IntoView {
    let decide = ServerAction::<DecideConfirmation>::new();
    let save_webhook = ServerAction::<SaveWebhook>::new();
    let data = reloaded_after!(confirmations_page(); decide);
    let webhook = reloaded_after!(webhook_settings(); save_webhook, decide);
    view! {
        <Page current="/confirmations" title="Confirmations"
            subtitle="Calls an agent's policy holds until a person approves them. Approving runs the call once, as the key that made it; the agent's identical call then gets the outcome.">
            <ActionError value=decide.value()/>
            <Loaded data=data content=move |d| {
                let now = d.now_ms;
                let empty = d.pending.is_empty();
                let pending = d.pending.into_iter().map(|c| view! { <Held c now_ms=now action=Some(decide)/> }).collect_view();
                let history = d.history.into_iter().map(|c| view! { <Held c now_ms=now action=None/> }).collect_view();
                view! {
                    <h2 class="mb-3 text-lg font-semibold">"Waiting"</h2>
                    {if empty {
                        view! { <p class="mb-6 text-sm text-slate-600" data-testid="no-pending">"Nothing is waiting for a decision."</p> }.into_any()
                    } else {
                        view! { <div data-testid="pending">{pending}</div> }.into_any()
                    }}
                    <h2 class="mb-3 mt-8 text-lg font-semibold">"History"</h2>
                    <div data-testid="history">{history}</div>
                }.into_any()
            }/>
            <ActionError value=save_webhook.value()/>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match webhook.await {
                        Err(error) => view! { <LoadError error/> }.into_any(),
                        Ok(None) => ().into_any(),
                        Ok(Some(w)) => view! { <Webhook w save=save_webhook/> }.into_any(),
                    }
                })}
            </Transition>
        </Page>
    }
}

#[component]
pub fn ConfirmationPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let decide = ServerAction::<DecideConfirmation>::new();
    let data = Resource::new(
        move || (id(), decide.version().get()),
        |(id, _)| confirmation_page(id),
    );
    view! {
        <Page current="/confirmations" title="Confirmation" heading="Confirm a call"
            subtitle="An agent asked to run this tool; its policy needs a person to say yes first.">
            <ActionError value=decide.value()/>
            <Loaded data=data content=move |(c, now)| view! { <Held c now_ms=now action=Some(decide)/> }.into_any()/>
            <a href="/confirmations" class="text-sm text-indigo-600 underline">"All confirmations"</a>
        </Page>
    }
}
