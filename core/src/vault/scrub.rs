//! Secret scrubbing (D7): every live secret of a project (and the caller's connection
//! credentials, and whatever a call adds) is replaced by `[redacted:NAME]` wherever it appears
//! in what the pipeline returns or records and in what the curl proxy sends back — raw, in any
//! ASCII letter case, JSON-escaped (also with `\/` and `\u00XX` escapes), percent- or
//! form-encoded (also leaving `/` or the URI reserved characters as they are), hex, and base64
//! (standard or URL-safe, at any alignment inside a longer blob, also MIME-wrapped across line
//! breaks). One Aho-Corasick automaton holds every form of every secret of the project, so the
//! cost of a scan does not grow with the number of secrets. See README.md for the guarantee.

use std::collections::HashSet;
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

/// A compiled set of patterns, each with its replacement.
#[derive(Clone)]
pub struct Needles {
    ac: AhoCorasick,
    replacements: Vec<String>,
    /// The longest pattern, in bytes: how much a stream must hold back between chunks.
    max_len: usize,
}

impl std::fmt::Debug for Needles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Needles({} patterns)", self.replacements.len())
    }
}

impl Needles {
    /// Every form of every `(name, value)`; forms shorter than 6 characters are not searched.
    pub fn build<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Needles {
        let mut pairs = Vec::new();
        for (name, value) in secrets {
            let replacement = format!("[redacted:{name}]");
            for form in forms(value) {
                if form.len() >= MIN_NEEDLE {
                    pairs.push((Zeroizing::new(form), replacement.clone()));
                }
            }
        }
        Needles::from_pairs(pairs)
    }

    /// Literal patterns with their replacements; a pattern seen before (ignoring ASCII case)
    /// keeps its first replacement.
    fn from_pairs(pairs: Vec<(Zeroizing<String>, String)>) -> Needles {
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
        Needles { ac, replacements, max_len }
    }

    /// One chunk of a stream: `held` (what the last call kept back) plus `chunk` is scanned;
    /// everything that can no longer be the start of a match is written out scrubbed, and the
    /// last `max_len - 1` bytes are kept back for the next chunk. `None` ends the stream.
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
        // bytes), so what is decided there is final.
        let safe = if chunk.is_none() { held.len() } else { held.len().saturating_sub(self.max_len.saturating_sub(1)) };
        let mut emitted = 0;
        for m in self.ac.find_iter(&held[..]) {
            if m.start() >= safe {
                break;
            }
            out.extend_from_slice(&held[emitted..m.start()]);
            out.extend_from_slice(self.replacements[m.pattern().as_usize()].as_bytes());
            emitted = m.end();
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
        if self.is_empty() || !self.ac.is_match(s) {
            return None;
        }
        let mut out = String::with_capacity(s.len());
        self.ac.replace_all_with(s, &mut out, |m, _, dst| {
            dst.push_str(&self.replacements[m.pattern().as_usize()]);
            true
        });
        Some(out)
    }
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
        Scrubber { project: Some(project), ..Scrubber::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.project.as_ref().is_none_or(|p| p.is_empty()) && self.own.is_empty() && self.exact.is_empty()
    }

    /// Registers a secret value under its name, in every form.
    pub fn add(&mut self, name: &str, value: &str) {
        // A value already known keeps the compiled patterns (the credential of a call was
        // already added with every credential of the caller).
        if value.len() < MIN_NEEDLE || self.own.iter().any(|(v, _)| v.as_str() == value) {
            return;
        }
        self.own.push((Zeroizing::new(value.to_owned()), name.to_owned()));
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
        self.exact.push((Zeroizing::new(value.to_owned()), name.to_owned()));
        self.compiled = OnceLock::new();
    }

