//! `{{vault:NAME}}` and `{{step:<ref_id>.<path>}}` references in tool arguments and in
//! `return`. Resolution is one pass over the agent's own template: text inserted from a secret or
//! a step result is never scanned again, so a step result that happens to contain
//! `{{vault:x}}` reaches the next tool as that literal text (D7).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// A reference found in a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    Vault(String),
    Step { ref_id: String, path: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// A `{{step:…}}` that does not parse, names an unknown or failed step, or a missing path.
    BadRef(String),
    /// A `{{vault:…}}` naming no secret of the project (or not parsing); `path` is where.
    UnknownSecret { path: String, message: String },
}

enum Piece<'a> {
    Text(&'a str),
    Ref(Ref),
}

const STEP: &str = "{{step:";
const VAULT: &str = "{{vault:";

fn parse_step(inner: &str, raw: &str) -> Result<Ref, TemplateError> {
    let bad = |why: &str| TemplateError::BadRef(format!("malformed step reference {raw}: {why}"));
    let mut parts = inner.split('.');
    let ref_id = parts.next().unwrap_or_default();
    if !super::batch::valid_ref_id(ref_id) {
        return Err(bad("expected {{step:<ref_id>.<path>}} with a valid ref_id"));
    }
    let mut path = Vec::new();
    for seg in parts {
        if seg.is_empty() {
            return Err(bad("empty path segment"));
        }
        if seg
            .chars()
            .any(|c| c.is_whitespace() || c == '{' || c == '}')
        {
            return Err(bad("path segments are keys or array indexes"));
        }
        path.push(seg.to_owned());
    }
    Ok(Ref::Step {
        ref_id: ref_id.to_owned(),
        path,
    })
}

/// Splits a template string into literal text and references. Anything that opens
/// `{{step:` but does not parse is `BadRef`; a `{{vault:` that does not parse is an unknown
/// secret; other `{{…}}` text is literal.
fn pieces<'a>(s: &'a str, json_path: &str) -> Result<Vec<Piece<'a>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let tail = &rest[start..];
        let (prefix, is_step) = if tail.starts_with(STEP) {
            (STEP, true)
        } else if tail.starts_with(VAULT) {
            (VAULT, false)
        } else {
            // Not a reference here; one brace further on might open one ("{{{step:…}}").
            out.push(Piece::Text(&rest[..start + 1]));
            rest = &rest[start + 1..];
            continue;
        };
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let Some(end) = tail.find("}}") else {
            let shown: String = tail.chars().take(40).collect();
            return Err(if is_step {
                TemplateError::BadRef(format!("malformed step reference {shown}: missing }}}}"))
            } else {
                TemplateError::UnknownSecret {
                    path: json_path.to_owned(),
                    message: "malformed vault reference: missing }}".into(),
                }
            });
        };
        let raw = &tail[..end + 2];
        let inner = &tail[prefix.len()..end];
        if is_step {
            out.push(Piece::Ref(parse_step(inner, raw)?));
        } else {
            if crate::vault::validate_name(inner).is_err() {
                return Err(TemplateError::UnknownSecret {
                    path: json_path.to_owned(),
                    message: format!("malformed vault reference {raw}"),
                });
            }
            out.push(Piece::Ref(Ref::Vault(inner.to_owned())));
        }
        rest = &tail[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// The vault names a template references (to fetch them before resolving).
pub fn vault_names(template: &Value) -> Vec<String> {
    let mut names = HashSet::new();
    walk_strings(template, &mut |s| {
        let mut rest = s;
        while let Some(i) = rest.find(VAULT) {
            let tail = &rest[i + VAULT.len()..];
            if let Some(end) = tail.find("}}") {
                names.insert(tail[..end].to_owned());
                rest = &tail[end..];
            } else {
                break;
            }
        }
    });
    names.into_iter().collect()
}

/// True when the template contains a step reference anywhere.
pub fn has_step_refs(template: &Value) -> bool {
    let mut found = false;
    walk_strings(template, &mut |s| found |= s.contains(STEP));
    found
}

fn walk_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| walk_strings(x, f)),
        Value::Object(m) => m.values().for_each(|x| walk_strings(x, f)),
        _ => {}
    }
}

/// What references resolve against.
pub struct Context<'a> {
    /// Secret values by name; `None` means vault references are left as literal text (`return`).
    pub vault: Option<&'a HashMap<String, zeroize::Zeroizing<String>>>,
    /// Step results by ref_id; `None` means step references are not allowed here.
    pub steps: Option<&'a HashMap<String, Value>>,
    /// ref_ids of executions that failed: referencing them is `BadRef`.
    pub failed: &'a HashSet<String>,
}

/// Looks a path up in a result: object keys (own properties only) and array indexes.
fn lookup<'v>(root: &'v Value, ref_id: &str, path: &[String]) -> Result<&'v Value, TemplateError> {
    let mut cur = root;
    for (i, seg) in path.iter().enumerate() {
        let next = match cur {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|n| a.get(n)),
            _ => None,
        };
        cur = next.ok_or_else(|| {
            TemplateError::BadRef(format!(
                "{{{{step:{ref_id}.{}}}}} is missing: no {seg:?} in the result",
                path[..=i].join(".")
            ))
        })?;
    }
    Ok(cur)
}

