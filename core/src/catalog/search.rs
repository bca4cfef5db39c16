//! Tool search: an inverted index over tool names, integrations and descriptions that matches
//! words in any order, folds common synonyms onto one term, tolerates one-letter typos (deletion
//! neighbourhoods, as in SymSpell) and unfinished words (prefixes), and ranks with IDF-weighted
//! field scores times query coverage.

use std::collections::HashMap;

/// What the index needs to know about one tool.
pub struct SearchDoc<'a> {
    pub name: &'a str,
    pub integration: &'a str,
    pub description: &'a str,
}

/// One hit: the document's position in the indexed slice and a relevance score in (0, 1].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
}

const NAME_WEIGHT: f32 = 3.0;
const INTEGRATION_WEIGHT: f32 = 2.5;
const DESCRIPTION_WEIGHT: f32 = 1.0;
const SYNONYM_FACTOR: f32 = 0.85;
const TYPO_FACTOR: f32 = 0.6;
const PREFIX_FACTOR: f32 = 0.7;
const MAX_EXPANSIONS: usize = 24;

pub struct SearchIndex {
    n_docs: usize,
    terms: HashMap<Box<str>, u32>,
    /// Per term: (doc, field-weighted term frequency), sorted by doc.
    postings: Vec<Vec<(u32, f32)>>,
    idf: Vec<f32>,
    /// Term ids sorted by their text, for prefix lookups.
    sorted: Vec<u32>,
    term_text: Vec<Box<str>>,
    /// Single-character deletions of every term (and the term itself) → term ids.
    deletions: HashMap<Box<str>, Vec<u32>>,
    /// Normalised full names → doc, for exact-name queries.
    exact: HashMap<Box<str>, u32>,
}

/// A query term: its stem, and the synonym group's term when that differs.
struct QueryGroup {
    raw: String,
    canonical: Option<String>,
}

