//! Secret scrubbing (D7): every live secret of a project (and the caller's connection
//! credentials, and whatever a call adds) is replaced by `[redacted:NAME]` wherever it appears
//! in what the pipeline returns or records, in what the curl proxy sends back, and in what
//! workbench sends out by itself (stored objects, email, webhook and callback bodies) — raw, in
//! any ASCII letter case, with any of its characters written as a JSON escape (`\/`, `\"`,
//! `\uXXXX` in either hex case, surrogate pairs; also escaped twice, a JSON document inside a
//! JSON string) or an HTML character reference (`&amp;`, `&#38;`, `&#x26;`), percent- or
//! form-encoded (also leaving `/` or the URI reserved characters as they are), hex, and base64
//! (standard or URL-safe, at any alignment inside a longer blob, also MIME-wrapped across line
//! breaks). One Aho-Corasick automaton holds every form of every secret of the project, and
//! escapes are decoded into views of the text that the same automaton scans, so the cost of a
//! scan grows neither with the number of secrets nor with the ways a writer may escape them.
//! See README.md for the guarantee.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::Value;
use zeroize::{Zeroize, Zeroizing};

/// Encoded forms shorter than this are not searched (too likely to hit innocent text).
const MIN_NEEDLE: usize = 6;
/// Above this many pattern bytes the patterns compile to a contiguous NFA, not a DFA: a DFA
/// searches fastest, but its build grows with the patterns' length times the alphabet, and one
/// 64 KiB secret in all its encodings (~300 KiB of patterns) took minutes to build.
const DFA_MAX_PATTERN_BYTES: usize = 16 * 1024;
/// The most text bytes one byte of a secret takes in the escapes a view decodes, for streams
/// to hold back enough: `\u0041` is six, escaped twice (`\\u0041`) seven, `&#x41;` six.
const ESCAPE_EXPANSION: usize = 7;
/// A stream that holds back more than this (a project with a secret of a few KiB) is scanned only
/// once it holds twice as much, so each byte is scanned about twice rather than once per chunk.
const AMORTIZE_ABOVE: usize = 16 * 1024;

/// A compiled set of patterns, each with its replacement.
#[derive(Clone)]
pub struct Needles {
    ac: AhoCorasick,
    replacements: Vec<String>,
    /// The longest pattern, in bytes.
    max_len: usize,
    /// The longest text an escaped form may take (the raw or base64 form of the longest
    /// secret, every character escaped): with `max_len`, how much a stream holds back.
    escaped_len: usize,
}

impl std::fmt::Debug for Needles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Needles({} patterns)", self.replacements.len())
    }
}

/// One match in a text: its byte range and the pattern found there.
#[derive(Debug, Clone, Copy)]
struct Found {
    start: usize,
    end: usize,
    pattern: usize,
}

impl Needles {
    /// Every form of every `(name, value)`; forms shorter than 6 characters are not searched.
    pub fn build<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Needles {
        let mut pairs = Vec::new();
        let mut longest = 0;
        for (name, value) in secrets {
            let replacement = format!("[redacted:{name}]");
            longest = longest.max(value.len());
            for form in forms(value) {
                if form.len() >= MIN_NEEDLE {
                    pairs.push((Zeroizing::new(form), replacement.clone()));
                }
            }
        }
        Needles::from_pairs(pairs, longest)
    }

    /// Literal patterns with their replacements; a pattern seen before (ignoring ASCII case)
    /// keeps its first replacement. `longest` is the longest secret value, in bytes.
    fn from_pairs(pairs: Vec<(Zeroizing<String>, String)>, longest: usize) -> Needles {
        let mut seen: HashSet<String> = HashSet::new();
        let mut patterns: Vec<Zeroizing<String>> = Vec::new();
        let mut replacements = Vec::new();
        for (p, r) in pairs {
            if !p.is_empty() && seen.insert(p.to_ascii_lowercase()) {
                patterns.push(p);
                replacements.push(r);
            }
        }
        for mut key in seen.drain() {
            key.zeroize();
        }
        let total: usize = patterns.iter().map(|p| p.len()).sum();
        let kind = (total > DFA_MAX_PATTERN_BYTES).then_some(AhoCorasickKind::ContiguousNFA);
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .kind(kind)
            .build(patterns.iter().map(|p| p.as_bytes()))
            .expect("literal patterns always compile");
        let max_len = patterns.iter().map(|p| p.len()).max().unwrap_or(0);
        let escaped_len = if patterns.is_empty() {
            0
        } else {
            ESCAPE_EXPANSION * (longest.div_ceil(3) * 4 + 4)
        };
        Needles {
            ac,
            replacements,
            max_len,
            escaped_len,
        }
    }

