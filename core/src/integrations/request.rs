//! Turning a tool's request template and validated arguments into an HTTP request, injecting a
//! credential, and shaping the response. Path placeholders are percent-encoded as one segment,
//! so arguments can never change the host or climb the path.

use serde_json::{Map, Value};

pub use super::definition::END_USER;
use super::definition::{BodyEncoding, Inject, NextAs, NextFrom, RequestDef, ResultDef};
use crate::catalog::HandlerError;

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: reqwest::Method,
    pub url: url::Url,
    pub headers: Vec<(String, String)>,
    pub body: Option<Body>,
}

/// A request body and how it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Json(Value),
    /// Already encoded as `application/x-www-form-urlencoded`.
    Form(String),
    /// Bytes with their content type (multipart uploads).
    Raw {
        content_type: String,
        bytes: Vec<u8>,
    },
}

impl Body {
    /// The content type and the bytes on the wire.
    pub fn encode(&self) -> (String, Vec<u8>) {
        match self {
            Body::Json(v) => (
                "application/json".into(),
                serde_json::to_vec(v).unwrap_or_default(),
            ),
            Body::Form(s) => (
                "application/x-www-form-urlencoded".into(),
                s.clone().into_bytes(),
            ),
            Body::Raw {
                content_type,
                bytes,
            } => (content_type.clone(), bytes.clone()),
        }
    }
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
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
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
        let (name, several) = match tail[..j].strip_prefix('+') {
            Some(n) => (n, true),
            None => (&tail[..j], false),
        };
        match args.get(name).and_then(arg_text) {
            Some(v) => {
                if segment {
                    // `{+name}` keeps '/' between segments; no segment may be empty or climb.
                    let parts: Vec<&str> = if several {
                        v.split('/').collect()
                    } else {
                        vec![v.as_str()]
                    };
                    if parts
                        .iter()
                        .any(|p| p.is_empty() || *p == "." || *p == "..")
                    {
                        let what = if several {
                            "must have no empty, '.' or '..' segment"
                        } else {
                            "must not be empty, '.' or '..'"
                        };
                        return Err(HandlerError::invalid(format!("/{name}"), what));
                    }
                    let encoded: Vec<String> = parts.iter().map(|p| encode_segment(p)).collect();
                    out.push_str(&encoded.join("/"));
                } else {
                    out.push_str(&v);
                }
            }
            None if segment => {
                return Err(HandlerError::invalid(format!("/{name}"), "is required"))
            }
            None => return Ok(None),
        }
        rest = &tail[j + 1..];
    }
    out.push_str(rest);
    Ok(Some(out))
}

/// `$arg` strings become the argument (type kept) or vanish when it is absent. A nested object
/// or array built only around absent arguments vanishes too (an optional `{"type": "emoji",
/// "emoji": "$icon"}` is not sent as `{"type": "emoji"}`); the body itself is always sent.
fn fill_body(t: &Value, args: &Value) -> Option<Value> {
    fill_nested(t, args, true).value
}

struct Filled {
    value: Option<Value>,
    /// Whether the template held any `$arg`, and whether any of them was given.
    placeholders: bool,
    given: bool,
}

fn fill_nested(t: &Value, args: &Value, top: bool) -> Filled {
    match t {
        Value::String(s) if s.starts_with('$') && s.len() > 1 => {
            let value = args.get(&s[1..]).filter(|v| !v.is_null()).cloned();
            Filled {
                given: value.is_some(),
                value,
                placeholders: true,
            }
        }
        Value::Object(m) => {
            let (mut out, mut placeholders, mut given) = (Map::new(), false, false);
            for (k, v) in m {
                let f = fill_nested(v, args, false);
                placeholders |= f.placeholders;
                given |= f.given;
                if let Some(x) = f.value {
                    out.insert(k.clone(), x);
                }
            }
            let keep = top || given || !placeholders;
            Filled {
                value: keep.then_some(Value::Object(out)),
                placeholders,
                given,
            }
        }
        Value::Array(a) => {
            let (mut out, mut placeholders, mut given) = (Vec::new(), false, false);
            for v in a {
                let f = fill_nested(v, args, false);
                placeholders |= f.placeholders;
                given |= f.given;
                out.extend(f.value);
            }
            let keep = top || given || !placeholders;
            Filled {
                value: keep.then_some(Value::Array(out)),
                placeholders,
                given,
            }
        }
        other => Filled {
            value: Some(other.clone()),
            placeholders: false,
            given: false,
        },
    }
}

