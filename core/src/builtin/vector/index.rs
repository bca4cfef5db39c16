//! One namespace's vectors in memory and exact cosine top-k over them: values kept as given
//! (so `include_values` returns them), each with its inverse norm, so a query is one dot
//! product per vector; metadata filters are checked before the product.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use serde_json::{Map, Value};

/// A metadata filter: every key must match (`{key: value}` equality or `{key: {"$in": [...]}}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter(Vec<(String, Condition)>);

#[derive(Debug, Clone, PartialEq)]
enum Condition {
    Eq(Value),
    In(Vec<Value>),
}

impl Filter {
    /// Parses the `filter` argument; the error names the key and says what is allowed.
    pub fn parse(v: &Map<String, Value>) -> Result<Filter, (String, String)> {
        let mut out = Vec::with_capacity(v.len());
        for (key, cond) in v {
            let pointer = format!("/filter/{}", key.replace('~', "~0").replace('/', "~1"));
            let c = match cond {
                Value::Object(ops) => {
                    let mut ops = ops.iter();
                    match (ops.next(), ops.next()) {
                        (Some((op, Value::Array(list))), None) if op == "$in" => {
                            if let Some(bad) = list.iter().find(|x| !is_scalar(x)) {
                                return Err((pointer, format!("$in lists strings, numbers or booleans, not {bad}")));
                            }
                            Condition::In(list.clone())
                        }
                        (Some((op, _)), None) if op == "$in" => return Err((pointer, "$in takes a list of values".into())),
                        (Some((op, _)), None) => {
                            return Err((pointer, format!("unknown filter operator {op:?}; use a value for equality or {{\"$in\": [...]}}")))
                        }
                        _ => return Err((pointer, "a condition is a value for equality or {\"$in\": [...]}".into())),
                    }
                }
                Value::Array(_) => {
                    return Err((
                        pointer,
                        "use {\"$in\": [...]} to match any of several values".into(),
                    ))
                }
                Value::Null => {
                    return Err((pointer, "null cannot be matched; leave the key out".into()))
                }
                scalar => Condition::Eq(scalar.clone()),
            };
            out.push((key.clone(), c));
        }
        Ok(Filter(out))
    }

