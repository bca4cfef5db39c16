//! What the search evaluations share: the shipped catalog, the public catalogs, the plain
//! BM25 baseline every ranking is reported beside, and the measurement itself.

#![allow(dead_code)] // each evaluation uses part of it

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use workbench_core::catalog::search::{param_text, SearchDoc, SearchIndex};
use workbench_core::catalog::ToolSpec;

/// A tool as the evaluations index it.
#[derive(Deserialize, Clone)]
pub struct Record {
    pub name: String,
    pub integration: String,
    pub description: String,
    pub params: String,
}

/// The shipped catalog as records.
pub fn shipped_records() -> Vec<Record> {
    shipped()
        .iter()
        .map(|s| Record {
            name: s.name.to_string(),
            integration: s.integration.clone(),
            description: s.description.clone(),
            params: param_text(&s.input_schema),
        })
        .collect()
}

/// The first `n` (at most 10,000) operations of other vendors' APIs from the APIs.guru OpenAPI
/// directory (`fixtures/public/openapi_directory.json`, `scripts/search_data.py`): tools no
/// query expects, in a fixed order, so the first 1,000 are part of the first 10,000.
pub fn other_vendors(n: usize) -> Vec<Record> {
    #[derive(Deserialize)]
    struct Fixture {
        tools: Vec<Record>,
    }
    let f: Fixture =
        serde_json::from_str(include_str!("../fixtures/public/openapi_directory.json")).unwrap();
    assert!(
        f.tools.len() >= n,
        "the fixture has {} tools",
        f.tools.len()
    );
    f.tools.into_iter().take(n).collect()
}

#[derive(Default, Clone, Copy)]
pub struct Tally {
    pub n: usize,
    pub at5: usize,
    pub rr: f64,
}

impl Tally {
    pub fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            self.at5 += (r < 5) as usize;
            self.rr += 1.0 / (r + 1) as f64;
        }
    }
    pub fn r5(&self) -> f64 {
        self.at5 as f64 / self.n.max(1) as f64
    }
    pub fn mrr(&self) -> f64 {
        self.rr / self.n.max(1) as f64
    }
}

/// (the ranking, BM25) over `queries` (text, the tools that answer it) against `tools`. A
/// query counts as found at k when any of its tools is in the top k.
pub fn measure(tools: &[Record], queries: &[(&str, &[String])]) -> (Tally, Tally) {
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
    let bm25 = Bm25::new(
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
    for (q, expected) in queries {
        let rank = |docs: &[usize]| docs.iter().position(|d| expected.contains(&tools[*d].name));
        let hits: Vec<usize> = index
            .search(q, 10, |_| true)
            .hits
            .iter()
            .map(|h| h.doc)
            .collect();
        ours.add(rank(&hits));
        let b: Vec<usize> = bm25.search(q, 10).iter().map(|(d, _)| *d).collect();
        base.add(rank(&b));
    }
    (ours, base)
}

/// Every built-in and plugin tool, as a fresh instance ships them.
pub fn shipped() -> Vec<ToolSpec> {
    let mut specs = workbench_core::builtin::specs().unwrap();
    let plugins = workbench_core::plugins::load_integrations(
        &BTreeMap::new(),
        &workbench_core::integrations::api_client(),
    )
    .unwrap();
    for i in plugins.all() {
        specs.extend(i.specs().unwrap());
    }
    specs
}

/// Okapi BM25 (k1 = 1.2, b = 0.75) over name, integration, description and parameters as one
/// bag of lowercase alphanumeric words: no stemming, synonyms, typo tolerance or field weights.
pub struct Bm25 {
    docs: Vec<HashMap<String, f64>>,
    lens: Vec<f64>,
    avg: f64,
    df: HashMap<String, f64>,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

impl Bm25 {
    pub fn new(texts: &[String]) -> Bm25 {
        let mut docs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, f64> = HashMap::new();
        for t in texts {
            let mut tf: HashMap<String, f64> = HashMap::new();
            let w = words(t);
            lens.push(w.len() as f64);
            for x in w {
                *tf.entry(x).or_default() += 1.0;
            }
            for k in tf.keys() {
                *df.entry(k.clone()).or_default() += 1.0;
            }
            docs.push(tf);
        }
        let avg = lens.iter().sum::<f64>() / lens.len().max(1) as f64;
        Bm25 {
            docs,
            lens,
            avg,
            df,
        }
    }

    /// (doc, score), best first, at most `limit`.
    pub fn search(&self, q: &str, limit: usize) -> Vec<(usize, f64)> {
        let n = self.docs.len() as f64;
        let mut terms = words(q);
        terms.sort();
        terms.dedup();
        let mut scored: Vec<(usize, f64)> = (0..self.docs.len())
            .map(|d| {
                let s = terms
                    .iter()
                    .filter_map(|t| {
                        let f = *self.docs[d].get(t)?;
                        let df = self.df[t];
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * self.lens[d] / self.avg)))
                    })
                    .sum::<f64>();
                (d, s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }
}
