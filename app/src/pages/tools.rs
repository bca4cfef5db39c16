//! Tools: the project's catalog, grouped by integration (logo, the person's connection) or
//! searched with the same ranking agents get from search_tools, filtered by side effects and
//! connection state; each tool shows its side effects, measured latency and its inputs as a
//! table (the raw JSON Schema beside it).

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use serde_json::Value;

use crate::api::{
    tools_page, AccountState, SideEffects, ToolGroupView, ToolStatus, ToolView, NEEDS_CONNECTION,
    READY,
};
use crate::components::{url_query, Loaded, Page, BUTTON, CARD, INPUT};

fn effects_class(effects: SideEffects) -> &'static str {
    match effects {
        SideEffects::None => "bg-slate-100 text-slate-700",
        SideEffects::Network => "bg-sky-100 text-sky-800",
        SideEffects::Write => "bg-amber-100 text-amber-800",
        SideEffects::Destructive => "bg-red-100 text-red-800",
    }
}

/// One input of a tool, flattened for the table: `parent.child` for nested object fields.
struct Param {
    name: String,
    kind: String,
    required: bool,
    about: String,
}

fn kind_of(s: &Value) -> String {
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match s.get("type") {
        Some(Value::String(t)) if t == "array" => format!(
            "array of {}",
            s.get("items").map(kind_of).unwrap_or_else(|| "any".into())
        ),
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ if s.get("anyOf").or(s.get("oneOf")).is_some() => "one of several shapes".into(),
        _ => "any".into(),
    }
}

fn params(schema: &Value, prefix: &str, depth: usize, out: &mut Vec<Param>) {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, p) in props {
        let mut about = p
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(d) = p.get("default") {
            about = format!(
                "{about}{}default {d}",
                if about.is_empty() { "" } else { " · " }
            );
        }
        let full = format!("{prefix}{name}");
        out.push(Param {
            name: full.clone(),
            kind: kind_of(p),
            required: required.contains(&name.as_str()),
            about,
        });
        if depth < 2 && p.get("type").and_then(Value::as_str) == Some("object") {
            params(p, &format!("{full}."), depth + 1, out);
        }
    }
}