impl SearchIndex {
    pub fn build(docs: &[SearchDoc<'_>]) -> SearchIndex {
        let mut terms: HashMap<Box<str>, u32> = HashMap::new();
        let mut term_text: Vec<Box<str>> = Vec::new();
        let mut postings: Vec<Vec<(u32, f32)>> = Vec::new();
        let mut exact = HashMap::new();
        for (i, doc) in docs.iter().enumerate() {
            let mut weights: HashMap<String, f32> = HashMap::new();
            let integration_terms = analyze(doc.integration);
            for (t, f) in &integration_terms {
                bump(&mut weights, t, INTEGRATION_WEIGHT * f);
            }
            for (t, f) in analyze(doc.name) {
                if !integration_terms.iter().any(|(it, _)| *it == t) {
                    bump(&mut weights, &t, NAME_WEIGHT * f);
                }
            }
            let desc = analyze(doc.description);
            let words = desc.iter().filter(|(_, f)| *f == 1.0).count();
            let mut desc_tf: HashMap<&str, (f32, f32)> = HashMap::new();
            for (t, f) in &desc {
                let e = desc_tf.entry(t.as_str()).or_insert((0.0, *f));
                e.0 += 1.0;
                e.1 = e.1.max(*f);
            }
            for (t, (tf, f)) in desc_tf {
                // Saturating term frequency (BM25 with k1 = 1.2), normalised by length.
                let len_norm = 0.75 + 0.25 * (words as f32 / 12.0);
                bump(
                    &mut weights,
                    t,
                    DESCRIPTION_WEIGHT * f * tf * 2.2 / (tf + 1.2 * len_norm),
                );
            }
            for (t, w) in weights {
                let id = *terms.entry(t.clone().into_boxed_str()).or_insert_with(|| {
                    term_text.push(t.clone().into_boxed_str());
                    postings.push(Vec::new());
                    (term_text.len() - 1) as u32
                });
                postings[id as usize].push((i as u32, w));
            }
            exact.insert(normalize_name(doc.name).into_boxed_str(), i as u32);
        }
        let n = docs.len().max(1) as f32;
        let idf = postings
            .iter()
            .map(|p| (1.0 + (n - p.len() as f32 + 0.5) / (p.len() as f32 + 0.5)).ln())
            .collect();
        let mut sorted: Vec<u32> = (0..term_text.len() as u32).collect();
        sorted.sort_by(|a, b| term_text[*a as usize].cmp(&term_text[*b as usize]));
        let mut deletions: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        for (id, t) in term_text.iter().enumerate() {
            if t.chars().count() < 4 {
                continue;
            }
            for d in deletes(t) {
                deletions
                    .entry(d.into_boxed_str())
                    .or_default()
                    .push(id as u32);
            }
        }
        SearchIndex {
            n_docs: docs.len(),
            terms,
            postings,
            idf,
            sorted,
            term_text,
            deletions,
            exact,
        }
    }

    pub fn len(&self) -> usize {
        self.n_docs
    }

    pub fn is_empty(&self) -> bool {
        self.n_docs == 0
    }

    /// The best `limit` documents for `query` among those `visible` admits, best first.
    pub fn search(&self, query: &str, limit: usize, visible: impl Fn(usize) -> bool) -> Vec<Hit> {
        if limit == 0 || self.n_docs == 0 {
            return Vec::new();
        }
        let groups = query_groups(query);
        if groups.is_empty() {
            return Vec::new();
        }
        let mut total = vec![0f32; self.n_docs];
        let mut matched = vec![0u16; self.n_docs];
        let mut group_best = vec![0f32; self.n_docs];
        let mut touched: Vec<u32> = Vec::new();
        let mut ideal = 0f32;
        for g in &groups {
            let variants = self.variants(g);
            let mut best_idf = 0f32;
            for (term, factor) in &variants {
                let idf = self.idf[*term as usize];
                best_idf = best_idf.max(idf * factor);
                for &(doc, w) in &self.postings[*term as usize] {
                    let s = w * idf * factor;
                    let slot = &mut group_best[doc as usize];
                    if *slot == 0.0 {
                        touched.push(doc);
                    }
                    if s > *slot {
                        *slot = s;
                    }
                }
            }
            // The best a document could score on this term: a name match of the exact word.
            ideal += best_idf.max(1.0) * NAME_WEIGHT;
            for &doc in &touched {
                let d = doc as usize;
                total[d] += group_best[d];
                matched[d] += 1;
                group_best[d] = 0.0;
            }
            touched.clear();
        }
        let n_groups = groups.len() as f32;
        let exact_doc = self.exact.get(normalize_name(query).as_str()).copied();
        let mut hits: Vec<Hit> = total
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .filter(|(d, _)| visible(*d))
            .map(|(d, s)| {
                let coverage = matched[d] as f32 / n_groups;
                let mut score = (s / ideal.max(f32::EPSILON)) * coverage * coverage.sqrt();
                if exact_doc == Some(d as u32) {
                    score = score.max(1.0) + 1.0;
                }
                Hit { doc: d, score }
            })
            .collect();
        let by_score = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, by_score);
            hits.truncate(limit);
        }
        hits.sort_by(by_score);
        let top = hits.first().map(|h| h.score).unwrap_or(1.0);
        for h in &mut hits {
            // Scores are relative to a perfect match; never above 1.
            h.score = if top > 1.0 { h.score / top } else { h.score }.clamp(0.0, 1.0);
            h.score = (h.score * 1000.0).round() / 1000.0;
        }
        hits
    }

    /// The index terms a query term may match, with how much each match counts.
    fn variants(&self, g: &QueryGroup) -> Vec<(u32, f32)> {
        let mut out: Vec<(u32, f32)> = Vec::new();
        let push = |out: &mut Vec<(u32, f32)>, id: u32, f: f32| {
            if let Some(e) = out.iter_mut().find(|(t, _)| *t == id) {
                e.1 = e.1.max(f);
            } else if out.len() < MAX_EXPANSIONS {
                out.push((id, f));
            }
        };
        let exact = self.terms.get(g.raw.as_str()).copied();
        if let Some(id) = exact {
            push(&mut out, id, 1.0);
        }
        if let Some(id) = g.canonical.as_deref().and_then(|c| self.terms.get(c)) {
            push(&mut out, *id, SYNONYM_FACTOR);
        }
        let len = g.raw.chars().count();
        // Unfinished words: "slac" → "slack".
        if len >= 3 {
            let start = self
                .sorted
                .partition_point(|id| &*self.term_text[*id as usize] < g.raw.as_str());
            for id in self.sorted[start..].iter().take(MAX_EXPANSIONS) {
                let t = &self.term_text[*id as usize];
                if !t.starts_with(g.raw.as_str()) {
                    break;
                }
                if Some(*id) != exact {
                    push(
                        &mut out,
                        *id,
                        PREFIX_FACTOR * len as f32 / t.chars().count() as f32,
                    );
                }
            }
        }
        // One-letter typos: insertion, deletion, substitution, adjacent swap.
        if len >= 4 && exact.is_none() {
            let mut keys = deletes(&g.raw);
            keys.push(g.raw.clone());
            for key in keys {
                if let Some(ids) = self.deletions.get(key.as_str()) {
                    for id in ids {
                        if within_one_edit(&g.raw, &self.term_text[*id as usize]) {
                            push(&mut out, *id, TYPO_FACTOR);
                            // A typo of a synonym counts like the synonym, a little less.
                            let syn = canonical(&self.term_text[*id as usize]);
                            if syn != &*self.term_text[*id as usize] {
                                if let Some(sid) = self.terms.get(syn) {
                                    push(&mut out, *sid, TYPO_FACTOR * SYNONYM_FACTOR);
                                }
                            }
                        }
                    }
                }
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }
}

fn bump(weights: &mut HashMap<String, f32>, term: &str, w: f32) {
    let e = weights.entry(term.to_owned()).or_default();
    *e = e.max(w) + (w.min(*e) * 0.1);
}

/// `github_create_pr`, `GitHub create PR` and `github.create.pr` all normalise alike.
fn normalize_name(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn deletes(term: &str) -> Vec<String> {
    let chars: Vec<char> = term.chars().collect();
    (0..chars.len())
        .map(|i| {
            chars
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, c)| *c)
                .collect()
        })
        .collect()
}