    fn own_needles(&self) -> Option<&Arc<Needles>> {
        self.compiled
            .get_or_init(|| {
                if self.own.is_empty() && self.exact.is_empty() {
                    return None;
                }
                let mut pairs = Vec::new();
                for (value, name) in &self.own {
                    let replacement = format!("[redacted:{name}]");
                    pairs.extend(forms(value).into_iter().filter(|f| f.len() >= MIN_NEEDLE).map(|f| (Zeroizing::new(f), replacement.clone())));
                }
                for (value, name) in &self.exact {
                    pairs.push((value.clone(), format!("[redacted:{name}]")));
                }
                Some(Arc::new(Needles::from_pairs(pairs)))
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

    /// MIME-wrapped base64 (line breaks every 76 characters) can split a secret's encoding:
    /// base64 runs that span line breaks are checked with the breaks removed, and a run that
    /// holds a secret is replaced by its scrubbed, unwrapped text.
    fn unwrap_mime(&self, s: &str) -> Option<String> {
        if !s.contains('\n') {
            return None;
        }
        let is_b64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_');
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
            let end = rest.find(|c: char| !(is_b64(c) || c == '\r' || c == '\n')).unwrap_or(rest.len());
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
        let stages = self.project.iter().chain(self.own_needles()).filter(|n| !n.is_empty()).map(|n| (n.clone(), Vec::new())).collect();
        StreamScrubber { stages }
    }
}

/// Scrubs a byte stream as it passes: each stage holds back at most its longest pattern less
/// one byte, so a secret split across chunks is still found. (MIME-wrapped base64 is found in
/// JSON values and whole strings, not in streams.)
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

/// Every encoded form of a secret value that a response or record may carry.
pub fn forms(value: &str) -> Vec<String> {
    let mut forms: Vec<String> = vec![value.to_owned()];
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json[1..json.len() - 1].to_owned();
    let slashes = json.replace('/', "\\/");
    forms.push(html_safe(&json));
    forms.push(html_safe(&slashes));
    forms.push(slashes);
    forms.push(json);
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

/// Percent-encoding of everything but unreserved characters and `keep`; `plus` writes spaces as
/// '+' (form encoding). Hex letter case does not matter: matching ignores ASCII case.
fn percent(s: &str, plus: bool, keep: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
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

    fn scrubber() -> Scrubber {
        let mut s = Scrubber::new();
        s.add("TOKEN", SECRET);
        s
    }

    #[test]
    fn a_64_kib_secret_compiles_to_an_nfa_and_is_still_redacted_in_its_encodings() {
        let secret: String = (0..64 * 1024).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let mut s = Scrubber::new();
        s.add_exact("BIG", &secret);
        assert_eq!(s.own_needles().unwrap().ac.kind(), AhoCorasickKind::ContiguousNFA);
        let mut v = json!({ "raw": format!("x{secret}y"), "b64": STANDARD.encode(&secret) });
        s.scrub(&mut v);
        assert_eq!(v, json!({ "raw": "x[redacted:BIG]y", "b64": "[redacted:BIG]" }));
        let mut small = Scrubber::new();
        small.add("TOKEN", SECRET);
        assert_eq!(small.own_needles().unwrap().ac.kind(), AhoCorasickKind::DFA, "small sets keep the fastest search");
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
            assert!(v[field].as_str().unwrap().contains("[redacted:TOKEN]"), "{field}: {}", v[field]);
        }
        let core = &STANDARD_NO_PAD.encode(SECRET)[..12];
        assert!(!text.contains(core), "no encoded fragment of the secret survives");
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
        let wrapped: String = long_blob.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join("\r\n");
        let cases = [
            ("escaped slashes", json.replace('/', "\\/")),
            ("html-safe json", html_safe(json)),
            ("percent leaving /", percent(secret, false, "/")),
            ("percent, reserved kept", percent(secret, false, ";,/?:@&=+$#!'()*")),
            ("upper-cased", secret.to_uppercase()),
            ("lower-cased", secret.to_lowercase()),
            ("hex", hex::encode(secret)),
            ("HEX", hex::encode_upper(secret)),
            ("mime-wrapped base64", wrapped.clone()),
        ];
        for (what, form) in cases {
            let out = s.scrub_str(&format!("before {form} after")).unwrap_or_else(|| panic!("{what} not scrubbed: {form}"));
            assert!(out.contains("[redacted:K]"), "{what}: {out}");
            assert!(!out.to_lowercase().contains("mixed&case") && !out.contains(&hex::encode(secret)), "{what}: {out}");
        }
        assert!(!wrapped.contains(&STANDARD_NO_PAD.encode(secret)[2..14]), "the test blob splits the secret");
        let out = s.scrub_str(&wrapped).unwrap();
        let core = &STANDARD_NO_PAD.encode(secret)[2..14];
        assert!(!out.replace("\r\n", "").contains(core), "{out}");
    }

    #[test]
    fn one_automaton_holds_every_secret_of_a_project() {
        let values: Vec<(String, String)> = (0..200).map(|i| (format!("S{i}"), format!("value-{i:04}-{}", "q".repeat(i % 7)))).collect();
        let n = Arc::new(Needles::build(values.iter().map(|(a, b)| (a.as_str(), b.as_str()))));
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
            assert_eq!(out, "a [redacted:conn_credential] b [redacted:VAULT] c %22[redacted:VAULT] d", "chunks of {size}");
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
        assert_eq!(exact.scrub_str("pin 1234").as_deref(), Some("pin [redacted:PIN]"));
    }
}
