//! `vector.upsert` / `vector.query` / `vector.delete`: project-scoped vector namespaces for semantic lookup
//! (store embeddings with metadata, find the most similar by cosine). The tools check and
//! shape arguments; `namespaces` keeps the rows and the in-memory copies, `index` the math.

mod index;
mod namespaces;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

pub use index::Filter;
pub use namespaces::{Namespaces, MAX_NAMESPACE_VALUES};

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, SideEffects, ToolHandler, ToolSpec};
use crate::Result;
use namespaces::{QueryError, UpsertError, VectorIn};

pub const MAX_VECTORS_PER_CALL: usize = 1000;
pub const MAX_DIMENSION: usize = 4096;
pub const MAX_METADATA_BYTES: usize = 4096;
pub const MAX_TOP_K: u64 = 100;
const NAMESPACE_PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

fn namespace_schema() -> Value {
    json!({
        "type": "string", "pattern": NAMESPACE_PATTERN,
        "description": "The namespace (collection) within this project, e.g. \"notes\" or \"docs-v2\": letters, digits, '.', '_' or '-', at most 64."
    })
}

fn values_schema(what: &str) -> Value {
    json!({
        "type": "array", "minItems": 1, "maxItems": MAX_DIMENSION, "items": { "type": "number" },
        "description": format!("{what}: an embedding, at most {MAX_DIMENSION} numbers, not all zero; every vector of a namespace has the dimension of its first.")
    })
}

pub fn upsert_spec() -> Result<ToolSpec> {
    make_spec(
        "vector.upsert",
        "Store embedding vectors with optional metadata in a project namespace (a vector database / semantic memory), \
         so text, documents or facts can be remembered and found later by similarity with vector.query. \
         A vector with an id that is already stored replaces it.",
        SideEffects::Write,
        json!({
            "type": "object",
            "required": ["namespace", "vectors"],
            "additionalProperties": false,
            "properties": {
                "namespace": namespace_schema(),
                "vectors": {
                    "type": "array", "minItems": 1, "maxItems": MAX_VECTORS_PER_CALL,
                    "description": format!("At most {MAX_VECTORS_PER_CALL} vectors per call."),
                    "items": {
                        "type": "object",
                        "required": ["id", "values"],
                        "additionalProperties": false,
                        "properties": {
                            "id": { "type": "string", "minLength": 1, "maxLength": 256, "description": "Your id for this vector (e.g. a document or chunk id)." },
                            "values": values_schema("The vector"),
                            "metadata": { "type": "object", "description": format!("Any JSON object kept with the vector and returned with matches (at most {MAX_METADATA_BYTES} bytes), e.g. {{\"text\": \"…\", \"source\": \"…\"}}; its top-level keys can be filtered on.") }
                        }
                    }
                }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "upserted": { "type": "integer" }, "namespace": { "type": "string" },
                "dimension": { "type": "integer" }, "vector_count": { "type": "integer" }
            }
        })),
    )
}

pub fn query_spec() -> Result<ToolSpec> {
    make_spec(
        "vector.query",
        "Find the stored vectors most similar to a query vector (cosine similarity) in a project namespace, best first, \
         optionally filtered by metadata: semantic search over what was remembered with vector.upsert.",
        SideEffects::None,
        json!({
            "type": "object",
            "required": ["namespace", "vector"],
            "additionalProperties": false,
            "properties": {
                "namespace": namespace_schema(),
                "vector": values_schema("The query vector"),
                "top_k": { "type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 10, "description": "How many matches to return." },
                "filter": {
                    "type": "object",
                    "description": "Only vectors whose metadata matches every key: {\"key\": value} for equality, {\"key\": {\"$in\": [v1, v2]}} for any of several values."
                },
                "include_values": { "type": "boolean", "default": false, "description": "Return each match's values too." }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "matches": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": { "type": "string" }, "score": { "type": "number" },
                            "metadata": { "type": "object" }, "values": { "type": "array", "items": { "type": "number" } }
                        }
                    }
                }
            }
        })),
    )
}