/// Damerau-Levenshtein distance ≤ 1 (with adjacent transposition).
fn within_one_edit(a: &str, b: &str) -> bool {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a == b {
        return true;
    }
    match a.len() as isize - b.len() as isize {
        0 => {
            let diffs: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
            diffs.len() == 1
                || (diffs.len() == 2
                    && diffs[1] == diffs[0] + 1
                    && a[diffs[0]] == b[diffs[1]]
                    && a[diffs[1]] == b[diffs[0]])
        }
        1 | -1 => {
            let (long, short) = if a.len() > b.len() {
                (&a, &b)
            } else {
                (&b, &a)
            };
            let i = (0..short.len())
                .find(|&i| long[i] != short[i])
                .unwrap_or(short.len());
            long[i + 1..] == short[i..]
        }
        _ => false,
    }
}

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "for", "in", "on", "by", "with", "and", "or", "from", "my", "me",
    "i", "please", "into", "as", "at", "is", "be", "this", "that", "it", "its", "our", "your",
    "some", "any", "using", "via", "can", "you", "we", "do", "how", "want", "need", "would",
    "like", "should", "will", "one",
];

/// Index terms of a text with their weight factor: lowercase words, split on anything not
/// alphanumeric (so `github_create_pr` and `crm.contact.get` split too), stemmed lightly,
/// stopwords dropped; a word with a synonym group also yields the group's term, counted less.
pub(crate) fn analyze(text: &str) -> Vec<(String, f32)> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect();
    let mut out = Vec::with_capacity(words.len() * 2);
    let mut i = 0;
    while i < words.len() {
        if let Some((canonical, used)) = phrase(&words[i..]) {
            out.push((canonical.to_owned(), 1.0));
            i += used;
            continue;
        }
        let w = &words[i];
        i += 1;
        if STOPWORDS.contains(&w.as_str()) {
            continue;
        }
        let s = stem(w);
        let c = canonical(&s);
        if c != s {
            out.push((c.to_owned(), SYNONYM_FACTOR));
        }
        out.push((s, 1.0));
    }
    out
}

fn query_groups(query: &str) -> Vec<QueryGroup> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .take(32)
        .collect();
    let mut groups: Vec<QueryGroup> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let group = if let Some((c, used)) = phrase(&words[i..]) {
            i += used;
            QueryGroup {
                raw: c.to_owned(),
                canonical: None,
            }
        } else {
            let w = &words[i];
            i += 1;
            if STOPWORDS.contains(&w.as_str()) {
                continue;
            }
            let raw = stem(w);
            let c = canonical(&raw);
            QueryGroup {
                canonical: (c != raw).then(|| c.to_owned()),
                raw,
            }
        };
        if !groups.iter().any(|g| g.raw == group.raw) {
            groups.push(group);
        }
    }
    groups
}

/// Multi-word phrases that mean one thing.
fn phrase(words: &[String]) -> Option<(&'static str, usize)> {
    let two = |a: &str, b: &str| {
        words.len() >= 2 && words[0] == a && (words[1] == b || stem(&words[1]) == b)
    };
    if two("pull", "request") || two("merge", "request") {
        return Some(("pr", 2));
    }
    if two("e", "mail") {
        return Some(("email", 2));
    }
    if two("direct", "message") {
        return Some(("dm", 2));
    }
    None
}

