//! Tools: the project's catalog, searchable with the same ranking agents get from
//! search_tools; each tool shows its side effects, measured latency and input schema.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{tools_page, ToolView};
use crate::components::{Layout, LoadError, PageHeader, BUTTON, CARD, INPUT};

fn effects_class(effects: &str) -> &'static str {
    match effects {
        "none" => "bg-slate-100 text-slate-700",
        "network" => "bg-sky-100 text-sky-800",
        "write" => "bg-amber-100 text-amber-800",
        _ => "bg-red-100 text-red-800",
    }
}

#[component]
fn ToolCard(tool: ToolView) -> impl IntoView {
    let latency = tool.avg_latency_ms.map(|ms| format!("{ms} ms avg")).unwrap_or_else(|| "not run yet".into());
    view! {
        <li class=format!("{CARD} !p-4") data-testid="tool-row">
            <div class="flex items-start justify-between gap-4">
                <div>
                    <p class="font-mono text-sm font-semibold">{tool.name.clone()}</p>
                    <p class="mt-1 text-sm text-slate-600">{tool.description.clone()}</p>
                </div>
                <div class="flex shrink-0 flex-col items-end gap-1 text-xs">
                    <span class=format!("rounded px-2 py-0.5 font-medium {}", effects_class(&tool.side_effects)) title="side effects">
                        {tool.side_effects.clone()}
                    </span>
                    <span class="text-slate-500">{tool.integration.clone()} " · " {tool.source.clone()}</span>
                    <span class="text-slate-500">{latency}</span>
                    {(tool.status != "available").then(|| view! { <span class="font-medium text-red-700">{tool.status.clone()}</span> })}
                    {tool.score.map(|s| view! { <span class="text-slate-400">"score " {format!("{s:.3}")}</span> })}
                </div>
            </div>
            <details class="mt-2">
                <summary class="cursor-pointer text-xs text-indigo-600">"Input schema"</summary>
                <pre class="mt-2 overflow-x-auto rounded bg-slate-50 p-3 text-xs">{tool.input_schema.clone()}</pre>
            </details>
        </li>
    }
}

#[component]
pub fn Tools() -> impl IntoView {
    let query = use_query_map();
    let q = move || query.read().get("q").unwrap_or_default();
    let data = Resource::new(q, |q| tools_page((!q.is_empty()).then_some(q)));
    view! {
        <Title text="Tools"/>
        <Layout current="/tools">
            <PageHeader title="Tools" subtitle="Every tool this project can run, found the way agents find them with search_tools."/>
            <form method="get" action="/tools" class="mb-6 flex max-w-xl gap-3" role="search">
                <input name="q" type="search" value=q placeholder="e.g. read a stored object" aria-label="Search tools" class=INPUT/>
                <button type="submit" class=BUTTON>"Search"</button>
            </form>
            <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Err(error) => view! { <LoadError error/> }.into_any(),
                        Ok(d) => {
                            let summary = if q().is_empty() {
                                format!("{} tools", d.total)
                            } else {
                                format!("{} matches among {} tools", d.tools.len(), d.total)
                            };
                            let empty = d.tools.is_empty();
                            view! {
                                <p class="mb-3 text-sm text-slate-500" data-testid="tools-summary">{summary}</p>
                                {empty.then(|| view! { <p class="text-sm text-slate-600">"No tool matches; try other words."</p> })}
                                <ul class="space-y-3">{d.tools.into_iter().map(|tool| view! { <ToolCard tool/> }).collect_view()}</ul>
                            }.into_any()
                        }
                    }
                })}
            </Suspense>
        </Layout>
    }
}