fn resolve_ref(r: &Ref, ctx: &Context, json_path: &str) -> Result<Option<Value>, TemplateError> {
    match r {
        Ref::Vault(name) => match ctx.vault {
            None => Ok(None),
            Some(values) => values
                .get(name)
                .map(|v| Some(Value::String(v.to_string())))
                .ok_or_else(|| TemplateError::UnknownSecret {
                    path: json_path.to_owned(),
                    message: format!("no vault secret named {name} in this project"),
                }),
        },
        Ref::Step { ref_id, path } => {
            let steps = ctx.steps.ok_or_else(|| {
                TemplateError::BadRef(
                    "step references need compose: true (or belong in return)".into(),
                )
            })?;
            if ctx.failed.contains(ref_id) {
                return Err(TemplateError::BadRef(format!(
                    "step {ref_id} failed; its result cannot be referenced"
                )));
            }
            let root = steps.get(ref_id).ok_or_else(|| {
                TemplateError::BadRef(format!("unknown step {ref_id} (or it has not run yet)"))
            })?;
            Ok(Some(lookup(root, ref_id, path)?.clone()))
        }
    }
}

fn resolve_string(s: &str, ctx: &Context, json_path: &str) -> Result<Value, TemplateError> {
    if !s.contains("{{") {
        return Ok(Value::String(s.to_owned()));
    }
    let parts = pieces(s, json_path)?;
    // A string that is exactly one reference is replaced by the value itself, keeping its type.
    if let [Piece::Ref(r)] = parts.as_slice() {
        return Ok(resolve_ref(r, ctx, json_path)?.unwrap_or_else(|| Value::String(s.to_owned())));
    }
    let mut out = String::with_capacity(s.len());
    for p in &parts {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Ref(r) => match resolve_ref(r, ctx, json_path)? {
                Some(Value::String(v)) => out.push_str(&v),
                Some(other) => out.push_str(&other.to_string()),
                None => match r {
                    Ref::Vault(name) => out.push_str(&format!("{{{{vault:{name}}}}}")),
                    Ref::Step { .. } => unreachable!("step refs always resolve or fail"),
                },
            },
        }
    }
    Ok(Value::String(out))
}

/// Resolves every reference in `template` in one pass; the result holds no unresolved
/// references except vault references when `ctx.vault` is `None`.
pub fn resolve(template: &Value, ctx: &Context) -> Result<Value, TemplateError> {
    resolve_at(template, ctx, "")
}

