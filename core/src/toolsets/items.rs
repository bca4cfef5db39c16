//! What a tool set publishes besides its tools (issue 33): when the set says so, the approved
//! prompts, resources and resource templates of the MCP servers whose tools it lists, each
//! under its server's prefix (`<prefix><prompt>`, `wb://<server>/<uri>`) and each decided by
//! the caller's policy (`prompt:<prefix><name>`, `resource:<prefix><uri>`). Getting a prompt or
//! reading a resource runs on the server's breaker and semaphore, is scrubbed of the project's
//! secrets, capped, and audited with the set; anything not published is "not found".

use std::time::Instant;

use serde_json::{Map, Value};

use super::{ToolSet, ToolSets};
use crate::audit::ItemEvent;
use crate::auth::Principal;
use crate::catalog::{HandlerError, ToolSource};
use crate::store::audit::AuditStatus;
use crate::upstream::{
    exposed_uri, split_exposed, template_matches, ItemKind, PublishedItem, Subscription,
};
use crate::Result;

/// Characters of a prompt's answer as JSON, at most (D6's cap on what reaches an agent).
pub const MAX_PROMPT_CHARS: usize = 60_000;
/// Bytes of a resource read's answer as JSON, at most.
pub const MAX_READ_BYTES: usize = 4 * 1024 * 1024;
/// Characters of a prompt's arguments as JSON, at most.
const MAX_ARGUMENT_CHARS: usize = 16 * 1024;

/// Why a prompt or resource cannot be given.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemError {
    /// The set publishes no such prompt or resource.
    NotFound,
    /// The caller's policy does not allow it (surfaces answer as for `NotFound`, D2).
    Denied,
    /// What the caller sent cannot be used.
    Invalid(String),
    /// The server failed, timed out or is unavailable (the reason is scrubbed).
    Failed(HandlerError),
    /// The answer is larger than the cap.
    TooLarge { limit: usize },
}

impl ItemError {
    /// The audit row's error code.
    fn code(&self) -> &'static str {
        match self {
            ItemError::NotFound => "NOT_FOUND",
            ItemError::Denied => "NOT_ALLOWED",
            ItemError::Invalid(_) => "INVALID_ARGUMENTS",
            ItemError::TooLarge { .. } => "RESULT_TOO_LARGE",
            ItemError::Failed(HandlerError::Timeout { .. }) => "TIMEOUT",
            ItemError::Failed(HandlerError::InvalidArgument { .. }) => "INVALID_ARGUMENTS",
            ItemError::Failed(HandlerError::Failed(_)) => "TOOL_ERROR",
            ItemError::Failed(_) => "UNAVAILABLE",
        }
    }
}

/// What a set publishes for one caller, of one kind, as MCP lists it (names and URIs
/// rewritten).
fn listed(items: &[PublishedItem], kind: ItemKind) -> Vec<Value> {
    items
        .iter()
        .filter(|i| i.kind == kind)
        .map(|i| {
            let mut body = i.body.clone();
            match kind {
                ItemKind::Prompt => body["name"] = Value::String(i.exposed()),
                ItemKind::Resource => body["uri"] = Value::String(i.exposed()),
                ItemKind::ResourceTemplate => body["uriTemplate"] = Value::String(i.exposed()),
            }
            // The listed name carries the prefix too, so clients that show names tell
            // servers apart.
            if kind != ItemKind::Prompt {
                let name = body
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&i.key)
                    .to_owned();
                body["name"] = Value::String(format!("{}{name}", i.tool_prefix));
            }
            body
        })
        .collect()
}

