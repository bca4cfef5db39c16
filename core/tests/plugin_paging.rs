//! Every list, search and find tool of the shipped plugins can reach the provider's next page:
//! it takes the provider's paging input and its answer says where the next page is
//! (`result.next`), or it answers the provider's own paging fields unchanged. A tool that does
//! neither is listed below with the reason, so a new list tool cannot quietly return page one
//! only.

use std::path::Path;

use serde_json::Value;
use workbench_core::integrations::{IntegrationDef, ToolDef};

/// Inputs that select a page (offset, page number, cursor or "after this id").
const PAGING_INPUTS: &[&str] = &[
    "page",
    "cursor",
    "offset",
    "after",
    "before",
    "start_at",
    "page_token",
    "start_cursor",
    "starting_after",
    "next_cursor",
];

/// The answer carries the provider's own paging fields, untouched, next to the items.
const ANSWERS_THE_PROVIDERS_PAGING: &[(&str, &str)] = &[
    (
        "stripe_list_customers",
        "fields keep has_more; the next page starts after the last data[].id (starting_after)",
    ),
    (
        "stripe_list_payment_intents",
        "fields keep has_more; starting_after is the last data[].id",
    ),
    (
        "stripe_list_charges",
        "fields keep has_more; starting_after is the last data[].id",
    ),
    (
        "stripe_list_invoices",
        "fields keep has_more; starting_after is the last data[].id",
    ),
    (
        "stripe_list_subscriptions",
        "fields keep has_more; starting_after is the last data[].id",
    ),
    (
        "dropbox_list_folder",
        "the whole answer: cursor and has_more, for dropbox_list_folder_continue",
    ),
    (
        "dropbox_list_folder_continue",
        "the whole answer: cursor and has_more",
    ),
    (
        "dropbox_search",
        "the whole answer: cursor and has_more, for dropbox_search_continue",
    ),
    (
        "dropbox_search_continue",
        "the whole answer: cursor and has_more",
    ),
    (
        "linear_search_issues",
        "result.path keeps the connection's pageInfo (endCursor, hasNextPage)",
    ),
    (
        "linear_list_projects",
        "result.path keeps the connection's pageInfo (endCursor, hasNextPage)",
    ),
    (
        "linear_list_users",
        "result.path keeps the connection's pageInfo (endCursor, hasNextPage)",
    ),
];

/// Not list tools, though named like one.
const NOT_A_LIST: &[(&str, &str)] = &[
    (
        "slack_find_user_by_email",
        "users.lookupByEmail answers one user",
    ),
    (
        "google_calendar_find_free_busy",
        "freeBusy answers busy intervals for a time range, not a list to page",
    ),
];

/// List tools that still cannot reach a second page, or whose provider was not yet checked to
/// answer everything at once. Each is a known gap (issue 29): fix it by giving the tool its
/// provider's paging input and a `result.next`, then remove it from here.
const KNOWN_GAPS: &[(&str, &str)] = &[
    (
        "asana_search_tasks",
        "not checked: Asana's task search documents no cursor (newest first, use modified_at)",
    ),
    (
        "discord_list_guild_channels",
        "not checked: Discord's Get Guild Channels takes no paging parameter",
    ),
    (
        "gmail_list_labels",
        "not checked: users.labels.list takes no page token",
    ),
    (
        "hackernews_top_stories",
        "Rust handler: one list of up to 500 ids, then one request per story up to limit",
    ),
    (
        "hubspot_list_deal_pipelines",
        "not checked: the pipelines endpoint takes no paging parameter",
    ),
    (
        "jira_list_transitions",
        "not checked: the transitions endpoint takes no paging parameter",
    ),
    (
        "linear_list_teams",
        "not checked: no first/after variables and pageInfo is dropped",
    ),
    (
        "linear_list_issues",
        "gap: takes first but no after, and result.path drops pageInfo",
    ),
    (
        "linear_list_workflow_states",
        "not checked: no first/after variables and pageInfo is dropped",
    ),
    (
        "pagerduty_list_incidents",
        "gap: takes offset, but result.path drops the body's more flag",
    ),
    (
        "pagerduty_list_oncalls",
        "gap: takes offset, but result.path drops the body's more flag",
    ),
    (
        "pagerduty_list_services",
        "gap: takes offset, but result.path drops the body's more flag",
    ),
    (
        "superset_list_dashboards",
        "gap: the page lives inside the rison q and result.path drops count",
    ),
    (
        "superset_list_charts",
        "gap: the page lives inside the rison q and result.path drops count",
    ),
    (
        "superset_list_databases",
        "gap: the page lives inside the rison q and result.path drops count",
    ),
    (
        "superset_list_dashboard_charts",
        "not checked: the endpoint takes no paging parameter",
    ),
    (
        "superset_list_datasets",
        "gap: takes page, but result.path drops count",
    ),
];

