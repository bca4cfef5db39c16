//! MCP servers: the project's upstream servers (register with every option REST has, remote
//! or a local program over stdio, whose processes the server's page shows;
//! state and breaker, refresh, delete with confirmation), and one server's tools for review
//! (a changed description or schema side by side with what was approved, approve, side-effects
//! override).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{
    mcp_server_page, mcp_servers_page, ApproveMcpItem, ApproveMcpTool, BreakerState,
    DeleteMcpServer, ItemKind, McpItemView, McpProcessView, ProcessState, RefreshMcpServer,
    RegisterMcpServer, ServerState, SetMcpToolSideEffects, SetMcpToolText, SideEffects, ToolState,
};
use crate::components::{
    ActionError, AddCard, ButtonKind, Layout, ListCard, Loaded, Page, PageHeader, RowAction,
    BUTTON, CARD, INPUT, LABEL,
};

const GOOD: &str = "rounded bg-emerald-50 px-2 py-0.5 text-xs font-medium text-emerald-700";
const WARN: &str = "rounded bg-amber-50 px-2 py-0.5 text-xs font-medium text-amber-800";
const BAD: &str = "rounded bg-red-50 px-2 py-0.5 text-xs font-medium text-red-700";

fn server_badge(state: ServerState) -> &'static str {
    match state {
        ServerState::Connected => GOOD,
        ServerState::Degraded | ServerState::AwaitingSignIn => WARN,
        ServerState::Error => BAD,
    }
}

fn breaker_badge(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => GOOD,
        BreakerState::HalfOpen => WARN,
        BreakerState::Open => BAD,
    }
}

fn tool_badge(state: ToolState) -> &'static str {
    match state {
        ToolState::Available => GOOD,
        ToolState::PendingReview => WARN,
        ToolState::Unavailable => BAD,
    }
}