    /// Every match in `text` — of the patterns as they are, and in the views of `text` with its
    /// JSON escapes decoded (once and twice) and its HTML character references decoded — in
    /// order, overlapping matches merged into one. And `safe` (a position a stream wants to cut
    /// at) moved back to the start of any escape it falls inside, so no escape is split.
    fn scan(&self, text: &[u8], safe: usize) -> (Vec<Found>, usize) {
        let mut found: Vec<Found> = self
            .ac
            .find_iter(text)
            .map(|m| Found {
                start: m.start(),
                end: m.end(),
                pattern: m.pattern().as_usize(),
            })
            .collect();
        let mut safe = safe;
        let mut viewed = false;
        if let Some(once) = View::decode(text, Syntax::Json) {
            viewed = true;
            for m in self.ac.find_iter(&once.bytes) {
                let (start, end) = once.source(m.start(), m.end());
                found.push(Found {
                    start,
                    end,
                    pattern: m.pattern().as_usize(),
                });
            }
            safe = once.unit_start(safe);
            if let Some(twice) = View::decode(&once.bytes, Syntax::Json) {
                for m in self.ac.find_iter(&twice.bytes) {
                    let (s1, e1) = twice.source(m.start(), m.end());
                    let (start, end) = once.source(s1, e1);
                    found.push(Found {
                        start,
                        end,
                        pattern: m.pattern().as_usize(),
                    });
                }
                safe = once.src_start(twice.unit_start(once.view_pos(safe)));
            }
        }
        if let Some(html) = View::decode(text, Syntax::Html) {
            viewed = true;
            for m in self.ac.find_iter(&html.bytes) {
                let (start, end) = html.source(m.start(), m.end());
                found.push(Found {
                    start,
                    end,
                    pattern: m.pattern().as_usize(),
                });
            }
            safe = html.unit_start(safe);
        }
        if viewed && found.len() > 1 {
            found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
            let mut merged: Vec<Found> = Vec::with_capacity(found.len());
            for f in found {
                match merged.last_mut() {
                    Some(last) if f.start < last.end => last.end = last.end.max(f.end),
                    _ => merged.push(f),
                }
            }
            found = merged;
        }
        (found, safe)
    }

    /// One chunk of a stream: `held` (what the last call kept back) plus `chunk` is scanned;
    /// everything that can no longer be the start of a match is written out scrubbed, and the
    /// last bytes that may still start one (the longest pattern, or the longest escaped form,
    /// less one byte) are kept back for the next chunk. When that is a lot (large secrets),
    /// chunks are gathered until twice as much is held before a scan. `None` ends the stream.
    fn stream(&self, held: &mut Vec<u8>, chunk: Option<&[u8]>, out: &mut Vec<u8>) {
        match chunk {
            Some(c) => held.extend_from_slice(c),
            None if held.is_empty() => return,
            None => {}
        }
        if self.is_empty() {
            out.append(held);
            return;
        }
        // A match starting before `safe` fits entirely in `held` (patterns are at most max_len
        // bytes, escaped forms at most escaped_len), so what is decided there is final.
        let hold = self.max_len.max(self.escaped_len);
        if chunk.is_some() && hold > AMORTIZE_ABOVE && held.len() < 2 * hold {
            return;
        }
        let safe = if chunk.is_none() {
            held.len()
        } else {
            held.len().saturating_sub(hold.saturating_sub(1))
        };
        let (found, safe) = self.scan(&held[..], safe);
        let mut emitted = 0;
        for f in found {
            if f.start >= safe {
                break;
            }
            out.extend_from_slice(&held[emitted..f.start]);
            out.extend_from_slice(self.replacements[f.pattern].as_bytes());
            emitted = f.end;
        }
        let cut = emitted.max(safe);
        out.extend_from_slice(&held[emitted..cut]);
        held.drain(..cut);
    }

    pub fn len(&self) -> usize {
        self.replacements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replacements.is_empty()
    }

    fn replace(&self, s: &str) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let (found, _) = self.scan(s.as_bytes(), s.len());
        if found.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(s.len());
        let mut at = 0;
        for f in found {
            out.extend_from_slice(&s.as_bytes()[at..f.start]);
            out.extend_from_slice(self.replacements[f.pattern].as_bytes());
            at = f.end;
        }
        out.extend_from_slice(&s.as_bytes()[at..]);
        // Matches start and end on character boundaries (patterns are whole characters, escapes
        // ASCII), so this is always text; were it not, nothing of the secret is kept anyway.
        Some(
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }
}

/// What a view decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// JSON string escapes: `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`, `\uXXXX` and surrogate pairs.
    Json,
    /// HTML character references: numeric (`&#38;`, `&#x26;`) and the named ones for ASCII
    /// punctuation (`&amp;`, `&lt;`, `&sol;`…); `&amp`, `&lt`, `&gt`, `&quot` and numeric ones
    /// also without the `;`, as browsers read them.
    Html,
}

/// One decoded escape: where its character is in the view, and where it came from in the text.
#[derive(Debug, Clone, Copy)]
struct Escape {
    at: usize,
    len: usize,
    src: usize,
    src_len: usize,
}

/// A text with its escapes of one syntax decoded, and where each decoded escape came from;
/// everything between escapes is the text's own bytes.
struct View {
    bytes: Vec<u8>,
    escapes: Vec<Escape>,
}

