//! The landing page after sign-in: what someone checks first (today's calls by outcome, calls
//! refused by a rate limit, held calls waiting, upstream servers with an open breaker or tools
//! awaiting review, connections to renew), then how to point an agent or a program here.

use leptos::prelude::*;

use crate::api::overview_page;
use crate::components::{Loaded, Page, CARD};

/// A figure with its label, linking to where it can be acted on.
#[component]
fn Figure(
    label: &'static str,
    value: String,
    href: &'static str,
    testid: &'static str,
    #[prop(optional)] warn: bool,
) -> impl IntoView {
    let class = if warn {
        "text-2xl font-semibold text-amber-700"
    } else {
        "text-2xl font-semibold text-slate-900"
    };
    view! {
        <a href=href class=format!("{CARD} block hover:border-indigo-300") data-testid=testid>
            <p class="text-xs uppercase tracking-wide text-slate-500">{label}</p>
            <p class=class data-testid="figure">{value}</p>
        </a>
    }
}

#[component]
pub fn Overview() -> impl IntoView {
    let data = Resource::new(|| (), |_| overview_page());
    view! {
        <Page current="/" title="Overview"
            subtitle="What needs a look today, then how to connect agents and programs.">
            <Loaded data=data content=move |d| {
                let whose = if d.project_wide { "the project's calls" } else { "your calls" };
                let outcomes = if d.calls_today.is_empty() {
                    "none yet".to_owned()
                } else {
                    d.calls_today.iter().map(|(s, n)| format!("{n} {}", s.replace('_', " "))).collect::<Vec<_>>().join(" · ")
                };
                let attention = d.open_breakers.iter().map(|(name, id, state)| view! {
                    <li data-testid="attention-breaker"><a class="text-indigo-700 underline" href=format!("/mcp-servers/{id}")>{name.clone()}</a>{format!(": breaker {state}")}</li>
                }).collect_view();
                let review = d.awaiting_review.iter().map(|(name, id, n)| view! {
                    <li data-testid="attention-review"><a class="text-indigo-700 underline" href=format!("/mcp-servers/{id}")>{name.clone()}</a>{format!(": {n} tool{} awaiting review", if *n == 1 { "" } else { "s" })}</li>
                }).collect_view();
                let reconnect = d.reconnect.iter().map(|(integration, status)| view! {
                    <li data-testid="attention-reconnect"><a class="text-indigo-700 underline" href="/connections">{integration.clone()}</a>{format!(": {status}, connect again")}</li>
                }).collect_view();
                let calm = d.open_breakers.is_empty() && d.awaiting_review.is_empty() && d.reconnect.is_empty();
                view! {
                    <div class="grid max-w-4xl gap-4 md:grid-cols-3" data-testid="overview-figures">
                        <Figure label="Calls today (UTC)" value=d.calls_today_total.to_string() href="/audit" testid="calls-today"/>
                        <Figure label="Held calls waiting" value=d.pending_confirmations.to_string() href="/confirmations" testid="pending-confirmations" warn={d.pending_confirmations > 0}/>
                        <Figure label="Refused by a rate limit today" value=d.rate_limited_today.to_string() href="/audit?status=failed" testid="rate-limited" warn={d.rate_limited_today > 0}/>
                    </div>
                    <p class="mt-2 max-w-4xl text-xs text-slate-500" data-testid="calls-by-outcome">{format!("Today, {whose}: {outcomes}.")}</p>
                    <section class=format!("{CARD} mt-4 max-w-4xl") data-testid="attention">
                        <h2 class="font-medium">"Needs attention"</h2>
                        {if calm {
                            view! { <p class="mt-2 text-sm text-slate-600">"Nothing: every upstream server's breaker is closed, no tool waits for review and your connections are current."</p> }.into_any()
                        } else {
                            view! { <ul class="mt-2 space-y-1 text-sm">{attention}{review}{reconnect}</ul> }.into_any()
                        }}
                    </section>
                }.into_any()
            }/>
            <div class="mt-6 grid max-w-4xl gap-6 md:grid-cols-2">
                <section class=CARD>
                    <h2 class="font-medium">"Agents (MCP)"</h2>
                    <p class="mt-2 text-sm text-slate-600">
                        "Point an MCP client at " <code class="rounded bg-slate-100 px-1">"/mcp"</code>
                        " with the header " <code class="rounded bg-slate-100 px-1">"Authorization: Bearer <api key>"</code>
                        ", or at a " <a href="/tool-sets" class="text-indigo-600 underline">"tool set"</a> "'s own endpoint."
                    </p>
                </section>
                <section class=CARD>
                    <h2 class="font-medium">"Programs (REST)"</h2>
                    <p class="mt-2 text-sm text-slate-600">
                        "Call " <code class="rounded bg-slate-100 px-1">"/v1"</code> " with the same bearer key."
                    </p>
                </section>
                <section class=format!("{CARD} md:col-span-2")>
                    <h2 class="font-medium">"Get started"</h2>
                    <p class="mt-2 text-sm text-slate-600">
                        "Create an API key on the " <a href="/api-keys" class="text-indigo-600 underline">"API keys"</a>
                        " page. It is shown once; store it in your agent's secret store."
                    </p>
                </section>
            </div>
        </Page>
    }
}