#[component]
fn ParamsTable(schema: String) -> impl IntoView {
    let parsed: Value = serde_json::from_str(&schema).unwrap_or(Value::Null);
    let mut rows = Vec::new();
    params(&parsed, "", 0, &mut rows);
    if rows.is_empty() {
        return view! { <p class="mt-2 text-xs text-slate-500">"No inputs."</p> }.into_any();
    }
    view! {
        <table class="mt-2 w-full text-left text-xs" data-testid="tool-params">
            <thead><tr class="text-slate-500"><th class="pr-3">"Input"</th><th class="pr-3">"Type"</th><th class="pr-3"></th><th>"About"</th></tr></thead>
            <tbody>
                {rows.into_iter().map(|p| view! {
                    <tr class="border-t border-slate-100 align-top">
                        <td class="py-1 pr-3 font-mono">{p.name}</td>
                        <td class="py-1 pr-3 font-mono text-slate-600">{p.kind}</td>
                        <td class="py-1 pr-3">{p.required.then_some("required")}</td>
                        <td class="py-1 text-slate-600">{p.about}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn ToolCard(tool: ToolView) -> impl IntoView {
    let latency = tool
        .avg_latency_ms
        .map(|ms| format!("{ms} ms avg"))
        .unwrap_or_else(|| "not run yet".into());
    let needs = !tool.connection.is_ready();
    view! {
        <li class=format!("{CARD} !p-4") data-testid="tool-row">
            <div class="flex items-start justify-between gap-4">
                <div>
                    <p class="font-mono text-sm font-semibold">{tool.name.clone()}</p>
                    <p class="mt-1 text-sm text-slate-600">{tool.description.clone()}</p>
                    {tool.unavailable_reason.clone().map(|why| view! {
                        <p class="mt-1 text-sm text-red-700" data-testid="unavailable-reason">"Unavailable: " {why}</p>
                    })}
                </div>
                <div class="flex shrink-0 flex-col items-end gap-1 text-xs">
                    <span class=format!("rounded px-2 py-0.5 font-medium {}", effects_class(tool.side_effects)) title="side effects">
                        {tool.side_effects.as_str()}
                    </span>
                    <span class="text-slate-500">{tool.integration.clone()} " · " {tool.source.clone()}</span>
                    <span class="text-slate-500">{latency}</span>
                    {needs.then(|| view! { <span class="text-amber-700">{tool.connection.as_str()}</span> })}
                    {(tool.status != ToolStatus::Available).then(|| view! { <span class="font-medium text-red-700">{tool.status.as_str()}</span> })}
                    {tool.score.map(|s| view! { <span class="text-slate-400">"score " {format!("{s:.3}")}</span> })}
                </div>
            </div>
            <details class="mt-2">
                <summary class="cursor-pointer text-xs text-indigo-600">"Inputs"</summary>
                <ParamsTable schema=tool.input_schema.clone()/>
                <details class="mt-2">
                    <summary class="cursor-pointer text-xs text-slate-500">"Input schema (JSON)"</summary>
                    <pre class="mt-2 overflow-x-auto rounded bg-slate-50 p-3 text-xs">{tool.input_schema.clone()}</pre>
                </details>
            </details>
        </li>
    }
}

#[component]
fn GroupHeading(group: ToolGroupView) -> impl IntoView {
    let badge = match group.connection {
        AccountState::Connected => "text-emerald-700",
        AccountState::NoAccountNeeded => "text-slate-500",
        _ => "text-amber-700",
    };
    view! {
        <h2 class="mb-2 mt-6 flex items-center gap-2 text-base font-semibold" data-testid="tool-group">
            {group.logo.clone().map(|src| view! { <img src=src alt="" width="20" height="20" class="h-5 w-5"/> })}
            <span>{group.display_name.clone()}</span>
            <span class="text-xs font-normal text-slate-500">{format!("{} tools", group.count)}</span>
            <span class=format!("text-xs font-normal {badge}")>{group.connection.as_str()}</span>
        </h2>
    }
}

const EFFECTS: &[(&str, &str)] = &[
    ("", "Any side effects"),
    (SideEffects::None.as_str(), "Reads only (none)"),
    (SideEffects::Network.as_str(), "Network"),
    (SideEffects::Write.as_str(), "Writes"),
    (SideEffects::Destructive.as_str(), "Destructive"),
];
const CONNECTION: &[(&str, &str)] = &[
    ("", "Any connection"),
    (READY, "Ready to run"),
    (NEEDS_CONNECTION, "Needs a connection"),
];

#[component]
pub fn Tools() -> impl IntoView {
    let query = use_query_map();
    let param = move |k: &str| query.read().get(k).unwrap_or_default();
    let data = Resource::new(
        move || {
            (
                param("q"),
                param("effects"),
                param("connection"),
                param("page"),
            )
        },
        |(q, e, c, page)| {
            tools_page(
                (!q.is_empty()).then_some(q),
                (!e.is_empty()).then_some(e),
                (!c.is_empty()).then_some(c),
                page.parse().ok(),
            )
        },
    );
    // The link to another page keeps the search and the filters.
    let page_href = move |page: usize| {
        let (q, e, c, n) = (
            param("q"),
            param("effects"),
            param("connection"),
            page.to_string(),
        );
        format!(
            "/tools{}",
            url_query(&[("q", &q), ("effects", &e), ("connection", &c), ("page", &n)])
        )
    };
    let select = move |name: &'static str,
                       label: &'static str,
                       options: &'static [(&'static str, &'static str)]| {
        let current = param(name);
        view! {
            <select name=name aria-label=label class="rounded-md border border-slate-300 bg-white px-2 py-2 text-sm">
                {options.iter().map(|(v, l)| view! { <option value=*v selected=current == *v>{*l}</option> }).collect_view()}
            </select>
        }
    };
    view! {
        <Page current="/tools" title="Tools"
            subtitle="Every tool this project can run, found the way agents find them with search_tools.">
            <form method="get" action="/tools" class="mb-6 flex max-w-3xl flex-wrap gap-3" role="search">
                <input name="q" type="search" value=move || param("q") placeholder="e.g. read an object from storage" aria-label="Search tools" class=format!("{INPUT} !w-72")/>
                {move || select("effects", "Side effects", EFFECTS)}
                {move || select("connection", "Connection", CONNECTION)}
                <button type="submit" class=BUTTON>"Search"</button>
            </form>
            <Loaded data=data content=move |d| {
                let searching = !param("q").is_empty();
                let filtered = !param("effects").is_empty() || !param("connection").is_empty();
                let summary = match (searching, filtered) {
                    (false, false) => format!("{} tools in {} integrations", d.total, d.integrations),
                    (false, true) => format!("{} of {} tools, in {} integrations", d.matching, d.total, d.integrations),
                    (true, _) => format!("{} matches among {} tools", d.matching, d.total),
                };
                let pager = (d.pages > 1).then(|| view! {
                    <nav class="mt-6 flex items-center gap-4 text-sm" aria-label="Pages" data-testid="tools-pages">
                        {(d.page > 2).then(|| view! { <a class="text-indigo-600 hover:underline" rel="first" href=page_href(1)>"« First"</a> })}
                        {(d.page > 1).then(|| view! { <a class="text-indigo-600 hover:underline" rel="prev" href=page_href(d.page - 1)>"← Previous"</a> })}
                        <span class="text-slate-500">{format!("Page {} of {}", d.page, d.pages)}</span>
                        {(d.page < d.pages).then(|| view! { <a class="text-indigo-600 hover:underline" rel="next" href=page_href(d.page + 1)>"Next →"</a> })}
                        {(d.page + 1 < d.pages).then(|| view! { <a class="text-indigo-600 hover:underline" rel="last" href=page_href(d.pages)>"Last »"</a> })}
                    </nav>
                });
                let empty = d.tools.is_empty();
                let body = if searching {
                    view! { <ul class="space-y-3">{d.tools.into_iter().map(|tool| view! { <ToolCard tool/> }).collect_view()}</ul> }.into_any()
                } else {
                    let mut tools = d.tools;
                    d.groups
                        .into_iter()
                        .map(|group| {
                            let (mine, rest): (Vec<ToolView>, Vec<ToolView>) = tools.drain(..).partition(|t| t.integration == group.integration);
                            tools = rest;
                            view! {
                                <section>
                                    <GroupHeading group/>
                                    <ul class="space-y-3">{mine.into_iter().map(|tool| view! { <ToolCard tool/> }).collect_view()}</ul>
                                </section>
                            }
                        })
                        .collect_view()
                        .into_any()
                };
                view! {
                    <p class="mb-3 text-sm text-slate-500" data-testid="tools-summary">{summary}</p>
                    {empty.then(|| view! { <p class="text-sm text-slate-600">"No tool matches; try other words or filters."</p> })}
                    {body}
                    {pager}
                }.into_any()
            }/>
        </Page>
    }
}