impl View {
    /// None when `text` holds no escape of the syntax.
    fn decode(text: &[u8], syntax: Syntax) -> Option<View> {
        let lead = match syntax {
            Syntax::Json => b'\\',
            Syntax::Html => b'&',
        };
        // `contains` is std's word-at-a-time memchr: most texts have no escape at all.
        if !text.contains(&lead) {
            return None;
        }
        let mut i = text.iter().position(|&b| b == lead)?;
        let mut bytes = Vec::new();
        let mut escapes = Vec::new();
        let mut copied = 0;
        loop {
            let decoded = match syntax {
                Syntax::Json => json_escape(&text[i..]),
                Syntax::Html => html_reference(&text[i..]),
            };
            match decoded {
                Some((c, n)) => {
                    if bytes.is_empty() {
                        bytes.reserve(text.len());
                    }
                    bytes.extend_from_slice(&text[copied..i]);
                    let mut buf = [0u8; 4];
                    let encoded = c.encode_utf8(&mut buf).as_bytes();
                    escapes.push(Escape {
                        at: bytes.len(),
                        len: encoded.len(),
                        src: i,
                        src_len: n,
                    });
                    bytes.extend_from_slice(encoded);
                    i += n;
                    copied = i;
                }
                None => i += 1,
            }
            match text
                .get(i..)
                .and_then(|rest| rest.iter().position(|&b| b == lead))
            {
                Some(p) => i += p,
                None => break,
            }
        }
        if escapes.is_empty() {
            return None;
        }
        bytes.extend_from_slice(&text[copied..]);
        Some(View { bytes, escapes })
    }

    /// The escape at or before view position `p`, if any.
    fn escape_at_view(&self, p: usize) -> Option<Escape> {
        self.escapes
            .partition_point(|e| e.at <= p)
            .checked_sub(1)
            .map(|k| self.escapes[k])
    }

    /// The escape at or before text position `q`, if any.
    fn escape_at_text(&self, q: usize) -> Option<Escape> {
        self.escapes
            .partition_point(|e| e.src <= q)
            .checked_sub(1)
            .map(|k| self.escapes[k])
    }

    /// The text position of view position `p` (inside an escape: the escape's start).
    fn src_start(&self, p: usize) -> usize {
        match self.escape_at_view(p) {
            None => p,
            Some(e) if p < e.at + e.len => e.src,
            Some(e) => e.src + e.src_len + (p - e.at - e.len),
        }
    }

    /// The text range view bytes `start..end` came from, whole escapes wherever it touches one.
    fn source(&self, start: usize, end: usize) -> (usize, usize) {
        let end = match end
            .checked_sub(1)
            .map(|last| (last, self.escape_at_view(last)))
        {
            None => 0,
            Some((_, None)) => end,
            Some((last, Some(e))) if last < e.at + e.len => e.src + e.src_len,
            Some((_, Some(e))) => e.src + e.src_len + (end - e.at - e.len),
        };
        (self.src_start(start), end)
    }

    /// `q`, or the start of the escape it falls inside.
    fn unit_start(&self, q: usize) -> usize {
        match self.escape_at_text(q) {
            Some(e) if q < e.src + e.src_len => e.src,
            _ => q,
        }
    }

    /// The view position of text position `q`, which starts no escape's middle.
    fn view_pos(&self, q: usize) -> usize {
        match self.escape_at_text(q) {
            None => q,
            Some(e) if q < e.src + e.src_len => e.at,
            Some(e) => e.at + e.len + (q - e.src - e.src_len),
        }
    }
}

/// Four hex digits (either case) as a number.
fn hex4(h: &[u8]) -> Option<u32> {
    if h.len() != 4 || !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
}

/// The character a JSON escape at the start of `s` (a `\`) stands for, and its length; None
/// for what is not one (a lone surrogate stays as written).
fn json_escape(s: &[u8]) -> Option<(char, usize)> {
    let c = match *s.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(s.get(2..6)?)?;
            if (0xD800..0xDC00).contains(&unit) {
                if s.get(6..8)? != b"\\u" {
                    return None;
                }
                let low = hex4(s.get(8..12)?)?;
                if !(0xDC00..0xE000).contains(&low) {
                    return None;
                }
                return char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                    .map(|c| (c, 12));
            }
            return char::from_u32(unit).map(|c| (c, 6));
        }
        _ => return None,
    };
    Some((c, 2))
}

/// Named character references for ASCII punctuation (and the no-break space), HTML5 names.
const HTML_NAMED: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("sol", '/'),
    ("bsol", '\\'),
    ("plus", '+'),
    ("equals", '='),
    ("num", '#'),
    ("colon", ':'),
    ("semi", ';'),
    ("comma", ','),
    ("period", '.'),
    ("lowbar", '_'),
    ("excl", '!'),
    ("quest", '?'),
    ("commat", '@'),
    ("lsqb", '['),
    ("rsqb", ']'),
    ("lpar", '('),
    ("rpar", ')'),
    ("lcub", '{'),
    ("rcub", '}'),
    ("ast", '*'),
    ("percnt", '%'),
    ("dollar", '$'),
    ("verbar", '|'),
    ("grave", '`'),
    ("hat", '^'),
    ("tab", '\t'),
    ("newline", '\n'),
    ("nbsp", '\u{a0}'),
];

