//! Search on a public tool-use dataset nobody here wrote: NESTFUL (IBM, Apache-2.0; from the
//! PyPI package nestful-wrapper 0.1.7, extracted by `scripts/search_data.py` into
//! `fixtures/public/nestful.json`): 173 tools of many vendors (RapidAPI, Glaive, Schema-Guided
//! Dialogue services, Booking.com) and 1,300 requests as their authors wrote them, each labelled
//! with the tools its calls use. The requests are split by a hash of their text into a tuning
//! half and a held-out half; the ranking is measured beside plain BM25 over the same text, on
//! the dataset's tools alone and next to the shipped catalog. Run with `--nocapture` for the
//! report. A request counts as found at k when any of its tools is in the top k.

use std::collections::BTreeMap;

#[path = "support/search.rs"]
mod search;

use serde::Deserialize;
use workbench_core::catalog::search::{param_text, SearchDoc, SearchIndex};

#[derive(Deserialize)]
struct Fixture {
    tools: Vec<Tool>,
    queries: Vec<Query>,
}

#[derive(Deserialize, Clone)]
struct Tool {
    name: String,
    integration: String,
    description: String,
    params: String,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    expected: Vec<String>,
    subset: String,
}

fn fixture() -> Fixture {
    serde_json::from_str(include_str!("fixtures/public/nestful.json")).unwrap()
}

/// The shipped catalog as the same kind of records.
fn shipped() -> Vec<Tool> {
    search::shipped()
        .iter()
        .map(|s| Tool {
            name: s.name.to_string(),
            integration: s.integration.clone(),
            description: s.description.clone(),
            params: param_text(&s.input_schema),
        })
        .collect()
}

/// FNV-1a: a stable split that does not depend on the order of the file.
fn held_out(q: &str) -> bool {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in q.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h % 2 == 1
}

#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    at5: usize,
    rr: f64,
}

impl Tally {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            self.at5 += (r < 5) as usize;
            self.rr += 1.0 / (r + 1) as f64;
        }
    }
    fn r5(&self) -> f64 {
        self.at5 as f64 / self.n.max(1) as f64
    }
    fn mrr(&self) -> f64 {
        self.rr / self.n.max(1) as f64
    }
}

/// (ours, bm25) over `queries` against the catalog `tools`.
fn measure(tools: &[Tool], queries: &[&Query]) -> (Tally, Tally) {
    let docs: Vec<SearchDoc> = tools
        .iter()
        .map(|t| SearchDoc {
            name: &t.name,
            integration: &t.integration,
            description: &t.description,
            params: &t.params,
        })
        .collect();
    let index = SearchIndex::build(&docs);
    let bm25 = search::Bm25::new(
        &tools
            .iter()
            .map(|t| {
                format!(
                    "{} {} {} {}",
                    t.name, t.integration, t.description, t.params
                )
            })
            .collect::<Vec<_>>(),
    );
    let (mut ours, mut base) = (Tally::default(), Tally::default());
    for q in queries {
        let rank = |docs: &[usize]| {
            docs.iter()
                .position(|d| q.expected.contains(&tools[*d].name))
        };
        let hits: Vec<usize> = index
            .search(&q.query, 10, |_| true)
            .hits
            .iter()
            .map(|h| h.doc)
            .collect();
        ours.add(rank(&hits));
        let b: Vec<usize> = bm25.search(&q.query, 10).iter().map(|(d, _)| *d).collect();
        base.add(rank(&b));
    }
    (ours, base)
}

fn report(part: &str, held: bool) -> Vec<(String, Tally, Tally)> {
    let f = fixture();
    let queries: Vec<&Query> = f
        .queries
        .iter()
        .filter(|q| held_out(&q.query) == held)
        .collect();
    let mut with_shipped = shipped();
    with_shipped.extend(f.tools.iter().cloned());
    let mut rows = Vec::new();
    for (label, tools) in [
        ("NESTFUL tools alone", &f.tools),
        ("NESTFUL + shipped catalog", &with_shipped),
    ] {
        let (o, b) = measure(tools, &queries);
        rows.push((format!("{label} ({} tools)", tools.len()), o, b));
        let mut subsets: BTreeMap<&str, Vec<&Query>> = BTreeMap::new();
        for q in &queries {
            subsets.entry(q.subset.as_str()).or_default().push(q);
        }
        for (s, qs) in subsets {
            let (o, b) = measure(tools, &qs);
            rows.push((format!("  {s}"), o, b));
        }
    }
    println!("\nNESTFUL, {part}: {} queries", queries.len());
    println!(
        "{:<40} {:>5}  {:>8} {:>6}   {:>8} {:>6}",
        "catalog", "n", "ours@5", "MRR", "bm25@5", "MRR"
    );
    for (label, o, b) in &rows {
        println!(
            "{label:<40} {:>5}  {:>8.3} {:>6.3}   {:>8.3} {:>6.3}",
            o.n,
            o.r5(),
            o.mrr(),
            b.r5(),
            b.mrr()
        );
    }
    rows
}

#[test]
fn search_on_a_public_dataset_tuning_half() {
    let rows = report("tuning half", false);
    assert!(rows[0].1.n >= 500);
}

/// The held-out half, looked at once when this test was written (BM25F ranking, before any
/// tuning on this dataset). Floors: the ranking's MRR is not below plain BM25's at either
/// catalog size.
#[test]
fn search_on_a_public_dataset_held_out_half() {
    let rows = report("held-out half", true);
    assert!(rows[0].1.n >= 500);
    for (label, o, b) in rows.iter().filter(|r| !r.0.starts_with(' ')) {
        assert!(
            o.mrr() >= b.mrr(),
            "{label}: MRR {:.3} under BM25's {:.3}",
            o.mrr(),
            b.mrr()
        );
    }
}