    pub fn matches(&self, metadata: Option<&Map<String, Value>>) -> bool {
        self.0.iter().all(|(key, cond)| {
            let Some(v) = metadata.and_then(|m| m.get(key)) else {
                return false;
            };
            match cond {
                Condition::Eq(want) => same(v, want),
                Condition::In(list) => list.iter().any(|want| same(v, want)),
            }
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// JSON equality where 1 and 1.0 are the same number.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A namespace's vectors, as of `generation`.
#[derive(Debug, Default)]
pub struct Index {
    pub generation: i64,
    pub dimension: usize,
    ids: Vec<String>,
    values: Vec<f32>,
    inv_norms: Vec<f32>,
    metadata: Vec<Option<Map<String, Value>>>,
    positions: HashMap<String, usize>,
}

/// One match of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Match<'a> {
    pub id: &'a str,
    pub score: f32,
    pub metadata: Option<&'a Map<String, Value>>,
    pub values: &'a [f32],
}

impl Index {
    pub fn new(generation: i64, dimension: usize) -> Index {
        Index {
            generation,
            dimension,
            ..Index::default()
        }
    }

    /// Bytes this index holds, roughly (for the cache's budget).
    pub fn bytes(&self) -> usize {
        self.values.len() * 4
            + self.ids.iter().map(|i| i.len() + 64).sum::<usize>()
            + self.metadata.len() * 32
    }

    /// Adds or replaces a vector. `values` has `dimension` entries and a non-zero norm (the
    /// caller checked).
    pub fn put(&mut self, id: &str, values: &[f32], metadata: Option<Map<String, Value>>) {
        debug_assert_eq!(values.len(), self.dimension);
        let inv = 1.0 / norm(values);
        match self.positions.get(id) {
            Some(&i) => {
                self.values[i * self.dimension..(i + 1) * self.dimension].copy_from_slice(values);
                self.inv_norms[i] = inv;
                self.metadata[i] = metadata;
            }
            None => {
                self.positions.insert(id.to_owned(), self.ids.len());
                self.ids.push(id.to_owned());
                self.values.extend_from_slice(values);
                self.inv_norms.push(inv);
                self.metadata.push(metadata);
            }
        }
    }

    /// Removes a vector (the last one takes its place); whether it was there.
    pub fn remove(&mut self, id: &str) -> bool {
        let Some(i) = self.positions.remove(id) else {
            return false;
        };
        let last = self.ids.len() - 1;
        if i != last {
            let d = self.dimension;
            self.values.copy_within(last * d..(last + 1) * d, i * d);
            self.inv_norms[i] = self.inv_norms[last];
            self.metadata.swap(i, last);
            self.ids.swap(i, last);
            self.positions.insert(self.ids[i].clone(), i);
        }
        self.values.truncate(last * self.dimension);
        self.inv_norms.truncate(last);
        self.metadata.truncate(last);
        self.ids.truncate(last);
        true
    }

    /// The `top_k` vectors most similar to `query` (cosine), best first; ties by id.
    pub fn query(&self, query: &[f32], top_k: usize, filter: &Filter) -> Vec<Match<'_>> {
        debug_assert_eq!(query.len(), self.dimension);
        let qn = 1.0 / norm(query);
        let q: Vec<f32> = query.iter().map(|x| x * qn).collect();
        let mut heap: BinaryHeap<Worst> = BinaryHeap::with_capacity(top_k + 1);
        for (i, row) in self.values.chunks_exact(self.dimension).enumerate() {
            let score = dot(&q, row) * self.inv_norms[i];
            let full = heap.len() >= top_k;
            // The product is cheaper than the filter: a vector that would not make the top k
            // is never checked against it.
            if full
                && heap
                    .peek()
                    .is_some_and(|worst| !better(score, i, worst.score, worst.i, &self.ids))
            {
                continue;
            }
            if !filter.is_empty() && !filter.matches(self.metadata[i].as_ref()) {
                continue;
            }
            if full {
                heap.pop();
            }
            heap.push(Worst {
                score,
                i,
                ids: &self.ids,
            });
        }
        let mut found: Vec<Worst> = heap.into_vec();
        found.sort();
        found
            .into_iter()
            .map(|w| Match {
                id: &self.ids[w.i],
                score: w.score.clamp(-1.0, 1.0),
                metadata: self.metadata[w.i].as_ref(),
                values: &self.values[w.i * self.dimension..(w.i + 1) * self.dimension],
            })
            .collect()
    }
}

/// Whether (score a, id a) ranks before (score b, id b): higher score, then smaller id.
fn better(a: f32, ia: usize, b: f32, ib: usize, ids: &[String]) -> bool {
    match a.total_cmp(&b) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => ids[ia] < ids[ib],
    }
}

/// A heap entry ordered so the heap's top is the worst match kept.
struct Worst<'a> {
    score: f32,
    i: usize,
    ids: &'a [String],
}

impl PartialEq for Worst<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst<'_> {}
impl PartialOrd for Worst<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst<'_> {
    /// Greater = worse, so `BinaryHeap::peek` is the worst.
    fn cmp(&self, other: &Self) -> Ordering {
        if self.i == other.i {
            Ordering::Equal
        } else if better(self.score, self.i, other.score, other.i, self.ids) {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    }
}

pub fn norm(v: &[f32]) -> f32 {
    dot(v, v).sqrt()
}

