//! The prompts, resources and resource templates of upstream MCP servers (issue 33): listed
//! beside the tools when the server's initialize answer offers them, reviewed like tools (a
//! changed or new item waits for an admin unless the server auto-approves; a vanished one is
//! kept, unavailable), and fetched on the server's breaker and semaphore when a tool set's
//! client gets a prompt or reads a resource. What an item *contains* (a prompt's messages, a
//! resource's text) is dynamic like a tool result: scrubbed and capped, never reviewed.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::live::Live;
use super::{ServerView, Upstreams};
use crate::auth::{Operation, Principal};
use crate::catalog::HandlerError;
use crate::crypto::sha256_hex;
use crate::store::mcp_items::ItemRow;
use crate::store::mcp_servers::ServerRow;
use crate::store::{self, Tx};
use crate::{Error, Result};

pub use workbench_model::upstream::{ItemKind, McpItemView, ToolState};

/// Items of one kind kept per server, at most (the rest are left out, and logged).
pub const MAX_ITEMS_PER_KIND: usize = 500;
/// Characters of an item's key (a prompt name, a URI, a URI template), at most.
pub const MAX_KEY_CHARS: usize = 2048;
/// Marks the item fingerprint format.
const FINGERPRINT: &str = "i1:";

/// How one kind is listed, keyed and reviewed.
struct Shape {
    /// The capability (in the initialize answer) that offers it.
    capability: &'static str,
    method: &'static str,
    /// Where a page holds its entries.
    field: &'static str,
    /// The field that identifies an entry.
    key: &'static str,
    /// The fields an admin reviews, in the order they are fingerprinted. A resource's `size`
    /// and `lastModified` are left out: they change with the content, which is not reviewed.
    reviewed: &'static [&'static str],
}

fn shape(kind: ItemKind) -> Shape {
    match kind {
        ItemKind::Prompt => Shape {
            capability: "prompts",
            method: "prompts/list",
            field: "prompts",
            key: "name",
            reviewed: &["name", "title", "description", "arguments"],
        },
        ItemKind::Resource => Shape {
            capability: "resources",
            method: "resources/list",
            field: "resources",
            key: "uri",
            reviewed: &[
                "uri",
                "name",
                "title",
                "description",
                "mimeType",
                "annotations",
            ],
        },
        ItemKind::ResourceTemplate => Shape {
            capability: "resources",
            method: "resources/templates/list",
            field: "resourceTemplates",
            key: "uriTemplate",
            reviewed: &[
                "uriTemplate",
                "name",
                "title",
                "description",
                "mimeType",
                "annotations",
            ],
        },
    }
}

/// A listed entry's key and reviewed fields; None when it has no usable key (missing, empty,
/// longer than `MAX_KEY_CHARS`, or with control characters).
pub fn reviewed(kind: ItemKind, raw: &Value) -> Option<(String, Value)> {
    let shape = shape(kind);
    let key = raw.get(shape.key)?.as_str()?;
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS || key.chars().any(char::is_control) {
        return None;
    }
    let mut body = Map::new();
    for field in shape.reviewed {
        let Some(v) = raw.get(*field).filter(|v| !v.is_null()) else {
            continue;
        };
        let v = match (*field, v) {
            ("arguments", Value::Array(args)) => Value::Array(
                args.iter()
                    .map(|a| {
                        let mut kept = Map::new();
                        for f in ["name", "title", "description", "required"] {
                            if let Some(x) = a.get(f).filter(|x| !x.is_null()) {
                                kept.insert(f.to_owned(), x.clone());
                            }
                        }
                        Value::Object(kept)
                    })
                    .collect(),
            ),
            ("annotations", Value::Object(m)) => {
                let mut m = m.clone();
                m.remove("lastModified");
                Value::Object(m)
            }
            _ => v.clone(),
        };
        body.insert((*field).to_owned(), v);
    }
    Some((key.to_owned(), Value::Object(body)))
}

