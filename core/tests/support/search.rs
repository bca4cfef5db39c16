//! What the search evaluations share: the shipped catalog and the plain BM25 baseline every
//! ranking is reported beside.

use std::collections::{BTreeMap, HashMap};

use workbench_core::catalog::ToolSpec;

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
