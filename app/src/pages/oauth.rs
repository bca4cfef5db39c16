//! MCP client authorization: the consent page an MCP client sends a person to
//! (`/oauth/authorize`: who asks, where the person goes back, what the client gets), and the
//! MCP clients page listing the clients this person approved, with revoke.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{
    authorized_clients, oauth_consent, AuthorizeQuery, AuthorizedClientView, ClientKind,
    ConsentView, OauthDecide, RevokeAuthorizedClient,
};
use crate::components::{
    ActionError, Centered, Loaded, Page, RowAction, Table, BUTTON, CARD, LABEL,
};

const FIELDS: [&str; 8] = [
    "response_type",
    "client_id",
    "redirect_uri",
    "code_challenge",
    "code_challenge_method",
    "state",
    "resource",
    "scope",
];

#[component]
pub fn OAuthAuthorize() -> impl IntoView {
    let query = use_query_map();
    let request = move || {
        let q = query.read();
        let get = |k: &str| q.get(k);
        AuthorizeQuery {
            response_type: get("response_type"),
            client_id: get("client_id"),
            redirect_uri: get("redirect_uri"),
            code_challenge: get("code_challenge"),
            code_challenge_method: get("code_challenge_method"),
            state: get("state"),
            resource: get("resource"),
            scope: get("scope"),
        }
    };
    let consent = Resource::new(request, oauth_consent);
    let decide = ServerAction::<OauthDecide>::new();
    view! {
        <Title text="Authorize an MCP client"/>
        <Centered>
            <Loaded data=consent content=move |value| match value {
                ConsentView::Refused { reason } => view! {
                    <h1 class="text-lg font-semibold">"This request cannot be approved"</h1>
                    <p class="mt-2 text-sm text-slate-700" data-testid="oauth-refused">{reason}</p>
                    <p class="mt-4 text-xs text-slate-500">"Nothing was shared. Return to the application and try connecting again."</p>
                }.into_any(),
                ConsentView::Ask { client_name, client_id, redirect_host, kind, client_uri, policies, admin, project_name, tool_set } => {
                    let reach = match &tool_set {
                        Some(slug) => format!("act as you on the tool set {slug} (/mcp/sets/{slug}) with your project's policies"),
                        None => "act as you on /mcp with your project's policies".to_owned(),
                    };
                    let hidden = {
                        let q = query.read();
                        FIELDS.iter().map(|k| view! { <input type="hidden" name=*k value=q.get(k).unwrap_or_default()/> }).collect_view()
                    };
                    let hidden_deny = {
                        let q = query.read();
                        FIELDS.iter().map(|k| view! { <input type="hidden" name=*k value=q.get(k).unwrap_or_default()/> }).collect_view()
                    };
                    let identity = if kind == ClientKind::Metadata { format!("identified by {client_id}") } else { "registered itself with workbench".to_string() };
                    let chooser = admin.then(|| {
                        let options = policies.into_iter().map(|(id, name)| view! { <option value=id>{name}</option> }).collect_view();
                        view! {
                            <label for="oauth-policy" class=format!("{LABEL} mt-4")>"Policy the client acts under"</label>
                            <select id="oauth-policy" name="policy_id" class="block w-full rounded-md border border-slate-300 px-3 py-2 text-sm">
                                <option value="">"project default"</option>
                                {options}
                            </select>
                            <label for="oauth-rate-limit" class=format!("{LABEL} mt-4")>"Calls per minute (empty: no limit)"</label>
                            <input id="oauth-rate-limit" name="rate_limit_per_minute" type="number" min="1" inputmode="numeric" class="block w-full rounded-md border border-slate-300 px-3 py-2 text-sm"/>
                        }
                    });
                    view! {
                        <h1 class="text-lg font-semibold" data-testid="oauth-client-name">{format!("{client_name} wants to use workbench")}</h1>
                        <p class="mt-1 text-xs text-slate-500">{identity}{client_uri.map(|u| format!(" · {u}"))}</p>
                        <div class="mt-4 rounded-md bg-slate-50 p-3 text-sm text-slate-700">
                            <p>"If you approve, it may "<strong data-testid="oauth-reach">{reach}</strong>" in "{project_name}": find and run the tools you may use there, until you revoke it on the MCP clients page."</p>
                            <p class="mt-2">"You will be sent back to "<strong data-testid="oauth-redirect-host">{redirect_host}</strong>"."</p>
                        </div>
                        <ActionForm action=decide attr:class="mt-4">
                            {hidden}
                            <input type="hidden" name="decision" value="approve"/>
                            {chooser}
                            <button type="submit" class=format!("{BUTTON} mt-4 w-full justify-center") data-testid="oauth-approve">"Approve"</button>
                        </ActionForm>
                        <ActionForm action=decide attr:class="mt-2">
                            {hidden_deny}
                            <input type="hidden" name="decision" value="deny"/>
                            <button type="submit" class="w-full rounded-md border border-slate-300 px-4 py-2 text-sm text-slate-700 hover:bg-slate-50" data-testid="oauth-deny">"Deny"</button>
                        </ActionForm>
                        <ActionError value=decide.value()/>
                    }.into_any()
                }
            }/>
        </Centered>
    }
}

#[component]
fn ClientRow(
    client: AuthorizedClientView,
    revoke: ServerAction<RevokeAuthorizedClient>,
) -> impl IntoView {
    let label = format!("Revoke {}", client.client_name);
    view! {
        <tr class="border-t border-slate-100" data-testid="authorized-client-row">
            <td class="py-2 pr-4 font-medium">{client.client_name.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{client.redirect_host.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{client.policy.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{client.approved.clone()}</td>
            <td class="py-2 pr-4 text-slate-600">{client.last_used.clone().unwrap_or_else(|| "never".into())}</td>
            <td class="py-2 text-right">
                <RowAction action=revoke id=client.id.clone() label="Revoke" aria_label=label/>
            </td>
        </tr>
    }
}

#[component]
pub fn McpClients() -> impl IntoView {
    let revoke = ServerAction::<RevokeAuthorizedClient>::new();
    let list = reloaded_after!(authorized_clients(); revoke);
    view! {
        <Page current="/mcp-clients" title="MCP clients"
            subtitle="MCP clients you let act as you on /mcp. Revoking one ends its access at once.">
            <ActionError value=revoke.value()/>
            <Loaded data=list content=move |value| match value {
                clients if clients.is_empty() => view! {
                    <section class=CARD><p class="text-sm text-slate-600">"No MCP client is authorized. Clients that sign in with OAuth appear here once you approve them."</p></section>
                }.into_any(),
                clients => {
                    let rows = clients.into_iter().map(|client| view! { <ClientRow client revoke/> }).collect_view();
                    view! {
                        <section class=CARD>
                            <Table headers=&["Client", "Returns to", "Policy", "Approved", "Last used", ""]>{rows}</Table>
                        </section>
                    }.into_any()
                }
            }/>
        </Page>
    }
}
