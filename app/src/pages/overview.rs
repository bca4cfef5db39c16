//! The landing page after sign-in: how to point an agent or a program at this workbench.

use leptos::prelude::*;

use crate::components::{Page, CARD};

#[component]
pub fn Overview() -> impl IntoView {
    view! {
        <Page current="/" title="Overview"
            subtitle="Connect agents over MCP and programs over the REST API with an API key.">
            <div class="grid max-w-4xl gap-6 md:grid-cols-2">
                <section class=CARD>
                    <h2 class="font-medium">"Agents (MCP)"</h2>
                    <p class="mt-2 text-sm text-slate-600">
                        "Point an MCP client at " <code class="rounded bg-slate-100 px-1">"/mcp"</code>
                        " with the header " <code class="rounded bg-slate-100 px-1">"Authorization: Bearer <api key>"</code> "."
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
