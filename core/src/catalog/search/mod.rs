//! Tool search: BM25F over what each tool says about itself (its name split into words, its
//! integration, its description, its parameters' names and descriptions), with Snowball
//! stemming, synonym groups, one-letter typos and unfinished words; each hit's score is a
//! calibrated probability that the tool fits the request (`calibrate`), and a search whose best
//! hit is unlikely to fit says so (`Found::no_match`).

pub mod calibrate;
pub mod embed;
mod text;
mod typo;

use std::collections::HashMap;
use std::sync::Arc;

use embed::{DenseIndex, Embedder};
use serde_json::Value;

pub use calibrate::Features;
use text::{normalize_name, terms, Term, SYNONYM_FACTOR};
use typo::Typos;

/// What the index needs to know about one tool.
pub struct SearchDoc<'a> {
    pub name: &'a str,
    pub integration: &'a str,
    pub description: &'a str,
    /// The input parameters' names and descriptions, as one text.
    pub params: &'a str,
}

/// One hit: the document's position in the indexed slice, its calibrated score in (0, 1] (the
/// estimated probability that the tool fits; never higher than the hit above it), and what the
/// score was computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
    pub features: Features,
}

/// A search's answer: the hits, best first, and whether even the best is unlikely to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub hits: Vec<Hit>,
    pub no_match: bool,
}

/// The fields of a tool, each with its weight and length normalisation (BM25F).
const FIELDS: usize = 4;
const NAME: usize = 0;
const INTEGRATION: usize = 1;
const DESCRIPTION: usize = 2;
const PARAMS: usize = 3;
const FIELD_WEIGHT: [f32; FIELDS] = [3.0, 2.5, 1.0, 0.4];
const FIELD_B: [f32; FIELDS] = [0.3, 0.0, 0.75, 0.75];
const K1: f32 = 1.2;

const TYPO_FACTOR: f32 = 0.6;
const PREFIX_FACTOR: f32 = 0.7;
const MAX_EXPANSIONS: usize = 24;
/// How deep each ranking is read for the fusion.
const FUSION_DEPTH: usize = 50;
/// What the meaning model's cosine adds to the lexical score (relative to the best hit's).
const DENSE_WEIGHT: f32 = 0.25;
/// Query words read; the rest of a long request is ignored.
const MAX_QUERY_WORDS: usize = 48;
/// Words read of a field (a long description's tail adds little).
const MAX_FIELD_WORDS: usize = 400;

pub struct SearchIndex {
    n_docs: usize,
    terms: HashMap<Box<str>, u32>,
    /// Per term: (doc, BM25F pseudo term frequency), sorted by doc.
    postings: Vec<Vec<(u32, f32)>>,
    idf: Vec<f32>,
    /// What an unindexed word would weigh: the idf of a term no document has.
    idf_unseen: f32,
    /// Term ids sorted by their text, for prefix lookups.
    sorted: Vec<u32>,
    term_text: Vec<Box<str>>,
    typos: Typos,
    /// Normalised full names → doc, for exact-name queries.
    exact: HashMap<Box<str>, u32>,
    /// The documents' meaning vectors, when the model is installed.
    dense: Option<DenseIndex>,
}

/// The names and descriptions of a tool's parameters (and of their properties, one level down),
/// as one text for `SearchDoc::params`.
pub fn param_text(schema: &Value) -> String {
    fn walk(schema: &Value, depth: usize, out: &mut String) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, p) in props {
            out.push_str(name);
            out.push_str(". ");
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                out.push_str(d);
                out.push(' ');
            }
            if depth == 0 {
                walk(p, 1, out);
                if let Some(items) = p.get("items") {
                    walk(items, 1, out);
                }
            }
        }
    }
    let mut out = String::new();
    walk(schema, 0, &mut out);
    out
}

/// A query term and the index terms it may match, with how much each match counts.
struct Group {
    variants: Vec<(u32, f32)>,
}

