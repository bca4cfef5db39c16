//! YAML into JSON values with bounds on what the parser may materialise. The parser expands
//! anchors and aliases, so a document under 1 MiB could otherwise grow into gigabytes (a
//! "billion laughs", or one large string aliased a hundred thousand times); every value is
//! counted, with its size as compact JSON, before it is built, and the parse stops at
//! `MAX_VALUES` values or `MAX_EXPANDED_BYTES` (8 MiB) bytes, whichever comes first. An
//! ordinary document without aliases stays near its own size (an OpenAPI document is at most
//! 5 MiB). Mapping keys that YAML allows but JSON does not (`200:`, `true:`) become their text.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_json::{Map, Number, Value};

/// Values one document may expand to.
pub const MAX_VALUES: usize = 2_000_000;
/// Bytes one document may expand to, as compact JSON: 8 MiB.
pub const MAX_EXPANDED_BYTES: usize = 8 * 1024 * 1024;

/// How far a document may expand.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub values: usize,
    pub bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            values: MAX_VALUES,
            bytes: MAX_EXPANDED_BYTES,
        }
    }
}

/// Why a document was not parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not YAML: the parser's message.
    Invalid(String),
    /// It expands past a bound (through aliases): which one, in words.
    TooLarge(String),
}

/// Parses `text` as YAML, failing once it has produced more values or bytes than `bounds`.
pub fn parse(text: &str, bounds: Bounds) -> Result<Value, ParseError> {
    let budget = Budget {
        bounds,
        values: Cell::new(0),
        bytes: Cell::new(0),
        exceeded: Cell::new(None),
    };
    match (Node { budget: &budget }).deserialize(serde_norway::Deserializer::from_str(text)) {
        Ok(v) => Ok(v),
        Err(e) => match budget.exceeded.get() {
            Some(Exceeded::Bytes) => Err(ParseError::TooLarge(format!(
                "the document expands past {} through YAML aliases",
                size(bounds.bytes)
            ))),
            Some(Exceeded::Values) => Err(ParseError::TooLarge(format!(
                "the document expands past {} values through YAML aliases",
                bounds.values
            ))),
            None => Err(ParseError::Invalid(e.to_string())),
        },
    }
}

/// `8 MiB`, or the bytes when they are not whole MiB.
fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[derive(Debug, Clone, Copy)]
enum Exceeded {
    Values,
    Bytes,
}

struct Budget {
    bounds: Bounds,
    values: Cell<usize>,
    bytes: Cell<usize>,
    exceeded: Cell<Option<Exceeded>>,
}

#[derive(Clone, Copy)]
struct Node<'a> {
    budget: &'a Budget,
}

impl Node<'_> {
    /// Counts one value whose compact JSON takes `bytes` (without its children, with one
    /// separator), before it is built.
    fn take<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let b = self.budget;
        let values = b.values.get() + 1;
        let total = b.bytes.get().saturating_add(bytes).saturating_add(1);
        b.values.set(values);
        b.bytes.set(total);
        let exceeded = if values > b.bounds.values {
            Exceeded::Values
        } else if total > b.bounds.bytes {
            Exceeded::Bytes
        } else {
            return Ok(());
        };
        b.exceeded.set(Some(exceeded));
        Err(E::custom("the document expands past its bounds"))
    }
}

/// Decimal digits of `v`.
fn digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
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
        self.take(5)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.take(digits(v.unsigned_abs()) + usize::from(v < 0))?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.take(digits(v))?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.take(24)?;
        Ok(Number::from_f64(v)
            .map(Value::Number)
            .unwrap_or(Value::Null))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.take(v.len() + 2)?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.take(v.len() + 2)?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.take(4)?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.take(2)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.take(2)?;
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
        self.0.take(v.len() + 3)?;
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
        let v = parse(
            "responses:\n  200: { description: ok }\n  true: 1\nx: !Ref y\n",
            Bounds {
                values: 100,
                bytes: 1000,
            },
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({ "responses": { "200": { "description": "ok" }, "true": 1 }, "x": "y" })
        );
    }

    #[test]
    fn a_billion_laughs_stops_at_the_bound() {
        let mut doc = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        // Fully expanded: 10^10 strings. The parser's own alias limit or a bound stops this one.
        let err = parse(&doc, Bounds::default()).unwrap_err();
        assert!(
            matches!(&err, ParseError::TooLarge(_))
                || matches!(&err, ParseError::Invalid(m) if m.contains("repetition limit")),
            "{err:?}"
        );
        // One large anchor aliased many times stays under the parser's limit (aliases are few
        // next to the document's events) but not under the bound: 2,000 × 1,000 values.
        let items = vec!["x"; 1000].join(", ");
        let mut wide = format!("big: &big [{items}]\nuses:\n");
        for _ in 0..2000 {
            wide.push_str("  - *big\n");
        }
        let err = parse(
            &wide,
            Bounds {
                values: 1_000_000,
                bytes: usize::MAX,
            },
        )
        .unwrap_err();
        assert_eq!(
            err,
            ParseError::TooLarge(
                "the document expands past 1000000 values through YAML aliases".into()
            )
        );
        assert!(
            parse(
                "a: &x [1, 2]\nb: *x\n",
                Bounds {
                    values: 100,
                    bytes: 1000
                }
            )
            .is_ok(),
            "ordinary aliases still work"
        );
    }

    #[test]
    fn a_large_string_aliased_many_times_stops_at_the_byte_bound() {
        // 1 MiB of text aliased 100 times: 100 values, far under the value bound, 100 MiB of
        // strings without the byte bound.
        let mut doc = format!("big: &big \"{}\"\nuses: [", "a".repeat(1024 * 1024));
        doc.push_str(&vec!["*big"; 100].join(", "));
        doc.push_str("]\n");
        let err = parse(&doc, Bounds::default()).unwrap_err();
        assert_eq!(
            err,
            ParseError::TooLarge("the document expands past 8 MiB through YAML aliases".into())
        );
        // Aliases that nest: 8^5 strings of 1 KiB each (32 MiB), 40,000 values; padded with
        // plain values so that the parser's alias limit (a multiple of its events) lets it by.
        let mut nested = format!(
            "pad: [{}]\nl0: &l0 \"{}\"\n",
            vec!["0"; 1000].join(", "),
            "l".repeat(1024)
        );
        for level in 1..=5 {
            nested.push_str(&format!(
                "l{level}: &l{level} [{}]\n",
                vec![format!("*l{}", level - 1); 8].join(", ")
            ));
        }
        assert!(
            matches!(parse(&nested, Bounds::default()), Err(ParseError::TooLarge(m)) if m.contains("8 MiB"))
        );
        // The measure is compact JSON with a separator per value: `{"k":"vv"}` counts 13 bytes.
        assert!(parse(
            "k: vv\n",
            Bounds {
                values: 10,
                bytes: 13
            }
        )
        .is_ok());
        assert!(
            matches!(parse("k: vv\n", Bounds { values: 10, bytes: 12 }), Err(ParseError::TooLarge(m)) if m.contains("12 bytes"))
        );
        // Bad YAML is not a size problem.
        assert!(matches!(
            parse("a: [unclosed", Bounds::default()),
            Err(ParseError::Invalid(_))
        ));
    }
}
