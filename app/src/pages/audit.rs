//! Audit: one row per execution attempt, newest first, filtered by tool, status and key, paged
//! with the cursor the previous page returned; each row links to its detail page. Admins set
//! how many days rows are kept.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::{audit_page, AuditStatus, SaveRetention};
use crate::components::{url_query, ActionError, Loaded, Page, BUTTON, CARD, INPUT, LABEL};

/// The statuses the filter offers (a row is `running` only while its call runs).
const STATUSES: &[AuditStatus] = &[
    AuditStatus::Succeeded,
    AuditStatus::Failed,
    AuditStatus::Denied,
    AuditStatus::AwaitingConfirmation,
    AuditStatus::Expired,
    AuditStatus::Approved,
];

/// The colour of a status: green for what went through, amber for what waits, red otherwise.
pub(crate) fn status_class(s: AuditStatus) -> &'static str {
    match s {
        AuditStatus::Succeeded | AuditStatus::Approved => "text-emerald-700",
        AuditStatus::Running | AuditStatus::AwaitingConfirmation => "text-amber-700",
        AuditStatus::Failed | AuditStatus::Denied | AuditStatus::Expired => "text-red-700",
    }
}

#[component]
pub fn Audit() -> impl IntoView {
    let query = use_query_map();
    let param = move |k: &str| query.read().get(k).filter(|v| !v.is_empty());
    let retention = ServerAction::<SaveRetention>::new();
    let data = Resource::new(
        move || {
            (
                param("tool"),
                param("status"),
                param("key"),
                param("cursor"),
                retention.version().get(),
            )
        },
        |(tool, status, key, cursor, _)| audit_page(tool, status, key, cursor),
    );
    view! {
        <Page current="/audit" title="Audit" heading="Audit log"
            subtitle="Every tool execution attempt, whatever its outcome.">
            <ActionError value=retention.value()/>
            <Loaded data=data content=move |d| {
                let tool = param("tool").unwrap_or_default();
                let status = param("status").unwrap_or_default();
                let key = param("key").unwrap_or_default();
                let next_href = d.next.clone().map(|c| {
                    let mut q = url_query(&[("tool", &tool), ("status", &status), ("key", &key)]);
                    q.push_str(&format!("{}cursor={}", if q.is_empty() { "?" } else { "&" }, c));
                    format!("/audit{q}")
                });
                let empty = d.rows.is_empty();
                let rows = d.rows.into_iter().map(|r| {
                    let status_class = status_class(r.status);
                    view! {
                    <tr class="border-t border-slate-100" data-testid="audit-row">
                        <td class="py-2 pr-3 whitespace-nowrap"><a href=format!("/audit/{}", r.id) class="text-indigo-700 underline" data-testid="audit-detail-link">{r.at}</a></td>
                        <td class="py-2 pr-3 font-mono text-xs">{r.tool}</td>
                        <td class="py-2 pr-3">
                            <span class=status_class>{r.status.as_str()}</span>
                            {(!r.error_code.is_empty()).then(|| view! { <span class="ml-1 text-xs text-slate-500">{r.error_code}</span> })}
                        </td>
                        <td class="py-2 pr-3 text-slate-600">{r.duration_ms.map(|ms| format!("{ms} ms")).unwrap_or_default()}</td>
                        <td class="py-2 pr-3 text-slate-600">{r.key}</td>
                        <td class="py-2 pr-3 text-slate-600">{r.surface}</td>
                        <td class="py-2 font-mono text-xs text-slate-400">{r.call_id}</td>
                    </tr>
                }}).collect_view();
                let key_options = d.keys.into_iter().map(|(id, label)| {
                    let selected = id == key;
                    view! { <option value=id selected=selected>{label}</option> }
                }).collect_view();
                let status_options = STATUSES.iter().map(|s| {
                    let selected = s.as_str() == status;
                    view! { <option value=s.as_str() selected=selected>{s.as_str()}</option> }
                }).collect_view();
                view! {
                    <form method="get" action="/audit" class="mb-6 flex flex-wrap items-end gap-3" aria-label="Filter">
                        <div>
                            <label for="f-tool" class=LABEL>"Tool"</label>
                            <input id="f-tool" name="tool" type="text" value=tool.clone() class=INPUT/>
                        </div>
                        <div>
                            <label for="f-status" class=LABEL>"Status"</label>
                            <select id="f-status" name="status" class=INPUT>
                                <option value="">"any"</option>
                                {status_options}
                            </select>
                        </div>
                        <div>
                            <label for="f-key" class=LABEL>"Key"</label>
                            <select id="f-key" name="key" class=INPUT>
                                <option value="">"any"</option>
                                {key_options}
                            </select>
                        </div>
                        <button type="submit" class=BUTTON>"Filter"</button>
                    </form>
                    <section class=CARD>
                        {if empty {
                            view! { <p class="text-sm text-slate-600">"No executions match."</p> }.into_any()
                        } else {
                            view! {
                                <table class="w-full text-left text-sm">
                                    <thead class="text-xs uppercase tracking-wide text-slate-500">
                                        <tr>
                                            <th class="pb-2 pr-3">"When"</th><th class="pb-2 pr-3">"Tool"</th><th class="pb-2 pr-3">"Outcome"</th>
                                            <th class="pb-2 pr-3">"Time"</th><th class="pb-2 pr-3">"Key"</th><th class="pb-2 pr-3">"Via"</th><th class="pb-2">"Call"</th>
                                        </tr>
                                    </thead>
                                    <tbody>{rows}</tbody>
                                </table>
                            }.into_any()
                        }}
                        {next_href.map(|href| view! { <a href=href class="mt-4 inline-block text-sm text-indigo-600 underline">"Older entries →"</a> })}
                    <a href=format!("/audit.csv{}", url_query(&[("tool", &tool), ("status", &status), ("key", &key)])) class="mt-4 ml-4 inline-block text-sm text-indigo-600 underline" data-testid="audit-csv">"Export CSV"</a>
                    </section>
                    {d.is_admin.then(|| {
                        let kept = match d.retention_days {
                            Some(n) => format!("Rows older than {n} days are deleted (checked every 10 minutes)."),
                            None => "Rows are kept forever.".to_owned(),
                        };
                        view! {
                            <section class=format!("{CARD} mt-6") data-testid="retention">
                                <h2 class="mb-1 text-base font-semibold">"Retention"</h2>
                                <p class="mb-3 text-sm text-slate-600" data-testid="retention-now">{kept} " Tool call records, confirmations and webhook deliveries go with them; usage meters stay."</p>
                                {d.can_manage.then(|| view! {
                                    <ActionForm action=retention attr:class="flex items-end gap-3">
                                        <div>
                                            <label for="retention-days" class=LABEL>"Keep rows for (days; empty: forever)"</label>
                                            <input id="retention-days" name="days" type="number" min="1" max="3650" value=d.retention_days.map(|n| n.to_string()).unwrap_or_default() class=INPUT/>
                                        </div>
                                        <button type="submit" class=BUTTON>"Save retention"</button>
                                    </ActionForm>
                                })}
                            </section>
                        }
                    })}
                }.into_any()
            }/>
        </Page>
    }
}
