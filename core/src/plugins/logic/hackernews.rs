//! Hacker News lists ids only: `hackernews_top_stories` reads the list, then the items.

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::get;
use crate::catalog::{CallContext, HandlerError};
use crate::integrations::request;
use crate::plugins::client::Client;

/// Hacker News lists ids only; fetch the first `limit` items (8 at a time) and keep the fields
/// an agent reads.
pub async fn top_stories(
    tool: &Client,
    ctx: &CallContext<'_>,
    args: Value,
) -> Result<Value, HandlerError> {
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .clamp(1, 30) as usize;
    let list = args.get("list").and_then(Value::as_str).unwrap_or("top");
    let base = tool.integration.base_url.clone();
    let ids_path = format!("/v0/{list}stories.json");
    let ids = tool.body_of(
        tool.send_authorized(ctx, || request::prepare(&base, &get(&ids_path), &args))
            .await?,
    )?;
    let ids: Vec<u64> = ids
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).take(limit).collect())
        .unwrap_or_default();
    let items = stream::iter(ids)
        .map(|id| {
            let base = base.clone();
            async move {
                let path = format!("/v0/item/{id}.json");
                let reply = tool.send_authorized(ctx, || request::prepare(&base, &get(&path), &json!({}))).await?;
                let item = tool.body_of(reply)?;
                Ok::<Value, HandlerError>(json!({
                    "id": item.get("id"), "title": item.get("title"), "url": item.get("url"),
                    "score": item.get("score"), "by": item.get("by"), "comments": item.get("descendants"),
                }))
            }
        })
        .buffered(8)
        .collect::<Vec<_>>()
        .await;
    let stories: Result<Vec<Value>, HandlerError> = items.into_iter().collect();
    Ok(json!({ "stories": stories? }))
}