/// Eight independent accumulators, so the compiler vectorizes the loop.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Option<Map<String, Value>> {
        v.as_object().cloned()
    }

    fn index() -> Index {
        let mut ix = Index::new(1, 3);
        ix.put(
            "x",
            &[1.0, 0.0, 0.0],
            meta(json!({ "lang": "en", "year": 2024 })),
        );
        ix.put(
            "y",
            &[0.0, 1.0, 0.0],
            meta(json!({ "lang": "de", "year": 2023 })),
        );
        ix.put("xy", &[1.0, 1.0, 0.0], meta(json!({ "lang": "en" })));
        ix.put("neg", &[-2.0, 0.0, 0.0], None);
        ix
    }

    #[test]
    fn query_ranks_by_cosine_best_first_and_ignores_length() {
        let ix = index();
        let m = ix.query(&[10.0, 0.0, 0.0], 4, &Filter::default());
        let ids: Vec<_> = m.iter().map(|m| m.id).collect();
        assert_eq!(ids, ["x", "xy", "y", "neg"]);
        assert!((m[0].score - 1.0).abs() < 1e-6);
        assert!((m[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!(m[2].score.abs() < 1e-6);
        assert!((m[3].score + 1.0).abs() < 1e-6);
        assert_eq!(m[3].values, [-2.0, 0.0, 0.0]);
    }

    #[test]
    fn top_k_keeps_only_the_best_and_ties_break_by_id() {
        let mut ix = Index::new(1, 2);
        for id in ["d", "b", "c", "a"] {
            ix.put(id, &[1.0, 1.0], None);
        }
        ix.put("e", &[0.0, 1.0], None);
        let ids: Vec<_> = ix
            .query(&[1.0, 1.0], 2, &Filter::default())
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn put_replaces_a_vector_with_the_same_id() {
        let mut ix = index();
        ix.put("x", &[0.0, 0.0, 5.0], meta(json!({ "lang": "fr" })));
        assert_eq!(ix.query(&[1.0, 1.0, 1.0], 10, &Filter::default()).len(), 4);
        let m = ix.query(&[0.0, 0.0, 1.0], 1, &Filter::default());
        assert_eq!(m[0].id, "x");
        assert_eq!(m[0].metadata.unwrap()["lang"], "fr");
    }

    #[test]
    fn remove_takes_a_vector_out_and_keeps_the_others_findable() {
        let mut ix = index();
        assert!(ix.remove("x"));
        assert!(!ix.remove("x"));
        let m = ix.query(&[1.0, 0.0, 0.0], 10, &Filter::default());
        assert_eq!(
            m.iter().map(|m| m.id).collect::<Vec<_>>(),
            ["xy", "y", "neg"]
        );
        assert_eq!(
            m[2].values,
            [-2.0, 0.0, 0.0],
            "the moved vector kept its values"
        );
        assert!(ix.remove("neg"), "the last one");
        ix.put("x", &[1.0, 0.0, 0.0], None);
        assert_eq!(ix.query(&[1.0, 0.0, 0.0], 1, &Filter::default())[0].id, "x");
    }

    #[test]
    fn filters_match_equality_and_in_and_numbers_by_value() {
        let ix = index();
        let f = |v: Value| Filter::parse(v.as_object().unwrap()).unwrap();
        let ids = |f: &Filter| {
            ix.query(&[1.0, 0.0, 0.0], 10, f)
                .iter()
                .map(|m| m.id.to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&f(json!({ "lang": "en" }))), ["x", "xy"]);
        assert_eq!(ids(&f(json!({ "lang": { "$in": ["de", "fr"] } }))), ["y"]);
        assert_eq!(ids(&f(json!({ "year": 2024.0 }))), ["x"]);
        assert_eq!(
            ids(&f(json!({ "lang": "en", "year": 2023 }))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_filter_that_excludes_the_best_still_fills_the_top_k_with_the_next_best() {
        let ix = index();
        let f = Filter::parse(json!({ "lang": "de" }).as_object().unwrap()).unwrap();
        let ids: Vec<_> = ix
            .query(&[1.0, 0.0, 0.0], 1, &f)
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["y"], "x and xy score higher but are not German");
        let none: Vec<_> = ix
            .query(
                &[1.0, 0.0, 0.0],
                2,
                &Filter::parse(json!({ "lang": "en" }).as_object().unwrap()).unwrap(),
            )
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(none, ["x", "xy"]);
    }

    #[test]
    fn bad_filters_name_the_key() {
        let err = |v: Value| Filter::parse(v.as_object().unwrap()).unwrap_err();
        assert_eq!(err(json!({ "a/b": { "$gt": 1 } })).0, "/filter/a~1b");
        assert!(err(json!({ "k": { "$gt": 1 } }))
            .1
            .contains("unknown filter operator \"$gt\""));
        assert!(err(json!({ "k": [1, 2] })).1.contains("$in"));
        assert!(err(json!({ "k": { "$in": [{ "x": 1 }] } }))
            .1
            .contains("strings, numbers or booleans"));
    }

    #[test]
    fn dot_handles_lengths_that_are_not_multiples_of_eight() {
        let a: Vec<f32> = (0..13).map(|i| i as f32).collect();
        let expected: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), expected);
    }
}