/// Flattens a JSON value into form pairs the way Stripe and Rails read them: `a[b]=v`,
/// `a[0]=v`; nulls are left out.
fn flatten_form(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}[{k}]")
                };
                flatten_form(&key, x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten_form(&format!("{prefix}[{i}]"), x, out);
            }
        }
        Value::Null => {}
        other => {
            if let Some(t) = arg_text(other) {
                out.push((prefix.to_owned(), t));
            }
        }
    }
}

fn form_body(v: &Value) -> String {
    let mut pairs = Vec::new();
    flatten_form("", v, &mut pairs);
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// The URL of `path` under the base URL (whose own path, if any, is kept as a prefix).
pub fn join(base: &url::Url, path: &str) -> url::Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    url.set_path(&format!("{prefix}{path}"));
    url.set_query(None);
    url
}

/// The arguments a template is filled from: the validated arguments and the caller's end user
/// under `END_USER`, which an argument of that name can never supply.
pub fn with_end_user(args: &Value, end_user_id: Option<&str>) -> Value {
    let mut filled = args.clone();
    if let Some(map) = filled.as_object_mut() {
        map.remove(END_USER);
        if let Some(id) = end_user_id {
            map.insert(END_USER.to_owned(), Value::String(id.to_owned()));
        }
    }
    filled
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
        body: req
            .body
            .as_ref()
            .and_then(|b| fill_body(b, args))
            .map(|b| match req.body_encoding {
                BodyEncoding::Json => Body::Json(b),
                BodyEncoding::Form => Body::Form(form_body(&b)),
            }),
    })
}

/// Puts a credential where the integration wants it.
pub fn inject(p: &mut Prepared, inject: &Inject, token: &str) {
    match &inject.query {
        Some(q) => {
            p.url.query_pairs_mut().append_pair(q, token);
        }
        None => p.headers.push((
            inject.header.clone(),
            inject.format.replace("{token}", token),
        )),
    }
}

fn at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(v, |cur, seg| match cur {
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

/// The `rel="next"` URL of an RFC 8288 `Link` header value. A next link marked
/// `results="false"` (Sentry's way of saying there is no next page) is no next page.
pub fn link_next(header: &str) -> Option<&str> {
    header.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let params: Vec<&str> = params.split(';').map(str::trim).collect();
        let is_next = params.iter().any(|p| {
            p.strip_prefix("rel=").is_some_and(|r| {
                r.trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|r| r.eq_ignore_ascii_case("next"))
            })
        });
        let empty = params.iter().any(|p| {
            p.strip_prefix("results=")
                .is_some_and(|v| v.trim_matches('"').eq_ignore_ascii_case("false"))
        });
        (is_next && !empty).then_some(url)
    })
}

