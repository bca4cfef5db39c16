//! Argument validation against a tool's JSON Schema, after filling in `default` values the
//! schema declares (so a handler always sees them).

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::error::FieldError;

/// Inserts `default` values for absent properties, recursively through nested objects and
/// array items. Only plain `properties` / `items` are followed.
pub fn apply_defaults(schema: &Value, instance: &mut Value) {
    match instance {
        Value::Object(obj) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (key, prop_schema) in props {
                    match obj.get_mut(key) {
                        Some(v) => apply_defaults(prop_schema, v),
                        None => {
                            if let Some(d) = prop_schema.get("default") {
                                obj.insert(key.clone(), d.clone());
                            }
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// Every violation, each with a JSON Pointer path (for a missing property, the property's own
/// path) and the validator's message. At most 20 are reported.
pub fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<FieldError> {
    validator
        .iter_errors(instance)
        .take(20)
        .map(|e| {
            let mut path = e.instance_path().to_string();
            if let ValidationErrorKind::Required { property } = e.kind() {
                if let Some(p) = property.as_str() {
                    path = format!("{path}/{}", p.replace('~', "~0").replace('/', "~1"));
                }
            }
            FieldError {
                path,
                message: e.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_absent_properties_at_any_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "method": { "type": "string", "default": "GET" },
                "opts": { "type": "object", "properties": { "retries": { "default": 3 } } },
                "items": { "type": "array", "items": { "type": "object", "properties": { "n": { "default": 1 } } } }
            }
        });
        let mut v = json!({ "opts": {}, "items": [{}, { "n": 5 }] });
        apply_defaults(&schema, &mut v);
        assert_eq!(
            v,
            json!({ "method": "GET", "opts": { "retries": 3 }, "items": [{ "n": 1 }, { "n": 5 }] })
        );
        let mut given = json!({ "method": "POST" });
        apply_defaults(&schema, &mut given);
        assert_eq!(given["method"], "POST");
    }

    #[test]
    fn violations_point_at_the_offending_fields() {
        let schema = json!({
            "type": "object", "required": ["url"],
            "properties": { "url": { "type": "string" }, "n": { "type": "integer" } }
        });
        let v = jsonschema::validator_for(&schema).unwrap();
        let errs = violations(&v, &json!({ "n": "x" }));
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert!(paths.contains(&"/url"), "{errs:?}");
        assert!(paths.contains(&"/n"), "{errs:?}");
        assert!(violations(&v, &json!({ "url": "u" })).is_empty());
    }
}
