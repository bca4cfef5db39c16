//! Search quality on a dev set: 163 realistic tools (the 12 built-ins and 16 plugin
//! integrations) and 207 agent-style queries, 26 of them with typos. Fails when recall drops
//! below the floors measured when the ranking was tuned.

use serde::Deserialize;
use workbench_core::catalog::search::{SearchDoc, SearchIndex};

#[derive(Deserialize)]
struct ToolFixture {
    name: String,
    integration: String,
    description: String,
}

#[derive(Deserialize)]
struct QueryFixture {
    query: String,
    expected: String,
}

const RECALL_AT_1_FLOOR: f64 = 0.93;
const RECALL_AT_5_FLOOR: f64 = 0.98;

#[test]
fn search_recall_meets_the_floors_on_the_dev_set() {
    let tools: Vec<ToolFixture> =
        serde_json::from_str(include_str!("fixtures/search_catalog.json")).unwrap();
    let queries: Vec<QueryFixture> =
        serde_json::from_str(include_str!("fixtures/search_queries.json")).unwrap();
    assert!(queries.len() >= 100);
    let docs: Vec<SearchDoc> = tools
        .iter()
        .map(|t| SearchDoc {
            name: &t.name,
            integration: &t.integration,
            description: &t.description,
            params: "",
        })
        .collect();
    let index = SearchIndex::build(&docs);
    let (mut at1, mut at5) = (0usize, 0usize);
    let mut misses = Vec::new();
    for q in &queries {
        let hits = index.search(&q.query, 5, |_| true).hits;
        let names: Vec<&str> = hits.iter().map(|h| tools[h.doc].name.as_str()).collect();
        match names.iter().position(|n| *n == q.expected) {
            Some(0) => {
                at1 += 1;
                at5 += 1;
            }
            Some(_) => {
                at5 += 1;
                misses.push(format!(
                    "{:?}: expected {} got {:?}",
                    q.query, q.expected, names
                ));
            }
            None => misses.push(format!(
                "{:?}: expected {} (not in top 5) got {:?}",
                q.query, q.expected, names
            )),
        }
    }
    let n = queries.len() as f64;
    let (r1, r5) = (at1 as f64 / n, at5 as f64 / n);
    eprintln!(
        "search dev set: {} queries, recall@1 = {r1:.3}, recall@5 = {r5:.3}",
        queries.len()
    );
    for m in &misses {
        eprintln!("  miss {m}");
    }
    assert!(
        r1 >= RECALL_AT_1_FLOOR,
        "recall@1 {r1:.3} < {RECALL_AT_1_FLOOR}"
    );
    assert!(
        r5 >= RECALL_AT_5_FLOOR,
        "recall@5 {r5:.3} < {RECALL_AT_5_FLOOR}"
    );
}