/// The next page of a paginated answer, as the rule says: a body value, the Link header's
/// next URL (optionally one query parameter of either), the last item's field, or this page's
/// offset plus its length, or the page number plus one. `list` is the page's items (the value at `result.path`) and `args`
/// the call's arguments (defaults applied).
fn next_page(
    rule: &super::definition::NextDef,
    body: &Value,
    list: Option<&Value>,
    link: Option<&str>,
    args: &Value,
) -> Value {
    let items = list
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let more = rule
        .more
        .as_deref()
        .map(|p| at(body, p) == Some(&Value::Bool(true)));
    if more == Some(false) {
        return Value::Null;
    }
    let total = rule
        .total
        .as_deref()
        .and_then(|p| at(body, p))
        .and_then(Value::as_u64);
    let num = |name: &Option<String>| {
        name.as_deref()
            .and_then(|n| args.get(n))
            .and_then(Value::as_u64)
    };
    let raw: Option<String> = match rule.from {
        NextFrom::Body => rule
            .path
            .as_deref()
            .and_then(|p| at(body, p))
            .and_then(arg_text),
        NextFrom::Link => link.and_then(link_next).map(str::to_owned),
        NextFrom::Last => items
            .last()
            .filter(|_| match (more, num(&rule.size)) {
                (None, Some(size)) => items.len() as u64 >= size,
                _ => true,
            })
            .and_then(|last| at(last, rule.path.as_deref().unwrap_or_default()))
            .and_then(arg_text),
        NextFrom::Offset => {
            let start = num(&rule.start).unwrap_or(0);
            let seen = start + items.len() as u64;
            let full = match (more, total, num(&rule.size)) {
                (Some(m), _, _) => m,
                (None, Some(total), _) => seen < total,
                (None, None, Some(size)) => items.len() as u64 >= size,
                (None, None, None) => false,
            };
            (full && !items.is_empty()).then(|| seen.to_string())
        }
        NextFrom::Page => {
            let page = num(&rule.start).unwrap_or(0);
            let size = num(&rule.size);
            let full = match (more, total, size) {
                (Some(m), _, _) => m,
                (None, Some(total), Some(size)) => (page + 1).saturating_mul(size) < total,
                (None, None, Some(size)) => items.len() as u64 >= size,
                _ => false,
            };
            (full && !items.is_empty()).then(|| (page + 1).to_string())
        }
    };
    let raw = raw.filter(|s| !s.is_empty());
    let value = match (&rule.param, raw) {
        (Some(param), Some(v)) => {
            let parsed = url::Url::parse(&v)
                .or_else(|_| url::Url::parse("http://relative.invalid").and_then(|b| b.join(&v)));
            parsed.ok().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == param.as_str())
                    .map(|(_, v)| v.into_owned())
            })
        }
        (None, v) => v,
        (Some(_), None) => None,
    };
    match (rule.as_, value) {
        (NextAs::Page, Some(v)) => v.parse::<u64>().map(Value::from).unwrap_or(Value::Null),
        (NextAs::Cursor, Some(v)) => Value::String(v),
        (_, None) => Value::Null,
    }
}

/// Applies result shaping (the `ok: false` failure convention, path, fields, pagination) to a
/// JSON response; `link` is the response's `Link` header, `args` the call's arguments.
pub fn shape(
    display: &str,
    rule: Option<&ResultDef>,
    body: Value,
    link: Option<&str>,
    args: &Value,
) -> Result<Value, HandlerError> {
    let Some(rule) = rule else { return Ok(body) };
    if let Some(ok) = &rule.ok_field {
        if body.get(ok) == Some(&Value::Bool(false)) {
            let why = rule
                .error_field
                .as_deref()
                .and_then(|f| at(&body, f))
                .and_then(arg_text)
                .unwrap_or_else(|| "unknown error".into());
            return Err(HandlerError::failed(format!(
                "{display} refused the request: {why}"
            )));
        }
    }
    let next = rule.next.as_ref().map(|n| {
        let list = match &rule.path {
            Some(p) => at(&body, p),
            None => Some(&body),
        };
        (n.as_, next_page(n, &body, list, link, args))
    });
    let mut v = match &rule.path {
        Some(p) => match at(&body, p) {
            Some(v) if !v.is_null() => v.clone(),
            // GraphQL answers 200 with `errors` and no data.
            _ => match rule
                .error_field
                .as_deref()
                .and_then(|f| at(&body, f))
                .and_then(arg_text)
            {
                Some(why) => {
                    return Err(HandlerError::failed(format!(
                        "{display} refused the request: {why}"
                    )))
                }
                None => Value::Null,
            },
        },
        None => body,
    };
    if !rule.fields.is_empty() {
        v = pick(&v, &rule.fields);
    }
    if let Some((as_, page)) = next {
        let key = match as_ {
            NextAs::Cursor => "next_cursor",
            NextAs::Page => "next_page",
        };
        let mut out = Map::new();
        // A page with nothing on it often leaves the list out (Gmail): it is still a list.
        out.insert(
            "items".into(),
            if v.is_null() {
                Value::Array(Vec::new())
            } else {
                v
            },
        );
        out.insert(key.into(), page);
        return Ok(Value::Object(out));
    }
    Ok(v)
}