/// The character an HTML character reference at the start of `s` (a `&`) stands for, and its
/// length; None for what is not one.
fn html_reference(s: &[u8]) -> Option<(char, usize)> {
    if s.get(1) == Some(&b'#') {
        let (radix, start) = match s.get(2) {
            Some(b'x' | b'X') => (16, 3),
            _ => (10, 2),
        };
        let digits = s
            .get(start..)?
            .iter()
            .take(10)
            .take_while(|b| {
                if radix == 16 {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            })
            .count();
        if digits == 0 {
            return None;
        }
        let n = u32::from_str_radix(std::str::from_utf8(&s[start..start + digits]).ok()?, radix)
            .ok()?;
        let end = start + digits;
        let len = if s.get(end) == Some(&b';') {
            end + 1
        } else {
            end
        };
        return char::from_u32(n).filter(|c| *c != '\0').map(|c| (c, len));
    }
    let name_len = s
        .get(1..)?
        .iter()
        .take(8)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let name = &s[1..1 + name_len];
    if s.get(1 + name_len) == Some(&b';') {
        if let Some((_, c)) = HTML_NAMED
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        {
            return Some((*c, name_len + 2));
        }
    }
    // Without the `;`, browsers still read these four (the longest that fits).
    [("quot", '"'), ("amp", '&'), ("lt", '<'), ("gt", '>')]
        .into_iter()
        .find(|(n, _)| name.len() >= n.len() && name[..n.len()].eq_ignore_ascii_case(n.as_bytes()))
        .map(|(n, c)| (c, n.len() + 1))
}

/// The names in `[redacted:NAME]` markers that `after` has more of than `before`, sorted.
fn redacted_names(before: &str, after: &str) -> Vec<String> {
    fn count(s: &str) -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        let mut rest = s;
        while let Some(i) = rest.find("[redacted:") {
            rest = &rest[i + "[redacted:".len()..];
            if let Some(j) = rest.find(']') {
                *m.entry(&rest[..j]).or_default() += 1;
                rest = &rest[j + 1..];
            }
        }
        m
    }
    let was = count(before);
    count(after)
        .into_iter()
        .filter(|(n, k)| was.get(n).is_none_or(|w| w < k))
        .map(|(n, _)| n.to_owned())
        .collect()
}

/// What one scrub pass knows: the project's secrets (shared, built once per vault change) and
/// the patterns this call added (credentials, a value being stored).
#[derive(Clone, Default)]
pub struct Scrubber {
    project: Option<Arc<Needles>>,
    own: Vec<(Zeroizing<String>, String)>,
    exact: Vec<(Zeroizing<String>, String)>,
    compiled: OnceLock<Option<Arc<Needles>>>,
}

impl Scrubber {
    pub fn new() -> Scrubber {
        Scrubber::default()
    }

    /// A scrubber that knows every live secret of a project.
    pub fn for_project(project: Arc<Needles>) -> Scrubber {
        Scrubber {
            project: Some(project),
            ..Scrubber::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.project.as_ref().is_none_or(|p| p.is_empty())
            && self.own.is_empty()
            && self.exact.is_empty()
    }

    /// Registers a secret value under its name, in every form.
    pub fn add(&mut self, name: &str, value: &str) {
        // A value already known keeps the compiled patterns (the credential of a call was
        // already added with every credential of the caller).
        if value.len() < MIN_NEEDLE || self.own.iter().any(|(v, _)| v.as_str() == value) {
            return;
        }
        self.own
            .push((Zeroizing::new(value.to_owned()), name.to_owned()));
        self.compiled = OnceLock::new();
    }

    /// Builds the call's own patterns now, so copies of this scrubber (one per execution of a
    /// batch) share them instead of each building its own.
    pub fn prepare(&self) {
        let _ = self.own_needles();
    }

    /// Registers a value that must not be echoed whatever its length (the value a vault_set call
    /// carries, which may be refused for being short): every form, and its literal form even
    /// when short.
    pub fn add_exact(&mut self, name: &str, value: &str) {
        if value.is_empty() {
            return;
        }
        self.add(name, value);
        self.exact
            .push((Zeroizing::new(value.to_owned()), name.to_owned()));
        self.compiled = OnceLock::new();
    }

    fn own_needles(&self) -> Option<&Arc<Needles>> {
        self.compiled
            .get_or_init(|| {
                if self.own.is_empty() && self.exact.is_empty() {
                    return None;
                }
                let mut pairs = Vec::new();
                let mut longest = 0;
                for (value, name) in &self.own {
                    let replacement = format!("[redacted:{name}]");
                    longest = longest.max(value.len());
                    pairs.extend(
                        forms(value)
                            .into_iter()
                            .filter(|f| f.len() >= MIN_NEEDLE)
                            .map(|f| (Zeroizing::new(f), replacement.clone())),
                    );
                }
                for (value, name) in &self.exact {
                    longest = longest.max(value.len());
                    pairs.push((value.clone(), format!("[redacted:{name}]")));
                }
                Some(Arc::new(Needles::from_pairs(pairs, longest)))
            })
            .as_ref()
    }

    fn replace_all(&self, s: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for needles in self.project.iter().chain(self.own_needles()) {
            if let Some(clean) = needles.replace(out.as_deref().unwrap_or(s)) {
                out = Some(clean);
            }
        }
        out
    }

    pub fn scrub_str(&self, s: &str) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let first = self.replace_all(s);
        let current = first.as_deref().unwrap_or(s);
        match self.unwrap_mime(current) {
            Some(clean) => Some(clean),
            None => first,
        }
    }

