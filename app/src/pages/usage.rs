//! Usage: the project's metered use over a date range, as charts drawn on the server as SVG
//! (readable without JavaScript): calls per day by outcome, egress per day, p50/p95 handler
//! time per tool, and the busiest tools and keys. Each chart links to its table as CSV.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::{usage_page, DayBar, LatencyBar, TopRow, UserRow};
use crate::components::{Loaded, Page, BUTTON, CARD, INPUT, LABEL};

const W: f64 = 720.0;
const H: f64 = 160.0;
/// Room for the value axis on the left and the dates below.
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 18.0;
/// The plot inside the axes.
const PW: f64 = W - LEFT;
const PH: f64 = H - BOTTOM;

/// The axes of a chart by day: the value scale (0 and `max`, with `unit`) on the left, and the
/// first, middle and last dates below.
fn day_axes(days: &[&str], max: f64, unit: &'static str) -> impl IntoView {
    let n = days.len();
    let bw = PW / n.max(1) as f64;
    let mut ticks: Vec<usize> = vec![0, n / 2, n.saturating_sub(1)];
    ticks.dedup();
    let dates = ticks
        .into_iter()
        .filter(|i| *i < n)
        .map(|i| {
            let x = LEFT + i as f64 * bw + bw / 2.0;
            let anchor = if i == 0 { "start" } else if i + 1 == n { "end" } else { "middle" };
            let x = if i == 0 { LEFT } else if i + 1 == n { W } else { x };
            view! { <text x=format!("{x:.1}") y=format!("{:.1}", H - 4.0) font-size="11" fill="#64748b" text-anchor=anchor data-testid="axis-date">{days[i].to_owned()}</text> }
        })
        .collect_view();
    let top = if max >= 1000.0 {
        format!("{:.0}k {unit}", max / 1000.0)
    } else {
        format!("{max:.0} {unit}")
    };
    view! {
        <line x1=format!("{LEFT}") y1="0" x2=format!("{LEFT}") y2=format!("{PH}") stroke="#cbd5e1"/>
        <line x1=format!("{LEFT}") y1=format!("{PH}") x2=format!("{W}") y2=format!("{PH}") stroke="#cbd5e1"/>
        <text x=format!("{:.1}", LEFT - 4.0) y="10" font-size="11" fill="#64748b" text-anchor="end" data-testid="axis-max">{top}</text>
        <text x=format!("{:.1}", LEFT - 4.0) y=format!("{PH}") font-size="11" fill="#64748b" text-anchor="end">"0"</text>
        {dates}
    }
}

fn csv_link(chart: &str, from: &str, to: &str) -> impl IntoView {
    let href = format!("/usage.csv?chart={chart}&from={from}&to={to}");
    view! { <a href=href class="text-xs text-indigo-700 underline" data-testid=format!("csv-{chart}")>"CSV"</a> }
}

/// Stacked bars per day: succeeded, failed, denied, other.
#[component]
fn CallsChart(days: Vec<DayBar>) -> impl IntoView {
    let max = days
        .iter()
        .map(|d| d.succeeded + d.failed + d.denied + d.other)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = days.len().max(1) as f64;
    let bw = (PW / n).max(1.0);
    let total: i64 = days
        .iter()
        .map(|d| d.succeeded + d.failed + d.denied + d.other)
        .sum();
    let labels: Vec<&str> = days.iter().map(|d| d.day.as_str()).collect();
    let axes = day_axes(&labels, max, "calls");
    let bars = days
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            let x = LEFT + i as f64 * bw;
            let mut y = PH;
            [(d.succeeded, "#10b981"), (d.failed, "#ef4444"), (d.denied, "#f59e0b"), (d.other, "#94a3b8")]
                .into_iter()
                .filter(|(v, _)| *v > 0)
                .map(|(v, color)| {
                    let h = v as f64 / max * PH;
                    y -= h;
                    let title = format!("{}: {v}", d.day);
                    view! { <rect x=format!("{x:.1}") y=format!("{y:.1}") width=format!("{:.1}", (bw - 1.0).max(0.5)) height=format!("{h:.1}") fill=color><title>{title}</title></rect> }
                })
                .collect::<Vec<_>>()
        })
        .collect_view();
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="h-40 w-full" role="img" aria-label=format!("{total} calls in the range") data-testid="calls-chart">
            {axes}
            {bars}
        </svg>
        <p class="mt-1 text-xs text-slate-500">
            <span class="text-emerald-600">"■ succeeded "</span><span class="text-red-500">"■ failed "</span>
            <span class="text-amber-500">"■ denied "</span><span class="text-slate-400">"■ other"</span>
            " · " {total} " calls · highest day " {max as i64}
        </p>
    }
}