/// Where APIs put the reason of an error, most specific first: `message` (GitHub, Discord,
/// HubSpot, Notion), `error.message` (Google, Stripe, Airtable, PagerDuty), OAuth's
/// `error_description`, Jira's `errorMessages`, GraphQL and Asana `errors[].message`, JSON:API
/// `errors[].detail` and `errors[].title` (Confluence v2), Sentry's `detail`, Zendesk's `description`, a bare `error` string, `title`.
const REASON_PATHS: &[&str] = &[
    "message",
    "error.message",
    "error_description",
    "errorMessages.0",
    "errors.0.message",
    "errors.0.detail",
    "errors.0.title",
    "detail",
    "description",
    "error",
    "title",
];

/// A short reason from an error response body (see `REASON_PATHS`; then the first message of
/// an `errors` object, Jira's field errors), else the start of the body.
pub fn error_reason(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        for path in REASON_PATHS {
            if let Some(s) = at(&v, path).and_then(Value::as_str) {
                return s.chars().take(300).collect();
            }
        }
        if let Some(s) = v
            .get("errors")
            .and_then(Value::as_object)
            .and_then(|m| m.values().find_map(Value::as_str))
        {
            return s.chars().take(300).collect();
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
            query: [
                ("state".to_string(), "{state}".to_string()),
                ("q".to_string(), "is:open {q}".to_string()),
            ]
            .into(),
            body: Some(json!({ "title": "$title", "n": "$n", "fixed": 1, "gone": "$missing" })),
            body_encoding: BodyEncoding::Json,
            headers: Default::default(),
        }
    }

    #[test]
    fn arguments_fill_path_query_and_body_without_escaping_the_path() {
        let base = url::Url::parse("https://api.example.com/v2/").unwrap();
        let p = prepare(
            &base,
            &req("/repos/{owner}/{repo}/pulls"),
            &json!({ "owner": "a/../b", "repo": "r?x=1", "state": "open", "title": "T", "n": 3 }),
        )
        .unwrap();
        assert_eq!(
            p.url.as_str(),
            "https://api.example.com/v2/repos/a%2F..%2Fb/r%3Fx%3D1/pulls?state=open"
        );
        assert_eq!(p.url.host_str(), Some("api.example.com"));
        assert_eq!(
            p.body,
            Some(Body::Json(json!({ "title": "T", "n": 3, "fixed": 1 })))
        );
        assert!(prepare(&base, &req("/repos/{owner}"), &json!({ "owner": ".." })).is_err());
        // A nested object made only of absent arguments is left out; fixed parts stay.
        let nested = json!({ "icon": { "type": "emoji", "emoji": "$icon" }, "doc": { "content": [{ "type": "text", "text": "$d" }] }, "fixed": { "a": 1 } });
        assert_eq!(
            fill_body(&nested, &json!({})),
            Some(json!({ "fixed": { "a": 1 } }))
        );
        assert_eq!(
            fill_body(&nested, &json!({ "d": "x" })).unwrap()["doc"],
            json!({ "content": [{ "type": "text", "text": "x" }] })
        );
        assert_eq!(
            fill_body(&json!({ "only": "$none" }), &json!({})),
            Some(json!({})),
            "the body itself is always sent"
        );
        assert!(prepare(&base, &req("/repos/{owner}"), &json!({})).is_err());
    }

    #[test]
    fn the_end_user_fills_its_placeholder_and_no_argument_can_pose_as_it() {
        let base = url::Url::parse("https://api.example.com").unwrap();
        let mut r = req("/users/{workbench.end_user_id}/orders");
        r.query
            .insert("on_behalf".into(), "{workbench.end_user_id}".into());
        r.headers
            .insert("X-End-User".into(), "{workbench.end_user_id}".into());
        r.body = Some(json!({ "for": "$workbench.end_user_id", "note": "$note" }));
        let spoof = json!({ "note": "n", "workbench.end_user_id": "eu_admin" });
        let p = prepare(&base, &r, &with_end_user(&spoof, Some("eu 4821"))).unwrap();
        assert_eq!(
            p.url.as_str(),
            "https://api.example.com/users/eu%204821/orders?on_behalf=eu+4821"
        );
        assert_eq!(
            p.headers,
            vec![("X-End-User".to_owned(), "eu 4821".to_owned())]
        );
        assert_eq!(
            p.body,
            Some(Body::Json(json!({ "for": "eu 4821", "note": "n" })))
        );
        // Without an end user the path cannot be built, whatever the arguments say.
        assert!(prepare(&base, &r, &with_end_user(&spoof, None)).is_err());
        r.path = "/orders".into();
        let p = prepare(&base, &r, &with_end_user(&spoof, None)).unwrap();
        assert!(p.headers.is_empty() && p.url.query().is_none(), "{p:?}");
        assert_eq!(p.body, Some(Body::Json(json!({ "note": "n" }))));
    }

    #[test]
    fn results_are_shaped_and_ok_false_fails() {
        let rule = ResultDef {
            path: Some("data.items".into()),
            fields: vec!["id".into(), "user.login".into()],
            ..Default::default()
        };
        let body = json!({ "data": { "items": [{ "id": 1, "user": { "login": "ada" }, "noise": true }] } });
        assert_eq!(
            shape("X", Some(&rule), body, None, &json!({})).unwrap(),
            json!([{ "id": 1, "user_login": "ada" }])
        );
        let slack = ResultDef {
            ok_field: Some("ok".into()),
            error_field: Some("error".into()),
            ..Default::default()
        };
        let err = shape(
            "Slack",
            Some(&slack),
            json!({ "ok": false, "error": "channel_not_found" }),
            None,
            &json!({}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            HandlerError::failed("Slack refused the request: channel_not_found")
        );
        assert_eq!(
            error_reason(br#"{"message":"Bad credentials"}"#),
            "Bad credentials"
        );
    }

    #[test]
    fn a_plus_placeholder_keeps_slashes_but_never_climbs() {
        let base = url::Url::parse("https://api.example.com").unwrap();
        let r = RequestDef {
            method: "GET".into(),
            path: "/contents/{+path}".into(),
            ..req("/")
        };
        let r = RequestDef {
            query: Default::default(),
            body: None,
            ..r
        };
        let p = prepare(&base, &r, &json!({ "path": "docs/a b/README.md" })).unwrap();
        assert_eq!(p.url.path(), "/contents/docs/a%20b/README.md");
        for bad in ["docs/../secret", "/etc", "docs//x", "docs/./x", "a/"] {
            assert!(
                prepare(&base, &r, &json!({ "path": bad })).is_err(),
                "{bad}"
            );
        }
        // A '?' or '#' stays inside its segment.
        let p = prepare(&base, &r, &json!({ "path": "a?x=1#f" })).unwrap();
        assert_eq!(
            (p.url.path(), p.url.query()),
            ("/contents/a%3Fx%3D1%23f", None)
        );
    }

    #[test]
    fn a_form_body_is_flattened_the_way_stripe_reads_it() {
        let base = url::Url::parse("https://api.example.com").unwrap();
        let r = RequestDef {
            method: "POST".into(),
            path: "/v1/customers".into(),
            query: Default::default(),
            body: Some(
                json!({ "email": "$email", "metadata": "$metadata", "items": [{ "price": "$price" }], "live": true, "gone": "$none" }),
            ),
            body_encoding: BodyEncoding::Form,
            headers: Default::default(),
        };
        let p = prepare(&base, &r, &json!({ "email": "a+b@example.com", "metadata": { "order": 7, "note": "x&y=z" }, "price": "p_1" })).unwrap();
        let Some(Body::Form(form)) = &p.body else {
            panic!("{:?}", p.body)
        };
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        let want = [
            ("email", "a+b@example.com"),
            ("items[0][price]", "p_1"),
            ("live", "true"),
            ("metadata[note]", "x&y=z"),
            ("metadata[order]", "7"),
        ];
        assert_eq!(pairs, want.map(|(k, v)| (k.to_owned(), v.to_owned())));
        assert_eq!(
            p.body.unwrap().encode().0,
            "application/x-www-form-urlencoded"
        );
    }

    #[test]
    fn a_paginated_answer_says_where_the_next_page_is() {
        use crate::integrations::definition::NextDef;
        let link = r#"<https://api.github.com/repos/a/b/issues?page=3&per_page=2>; rel="next", <https://api.github.com/repos/a/b/issues?page=9>; rel="last""#;
        assert_eq!(
            link_next(link),
            Some("https://api.github.com/repos/a/b/issues?page=3&per_page=2")
        );
        assert_eq!(link_next(r#"<https://x/?page=1>; rel="prev""#), None);
        let sentry = r#"<https://s/?cursor=0:0:1>; rel="previous"; results="false"; cursor="0:0:1", <https://s/?cursor=0:100:0>; rel="next"; results="false"; cursor="0:100:0""#;
        assert_eq!(
            link_next(sentry),
            None,
            "Sentry marks the end with results=false"
        );
        assert_eq!(
            link_next(&sentry.replace(
                r#"rel="next"; results="false""#,
                r#"rel="next"; results="true""#
            )),
            Some("https://s/?cursor=0:100:0")
        );
        let by_link = ResultDef {
            fields: vec!["id".into()],
            next: Some(NextDef {
                from: NextFrom::Link,
                path: None,
                param: Some("page".into()),
                as_: NextAs::Page,
                start: None,
                size: None,
                more: None,
                total: None,
            }),
            ..Default::default()
        };
        let body = json!([{ "id": 1, "x": 2 }]);
        assert_eq!(
            shape("G", Some(&by_link), body.clone(), Some(link), &json!({})).unwrap(),
            json!({ "items": [{ "id": 1 }], "next_page": 3 })
        );
        assert_eq!(
            shape("G", Some(&by_link), body, None, &json!({})).unwrap(),
            json!({ "items": [{ "id": 1 }], "next_page": null })
        );
        let by_body = ResultDef {
            path: Some("results".into()),
            next: Some(NextDef {
                from: NextFrom::Body,
                path: Some("_links.next".into()),
                param: Some("cursor".into()),
                as_: NextAs::Cursor,
                start: None,
                size: None,
                more: None,
                total: None,
            }),
            ..Default::default()
        };
        let page = json!({ "results": [1], "_links": { "next": "/wiki/api/v2/pages?cursor=abc%3D&limit=2" } });
        assert_eq!(
            shape("C", Some(&by_body), page, None, &json!({})).unwrap(),
            json!({ "items": [1], "next_cursor": "abc=" })
        );
        let slack = ResultDef {
            next: Some(NextDef {
                from: NextFrom::Body,
                path: Some("meta.next".into()),
                param: None,
                as_: NextAs::Cursor,
                start: None,
                size: None,
                more: None,
                total: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            shape(
                "S",
                Some(&slack),
                json!({ "meta": { "next": "" } }),
                None,
                &json!({})
            )
            .unwrap()["next_cursor"],
            Value::Null
        );
    }

    #[test]
    fn a_list_paged_by_its_last_id_or_by_offset_says_where_the_next_page_is() {
        use crate::integrations::definition::NextDef;
        let rule = |from, path: Option<&str>, as_, more: Option<&str>| NextDef {
            from,
            path: path.map(Into::into),
            param: None,
            as_,
            start: (from == NextFrom::Offset).then(|| "start_at".into()),
            size: (from == NextFrom::Offset && more.is_none()).then(|| "max_results".into()),
            more: more.map(Into::into),
            total: None,
        };
        let result = |next, path: Option<&str>| ResultDef {
            path: path.map(Into::into),
            fields: vec!["name".into()],
            next: Some(next),
            ..Default::default()
        };
        // Discord: the next page is "after" the last guild's id; an empty page is the last.
        let discord = result(rule(NextFrom::Last, Some("id"), NextAs::Cursor, None), None);
        let guilds = json!([{ "id": "1", "name": "a" }, { "id": "7", "name": "b" }]);
        assert_eq!(
            shape("D", Some(&discord), guilds, None, &json!({})).unwrap(),
            json!({ "items": [{ "name": "a" }, { "name": "b" }], "next_cursor": "7" })
        );
        assert_eq!(
            shape("D", Some(&discord), json!([]), None, &json!({})).unwrap(),
            json!({ "items": [], "next_cursor": null })
        );
        let mut sized = discord.clone();
        sized.next.as_mut().unwrap().size = Some("limit".into());
        let two = json!([{ "id": "1" }, { "id": "7" }]);
        assert_eq!(
            shape("D", Some(&sized), two.clone(), None, &json!({ "limit": 2 })).unwrap()
                ["next_cursor"],
            "7"
        );
        assert_eq!(
            shape("D", Some(&sized), two, None, &json!({ "limit": 3 })).unwrap()["next_cursor"],
            Value::Null,
            "a page shorter than the limit is the last"
        );
        // Stripe: the last id, but only while has_more is true.
        let stripe = result(
            rule(NextFrom::Last, Some("id"), NextAs::Cursor, Some("has_more")),
            Some("data"),
        );
        let page = |more| json!({ "data": [{ "id": "cus_1", "name": "x" }], "has_more": more });
        assert_eq!(
            shape("S", Some(&stripe), page(true), None, &json!({})).unwrap()["next_cursor"],
            "cus_1"
        );
        assert_eq!(
            shape("S", Some(&stripe), page(false), None, &json!({})).unwrap()["next_cursor"],
            Value::Null
        );
        // Jira's user search: a full page continues at start + its length; a short one ends.
        let jira = result(rule(NextFrom::Offset, None, NextAs::Page, None), None);
        let users = json!([{ "name": "a" }, { "name": "b" }]);
        assert_eq!(
            shape(
                "J",
                Some(&jira),
                users.clone(),
                None,
                &json!({ "start_at": 4, "max_results": 2 })
            )
            .unwrap()["next_page"],
            6
        );
        assert_eq!(
            shape(
                "J",
                Some(&jira),
                users.clone(),
                None,
                &json!({ "max_results": 2 })
            )
            .unwrap()["next_page"],
            2,
            "an absent offset is the first page"
        );
        assert_eq!(
            shape("J", Some(&jira), users, None, &json!({ "max_results": 3 })).unwrap()
                ["next_page"],
            Value::Null
        );
        // PagerDuty: offset paging whose body says whether there is more.
        let pd = result(
            rule(NextFrom::Offset, None, NextAs::Page, Some("more")),
            Some("incidents"),
        );
        let body = |more| json!({ "incidents": [{ "name": "a" }], "more": more, "offset": 10 });
        assert_eq!(
            shape("P", Some(&pd), body(true), None, &json!({ "start_at": 10 })).unwrap()
                ["next_page"],
            11
        );
        assert_eq!(
            shape(
                "P",
                Some(&pd),
                body(false),
                None,
                &json!({ "start_at": 10 })
            )
            .unwrap()["next_page"],
            Value::Null
        );
    }

    #[test]
    fn numbered_pages_with_a_total_continue_until_the_total_is_reached() {
        use crate::integrations::definition::NextDef;
        // Superset: pages counted from 0, `count` is the whole list's length.
        let superset = ResultDef {
            path: Some("result".into()),
            fields: vec!["id".into()],
            next: Some(NextDef {
                from: NextFrom::Page,
                path: None,
                param: None,
                as_: NextAs::Page,
                start: Some("page".into()),
                size: Some("page_size".into()),
                more: None,
                total: Some("count".into()),
            }),
            ..Default::default()
        };
        let body = |count| json!({ "count": count, "result": [{ "id": 1 }, { "id": 2 }] });
        let next = |count, args| {
            shape("S", Some(&superset), body(count), None, &args).unwrap()["next_page"].clone()
        };
        assert_eq!(next(5, json!({ "page": 0, "page_size": 2 })), 1);
        assert_eq!(next(5, json!({ "page_size": 2 })), 1, "no page is page 0");
        assert_eq!(next(5, json!({ "page": 1, "page_size": 2 })), 2);
        assert_eq!(
            next(6, json!({ "page": 2, "page_size": 2 })),
            Value::Null,
            "pages 0 to 2 of 2 hold all 6"
        );
        assert_eq!(
            next(3, json!({ "page": 0, "page_size": 3 })),
            Value::Null,
            "a full page that reaches the total is the last"
        );
        assert_eq!(
            shape(
                "S",
                Some(&superset),
                json!({ "count": 9, "result": [] }),
                None,
                &json!({ "page": 7, "page_size": 2 })
            )
            .unwrap(),
            json!({ "items": [], "next_page": null }),
            "an empty page is the last"
        );
        // Without a total in the body, a full page has a next one.
        assert_eq!(
            shape(
                "S",
                Some(&superset),
                json!({ "result": [{ "id": 1 }, { "id": 2 }] }),
                None,
                &json!({ "page": 0, "page_size": 2 })
            )
            .unwrap()["next_page"],
            1
        );
        // Offset paging with a total: the next offset while it is below the total.
        let mut by_offset = superset.clone();
        let n = by_offset.next.as_mut().unwrap();
        n.from = NextFrom::Offset;
        n.start = Some("offset".into());
        let offset = |count, at: u64| {
            shape(
                "O",
                Some(&by_offset),
                body(count),
                None,
                &json!({ "offset": at, "page_size": 5 }),
            )
            .unwrap()["next_page"]
                .clone()
        };
        assert_eq!(offset(10, 4), 6, "a short page below the total continues");
        assert_eq!(offset(6, 4), Value::Null);
    }

    #[test]
    fn error_reasons_come_from_each_apis_own_shape() {
        for (body, want) in [
            (
                r#"{"errorMessages":["Issue does not exist"],"errors":{}}"#,
                "Issue does not exist",
            ),
            (
                r#"{"errorMessages":[],"errors":{"summary":"You must specify a summary"}}"#,
                "You must specify a summary",
            ),
            (
                r#"{"error":{"type":"invalid_request_error","message":"No such customer: 'cus_x'"}}"#,
                "No such customer: 'cus_x'",
            ),
            (
                r#"{"detail":"The requested resource does not exist"}"#,
                "The requested resource does not exist",
            ),
            (
                r#"{"error":"RecordNotFound","description":"Not found"}"#,
                "Not found",
            ),
            (r#"{"errors":[{"detail":"bad id"}]}"#, "bad id"),
            ("upstream exploded", "upstream exploded"),
        ] {
            assert_eq!(error_reason(body.as_bytes()), want, "{body}");
        }
    }
}
