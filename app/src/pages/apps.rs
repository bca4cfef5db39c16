//! Apps: the project's own integrations, defined in the plugin format (name, auth, base URL,
//! tools with JSON Schema inputs and request templates). Their tools join the catalog.

use leptos::prelude::*;

use super::app_import::{AppImport, ImportState};
use crate::api::{apps_page, CreateApp, DeleteApp};
use crate::components::{ActionError, AddCard, ListCard, Loaded, Page, RowAction, BUTTON, LABEL};

const EXAMPLE: &str = r#"{
  "name": "status",
  "display_name": "Status page",
  "version": "1.0.0",
  "base_url": "https://status.example.com",
  "auth": { "type": "none" },
  "tools": [{
    "name": "status_get_summary",
    "description": "Get the current status summary.",
    "side_effects": "none",
    "input_schema": { "type": "object", "properties": {} },
    "request": { "method": "GET", "path": "/api/v2/summary.json" }
  }]
}"#;

#[component]
pub fn Apps() -> impl IntoView {
    let create = ServerAction::<CreateApp>::new();
    let delete = ServerAction::<DeleteApp>::new();
    let import = ImportState::new();
    let data = reloaded_after!(apps_page(); create, delete, import.create);
    view! {
        <Page current="/apps" title="Apps"
            subtitle="Your project's own integrations. Their tools appear in search_tools like any plugin's.">
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let redirect_uri = d.redirect_uri.clone();
                view! {
                    {can_manage.then(|| view! { <AppImport state=import/> })}
                    <AddCard show=can_manage width="max-w-3xl">
                        <ActionForm action=create attr:class="space-y-3">
                            <label for="definition" class=LABEL>"Definition (JSON)"</label>
                            <textarea id="definition" name="definition" rows="14" required class="block w-full rounded-md border border-slate-300 p-3 font-mono text-xs">{EXAMPLE}</textarea>
                            <p class="text-xs text-slate-500">
                                "The plugin format: auth "<code>"none"</code>", "<code>"api_key"</code>" or "<code>"cookie"</code>" (with a "<code>"probe"</code>" request), or "<code>"oauth2"</code>" with "<code>"client_id"</code>" and "<code>"client_secret_vault"</code>", the name of a Vault secret holding the client secret. Redirect URI to register at the provider: "<code data-testid="redirect-uri">{redirect_uri}</code>". Tools take a JSON Schema input and a request template: "<code>"{arg}"</code>" in path and query, "<code>"\"$arg\""</code>" in the body."
                            </p>
                            <button type="submit" class=BUTTON>"Create app"</button>
                        </ActionForm>
                        <ActionError value=create.value()/>
                        <ActionError value=delete.value()/>
                    </AddCard>
                    <ListCard empty=d.apps.is_empty() width="max-w-3xl" empty_text="No apps yet.">
                            {d.apps.iter().map(|a| view! {
                                <li class="py-3" data-testid="app-row">
                                    <div class="flex items-center justify-between">
                                        <div>
                                            <p class="font-medium">{a.display_name.clone()} <span class="font-mono text-xs text-slate-500">{format!(" {} · {}", a.name, a.id)}</span></p>
                                            <p class="text-xs text-slate-500">{format!("{} · auth {} · {}", a.base_url, a.auth_type, a.created_at)}</p>
                                        </div>
                                        {can_manage.then(|| view! {
                                            <RowAction action=delete id=a.id.clone() label="Delete" aria_label=format!("Delete {}", a.name)/>
                                        })}
                                    </div>
                                    <p class="mt-1 font-mono text-xs text-slate-600">{a.tools.join(", ")}</p>
                                    {a.load_error.clone().map(|e| view! {
                                        <p class="mt-1 text-xs text-red-700" role="alert" data-testid="app-load-error">{format!("Not loaded: {e}. Its tools are unavailable; delete the app and create it again with a fixed definition.")}</p>
                                    })}
                                </li>
                            }).collect_view()}
                    </ListCard>
                }.into_any()
            }/>
        </Page>
    }
}