pub fn delete_spec() -> Result<ToolSpec> {
    make_spec(
        "vector.delete",
        "Delete stored vectors from a project namespace by id, or the whole namespace: forget what was remembered with vector.upsert.",
        SideEffects::Destructive,
        json!({
            "type": "object",
            "required": ["namespace"],
            "additionalProperties": false,
            "properties": {
                "namespace": namespace_schema(),
                "ids": {
                    "type": "array", "minItems": 1, "maxItems": MAX_VECTORS_PER_CALL,
                    "items": { "type": "string", "minLength": 1, "maxLength": 256 },
                    "description": "The ids to delete. Give this or all."
                },
                "all": { "type": "boolean", "description": "true deletes every vector and the namespace itself (its next upsert may use another dimension). Give this or ids." }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": { "deleted": { "type": "integer" }, "namespace": { "type": "string" }, "vector_count": { "type": "integer" } }
        })),
    )
}

pub struct VectorDelete(pub Arc<Namespaces>);

#[async_trait]
impl ToolHandler for VectorDelete {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let namespace = args["namespace"].as_str().unwrap_or_default();
        let ids = match (
            args.get("ids").and_then(Value::as_array),
            args["all"].as_bool(),
        ) {
            (Some(_), Some(true)) => {
                return Err(HandlerError::invalid("", "give ids or all, not both"))
            }
            (Some(list), _) => Some(
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect::<Vec<_>>(),
            ),
            (None, Some(true)) => None,
            (None, _) => {
                return Err(HandlerError::invalid(
                    "",
                    "say what to delete: ids (a list) or all: true",
                ))
            }
        };
        let done = self
            .0
            .delete(&ctx.principal.project_id, namespace, ids)
            .await
            .map_err(unavailable)?;
        let Some((deleted, left)) = done else {
            return Err(HandlerError::failed(format!(
                "namespace {} has no vectors in this project",
                ctx.quote("namespace", namespace)
            )));
        };
        Ok(json!({ "deleted": deleted, "namespace": namespace, "vector_count": left }))
    }
}

