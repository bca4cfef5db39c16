//! Policies: the project's tool allowlists (D14). Admins create and edit them (one pattern per
//! line: a tool name or a prefix ending in `*`), pick the default, delete unused ones, and
//! preview what a chosen key may run, must have confirmed, or is denied, with the deciding rule.
//! Pattern lists are checked as they are typed (the server's own rules, so the page and the API
//! never disagree); without JavaScript the same check answers on save.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::{
    check_patterns, policies_page, policy_preview, DeletePolicy, Mode, PatternCheck, PolicyItem,
    SavePolicy,
};
use crate::components::{
    ActionError, AddCard, LoadError, Loaded, Page, RowAction, BUTTON, CARD, INPUT, LABEL,
};

const TEXTAREA: &str = "block w-full rounded-md border border-slate-300 p-2 font-mono text-xs";

/// One pattern list, checked as it is typed: problems that would refuse the save, and valid
/// patterns no tool matches.
#[component]
fn PatternField(
    id: String,
    name: &'static str,
    label: &'static str,
    value: String,
    placeholder: &'static str,
) -> impl IntoView {
    let check = Action::new(|text: &String| {
        let text = text.clone();
        async move { check_patterns(text).await }
    });
    let result = move || check.value().get().and_then(Result::ok).unwrap_or_default();
    let invalid = move || !result().problems.is_empty();
    view! {
        <div>
            <label for=id.clone() class=LABEL>{label}</label>
            <textarea
                id=id
                name=name
                rows="5"
                class=TEXTAREA
                placeholder=placeholder
                aria-invalid=move || invalid().to_string()
                on:input=move |ev| { check.dispatch(event_target_value(&ev)); }
            >{value}</textarea>
            <div aria-live="polite" data-testid="pattern-check">
                {move || {
                    let PatternCheck { problems, unmatched } = result();
                    view! {
                        {problems.into_iter().map(|p| view! { <p class="mt-1 text-xs text-red-700" data-testid="pattern-problem">{p}</p> }).collect_view()}
                        {unmatched.into_iter().map(|p| view! { <p class="mt-1 text-xs text-amber-700" data-testid="pattern-unmatched">{format!("{p:?} matches no tool of this project yet")}</p> }).collect_view()}
                    }
                }}
            </div>
        </div>
    }
}

/// The create or edit form; `policy` is the one being edited.
#[component]
fn PolicyForm(policy: Option<PolicyItem>, save: ServerAction<SavePolicy>) -> impl IntoView {
    let p = policy.clone();
    let key = p
        .as_ref()
        .map(|p| p.id.clone())
        .unwrap_or_else(|| "new".into());
    let field = move |name: &str| format!("{name}-{key}");
    let joined = |v: &Option<Vec<String>>| v.clone().unwrap_or_default().join("\n");
    let limits = joined(&p.as_ref().map(|p| p.limits.clone()));
    let (name, mode, allow, deny, confirm, default) = (
        p.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
        p.as_ref().map_or(Mode::Allowlist, |p| p.mode),
        joined(&p.as_ref().map(|p| p.allow.clone())),
        joined(&p.as_ref().map(|p| p.deny.clone())),
        joined(&p.as_ref().map(|p| p.require_confirmation.clone())),
        p.as_ref().is_some_and(|p| p.default),
    );
    view! {
        <ActionForm action=save attr:class="grid grid-cols-3 gap-3" attr:data-testid="policy-form">
            <input type="hidden" name="id" value=policy.as_ref().map(|p| p.id.clone()).unwrap_or_default()/>
            <div class="col-span-2">
                <label for=field("name") class=LABEL>"Name"</label>
                <input id=field("name") name="name" required maxlength="100" value=name class=INPUT/>
            </div>
            <div>
                <label for=field("mode") class=LABEL>"Mode"</label>
                <select id=field("mode") name="mode" class=INPUT>
                    <option value=Mode::Allowlist.as_str() selected=mode == Mode::Allowlist>"allowlist: only listed tools run"</option>
                    <option value=Mode::Open.as_str() selected=mode == Mode::Open>"open: all but denied tools run"</option>
                </select>
            </div>
            <PatternField id=field("allow") name="allow" label="Allow" value=allow placeholder="crm.contact.get\nticket.*"/>
            <PatternField id=field("deny") name="deny" label="Deny (wins)" value=deny placeholder="crm.contact.delete"/>
            <PatternField id=field("confirm") name="require_confirmation" label="Require confirmation" value=confirm placeholder="email.send"/>
            <p class="col-span-3 text-xs text-slate-500">"One pattern per line: a tool name, or a prefix ending in one '*' (ticket.*)."</p>
            <div class="col-span-3">
                <label for=field("limits") class=LABEL>"Rate limits and quotas"</label>
                <textarea id=field("limits") name="limits" rows="3" class=TEXTAREA
                    placeholder="60 calls per minute per key on github.*\n1000 calls per day per user\n100000000 egress bytes per month per project">{limits}</textarea>
                <p class="mt-1 text-xs text-slate-500">"One per line: N calls (or N egress bytes) per second, minute, hour, day or month, per key, user or project, optionally on a tool pattern. A call over any limit answers rate_limited with the seconds to wait."</p>
            </div>
            <label class="col-span-2 flex items-center gap-2 text-sm">
                <input type="checkbox" name="default" value="on" checked=default/>
                "Default: applies to keys without a policy of their own"
            </label>
            <div class="text-right"><button type="submit" class=BUTTON>{if policy.is_some() { "Save" } else { "Create policy" }}</button></div>
        </ActionForm>
    }
}

