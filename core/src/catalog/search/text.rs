//! What a text means to the index: its words (split at punctuation, `snake_case`, `dot.names`
//! and `camelCase`), without stopwords, stemmed by the Snowball English stemmer, with the
//! synonym group a word belongs to and the few multi-word phrases that mean one thing.

use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// How much a synonym's match counts against the word itself.
pub(super) const SYNONYM_FACTOR: f32 = 0.85;

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "for", "in", "on", "by", "with", "and", "or", "from", "my", "me",
    "i", "please", "into", "as", "at", "is", "be", "this", "that", "it", "its", "our", "your",
    "some", "any", "using", "via", "can", "you", "we", "do", "how", "want", "need", "would",
    "like", "should", "will", "one", "are", "was", "were", "been", "has", "have", "had", "if",
    "then", "than", "so", "such", "there", "their", "them", "they", "which", "who", "what", "when",
    "where", "these", "those", "us", "just", "also", "about", "could", "let", "s",
];

/// Groups of words that ask for the same thing; the first word names the group.
const SYNONYMS: &[&[&str]] = &[
    &[
        "create", "new", "add", "make", "open", "start", "generate", "insert",
    ],
    &[
        "delete", "remove", "destroy", "erase", "drop", "trash", "purge",
    ],
    &["send", "post", "notify", "dispatch", "deliver", "transmit"],
    &["issue", "ticket", "bug", "incident"],
    &["pr", "pull", "prs"],
    &["email", "mail", "gmail", "inbox"],
    &["message", "msg", "chat", "text"],
    &["list", "show", "enumerate", "all", "browse"],
    &[
        "get", "fetch", "retrieve", "read", "view", "load", "obtain", "download",
    ],
    &[
        "search", "find", "lookup", "query", "look", "locate", "discover",
    ],
    &[
        "update", "edit", "modify", "change", "patch", "rename", "amend",
    ],
    &["put", "upload", "save", "store", "write", "persist"],
    &["repo", "repository", "repositories", "repos"],
    &["document", "doc", "docs", "documents"],
    &["folder", "directory", "dir"],
    &[
        "user",
        "people",
        "person",
        "member",
        "teammate",
        "colleague",
    ],
    &["event", "meeting", "appointment"],
    &["invoice", "bill"],
    &["customer", "client"],
    &["charge", "payment"],
    &["secret", "credential", "password", "token", "apikey"],
    &["vector", "embedding"],
    &["url", "link", "webpage", "endpoint", "website"],
    &["web", "internet", "online", "google"],
    &["free", "availability", "available", "busy"],
    &["callback", "remind", "reminder", "wake", "later"],
    &["comment", "reply", "respond"],
    &["close", "resolve", "finish", "complete"],
    &["assign", "assignee"],
];

/// Two-word phrases that mean one thing, and the term they stand for.
const PHRASES: &[(&str, &str, &str)] = &[
    ("pull", "request", "pr"),
    ("merge", "request", "pr"),
    ("e", "mail", "email"),
    ("direct", "message", "dm"),
];

fn stemmer() -> &'static Stemmer {
    static S: OnceLock<Stemmer> = OnceLock::new();
    S.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// A word's stem: Snowball English for ASCII words, the word itself otherwise.
pub(super) fn stem(word: &str) -> String {
    if !word.is_ascii() || word.len() <= 2 {
        return word.to_owned();
    }
    stemmer().stem(word).into_owned()
}

/// The index key of the synonym group a stem belongs to (`~` and the group head's stem), so a
/// group match is a term of its own, weighed apart from the word itself.
pub(super) fn group(stem: &str) -> Option<&'static str> {
    static MAP: OnceLock<HashMap<String, &'static str>> = OnceLock::new();
    let map = MAP.get_or_init(|| {
        let mut m = HashMap::new();
        for group in SYNONYMS {
            let head: &'static str = group[0];
            for w in group.iter() {
                m.entry(self::stem(w)).or_insert(head);
            }
        }
        m
    });
    map.get(stem).copied().map(group_key)
}

/// `~` and the stem of a group's head word, computed once per group.
fn group_key(head: &'static str) -> &'static str {
    static KEYS: OnceLock<HashMap<&'static str, String>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        SYNONYMS
            .iter()
            .map(|g| (g[0], format!("~{}", stem(g[0]))))
            .collect()
    });
    keys.get(head).map(String::as_str).unwrap_or(head)
}

/// The words of a text, lowercase: split at anything not alphanumeric and inside `camelCase`
/// and `HTTPRequest` words. At most `max` words.
pub(super) fn words(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric()) {
        if chunk.is_empty() {
            continue;
        }
        let chars: Vec<char> = chunk.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (p, c) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower);
            if boundary {
                out.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        out.push(chars[start..].iter().collect::<String>().to_lowercase());
        if out.len() >= max {
            out.truncate(max);
            break;
        }
    }
    out
}

/// One term a text yields: its stem, and the key of its synonym group when it is in one.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Term {
    pub stem: String,
    pub group: Option<&'static str>,
}

/// The terms of a text, in order: phrases folded, stopwords dropped, words stemmed.
pub(super) fn terms(text: &str, max_words: usize) -> Vec<Term> {
    let words = words(text, max_words);
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        if let Some(p) = phrase(&words[i..]) {
            out.push(Term {
                stem: p.to_owned(),
                group: group(p),
            });
            i += 2;
            continue;
        }
        let w = &words[i];
        i += 1;
        if STOPWORDS.contains(&w.as_str()) {
            continue;
        }
        let stem = stem(w);
        let group = group(&stem);
        out.push(Term { stem, group });
    }
    out
}

fn phrase(words: &[String]) -> Option<&'static str> {
    let [a, b, ..] = words else { return None };
    PHRASES
        .iter()
        .find(|(x, y, _)| a == x && (b == y || stem(b) == stem(y)))
        .map(|(_, _, t)| *t)
}

/// `github_create_pr`, `GitHub create PR` and `github.create.pr` all normalise alike.
pub(super) fn normalize_name(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_case_and_punctuation() {
        assert_eq!(
            words("getUserByID github_create_pr HTTPRequest crm.contact", 32),
            [
                "get", "user", "by", "id", "github", "create", "pr", "http", "request", "crm",
                "contact"
            ]
        );
    }

    #[test]
    fn stems_fold_word_forms_nobody_listed() {
        for (a, b) in [
            ("forecasts", "forecasting"),
            ("invoices", "invoicing"),
            ("deployments", "deployed"),
        ] {
            let (sa, sb) = (stem(a), stem(b));
            assert!(
                sa == sb || sb.starts_with(&sa) || sa.starts_with(&sb),
                "{a}:{sa} {b}:{sb}"
            );
        }
        assert_eq!(stem("repositories"), stem("repository"));
    }

    #[test]
    fn synonyms_and_phrases_fold_onto_one_term() {
        let t = terms("open a pull request", 32);
        assert_eq!(t.last().unwrap().stem, "pr");
        assert_eq!(group(&stem("tickets")), Some("~issu"));
        assert_eq!(group(&stem("issue")), Some("~issu"));
        assert_eq!(group(&stem("weather")), None);
        assert!(terms("the and of", 32).is_empty());
    }
}