#[component]
pub fn McpServers() -> impl IntoView {
    let register = ServerAction::<RegisterMcpServer>::new();
    let refresh = ServerAction::<RefreshMcpServer>::new();
    let delete = ServerAction::<DeleteMcpServer>::new();
    let data = reloaded_after!(mcp_servers_page(); register, refresh, delete);
    // The chosen authentication: which of its fields the form shows. Empty until the page
    // runs in the browser, so that without JavaScript every field is there to fill.
    let auth = RwSignal::new(String::new());
    let auth_select = NodeRef::<leptos::html::Select>::new();
    Effect::new(move |_| {
        if let Some(select) = auth_select.get() {
            auth.set(select.value());
        }
    });
    // The chosen transport: a local program (stdio) has a command instead of a URL and
    // authentication; the same JavaScript-less fallback as `auth`.
    let transport = RwSignal::new(String::new());
    let transport_select = NodeRef::<leptos::html::Select>::new();
    Effect::new(move |_| {
        if let Some(select) = transport_select.get() {
            transport.set(select.value());
        }
    });
    let remote_only = move || transport.get() == "stdio";
    let stdio_only = move || {
        let t = transport.get();
        !t.is_empty() && t != "stdio"
    };
    let hidden_unless = move |kinds: &'static [&'static str]| {
        move || {
            let a = auth.get();
            (!a.is_empty() && !kinds.contains(&a.as_str())) || transport.get() == "stdio"
        }
    };
    view! {
        <Page current="/mcp-servers" title="MCP servers"
            subtitle="Upstream MCP servers whose tools join this project's catalog, behind a timeout, a concurrency ceiling and a circuit breaker.">
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                view! {
                    <AddCard show=can_manage width="max-w-3xl">
                        <h2 class="mb-3 text-base font-semibold">"Register a server"</h2>
                        <ActionForm action=register attr:class="grid grid-cols-2 gap-3">
                            <div><label for="mcp-name" class=LABEL>"Name"</label><input id="mcp-name" name="name" required class=INPUT placeholder="crm"/></div>
                            <div class:hidden=remote_only><label for="mcp-url" class=LABEL>"URL"</label><input id="mcp-url" name="url" type="url" class=INPUT placeholder="https://mcp.example.com/mcp"/></div>
                            <div>
                                <label for="mcp-transport" class=LABEL>"Transport"</label>
                                <select id="mcp-transport" name="transport" class=INPUT node_ref=transport_select on:change=move |ev| transport.set(event_target_value(&ev))>
                                    <option value="http" selected>"Streamable HTTP"</option>
                                    <option value="sse">"HTTP with SSE (older servers)"</option>
                                    <option value="stdio">"Local program (stdio)"</option>
                                </select>
                            </div>
                            <div class:hidden=remote_only>
                                <label for="mcp-auth" class=LABEL>"Authentication"</label>
                                <select id="mcp-auth" name="auth" class=INPUT node_ref=auth_select on:change=move |ev| auth.set(event_target_value(&ev))>
                                    <option value="none" selected>"None"</option>
                                    <option value="bearer">"Bearer token (vault secret)"</option>
                                    <option value="oauth2">"OAuth 2.0 client credentials"</option>
                                    <option value="user_oauth">"Each user signs in (OAuth)"</option>
                                </select>
                            </div>
                            <p class="col-span-2 text-xs text-slate-500" class:hidden=hidden_unless(&["user_oauth"]) data-testid="user-oauth-help">
                                "Each person connects with their own account and the server's tools run as them. workbench finds the server's authorization server and registers itself; give a client ID only if the server's owner registered one for you. After registering, connect on the Connections page: the tools are listed with your connection."
                            </p>
                            <div class:hidden=hidden_unless(&["oauth2", "user_oauth"])>
                                <label for="mcp-client-id" class=LABEL>{move || match auth.get().as_str() {
                                    "oauth2" => "Client ID",
                                    _ => "Client ID (OAuth; optional when each user signs in)",
                                }}</label>
                                <input id="mcp-client-id" name="client_id" class=INPUT autocomplete="off"/>
                            </div>
                            <div class:hidden=hidden_unless(&["oauth2"])>
                                <label for="mcp-token-url" class=LABEL>"Token URL"</label>
                                <input id="mcp-token-url" name="token_url" type="url" class=INPUT placeholder="https://auth.example.com/oauth/token"/>
                            </div>
                            <div class:hidden=hidden_unless(&["bearer", "oauth2", "user_oauth"])>
                                <label for="mcp-secret" class=LABEL>{move || match auth.get().as_str() {
                                    "bearer" => "Bearer token (vault secret)",
                                    "oauth2" => "Client secret (vault secret)",
                                    "user_oauth" => "Client secret (vault secret, optional)",
                                    _ => "Vault secret (bearer token or client secret)",
                                }}</label>
                                <select id="mcp-secret" name="secret" class=INPUT>
                                    <option value="">"None"</option>
                                    {d.secrets.iter().map(|s| view! { <option value=s.clone()>{s.clone()}</option> }).collect_view()}
                                </select>
                            </div>
                            <div class:hidden=hidden_unless(&["oauth2", "user_oauth"])>
                                <label for="mcp-scopes" class=LABEL>"Scopes (space-separated, optional)"</label>
                                <input id="mcp-scopes" name="scopes" class=INPUT placeholder="read write"/>
                            </div>
                            <fieldset class="col-span-2 grid grid-cols-2 gap-3 rounded border border-slate-200 p-3" class:hidden=stdio_only data-testid="stdio-fields">
                                <legend class="px-1 text-xs font-semibold text-slate-600">"Local program (stdio only)"</legend>
                                <p class="col-span-2 text-xs text-slate-500">"workbench starts the program itself, confined: only the environment below, resource limits, and (where the kernel has Landlock) only the system directories, the program's installation, its own working directory and the paths listed here. The operator chooses which programs may run (WB_STDIO_COMMANDS)."</p>
                                <div><label for="mcp-command" class=LABEL>"Command"</label><input id="mcp-command" name="command" class=INPUT placeholder="npx" autocomplete="off"/></div>
                                <div><label for="mcp-cwd" class=LABEL>"Working directory (optional)"</label><input id="mcp-cwd" name="cwd" class=INPUT placeholder="its own, under the data directory"/></div>
                                <div><label for="mcp-args" class=LABEL>"Arguments (one per line)"</label><textarea id="mcp-args" name="args" rows="3" class=INPUT placeholder="-y @modelcontextprotocol/server-everything (one per line)"></textarea></div>
                                <div><label for="mcp-env" class=LABEL>"Environment (VAR=value per line; {{vault:SECRET}} for a secret)"</label><textarea id="mcp-env" name="env" rows="3" class=INPUT placeholder="API_TOKEN={{vault:CRM_TOKEN}}"></textarea></div>
                                <div><label for="mcp-read" class=LABEL>"Readable paths (one per line)"</label><textarea id="mcp-read" name="filesystem_read" rows="2" class=INPUT placeholder="/srv/mcp/crm"></textarea></div>
                                <div><label for="mcp-write" class=LABEL>"Writable paths (one per line)"</label><textarea id="mcp-write" name="filesystem_write" rows="2" class=INPUT></textarea></div>
                                <div><label for="mcp-memory" class=LABEL>"Memory limit (MiB)"</label><input id="mcp-memory" name="memory_mb" inputmode="numeric" class=INPUT placeholder="1024"/></div>
                                <div><label for="mcp-pool" class=LABEL>"Processes per instance"</label><input id="mcp-pool" name="pool" inputmode="numeric" class=INPUT placeholder="1"/></div>
                                <div>
                                    <label for="mcp-start" class=LABEL>"Start"</label>
                                    <select id="mcp-start" name="start" class=INPUT>
                                        <option value="on_use" selected>"At the first call"</option>
                                        <option value="boot">"When workbench starts"</option>
                                    </select>
                                </div>
                                <div><label for="mcp-idle" class=LABEL>"Stop when idle for (s, optional)"</label><input id="mcp-idle" name="idle_shutdown_s" inputmode="numeric" class=INPUT placeholder="never"/></div>
                            </fieldset>
                            <div><label for="mcp-prefix" class=LABEL>"Tool prefix"</label><input id="mcp-prefix" name="tool_prefix" class=INPUT placeholder="<name>."/></div>
                            <div><label for="mcp-timeout" class=LABEL>"Timeout (ms)"</label><input id="mcp-timeout" name="timeout_ms" inputmode="numeric" class=INPUT placeholder="30000"/></div>
                            <div><label for="mcp-conc" class=LABEL>"Max concurrency"</label><input id="mcp-conc" name="max_concurrency" inputmode="numeric" class=INPUT placeholder="10"/></div>
                            <label class="col-span-2 flex items-start gap-2 text-sm">
                                <input type="checkbox" name="auto_approve" value="on" class="mt-1"/>
                                <span>"Approve its tools without review" <span class="block text-xs text-slate-500">"New and changed tools become available at once instead of waiting on this page for an admin."</span></span>
                            </label>
                            <div class="col-span-2"><button type="submit" class=BUTTON>"Register"</button></div>
                        </ActionForm>
                        <ActionError value=register.value()/>
                        <ActionError value=refresh.value()/>
                        <ActionError value=delete.value()/>
                    </AddCard>
                    <ListCard empty=d.servers.is_empty() width="max-w-4xl" empty_text="No MCP servers yet.">
                            {d.servers.iter().map(|s| view! {
                                <li class="flex items-center justify-between py-3" data-testid="mcp-server-row">
                                    <div>
                                        <a href=format!("/mcp-servers/{}", s.id) class="font-medium text-indigo-700 underline">{s.name.clone()}</a>
                                        <span class="ml-2 font-mono text-xs text-slate-500">{s.tool_prefix.clone()}</span>
                                        <span class=format!("ml-2 {}", server_badge(s.state))>{s.state.as_str()}</span>
                                        <span class=format!("ml-1 {}", breaker_badge(s.breaker))>{format!("breaker {}", s.breaker)}</span>
                                        <p class="text-xs text-slate-500">{format!("{} · auth {} · {} available, {} unavailable, {} to review", s.url, s.auth_type, s.available, s.unavailable, s.pending_review)}</p>
                                        {s.last_error.clone().map(|e| view! { <p class="text-xs text-red-700">{format!("Last refresh failed: {e}")}</p> })}
                                        {(s.state == ServerState::AwaitingSignIn).then(|| view! {
                                            <p class="text-xs text-amber-800" data-testid="mcp-server-awaiting">
                                                "Its tools are listed once the admin who registered it connects: "
                                                <a href="/connections" class="underline">"Connections"</a>
                                            </p>
                                        })}
                                    </div>
                                    {can_manage.then(|| view! {
                                        <div class="flex gap-2">
                                            <RowAction action=refresh id=s.id.clone() label="Refresh" kind=ButtonKind::Plain aria_label=format!("Refresh {}", s.name)/>
                                            <RowAction action=delete id=s.id.clone() label="Delete" aria_label=format!("Delete {}", s.name)
                                                confirm=format!("Delete {}? Its tools leave the catalog at once.", s.name)/>
                                        </div>
                                    })}
                                </li>
                            }).collect_view()}
                    </ListCard>
                }.into_any()
            }/>
        </Page>
    }
}