/// What an admin approves of an item: its kind and reviewed fields, hashed.
pub fn fingerprint(kind: ItemKind, body: &Value) -> String {
    let mut fields = Vec::new();
    for field in shape(kind).reviewed {
        fields.push(body.get(*field).cloned().unwrap_or(Value::Null));
    }
    let text = json!([kind.as_str(), fields]).to_string();
    format!("{FINGERPRINT}{}", sha256_hex(text.as_bytes()))
}

/// The URI scheme set endpoints list upstream resources under: `wb://<server>/<its URI>`.
pub const URI_SCHEME: &str = "wb://";

/// A resource URI (or URI template) as set endpoints show it: the server's name (unique in its
/// project, host-safe) then the upstream's URI verbatim.
pub fn exposed_uri(server: &str, uri: &str) -> String {
    format!("{URI_SCHEME}{server}/{uri}")
}

/// The server name and upstream URI an exposed URI names (an exact inverse of `exposed_uri`).
pub fn split_exposed(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(URI_SCHEME)?;
    let (server, upstream) = rest.split_once('/')?;
    (!server.is_empty() && !upstream.is_empty()).then_some((server, upstream))
}

/// Whether `uri` is one the RFC 6570 level-1 template `template` produces: literal text
/// matched exactly, each `{var}` standing for one or more characters up to the next literal.
pub fn template_matches(template: &str, uri: &str) -> bool {
    // Split into literal parts around `{…}` expressions.
    let mut literals = Vec::new();
    let mut rest = template;
    loop {
        match rest.find('{') {
            Some(open) => {
                let Some(close) = rest[open..].find('}') else {
                    return false;
                };
                literals.push(&rest[..open]);
                rest = &rest[open + close + 1..];
            }
            None => {
                literals.push(rest);
                break;
            }
        }
    }
    let Some((first, others)) = literals.split_first() else {
        return false;
    };
    let Some(mut at) = uri.strip_prefix(first) else {
        return false;
    };
    // Each variable takes at least one character, and (being level 1) no `/`, `?` or `#`.
    let n = others.len();
    for (i, lit) in others.iter().enumerate() {
        let last = i + 1 == n;
        let found = if last {
            if lit.is_empty() {
                Some(at.len())
            } else {
                at.strip_suffix(lit).map(str::len)
            }
        } else if lit.is_empty() {
            return false;
        } else {
            at.find(lit)
        };
        let Some(end) = found else {
            return false;
        };
        let value = &at[..end];
        if value.is_empty() || value.contains(['/', '?', '#']) {
            return false;
        }
        at = &at[end + lit.len()..];
    }
    at.is_empty()
}

/// How an item is shown on set endpoints.
pub fn exposed(server: &ServerRow, kind: ItemKind, key: &str) -> String {
    exposed_as(&server.tool_prefix, &server.name, kind, key)
}

/// The naming rule itself: a prompt after the server's tool prefix, a resource or template
/// under `wb://<server name>/`.
fn exposed_as(tool_prefix: &str, server_name: &str, kind: ItemKind, key: &str) -> String {
    match kind {
        ItemKind::Prompt => format!("{tool_prefix}{key}"),
        _ => exposed_uri(server_name, key),
    }
}

/// What a refresh found among a server's prompts or its resources (upstream keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ItemChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl ItemChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// One listing of a server's items, per kind: None when that kind could not be listed (its
/// stored items stay as they are), empty when the server offers none.
pub(super) type Listed = Vec<(ItemKind, Option<Vec<(String, Value)>>)>;

/// How a listing is reviewed: the first listing of a server (its registration) is approved,
/// later new items only when the server auto-approves.
#[derive(Clone, Copy)]
pub(super) struct Review {
    pub first: bool,
    pub auto_approve: bool,
}

/// An available item of a server, as a set endpoint publishes it.
#[derive(Debug, Clone)]
pub struct PublishedItem {
    pub server_id: String,
    pub server_name: String,
    pub tool_prefix: String,
    pub kind: ItemKind,
    pub key: String,
    /// The reviewed fields, as approved.
    pub body: Value,
}

impl PublishedItem {
    /// The name (prompt) or URI (resource, template) a set endpoint shows.
    pub fn exposed(&self) -> String {
        exposed_as(&self.tool_prefix, &self.server_name, self.kind, &self.key)
    }

