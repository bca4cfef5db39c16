//! YAML into JSON values with a bound on how many values it may produce. The parser expands
//! anchors and aliases, so a 5 MiB document could otherwise grow into gigabytes (a "billion
//! laughs"); counting while the values are built stops that early. Mapping keys that YAML
//! allows but JSON does not (`200:`, `true:`) become their text.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Values one document may expand to.
pub const MAX_VALUES: usize = 2_000_000;

/// Parses `text` as YAML, failing once it has produced more than `max` values.
pub fn parse(text: &str, max: usize) -> Result<Value, String> {
    let count = Cell::new(0);
    Node { count: &count, max }.deserialize(serde_norway::Deserializer::from_str(text)).map_err(|e| e.to_string())
}

#[derive(Clone, Copy)]
struct Node<'a> {
    count: &'a Cell<usize>,
    max: usize,
}

impl Node<'_> {
    fn tick<E: de::Error>(&self) -> Result<(), E> {
        let n = self.count.get() + 1;
        self.count.set(n);
        if n > self.max {
            return Err(E::custom(format!("the document expands to more than {} values (through YAML aliases?)", self.max)));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.tick()?;
        Ok(Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.tick()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.tick()?;
        let mut out = Map::new();
        while let Some(k) = map.next_key_seed(Key(self))? {
            let v = map.next_value_seed(self)?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
    /// A tagged value (`!Ref x`): the value, without its tag.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (_, variant) = data.variant::<de::IgnoredAny>()?;
        variant.newtype_variant_seed(self)
    }
}

/// A mapping key as text.
#[derive(Clone, Copy)]
struct Key<'a>(Node<'a>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key that is text, a number or a boolean")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.0.tick()?;
        Ok(v.to_owned())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        self.visit_str(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_text_and_tags_are_dropped() {
        let v = parse("responses:\n  200: { description: ok }\n  true: 1\nx: !Ref y\n", 100).unwrap();
        assert_eq!(v, serde_json::json!({ "responses": { "200": { "description": "ok" }, "true": 1 }, "x": "y" }));
    }

    #[test]
    fn a_billion_laughs_stops_at_the_bound() {
        let mut doc = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        // Fully expanded: 10^10 strings. The parser's own alias limit stops this one.
        let err = parse(&doc, MAX_VALUES).unwrap_err();
        assert!(err.contains("more than") || err.contains("repetition limit"), "{err}");
        // One large anchor aliased many times stays under the parser's limit (aliases are few
        // next to the document's events) but not under the bound: 2,000 × 1,000 values.
        let items = vec!["x"; 1000].join(", ");
        let mut wide = format!("big: &big [{items}]\nuses:\n");
        for _ in 0..2000 {
            wide.push_str("  - *big\n");
        }
        let err = parse(&wide, 1_000_000).unwrap_err();
        assert!(err.contains("more than 1000000 values"), "{err}");
        assert!(parse("a: &x [1, 2]\nb: *x\n", 100).is_ok(), "ordinary aliases still work");
    }
}
