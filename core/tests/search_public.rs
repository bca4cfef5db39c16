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

use search::{Record, Tally};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    tools: Vec<Record>,
    queries: Vec<Query>,
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

/// FNV-1a: a stable split that does not depend on the order of the file.
fn held_out(q: &str) -> bool {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in q.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h % 2 == 1
}

fn measure(tools: &[Record], queries: &[&Query]) -> (Tally, Tally) {
    let qs: Vec<(&str, &[String])> = queries
        .iter()
        .map(|q| (q.query.as_str(), q.expected.as_slice()))
        .collect();
    search::measure(tools, &qs)
}

fn report(part: &str, held: bool) -> Vec<(String, Tally, Tally)> {
    let f = fixture();
    let queries: Vec<&Query> = f
        .queries
        .iter()
        .filter(|q| held_out(&q.query) == held)
        .collect();
    let mut with_shipped = search::shipped_records();
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
