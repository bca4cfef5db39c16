//! Tool sets: curated sets of the project's tools, each at its own MCP endpoint where the tools
//! are listed directly (issue 33). Everyone sees each set's endpoint, tools and a client
//! configuration to copy; admins create, edit (tools one per line, `tool` or `tool as name`)
//! and delete them. Descriptions and fixed argument values are kept on edit and set over REST or
//! `workbench config`.

use leptos::prelude::*;

use crate::api::{tool_sets_page, DeleteToolSet, SaveToolSet, ToolSetItem};
use crate::components::{
    ActionError, AddCard, Loaded, Page, RowAction, BUTTON, CARD, INPUT, LABEL,
};

const TEXTAREA: &str = "block w-full rounded-md border border-slate-300 p-2 font-mono text-xs";

/// What an MCP client's configuration for the set looks like (the key is the reader's own).
fn client_config(set: &ToolSetItem) -> String {
    let config = serde_json::json!({
        "mcpServers": {
            set.slug.clone(): {
                "type": "http",
                "url": set.endpoint,
                "headers": { "Authorization": "Bearer <an API key; best one limited to this set>" }
            }
        }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// The create or edit form; `set` is the one being edited.
#[component]
fn SetForm(set: Option<ToolSetItem>, save: ServerAction<SaveToolSet>) -> impl IntoView {
    let key = set
        .as_ref()
        .map(|s| s.id.clone())
        .unwrap_or_else(|| "new".into());
    let field = move |name: &str| format!("{name}-{key}");
    let tools = set
        .as_ref()
        .map(|s| {
            s.tools
                .iter()
                .map(|t| {
                    if t.name == t.tool {
                        t.tool.clone()
                    } else {
                        format!("{} as {}", t.tool, t.name)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let editing = set.is_some();
    view! {
        <ActionForm action=save attr:class="grid grid-cols-3 gap-3" attr:data-testid="tool-set-form">
            <input type="hidden" name="id" value=set.as_ref().map(|s| s.id.clone()).unwrap_or_default()/>
            <div>
                <label for=field("slug") class=LABEL>"Slug (its address)"</label>
                <input id=field("slug") name="slug" required maxlength="48" pattern="[a-z0-9]([a-z0-9-]*[a-z0-9])?"
                    readonly=editing value=set.as_ref().map(|s| s.slug.clone()).unwrap_or_default() class=INPUT placeholder="support"/>
            </div>
            <div class="col-span-2">
                <label for=field("name") class=LABEL>"Name"</label>
                <input id=field("name") name="name" required maxlength="100" value=set.as_ref().map(|s| s.name.clone()).unwrap_or_default() class=INPUT placeholder="Support desk"/>
            </div>
            <div class="col-span-3">
                <label for=field("description") class=LABEL>"Description (the endpoint's instructions to the model)"</label>
                <input id=field("description") name="description" maxlength="4000" value=set.as_ref().map(|s| s.description.clone()).unwrap_or_default() class=INPUT/>
            </div>
            <div class="col-span-3">
                <label for=field("tools") class=LABEL>"Tools"</label>
                <textarea id=field("tools") name="tools" rows="6" class=TEXTAREA required placeholder="github.list_issues\nzendesk.ticket_get as get_ticket">{tools}</textarea>
                <p class="mt-1 text-xs text-slate-500">"One per line: a tool's name as the Tools page shows it, optionally followed by " <code>"as"</code> " and the name the set lists it under."</p>
            </div>
            <label class="col-span-3 flex items-start gap-2 text-sm">
                <input type="checkbox" name="prompts_and_resources" value="on" class="mt-1" checked=set.as_ref().is_some_and(|s| s.prompts_and_resources)/>
                <span>"Publish the prompts and resources of its MCP servers"
                    <span class="block text-xs text-slate-500">"The approved prompts and resources of every MCP server the set has a tool of, under the server's prefix; each caller sees those their policy allows (" <code>"prompt:…"</code> ", " <code>"resource:…"</code> ")."</span>
                </span>
            </label>
            <div class="col-span-3 text-right"><button type="submit" class=BUTTON>{if editing { "Save" } else { "Create tool set" }}</button></div>
        </ActionForm>
    }
}

#[component]
pub fn ToolSets() -> impl IntoView {
    let save = ServerAction::<SaveToolSet>::new();
    let delete = ServerAction::<DeleteToolSet>::new();
    let data = reloaded_after!(tool_sets_page(); save, delete);
    view! {
        <Page current="/tool-sets" title="Tool sets"
            subtitle="A tool set is a small MCP endpoint for one job: its tools are listed directly, under the names you choose, and every call still goes through policies, confirmations and the audit log. /mcp keeps its meta-tools over the whole catalog.">
            <ActionError value=save.value()/>
            <ActionError value=delete.value()/>
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let empty = d.sets.is_empty();
                let list = d.sets.into_iter().map(|s| {
                    let config = client_config(&s);
                    let delete_id = s.id.clone();
                    let used = if s.keys.is_empty() { None } else { Some(format!("keys limited to it: {}", s.keys.join(", "))) };
                    let rows = s.tools.iter().map(|t| view! {
                        <tr class="border-t border-slate-100" data-testid="tool-set-tool">
                            <td class="py-1 pr-4 font-mono text-xs">{t.name.clone()}</td>
                            <td class="py-1 pr-4 font-mono text-xs text-slate-500">{t.tool.clone()}</td>
                            <td class="py-1 pr-4 text-xs">{t.description.clone().unwrap_or_default()}</td>
                            <td class="py-1 text-xs text-slate-500">
                                {(!t.fixed.is_empty()).then(|| format!("fixed: {}", t.fixed.join(", ")))}
                                {t.missing.then(|| view! { <span class="text-amber-700">" not in the catalog: left out"</span> })}
                            </td>
                        </tr>
                    }).collect_view();
                    view! {
                        <article class=format!("{CARD} mb-4") data-testid="tool-set" data-slug=s.slug.clone()>
                            <div class="mb-2 flex items-center gap-2">
                                <h2 class="font-semibold">{s.name.clone()}</h2>
                                <span class="ml-auto text-xs text-slate-500">{used}</span>
                            </div>
                            {(!s.description.is_empty()).then(|| view! { <p class="mb-2 text-sm text-slate-600">{s.description.clone()}</p> })}
                            <p class="mb-3 text-sm">"Endpoint: " <code class="font-mono text-xs" data-testid="tool-set-endpoint">{s.endpoint.clone()}</code></p>
                            <table class="mb-3 w-full text-left"><tbody>{rows}</tbody></table>
                            <details class="mb-3">
                                <summary class="cursor-pointer text-sm text-indigo-700">"Client configuration"</summary>
                                <pre class="mt-2 overflow-x-auto rounded bg-slate-50 p-3 font-mono text-xs" data-testid="tool-set-config">{config}</pre>
                            </details>
                            {can_manage.then(|| view! {
                                <details>
                                    <summary class="cursor-pointer text-sm text-indigo-700">"Edit"</summary>
                                    <div class="mt-3"><SetForm set=Some(s.clone()) save/></div>
                                </details>
                                <RowAction action=delete id=delete_id label="Delete" class="mt-2 text-right" aria_label=format!("Delete {}", s.name)/>
                            })}
                        </article>
                    }
                }).collect_view();
                view! {
                    <AddCard show=can_manage>
                        <h2 class="mb-3 text-base font-semibold">"New tool set"</h2>
                        <SetForm set=None save/>
                    </AddCard>
                    {empty.then(|| view! { <p class=format!("{CARD} text-sm text-slate-600")>"No tool sets yet."</p> })}
                    {list}
                }.into_any()
            }/>
        </Page>
    }
}
