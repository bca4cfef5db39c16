//! One-letter typos, found fast: every index term is stored under each of its one-letter
//! deletions (deletion neighbourhoods, as in SymSpell), so a query word finds the terms within
//! one edit by looking up its own deletions, then confirming the distance.

use std::collections::HashMap;

/// Single-character deletions of every term (and the term itself) → term ids.
#[derive(Default)]
pub(super) struct Typos {
    deletions: HashMap<Box<str>, Vec<u32>>,
}

/// Terms shorter than this are not matched with a typo: too many short words are one edit apart.
pub(super) const MIN_LEN: usize = 4;

impl Typos {
    pub fn build<'a>(terms: impl Iterator<Item = (u32, &'a str)>) -> Typos {
        let mut deletions: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        for (id, t) in terms {
            if t.chars().count() < MIN_LEN {
                continue;
            }
            for d in deletes(t) {
                deletions.entry(d.into_boxed_str()).or_default().push(id);
            }
        }
        Typos { deletions }
    }

    /// The terms one edit away from `word` (insertion, deletion, substitution, adjacent swap).
    pub fn near<'a>(&'a self, word: &str, text: impl Fn(u32) -> &'a str) -> Vec<u32> {
        let mut keys = deletes(word);
        keys.push(word.to_owned());
        let mut out = Vec::new();
        for key in keys {
            if let Some(ids) = self.deletions.get(key.as_str()) {
                for id in ids {
                    if !out.contains(id) && within_one_edit(word, text(*id)) {
                        out.push(*id);
                    }
                }
            }
        }
        out
    }
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
pub(super) fn within_one_edit(a: &str, b: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_one_is_exact() {
        assert!(within_one_edit("jira", "jria"));
        assert!(within_one_edit("slack", "slak"));
        assert!(within_one_edit("slak", "slack"));
        assert!(within_one_edit("issue", "isxue"));
        assert!(!within_one_edit("issue", "tissues"));
        assert!(!within_one_edit("abcd", "badc"));
    }

    #[test]
    fn a_typo_finds_the_terms_one_edit_away() {
        let terms = ["slack", "stack", "jira", "github"];
        let t = Typos::build(terms.iter().enumerate().map(|(i, t)| (i as u32, *t)));
        let mut near = t.near("slakc", |i| terms[i as usize]);
        near.sort();
        assert_eq!(near, [0]);
        let mut near = t.near("slck", |i| terms[i as usize]);
        near.sort();
        assert_eq!(near, [0]);
        assert!(t.near("gitlab", |i| terms[i as usize]).is_empty());
    }
}