    /// The name a policy decides it under: `prompt:<prefix><name>` or
    /// `resource:<prefix><uri or template>`.
    pub fn subject(&self) -> String {
        subject(self.kind, &self.tool_prefix, &self.key)
    }
}

/// The policy subject of an item (a concrete resource read is decided on its URI).
pub fn subject(kind: ItemKind, tool_prefix: &str, key: &str) -> String {
    match kind {
        ItemKind::Prompt => format!("prompt:{tool_prefix}{key}"),
        _ => format!("resource:{tool_prefix}{key}"),
    }
}

/// Applies a listing to the stored rows of one kind, as a tool refresh does: an unchanged
/// item keeps its status, a changed one waits for review, a new one too unless approved
/// (`review`), a vanished one becomes unavailable. Returns the rows to write and what changed.
fn reviewed_rows(
    server_id: &str,
    kind: ItemKind,
    listed: &[(String, Value)],
    existing: Vec<ItemRow>,
    review: Review,
    now: i64,
) -> (Vec<ItemRow>, ItemChanges) {
    let mut by_key: HashMap<String, ItemRow> = existing
        .into_iter()
        .filter(|r| r.kind == kind)
        .map(|r| (r.item_key.clone(), r))
        .collect();
    let mut changes = ItemChanges::default();
    let mut rows = Vec::new();
    for (key, body) in listed {
        let fp = fingerprint(kind, body);
        let text = body.to_string();
        let row = match by_key.remove(key) {
            Some(old) => {
                if old.fingerprint != fp {
                    changes.changed.push(key.clone());
                }
                let status = if old.approved_fingerprint.as_deref() == Some(fp.as_str()) {
                    ToolState::Available
                } else {
                    ToolState::PendingReview
                };
                if old.fingerprint == fp && old.status == status && old.body == text {
                    continue;
                }
                ItemRow {
                    body: text,
                    status,
                    fingerprint: fp,
                    updated_at: now,
                    ..old
                }
            }
            None => {
                changes.added.push(key.clone());
                let approve = review.first || review.auto_approve;
                ItemRow {
                    server_id: server_id.to_owned(),
                    kind,
                    item_key: key.clone(),
                    status: if approve {
                        ToolState::Available
                    } else {
                        ToolState::PendingReview
                    },
                    approved_fingerprint: approve.then(|| fp.clone()),
                    approved_body: approve.then(|| text.clone()),
                    body: text,
                    fingerprint: fp,
                    updated_at: now,
                }
            }
        };
        rows.push(row);
    }
    for (key, mut gone) in by_key {
        if gone.status == ToolState::Unavailable {
            continue;
        }
        changes.removed.push(key);
        gone.status = ToolState::Unavailable;
        gone.updated_at = now;
        rows.push(gone);
    }
    changes.added.sort();
    changes.removed.sort();
    changes.changed.sort();
    (rows, changes)
}

