//! The vector namespaces of every project: rows in the database (the truth, shared by every
//! instance) and an in-memory copy per namespace that queries scan. A copy is used only while
//! its generation matches the namespace's row, so a change on any instance invalidates it on
//! the next query; this instance's own upserts update its copy in place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::index::{Filter, Index};
use crate::clock::Clock;
use crate::store::vectors::{NewVector, Upserted};
use crate::store::{self, Db};
use crate::{Error, Result};

/// Values (vectors × dimension) one namespace may hold: 256 MiB of float32, e.g. 174,762
/// vectors of 384 dimensions.
pub const MAX_NAMESPACE_VALUES: i64 = 64 * 1024 * 1024;
/// Memory the in-memory copies of all namespaces may use before the least recently used are
/// dropped (they are reloaded from the database when queried again).
pub const CACHE_BUDGET_BYTES: usize = 1024 * 1024 * 1024;
/// Scans over more values than this run on the blocking pool, off the async workers.
const BLOCKING_SCAN_VALUES: usize = 2 * 1024 * 1024;

type Key = (String, String);

#[derive(Default)]
struct Slot {
    index: Option<Arc<RwLock<Index>>>,
    last_used: u64,
    loader: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Default)]
struct Cache {
    slots: HashMap<Key, Slot>,
    tick: u64,
}

/// One vector to upsert, checked.
pub struct VectorIn {
    pub id: String,
    pub values: Vec<f32>,
    pub metadata: Option<Map<String, Value>>,
}

/// What a query found, owned.
pub struct Found {
    pub id: String,
    pub score: f32,
    pub metadata: Option<Map<String, Value>>,
    pub values: Option<Vec<f32>>,
}

pub enum QueryError {
    /// No vector was ever upserted into this namespace.
    NoNamespace,
    Dimension {
        namespace: usize,
        query: usize,
    },
    Store(Error),
}

pub enum UpsertError {
    Dimension { namespace: i64, given: i64 },
    Full { would_hold: i64, limit: i64 },
    Store(Error),
}

pub struct Namespaces {
    db: Db,
    clock: Arc<dyn Clock>,
    cache: Mutex<Cache>,
    budget: usize,
}

impl Namespaces {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Namespaces {
        Namespaces {
            db,
            clock,
            cache: Mutex::default(),
            budget: CACHE_BUDGET_BYTES,
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().expect("vector cache lock")
    }

    /// Writes the vectors (ids unique, every one of the same dimension, checked by the caller)
    /// and answers the namespace's vector count after it.
    pub async fn upsert(
        &self,
        project_id: &str,
        namespace: &str,
        vectors: Vec<VectorIn>,
    ) -> std::result::Result<i64, UpsertError> {
        let dimension = vectors.first().map(|v| v.values.len()).unwrap_or(0) as i64;
        let rows: Vec<NewVector<'_>> = vectors
            .iter()
            .map(|v| NewVector {
                id: &v.id,
                vals: STANDARD.encode(
                    v.values
                        .iter()
                        .flat_map(|x| x.to_le_bytes())
                        .collect::<Vec<u8>>(),
                ),
                metadata: v
                    .metadata
                    .as_ref()
                    .map(|m| Value::Object(m.clone()).to_string()),
            })
            .collect();
        let limit = MAX_NAMESPACE_VALUES / dimension.max(1);
        let outcome = store::vectors::upsert(
            &self.db,
            project_id,
            namespace,
            dimension,
            &rows,
            limit,
            self.clock.now_ms(),
        )
        .await
        .map_err(UpsertError::Store)?;
        let (generation, count) = match outcome {
            Upserted::Done {
                generation,
                vector_count,
            } => (generation, vector_count),
            Upserted::DimensionMismatch {
                dimension: namespace,
            } => {
                return Err(UpsertError::Dimension {
                    namespace,
                    given: dimension,
                })
            }
            Upserted::TooMany { would_hold } => {
                return Err(UpsertError::Full { would_hold, limit })
            }
        };
        drop(rows);
        // This instance's copy follows the write when it held the generation just before it;
        // otherwise another writer came between and the copy is dropped.
        let key = (project_id.to_owned(), namespace.to_owned());
        let index = self.cache().slots.get(&key).and_then(|s| s.index.clone());
        if let Some(index) = index {
            let mut ix = index.write().expect("vector index lock");
            if ix.generation == generation - 1 {
                for v in vectors {
                    ix.put(&v.id, &v.values, v.metadata);
                }
                ix.generation = generation;
            } else if ix.generation < generation {
                drop(ix);
                if let Some(slot) = self.cache().slots.get_mut(&key) {
                    slot.index = None;
                }
            }
        }
        Ok(count)
    }

