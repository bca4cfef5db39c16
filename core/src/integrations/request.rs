//! Turning a tool's request template and validated arguments into an HTTP request, injecting a
//! credential, and shaping the response. Path placeholders are percent-encoded as one segment,
//! so arguments can never change the host or climb the path.

use serde_json::{Map, Value};

use super::definition::{Inject, RequestDef, ResultDef};
use crate::catalog::HandlerError;

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: reqwest::Method,
    pub url: url::Url,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

fn arg_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        other => Some(other.to_string()),
    }
}

fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Replaces `{arg}` placeholders; `segment` percent-encodes for a path segment.
fn fill(template: &str, args: &Value, segment: bool) -> Result<Option<String>, HandlerError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let Some(j) = tail.find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let name = &tail[..j];
        match args.get(name).and_then(arg_text) {
            Some(v) => {
                if segment {
                    if v.is_empty() || v == "." || v == ".." {
                        return Err(HandlerError::invalid(format!("/{name}"), "must not be empty, '.' or '..'"));
                    }
                    out.push_str(&encode_segment(&v));
                } else {
                    out.push_str(&v);
                }
            }
            None if segment => return Err(HandlerError::invalid(format!("/{name}"), "is required")),
            None => return Ok(None),
        }
        rest = &tail[j + 1..];
    }
    out.push_str(rest);
    Ok(Some(out))
}

/// `$arg` strings become the argument (type kept) or vanish when it is absent.
fn fill_body(t: &Value, args: &Value) -> Option<Value> {
    match t {
        Value::String(s) if s.starts_with('$') && s.len() > 1 => args.get(&s[1..]).filter(|v| !v.is_null()).cloned(),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if let Some(x) = fill_body(v, args) {
                    out.insert(k.clone(), x);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(a.iter().filter_map(|x| fill_body(x, args)).collect())),
        other => Some(other.clone()),
    }
}

/// The URL of `path` under the base URL (whose own path, if any, is kept as a prefix).
pub fn join(base: &url::Url, path: &str) -> url::Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    url.set_path(&format!("{prefix}{path}"));
    url.set_query(None);
    url
}

pub fn prepare(base: &url::Url, req: &RequestDef, args: &Value) -> Result<Prepared, HandlerError> {
    let path = fill(&req.path, args, true)?.unwrap_or_default();
    let mut url = join(base, &path);
    {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in &req.query {
            if let Some(value) = fill(v, args, false)? {
                pairs.append_pair(k, &value);
            }
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    let mut headers = Vec::new();
    for (k, v) in &req.headers {
        if let Some(value) = fill(v, args, false)? {
            headers.push((k.clone(), value));
        }
    }
    Ok(Prepared {
        method: reqwest::Method::from_bytes(req.method.as_bytes()).unwrap_or(reqwest::Method::GET),
        url,
        headers,
        body: req.body.as_ref().and_then(|b| fill_body(b, args)),
    })
}

/// Puts a credential where the integration wants it.
pub fn inject(p: &mut Prepared, inject: &Inject, token: &str) {
    match &inject.query {
        Some(q) => {
            p.url.query_pairs_mut().append_pair(q, token);
        }
        None => p.headers.push((inject.header.clone(), inject.format.replace("{token}", token))),
    }
}

fn at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').filter(|s| !s.is_empty()).try_fold(v, |cur, seg| match cur {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn pick(v: &Value, fields: &[String]) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|i| pick(i, fields)).collect()),
        Value::Object(_) => {
            let mut out = Map::new();
            for f in fields {
                if let Some(x) = at(v, f) {
                    out.insert(f.replace('.', "_"), x.clone());
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Applies result shaping (and the `ok: false` failure convention) to a JSON response.
pub fn shape(display: &str, rule: Option<&ResultDef>, body: Value) -> Result<Value, HandlerError> {
    let Some(rule) = rule else { return Ok(body) };
    if let Some(ok) = &rule.ok_field {
        if body.get(ok) == Some(&Value::Bool(false)) {
            let why = rule.error_field.as_deref().and_then(|f| at(&body, f)).and_then(arg_text).unwrap_or_else(|| "unknown error".into());
            return Err(HandlerError::failed(format!("{display} refused the request: {why}")));
        }
    }
    let mut v = match &rule.path {
        Some(p) => match at(&body, p) {
            Some(v) if !v.is_null() => v.clone(),
            // GraphQL answers 200 with `errors` and no data.
            _ => match rule.error_field.as_deref().and_then(|f| at(&body, f)).and_then(arg_text) {
                Some(why) => return Err(HandlerError::failed(format!("{display} refused the request: {why}"))),
                None => Value::Null,
            },
        },
        None => body,
    };
    if !rule.fields.is_empty() {
        v = pick(&v, &rule.fields);
    }
    Ok(v)
}

/// A short reason from an error response body: its `message`, `error` or `error.message`.
pub fn error_reason(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        for path in ["message", "error.message", "error_description", "error", "errors.0.message"] {
            if let Some(s) = at(&v, path).and_then(Value::as_str) {
                return s.chars().take(300).collect();
            }
        }
    }
    String::from_utf8_lossy(body).chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(path: &str) -> RequestDef {
        RequestDef {
            method: "GET".into(),
            path: path.into(),
            query: [("state".to_string(), "{state}".to_string()), ("q".to_string(), "is:open {q}".to_string())].into(),
            body: Some(json!({ "title": "$title", "n": "$n", "fixed": 1, "gone": "$missing" })),
            headers: Default::default(),
        }
    }

    #[test]
    fn arguments_fill_path_query_and_body_without_escaping_the_path() {
        let base = url::Url::parse("https://api.example.com/v2/").unwrap();
        let p = prepare(&base, &req("/repos/{owner}/{repo}/pulls"), &json!({ "owner": "a/../b", "repo": "r?x=1", "state": "open", "title": "T", "n": 3 })).unwrap();
        assert_eq!(p.url.as_str(), "https://api.example.com/v2/repos/a%2F..%2Fb/r%3Fx%3D1/pulls?state=open");
        assert_eq!(p.url.host_str(), Some("api.example.com"));
        assert_eq!(p.body, Some(json!({ "title": "T", "n": 3, "fixed": 1 })));
        assert!(prepare(&base, &req("/repos/{owner}"), &json!({ "owner": ".." })).is_err());
        assert!(prepare(&base, &req("/repos/{owner}"), &json!({})).is_err());
    }

    #[test]
    fn results_are_shaped_and_ok_false_fails() {
        let rule = ResultDef { path: Some("data.items".into()), fields: vec!["id".into(), "user.login".into()], ..Default::default() };
        let body = json!({ "data": { "items": [{ "id": 1, "user": { "login": "ada" }, "noise": true }] } });
        assert_eq!(shape("X", Some(&rule), body).unwrap(), json!([{ "id": 1, "user_login": "ada" }]));
        let slack = ResultDef { ok_field: Some("ok".into()), error_field: Some("error".into()), ..Default::default() };
        let err = shape("Slack", Some(&slack), json!({ "ok": false, "error": "channel_not_found" })).unwrap_err();
        assert_eq!(err, HandlerError::failed("Slack refused the request: channel_not_found"));
        assert_eq!(error_reason(br#"{"message":"Bad credentials"}"#), "Bad credentials");
    }
}