    /// `scrub_str`, with the names of the secrets it redacted (sorted, each once).
    pub fn scrub_named(&self, s: &str) -> Option<(String, Vec<String>)> {
        let clean = self.scrub_str(s)?;
        let names = redacted_names(s, &clean);
        Some((clean, names))
    }

    /// The names of the secrets `bytes` hold in any form `scrub_str` finds (read as text; bytes
    /// that are not UTF-8 stand apart from the text around them), sorted: for content that is
    /// sent as it is and cannot be rewritten.
    pub fn secrets_in(&self, bytes: &[u8]) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        self.scrub_named(&String::from_utf8_lossy(bytes))
            .map(|(_, names)| names)
            .unwrap_or_default()
    }

    /// MIME-wrapped base64 (line breaks every 76 characters) can split a secret's encoding:
    /// base64 runs that span line breaks are checked with the breaks removed, and a run that
    /// holds a secret is replaced by its scrubbed, unwrapped text.
    fn unwrap_mime(&self, s: &str) -> Option<String> {
        if !s.contains('\n') {
            return None;
        }
        let is_b64 =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_');
        let mut out = String::with_capacity(s.len());
        let mut changed = false;
        let mut rest = s;
        while !rest.is_empty() {
            let start = rest.find(is_b64).unwrap_or(rest.len());
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            if rest.is_empty() {
                break;
            }
            // A run of base64 characters and line breaks.
            let end = rest
                .find(|c: char| !(is_b64(c) || c == '\r' || c == '\n'))
                .unwrap_or(rest.len());
            let run = rest[..end].trim_end_matches(['\r', '\n']);
            let tail_breaks = &rest[run.len()..end];
            if run.contains('\n') {
                let joined: String = run.chars().filter(|c| *c != '\r' && *c != '\n').collect();
                if let Some(clean) = self.replace_all(&joined) {
                    out.push_str(&clean);
                    changed = true;
                } else {
                    out.push_str(run);
                }
            } else {
                out.push_str(run);
            }
            out.push_str(tail_breaks);
            rest = &rest[end..];
        }
        changed.then_some(out)
    }

    /// Scrubs every string (and object key) inside a JSON value.
    pub fn scrub(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Some(clean) = self.scrub_str(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.scrub(i)),
            Value::Object(map) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let mut val = map.remove(&k).unwrap_or(Value::Null);
                    self.scrub(&mut val);
                    let key = self.scrub_str(&k).unwrap_or(k);
                    map.insert(key, val);
                }
            }
            _ => {}
        }
    }

    /// A scrubber for a byte stream (a proxied response body), chunk by chunk.
    pub fn stream(&self) -> StreamScrubber {
        let stages = self
            .project
            .iter()
            .chain(self.own_needles())
            .filter(|n| !n.is_empty())
            .map(|n| (n.clone(), Vec::new()))
            .collect();
        StreamScrubber { stages }
    }
}

/// Scrubs a byte stream as it passes: each stage holds back at most its longest pattern (or
/// escaped form) less one byte, so a secret split across chunks is still found. (MIME-wrapped
/// base64 is found in JSON values and whole strings, not in streams.)
pub struct StreamScrubber {
    stages: Vec<(Arc<Needles>, Vec<u8>)>,
}

impl StreamScrubber {
    /// The scrubbed bytes that can be sent now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.run(Some(chunk))
    }

    /// The rest, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        self.run(None)
    }

    fn run(&mut self, chunk: Option<&[u8]>) -> Vec<u8> {
        let end = chunk.is_none();
        let mut input: Vec<u8> = chunk.map(<[u8]>::to_vec).unwrap_or_default();
        for (needles, held) in &mut self.stages {
            let mut out = Vec::with_capacity(input.len());
            if end {
                // The earlier stages' rest is this stage's last chunk.
                held.extend_from_slice(&input);
                needles.stream(held, None, &mut out);
            } else {
                needles.stream(held, Some(&input), &mut out);
            }
            input = out;
        }
        input
    }
}

/// Every encoded form of a secret value that a response or record may carry. (Its characters
/// written as JSON escapes or HTML references are found by decoding them: see `View`.)
pub fn forms(value: &str) -> Vec<String> {
    let mut forms: Vec<String> = vec![value.to_owned()];
    let json = serde_json::to_string(value).unwrap_or_default();
    forms.push(json[1..json.len() - 1].to_owned());
    forms.push(percent(value, false, ""));
    forms.push(percent(value, true, ""));
    forms.push(percent(value, false, "/"));
    forms.push(percent(value, false, ";,/?:@&=+$#!'()*"));
    forms.push(hex::encode(value.as_bytes()));
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        forms.extend(base64_cores(engine, value.as_bytes()));
    }
    forms.dedup();
    forms
}

