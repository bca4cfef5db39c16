//! What a tool set must be before it is stored: a slug an endpoint can live at, names MCP
//! clients accept, tools the project has, and fixed values the tool's schema accepts. The set
//! is checked whole; nothing is stored when any part fails.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::ToolSetInput;
use crate::catalog::{check_description as description, name_char, Snapshot, MAX_TOOL_NAME_CHARS};
use crate::{Error, Result};

/// Tools in one set, at most.
pub const MAX_ENTRIES: usize = 200;
/// Bytes of one entry's fixed values as JSON, at most.
const MAX_FIXED_BYTES: usize = 16 * 1024;

/// A set as stored: its cleaned fields and its entries as JSON.
pub struct Checked {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub tools: String,
    pub prompts_and_resources: bool,
}

pub use crate::store::tool_sets::{valid_slug, MAX_SLUG_CHARS};

/// A tool name MCP clients accept: letters, digits, `_`, `-` and `.`, 1 to 64 characters (a
/// catalog name's rule, except that it may start with any of them).
fn valid_tool_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_TOOL_NAME_CHARS && s.chars().all(name_char)
}

/// Checks `input` whole, in its stored form (`ToolSetInput::normal`: trimmed), against the
/// catalog the caller sees.
pub fn input(input: &ToolSetInput, catalog: &Snapshot) -> Result<Checked> {
    let input = input.normal();
    if !valid_slug(&input.slug) {
        return Err(Error::invalid(format!(
            "slug must be 1 to {MAX_SLUG_CHARS} lowercase letters, digits and inner hyphens (it becomes /mcp/sets/<slug>)"
        )));
    }
    crate::policy::clean_name(&input.name)?;
    description("description", &input.description)?;
    if input.tools.is_empty() || input.tools.len() > MAX_ENTRIES {
        return Err(Error::invalid(format!(
            "tools must list 1 to {MAX_ENTRIES} tools"
        )));
    }
    let mut seen = HashSet::new();
    for (i, e) in input.tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(tool) = catalog.get(&e.tool) else {
            return Err(Error::invalid(format!(
                "{at}: no tool named {:?} in this project's catalog",
                e.tool
            )));
        };
        if !valid_tool_name(e.exposed()) {
            return Err(Error::invalid(format!(
                "{at}: the name must be 1 to {MAX_TOOL_NAME_CHARS} letters, digits, '_', '-' or '.' (give \"name\" for a tool whose catalog name is not)"
            )));
        }
        if !seen.insert(e.exposed().to_owned()) {
            return Err(Error::invalid(format!(
                "{at}: the name {:?} is listed twice; names in a set must differ",
                e.exposed()
            )));
        }
        if let Some(d) = &e.description {
            description(&format!("{at}.description"), d)?;
        }
        fixed(&at, &tool.spec.input_schema, &e.fixed)?;
    }
    Ok(Checked {
        tools: serde_json::to_string(&input.tools).map_err(|e| Error::internal(e.to_string()))?,
        slug: input.slug,
        name: input.name,
        description: input.description,
        prompts_and_resources: input.prompts_and_resources,
    })
}

/// Fixed values name top-level arguments of the tool and are what its schema accepts for them
/// (checked against the schema without its `required` list, so the other arguments may be
/// absent).
fn fixed(at: &str, schema: &Value, values: &Map<String, Value>) -> Result<()> {
    if values.is_empty() {
        return Ok(());
    }
    let size = serde_json::to_string(values).map_or(usize::MAX, |s| s.len());
    if size > MAX_FIXED_BYTES {
        return Err(Error::invalid(format!(
            "{at}.fixed is {size} bytes of JSON; at most {MAX_FIXED_BYTES}"
        )));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(k) = values
        .keys()
        .find(|k| !props.is_some_and(|p| p.contains_key(*k)))
    {
        return Err(Error::invalid(format!(
            "{at}.fixed: the tool has no argument {k:?}"
        )));
    }
    let mut partial = schema.clone();
    if let Some(o) = partial.as_object_mut() {
        o.remove("required");
    }
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&partial)
        .map_err(|e| Error::invalid(format!("{at}: the tool's schema does not compile: {e}")))?;
    let violations = crate::engine::violations(&validator, &Value::Object(values.clone()));
    if let Some(v) = violations.first() {
        return Err(Error::invalid(format!(
            "{at}.fixed{}: {}",
            v.path, v.message
        )));
    }
    Ok(())
}

/// The tool's input schema as a set shows it: the fixed arguments are neither listed nor
/// required.
pub fn exposed_schema(schema: &Value, fixed: &Map<String, Value>) -> Value {
    let mut out = schema.clone();
    if fixed.is_empty() {
        return out;
    }
    if let Some(props) = out.get_mut("properties").and_then(Value::as_object_mut) {
        props.retain(|k, _| !fixed.contains_key(k));
    }
    if let Some(req) = out.get_mut("required").and_then(Value::as_array_mut) {
        req.retain(|k| k.as_str().is_none_or(|k| !fixed.contains_key(k)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs_are_path_segments() {
        for good in ["support", "read-only-github", "a", "x1"] {
            assert!(valid_slug(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Support",
            "a/b",
            "a b",
            "..",
            &"a".repeat(49),
        ] {
            assert!(!valid_slug(bad), "{bad}");
        }
    }

    #[test]
    fn exposed_schema_hides_fixed_arguments() {
        let schema = json!({"type":"object","properties":{"repo":{"type":"string"},"q":{"type":"string"}},"required":["repo","q"]});
        let fixed = json!({"repo":"acme/app"}).as_object().unwrap().clone();
        assert_eq!(
            exposed_schema(&schema, &fixed),
            json!({"type":"object","properties":{"q":{"type":"string"}},"required":["q"]})
        );
    }

    #[test]
    fn fixed_values_must_fit_the_schema() {
        let schema = json!({"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}},"required":["n","s"]});
        let ok = json!({"n": 3}).as_object().unwrap().clone();
        assert!(fixed("tools[0]", &schema, &ok).is_ok());
        let wrong_type = json!({"n": "three"}).as_object().unwrap().clone();
        let e = fixed("tools[0]", &schema, &wrong_type)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tools[0].fixed/n"), "{e}");
        let unknown = json!({"nope": 1}).as_object().unwrap().clone();
        let e = fixed("tools[0]", &schema, &unknown)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no argument \"nope\""), "{e}");
    }
}