/// Rewrites the upstream URIs in a prompt's messages or a read's contents to the set's own
/// (`wb://<server>/<uri>`), so a client reads them back through the set.
fn rewrite_uris(v: &mut Value, server: &str) {
    match v {
        Value::Object(m) => {
            let is_resource =
                matches!(m.get("type").and_then(Value::as_str), Some("resource_link"))
                    || m.contains_key("text")
                    || m.contains_key("blob");
            if is_resource {
                if let Some(Value::String(uri)) = m.get_mut("uri") {
                    *uri = exposed_uri(server, uri);
                }
            }
            for (k, child) in m.iter_mut() {
                if k != "uri" {
                    rewrite_uris(child, server);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| rewrite_uris(c, server)),
        _ => {}
    }
}

impl ToolSets {
    /// The items a set publishes (any caller), servers in the order the set first lists one
    /// of their tools; a prompt name two servers share is the first one's.
    async fn published(&self, who: &Principal, set: &ToolSet) -> Result<Vec<PublishedItem>> {
        if !set.prompts_and_resources {
            return Ok(Vec::new());
        }
        let snapshot = self.engine.snapshot(who);
        let mut servers: Vec<String> = Vec::new();
        for entry in &set.tools {
            if let Some(t) = snapshot.get(&entry.tool) {
                if let ToolSource::Mcp(id) = &t.spec.source {
                    if !servers.contains(id) {
                        servers.push(id.clone());
                    }
                }
            }
        }
        let mut items = self
            .upstreams
            .published_items(&who.project_id, &servers)
            .await?;
        let mut seen = std::collections::HashSet::new();
        items.retain(|i| {
            if i.kind != ItemKind::Prompt {
                return true;
            }
            let name = i.exposed();
            let fits = crate::catalog::ToolName::parse(&name).is_ok();
            fits && seen.insert(name)
        });
        Ok(items)
    }

    /// The published items the caller's policy allows.
    async fn allowed(&self, who: &Principal, set: &ToolSet) -> Result<Vec<PublishedItem>> {
        let items = self.published(who, set).await?;
        let subjects: Vec<String> = items.iter().map(PublishedItem::subject).collect();
        let allows = self.engine.allows(who, &subjects).await?;
        Ok(items
            .into_iter()
            .zip(allows)
            .filter_map(|(i, ok)| ok.then_some(i))
            .collect())
    }

    /// `prompts/list` of a set for `who`.
    pub async fn prompts(&self, who: &Principal, set: &ToolSet) -> Result<Vec<Value>> {
        Ok(listed(&self.allowed(who, set).await?, ItemKind::Prompt))
    }

    /// `resources/list` of a set for `who`.
    pub async fn resources(&self, who: &Principal, set: &ToolSet) -> Result<Vec<Value>> {
        Ok(listed(&self.allowed(who, set).await?, ItemKind::Resource))
    }

    /// `resources/templates/list` of a set for `who`.
    pub async fn resource_templates(&self, who: &Principal, set: &ToolSet) -> Result<Vec<Value>> {
        Ok(listed(
            &self.allowed(who, set).await?,
            ItemKind::ResourceTemplate,
        ))
    }

    /// `prompts/get` through a set: the prompt the set publishes as `name`, from its server,
    /// with the caller's (string) arguments.
    pub async fn get_prompt(
        &self,
        who: &Principal,
        set: &ToolSet,
        name: &str,
        arguments: Map<String, Value>,
    ) -> std::result::Result<Value, ItemError> {
        let items = self.published(who, set).await.map_err(store_failed)?;
        let Some(item) = items
            .into_iter()
            .find(|i| i.kind == ItemKind::Prompt && i.exposed() == name)
        else {
            return Err(ItemError::NotFound);
        };
        let subject = item.subject();
        let mut names: Vec<&str> = arguments.keys().map(String::as_str).collect();
        names.sort();
        let detail = format!("arguments: {}", names.join(", "));
        let started = Instant::now();
        let outcome = self.prompt_answer(who, &item, &subject, arguments).await;
        self.audit_item(who, set, "prompt.get", &subject, &detail, &outcome, started)
            .await;
        outcome
    }

    async fn prompt_answer(
        &self,
        who: &Principal,
        item: &PublishedItem,
        subject: &str,
        arguments: Map<String, Value>,
    ) -> std::result::Result<Value, ItemError> {
        if !self.allows(who, subject).await? {
            return Err(ItemError::Denied);
        }
        if arguments.values().any(|v| !v.is_string()) {
            return Err(ItemError::Invalid(
                "prompt arguments are strings (MCP prompts/get)".into(),
            ));
        }
        if Value::Object(arguments.clone()).to_string().len() > MAX_ARGUMENT_CHARS {
            return Err(ItemError::Invalid(format!(
                "the arguments are longer than {MAX_ARGUMENT_CHARS} characters"
            )));
        }
        let mut answer = self
            .upstreams
            .get_prompt(who, &item.server_id, &item.key, arguments)
            .await
            .map_err(ItemError::Failed)?;
        if answer.to_string().chars().count() > MAX_PROMPT_CHARS {
            return Err(ItemError::TooLarge {
                limit: MAX_PROMPT_CHARS,
            });
        }
        if let Some(messages) = answer.get_mut("messages") {
            rewrite_uris(messages, &item.server_name);
        }
        Ok(answer)
    }

    /// The published resource `uri` (as the set shows it) names, or the template it matches,
    /// with the server's own URI.
    async fn find_resource<'u>(
        &self,
        who: &Principal,
        set: &ToolSet,
        uri: &'u str,
    ) -> std::result::Result<(PublishedItem, &'u str), ItemError> {
        let Some((server, upstream)) = split_exposed(uri) else {
            return Err(ItemError::NotFound);
        };
        let items = self.published(who, set).await.map_err(store_failed)?;
        let found = items
            .iter()
            .position(|i| {
                i.kind == ItemKind::Resource && i.server_name == server && i.key == upstream
            })
            .or_else(|| {
                items.iter().position(|i| {
                    i.kind == ItemKind::ResourceTemplate
                        && i.server_name == server
                        && template_matches(&i.key, upstream)
                })
            });
        match found {
            Some(n) => Ok((items.into_iter().nth(n).expect("found"), upstream)),
            None => Err(ItemError::NotFound),
        }
    }

    /// `resources/read` through a set: `uri` must be a resource the set publishes, or match one
    /// of its templates; the server reads its own URI.
    pub async fn read_resource(
        &self,
        who: &Principal,
        set: &ToolSet,
        uri: &str,
    ) -> std::result::Result<Value, ItemError> {
        let (item, upstream) = self.find_resource(who, set, uri).await?;
        // A read is decided on the URI read (a template's reads on each concrete URI).
        let subject = crate::upstream::subject(ItemKind::Resource, &item.tool_prefix, upstream);
        let started = Instant::now();
        let outcome = self.read_answer(who, &item, &subject, upstream).await;
        self.audit_item(who, set, "resource.read", &subject, uri, &outcome, started)
            .await;
        outcome
    }

    /// `resources/subscribe` through a set: `uri` as for a read, decided by the same policy
    /// subject and audited (`resource.subscribe`); the server must offer subscriptions. The
    /// subscription lasts as long as what is returned.
    pub async fn subscribe(
        &self,
        who: &Principal,
        set: &ToolSet,
        uri: &str,
    ) -> std::result::Result<Subscription, ItemError> {
        let (item, upstream) = self.find_resource(who, set, uri).await?;
        let subject = crate::upstream::subject(ItemKind::Resource, &item.tool_prefix, upstream);
        let started = Instant::now();
        let outcome = match self.allows(who, &subject).await {
            Ok(true) => self
                .upstreams
                .subscribe(&item.server_id, upstream)
                .await
                .map_err(ItemError::Failed),
            Ok(false) => Err(ItemError::Denied),
            Err(e) => Err(e),
        };
        let recorded = outcome.as_ref().map(|_| Value::Null).map_err(Clone::clone);
        self.audit_item(
            who,
            set,
            "resource.subscribe",
            &subject,
            uri,
            &recorded,
            started,
        )
        .await;
        outcome
    }

    async fn read_answer(
        &self,
        who: &Principal,
        item: &PublishedItem,
        subject: &str,
        upstream: &str,
    ) -> std::result::Result<Value, ItemError> {
        if !self.allows(who, subject).await? {
            return Err(ItemError::Denied);
        }
        let mut answer = self
            .upstreams
            .read_resource(who, &item.server_id, upstream)
            .await
            .map_err(ItemError::Failed)?;
        if answer.to_string().len() > MAX_READ_BYTES {
            return Err(ItemError::TooLarge {
                limit: MAX_READ_BYTES,
            });
        }
        if let Some(contents) = answer.get_mut("contents") {
            rewrite_uris(contents, &item.server_name);
        }
        Ok(answer)
    }

    async fn allows(&self, who: &Principal, subject: &str) -> std::result::Result<bool, ItemError> {
        Ok(self
            .engine
            .allows(who, &[subject.to_owned()])
            .await
            .map_err(store_failed)?
            .first()
            .copied()
            .unwrap_or(false))
    }

    #[allow(clippy::too_many_arguments)]
    async fn audit_item(
        &self,
        who: &Principal,
        set: &ToolSet,
        action: &str,
        subject: &str,
        detail: &str,
        outcome: &std::result::Result<Value, ItemError>,
        started: Instant,
    ) {
        let (status, code) = match outcome {
            Ok(_) => (AuditStatus::Succeeded, None),
            Err(ItemError::Denied) => (AuditStatus::Denied, Some("NOT_ALLOWED")),
            Err(e) => (AuditStatus::Failed, Some(e.code())),
        };
        let egress = match outcome {
            Ok(Value::Null) | Err(_) => 0,
            Ok(v) => v.to_string().len() as u64,
        };
        self.audit
            .record_item(&ItemEvent {
                who,
                action,
                subject,
                tool_set: &set.slug,
                status,
                error_code: code,
                detail,
                egress_bytes: egress,
                duration_ms: started.elapsed().as_millis() as u64,
                at_ms: self.clock.now_ms(),
            })
            .await;
    }
}

fn store_failed(e: crate::Error) -> ItemError {
    ItemError::Failed(HandlerError::store_unavailable("workbench's database", &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uris_in_answers_point_back_through_the_set() {
        let mut messages = json!([
            { "role": "user", "content": { "type": "text", "text": "see demo://a" } },
            { "role": "user", "content": { "type": "resource",
                "resource": { "uri": "demo://resource/static/document/a.md", "text": "…" } } },
            { "role": "user", "content": { "type": "resource_link", "uri": "demo://b", "name": "b" } },
        ]);
        rewrite_uris(&mut messages, "everything");
        assert_eq!(
            messages[0]["content"]["text"], "see demo://a",
            "text is not a URI"
        );
        assert_eq!(
            messages[1]["content"]["resource"]["uri"],
            "wb://everything/demo://resource/static/document/a.md"
        );
        assert_eq!(messages[2]["content"]["uri"], "wb://everything/demo://b");
        let mut contents = json!([{ "uri": "demo://c", "mimeType": "text/plain", "text": "x" }]);
        rewrite_uris(&mut contents, "ev");
        assert_eq!(contents[0]["uri"], "wb://ev/demo://c");
    }
}