/// The numbers of `v` as float32, or why not (`pointer` names the argument).
fn floats(v: &Value, pointer: &str) -> Result<Vec<f32>, HandlerError> {
    let list = v
        .as_array()
        .ok_or_else(|| HandlerError::invalid(pointer, "must be a list of numbers"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, x) in list.iter().enumerate() {
        let f = x
            .as_f64()
            .ok_or_else(|| HandlerError::invalid(format!("{pointer}/{i}"), "must be a number"))?
            as f32;
        if !f.is_finite() {
            return Err(HandlerError::invalid(
                format!("{pointer}/{i}"),
                "is too large for a 32-bit float",
            ));
        }
        out.push(f);
    }
    if index::norm(&out) == 0.0 || !index::norm(&out).is_finite() {
        return Err(HandlerError::invalid(
            pointer,
            "a vector whose values are all zero has no direction; cosine similarity needs one",
        ));
    }
    Ok(out)
}

fn unavailable(e: crate::Error) -> HandlerError {
    tracing::error!(error = ?e, "vector store failure");
    HandlerError::store_unavailable("the vector store", &e)
}

/// A float32 as the shortest decimal that reads back as it (0.1, not 0.10000000149011612).
fn number(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

pub struct VectorUpsert(pub Arc<Namespaces>);

#[async_trait]
impl ToolHandler for VectorUpsert {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let namespace = args["namespace"].as_str().unwrap_or_default();
        let list = args["vectors"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut vectors: Vec<VectorIn> = Vec::with_capacity(list.len());
        // A later vector with the same id replaces an earlier one of the same call.
        let mut at: HashMap<String, usize> = HashMap::new();
        for (i, v) in list.iter().enumerate() {
            let id = v["id"].as_str().unwrap_or_default().to_owned();
            let values = floats(&v["values"], &format!("/vectors/{i}/values"))?;
            if let Some(first) = vectors.first() {
                if first.values.len() != values.len() {
                    return Err(HandlerError::invalid(
                        format!("/vectors/{i}/values"),
                        format!("has {} dimensions but the first vector of this call has {}; every vector of a namespace has the same dimension", values.len(), first.values.len()),
                    ));
                }
            }
            let metadata = match v.get("metadata") {
                Some(Value::Object(m)) => {
                    let size = Value::Object(m.clone()).to_string().len();
                    if size > MAX_METADATA_BYTES {
                        return Err(HandlerError::invalid(
                            format!("/vectors/{i}/metadata"),
                            format!("is {size} bytes of JSON; at most {MAX_METADATA_BYTES}"),
                        ));
                    }
                    Some(m.clone())
                }
                _ => None,
            };
            let vector = VectorIn {
                id: id.clone(),
                values,
                metadata,
            };
            match at.get(&id) {
                Some(&j) => vectors[j] = vector,
                None => {
                    at.insert(id, vectors.len());
                    vectors.push(vector);
                }
            }
        }
        let dimension = vectors.first().map(|v| v.values.len()).unwrap_or(0);
        let upserted = vectors.len();
        let count = self.0.upsert(&ctx.principal.project_id, namespace, vectors).await.map_err(|e| match e {
            UpsertError::Dimension { namespace: have, given } => HandlerError::invalid(
                "/vectors/0/values",
                format!("namespace {} holds vectors of {have} dimensions; these have {given}", ctx.quote("namespace", namespace)),
            ),
            UpsertError::Full { would_hold, limit } => HandlerError::failed(format!(
                "namespace {} would hold {would_hold} vectors; at most {limit} vectors of {dimension} dimensions fit in one namespace",
                ctx.quote("namespace", namespace)
            )),
            UpsertError::Store(e) => unavailable(e),
        })?;
        Ok(
            json!({ "upserted": upserted, "namespace": namespace, "dimension": dimension, "vector_count": count }),
        )
    }
}

pub struct VectorQuery(pub Arc<Namespaces>);

#[async_trait]
impl ToolHandler for VectorQuery {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let namespace = args["namespace"].as_str().unwrap_or_default();
        let vector = floats(&args["vector"], "/vector")?;
        let top_k = args["top_k"].as_u64().unwrap_or(10).clamp(1, MAX_TOP_K) as usize;
        let filter = match args.get("filter") {
            Some(Value::Object(f)) => {
                Filter::parse(f).map_err(|(path, message)| HandlerError::invalid(path, message))?
            }
            _ => Filter::default(),
        };
        let include_values = args["include_values"].as_bool().unwrap_or(false);
        let found = self
            .0
            .query(
                &ctx.principal.project_id,
                namespace,
                vector,
                top_k,
                filter,
                include_values,
            )
            .await
            .map_err(|e| match e {
                QueryError::NoNamespace => HandlerError::failed(format!(
                    "namespace {} has no vectors in this project yet; vector.upsert creates it",
                    ctx.quote("namespace", namespace)
                )),
                QueryError::Dimension {
                    namespace: have,
                    query,
                } => HandlerError::invalid(
                    "/vector",
                    format!(
                        "namespace {} holds vectors of {have} dimensions; this vector has {query}",
                        ctx.quote("namespace", namespace)
                    ),
                ),
                QueryError::Store(e) => unavailable(e),
            })?;
        let matches: Vec<Value> = found
            .into_iter()
            .map(|m| {
                let mut o = Map::new();
                o.insert("id".into(), Value::String(m.id));
                o.insert("score".into(), number(m.score));
                o.insert(
                    "metadata".into(),
                    Value::Object(m.metadata.unwrap_or_default()),
                );
                if let Some(values) = m.values {
                    o.insert(
                        "values".into(),
                        Value::Array(values.into_iter().map(number).collect()),
                    );
                }
                Value::Object(o)
            })
            .collect();
        Ok(json!({ "matches": matches }))
    }
}
