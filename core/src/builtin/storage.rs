//! `storage.put` / `storage.get`: project-scoped object storage. Bytes go to an object_store
//! backend (a local directory by default; `s3://…` and other object_store URLs by
//! configuration); key, content type, size and digest are kept in the database. What is stored
//! passes the project's scrubber: text is kept with vault secrets redacted, and content given as
//! base64 (bytes, never rewritten) that holds a secret is refused, so no stored object can carry
//! a secret out later (an email attachment, a download).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde_json::{json, Value};

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, ToolHandler};
use crate::catalog::{SideEffects, ToolSpec};
use crate::clock::{rfc3339, Clock};
use crate::crypto::sha256_hex;
use crate::store::{self, storage_objects::StorageObjectRow, Db};
use crate::vault::{Scrubber, Vault};
use crate::{Error, Result};

/// Largest object, after decoding.
pub const MAX_OBJECT_BYTES: usize = 5 * 1024 * 1024;
const KEY_PATTERN: &str = "^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$";

pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    db: Db,
    clock: Arc<dyn Clock>,
}

impl ObjectStorage {
    /// Opens the store at `url`: `file:///abs/dir` (created if missing), `memory:///`, or any
    /// URL object_store understands (`s3://bucket/prefix`, with `AWS_*` settings from the
    /// environment).
    pub fn open(url: &str, db: Db, clock: Arc<dyn Clock>) -> Result<ObjectStorage> {
        let parsed = url::Url::parse(url)
            .map_err(|e| Error::invalid(format!("bad object store url {url:?}: {e}")))?;
        let store: Arc<dyn ObjectStore> = if parsed.scheme() == "file" {
            let dir = parsed
                .to_file_path()
                .map_err(|_| Error::invalid(format!("bad object store path in {url:?}")))?;
            std::fs::create_dir_all(&dir).map_err(|e| {
                Error::invalid(format!(
                    "cannot create object store directory {}: {e}",
                    dir.display()
                ))
            })?;
            Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(&dir).map_err(|e| {
                    Error::invalid(format!("cannot open object store {}: {e}", dir.display()))
                })?,
            )
        } else {
            let (store, prefix) = object_store::parse_url_opts(
                &parsed,
                std::env::vars().map(|(k, v)| (k.to_ascii_lowercase(), v)),
            )
            .map_err(|e| Error::invalid(format!("cannot open object store {url:?}: {e}")))?;
            Arc::new(object_store::prefix::PrefixStore::new(
                Arc::<dyn ObjectStore>::from(store),
                prefix,
            ))
        };
        Ok(ObjectStorage { store, db, clock })
    }

    fn path(project_id: &str, key: &str) -> ObjectPath {
        ObjectPath::from(format!("{project_id}/{key}"))
    }

    pub async fn put(
        &self,
        project_id: &str,
        key: &str,
        bytes: Bytes,
        content_type: &str,
    ) -> Result<StorageObjectRow> {
        let row = StorageObjectRow {
            project_id: project_id.to_owned(),
            object_key: key.to_owned(),
            content_type: content_type.to_owned(),
            size: bytes.len() as i64,
            sha256: sha256_hex(&bytes),
            updated_at: self.clock.now_ms(),
        };
        self.store
            .put(&Self::path(project_id, key), PutPayload::from_bytes(bytes))
            .await
            .map_err(|e| Error::internal(format!("object store write failed: {e}")))?;
        store::storage_objects::upsert(self.db.pool(), &row).await?;
        Ok(row)
    }

    pub async fn get(
        &self,
        project_id: &str,
        key: &str,
    ) -> Result<Option<(StorageObjectRow, Bytes)>> {
        let Some(row) = store::storage_objects::get(self.db.pool(), project_id, key).await? else {
            return Ok(None);
        };
        match self.store.get(&Self::path(project_id, key)).await {
            Ok(r) => {
                let bytes = r
                    .bytes()
                    .await
                    .map_err(|e| Error::internal(format!("object store read failed: {e}")))?;
                Ok(Some((row, bytes)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::internal(format!("object store read failed: {e}"))),
        }
    }
}

fn key_schema() -> Value {
    json!({
        "type": "string", "minLength": 1, "maxLength": 512, "pattern": KEY_PATTERN,
        "description": "Object key: segments of letters, digits, '.', '_' or '-', separated by '/', e.g. reports/2026/q3.csv"
    })
}

pub(super) fn check_key(key: &str) -> Result<(), HandlerError> {
    if key.split('/').any(|s| s == "." || s == "..") {
        return Err(HandlerError::invalid(
            "/key",
            "key segments cannot be '.' or '..'",
        ));
    }
    Ok(())
}

fn internal(e: Error) -> HandlerError {
    tracing::error!(error = ?e, "storage failure");
    HandlerError::store_unavailable("project storage", &e)
}

pub fn put_spec() -> Result<ToolSpec> {
    make_spec(
        "storage.put",
        "Store an object in project-scoped storage under a key, replacing any object with that key. Content is text, or base64 for binary data. \
         Vault secrets are never stored: text is kept with any secret in it replaced by [redacted:NAME], and base64 content holding one is refused.",
        SideEffects::Write,
        json!({
            "type": "object",
            "required": ["key", "content"],
            "additionalProperties": false,
            "properties": {
                "key": key_schema(),
                "content": { "type": "string", "description": "The object's content: text, or base64 when encoding is base64." },
                "encoding": { "type": "string", "enum": ["utf8", "base64"], "default": "utf8" },
                "content_type": { "type": "string", "minLength": 1, "maxLength": 255, "default": "text/plain; charset=utf-8" }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "key": { "type": "string" }, "size": { "type": "integer" }, "content_type": { "type": "string" },
                "updated_at": { "type": "string" },
                "redacted": { "type": "array", "items": { "type": "string" }, "description": "The vault secrets replaced by [redacted:NAME] in the stored text (absent when none)." }
            }
        })),
    )
}