#[component]
fn EgressChart(days: Vec<DayBar>) -> impl IntoView {
    let max = days
        .iter()
        .map(|d| d.egress_bytes)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = days.len().max(1) as f64;
    let bw = (PW / n).max(1.0);
    let total: i64 = days.iter().map(|d| d.egress_bytes).sum();
    let labels: Vec<&str> = days.iter().map(|d| d.day.as_str()).collect();
    let axes = day_axes(&labels, max, "bytes");
    let bars = days
        .iter()
        .enumerate()
        .filter(|(_, d)| d.egress_bytes > 0)
        .map(|(i, d)| {
            let h = d.egress_bytes as f64 / max * PH;
            let title = format!("{}: {} bytes", d.day, d.egress_bytes);
            view! { <rect x=format!("{:.1}", LEFT + i as f64 * bw) y=format!("{:.1}", PH - h) width=format!("{:.1}", (bw - 1.0).max(0.5)) height=format!("{h:.1}") fill="#6366f1"><title>{title}</title></rect> }
        })
        .collect_view();
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="h-40 w-full" role="img" aria-label=format!("{total} bytes of egress") data-testid="egress-chart">{axes}{bars}</svg>
        <p class="mt-1 text-xs text-slate-500">{format!("{:.6} GB in the range", total as f64 / 1e9)}</p>
    }
}

/// Horizontal bars: p95 (light) behind p50 (dark), per tool.
#[component]
fn LatencyChart(rows: Vec<LatencyBar>) -> impl IntoView {
    let max = rows.iter().map(|r| r.p95_ms).max().unwrap_or(0).max(1) as f64;
    let row_h = 22.0;
    let height = (rows.len() as f64 * row_h).max(row_h);
    let label_w = 220.0;
    let bars = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let y = i as f64 * row_h;
            let w95 = r.p95_ms as f64 / max * (W - label_w - 90.0);
            let w50 = r.p50_ms as f64 / max * (W - label_w - 90.0);
            view! {
                <g>
                    <text x="0" y=format!("{:.1}", y + 15.0) font-size="12" fill="#334155">{r.tool.clone()}</text>
                    <rect x=format!("{label_w}") y=format!("{:.1}", y + 4.0) width=format!("{w95:.1}") height="14" fill="#c7d2fe"/>
                    <rect x=format!("{label_w}") y=format!("{:.1}", y + 4.0) width=format!("{w50:.1}") height="14" fill="#4f46e5"/>
                    <text x=format!("{:.1}", label_w + w95 + 6.0) y=format!("{:.1}", y + 15.0) font-size="11" fill="#64748b">{format!("{} / {} ms", r.p50_ms, r.p95_ms)}</text>
                </g>
            }
        })
        .collect_view();
    view! {
        <svg viewBox=format!("0 0 {W} {height}") class="w-full" role="img" aria-label="handler time per tool, p50 and p95" data-testid="latency-chart">{bars}</svg>
        <p class="mt-1 text-xs text-slate-500">"dark: p50 · light: p95 · handler time in ms"</p>
    }
}

