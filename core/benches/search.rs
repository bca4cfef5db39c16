//! search_tools latency over generated catalogues of 200, 2,000 and 20,000 tools, with a mix
//! of exact, reordered, synonym and typo queries, with the meaning model (when installed) and
//! words only; first it prints what the model costs: load time, resident memory, and index
//! build time. `cargo bench -p workbench-core --bench search`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::Instant;

use workbench_core::catalog::search::embed::{self, Embedder};
use workbench_core::catalog::search::{SearchDoc, SearchIndex};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

const INTEGRATIONS: &[&str] = &[
    "github",
    "slack",
    "jira",
    "linear",
    "notion",
    "gdrive",
    "gmail",
    "calendar",
    "hubspot",
    "stripe",
    "salesforce",
    "zendesk",
    "confluence",
    "trello",
    "asana",
    "superset",
    "dropbox",
    "box",
    "airtable",
    "shopify",
    "twilio",
    "sendgrid",
    "pagerduty",
    "datadog",
    "sentry",
    "gitlab",
    "bitbucket",
    "figma",
    "miro",
    "intercom",
];
const ACTIONS: &[&str] = &[
    "create", "get", "list", "update", "delete", "search", "send", "archive", "assign", "export",
];
const OBJECTS: &[&str] = &[
    "issue",
    "message",
    "file",
    "user",
    "channel",
    "comment",
    "project",
    "invoice",
    "contact",
    "deal",
    "ticket",
    "event",
    "page",
    "record",
    "task",
    "board",
    "report",
    "customer",
    "order",
    "alert",
    "incident",
    "repo",
    "branch",
    "folder",
    "note",
    "label",
    "team",
    "webhook",
    "subscription",
    "dashboard",
    "query",
    "sheet",
    "form",
    "campaign",
    "product",
    "payment",
    "refund",
    "meeting",
    "article",
    "attachment",
    "release",
    "build",
    "deploy",
    "metric",
    "log",
    "segment",
    "list",
    "template",
    "workflow",
    "role",
    "group",
    "space",
    "doc",
    "email",
    "thread",
    "reply",
    "sprint",
    "epic",
    "milestone",
    "review",
    "pull",
    "commit",
    "tag",
    "pipeline",
    "job",
    "runner",
    "variable",
    "secret",
    "key",
    "token",
];

struct Generated {
    names: Vec<String>,
    integrations: Vec<String>,
    descriptions: Vec<String>,
}

fn catalogue(n: usize) -> Generated {
    let mut g = Generated {
        names: vec![],
        integrations: vec![],
        descriptions: vec![],
    };
    let mut i = 0usize;
    'outer: for round in 0.. {
        for integ in INTEGRATIONS {
            for obj in OBJECTS {
                for act in ACTIONS {
                    if g.names.len() == n {
                        break 'outer;
                    }
                    i += 1;
                    let suffix = if round == 0 {
                        String::new()
                    } else {
                        format!("_v{round}")
                    };
                    g.names.push(format!("{integ}_{act}_{obj}{suffix}"));
                    g.integrations.push((*integ).to_string());
                    g.descriptions.push(format!(
                        "{} a {obj} in {integ}. Returns the {obj} with its id, title, owner and timestamps (variant {i}).",
                        act[..1].to_uppercase() + &act[1..]
                    ));
                }
            }
        }
    }
    g
}

const QUERIES: &[&str] = &[
    "create jira issue",
    "issue jira create",
    "send a slack message to a channel",
    "new github pull request",
    "delete stripe refund",
    "craete jria isue",
    "list hubspot contacts",
    "search zendesk tickets for customer",
    "export superset dashboard as csv",
    "archive trello board",
];

fn bench(c: &mut Criterion) {
    let dir = embed::model_dir().expect("WB_SEARCH_MODEL_DIR=off");
    let before = rss_kib();
    let t = Instant::now();
    let model = std::sync::Arc::new(
        Embedder::load(&dir).unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh")),
    );
    println!(
        "search model: loaded and checked in {:.0} ms, resident memory +{} MiB",
        t.elapsed().as_secs_f64() * 1000.0,
        (rss_kib() - before) / 1024
    );
    let mut group = c.benchmark_group("search_tools");
    for n in [200usize, 2_000, 20_000] {
        let g = catalogue(n);
        let docs: Vec<SearchDoc> = (0..n)
            .map(|i| SearchDoc {
                name: &g.names[i],
                integration: &g.integrations[i],
                description: &g.descriptions[i],
                params: "",
            })
            .collect();
        let t = Instant::now();
        let words = SearchIndex::build_with(&docs, None);
        let words_ms = t.elapsed().as_secs_f64() * 1000.0;
        let before = rss_kib();
        let t = Instant::now();
        let index = SearchIndex::build_with(&docs, Some(model.clone()));
        println!(
            "{n} tools: index built in {:.1} ms with the model ({words_ms:.1} ms words only), \
             its vectors +{} MiB",
            t.elapsed().as_secs_f64() * 1000.0,
            (rss_kib().saturating_sub(before)) / 1024
        );
        for (label, index) in [("model", &index), ("words", &words)] {
            group.bench_with_input(BenchmarkId::new(label, n), index, |b, index| {
                let mut q = 0usize;
                b.iter(|| {
                    q = (q + 1) % QUERIES.len();
                    std::hint::black_box(index.search(QUERIES[q], 10, |_| true))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
