//! OpenAPI 3.0 / 3.1 → a custom app definition: one tool per selected operation, named from its
//! `operationId`, described from its summary and description, with an input schema made of its
//! parameters (path, query, header) and a `body` property for a JSON or form request body.
//! `$ref`s are resolved inside the document only (never fetched); anything the plugin format
//! cannot express is reported per operation instead of being guessed.
//!
//! Bounded in bytes after expansion as well as before: a document is at most 5 MiB of text,
//! YAML aliases may expand it to at most 8 MiB (as compact JSON), and inlining the `$ref`s of
//! the selected operations' parameters and request bodies may produce at most 8 MiB in all
//! (and 20,000 nodes per operation). A document under 1 MiB can otherwise grow into gigabytes
//! (a schema that refers to the next one several times, level after level; an anchor aliased
//! many times); the size is counted before each value is built, so the refusal comes before
//! the memory. 8 MiB is well above what real documents reach (a 5 MiB document's own size,
//! or a hundred tools' input schemas at tens of KiB each) and well below what hurts a process.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::definition::{AuthDef, BodyEncoding, IntegrationDef, RequestDef, ToolDef};
use crate::catalog::{SideEffects, MAX_TOOL_NAME_CHARS};
use crate::{Error, Result};

/// Largest document accepted, inline or fetched.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024 * 1024;
/// Most bytes (as compact JSON) a document may expand to through YAML aliases, and the
/// selected operations' inputs through `$ref` inlining: 8 MiB.
pub use super::bounded_yaml::MAX_EXPANDED_BYTES;
/// Most schema nodes one operation's input schema may grow to once references are inlined.
const MAX_SCHEMA_NODES: usize = 20_000;
const MAX_DESCRIPTION_CHARS: usize = 1_000;
const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

/// Which operations to turn into tools; empty lists select everything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub operation_ids: Vec<String>,
    #[serde(default)]
    pub methods: Vec<String>,
}

/// What the admin chooses besides the document.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The app's name: tool names start with `<name>_`.
    pub name: String,
    pub display_name: Option<String>,
    /// Overrides the document's first server URL.
    pub base_url: Option<String>,
    pub auth: AuthDef,
    pub filter: Filter,
    /// Where the document came from, to resolve a relative server URL.
    pub document_url: Option<url::Url>,
}

/// One operation of the document, selected or not, with the tool it becomes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operation {
    pub operation_id: Option<String>,
    pub method: String,
    pub path: String,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    /// The tool name, when the operation became a tool.
    pub tool: Option<String>,
    pub selected: bool,
    /// Why a selected operation did not become a tool.
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    /// The app definition, ready for `POST /v1/apps`; `None` when no tool could be made.
    pub definition: Option<IntegrationDef>,
    pub operations: Vec<Operation>,
    /// Parameters left out of tools that were made, as "tool: why".
    pub warnings: Vec<String>,
}

/// The refusal of a document over `MAX_DOCUMENT_BYTES`.
pub fn too_large(bytes: usize) -> Error {
    Error::invalid(format!("the document is {bytes} bytes; an OpenAPI document may be at most {MAX_DOCUMENT_BYTES} bytes (5 MiB)"))
}

/// The refusal of a selection whose inputs inline past `MAX_EXPANDED_BYTES`.
fn expands_too_far() -> Error {
    Error::invalid(format!(
        "the document expands past {} MiB once the $refs of the selected operations' parameters and request bodies are inlined; select fewer operations (filter by tags, operation_ids or methods)",
        MAX_EXPANDED_BYTES / (1024 * 1024)
    ))
}

/// Whether `e` refuses a document for its size, before or after expansion (the REST API
/// answers these 413 rather than 400).
pub fn is_too_large(e: &Error) -> bool {
    matches!(e, Error::Invalid(m) if m.starts_with("the document expands past ") || (m.starts_with("the document is ") && m.contains(" bytes; an OpenAPI document may be at most ")))
}

/// Parses JSON or YAML (a document starting with `{` is JSON), then `check_document`s it.
pub fn parse_document(text: &str) -> Result<Value> {
    use super::bounded_yaml::{Bounds, ParseError, MAX_VALUES};
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large(text.len()));
    }
    let doc: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("the document is not valid JSON: {e}")))?
    } else {
        super::bounded_yaml::parse(
            text,
            Bounds {
                values: MAX_VALUES,
                bytes: MAX_EXPANDED_BYTES,
            },
        )
        .map_err(|e| match e {
            ParseError::TooLarge(m) => Error::invalid(m),
            ParseError::Invalid(m) => {
                Error::invalid(format!("the document is not valid YAML or JSON: {m}"))
            }
        })?
    };
    check_document(doc)
}