pub struct StoragePut {
    pub storage: Arc<ObjectStorage>,
    /// The project's secrets, which stored content must not hold.
    pub vault: Vault,
}

/// The project's scrubber for a tool that must keep secrets out of what it stores or sends.
pub(super) async fn project_scrubber(
    vault: &Vault,
    ctx: &CallContext<'_>,
) -> Result<Scrubber, HandlerError> {
    vault.scrubber_for(ctx.principal).await.map_err(|e| {
        tracing::error!(error = ?e, "reading the vault's patterns failed");
        HandlerError::store_unavailable("the vault", &e)
    })
}

/// `vault secret A` or `vault secrets A, B`.
pub(super) fn secret_names(names: &[String]) -> String {
    match names {
        [one] => format!("vault secret {one}"),
        many => format!("vault secrets {}", many.join(", ")),
    }
}

#[async_trait]
impl ToolHandler for StoragePut {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let key = args["key"].as_str().unwrap_or_default();
        check_key(key)?;
        let content = args["content"].as_str().unwrap_or_default();
        let content_type = args["content_type"]
            .as_str()
            .unwrap_or("application/octet-stream");
        if content_type.chars().any(char::is_control) {
            return Err(HandlerError::invalid(
                "/content_type",
                "content type cannot contain control characters",
            ));
        }
        let scrubber = project_scrubber(&self.vault, ctx).await?;
        for (field, what, text) in [
            ("/key", "the key", key),
            ("/content_type", "the content type", content_type),
        ] {
            let held = scrubber.secrets_in(text.as_bytes());
            if !held.is_empty() {
                return Err(HandlerError::invalid(field, format!("{what} holds the value of {}; it is listed and shown, so choose one without it", secret_names(&held))));
            }
        }
        let (bytes, redacted) = match args["encoding"].as_str() {
            Some("base64") => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(content.trim())
                    .map_err(|_| {
                        HandlerError::invalid("/content", "content is not valid base64")
                    })?;
                // Bytes are stored as given: holding a secret (or being one, written in base64)
                // is refused.
                let mut held = scrubber.secrets_in(&bytes);
                held.extend(scrubber.secrets_in(content.as_bytes()));
                held.sort();
                held.dedup();
                if !held.is_empty() {
                    return Err(HandlerError::invalid(
                        "/content",
                        format!(
                            "the content holds the value of {}; content given as base64 is stored byte for byte and never rewritten, \
                             so it cannot hold a secret: leave the secret out, or store text (encoding utf8), which is kept with secrets redacted",
                            secret_names(&held)
                        ),
                    ));
                }
                (bytes, Vec::new())
            }
            _ => match scrubber.scrub_named(content) {
                Some((clean, names)) => (clean.into_bytes(), names),
                None => (content.as_bytes().to_vec(), Vec::new()),
            },
        };
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(HandlerError::invalid(
                "/content",
                format!("object larger than {MAX_OBJECT_BYTES} bytes"),
            ));
        }
        let row = self
            .storage
            .put(
                &ctx.principal.project_id,
                key,
                Bytes::from(bytes),
                content_type,
            )
            .await
            .map_err(internal)?;
        let mut out = json!({
            "key": row.object_key, "size": row.size, "content_type": row.content_type,
            "updated_at": rfc3339(row.updated_at)
        });
        if !redacted.is_empty() {
            out["redacted"] = json!(redacted);
        }
        Ok(out)
    }
}

pub fn get_spec() -> Result<ToolSpec> {
    make_spec(
        "storage.get",
        "Read an object from project-scoped storage by key: its content (text, or base64 for binary data), content type, size and when it was last written.",
        SideEffects::None,
        json!({
            "type": "object",
            "required": ["key"],
            "additionalProperties": false,
            "properties": {
                "key": key_schema(),
                "encoding": { "type": "string", "enum": ["auto", "utf8", "base64"], "default": "auto",
                              "description": "auto returns text when the object is valid UTF-8, base64 otherwise" }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "key": { "type": "string" }, "content": { "type": "string" }, "encoding": { "type": "string" },
                "content_type": { "type": "string" }, "size": { "type": "integer" },
                "updated_at": { "type": "string" }
            }
        })),
    )
}

pub struct StorageGet(pub Arc<ObjectStorage>);

#[async_trait]
impl ToolHandler for StorageGet {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let key = args["key"].as_str().unwrap_or_default();
        check_key(key)?;
        let Some((row, bytes)) = self
            .0
            .get(&ctx.principal.project_id, key)
            .await
            .map_err(internal)?
        else {
            return Err(HandlerError::failed(format!(
                "no object with key {} in this project's storage",
                ctx.quote("key", key)
            )));
        };
        let (content, encoding) = match (args["encoding"].as_str(), std::str::from_utf8(&bytes)) {
            (Some("base64"), _) | (Some("auto"), Err(_)) => (
                base64::engine::general_purpose::STANDARD.encode(&bytes),
                "base64",
            ),
            (Some("utf8"), Err(_)) => {
                return Err(HandlerError::invalid(
                    "/encoding",
                    "the object is not valid UTF-8; use encoding base64",
                ))
            }
            (_, Ok(text)) => (text.to_owned(), "utf8"),
            (_, Err(_)) => (
                base64::engine::general_purpose::STANDARD.encode(&bytes),
                "base64",
            ),
        };
        Ok(json!({
            "key": row.object_key, "content": content, "encoding": encoding, "content_type": row.content_type,
            "size": row.size, "updated_at": rfc3339(row.updated_at)
        }))
    }
}