#[component]
fn TopTable(rows: Vec<TopRow>, what: &'static str) -> impl IntoView {
    let body = rows
        .into_iter()
        .map(|r| {
            view! {
                <tr class="border-t border-slate-100">
                    <td class="py-1 pr-4 font-mono text-xs">{r.name}</td>
                    <td class="py-1 pr-4 text-right">{r.calls}</td>
                    <td class="py-1 pr-4 text-right">{r.total_ms}</td>
                    <td class="py-1 text-right">{r.egress_bytes}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="w-full text-left text-sm" data-testid=format!("top-{what}")>
            <thead class="text-xs uppercase tracking-wide text-slate-500">
                <tr><th class="pb-1">{what}</th><th class="pb-1 text-right">"calls"</th><th class="pb-1 text-right">"ms"</th><th class="pb-1 text-right">"egress bytes"</th></tr>
            </thead>
            <tbody>{body}</tbody>
        </table>
    }
}

/// Each person's calls: how many, how many failed or a limit refused, and handler times.
#[component]
fn PeopleTable(rows: Vec<UserRow>) -> impl IntoView {
    let body = rows
        .into_iter()
        .map(|r| {
            view! {
                <tr class="border-t border-slate-100">
                    <td class="py-1 pr-4 text-xs">{r.email}</td>
                    <td class="py-1 pr-4 text-right">{r.calls}</td>
                    <td class="py-1 pr-4 text-right">{r.failed}</td>
                    <td class="py-1 pr-4 text-right">{r.rate_limited}</td>
                    <td class="py-1 text-right">{format!("{} / {}", r.p50_ms, r.p95_ms)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="w-full text-left text-sm" data-testid="by-user">
            <thead class="text-xs uppercase tracking-wide text-slate-500">
                <tr><th class="pb-1">"person"</th><th class="pb-1 text-right">"calls"</th><th class="pb-1 text-right">"failed"</th><th class="pb-1 text-right">"over a limit"</th><th class="pb-1 text-right">"p50 / p95 ms"</th></tr>
            </thead>
            <tbody>{body}</tbody>
        </table>
    }
}

#[component]
pub fn Usage() -> impl IntoView {
    let query = use_query_map();
    let range = move || (query.read().get("from"), query.read().get("to"));
    let data = Resource::new(range, |(from, to)| usage_page(from, to));
    view! {
        <Page current="/usage" title="Usage"
            subtitle="What this project's keys ran: every call, success or failure, its handler time, and the bytes built-in tools and the curl proxy sent and received.">
            <Loaded data=data content=move |d| {
                let (from, to) = (d.from.clone(), d.to.clone());
                view! {
                    <form method="get" action="/usage" class=format!("{CARD} mb-6 flex items-end gap-3")>
                        <div><label for="from" class=LABEL>"From"</label><input id="from" name="from" type="date" value=from.clone() class=INPUT/></div>
                        <div><label for="to" class=LABEL>"To"</label><input id="to" name="to" type="date" value=to.clone() class=INPUT/></div>
                        <button type="submit" class=BUTTON>"Show"</button>
                    </form>
                    <section class=format!("{CARD} mb-6")>
                        <div class="mb-2 flex items-center justify-between"><h2 class="font-semibold">"Calls per day by outcome"</h2>{csv_link("calls", &from, &to)}</div>
                        <CallsChart days=d.days.clone()/>
                    </section>
                    <section class=format!("{CARD} mb-6")>
                        <div class="mb-2 flex items-center justify-between"><h2 class="font-semibold">"Handler time per tool"</h2>{csv_link("latency", &from, &to)}</div>
                        <LatencyChart rows=d.latency.clone()/>
                    </section>
                    <section class=format!("{CARD} mb-6")>
                        <div class="mb-2 flex items-center justify-between"><h2 class="font-semibold">"Egress per day"</h2>{csv_link("egress", &from, &to)}</div>
                        <EgressChart days=d.days.clone()/>
                    </section>
                    <div class="grid grid-cols-2 gap-6">
                        <section class=CARD>
                            <div class="mb-2 flex items-center justify-between"><h2 class="font-semibold">"Top tools"</h2>{csv_link("tools", &from, &to)}</div>
                            <TopTable rows=d.top_tools.clone() what="tool"/>
                        </section>
                        <section class=CARD>
                            <div class="mb-2 flex items-center justify-between"><h2 class="font-semibold">"Top keys"</h2>{csv_link("keys", &from, &to)}</div>
                            <TopTable rows=d.top_keys.clone() what="key"/>
                        </section>
                    </div>
                    <section class=format!("{CARD} mt-6")>
                        <h2 class="mb-2 font-semibold">"By person"</h2>
                        <PeopleTable rows=d.by_user.clone()/>
                    </section>
                }.into_any()
            }/>
        </Page>
    }
}