    /// Deletes the vectors with `ids`, or all of them with `None` (the namespace goes with
    /// them); `(deleted, left)`, or None when the namespace does not exist.
    pub async fn delete(
        &self,
        project_id: &str,
        namespace: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Option<(i64, i64)>> {
        let Some(d) = store::vectors::delete(
            &self.db,
            project_id,
            namespace,
            ids.as_deref(),
            self.clock.now_ms(),
        )
        .await?
        else {
            return Ok(None);
        };
        let key = (project_id.to_owned(), namespace.to_owned());
        let index = self.cache().slots.get(&key).and_then(|s| s.index.clone());
        if let Some(index) = index {
            let mut ix = index.write().expect("vector index lock");
            match &ids {
                Some(ids) if d.vector_count > 0 && ix.generation == d.generation - 1 => {
                    for id in ids {
                        ix.remove(id);
                    }
                    ix.generation = d.generation;
                }
                _ => {
                    drop(ix);
                    if let Some(slot) = self.cache().slots.get_mut(&key) {
                        slot.index = None;
                    }
                }
            }
        }
        Ok(Some((d.deleted, d.vector_count)))
    }

    /// The `top_k` best matches of `vector` in the namespace.
    pub async fn query(
        &self,
        project_id: &str,
        namespace: &str,
        vector: Vec<f32>,
        top_k: usize,
        filter: Filter,
        include_values: bool,
    ) -> std::result::Result<Vec<Found>, QueryError> {
        let row = store::vectors::namespace(self.db.pool(), project_id, namespace)
            .await
            .map_err(QueryError::Store)?
            .filter(|r| r.vector_count > 0)
            .ok_or(QueryError::NoNamespace)?;
        if row.dimension as usize != vector.len() {
            return Err(QueryError::Dimension {
                namespace: row.dimension as usize,
                query: vector.len(),
            });
        }
        let index = self
            .index(
                project_id,
                namespace,
                row.generation,
                row.dimension as usize,
            )
            .await
            .map_err(QueryError::Store)?;
        let scan = move || {
            let ix = index.read().expect("vector index lock");
            ix.query(&vector, top_k, &filter)
                .into_iter()
                .map(|m| Found {
                    id: m.id.to_owned(),
                    score: m.score,
                    metadata: m.metadata.cloned(),
                    values: include_values.then(|| m.values.to_vec()),
                })
                .collect::<Vec<_>>()
        };
        if (row.vector_count as usize).saturating_mul(row.dimension as usize) > BLOCKING_SCAN_VALUES
        {
            tokio::task::spawn_blocking(scan)
                .await
                .map_err(|e| QueryError::Store(Error::internal(format!("vector scan failed: {e}"))))
        } else {
            Ok(scan())
        }
    }

    /// The namespace's in-memory copy at `generation` or later, loaded if needed (one load at a
    /// time per namespace; concurrent queries wait for it).
    async fn index(
        &self,
        project_id: &str,
        namespace: &str,
        generation: i64,
        dimension: usize,
    ) -> Result<Arc<RwLock<Index>>> {
        let key = (project_id.to_owned(), namespace.to_owned());
        let loader = {
            let mut cache = self.cache();
            cache.tick += 1;
            let tick = cache.tick;
            let slot = cache.slots.entry(key.clone()).or_default();
            slot.last_used = tick;
            if let Some(ix) = &slot.index {
                if ix.read().expect("vector index lock").generation >= generation {
                    return Ok(ix.clone());
                }
            }
            slot.loader.clone()
        };
        let _loading = loader.lock().await;
        if let Some(ix) = self.cache().slots.get(&key).and_then(|s| s.index.clone()) {
            if ix.read().expect("vector index lock").generation >= generation {
                return Ok(ix);
            }
        }
        // Read the generation before the rows: rows newer than the label only cause a reload.
        let current = store::vectors::namespace(self.db.pool(), project_id, namespace)
            .await?
            .map(|r| r.generation)
            .unwrap_or(generation);
        let rows = store::vectors::all_vectors(self.db.pool(), project_id, namespace).await?;
        let mut ix = Index::new(current, dimension);
        for r in rows {
            let bytes = STANDARD
                .decode(&r.vals)
                .map_err(|_| Error::internal(format!("vector {:?} has unreadable values", r.id)))?;
            if bytes.len() != dimension * 4 {
                return Err(Error::internal(format!(
                    "vector {:?} has {} values, not {dimension}",
                    r.id,
                    bytes.len() / 4
                )));
            }
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let metadata = match r.metadata {
                Some(text) => serde_json::from_str::<Map<String, Value>>(&text).ok(),
                None => None,
            };
            ix.put(&r.id, &values, metadata);
        }
        let index = Arc::new(RwLock::new(ix));
        let mut cache = self.cache();
        if let Some(slot) = cache.slots.get_mut(&key) {
            slot.index = Some(index.clone());
        }
        evict(&mut cache, &key, self.budget);
        Ok(index)
    }
}

/// Drops the least recently used copies (never `keep`) while the copies exceed `budget`.
fn evict(cache: &mut Cache, keep: &Key, budget: usize) {
    // Namespaces without a copy and without a load in progress keep no slot.
    cache
        .slots
        .retain(|k, s| k == keep || s.index.is_some() || Arc::strong_count(&s.loader) > 1);
    loop {
        let total: usize = cache
            .slots
            .values()
            .filter_map(|s| s.index.as_ref())
            .map(|ix| ix.read().expect("vector index lock").bytes())
            .sum();
        if total <= budget {
            return;
        }
        let victim = cache
            .slots
            .iter()
            .filter(|(k, s)| *k != keep && s.index.is_some())
            .min_by_key(|(_, s)| s.last_used)
            .map(|(k, _)| k.clone());
        match victim {
            Some(k) => {
                if let Some(s) = cache.slots.get_mut(&k) {
                    s.index = None;
                }
            }
            None => return,
        }
    }
}