impl Upstreams {
    /// The server's prompts, resources and templates, each kind listed only when its
    /// initialize answer offers it; scrubbed of the project's secrets and the server's token
    /// before anything is stored. A kind that cannot be listed is logged and left as stored:
    /// it never fails a registration or a refresh.
    pub(super) async fn list_items(&self, row: &ServerRow, live: &Live) -> Listed {
        // A server each user signs in to is listed as the admin who registered it sees it,
        // with their connection (as its tools are).
        let lister = match live.auth.user_oauth() {
            None => None,
            Some(_) => match self.lister_token(row, live).await {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::info!(server = %row.id, reason = %e, "the MCP server's prompts and resources are not listed yet");
                    return Vec::new();
                }
            },
        };
        let capabilities = match &lister {
            None => live.capabilities().await,
            Some((user, token)) => live.capabilities_as(user, token).await,
        };
        let capabilities = match capabilities {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(server = %row.id, error = %e, "the MCP server's capabilities cannot be read; its prompts and resources are left as they were");
                return Vec::new();
            }
        };
        let mut scrubber = match self.vault.scrubber(&row.project_id).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(server = %row.id, error = %e, "the vault cannot be read; the server's prompts and resources are left as they were");
                return Vec::new();
            }
        };
        live.scrub_token_into(&mut scrubber);
        if let Some((_, token)) = &lister {
            scrubber.add(&format!("{}_credential", live.name), token);
        }
        let mut out = Vec::new();
        for kind in ItemKind::ALL.iter().copied() {
            let s = shape(kind);
            if capabilities.get(s.capability).is_none_or(Value::is_null) {
                out.push((kind, Some(Vec::new())));
                continue;
            }
            let listed = match &lister {
                None => live.list_all(s.method, s.field).await,
                Some((user, token)) => live.list_all_as(user, token, s.method, s.field).await,
            };
            match listed {
                Ok(mut entries) => {
                    entries.iter_mut().for_each(|e| scrubber.scrub(e));
                    let mut kept: Vec<(String, Value)> = Vec::new();
                    for e in &entries {
                        match reviewed(kind, e) {
                            Some((key, body)) if !kept.iter().any(|(k, _)| *k == key) => {
                                kept.push((key, body))
                            }
                            Some(_) => {}
                            None => {
                                tracing::debug!(server = %row.id, kind = %kind, "an entry without a usable key was left out")
                            }
                        }
                    }
                    if kept.len() > MAX_ITEMS_PER_KIND {
                        tracing::warn!(server = %row.id, kind = %kind, listed = kept.len(), "the MCP server lists more than {MAX_ITEMS_PER_KIND}; the rest are left out");
                        kept.truncate(MAX_ITEMS_PER_KIND);
                    }
                    out.push((kind, Some(kept)));
                }
                // Offered in the capabilities, but the method is not there: none.
                Err(super::RpcError::Remote { code: -32601, .. }) => {
                    out.push((kind, Some(Vec::new())))
                }
                Err(e) => {
                    let message = e.to_string();
                    let message = scrubber.scrub_str(&message).unwrap_or(message);
                    tracing::warn!(server = %row.id, kind = %kind, error = %message, "listing the MCP server's items failed; they are left as they were");
                    out.push((kind, None));
                }
            }
        }
        out
    }

    /// Writes a listing of a server's items within `tx` (a registration or a refresh):
    /// (prompt changes, resource and template changes).
    pub(super) async fn store_items(
        &self,
        tx: &mut Tx,
        server_id: &str,
        listed: &Listed,
        review: Review,
        now: i64,
    ) -> Result<(ItemChanges, ItemChanges)> {
        let existing = store::mcp_items::list(&mut **tx, server_id).await?;
        let (mut prompts, mut resources) = (ItemChanges::default(), ItemChanges::default());
        for (kind, entries) in listed {
            let Some(entries) = entries else { continue };
            let (rows, changes) =
                reviewed_rows(server_id, *kind, entries, existing.clone(), review, now);
            for r in &rows {
                store::mcp_items::upsert(&mut **tx, r).await?;
            }
            let into = match kind {
                ItemKind::Prompt => &mut prompts,
                _ => &mut resources,
            };
            into.added.extend(changes.added);
            into.removed.extend(changes.removed);
            into.changed.extend(changes.changed);
        }
        Ok((prompts, resources))
    }

    /// A server's prompts, resources and templates as an admin reviews them; others see the
    /// available ones only.
    pub async fn items(&self, who: &Principal, id: &str) -> Result<Vec<McpItemView>> {
        who.require(Operation::McpServersRead)?;
        let reviewer = who.allows(Operation::McpServersReview);
        let row = self.server(who, id).await?;
        Ok(store::mcp_items::list(self.db.pool(), &row.id)
            .await?
            .into_iter()
            .filter(|i| reviewer || i.status == ToolState::Available)
            .map(|i| {
                let changed = i
                    .approved_fingerprint
                    .as_deref()
                    .is_some_and(|a| a != i.fingerprint);
                McpItemView {
                    exposed: exposed(&row, i.kind, &i.item_key),
                    kind: i.kind,
                    key: i.item_key,
                    status: i.status,
                    body: i.body,
                    approved_body: if changed { i.approved_body } else { None },
                }
            })
            .collect())
    }

    /// Approves held items of `kind` (prompts: `Prompt`; resources: `Resource`, which covers
    /// templates too), named by their upstream key or as set endpoints show them: they are
    /// published as they are now.
    pub async fn approve_items(
        &self,
        admin: &Principal,
        id: &str,
        kind: ItemKind,
        keys: &[String],
    ) -> Result<ServerView> {
        admin.require(Operation::McpServersReview)?;
        let row = self.server(admin, id).await?;
        let existing = store::mcp_items::list(self.db.pool(), &row.id).await?;
        let of_kind = |i: &ItemRow| match kind {
            ItemKind::Prompt => i.kind == ItemKind::Prompt,
            _ => i.kind != ItemKind::Prompt,
        };
        let mut chosen = Vec::new();
        for k in keys {
            let found = existing
                .iter()
                .filter(|i| of_kind(i))
                .find(|i| i.item_key == *k || exposed(&row, i.kind, &i.item_key) == *k)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{id} has no {} {k:?}",
                        match kind {
                            ItemKind::Prompt => "prompt",
                            _ => "resource",
                        }
                    ))
                })?;
            chosen.push(found.clone());
        }
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        for mut i in chosen
            .into_iter()
            .filter(|i| i.status == ToolState::PendingReview)
        {
            i.status = ToolState::Available;
            i.approved_fingerprint = Some(i.fingerprint.clone());
            i.approved_body = Some(i.body.clone());
            i.updated_at = now;
            store::mcp_items::upsert(&mut *tx, &i).await?;
        }
        store::mcp_servers::touch(&mut *tx, &row.id, now).await?;
        tx.commit().await?;
        tracing::info!(server = %id, by = %admin.user_id, ?keys, %kind, "MCP server items approved");
        self.reload_project(&admin.project_id).await?;
        self.get(admin, id).await
    }

    /// The available items of the project's servers named in `server_ids`, in that order
    /// (within a server: prompts, resources, templates, each by key), with the text an admin
    /// approved.
    pub async fn published_items(
        &self,
        project_id: &str,
        server_ids: &[String],
    ) -> Result<Vec<PublishedItem>> {
        if server_ids.is_empty() {
            return Ok(Vec::new());
        }
        let servers: HashMap<String, ServerRow> =
            store::mcp_servers::list_servers(self.db.pool(), project_id)
                .await?
                .into_iter()
                .map(|s| (s.id.clone(), s))
                .collect();
        let mut rows = store::mcp_items::available_in_project(self.db.pool(), project_id).await?;
        let order = |k: ItemKind| ItemKind::ALL.iter().position(|x| *x == k);
        rows.sort_by(|a, b| (order(a.kind), &a.item_key).cmp(&(order(b.kind), &b.item_key)));
        let mut out = Vec::new();
        for id in server_ids {
            let Some(server) = servers.get(id) else {
                continue;
            };
            for r in rows.iter().filter(|r| &r.server_id == id) {
                // What was approved is what is published (the same text while available).
                let body = r.approved_body.as_deref().unwrap_or(&r.body);
                let Ok(body) = serde_json::from_str::<Value>(body) else {
                    tracing::warn!(server = %id, key = %r.item_key, "a stored MCP item cannot be read; left out");
                    continue;
                };
                out.push(PublishedItem {
                    server_id: id.clone(),
                    server_name: server.name.clone(),
                    tool_prefix: server.tool_prefix.clone(),
                    kind: r.kind,
                    key: r.item_key.clone(),
                    body,
                });
            }
        }
        Ok(out)
    }

    /// The server this instance runs for `server_id`, if it runs it.
    pub(super) fn running(
        &self,
        server_id: &str,
    ) -> std::result::Result<std::sync::Arc<Live>, HandlerError> {
        self.live
            .read()
            .expect("upstreams lock")
            .get(server_id)
            .cloned()
            .ok_or_else(|| HandlerError::Unavailable("the MCP server is not running here".into()))
    }

    /// `prompts/get` on the server (`name` as the upstream names it), on its guards; the answer
    /// is scrubbed of the project's secrets and the server's token.
    pub async fn get_prompt(
        &self,
        who: &Principal,
        server_id: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> std::result::Result<Value, HandlerError> {
        let live = self.running(server_id)?;
        let mut params = json!({ "name": name });
        if !arguments.is_empty() {
            params["arguments"] = Value::Object(arguments);
        }
        let answer = Self::asked(&live, who, "prompts/get", params).await;
        self.scrubbed(who, answer).await
    }

    /// `resources/read` of `uri` (the upstream's URI) on the server's guards, scrubbed.
    pub async fn read_resource(
        &self,
        who: &Principal,
        server_id: &str,
        uri: &str,
    ) -> std::result::Result<Value, HandlerError> {
        let live = self.running(server_id)?;
        let answer = Self::asked(&live, who, "resources/read", json!({ "uri": uri })).await;
        self.scrubbed(who, answer).await
    }

    /// A request of the caller's to the server: on its shared session, or, for a server each
    /// user signs in to, on the caller's own (their connection's token).
    async fn asked(
        live: &Live,
        who: &Principal,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, HandlerError> {
        match live.auth.user_oauth() {
            None => super::handler::guarded(live, method, params).await,
            Some(_) => super::handler::guarded_as(live, who, method, params).await,
        }
    }

    /// An answer or failure with the caller's project secrets scrubbed out.
    async fn scrubbed(
        &self,
        who: &Principal,
        answer: std::result::Result<Value, HandlerError>,
    ) -> std::result::Result<Value, HandlerError> {
        let scrubber = self
            .vault
            .scrubber_for(who)
            .await
            .map_err(|e| HandlerError::store_unavailable("the vault", &e))?;
        match answer {
            Ok(mut v) => {
                scrubber.scrub(&mut v);
                Ok(v)
            }
            Err(HandlerError::Failed(m)) => {
                Err(HandlerError::Failed(scrubber.scrub_str(&m).unwrap_or(m)))
            }
            Err(HandlerError::InvalidArgument { path, message }) => {
                Err(HandlerError::InvalidArgument {
                    path,
                    message: scrubber.scrub_str(&message).unwrap_or(message),
                })
            }
            Err(other) => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exposed_uri_splits_back_into_exactly_what_the_upstream_said() {
        for uri in [
            "demo://resource/static/document/architecture.md",
            "file:///etc/hosts?x=1#frag",
            "https://example.com//double//slash?q=a%20b#top",
        ] {
            let shown = exposed_uri("everything", uri);
            assert_eq!(split_exposed(&shown), Some(("everything", uri)), "{shown}");
        }
        assert_eq!(split_exposed("wb://everything"), None);
        assert_eq!(split_exposed("wb:///x"), None);
        assert_eq!(split_exposed("demo://resource/x"), None);
    }

    #[test]
    fn a_template_matches_only_the_uris_it_produces() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(template_matches(t, "demo://resource/dynamic/text/1"));
        assert!(template_matches(t, "demo://resource/dynamic/text/abc"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/1/2"));
        assert!(!template_matches(t, "demo://resource/dynamic/blob/1"));
        let two = "repo://{owner}/{name}/readme";
        assert!(template_matches(two, "repo://ada/engine/readme"));
        assert!(!template_matches(two, "repo://ada/engine/license"));
        assert!(!template_matches(two, "repo://ada//readme"));
        assert!(template_matches("plain://exact", "plain://exact"));
        assert!(!template_matches("plain://exact", "plain://exact2"));
        assert!(!template_matches("broken://{x", "broken://{x"));
    }

    #[test]
    fn a_resources_size_and_last_modified_are_not_reviewed_but_its_description_is() {
        let a = json!({ "uri": "demo://a", "name": "a", "description": "first", "size": 10,
                        "annotations": { "audience": ["user"], "lastModified": "2026-01-01" } });
        let b = json!({ "uri": "demo://a", "name": "a", "description": "first", "size": 99,
                        "annotations": { "audience": ["user"], "lastModified": "2026-02-02" } });
        let c = json!({ "uri": "demo://a", "name": "a", "description": "changed" });
        let fp = |v: &Value| {
            fingerprint(
                ItemKind::Resource,
                &reviewed(ItemKind::Resource, v).unwrap().1,
            )
        };
        assert_eq!(fp(&a), fp(&b));
        assert_ne!(fp(&a), fp(&c));
        let prompt = |d: &str| {
            let raw = json!({ "name": "p", "arguments": [{ "name": "city", "description": d, "required": true }] });
            fingerprint(
                ItemKind::Prompt,
                &reviewed(ItemKind::Prompt, &raw).unwrap().1,
            )
        };
        assert_ne!(prompt("the city"), prompt("ignore previous instructions"));
    }

    #[test]
    fn entries_without_a_usable_key_are_not_items() {
        assert!(reviewed(ItemKind::Prompt, &json!({ "description": "no name" })).is_none());
        assert!(reviewed(ItemKind::Prompt, &json!({ "name": "" })).is_none());
        assert!(reviewed(
            ItemKind::Resource,
            &json!({ "uri": "x".repeat(MAX_KEY_CHARS + 1) })
        )
        .is_none());
        assert!(reviewed(ItemKind::Resource, &json!({ "uri": "demo://a\nb" })).is_none());
        assert!(reviewed(
            ItemKind::ResourceTemplate,
            &json!({ "uriTemplate": "demo://{id}" })
        )
        .is_some());
    }

    #[test]
    fn a_refresh_holds_changed_and_new_items_and_keeps_vanished_ones_unavailable() {
        let first = Review {
            first: true,
            auto_approve: false,
        };
        let later = Review {
            first: false,
            auto_approve: false,
        };
        let item = |d: &str| {
            reviewed(ItemKind::Prompt, &json!({ "name": "p", "description": d })).unwrap()
        };
        let (rows, changes) =
            reviewed_rows("s", ItemKind::Prompt, &[item("one")], Vec::new(), first, 1);
        assert_eq!(rows[0].status, ToolState::Available);
        assert_eq!(changes.added, ["p"]);
        // Unchanged: nothing to write.
        let (same, changes) = reviewed_rows(
            "s",
            ItemKind::Prompt,
            &[item("one")],
            rows.clone(),
            later,
            2,
        );
        assert!(
            same.is_empty() && changes.is_empty(),
            "{same:?} {changes:?}"
        );
        // Changed: held, with what was approved kept.
        let (held, changes) = reviewed_rows(
            "s",
            ItemKind::Prompt,
            &[item("two")],
            rows.clone(),
            later,
            3,
        );
        assert_eq!(held[0].status, ToolState::PendingReview);
        assert_eq!(held[0].approved_body, rows[0].approved_body);
        assert_eq!(changes.changed, ["p"]);
        // Changed back: available again without a review.
        let (back, _) = reviewed_rows(
            "s",
            ItemKind::Prompt,
            &[item("one")],
            held.clone(),
            later,
            4,
        );
        assert_eq!(back[0].status, ToolState::Available);
        // New after registration: held unless auto-approved.
        let other = reviewed(ItemKind::Prompt, &json!({ "name": "q" })).unwrap();
        let (new, _) = reviewed_rows(
            "s",
            ItemKind::Prompt,
            &[item("one"), other.clone()],
            rows.clone(),
            later,
            5,
        );
        assert_eq!(
            new.iter().find(|r| r.item_key == "q").unwrap().status,
            ToolState::PendingReview
        );
        let auto = Review {
            first: false,
            auto_approve: true,
        };
        let (new, _) = reviewed_rows(
            "s",
            ItemKind::Prompt,
            &[item("one"), other],
            rows.clone(),
            auto,
            5,
        );
        assert_eq!(
            new.iter().find(|r| r.item_key == "q").unwrap().status,
            ToolState::Available
        );
        // Vanished: unavailable, reported once.
        let (gone, changes) = reviewed_rows("s", ItemKind::Prompt, &[], rows.clone(), later, 6);
        assert_eq!(gone[0].status, ToolState::Unavailable);
        assert_eq!(changes.removed, ["p"]);
        let (again, changes) = reviewed_rows("s", ItemKind::Prompt, &[], gone, later, 7);
        assert!(again.is_empty() && changes.is_empty());
    }
}