#[component]
pub fn McpServerPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let approve = ServerAction::<ApproveMcpTool>::new();
    let side = ServerAction::<SetMcpToolSideEffects>::new();
    let text = ServerAction::<SetMcpToolText>::new();
    let approve_item = ServerAction::<ApproveMcpItem>::new();
    let data = Resource::new(
        move || {
            (
                id(),
                approve.version().get(),
                side.version().get(),
                text.version().get(),
                approve_item.version().get(),
            )
        },
        |(id, _, _, _, _)| mcp_server_page(id),
    );
    view! {
        <Title text="MCP server"/>
        <Layout current="/mcp-servers">
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let server_id = d.server.id.clone();
                view! {
                    <PageHeader title=d.server.name.clone() subtitle=format!("{} · breaker {} · tools appear as {}<name>", d.server.url, d.server.breaker, d.server.tool_prefix)/>
                    <ActionError value=approve.value()/>
                    <ActionError value=side.value()/>
                    <ActionError value=text.value()/>
                    <ActionError value=approve_item.value()/>
                    {d.command_line.clone().map(|c| view! { <p class="mb-3 font-mono text-xs text-slate-600" data-testid="mcp-command-line">{c}</p> })}
                    <Processes processes=d.processes.clone()/>
                    <ul class="space-y-4">
                        {d.tools.into_iter().map(|t| {
                            let changed = t.approved_description.is_some() || t.approved_input_schema.is_some();
                            let pending = t.status == ToolState::PendingReview;
                            let (approve_id, side_id) = (server_id.clone(), server_id.clone());
                            let (approve_tool, side_tool) = (t.name.clone(), t.name.clone());
                            let (text_id, text_tool) = (server_id.clone(), t.name.clone());
                            let (name_now, description_now) = (t.name_override.clone().unwrap_or_default(), t.description_override.clone().unwrap_or_default());
                            let side_label = format!("Side effects of {}", t.name);
                            view! {
                                <li class=CARD data-testid="mcp-tool">
                                    <div class="flex items-center justify-between">
                                        <p><span class="font-mono text-sm font-medium">{t.catalog_name.clone()}</span><span class=format!("ml-2 {}", tool_badge(t.status))>{t.status.as_str().replace('_', " ")}</span></p>
                                        {(can_manage && pending).then(|| view! {
                                            <RowAction action=approve id=approve_id label="Approve" kind=ButtonKind::Primary
                                                aria_label=format!("Approve {}", t.name) extra=vec![("tool", approve_tool)]/>
                                        })}
                                    </div>
                                    {t.collision.clone().map(|c| view! { <p class="mt-2 text-sm text-amber-800" data-testid="mcp-tool-collision">{c}</p> })}
                                    {if changed {
                                        view! {
                                            <div class="mt-3 grid grid-cols-2 gap-4 text-xs" data-testid="mcp-tool-diff">
                                                <div><p class="mb-1 font-semibold text-slate-600">"Approved"</p><p class="whitespace-pre-wrap">{t.approved_description.clone().unwrap_or_default()}</p><pre class="mt-2 overflow-x-auto rounded bg-slate-50 p-2">{t.approved_input_schema.clone().unwrap_or_default()}</pre></div>
                                                <div><p class="mb-1 font-semibold text-amber-800">"Now"</p><p class="whitespace-pre-wrap">{t.description.clone()}</p><pre class="mt-2 overflow-x-auto rounded bg-amber-50 p-2">{t.input_schema.clone()}</pre></div>
                                            </div>
                                        }.into_any()
                                    } else {
                                        view! { <p class="mt-2 text-sm text-slate-700">{t.description.clone()}</p> }.into_any()
                                    }}
                                    {t.description_override.clone().map(|d| view! {
                                        <p class="mt-2 text-sm text-slate-700" data-testid="mcp-tool-description-override"><span class="font-semibold">"Agents see: "</span>{d}</p>
                                    })}
                                    {can_manage.then(move || view! {
                                        <details class="mt-3 text-xs">
                                            <summary class="cursor-pointer text-indigo-700">"Rename or describe for this project"</summary>
                                            <ActionForm action=text attr:class="mt-2 grid gap-2" attr:data-testid="mcp-tool-text-form">
                                                <input type="hidden" name="id" value=text_id/>
                                                <input type="hidden" name="tool" value=text_tool.clone()/>
                                                <label class="block">"Name after the prefix (empty: the server's own)"
                                                    <input name="name" value=name_now maxlength="128" class="mt-1 block w-full rounded border border-slate-300 px-2 py-1 font-mono" placeholder=text_tool/>
                                                </label>
                                                <label class="block">"Description agents see (empty: the server's own, as reviewed)"
                                                    <textarea name="description" rows="2" maxlength="4000" class="mt-1 block w-full rounded border border-slate-300 px-2 py-1">{description_now}</textarea>
                                                </label>
                                                <div><button type="submit" class="rounded border border-slate-300 px-2 py-0.5">"Save"</button></div>
                                            </ActionForm>
                                        </details>
                                    })}
                                    <div class="mt-3 flex items-center gap-2 text-xs text-slate-600">
                                        <span>{format!("side effects: {}{}", t.side_effects, if t.side_effects_overridden { " (set by an admin)" } else { " (from the server's hints)" })}</span>
                                        {can_manage.then(move || view! {
                                            <ActionForm action=side attr:class="flex items-center gap-1">
                                                <input type="hidden" name="id" value=side_id/>
                                                <input type="hidden" name="tool" value=side_tool/>
                                                <select name="side_effects" class="rounded border border-slate-300 px-1 py-0.5" aria-label=side_label>
                                                    <option value="">"from hints"</option>
                                                    {SideEffects::ALL.iter().map(|s| view! { <option value=s.as_str()>{s.as_str()}</option> }).collect_view()}
                                                </select>
                                                <button type="submit" class="rounded border border-slate-300 px-2 py-0.5">"Set"</button>
                                            </ActionForm>
                                        })}
                                    </div>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                    <Items items=d.items.clone() server_id=server_id.clone() can_manage=can_manage approve=approve_item/>
                }.into_any()
            }/>
        </Layout>
    }
}

/// A server's prompts, resources and resource templates, reviewed like its tools: status, what
/// the server lists (beside what was approved when it changed), and Approve for held ones.
/// Tool sets that publish prompts and resources show the available ones.
#[component]
fn Items(
    items: Vec<McpItemView>,
    server_id: String,
    can_manage: bool,
    approve: ServerAction<ApproveMcpItem>,
) -> impl IntoView {
    (!items.is_empty()).then(|| {
        let prompts = items.iter().filter(|i| i.kind == ItemKind::Prompt).count();
        let heading = format!("Prompts ({prompts}) and resources ({})", items.len() - prompts);
        view! {
            <section class="mt-8 space-y-3" data-testid="mcp-items">
                <h2 class="text-base font-semibold">{heading}</h2>
                <p class="text-sm text-slate-600">"Tool sets that publish prompts and resources show the available ones, under the names below."</p>
                <ul class="space-y-3">
                    {items.into_iter().map(|i| {
                        let pending = i.status == ToolState::PendingReview;
                        let label = format!("Approve {}", i.key);
                        let extra = vec![("kind", i.kind.as_str().to_owned()), ("key", i.key.clone())];
                        let id = server_id.clone();
                        view! {
                            <li class=CARD data-testid="mcp-item">
                                <div class="flex items-center justify-between">
                                    <p>
                                        <span class="mr-2 text-xs uppercase text-slate-500">{i.kind.as_str().replace('_', " ")}</span>
                                        <span class="font-mono text-sm font-medium">{i.exposed.clone()}</span>
                                        <span class=format!("ml-2 {}", tool_badge(i.status))>{i.status.as_str().replace('_', " ")}</span>
                                    </p>
                                    {(can_manage && pending).then(|| view! {
                                        <RowAction action=approve id=id label="Approve" kind=ButtonKind::Primary aria_label=label extra=extra/>
                                    })}
                                </div>
                                {match i.approved_body.clone() {
                                    Some(approved) => view! {
                                        <div class="mt-3 grid grid-cols-2 gap-4 text-xs" data-testid="mcp-item-diff">
                                            <div><p class="mb-1 font-semibold text-slate-600">"Approved"</p><pre class="overflow-x-auto whitespace-pre-wrap rounded bg-slate-50 p-2">{approved}</pre></div>
                                            <div><p class="mb-1 font-semibold text-amber-800">"Now"</p><pre class="overflow-x-auto whitespace-pre-wrap rounded bg-amber-50 p-2">{i.body.clone()}</pre></div>
                                        </div>
                                    }.into_any(),
                                    None => view! {
                                        <details class="mt-2 text-xs">
                                            <summary class="cursor-pointer text-slate-600">"As the server lists it"</summary>
                                            <pre class="mt-1 overflow-x-auto whitespace-pre-wrap rounded bg-slate-50 p-2">{i.body.clone()}</pre>
                                        </details>
                                    }.into_any(),
                                }}
                            </li>
                        }
                    }).collect_view()}
                </ul>
            </section>
        }
    })
}

fn process_badge(state: ProcessState) -> &'static str {
    match state {
        ProcessState::Running => GOOD,
        ProcessState::Restarting => BAD,
        ProcessState::Stopped => WARN,
    }
}

/// A local server's processes on this instance: state, restarts, uptime, memory, what confines
/// them, why the last one ended and (for admins) its last stderr lines.
#[component]
fn Processes(processes: Vec<McpProcessView>) -> impl IntoView {
    (!processes.is_empty()).then(|| {
        view! {
            <section class="mb-6 space-y-3" data-testid="mcp-processes">
                <h2 class="text-base font-semibold">"Processes on this instance"</h2>
                {processes.into_iter().enumerate().map(|(i, p)| {
                    let facts = [
                        p.pid.map(|pid| format!("pid {pid}")),
                        Some(format!("{} restarts", p.restarts)),
                        p.uptime_ms.map(|ms| format!("up {} s", ms / 1000)),
                        p.memory_bytes.map(|b| format!("{} MiB resident", b / (1024 * 1024))),
                        p.next_start_in_ms.map(|ms| format!("starts again in {} s", (ms + 999) / 1000)),
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" · ");
                    view! {
                        <div class=CARD data-testid="mcp-process">
                            <p class="text-sm">
                                <span class="font-medium">{format!("Process {}", i + 1)}</span>
                                <span class=format!("ml-2 {}", process_badge(p.state))>{p.state.as_str()}</span>
                                <span class="ml-2 text-xs text-slate-500">{facts}</span>
                            </p>
                            {p.last_exit.clone().map(|e| view! { <p class="mt-1 text-xs text-red-700" data-testid="mcp-process-exit">{format!("Last exit: {e}")}</p> })}
                            <p class="mt-1 text-xs text-slate-500">{format!("Confinement: {}", p.confinement.join("; "))}</p>
                            {(!p.stderr_tail.is_empty()).then(|| view! {
                                <details class="mt-2">
                                    <summary class="cursor-pointer text-xs text-slate-600">{format!("Last {} stderr lines (secrets redacted)", p.stderr_tail.len())}</summary>
                                    <pre class="mt-1 max-h-64 overflow-auto rounded bg-slate-50 p-2 text-xs" data-testid="mcp-process-stderr">{p.stderr_tail.join("\n")}</pre>
                                </details>
                            })}
                        </div>
                    }
                }).collect_view()}
            </section>
        }
    })
}