#[component]
pub fn Policies() -> impl IntoView {
    let save = ServerAction::<SavePolicy>::new();
    let delete = ServerAction::<DeletePolicy>::new();
    let data = reloaded_after!(policies_page(); save, delete);
    let query = use_query_map();
    let key = move || query.read().get("key").unwrap_or_default();
    let preview = Resource::new(key, |k| async move {
        if k.is_empty() {
            Ok(None)
        } else {
            policy_preview(k).await.map(Some)
        }
    });
    view! {
        <Page current="/policies" title="Policies"
            subtitle="Which tools a key may run. Deny wins; in allowlist mode only allowed or confirmation-gated tools run; confirmation-gated calls wait for a person on the Confirmations page.">
            <ActionError value=save.value()/>
            <ActionError value=delete.value()/>
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let keys = d.keys.clone();
                let list = d.policies.into_iter().map(|p| {
                    let id = p.id.clone();
                    let (card_id, delete_id) = (id.clone(), id.clone());
                    let used = if p.keys.is_empty() { "no keys".to_owned() } else { p.keys.join(", ") };
                    view! {
                        <article class=format!("{CARD} mb-4") data-testid="policy" data-id=card_id>
                            <div class="mb-3 flex items-center gap-2">
                                <h2 class="font-semibold">{p.name.clone()}</h2>
                                <span class="font-mono text-xs text-slate-500">{id.clone()}</span>
                                {p.default.then(|| view! { <span class="rounded bg-indigo-50 px-1.5 py-0.5 text-xs font-medium text-indigo-700">"default"</span> })}
                                <span class="ml-auto text-xs text-slate-500">"used by " {used}</span>
                            </div>
                            {if can_manage {
                                view! {
                                    <PolicyForm policy=Some(p.clone()) save/>
                                    <RowAction action=delete id=delete_id label="Delete" class="mt-2 text-right" aria_label=format!("Delete {}", p.name)/>
                                }.into_any()
                            } else {
                                view! {
                                    <p class="text-sm">"mode " <strong>{p.mode.as_str()}</strong></p>
                                    <p class="font-mono text-xs">"allow: " {p.allow.join(", ")}</p>
                                    <p class="font-mono text-xs">"deny: " {p.deny.join(", ")}</p>
                                    <p class="font-mono text-xs">"require_confirmation: " {p.require_confirmation.join(", ")}</p>
                                    <p class="font-mono text-xs" data-testid="policy-limits">"limits: " {p.limits.join("; ")}</p>
                                }.into_any()
                            }}
                        </article>
                    }
                }).collect_view();
                view! {
                    <AddCard show=can_manage>
                        <h2 class="mb-3 text-base font-semibold">"New policy"</h2>
                        <PolicyForm policy=None save/>
                    </AddCard>
                    {list}
                    <section class=format!("{CARD} mt-6")>
                        <h2 class="mb-3 text-base font-semibold">"What would this key see?"</h2>
                        <form method="get" action="/policies" class="flex items-end gap-3">
                            <div class="flex-1">
                                <label for="preview-key" class=LABEL>"API key"</label>
                                <select id="preview-key" name="key" class=INPUT>
                                    <option value="">"Choose a key"</option>
                                    {keys.into_iter().map(|k| {
                                        let selected = k.id == key();
                                        view! { <option value=k.id selected=selected>{k.label}</option> }
                                    }).collect_view()}
                                </select>
                            </div>
                            <button type="submit" class=BUTTON>"Preview"</button>
                        </form>
                    </section>
                }.into_any()
            }/>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match preview.await {
                        Err(error) => view! { <LoadError error/> }.into_any(),
                        Ok(None) => ().into_any(),
                        Ok(Some(pv)) => {
                            let rows = pv.rows.into_iter().map(|r| {
                                let decision = r.decision.as_str();
                                view! {
                                <tr class="border-t border-slate-100" data-testid="preview-row" data-decision=decision>
                                    <td class="py-1 pr-4 font-mono text-xs">{r.tool}</td>
                                    <td class="py-1 pr-4 text-xs">{decision}</td>
                                    <td class="py-1 font-mono text-xs text-slate-500">{r.rule}</td>
                                </tr>
                                }
                            }).collect_view();
                            view! {
                                <section class=format!("{CARD} mt-4") data-testid="preview">
                                    <p class="mb-2 text-sm">"Key " <strong>{pv.key}</strong> " runs under " {pv.policy}</p>
                                    <table class="w-full text-left"><tbody>{rows}</tbody></table>
                                </section>
                            }.into_any()
                        }
                    }
                })}
            </Transition>
        </Page>
    }
}
