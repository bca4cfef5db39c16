//! Every list, search and find tool of the shipped plugins can reach the provider's next page:
//! it takes the provider's paging input and its answer says where the next page is
//! (`result.next`), or it answers the provider's own paging fields unchanged. A tool that does
//! neither is listed below with the reason, so a new list tool cannot quietly return page one
//! only.

use std::path::Path;

use serde_json::{json, Value};
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

/// List tools whose provider documents no paging input: the endpoint answers the whole list at
/// once. Each reason names the reference that was checked.
const PROVIDER_HAS_NO_PAGING: &[(&str, &str)] = &[
    (
        "asana_search_tasks",
        "Asana: search results are not stable, so the traditional pagination is not available \
         here; only limit (max 100). https://developers.asana.com/reference/searchtasksforworkspace",
    ),
    (
        "discord_list_guild_channels",
        "Discord Get Guild Channels: guild id only, answers all channels (no threads). \
         https://discord.com/developers/docs/resources/guild#get-guild-channels",
    ),
    (
        "gmail_list_labels",
        "users.labels.list: userId only, the request body must be empty, the answer is \
         labels[] with no nextPageToken. \
         https://developers.google.com/gmail/api/reference/rest/v1/users.labels/list",
    ),
    (
        "hubspot_list_deal_pipelines",
        "GET /crm/v3/pipelines/{objectType} answers every pipeline in results[], no paging \
         parameter or paging object. \
         https://developers.hubspot.com/docs/api-reference/legacy/crm/pipelines/get-pipelines",
    ),
    (
        "jira_list_transitions",
        "Get transitions takes expand, transitionId, skipRemoteOnlyCondition, \
         includeUnavailableTransitions, sortByOpsBarAndStatus: no startAt/maxResults. \
         https://developer.atlassian.com/cloud/jira/platform/rest/v3/api-group-issues/#api-rest-api-3-issue-issueidorkey-transitions-get",
    ),
    (
        "superset_list_dashboard_charts",
        "GET /api/v1/dashboard/{id_or_slug}/charts takes the path parameter only and answers \
         result[] without count. https://superset.apache.org/developer-docs/api/ \
         (superset/dashboards/api.py, get_charts)",
    ),
];

/// Tools whose Rust handler (`core/src/plugins/logic/`) answers `{items, next_page}` itself, the
/// way `result.next` does; the handler's own tests cover it.
const HANDLER_ANSWERS_THE_NEXT_PAGE: &[(&str, &str)] = &[(
    "hackernews_top_stories",
    "offset into the story list; next_page is the offset after this page (logic/hackernews.rs)",
)];