/// Percent-encoding of everything but unreserved characters and `keep`; `plus` writes spaces as
/// '+' (form encoding). Hex letter case does not matter: matching ignores ASCII case.
fn percent(s: &str, plus: bool, keep: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' if plus => out.push('+'),
            _ if b.is_ascii() && keep.as_bytes().contains(&b) => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The base64 characters that depend only on the secret's bytes, for each of the three
/// alignments the secret can have inside a longer encoded blob (e.g. `user:secret` in Basic
/// auth).
fn base64_cores(engine: &base64::engine::GeneralPurpose, secret: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for k in 0..3usize {
        let mut buf = vec![0u8; k];
        buf.extend_from_slice(secret);
        let enc = engine.encode(&buf);
        let n = secret.len();
        // Character c covers bits [6c, 6c + 6) of the buffer; keep those within the secret's bits.
        let first = (8 * k).div_ceil(6);
        let last_exclusive = (8 * (k + n)) / 6;
        if last_exclusive > first && last_exclusive <= enc.len() {
            out.push(enc[first..last_exclusive].to_owned());
        }
        if k == 0 {
            // The full encoding as well, for a secret encoded on its own (with padding too).
            out.push(enc.clone());
            out.push(STANDARD.encode(secret));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cr3t/t0ken+value\"x";

    /// JSON text with the characters HTML-safe encoders escape written as `\u00XX`.
    fn html_safe(json: &str) -> String {
        let mut out = String::with_capacity(json.len());
        for c in json.chars() {
            match c {
                '<' | '>' | '&' | '\'' | '=' => out.push_str(&format!("\\u{:04x}", c as u32)),
                other => out.push(other),
            }
        }
        out
    }

    fn scrubber() -> Scrubber {
        let mut s = Scrubber::new();
        s.add("TOKEN", SECRET);
        s
    }

    #[test]
    fn a_64_kib_secret_compiles_to_an_nfa_and_is_still_redacted_in_its_encodings() {
        let secret: String = (0..64 * 1024)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let mut s = Scrubber::new();
        s.add_exact("BIG", &secret);
        assert_eq!(
            s.own_needles().unwrap().ac.kind(),
            AhoCorasickKind::ContiguousNFA
        );
        let mut v = json!({ "raw": format!("x{secret}y"), "b64": STANDARD.encode(&secret) });
        s.scrub(&mut v);
        assert_eq!(
            v,
            json!({ "raw": "x[redacted:BIG]y", "b64": "[redacted:BIG]" })
        );
        let mut small = Scrubber::new();
        small.add("TOKEN", SECRET);
        assert_eq!(
            small.own_needles().unwrap().ac.kind(),
            AhoCorasickKind::DFA,
            "small sets keep the fastest search"
        );
    }

    #[test]
    fn raw_json_url_and_base64_forms_are_redacted() {
        let s = scrubber();
        let mut v = json!({
            "raw": format!("Bearer {SECRET}"),
            "json": serde_json::to_string(&json!({ "t": SECRET })).unwrap(),
            "url": format!("https://x.example/?t={}", percent(SECRET, false, "")),
            "form": format!("t={}", percent(SECRET, true, "").to_lowercase()),
            "b64": STANDARD.encode(SECRET),
            "basic": format!("Basic {}", STANDARD.encode(format!("user:{SECRET}"))),
            "basic2": format!("Basic {}", STANDARD.encode(format!("ab:{SECRET}"))),
            "nested": [{ SECRET: "as a key" }]
        });
        s.scrub(&mut v);
        let text = v.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("[redacted:TOKEN]"));
        for field in ["raw", "json", "url", "form", "b64", "basic", "basic2"] {
            assert!(
                v[field].as_str().unwrap().contains("[redacted:TOKEN]"),
                "{field}: {}",
                v[field]
            );
        }
        let core = &STANDARD_NO_PAD.encode(SECRET)[..12];
        assert!(
            !text.contains(core),
            "no encoded fragment of the secret survives"
        );
    }

    #[test]
    fn escaped_percent_hex_cased_and_mime_wrapped_forms_are_redacted() {
        let secret = "Mixed&Case/Token=42<x>";
        let mut s = Scrubber::new();
        s.add("K", secret);
        let json = serde_json::to_string(secret).unwrap();
        let json = &json[1..json.len() - 1];
        // The secret's encoding starts at character 144 and straddles the line break at 152.
        let long_blob = STANDARD.encode(format!("{}{secret}{}", "a".repeat(108), "b".repeat(90)));
        let wrapped: String = long_blob
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join("\r\n");
        let cases = [
            ("escaped slashes", json.replace('/', "\\/")),
            ("html-safe json", html_safe(json)),
            ("percent leaving /", percent(secret, false, "/")),
            (
                "percent, reserved kept",
                percent(secret, false, ";,/?:@&=+$#!'()*"),
            ),
            ("upper-cased", secret.to_uppercase()),
            ("lower-cased", secret.to_lowercase()),
            ("hex", hex::encode(secret)),
            ("HEX", hex::encode_upper(secret)),
            ("mime-wrapped base64", wrapped.clone()),
        ];
        for (what, form) in cases {
            let out = s
                .scrub_str(&format!("before {form} after"))
                .unwrap_or_else(|| panic!("{what} not scrubbed: {form}"));
            assert!(out.contains("[redacted:K]"), "{what}: {out}");
            assert!(
                !out.to_lowercase().contains("mixed&case") && !out.contains(&hex::encode(secret)),
                "{what}: {out}"
            );
        }
        assert!(
            !wrapped.contains(&STANDARD_NO_PAD.encode(secret)[2..14]),
            "the test blob splits the secret"
        );
        let out = s.scrub_str(&wrapped).unwrap();
        let core = &STANDARD_NO_PAD.encode(secret)[2..14];
        assert!(!out.replace("\r\n", "").contains(core), "{out}");
    }

    /// The JSON string text of `value` with the characters `escape` picks written `\uXXXX`
    /// (`upper`: hex digits in upper case; characters outside the BMP as surrogate pairs) and
    /// the others as serde_json writes them.
    fn u_escaped(value: &str, escape: impl Fn(char) -> bool, upper: bool) -> String {
        let mut out = String::new();
        for c in value.chars() {
            if escape(c) {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&if upper {
                        format!("\\u{u:04X}")
                    } else {
                        format!("\\u{u:04x}")
                    });
                }
            } else {
                let j = serde_json::to_string(&c.to_string()).unwrap();
                out.push_str(&j[1..j.len() - 1]);
            }
        }
        out
    }

    fn json_text(s: &str) -> String {
        let j = serde_json::to_string(s).unwrap();
        j[1..j.len() - 1].to_owned()
    }

    #[test]
    fn any_json_writer_escape_of_the_secrets_characters_is_redacted() {
        let secret = "Mixed&Case/Token=42<x>'+y\"z";
        let mut s = Scrubber::new();
        s.add("K", secret);
        let go = u_escaped(secret, |c| matches!(c, '<' | '>' | '&'), false);
        let cases = [
            ("go: <, > and & escaped, ' and = kept", go.clone()),
            (
                "/ as \\/ and & as \\u0026 only",
                u_escaped(secret, |c| c == '&', false).replace('/', "\\/"),
            ),
            ("+ as \\u002b", u_escaped(secret, |c| c == '+', false)),
            (
                "= and ' in upper-case hex",
                u_escaped(secret, |c| matches!(c, '=' | '\''), true),
            ),
            ("/ as \\u002f", u_escaped(secret, |c| c == '/', false)),
            ("\" as \\u0022", u_escaped(secret, |c| c == '"', false)),
            (
                "every character, upper-case hex",
                u_escaped(secret, |_| true, true),
            ),
            (
                "letters escaped too",
                u_escaped(secret, |c| c.is_ascii_alphabetic(), false),
            ),
        ];
        let mut missed = Vec::new();
        for (what, form) in cases {
            if s.scrub_str(&format!("before {form} after")).as_deref()
                != Some("before [redacted:K] after")
            {
                missed.push(format!("{what}: {form}"));
            }
        }
        // A JSON document inside a JSON string: the writer's escapes escaped once more.
        let twice = json_text(&format!("{{\"t\":\"{go}\"}}"));
        if s.scrub_str(&twice).as_deref() != Some(r#"{\"t\":\"[redacted:K]\"}"#) {
            missed.push(format!("escaped twice: {twice}"));
        }
        // Non-ASCII secrets as ensure_ascii writers (Python) send them, surrogate pairs included.
        let wide = "p\u{e4}ssw\u{f6}rd-\u{1F600}-t\u{f6}k\u{e9}n";
        let mut w = Scrubber::new();
        w.add("W", wide);
        for upper in [false, true] {
            let form = u_escaped(wide, |c| !c.is_ascii(), upper);
            assert!(
                form.contains("\\ud83d") || form.contains("\\uD83D"),
                "{form}"
            );
            if w.scrub_str(&format!("[{form}]")).as_deref() != Some("[[redacted:W]]") {
                missed.push(format!("non-ASCII as \\u escapes: {form}"));
            }
        }
        assert!(missed.is_empty(), "not redacted: {missed:#?}");
    }

    #[test]
    fn html_character_references_of_the_secrets_characters_are_redacted() {
        let secret = "Mixed&Case/Token=42<x>'+y\"z";
        let mut s = Scrubber::new();
        s.add("K", secret);
        let html = |named: bool| -> String {
            secret
                .chars()
                .map(|c| match (c, named) {
                    ('&', true) => "&amp;".to_owned(),
                    ('<', true) => "&lt;".to_owned(),
                    ('>', true) => "&GT;".to_owned(),
                    ('"', true) => "&quot;".to_owned(),
                    ('\'', true) => "&#39;".to_owned(),
                    ('&' | '<' | '>' | '"' | '\'' | '/', false) => format!("&#x{:X};", c as u32),
                    ('=', false) => "&#61;".to_owned(),
                    (c, _) => c.to_string(),
                })
                .collect()
        };
        for form in [html(true), html(false)] {
            assert_eq!(
                s.scrub_str(&format!("<p>{form}</p>")).as_deref(),
                Some("<p>[redacted:K]</p>"),
                "{form}"
            );
        }
        assert_eq!(
            s.scrub_str("a &amp; b &lt;p&gt; &#38; &unknown; &#xZZ; & end"),
            None,
            "other references are left alone"
        );
    }

    #[test]
    fn escapes_around_a_secret_are_kept_byte_for_byte() {
        let secret = "a&b/c+d=e<f>-token";
        let s = Scrubber::for_project(Arc::new(Needles::build([("T", secret)])));
        let unrelated = r#"a\u0026b \/ \ud83d\ude00 \\u0026 \u12 \ud800 \"q\" \n \x end\"#;
        assert_eq!(s.scrub_str(unrelated), None, "no secret, nothing changed");
        let text = format!(
            "{unrelated} {} {unrelated}",
            u_escaped(secret, |c| c == '&', true)
        );
        assert_eq!(
            s.scrub_str(&text),
            Some(format!("{unrelated} [redacted:T] {unrelated}"))
        );
    }

    #[test]
    fn a_stream_redacts_escaped_secrets_whatever_its_chunks() {
        let secret = "a&b/c+d=e<f>-token";
        let s = Scrubber::for_project(Arc::new(Needles::build([("T", secret)])));
        let go = u_escaped(secret, |c| matches!(c, '<' | '>' | '&'), false);
        let all = u_escaped(secret, |_| true, true);
        let text = format!(
            r#"{{"x":"{go}","y":"{all}","z":"\u0026 kept \/","w":"{}"}}"#,
            json_text(&format!("{{\"t\":\"{go}\"}}"))
        );
        let expected = r#"{"x":"[redacted:T]","y":"[redacted:T]","z":"\u0026 kept \/","w":"{\"t\":\"[redacted:T]\"}"}"#;
        for size in [1, 2, 3, 5, 7, 11, 16, 64, 1000] {
            let mut st = s.stream();
            let mut out = Vec::new();
            for c in text.as_bytes().chunks(size) {
                out.extend(st.push(c));
            }
            out.extend(st.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                expected,
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn secrets_in_bytes_are_named_whatever_surrounds_them() {
        let s = Scrubber::for_project(Arc::new(Needles::build([
            ("A", "alpha-secret-1"),
            ("B", "beta/secret&2"),
        ])));
        let mut bytes = vec![0xff, 0xfe, 0x00];
        bytes.extend_from_slice(b"alpha-secret-1");
        bytes.push(0xc3); // a stray lead byte before the next one
        bytes.extend_from_slice(STANDARD.encode("beta/secret&2").as_bytes());
        assert_eq!(s.secrets_in(&bytes), vec!["A", "B"]);
        assert!(s.secrets_in(&[0u8, 1, 2, 0xff]).is_empty());
        let (clean, names) = s
            .scrub_named("[redacted:A] and beta\\/secret\\u00262")
            .unwrap();
        assert_eq!(clean, "[redacted:A] and [redacted:B]");
        assert_eq!(
            names,
            vec!["B"],
            "a marker that was there already is not counted"
        );
    }

    #[test]
    fn a_stream_redacts_html_references_and_a_large_secrets_escapes_across_chunks() {
        let big: String = (0..4096)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect::<String>()
            + "&<>";
        let s = Scrubber::for_project(Arc::new(Needles::build([
            ("BIG", big.as_str()),
            ("H", "p&ss<word>1"),
        ])));
        let text = format!(
            "<p>p&amp;ss&#60;word&gt;1</p> {} end",
            u_escaped(&big, |_| true, false)
        );
        for size in [7, 1000, 8192] {
            let mut st = s.stream();
            let mut out = Vec::new();
            for c in text.as_bytes().chunks(size) {
                out.extend(st.push(c));
            }
            out.extend(st.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "<p>[redacted:H]</p> [redacted:BIG] end",
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn one_automaton_holds_every_secret_of_a_project() {
        let values: Vec<(String, String)> = (0..200)
            .map(|i| {
                (
                    format!("S{i}"),
                    format!("value-{i:04}-{}", "q".repeat(i % 7)),
                )
            })
            .collect();
        let n = Arc::new(Needles::build(
            values.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ));
        let s = Scrubber::for_project(n);
        let text = format!("x {} y {} z", values[3].1, values[150].1.to_uppercase());
        let out = s.scrub_str(&text).unwrap();
        assert_eq!(out, "x [redacted:S3] y [redacted:S150] z");
    }

    #[test]
    fn a_stream_is_scrubbed_whatever_its_chunks() {
        let mut s = Scrubber::for_project(Arc::new(Needles::build([("VAULT", "vault-value-123")])));
        s.add("conn_credential", "ghp_AbCdEf123456");
        let text = "a ghp_AbCdEf123456 b VAULT-VALUE-123 c %22vault-value-123 d".as_bytes();
        for size in [1, 2, 3, 5, 7, 16, 1000] {
            let mut st = s.stream();
            let mut out = Vec::new();
            for c in text.chunks(size) {
                out.extend(st.push(c));
            }
            out.extend(st.finish());
            let out = String::from_utf8(out).unwrap();
            assert_eq!(
                out, "a [redacted:conn_credential] b [redacted:VAULT] c %22[redacted:VAULT] d",
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn short_values_and_unrelated_text_are_left_alone() {
        let mut s = Scrubber::new();
        s.add("PIN", "1234");
        assert!(s.is_empty());
        let s = scrubber();
        let mut v = json!({ "msg": "nothing to see" });
        s.scrub(&mut v);
        assert_eq!(v, json!({ "msg": "nothing to see" }));
        let mut exact = Scrubber::new();
        exact.add_exact("PIN", "1234");
        assert_eq!(
            exact.scrub_str("pin 1234").as_deref(),
            Some("pin [redacted:PIN]")
        );
    }
}