/// A light English stemmer: plurals and the common verb endings.
fn stem(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() || n <= 3 {
        return w.to_owned();
    }
    if let Some(s) = w.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{s}y");
    }
    if let Some(s) = w.strip_suffix("sses") {
        return format!("{s}ss");
    }
    for suffix in ["ches", "shes", "xes", "zes"] {
        if let Some(s) = w.strip_suffix(suffix) {
            return format!("{s}{}", &suffix[..suffix.len() - 2]);
        }
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_owned();
    }
    if let Some(s) = w.strip_suffix("ing").filter(|s| s.len() >= 4) {
        return undouble(s);
    }
    if let Some(s) = w.strip_suffix("ed").filter(|s| s.len() >= 4) {
        return undouble(s);
    }
    w.to_owned()
}

fn undouble(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 2
        && b[b.len() - 1] == b[b.len() - 2]
        && !matches!(b[b.len() - 1], b'l' | b's' | b'z')
    {
        s[..s.len() - 1].to_owned()
    } else {
        s.to_owned()
    }
}

/// Folds synonyms onto one term (applied to stems, at index and query time alike).
fn canonical(stem: &str) -> &str {
    match stem {
        "new" | "add" | "make" | "open" | "creat" | "start" | "generate" | "insert" => "create",
        "remove" | "delet" | "destroy" | "erase" | "drop" | "trash" | "purge" => "delete",
        "post" | "notify" | "dispatch" | "deliver" | "transmit" => "send",
        "ticket" | "bug" | "incident" => "issue",
        "pull" | "prs" => "pr",
        "mail" | "gmail" | "inbox" => "email",
        "msg" | "chat" | "text" => "message",
        "show" | "enumerate" | "all" | "browse" => "list",
        "fetch" | "retrieve" | "read" | "view" | "load" | "obtain" | "download" => "get",
        "find" | "lookup" | "query" | "look" | "locate" | "discover" => "search",
        "edit" | "modify" | "change" | "patch" | "rename" | "amend" => "update",
        "upload" | "save" | "store" | "write" | "persist" => "put",
        "repository" | "repositori" | "repo" => "repo",
        "doc" | "document" => "document",
        "folder" | "directory" | "dir" => "folder",
        "people" | "person" | "member" | "teammate" | "colleague" => "user",
        "meeting" | "appointment" => "event",
        "bill" => "invoice",
        "client" => "customer",
        "payment" => "charge",
        "credential" | "password" | "token" | "apikey" => "secret",
        "embedding" | "vector" => "vector",
        "url" | "link" | "webpage" | "endpoint" | "website" => "url",
        "internet" | "online" | "google" => "web",
        "availability" | "available" | "busy" => "free",
        "remind" | "reminder" | "wake" | "later" => "callback",
        "reply" | "respond" => "comment",
        "close" | "resolve" | "finish" | "complete" => "close",
        "assign" | "assignee" => "assign",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(docs: &[(&'static str, &'static str, &'static str)]) -> SearchIndex {
        let d: Vec<SearchDoc> = docs
            .iter()
            .map(|(n, i, d)| SearchDoc {
                name: n,
                integration: i,
                description: d,
            })
            .collect();
        SearchIndex::build(&d)
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
    fn scores_are_ordered_bounded_and_visibility_filters() {
        let ix = index(DOCS);
        let hits = ix.search("create issue", 10, |_| true);
        assert!(hits.len() >= 2);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert!(hits.iter().all(|h| h.score > 0.0 && h.score <= 1.0));
        let hidden = ix.search("create jira issue", 10, |d| d != 0);
        assert!(hidden.iter().all(|h| h.doc != 0));
        assert!(ix.search("", 10, |_| true).is_empty());
        assert!(ix.search("zzzzqqq", 10, |_| true).is_empty());
        assert_eq!(ix.search("issue", 1, |_| true).len(), 1);
    }

    #[test]
    fn an_exact_tool_name_ranks_first() {
        let ix = index(DOCS);
        assert_eq!(top(&ix, "storage.get"), 5);
        assert_eq!(top(&ix, "github_create_issue"), 1);
        assert_eq!(ix.search("github_create_issue", 10, |_| true)[0].score, 1.0);
    }

    #[test]
    fn edit_distance_one_is_exact() {
        assert!(within_one_edit("jira", "jria"));
        assert!(within_one_edit("slack", "slak"));
        assert!(within_one_edit("slak", "slack"));
        assert!(within_one_edit("issue", "isxue"));
        assert!(!within_one_edit("issue", "tissues"));
        assert!(!within_one_edit("abcd", "badc"));
    }
}
