//! Sign-in (admins): the project's identity providers with the redirect URI to register at
//! each, how their groups map to roles and policies, and a preview of what a person with some
//! groups would get. Providers are registered over REST or in the configuration file.

use leptos::prelude::*;

use crate::api::{sso_page, SsoPreview};
use crate::components::{ActionError, Loaded, Page, BUTTON, CARD, INPUT, LABEL};

#[component]
fn PreviewForm(slug: String) -> impl IntoView {
    let action = ServerAction::<SsoPreview>::new();
    view! {
        <ActionForm action=action attr:class="mt-4 flex items-end gap-2">
            <input type="hidden" name="slug" value=slug/>
            <div class="grow">
                <label class=LABEL>"Preview: a person in the groups"</label>
                <input name="groups" type="text" class=INPUT placeholder="eng, contractors" data-testid="sso-preview-groups"/>
            </div>
            <button type="submit" class=BUTTON data-testid="sso-preview">"Preview"</button>
        </ActionForm>
        <p class="mt-2 text-sm text-slate-800" data-testid="sso-preview-result">
            {move || action.value().get().and_then(|r| r.ok())}
        </p>
        <ActionError value=action.value()/>
    }
}

#[component]
pub fn SsoSettings() -> impl IntoView {
    let data = Resource::new(|| (), |_| sso_page());
    view! {
        <Page current="/sso" title="Sign-in" heading="Sign-in"
            subtitle="Identity providers people of this project sign in with, and what their groups give them. Register providers with PUT /v1/sso/providers/{slug} or in the configuration file.">
            <Loaded data=data content=move |d| {
                let policy_name = {
                    let policies = d.policies.clone();
                    move |id: &Option<String>| match id {
                        Some(id) => policies.iter().find(|(p, _)| p == id).map(|(_, n)| n.clone()).unwrap_or_else(|| id.clone()),
                        None => "no cap".to_owned(),
                    }
                };
                let passwords = if d.password_sign_in {
                    "Password sign-in is on."
                } else {
                    "Password sign-in is off: only break-glass accounts use passwords."
                };
                let empty = d.providers.is_empty();
                let cards = d.providers.into_iter().map(|p| {
                    let rows = p.mappings.iter().map(|m| view! {
                        <tr data-testid="sso-mapping">
                            <td class="py-1 pr-4 font-mono">{m.group.clone()}</td>
                            <td class="py-1 pr-4">{m.role.as_str()}</td>
                            <td class="py-1">{policy_name(&m.policy_id)}</td>
                        </tr>
                    }).collect_view();
                    let fallback = match p.default_role {
                        Some(r) => format!("Anyone else: {} ({})", r.as_str(), policy_name(&p.default_policy_id)),
                        None => "Anyone else cannot sign in.".to_owned(),
                    };
                    view! {
                        <section class=format!("{CARD} max-w-3xl") data-testid="sso-provider">
                            <h2 class="text-base font-semibold">{p.name.clone()}" "<span class="font-mono text-sm text-slate-500">{p.slug.clone()}</span></h2>
                            <dl class="mt-2 grid grid-cols-[10rem_1fr] gap-y-1 text-sm">
                                <dt class="text-slate-500">"Issuer"</dt><dd class="font-mono break-all">{p.issuer.clone()}</dd>
                                <dt class="text-slate-500">"Client id"</dt><dd class="font-mono">{p.client_id.clone()}</dd>
                                <dt class="text-slate-500">"Redirect URI"</dt><dd class="font-mono break-all" data-testid="sso-redirect-uri">{p.redirect_uri.clone()}</dd>
                                <dt class="text-slate-500">"Groups claim"</dt><dd class="font-mono">{p.groups_claim.clone()}</dd>
                                <dt class="text-slate-500">"Checked again"</dt><dd>{format!("every {} minutes (the session ends; people sign in again)", p.recheck_minutes)}</dd>
                            </dl>
                            <h3 class="mt-4 text-sm font-semibold">"Groups (the first match decides)"</h3>
                            <table class="mt-1 text-sm">
                                <thead><tr class="text-left text-slate-500"><th class="pr-4">"Group"</th><th class="pr-4">"Role"</th><th>"Policy"</th></tr></thead>
                                <tbody>{rows}</tbody>
                            </table>
                            <p class="mt-2 text-sm text-slate-600">{fallback}</p>
                            <PreviewForm slug=p.slug.clone()/>
                        </section>
                    }
                }).collect_view();
                view! {
                    <p class="mb-4 text-sm text-slate-600" data-testid="password-sign-in">{passwords}</p>
                    {empty.then(|| view! { <p class="text-sm text-slate-600">"No identity provider yet: people sign in with passwords."</p> })}
                    <div class="space-y-4">{cards}</div>
                }.into_any()
            }/>
        </Page>
    }
}