impl SearchIndex {
    /// The index with the process's search model, when it is installed (`embed::shared`).
    pub fn build(docs: &[SearchDoc<'_>]) -> SearchIndex {
        SearchIndex::build_with(docs, embed::shared())
    }

    /// The index with `model` for meaning, or words only.
    pub fn build_with(docs: &[SearchDoc<'_>], model: Option<Arc<Embedder>>) -> SearchIndex {
        // Per doc and field: term → weighted count; and the field's length in words.
        let mut counts: Vec<[HashMap<String, f32>; FIELDS]> = Vec::with_capacity(docs.len());
        let mut lens: Vec<[f32; FIELDS]> = Vec::with_capacity(docs.len());
        let mut exact = HashMap::new();
        for (i, doc) in docs.iter().enumerate() {
            let integration = terms(doc.integration, MAX_FIELD_WORDS);
            let name: Vec<Term> = terms(doc.name, MAX_FIELD_WORDS)
                .into_iter()
                .filter(|t| !integration.iter().any(|it| it.stem == t.stem))
                .collect();
            let mut fields: [Vec<Term>; FIELDS] = Default::default();
            fields[NAME] = name;
            fields[INTEGRATION] = integration;
            fields[DESCRIPTION] = terms(doc.description, MAX_FIELD_WORDS);
            fields[PARAMS] = terms(doc.params, MAX_FIELD_WORDS);
            let mut c: [HashMap<String, f32>; FIELDS] = Default::default();
            let mut l = [0f32; FIELDS];
            for (f, ts) in fields.iter().enumerate() {
                l[f] = ts.len() as f32;
                for t in ts {
                    *c[f].entry(t.stem.clone()).or_default() += 1.0;
                    if let Some(g) = t.group {
                        *c[f].entry(g.to_owned()).or_default() += 1.0;
                    }
                }
            }
            counts.push(c);
            lens.push(l);
            exact.insert(normalize_name(doc.name).into_boxed_str(), i as u32);
        }
        let n = docs.len().max(1) as f32;
        let mut avg = [0f32; FIELDS];
        for l in &lens {
            for f in 0..FIELDS {
                avg[f] += l[f] / n;
            }
        }
        let mut terms_map: HashMap<Box<str>, u32> = HashMap::new();
        let mut term_text: Vec<Box<str>> = Vec::new();
        let mut postings: Vec<Vec<(u32, f32)>> = Vec::new();
        for (d, c) in counts.iter().enumerate() {
            let mut pseudo: HashMap<&str, f32> = HashMap::new();
            for f in 0..FIELDS {
                let norm = 1.0 - FIELD_B[f] + FIELD_B[f] * lens[d][f] / avg[f].max(1.0);
                for (t, tf) in &c[f] {
                    *pseudo.entry(t.as_str()).or_default() += FIELD_WEIGHT[f] * tf / norm;
                }
            }
            for (t, w) in pseudo {
                let id = *terms_map.entry(t.into()).or_insert_with(|| {
                    term_text.push(t.into());
                    postings.push(Vec::new());
                    (term_text.len() - 1) as u32
                });
                postings[id as usize].push((d as u32, w));
            }
        }
        let idf_of = |df: f32| (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let idf = postings.iter().map(|p| idf_of(p.len() as f32)).collect();
        let mut sorted: Vec<u32> = (0..term_text.len() as u32).collect();
        sorted.sort_by(|a, b| term_text[*a as usize].cmp(&term_text[*b as usize]));
        let typos = Typos::build(term_text.iter().enumerate().map(|(i, t)| (i as u32, &**t)));
        SearchIndex {
            n_docs: docs.len(),
            terms: terms_map,
            postings,
            idf,
            idf_unseen: idf_of(0.0),
            sorted,
            term_text,
            typos,
            exact,
            dense: model.map(|m| {
                DenseIndex::build(
                    m,
                    docs.iter().map(|d| {
                        format!(
                            "{}: {} {}",
                            text::words(d.name, 16).join(" "),
                            d.description,
                            d.params
                        )
                    }),
                )
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.n_docs
    }

    /// Whether the meaning model ranks too (else words only).
    pub fn has_model(&self) -> bool {
        self.dense.is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.n_docs == 0
    }

    /// The best `limit` documents for `query` among those `visible` admits, best first.
    pub fn search(&self, query: &str, limit: usize, visible: impl Fn(usize) -> bool) -> Found {
        let none = Found {
            hits: Vec::new(),
            no_match: true,
        };
        if limit == 0 || self.n_docs == 0 {
            return none;
        }
        let mut query_terms = terms(query, MAX_QUERY_WORDS);
        let mut seen = Vec::new();
        query_terms.retain(|t| {
            let fresh = !seen.contains(&t.stem);
            seen.push(t.stem.clone());
            fresh
        });
        let exact_doc = self.exact.get(normalize_name(query).as_str()).copied();
        if query_terms.is_empty() && exact_doc.is_none() {
            return none;
        }
        let groups: Vec<Group> = query_terms.iter().map(|t| self.group(t)).collect();
        let mut total = vec![0f32; self.n_docs];
        // Per doc: the most its matched query terms could add (their `ideal`).
        let mut matched = vec![0f32; self.n_docs];
        let mut group_best = vec![0f32; self.n_docs];
        let mut touched: Vec<u32> = Vec::new();
        // The most each query term could add: its best variant, fully saturated.
        let mut ideal = 0f32;
        let mut ideal_known = 0f32;
        for g in &groups {
            let mut best_idf = 0f32;
            for (term, factor) in &g.variants {
                let idf = self.idf[*term as usize] * factor;
                best_idf = best_idf.max(idf);
                for &(doc, tf) in &self.postings[*term as usize] {
                    let s = idf * tf * (K1 + 1.0) / (tf + K1);
                    let slot = &mut group_best[doc as usize];
                    if *slot == 0.0 {
                        touched.push(doc);
                    }
                    if s > *slot {
                        *slot = s;
                    }
                }
            }
            let term_ideal = if g.variants.is_empty() {
                self.idf_unseen * (K1 + 1.0)
            } else {
                ideal_known += best_idf * (K1 + 1.0);
                best_idf * (K1 + 1.0)
            };
            ideal += term_ideal;
            for &doc in &touched {
                let d = doc as usize;
                total[d] += group_best[d];
                matched[d] += term_ideal;
                group_best[d] = 0.0;
            }
            touched.clear();
        }
        // The lexical ranking's head.
        let depth = limit.max(FUSION_DEPTH);
        let by_score = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let head = |mut v: Vec<(usize, f32)>, n: usize| {
            if v.len() > n {
                v.select_nth_unstable_by(n - 1, by_score);
                v.truncate(n);
            }
            v.sort_by(by_score);
            v
        };
        let lexical = head(
            total
                .iter()
                .enumerate()
                .filter(|(_, s)| **s > 0.0)
                .filter(|(d, _)| visible(*d))
                .map(|(d, s)| (d, *s))
                .collect(),
            depth,
        );
        let cosine = self.dense.as_ref().and_then(|d| d.scores(query));
        // Fusion of the lexical and the meaning scores; the exact name first.
        let top_lexical = lexical.first().map_or(0.0, |h| h.1).max(f32::MIN_POSITIVE);
        let mut fused: HashMap<usize, f32> =
            lexical.iter().map(|(d, s)| (*d, s / top_lexical)).collect();
        if let Some(cos) = &cosine {
            let dense = head(
                cos.iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0.0)
                    .filter(|(d, _)| visible(*d))
                    .map(|(d, c)| (d, *c))
                    .collect(),
                depth,
            );
            for (d, _) in &dense {
                fused.entry(*d).or_insert(total[*d] / top_lexical);
            }
            for (d, f) in fused.iter_mut() {
                *f += DENSE_WEIGHT * cos[*d].max(0.0);
            }
        }
        if let Some(d) = exact_doc.filter(|d| visible(*d as usize)) {
            fused.insert(d as usize, f32::MAX);
        }
        let ranked = head(fused.into_iter().collect(), limit);
        let mut cap = 1f32;
        let hits: Vec<Hit> = ranked
            .into_iter()
            .enumerate()
            .map(|(rank, (d, _))| {
                let features = Features {
                    explained: (total[d] / ideal.max(f32::EPSILON)).min(1.0),
                    known_covered: (matched[d] / ideal_known.max(f32::EPSILON)).min(1.0),
                    unknown: 1.0 - ideal_known / ideal.max(f32::EPSILON),
                    relative: (total[d] / top_lexical).min(1.0),
                    words: groups.len() as f32,
                    rank: rank as f32,
                    exact_name: exact_doc == Some(d as u32),
                };
                let p = features.probability().min(cap);
                cap = p;
                Hit {
                    doc: d,
                    score: ((p * 1000.0).round() / 1000.0).max(0.001),
                    features,
                }
            })
            .collect();
        let no_match = hits
            .first()
            .is_none_or(|h| h.score < calibrate::NO_MATCH_BELOW);
        Found { hits, no_match }
    }

    /// The index terms a query term may match, with how much each match counts.
    fn group(&self, t: &Term) -> Group {
        let mut out: Vec<(u32, f32)> = Vec::new();
        let push = |out: &mut Vec<(u32, f32)>, id: u32, f: f32| {
            if let Some(e) = out.iter_mut().find(|(t, _)| *t == id) {
                e.1 = e.1.max(f);
            } else if out.len() < MAX_EXPANSIONS {
                out.push((id, f));
            }
        };
        let raw = t.stem.as_str();
        let exact = self.terms.get(raw).copied();
        if let Some(id) = exact {
            push(&mut out, id, 1.0);
        }
        if let Some(id) = t.group.and_then(|c| self.terms.get(c)) {
            push(&mut out, *id, SYNONYM_FACTOR);
        }
        let len = raw.chars().count();
        // Unfinished words: "slac" → "slack".
        if len >= 3 {
            let start = self
                .sorted
                .partition_point(|id| &*self.term_text[*id as usize] < raw);
            for id in self.sorted[start..].iter().take(MAX_EXPANSIONS) {
                let text = &self.term_text[*id as usize];
                if !text.starts_with(raw) {
                    break;
                }
                if Some(*id) != exact {
                    let f = PREFIX_FACTOR * len as f32 / text.chars().count() as f32;
                    push(&mut out, *id, f);
                }
            }
        }
        // One-letter typos, and a typo of a synonym counts like the synonym, a little less.
        if len >= typo::MIN_LEN && exact.is_none() {
            for id in self.typos.near(raw, |i| &self.term_text[i as usize]) {
                push(&mut out, id, TYPO_FACTOR);
                if let Some(sid) =
                    text::group(&self.term_text[id as usize]).and_then(|c| self.terms.get(c))
                {
                    push(&mut out, *sid, TYPO_FACTOR * SYNONYM_FACTOR);
                }
            }
        }
        Group { variants: out }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(docs: &[(&'static str, &'static str, &'static str)]) -> Vec<SearchDoc<'static>> {
        docs.iter()
            .map(|(n, i, d)| SearchDoc {
                name: n,
                integration: i,
                description: d,
                params: "",
            })
            .collect()
    }

    fn index(d: &[(&'static str, &'static str, &'static str)]) -> SearchIndex {
        SearchIndex::build_with(&docs(d), None)
    }

    const DOCS: &[(&str, &str, &str)] = &[
        (
            "jira_create_issue",
            "jira",
            "Create a new issue in a Jira project.",
        ),
        (
            "github_create_issue",
            "github",
            "Open a new issue in a GitHub repository.",
        ),
        (
            "github_create_pr",
            "github",
            "Open a pull request from a branch.",
        ),
        (
            "slack_send_message",
            "slack",
            "Post a message to a Slack channel.",
        ),
        (
            "email.send",
            "email",
            "Send an email from a verified sender domain.",
        ),
        (
            "storage.get",
            "storage",
            "Read an object from project storage by key.",
        ),
    ];

    fn top(ix: &SearchIndex, q: &str) -> usize {
        ix.search(q, 10, |_| true)
            .hits
            .first()
            .map(|h| h.doc)
            .unwrap_or(usize::MAX)
    }

    #[test]
    fn words_match_in_any_order_and_with_synonyms() {
        let ix = index(DOCS);
        assert_eq!(top(&ix, "create jira issue"), 0);
        assert_eq!(top(&ix, "issue jira create"), 0);
        assert_eq!(top(&ix, "new jira ticket"), 0);
        assert_eq!(top(&ix, "open a pull request"), 2);
        assert_eq!(top(&ix, "post to a slack channel"), 3);
        assert_eq!(top(&ix, "send mail"), 4);
    }

    #[test]
    fn typos_and_unfinished_words_still_match() {
        let ix = index(DOCS);
        assert_eq!(top(&ix, "craete jria isue"), 0);
        assert_eq!(top(&ix, "slak mesage"), 3);
        assert_eq!(top(&ix, "githu pr"), 2);
    }

    #[test]
    fn parameters_are_searched_too() {
        let docs = [
            SearchDoc {
                name: "weather_now",
                integration: "weather",
                description: "Current conditions.",
                params: "latitude: Latitude in degrees. longitude: Longitude in degrees.",
            },
            SearchDoc {
                name: "maps_route",
                integration: "maps",
                description: "A route between two places.",
                params: "origin: Where from. destination: Where to.",
            },
        ];
        let ix = SearchIndex::build(&docs);
        assert_eq!(
            ix.search("conditions at a latitude", 5, |_| true).hits[0].doc,
            0
        );
        assert_eq!(
            ix.search("route to a destination", 5, |_| true).hits[0].doc,
            1
        );
    }

    #[test]
    fn scores_are_ordered_bounded_and_visibility_filters() {
        let ix = index(DOCS);
        let hits = ix.search("create issue", 10, |_| true).hits;
        assert!(hits.len() >= 2);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert!(hits.iter().all(|h| h.score >= 0.0 && h.score <= 1.0));
        let hidden = ix.search("create jira issue", 10, |d| d != 0).hits;
        assert!(hidden.iter().all(|h| h.doc != 0));
        assert!(ix.search("", 10, |_| true).hits.is_empty());
        assert!(ix.search("zzzzqqq", 10, |_| true).hits.is_empty());
        assert_eq!(ix.search("issue", 1, |_| true).hits.len(), 1);
    }

    #[test]
    fn a_request_no_tool_covers_is_no_match() {
        let ix = index(DOCS);
        assert!(ix.search("zzzzqqq", 10, |_| true).no_match);
        assert!(
            ix.search("book a flight to lisbon next tuesday", 10, |_| true)
                .no_match
        );
        assert!(!ix.search("create a jira issue", 10, |_| true).no_match);
    }

    #[test]
    fn an_exact_tool_name_ranks_first() {
        let ix = index(DOCS);
        assert_eq!(top(&ix, "storage.get"), 5);
        assert_eq!(top(&ix, "github_create_issue"), 1);
        let found = ix.search("github_create_issue", 10, |_| true);
        assert_eq!(found.hits[0].score, 1.0);
        assert!(!found.no_match);
    }

    #[test]
    fn with_the_model_a_request_finds_a_tool_it_shares_no_word_with() {
        let model =
            embed::shared().expect("the search model is not installed: run scripts/setup.sh");
        let d = docs(DOCS);
        let ix = SearchIndex::build_with(&d, Some(model));
        assert!(ix.has_model());
        let q = "say hi to everyone in #general";
        assert!(SearchIndex::build_with(&d, None)
            .search(q, 10, |_| true)
            .hits
            .is_empty());
        let found = ix.search(q, 10, |_| true);
        assert_eq!(found.hits[0].doc, 3, "{:?}", found.hits);
        assert!(found.hits.iter().all(|h| h.score > 0.0 && h.score <= 1.0));
        // Hidden tools stay hidden from the meaning ranking too.
        assert!(ix.search(q, 10, |d| d != 3).hits.iter().all(|h| h.doc != 3));
    }
}
