//! API keys: create (the secret is shown once), list with last use and policy (admins attach
//! one), revoke.

use leptos::prelude::*;

use crate::api::{
    api_keys_page, ApiKeyView, CreateApiKey, NewApiKeyView, RevokeApiKey, SetKeyPolicy,
};
use crate::components::{ActionError, Loaded, Page, RowAction, Table, BUTTON, CARD, INPUT, LABEL};

#[component]
fn NewKeyNotice(key: NewApiKeyView) -> impl IntoView {
    view! {
        <div role="status" class="mb-6 rounded-lg border border-emerald-300 bg-emerald-50 p-4" data-testid="new-key">
            <p class="text-sm font-medium text-emerald-900">
                "New key " <strong>{key.name}</strong> ". Copy it now: it will not be shown again."
            </p>
            <input
                readonly
                value=key.secret
                class="mt-2 w-full rounded border border-emerald-300 bg-white px-3 py-2 font-mono text-sm"
                data-testid="new-key-secret"
                aria-label="New API key"
            />
        </div>
    }
}

#[component]
fn KeyRow(
    key: ApiKeyView,
    revoke: ServerAction<RevokeApiKey>,
    set_policy: ServerAction<SetKeyPolicy>,
    policies: Vec<(String, String)>,
    can_manage: bool,
) -> impl IntoView {
    let revoked = key.revoked.clone();
    let current = key.policy_id.clone().unwrap_or_default();
    let policy_cell = if can_manage && revoked.is_none() {
        let options = policies
            .iter()
            .map(|(id, name)| view! { <option value=id.clone() selected=*id == current>{name.clone()}</option> })
            .collect_view();
        let (key_id, label) = (key.id.clone(), format!("Policy of {}", key.name));
        view! {
            <ActionForm action=set_policy attr:class="flex items-center gap-2">
                <input type="hidden" name="key_id" value=key_id/>
                <select name="policy_id" class="rounded border border-slate-300 px-2 py-1 text-xs" aria-label=label>
                    <option value="" selected=current.is_empty()>"project default"</option>
                    {options}
                </select>
                <button type="submit" class="text-xs text-indigo-700 underline">"Set"</button>
            </ActionForm>
        }
        .into_any()
    } else {
        let label = policies
            .iter()
            .find(|(id, _)| *id == current)
            .map(|(_, n)| n.clone())
            .or(key.policy_id.clone())
            .unwrap_or_else(|| "project default".into());
        view! { <span class="text-xs text-slate-600">{label}</span> }.into_any()
    };
    view! {
        <tr class="border-t border-slate-100" data-testid="api-key-row">
            <td class="py-2 pr-4 font-medium">{key.name.clone()}</td>
            <td class="py-2 pr-4 font-mono text-xs text-slate-600">{key.prefix.clone()} "…"</td>
            <td class="py-2 pr-4 text-slate-600">{key.owner.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{key.created.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{key.last_used.clone().unwrap_or_else(|| "never".into())}</td>
            <td class="py-2 pr-4" data-testid="api-key-policy">{policy_cell}</td>
            <td class="py-2 text-right">
                {match revoked {
                    Some(at) => view! { <span class="text-xs text-slate-500">"revoked " {at}</span> }.into_any(),
                    None => view! {
                        <RowAction action=revoke id=key.id.clone() label="Revoke" aria_label=format!("Revoke {}", key.name)/>
                    }.into_any(),
                }}
            </td>
        </tr>
    }
}

#[component]
pub fn ApiKeys() -> impl IntoView {
    let create = ServerAction::<CreateApiKey>::new();
    let revoke = ServerAction::<RevokeApiKey>::new();
    let set_policy = ServerAction::<SetKeyPolicy>::new();
    let page = reloaded_after!(api_keys_page(); create, revoke, set_policy);
    let fresh = move || create.value().get().and_then(Result::ok);
    view! {
        <Page current="/api-keys" title="API keys"
            subtitle="Keys let agents (/mcp) and programs (/v1) act as you in this project.">
            <section class=format!("{CARD} mb-6 max-w-xl")>
                <ActionForm action=create attr:class="flex items-end gap-3">
                    <div class="flex-1">
                        <label for="key-name" class=LABEL>"Name"</label>
                        <input id="key-name" name="name" type="text" required maxlength="100" placeholder="e.g. claude-desktop" class=INPUT/>
                    </div>
                    <button type="submit" class=BUTTON>"Create key"</button>
                </ActionForm>
                <ActionError value=create.value()/>
                <ActionError value=revoke.value()/>
                <ActionError value=set_policy.value()/>
            </section>
            {move || fresh().map(|key| view! { <NewKeyNotice key/> })}
            <Loaded data=page content=move |data| {
                let flash = data.just_created.filter(|_| fresh().is_none());
                let empty = data.keys.is_empty();
                let (policies, can_manage) = (data.policies.clone(), data.can_manage_policies);
                let rows = data.keys.into_iter().map(|key| view! { <KeyRow key revoke set_policy policies=policies.clone() can_manage/> }).collect_view();
                view! {
                    {flash.map(|key| view! { <NewKeyNotice key/> })}
                    <section class=CARD>
                        {if empty {
                            view! { <p class="text-sm text-slate-600">"No keys yet."</p> }.into_any()
                        } else {
                            view! {
                                <Table headers=&["Name", "Key", "Owner", "Created", "Last used", "Policy", ""]>{rows}</Table>
                            }.into_any()
                        }}
                    </section>
                }.into_any()
            }/>
        </Page>
    }
}
