//! Secret scrubbing (D7): every value of a secret used in a call is replaced by
//! `[redacted:NAME]` wherever it appears in what the pipeline returns or records, also when
//! base64- (standard or URL-safe, at any alignment inside a longer blob), URL- or JSON-encoded.

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::Value;
use zeroize::Zeroizing;

/// Encoded forms shorter than this are not searched (too likely to hit innocent text).
const MIN_NEEDLE: usize = 6;

#[derive(Default)]
pub struct Scrubber {
    /// (needle, replacement), longest needle first.
    needles: Vec<(Zeroizing<String>, String)>,
}

impl Scrubber {
    pub fn new() -> Scrubber {
        Scrubber::default()
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Registers a secret value under its name.
    pub fn add(&mut self, name: &str, value: &str) {
        if value.len() < MIN_NEEDLE {
            return;
        }
        let replacement = format!("[redacted:{name}]");
        let mut forms: Vec<String> = vec![value.to_owned()];
        let json = serde_json::to_string(value).unwrap_or_default();
        forms.push(json[1..json.len() - 1].to_owned());
        forms.push(percent(value, false, false));
        forms.push(percent(value, false, true));
        forms.push(percent(value, true, false));
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            forms.extend(base64_cores(engine, value.as_bytes()));
        }
        for f in forms {
            if f.len() >= MIN_NEEDLE && !self.needles.iter().any(|(n, _)| n.as_str() == f) {
                self.needles.push((Zeroizing::new(f), replacement.clone()));
            }
        }
        self.needles.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
    }

    /// Registers a value that must not be echoed whatever its length (the value a vault_set call
    /// carries, which may be refused for being short): only its literal form.
    pub fn add_exact(&mut self, name: &str, value: &str) {
        if value.is_empty() {
            return;
        }
        self.add(name, value);
        if !self.needles.iter().any(|(n, _)| n.as_str() == value) {
            self.needles.push((Zeroizing::new(value.to_owned()), format!("[redacted:{name}]")));
            self.needles.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
        }
    }

    pub fn scrub_str(&self, s: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for (needle, replacement) in &self.needles {
            let current = out.as_deref().unwrap_or(s);
            if current.contains(needle.as_str()) {
                out = Some(current.replace(needle.as_str(), replacement));
            }
        }
        out
    }

    /// Scrubs every string (and object key) inside a JSON value.
    pub fn scrub(&self, v: &mut Value) {
        if self.needles.is_empty() {
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
}

/// Percent-encoding of everything but unreserved characters; `plus` writes spaces as '+'
/// (form encoding), `lower` uses lowercase hex.
fn percent(s: &str, plus: bool, lower: bool) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' if plus => out.push('+'),
            _ if lower => out.push_str(&format!("%{b:02x}")),
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
            out.push(base64::engine::general_purpose::STANDARD.encode(secret));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;

    fn scrubber() -> Scrubber {
        let mut s = Scrubber::new();
        s.add("TOKEN", "s3cr3t/t0ken+value\"x");
        s
    }

    #[test]
    fn raw_json_url_and_base64_forms_are_redacted() {
        let s = scrubber();
        let secret = "s3cr3t/t0ken+value\"x";
        let mut v = json!({
            "raw": format!("Bearer {secret}"),
            "json": serde_json::to_string(&json!({ "t": secret })).unwrap(),
            "url": format!("https://x.example/?t={}", percent(secret, false, false)),
            "form": format!("t={}", percent(secret, true, true)),
            "b64": STANDARD.encode(secret),
            "basic": format!("Basic {}", STANDARD.encode(format!("user:{secret}"))),
            "basic2": format!("Basic {}", STANDARD.encode(format!("ab:{secret}"))),
            "nested": [{ secret: "as a key" }]
        });
        s.scrub(&mut v);
        let text = v.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("[redacted:TOKEN]"));
        for field in ["raw", "json", "url", "form", "b64", "basic", "basic2"] {
            assert!(v[field].as_str().unwrap().contains("[redacted:TOKEN]"), "{field}: {}", v[field]);
        }
        // No encoded fragment of the secret survives either.
        let core = &STANDARD_NO_PAD.encode("s3cr3t/t0ken+value\"x")[..12];
        assert!(!text.contains(core));
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
    }
}