/// An OpenAPI 3.0 or 3.1 document with paths, or why not.
pub fn check_document(doc: Value) -> Result<Value> {
    let version = doc
        .get("openapi")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !(version.starts_with("3.0") || version.starts_with("3.1")) {
        let found = doc
            .get("swagger")
            .map(|_| "Swagger 2.0".to_owned())
            .unwrap_or_else(|| format!("openapi {version:?}"));
        return Err(Error::invalid(format!(
            "only OpenAPI 3.0 and 3.1 documents can be imported; this one is {found}"
        )));
    }
    if !doc.get("paths").is_some_and(Value::is_object) {
        return Err(Error::invalid("the document has no paths"));
    }
    Ok(doc)
}

/// Builds the app definition from a parsed document.
pub fn import(doc: &Value, opts: &ImportOptions) -> Result<Imported> {
    let base_url = base_url(doc, opts)?;
    let info = doc.get("info").cloned().unwrap_or(json!({}));
    let mut ops = Vec::new();
    let mut tools = Vec::new();
    let mut warnings = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut budget = Budget::default();
    let no_paths = Map::new();
    for (path, item) in doc["paths"].as_object().unwrap_or(&no_paths) {
        // A path item may itself be a reference; its operations are resolved one by one, so
        // one bad operation does not take the others with it.
        let item = match path_item(doc, item) {
            Ok(v) => v,
            Err(why) => {
                ops.push(Operation {
                    operation_id: None,
                    method: "*".into(),
                    path: path.clone(),
                    summary: None,
                    tags: vec![],
                    tool: None,
                    selected: true,
                    skipped: Some(why),
                });
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(*method) else {
                continue;
            };
            let operation_id = op
                .get("operationId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let tags: Vec<String> = op
                .get("tags")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let selected = selects(&opts.filter, method, operation_id.as_deref(), &tags);
            let mut o = Operation {
                operation_id: operation_id.clone(),
                method: method.to_ascii_uppercase(),
                path: path.clone(),
                summary: op.get("summary").and_then(Value::as_str).map(str::to_owned),
                tags,
                tool: None,
                selected,
                skipped: None,
            };
            if selected {
                let name = tool_name(&opts.name, operation_id.as_deref(), method, path);
                if !names.insert(name.clone()) {
                    o.skipped = Some(format!(
                        "its tool name {name} is taken by another operation"
                    ));
                } else {
                    let before = budget.bytes;
                    match operation_tool(doc, item, op, method, path, &name, &mut budget) {
                        Ok((tool, mut notes)) => {
                            o.tool = Some(tool.name.clone());
                            warnings.append(&mut notes);
                            tools.push(tool);
                        }
                        Err(_) if budget.exceeded => return Err(expands_too_far()),
                        Err(why) => {
                            // A skipped operation keeps nothing of what it inlined.
                            budget.bytes = before;
                            o.skipped = Some(why);
                        }
                    }
                }
            }
            ops.push(o);
        }
    }
    let definition = (!tools.is_empty()).then(|| IntegrationDef {
        name: opts.name.clone(),
        display_name: opts
            .display_name
            .clone()
            .or_else(|| info.get("title").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| opts.name.clone()),
        version: info
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("1.0.0")
            .chars()
            .take(40)
            .collect(),
        description: clip(
            info.get("description")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            500,
        ),
        logo: None,
        base_url,
        curl_proxy: false,
        auth: opts.auth.clone(),
        headers: BTreeMap::new(),
        tools,
    });
    if let Some(d) = &definition {
        d.validate()?;
    }
    Ok(Imported {
        definition,
        operations: ops,
        warnings,
    })
}

fn selects(f: &Filter, method: &str, operation_id: Option<&str>, tags: &[String]) -> bool {
    (f.methods.is_empty() || f.methods.iter().any(|m| m.eq_ignore_ascii_case(method)))
        && (f.tags.is_empty() || tags.iter().any(|t| f.tags.contains(t)))
        && (f.operation_ids.is_empty()
            || operation_id.is_some_and(|id| f.operation_ids.iter().any(|x| x == id)))
}

/// The first server URL with its variables at their defaults, or the admin's.
fn base_url(doc: &Value, opts: &ImportOptions) -> Result<String> {
    let raw = match &opts.base_url {
        Some(b) => b.clone(),
        None => {
            let server = doc
                .get("servers")
                .and_then(|s| s.get(0))
                .ok_or_else(|| Error::invalid("the document names no server; give base_url"))?;
            let mut u = server
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if let Some(vars) = server.get("variables").and_then(Value::as_object) {
                for (k, v) in vars {
                    let default = v.get("default").and_then(Value::as_str).unwrap_or_default();
                    u = u.replace(&format!("{{{k}}}"), default);
                }
            }
            match (url::Url::parse(&u), &opts.document_url) {
                (Ok(_), _) => u,
                (Err(_), Some(doc_url)) => doc_url
                    .join(&u)
                    .map_err(|e| Error::invalid(format!("the server URL {u:?}: {e}")))?
                    .to_string(),
                (Err(_), None) => {
                    return Err(Error::invalid(format!(
                        "the document's server URL {u:?} is relative; give base_url"
                    )))
                }
            }
        }
    };
    let u = url::Url::parse(&raw).map_err(|e| Error::invalid(format!("base_url {raw:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() || u.query().is_some() {
        return Err(Error::invalid(format!(
            "base_url {raw:?} must be an http(s) URL without a query"
        )));
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

/// `<app>_<operationId in snake case>` (or method and path), at most the tool-name limit.
fn tool_name(app: &str, operation_id: Option<&str>, method: &str, path: &str) -> String {
    let stem = match operation_id {
        Some(id) if !id.trim().is_empty() => snake(id),
        _ => snake(&format!("{method} {}", path.replace(['{', '}'], ""))),
    };
    let mut name = format!("{app}_{stem}");
    name.truncate(MAX_TOOL_NAME_CHARS);
    name.trim_end_matches('_').to_owned()
}

/// `listPetsByOwner`, `list-pets`, `pets/list` → `list_pets_by_owner`, `list_pets`, `pets_list`.
pub fn snake(s: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() {
        "op".into()
    } else {
        out
    }
}

fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(n - 1).collect();
    out.push('…');
    out
}

/// A path item, through a `$ref` to another one in the document (borrowed, never copied).
fn path_item<'a>(doc: &'a Value, mut item: &'a Value) -> std::result::Result<&'a Value, String> {
    for _ in 0..16 {
        let Some(r) = item.get("$ref").and_then(Value::as_str) else {
            return Ok(item);
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(format!(
                "it refers to another document ({r}), which is never fetched"
            ));
        };
        item = doc
            .pointer(&percent_decode(pointer))
            .ok_or_else(|| format!("its reference {r} points at nothing in the document"))?;
    }
    Err("its path item references go round in a loop".into())
}

/// What `$ref` inlining has produced: nodes for the operation at hand (past `MAX_SCHEMA_NODES`
/// the operation is skipped) and bytes, as compact JSON, for the tools made so far and the
/// operation at hand (past `MAX_EXPANDED_BYTES` the import is refused).
#[derive(Default)]
struct Budget {
    nodes: usize,
    bytes: usize,
    exceeded: bool,
}

impl Budget {
    /// Counts one node whose compact JSON takes `bytes` without its children, before it is built.
    fn take(&mut self, bytes: usize) -> std::result::Result<(), String> {
        self.nodes += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > MAX_EXPANDED_BYTES {
            self.exceeded = true;
            return Err(expands_too_far().to_string());
        }
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(format!(
                "its schemas grow past {MAX_SCHEMA_NODES} nodes once references are resolved"
            ));
        }
        Ok(())
    }
}

/// Inlines local `$ref`s; a reference into another document is refused, a cycle is cut at the
/// repeat (that branch accepts any value), and the whole is bounded in nodes and bytes.
fn resolve(
    doc: &Value,
    v: &Value,
    stack: &mut Vec<String>,
    budget: &mut Budget,
) -> std::result::Result<Value, String> {
    // Each node's own share of its compact JSON (with one separator); children count for
    // themselves.
    let bytes = match v {
        Value::Object(m) if m.get("$ref").and_then(Value::as_str).is_some() => m
            .get("description")
            .and_then(Value::as_str)
            .map_or(0, |d| d.len() + 16),
        Value::Object(m) => 3 + m.keys().map(|k| k.len() + 4).sum::<usize>(),
        Value::Array(a) => 3 + a.len(),
        Value::String(s) => s.len() + 3,
        Value::Number(_) => 9,
        Value::Bool(_) | Value::Null => 6,
    };
    budget.take(bytes)?;
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let Some(pointer) = r.strip_prefix('#') else {
                    return Err(format!(
                        "it refers to another document ({r}), which is never fetched"
                    ));
                };
                if stack.iter().any(|s| s == r) {
                    return Ok(json!({}));
                }
                let pointer = percent_decode(pointer);
                let target = doc.pointer(&pointer).ok_or_else(|| {
                    format!("its reference {r} points at nothing in the document")
                })?;
                stack.push(r.to_owned());
                let out = resolve(doc, target, stack, budget);
                stack.pop();
                let mut out = out?;
                // 3.1 allows a description beside a reference; it describes this use.
                if let (Some(d), Value::Object(o)) = (m.get("description"), &mut out) {
                    o.insert("description".into(), d.clone());
                }
                return Ok(out);
            }
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), resolve(doc, x, stack, budget)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(a) => Ok(Value::Array(
            a.iter()
                .map(|x| resolve(doc, x, stack, budget))
                .collect::<std::result::Result<_, _>>()?,
        )),
        other => Ok(other.clone()),
    }
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// An OpenAPI schema object as JSON Schema: 3.0's `nullable` and boolean exclusive bounds
/// become their JSON Schema forms, annotations JSON Schema lacks are dropped, and (for request
/// bodies) read-only properties leave.
fn to_json_schema(v: &Value, request: bool) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, x) in m {
        match k.as_str() {
            "nullable" | "discriminator" | "xml" | "externalDocs" | "example" | "$schema"
            | "$id" | "$anchor" | "$dynamicAnchor" => {}
            "properties" => {
                let mut props = Map::new();
                for (name, p) in x.as_object().into_iter().flatten() {
                    if request && p.get("readOnly") == Some(&Value::Bool(true)) {
                        continue;
                    }
                    props.insert(name.clone(), to_json_schema(p, request));
                }
                out.insert(k.clone(), Value::Object(props));
            }
            "items"
            | "additionalProperties"
            | "not"
            | "contains"
            | "propertyNames"
            | "if"
            | "then"
            | "else" => {
                out.insert(k.clone(), to_json_schema(x, request));
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                out.insert(
                    k.clone(),
                    Value::Array(
                        x.as_array()
                            .into_iter()
                            .flatten()
                            .map(|s| to_json_schema(s, request))
                            .collect(),
                    ),
                );
            }
            "exclusiveMinimum" | "exclusiveMaximum" if x.is_boolean() => {
                let bound = if k == "exclusiveMinimum" {
                    "minimum"
                } else {
                    "maximum"
                };
                if x == &Value::Bool(true) {
                    if let Some(b) = m.get(bound) {
                        out.insert(k.clone(), b.clone());
                    }
                }
            }
            "minimum" | "maximum"
                if m.get(if k == "minimum" {
                    "exclusiveMinimum"
                } else {
                    "exclusiveMaximum"
                }) == Some(&Value::Bool(true)) => {}
            _ => {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    // Drop required names whose property left (read-only).
    if let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (out.get("required").cloned(), out.get("properties"))
    {
        let kept: Vec<Value> = req
            .into_iter()
            .filter(|r| r.as_str().is_some_and(|n| props.contains_key(n)))
            .collect();
        out.insert("required".into(), Value::Array(kept));
    }
    if m.get("nullable") == Some(&Value::Bool(true)) {
        match out.get("type").cloned() {
            Some(Value::String(t)) => {
                out.insert("type".into(), json!([t, "null"]));
            }
            Some(_) => {}
            None => {
                let inner = Value::Object(out);
                return json!({ "anyOf": [inner, { "type": "null" }] });
            }
        }
    }
    Value::Object(out)
}

/// Headers the connection and the request already set.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "accept",
    "cookie",
    "host",
    "content-length",
];

/// One operation as a tool, with notes on parameters left out. Only what the tool uses (the
/// parameters and the request body) is inlined; responses are never read.
fn operation_tool(
    doc: &Value,
    item: &Value,
    op: &Value,
    method: &str,
    path: &str,
    name: &str,
    budget: &mut Budget,
) -> std::result::Result<(ToolDef, Vec<String>), String> {
    budget.nodes = 0;
    let own = resolve(
        doc,
        op.get("parameters").unwrap_or(&Value::Null),
        &mut Vec::new(),
        budget,
    )?;
    let request_body = op
        .get("requestBody")
        .map(|rb| resolve(doc, rb, &mut Vec::new(), budget))
        .transpose()?;
    let shared = resolve(
        doc,
        item.get("parameters").unwrap_or(&Value::Null),
        &mut Vec::new(),
        budget,
    )?;
    let mut notes = Vec::new();
    // Path-level parameters, overridden by the operation's own (same name and location).
    let mut params: Vec<Value> = Vec::new();
    for p in shared
        .as_array()
        .into_iter()
        .flatten()
        .chain(own.as_array().into_iter().flatten())
    {
        let key = (p.get("name").cloned(), p.get("in").cloned());
        params.retain(|q| (q.get("name").cloned(), q.get("in").cloned()) != key);
        params.push(p.clone());
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut req_path = path.to_owned();
    let mut query = BTreeMap::new();
    let mut headers = BTreeMap::new();
    for p in &params {
        let pname = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a parameter has no name")?;
        let location = p.get("in").and_then(Value::as_str).unwrap_or_default();
        let is_required = p.get("required") == Some(&Value::Bool(true)) || location == "path";
        let schema = p
            .get("schema")
            .cloned()
            .or_else(|| p.pointer("/content/application~1json/schema").cloned())
            .unwrap_or(json!({ "type": "string" }));
        let mut schema = to_json_schema(&schema, true);
        let kind = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        if location == "cookie"
            || (location == "header"
                && RESERVED_HEADERS.contains(&pname.to_ascii_lowercase().as_str()))
        {
            if is_required && location == "cookie" {
                return Err(format!("it needs the cookie parameter {pname}"));
            }
            continue;
        }
        if location == "query" && matches!(kind, "array" | "object") {
            if is_required {
                return Err(format!("its required query parameter {pname} is an {kind}, which the plugin format cannot repeat or nest"));
            }
            notes.push(format!("{name}: query parameter {pname} ({kind}) left out"));
            continue;
        }
        let prop = snake(pname);
        if properties.contains_key(&prop) || prop == "body" {
            return Err(format!("two of its inputs would both be called {prop}"));
        }
        if let (Some(d), Value::Object(s)) =
            (p.get("description").and_then(Value::as_str), &mut schema)
        {
            s.entry("description")
                .or_insert_with(|| json!(clip(d, 300)));
        }
        properties.insert(prop.clone(), schema);
        if is_required {
            required.push(json!(prop.clone()));
        }
        match location {
            "path" => {
                let placeholder = format!("{{{pname}}}");
                if !req_path.contains(&placeholder) {
                    return Err(format!("its path parameter {pname} is not in the path"));
                }
                req_path = req_path.replace(&placeholder, &format!("{{{prop}}}"));
            }
            "query" => {
                query.insert(pname.to_owned(), format!("{{{prop}}}"));
            }
            "header" => {
                headers.insert(pname.to_owned(), format!("{{{prop}}}"));
            }
            other => return Err(format!("its parameter {pname} is in {other:?}")),
        }
    }
    if let Some(left) = super::definition::placeholders(&req_path)
        .into_iter()
        .find(|p| !properties.contains_key(*p))
    {
        return Err(format!(
            "its path uses {{{left}}} but declares no such parameter"
        ));
    }
    let mut body = None;
    let mut body_encoding = BodyEncoding::Json;
    if let Some(rb) = &request_body {
        let no_content = Map::new();
        let content = rb
            .get("content")
            .and_then(Value::as_object)
            .unwrap_or(&no_content);
        let json_type = content.keys().find(|k| {
            let k = k.split(';').next().unwrap_or_default().trim();
            k == "application/json" || (k.starts_with("application/") && k.ends_with("+json"))
        });
        let chosen = match json_type {
            Some(k) => Some((k.clone(), BodyEncoding::Json)),
            None => content
                .keys()
                .find(|k| k.starts_with("application/x-www-form-urlencoded"))
                .map(|k| (k.clone(), BodyEncoding::Form)),
        };
        let body_required = rb.get("required") == Some(&Value::Bool(true));
        match chosen {
            Some((k, enc)) => {
                let mut schema = content[&k]
                    .get("schema")
                    .map_or_else(|| json!({}), |s| to_json_schema(s, true));
                if let (Some(d), Value::Object(s)) =
                    (rb.get("description").and_then(Value::as_str), &mut schema)
                {
                    s.entry("description")
                        .or_insert_with(|| json!(clip(d, 300)));
                }
                properties.insert("body".into(), schema);
                if body_required {
                    required.push(json!("body"));
                }
                body = Some(json!("$body"));
                body_encoding = enc;
            }
            None if body_required => {
                let types: Vec<&String> = content.keys().collect();
                return Err(format!(
                    "its request body is only {types:?}; tools send JSON or form bodies"
                ));
            }
            None => notes.push(format!(
                "{name}: optional request body left out (not JSON or a form)"
            )),
        }
    }
    let summary = op
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
    let details = op
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
    let description = match (summary.is_empty(), details.is_empty()) {
        (false, false) if !details.starts_with(summary) => {
            format!("{}. {details}", summary.trim_end_matches('.'))
        }
        (false, false) => details.to_owned(),
        (false, true) => summary.to_owned(),
        (true, false) => details.to_owned(),
        (true, true) => format!("{} {path}", method.to_ascii_uppercase()),
    };
    let mut input_schema =
        json!({ "type": "object", "additionalProperties": false, "properties": properties });
    if !required.is_empty() {
        input_schema["required"] = Value::Array(required);
    }
    jsonschema::options().build(&input_schema).map_err(|e| {
        format!(
            "its input schema does not compile: {}",
            clip(&e.to_string(), 200)
        )
    })?;
    let side_effects = match method {
        "get" => SideEffects::None,
        "delete" => SideEffects::Destructive,
        _ => SideEffects::Write,
    };
    let tool = ToolDef {
        name: name.to_owned(),
        description: clip(&description, MAX_DESCRIPTION_CHARS),
        side_effects,
        input_schema,
        output_schema: None,
        request: Some(RequestDef {
            method: method.to_ascii_uppercase(),
            path: req_path,
            query,
            body,
            body_encoding,
            headers,
        }),
        handler: None,
        result: None,
    };
    Ok((tool, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(filter: Filter) -> ImportOptions {
        ImportOptions {
            name: "petstore".into(),
            display_name: None,
            base_url: None,
            auth: AuthDef::None,
            filter,
            document_url: None,
        }
    }

    const PETSTORE: &str = r##"
openapi: 3.0.3
info: { title: Petstore, version: 1.2.0, description: Pets for sale }
servers: [{ url: "https://{region}.pets.example/v1", variables: { region: { default: eu } } }]
paths:
  /pets:
    get:
      operationId: listPets
      tags: [pets]
      summary: List pets
      parameters:
        - { name: limit, in: query, schema: { type: integer, maximum: 100, exclusiveMinimum: true, minimum: 0 } }
        - { name: tags, in: query, schema: { type: array, items: { type: string } } }
        - { name: X-Request-ID, in: header, schema: { type: string } }
      responses: { 200: { description: ok } }
    post:
      operationId: createPet
      tags: [pets]
      summary: Create a pet
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: "#/components/schemas/NewPet" } } }
      responses: { 201: { description: created } }
  /pets/{petId}:
    parameters: [{ name: petId, in: path, required: true, schema: { type: string } }]
    get: { operationId: showPetById, tags: [pets], summary: Info for a pet, responses: { 200: { description: ok } } }
    delete: { operationId: deletePet, tags: [admin], responses: { 204: { description: gone } } }
  /pets/{petId}/photo:
    put:
      operationId: uploadPhoto
      parameters: [{ name: petId, in: path, required: true, schema: { type: string } }]
      requestBody: { required: true, content: { image/png: { schema: { type: string, format: binary } } } }
      responses: { 200: { description: ok } }
  /remote:
    get:
      operationId: remoteThing
      parameters: [{ $ref: "https://evil.example/params.yaml#/limit" }]
      responses: { 200: { description: ok } }
components:
  schemas:
    NewPet:
      type: object
      required: [name, id]
      properties:
        id: { type: integer, readOnly: true }
        name: { type: string }
        tag: { type: string, nullable: true }
        parent: { $ref: "#/components/schemas/NewPet" }
"##;

    #[test]
    fn a_yaml_document_becomes_one_tool_per_operation() {
        let doc = parse_document(PETSTORE).unwrap();
        let out = import(&doc, &opts(Filter::default())).unwrap();
        let def = out.definition.unwrap();
        assert_eq!(def.base_url, "https://eu.pets.example/v1");
        assert_eq!(
            (def.display_name.as_str(), def.version.as_str()),
            ("Petstore", "1.2.0")
        );
        let names: Vec<&str> = def.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "petstore_list_pets",
                "petstore_create_pet",
                "petstore_show_pet_by_id",
                "petstore_delete_pet"
            ]
        );
        let list = &def.tools[0];
        assert_eq!(list.side_effects, SideEffects::None);
        assert_eq!(
            list.input_schema["properties"]["limit"],
            json!({ "type": "integer", "maximum": 100, "exclusiveMinimum": 0 })
        );
        assert_eq!(
            list.request
                .as_ref()
                .unwrap()
                .headers
                .get("X-Request-ID")
                .map(String::as_str),
            Some("{x_request_id}")
        );
        assert!(
            out.warnings.iter().any(|w| w.contains("tags")),
            "{:?}",
            out.warnings
        );
        let create = &def.tools[1];
        let body = &create.input_schema["properties"]["body"];
        assert!(
            body["properties"].get("id").is_none(),
            "read-only properties are not inputs"
        );
        assert_eq!(body["required"], json!(["name"]));
        assert_eq!(body["properties"]["tag"]["type"], json!(["string", "null"]));
        assert_eq!(
            body["properties"]["parent"],
            json!({}),
            "a cycle is cut at the repeat"
        );
        assert_eq!(create.request.as_ref().unwrap().body, Some(json!("$body")));
        let show = &def.tools[2];
        assert_eq!(show.request.as_ref().unwrap().path, "/pets/{pet_id}");
        assert_eq!(show.input_schema["required"], json!(["pet_id"]));
        assert_eq!(def.tools[3].side_effects, SideEffects::Destructive);
        let skipped: BTreeMap<&str, &str> = out
            .operations
            .iter()
            .filter_map(|o| Some((o.operation_id.as_deref()?, o.skipped.as_deref()?)))
            .collect();
        assert!(skipped["uploadPhoto"].contains("image/png"), "{skipped:?}");
        assert!(
            skipped["remoteThing"].contains("never fetched"),
            "{skipped:?}"
        );
    }

    #[test]
    fn the_filter_picks_operations_by_tag_id_and_method() {
        let doc = parse_document(PETSTORE).unwrap();
        let by_tag = import(
            &doc,
            &opts(Filter {
                tags: vec!["admin".into()],
                ..Default::default()
            }),
        )
        .unwrap();
        assert_eq!(
            by_tag
                .definition
                .unwrap()
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect::<Vec<_>>(),
            ["petstore_delete_pet"]
        );
        let by_method = import(
            &doc,
            &opts(Filter {
                methods: vec!["POST".into()],
                ..Default::default()
            }),
        )
        .unwrap();
        assert_eq!(by_method.definition.unwrap().tools.len(), 1);
        let none = import(
            &doc,
            &opts(Filter {
                operation_ids: vec!["nope".into()],
                ..Default::default()
            }),
        )
        .unwrap();
        assert!(none.definition.is_none());
        assert!(none.operations.iter().all(|o| !o.selected));
    }

    #[test]
    fn documents_that_are_not_openapi_3_are_refused_with_the_reason() {
        assert!(parse_document(r#"{"swagger": "2.0", "paths": {}}"#)
            .unwrap_err()
            .to_string()
            .contains("Swagger 2.0"));
        assert!(parse_document("{")
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
        assert!(parse_document(": : :\n- [").is_err());
        let big = format!(
            "{{\"openapi\": \"3.1.0\", \"x\": \"{}\"}}",
            "a".repeat(MAX_DOCUMENT_BYTES)
        );
        assert!(parse_document(&big)
            .unwrap_err()
            .to_string()
            .contains("5 MiB"));
        // A relative server URL needs a base URL.
        let doc = parse_document(r#"{"openapi": "3.1.0", "servers": [{"url": "/api"}], "paths": {"/x": {"get": {"responses": {}}}}}"#).unwrap();
        assert!(import(&doc, &opts(Filter::default()))
            .unwrap_err()
            .to_string()
            .contains("relative"));
        let mut o = opts(Filter::default());
        o.document_url = Some(url::Url::parse("https://docs.example/spec/openapi.json").unwrap());
        assert_eq!(
            import(&doc, &o).unwrap().definition.unwrap().base_url,
            "https://docs.example/api"
        );
    }

    #[test]
    fn operation_ids_become_snake_case_tool_names() {
        assert_eq!(snake("listPetsByOwner"), "list_pets_by_owner");
        assert_eq!(snake("repos/list-for-user"), "repos_list_for_user");
        assert_eq!(snake("getHTTPStatus"), "get_httpstatus");
        assert_eq!(
            tool_name("a", None, "get", "/users/{id}/keys"),
            "a_get_users_id_keys"
        );
        assert!(tool_name("app", Some(&"x".repeat(100)), "get", "/").len() <= MAX_TOOL_NAME_CHARS);
    }

    #[test]
    fn a_reference_bomb_is_cut_off() {
        // Each level refers to the next twice: 2^30 nodes if inlined naively.
        let mut schemas = Map::new();
        for i in 0..30 {
            schemas.insert(format!("L{i}"), json!({ "type": "object", "properties": { "a": { "$ref": format!("#/components/schemas/L{}", i + 1) }, "b": { "$ref": format!("#/components/schemas/L{}", i + 1) } } }));
        }
        schemas.insert("L30".into(), json!({ "type": "string" }));
        let doc = json!({ "openapi": "3.1.0", "servers": [{ "url": "https://x.example" }], "components": { "schemas": schemas },
            "paths": { "/x": { "post": { "operationId": "boom", "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/L0" } } } } } } } });
        let out = import(&doc, &opts(Filter::default())).unwrap();
        assert!(
            out.operations[0]
                .skipped
                .as_deref()
                .unwrap()
                .contains("nodes"),
            "{:?}",
            out.operations
        );
    }

    /// Schemas `L0`…`L{levels}`, each referring to the next `fan_out` times; the last is a
    /// string schema with a description of `leaf` bytes.
    fn fan_out(levels: usize, fan_out: usize, leaf: usize) -> Map<String, Value> {
        let mut schemas = Map::new();
        for level in 0..levels {
            let next = json!({ "$ref": format!("#/components/schemas/L{}", level + 1) });
            let props: Map<String, Value> = (0..fan_out)
                .map(|i| (format!("p{i}"), next.clone()))
                .collect();
            schemas.insert(
                format!("L{level}"),
                json!({ "type": "object", "properties": props }),
            );
        }
        schemas.insert(
            format!("L{levels}"),
            json!({ "type": "string", "description": "d".repeat(leaf) }),
        );
        schemas
    }

    fn posting(ops: usize, schemas: Map<String, Value>) -> Value {
        let body = json!({ "content": { "application/json": { "schema": { "$ref": "#/components/schemas/L0" } } } });
        let paths: Map<String, Value> = (0..ops)
            .map(|i| {
                (
                    format!("/p{i}"),
                    json!({ "post": { "operationId": format!("op{i}"), "requestBody": body } }),
                )
            })
            .collect();
        json!({ "openapi": "3.1.0", "servers": [{ "url": "https://x.example" }], "components": { "schemas": schemas }, "paths": paths })
    }

    #[test]
    fn inlining_past_8_mib_refuses_the_import_before_memory_grows() {
        // Eight references a level, four levels, a 16 KiB leaf: 64 MiB per operation in about
        // 14,000 nodes (under the node bound), for 200 operations: 12.5 GiB if inlined. A
        // document of 40 KiB.
        let doc = posting(200, fan_out(4, 8, 16 * 1024));
        let started = std::time::Instant::now();
        let err = import(&doc, &opts(Filter::default())).unwrap_err();
        assert!(is_too_large(&err), "{err}");
        assert!(
            err.to_string()
                .starts_with("the document expands past 8 MiB once the $refs"),
            "{err}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "refused early: {:?}",
            started.elapsed()
        );
        // The same schemas for one operation at a time fit: the bound is on what the selection
        // inlines, so narrowing it is the way through.
        let one = posting(1, fan_out(3, 8, 1024));
        let out = import(&one, &opts(Filter::default())).unwrap();
        assert_eq!(out.definition.unwrap().tools.len(), 1);
    }

    #[test]
    fn operations_skipped_at_the_node_bound_give_their_bytes_back() {
        // Each operation inlines ~600 KiB before it is cut off at 20,000 nodes; thirty of them
        // would pass 8 MiB if what they inlined were kept.
        let doc = posting(30, fan_out(12, 2, 40));
        let out = import(&doc, &opts(Filter::default())).unwrap();
        assert_eq!(out.operations.len(), 30);
        assert!(
            out.operations
                .iter()
                .all(|o| o.skipped.as_deref().is_some_and(|s| s.contains("nodes"))),
            "{:?}",
            out.operations[0]
        );
    }

    #[test]
    fn only_what_a_tool_uses_is_inlined_and_path_items_may_be_references() {
        // Responses are never read: a bomb or a remote reference there does not stop the tool.
        let mut doc = posting(1, fan_out(30, 2, 10));
        doc["components"]["schemas"]["Small"] =
            json!({ "type": "object", "properties": { "n": { "type": "integer" } } });
        doc["paths"]["/p0"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
            json!({ "$ref": "#/components/schemas/Small" });
        doc["paths"]["/p0"]["post"]["responses"] = json!({ "200": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/L0" } } } }, "default": { "$ref": "https://evil.example/r.json" } });
        doc["components"]["pathItems"] = json!({ "Shared": { "get": { "operationId": "shared", "parameters": [{ "$ref": "#/components/parameters/Q" }] } }, "Loop": { "$ref": "#/components/pathItems/Loop" } });
        doc["components"]["parameters"] =
            json!({ "Q": { "name": "q", "in": "query", "schema": { "type": "string" } } });
        doc["paths"]["/shared"] = json!({ "$ref": "#/components/pathItems/Shared" });
        doc["paths"]["/loop"] = json!({ "$ref": "#/components/pathItems/Loop" });
        let out = import(&doc, &opts(Filter::default())).unwrap();
        let def = out.definition.unwrap();
        let names: Vec<&str> = def.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["petstore_op0", "petstore_shared"],
            "{:?}",
            out.operations
        );
        assert_eq!(
            def.tools[0].input_schema["properties"]["body"]["properties"]["n"],
            json!({ "type": "integer" })
        );
        assert_eq!(
            def.tools[1]
                .request
                .as_ref()
                .unwrap()
                .query
                .get("q")
                .map(String::as_str),
            Some("{q}")
        );
        let looped = out.operations.iter().find(|o| o.path == "/loop").unwrap();
        assert!(
            looped.skipped.as_deref().unwrap().contains("loop"),
            "{looped:?}"
        );
    }

    #[test]
    fn yaml_aliases_past_8_mib_are_refused_as_too_large() {
        let mut doc = format!(
            "openapi: 3.1.0\npaths: {{}}\nx-big: &b \"{}\"\nx-uses: [",
            "a".repeat(256 * 1024)
        );
        doc.push_str(&vec!["*b"; 100].join(", "));
        doc.push_str("]\n");
        let err = parse_document(&doc).unwrap_err();
        assert!(is_too_large(&err), "{err}");
        assert_eq!(
            err.to_string(),
            "the document expands past 8 MiB through YAML aliases"
        );
        assert!(is_too_large(&too_large(MAX_DOCUMENT_BYTES + 1)));
        assert!(!is_too_large(
            &parse_document("openapi: [unclosed").unwrap_err()
        ));
        assert!(!is_too_large(&Error::invalid(
            "the document is not valid JSON: eof"
        )));
        // An anchor used a few times is fine.
        let ok = "openapi: 3.1.0\nx-s: &s { type: string }\npaths:\n  /a: { get: { parameters: [{ name: a, in: query, schema: *s }] } }\n";
        assert!(parse_document(ok).is_ok());
    }
}