/// List tools that still cannot reach a second page. Each is a known gap (issue 29): fix it by
/// giving the tool its provider's paging input and a `result.next`, then remove it from here.
const KNOWN_GAPS: &[(&str, &str)] = &[];

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
    let handled = HANDLER_ANSWERS_THE_NEXT_PAGE
        .iter()
        .any(|(n, _)| *n == t.name);
    if next.is_none() && !handled {
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
            if listed(NOT_A_LIST, &t.name)
                || listed(ANSWERS_THE_PROVIDERS_PAGING, &t.name)
                || listed(PROVIDER_HAS_NO_PAGING, &t.name)
            {
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
        .chain(PROVIDER_HAS_NO_PAGING)
        .chain(HANDLER_ANSWERS_THE_NEXT_PAGE)
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

/// A tool's answer to a recorded provider reply, shaped by its shipped `result` rule.
fn answer(defs: &[IntegrationDef], tool: &str, reply: Value, args: Value) -> Value {
    let t = defs
        .iter()
        .find_map(|d| d.tool(tool))
        .unwrap_or_else(|| panic!("{tool} is not shipped"));
    workbench_core::integrations::request::shape("P", t.result.as_ref(), reply, None, &args)
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

/// Where the tool's request carries the paging input: the URL's query or the JSON body.
fn sent(defs: &[IntegrationDef], tool: &str, args: Value) -> String {
    use workbench_core::integrations::request::{prepare, Body};
    let (d, t) = defs
        .iter()
        .find_map(|d| d.tool(tool).map(|t| (d, t)))
        .unwrap_or_else(|| panic!("{tool} is not shipped"));
    let base = url::Url::parse(&d.base_url).unwrap();
    let p = prepare(&base, t.request.as_ref().unwrap(), &args).unwrap();
    match p.body {
        Some(Body::Json(b)) => b.to_string(),
        _ => p
            .url
            .query()
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("&")
            })
            .unwrap_or_default(),
    }
}

#[test]
fn linear_lists_answer_the_connections_end_cursor_until_has_next_page_is_false() {
    let defs = definitions();
    for (tool, connection, args) in [
        ("linear_list_issues", "issues", json!({ "limit": 2 })),
        ("linear_list_teams", "teams", json!({ "limit": 2 })),
        (
            "linear_list_workflow_states",
            "team.states",
            json!({ "team_id": "t1", "limit": 2 }),
        ),
    ] {
        let reply = |more: bool, cursor: &str| {
            let mut conn = json!({
                "nodes": [{ "id": "a" }, { "id": "b" }],
                "pageInfo": { "hasNextPage": more, "endCursor": cursor }
            });
            for key in connection.rsplit('.') {
                conn = json!({ key: conn });
            }
            json!({ "data": conn })
        };
        let first = answer(&defs, tool, reply(true, "c2"), args.clone());
        assert_eq!(first["items"].as_array().map(Vec::len), Some(2), "{tool}");
        assert_eq!(first["next_cursor"], "c2", "{tool}: {first}");
        let mut next = args.clone();
        next["after"] = first["next_cursor"].clone();
        assert!(
            sent(&defs, tool, next).contains(r#""after":"c2""#),
            "{tool}: the cursor goes in the after variable"
        );
        let last = answer(&defs, tool, reply(false, "c4"), args);
        assert_eq!(last["next_cursor"], Value::Null, "{tool}: {last}");
    }
}

#[test]
fn pagerduty_lists_continue_at_offset_plus_the_page_while_more_is_true() {
    let defs = definitions();
    for (tool, key) in [
        ("pagerduty_list_incidents", "incidents"),
        ("pagerduty_list_oncalls", "oncalls"),
        ("pagerduty_list_services", "services"),
    ] {
        let reply = |more: bool| json!({ key: [{ "id": "P1" }, { "id": "P2" }], "limit": 2, "offset": 4, "more": more, "total": null });
        let args = json!({ "limit": 2, "offset": 4 });
        let first = answer(&defs, tool, reply(true), args.clone());
        assert_eq!(first["items"].as_array().map(Vec::len), Some(2), "{tool}");
        assert_eq!(first["next_page"], 6, "{tool}: {first}");
        let mut next = args.clone();
        next["offset"] = first["next_page"].clone();
        assert!(sent(&defs, tool, next).contains("offset=6"), "{tool}");
        let last = answer(&defs, tool, reply(false), args);
        assert_eq!(last["next_page"], Value::Null, "{tool}: {last}");
    }
}

#[test]
fn superset_lists_answer_the_next_page_number_until_count_is_reached() {
    let defs = definitions();
    for tool in [
        "superset_list_dashboards",
        "superset_list_charts",
        "superset_list_databases",
        "superset_list_datasets",
    ] {
        let reply = |n: u64| {
            let items: Vec<Value> = (0..n).map(|i| json!({ "id": i })).collect();
            json!({ "count": 5, "ids": [], "result": items })
        };
        let first = answer(&defs, tool, reply(2), json!({ "page": 0, "page_size": 2 }));
        assert_eq!(first["items"].as_array().map(Vec::len), Some(2), "{tool}");
        assert_eq!(first["next_page"], 1, "{tool}: {first}");
        assert_eq!(
            answer(&defs, tool, reply(2), json!({ "page": 1, "page_size": 2 }))["next_page"],
            2,
            "{tool}"
        );
        assert!(
            sent(&defs, tool, json!({ "page": 2, "page_size": 2 }))
                .contains("q=(page:2,page_size:2)"),
            "{tool}: the page goes in the rison q"
        );
        let last = answer(&defs, tool, reply(1), json!({ "page": 2, "page_size": 2 }));
        assert_eq!(
            last["next_page"],
            Value::Null,
            "{tool}: 5 items end on page 2"
        );
    }
}