fn resolve_at(v: &Value, ctx: &Context, path: &str) -> Result<Value, TemplateError> {
    Ok(match v {
        Value::String(s) => resolve_string(s, ctx, path)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| resolve_at(x, ctx, &format!("{path}/{i}")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, x) in m {
                out.insert(
                    k.clone(),
                    resolve_at(
                        x,
                        ctx,
                        &format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                    )?,
                );
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use zeroize::Zeroizing;

    fn steps() -> HashMap<String, Value> {
        HashMap::from([
            (
                "export".into(),
                json!({ "row_count": 1200, "csv": "a,b\n1,2", "filename": "q.csv", "files": [{ "id": "f1" }], "title": "{{vault:TOKEN}}" }),
            ),
            (
                "pr".into(),
                json!({ "title": "Fix bug", "labels": ["x", "y"] }),
            ),
        ])
    }

    fn vault() -> HashMap<String, Zeroizing<String>> {
        HashMap::from([("TOKEN".into(), Zeroizing::new("tok-secret-1".into()))])
    }

    fn run(t: Value) -> Result<Value, TemplateError> {
        let (s, v, f) = (steps(), vault(), HashSet::from(["broken".to_string()]));
        resolve(
            &t,
            &Context {
                vault: Some(&v),
                steps: Some(&s),
                failed: &f,
            },
        )
    }

    #[test]
    fn whole_value_references_keep_their_type() {
        assert_eq!(
            run(json!("{{step:export.row_count}}")).unwrap(),
            json!(1200)
        );
        assert_eq!(
            run(json!({ "l": "{{step:pr.labels}}" })).unwrap(),
            json!({ "l": ["x", "y"] })
        );
        assert_eq!(
            run(json!("{{step:export.files.0.id}}")).unwrap(),
            json!("f1")
        );
        assert_eq!(run(json!("{{step:pr}}")).unwrap(), steps()["pr"]);
        assert_eq!(
            run(json!(["{{vault:TOKEN}}"])).unwrap(),
            json!(["tok-secret-1"])
        );
    }

    #[test]
    fn embedded_references_interpolate_non_strings_as_json() {
        assert_eq!(
            run(json!("Review: {{step:pr.title}}")).unwrap(),
            json!("Review: Fix bug")
        );
        assert_eq!(
            run(json!("n={{step:export.row_count}} l={{step:pr.labels}}")).unwrap(),
            json!("n=1200 l=[\"x\",\"y\"]")
        );
        assert_eq!(
            run(json!("Bearer {{vault:TOKEN}}")).unwrap(),
            json!("Bearer tok-secret-1")
        );
        assert_eq!(
            run(json!("{{not a ref}} {{step:pr.title}}")).unwrap(),
            json!("{{not a ref}} Fix bug")
        );
        assert_eq!(
            run(json!("{{{step:pr.title}}}")).unwrap(),
            json!("{Fix bug}")
        );
    }

    #[test]
    fn inserted_text_is_never_scanned_again() {
        // The step result contains the text of a vault reference: it stays literal.
        assert_eq!(
            run(json!("{{step:export.title}}")).unwrap(),
            json!("{{vault:TOKEN}}")
        );
        assert_eq!(
            run(json!("x {{step:export.title}} y")).unwrap(),
            json!("x {{vault:TOKEN}} y")
        );
    }

    #[test]
    fn malformed_missing_and_failed_references_are_bad_refs() {
        for t in [
            "{{step:export.csv.}}",
            "{{step:}}",
            "{{step:.x}}",
            "{{step:1abc.x}}",
            "{{step:export..csv}}",
            "{{step:export.csv",
            "text {{step:export.row count}}",
            "{{step:export.constructor}}",
            "{{step:export.__proto__}}",
            "{{step:export.files.5.id}}",
            "{{step:export.row_count.x}}",
            "{{step:nope.x}}",
            "{{step:broken.x}}",
        ] {
            assert!(
                matches!(run(json!(t)), Err(TemplateError::BadRef(_))),
                "{t}"
            );
        }
    }

    #[test]
    fn unknown_or_malformed_vault_names_point_at_the_argument() {
        match run(json!({ "headers": { "auth": "Bearer {{vault:NOPE}}" } })) {
            Err(TemplateError::UnknownSecret { path, message }) => {
                assert_eq!(path, "/headers/auth");
                assert!(message.contains("NOPE"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(json!("{{vault:bad name}}")),
            Err(TemplateError::UnknownSecret { .. })
        ));
    }

    #[test]
    fn return_templates_leave_vault_references_literal_and_batches_refuse_steps() {
        let (s, f) = (steps(), HashSet::new());
        let ctx = Context {
            vault: None,
            steps: Some(&s),
            failed: &f,
        };
        assert_eq!(
            resolve(&json!("{{vault:TOKEN}}"), &ctx).unwrap(),
            json!("{{vault:TOKEN}}")
        );
        assert_eq!(
            resolve(&json!("a {{vault:TOKEN}} {{step:pr.title}}"), &ctx).unwrap(),
            json!("a {{vault:TOKEN}} Fix bug")
        );
        let v = vault();
        let batch = Context {
            vault: Some(&v),
            steps: None,
            failed: &f,
        };
        assert!(matches!(
            resolve(&json!("{{step:pr.title}}"), &batch),
            Err(TemplateError::BadRef(_))
        ));
        assert_eq!(
            vault_names(&json!({ "a": ["x {{vault:A}}", "{{vault:B}}"], "b": "{{vault:A}}" }))
                .len(),
            2
        );
    }
}

#[cfg(test)]
mod properties {
    //! Generated templates (a deterministic pseudo-random mix of braces, ref prefixes, names,
    //! dots and digits): resolution never panics, and an accepted template leaves no step
    //! reference of the agent's behind.
    use super::*;
    use serde_json::json;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
    }

    const PARTS: &[&str] = &[
        "{{", "}}", "{{step:", "{{vault:", "a", "b", ".", "0", "1", "x", "title", " ", "_", "-",
        "{", "}", "step:", "K",
    ];

    #[test]
    fn generated_templates_resolve_or_fail_cleanly() {
        let steps = HashMap::from([
            ("a".to_string(), json!({ "x": 1, "title": "t", "0": ["z"] })),
            ("b".to_string(), json!([1, 2])),
        ]);
        let vault = HashMap::from([(
            "K".to_string(),
            zeroize::Zeroizing::new("secret".to_string()),
        )]);
        let failed = HashSet::new();
        let ctx = Context {
            vault: Some(&vault),
            steps: Some(&steps),
            failed: &failed,
        };
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut ok, mut bad) = (0, 0);
        for _ in 0..20_000 {
            let len = 1 + rng.next() % 8;
            let s: String = (0..len).map(|_| rng.pick(PARTS)).collect();
            match resolve(&json!(s), &ctx) {
                Ok(v) => {
                    ok += 1;
                    let out = v.to_string();
                    assert!(
                        !out.contains("{{step:"),
                        "unresolved step ref from {s:?}: {out}"
                    );
                }
                Err(TemplateError::BadRef(_)) | Err(TemplateError::UnknownSecret { .. }) => {
                    bad += 1
                }
            }
        }
        assert!(
            ok > 1000 && bad > 1000,
            "both outcomes are exercised: {ok} ok, {bad} refused"
        );
    }
}