fn definitions() -> Vec<IntegrationDef> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let f = e.unwrap().path();
        if f.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&f).unwrap();
            out.push(IntegrationDef::parse(&text, &f.display().to_string()).unwrap());
        }
    }
    assert!(out.len() >= 20, "read {} definitions", out.len());
    out
}

/// A tool named for listing, searching or finding that only reads.
fn is_list_tool(t: &ToolDef) -> bool {
    let words: Vec<&str> = t.name.split('_').skip(1).collect();
    let listy = words
        .iter()
        .any(|w| matches!(*w, "list" | "search" | "find" | "query" | "top"))
        || ["history", "replies", "children"].contains(words.last().unwrap_or(&""));
    listy && t.side_effects == workbench_core::catalog::SideEffects::None
}

fn inputs(t: &ToolDef) -> Vec<String> {
    t.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Why a list tool cannot page, or None when it can.
fn cannot_page(t: &ToolDef) -> Option<String> {
    let next = t.result.as_ref().and_then(|r| r.next.as_ref());
    let names = inputs(t);
    let paging_input = names.iter().any(|n| PAGING_INPUTS.contains(&n.as_str()))
        || next
            .and_then(|n| n.start.as_ref())
            .is_some_and(|s| names.contains(s));
    if !paging_input {
        return Some(format!(
            "no paging input (one of {PAGING_INPUTS:?}) in {names:?}"
        ));
    }
    if next.is_none() {
        return Some("its answer has no result.next: the next page is dropped".into());
    }
    None
}

#[test]
fn every_list_tool_can_reach_the_next_page() {
    let listed = |l: &[(&str, &str)], n: &str| l.iter().any(|(t, _)| *t == n);
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    for d in definitions() {
        for t in d.tools.iter().filter(|t| is_list_tool(t)) {
            seen.push(t.name.clone());
            if listed(NOT_A_LIST, &t.name) || listed(ANSWERS_THE_PROVIDERS_PAGING, &t.name) {
                continue;
            }
            match (cannot_page(t), listed(KNOWN_GAPS, &t.name)) {
                (Some(why), false) => failures.push(format!("{}: {why}", t.name)),
                (None, true) => {
                    failures.push(format!("{}: pages now, remove it from KNOWN_GAPS", t.name))
                }
                _ => {}
            }
        }
    }
    for (name, _) in ANSWERS_THE_PROVIDERS_PAGING
        .iter()
        .chain(NOT_A_LIST)
        .chain(KNOWN_GAPS)
    {
        if !seen.contains(&(*name).to_owned()) {
            failures.push(format!("{name} is listed here but is no shipped list tool"));
        }
    }
    assert!(seen.len() >= 90, "found {} list tools", seen.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_issue_29_list_tools_page() {
    let defs = definitions();
    for name in [
        "slack_list_channels",
        "github_list_issues",
        "github_list_prs",
        "github_list_repos",
        "discord_list_guilds",
        "jira_find_users",
        "sentry_list_organizations",
    ] {
        let t = defs
            .iter()
            .find_map(|d| d.tool(name))
            .unwrap_or_else(|| panic!("{name} is not shipped"));
        assert_eq!(cannot_page(t), None, "{name}");
    }
}
