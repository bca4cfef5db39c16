//! Connections: the integrations a person can connect, the connect-link page agents send
//! people to (/connect/<id>), and the page the OAuth callback lands on.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{
    connections_page, open_connect_link, AccountState, ConnectView, Disconnect, StartConnection,
    SubmitConnection,
};
use crate::components::{
    ActionError, Centered, Loaded, Page, BUTTON, BUTTON_DANGER, CARD, INPUT, LABEL,
};

fn status_class(status: AccountState) -> &'static str {
    match status {
        AccountState::Connected | AccountState::NoAccountNeeded => "text-emerald-700",
        AccountState::Expired => "text-amber-700",
        AccountState::Revoked | AccountState::NotConnected => "text-slate-500",
    }
}

#[component]
pub fn ConnectionsPage() -> impl IntoView {
    let start = ServerAction::<StartConnection>::new();
    let disconnect = ServerAction::<Disconnect>::new();
    let data = reloaded_after!(connections_page(); disconnect);
    view! {
        <Page current="/connections" title="Connections"
            subtitle="Accounts your agents act as. Credentials are encrypted and never shown.">
            <ActionError value=start.value()/>
            <ActionError value=disconnect.value()/>
            <Loaded data=data content=move |list| view! {
                <ul class="grid max-w-4xl gap-4 md:grid-cols-2">
                    {list.into_iter().map(|i| {
                        let connected = i.status == AccountState::Connected;
                        let needs = i.status != AccountState::NoAccountNeeded;
                        let (name2, display2) = (i.name.clone(), i.display_name.clone());
                        view! {
                            <li class=format!("{CARD} !p-4") data-testid="integration-row">
                                <div class="flex items-center gap-3">
                                    {match i.logo.clone() {
                                        Some(src) => view! { <img src=src alt="" class="h-8 w-8"/> }.into_any(),
                                        // Custom apps usually have no logo: a monogram keeps the rows aligned.
                                        None => view! {
                                            <span aria-hidden="true" class="flex h-8 w-8 items-center justify-center rounded-md bg-slate-200 text-sm font-semibold text-slate-600">
                                                {i.display_name.chars().next().map(|c| c.to_uppercase().to_string()).unwrap_or_default()}
                                            </span>
                                        }.into_any(),
                                    }}
                                    <div class="flex-1">
                                        <p class="font-medium">{i.display_name.clone()}</p>
                                        <p class="text-xs text-slate-500">{format!("{} · {} {} · {}", i.name, i.tool_count, if i.tool_count == 1 { "tool" } else { "tools" }, i.auth_type)}</p>
                                    </div>
                                    <span class=format!("text-sm {}", status_class(i.status)) data-testid="integration-status">{i.status.as_str()}</span>
                                </div>
                                <p class="mt-2 text-sm text-slate-600">{i.description.clone()}</p>
                                {needs.then(|| view! {
                                    <div class="mt-3 flex gap-2">
                                        <ActionForm action=start>
                                            <input type="hidden" name="integration" value=i.name.clone()/>
                                            <button type="submit" class=BUTTON aria-label=format!("Connect {}", i.display_name)>
                                                {if connected { "Reconnect" } else { "Connect" }}
                                            </button>
                                        </ActionForm>
                                        {connected.then(|| view! {
                                            <ActionForm action=disconnect>
                                                <input type="hidden" name="integration" value=name2.clone()/>
                                                <button type="submit" class=BUTTON_DANGER aria-label=format!("Disconnect {display2}")>"Disconnect"</button>
                                            </ActionForm>
                                        })}
                                    </div>
                                })}
                            </li>
                        }
                    }).collect_view()}
                </ul>
            }.into_any()/>
        </Page>
    }
}

#[component]
fn NotFoundCard() -> impl IntoView {
    view! {
        <h1 class="text-lg font-semibold">"Not found"</h1>
        <p class="mt-2 text-sm text-slate-600" data-testid="connect-not-found">
            "This connection link does not exist, has expired, or belongs to someone else. Ask your agent for a new one."
        </p>
    }
}

#[component]
fn SecretForm(
    id: String,
    display_name: String,
    auth_type: String,
    label: String,
    help: Option<String>,
    submit: ServerAction<SubmitConnection>,
) -> impl IntoView {
    let done = move || submit.value().get().and_then(Result::ok);
    let form = view! {
        <h1 class="text-lg font-semibold">{format!("Connect {display_name}")}</h1>
        {help.map(|h| view! { <p class="mt-2 text-sm text-slate-600">{h}</p> })}
        <ActionForm action=submit attr:class="mt-4 space-y-4" attr:autocomplete="off">
            <input type="hidden" name="id" value=id/>
            <div>
                <label for="secret" class=LABEL>{label}</label>
                <input id="secret" name="value" type="password" required autocomplete="off" class=INPUT data-auth-type=auth_type/>
            </div>
            <button type="submit" class=format!("{BUTTON} w-full justify-center")>"Connect"</button>
            <ActionError value=submit.value()/>
        </ActionForm>
    };
    view! {
        <div class:hidden=move || done().is_some()>{form}</div>
        {move || done().map(|name| view! {
            <h1 class="text-lg font-semibold" data-testid="connect-done">{format!("{name} is connected")}</h1>
            <p class="mt-2 text-sm text-slate-600">"You can close this window; your agent continues on its own."</p>
        })}
    }
}

/// /connect/<id>: where an agent's connect link leads.
#[component]
pub fn Connect() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let view_data = Resource::new(id, open_connect_link);
    let submit = ServerAction::<SubmitConnection>::new();
    view! {
        <Title text="Connect"/>
        <Centered>
            <Loaded data=view_data content=move |value| match value {
                ConnectView::NotFound => view! { <NotFoundCard/> }.into_any(),
                ConnectView::Redirecting { display_name } => view! {
                    <p class="text-sm">"Taking you to " {display_name} " to approve the connection…"</p>
                }.into_any(),
                ConnectView::Connected { display_name } => view! {
                    <h1 class="text-lg font-semibold" data-testid="connect-done">{format!("{display_name} is connected")}</h1>
                    <p class="mt-2 text-sm text-slate-600">"You can close this window; your agent continues on its own."</p>
                }.into_any(),
                ConnectView::Form { display_name, auth_type, label, help } => view! {
                    <SecretForm id=id() display_name auth_type label help submit/>
                }.into_any(),
            }/>
        </Centered>
    }
}

/// Where the OAuth callback lands: success or a reason.
#[component]
pub fn Connected() -> impl IntoView {
    let query = use_query_map();
    let ok = move || query.read().get("integration");
    let error = move || query.read().get("error");
    view! {
        <Title text="Connection"/>
        <Centered>
            {move || match (ok(), error()) {
                (Some(name), _) => view! {
                    <h1 class="text-lg font-semibold" data-testid="connect-done">{format!("{name} is connected")}</h1>
                    <p class="mt-2 text-sm text-slate-600">"You can close this window; your agent continues on its own."</p>
                }.into_any(),
                (None, Some(why)) => view! {
                    <h1 class="text-lg font-semibold">"The connection did not complete"</h1>
                    <p class="mt-2 text-sm text-slate-600" data-testid="connect-error">{why}</p>
                }.into_any(),
                _ => view! { <NotFoundCard/> }.into_any(),
            }}
        </Centered>
    }
}
