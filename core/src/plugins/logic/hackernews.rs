//! Hacker News lists ids only: `hackernews_top_stories` reads the list, then the items of one
//! page of it.

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::get;
use crate::catalog::{CallContext, HandlerError};
use crate::integrations::request;
use crate::plugins::client::Client;

/// The ids of one page of a story list: `limit` of them from `offset`, and the offset of the next
/// page while the list goes on.
fn page_of(ids: &[u64], offset: usize, limit: usize) -> (&[u64], Option<usize>) {
    let start = offset.min(ids.len());
    let end = start.saturating_add(limit).min(ids.len());
    (&ids[start..end], (end < ids.len()).then_some(end))
}

/// Hacker News lists ids only; fetch one page of `limit` items from `offset` (8 at a time), keep
/// the fields an agent reads and answer where the next page starts, like `result.next` does.
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
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let list = args.get("list").and_then(Value::as_str).unwrap_or("top");
    let base = tool.integration.base_url.clone();
    let ids_path = format!("/v0/{list}stories.json");
    let ids = tool.body_of(
        tool.send_authorized(ctx, || request::prepare(&base, &get(&ids_path), &args))
            .await?,
    )?;
    let ids: Vec<u64> = ids
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let (ids, next) = page_of(&ids, offset, limit);
    let items = stream::iter(ids.iter().copied())
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
    Ok(json!({ "items": stories?, "next_page": next }))
}

#[cfg(test)]
mod tests {
    use super::page_of;

    #[test]
    fn a_page_of_the_list_says_where_the_next_one_starts() {
        let ids: Vec<u64> = (1..=5).collect();
        assert_eq!(page_of(&ids, 0, 2), (&ids[0..2], Some(2)));
        assert_eq!(page_of(&ids, 2, 2), (&ids[2..4], Some(4)));
        assert_eq!(
            page_of(&ids, 4, 2),
            (&ids[4..5], None),
            "the list ends here"
        );
        assert_eq!(
            page_of(&ids, 3, 2),
            (&ids[3..5], None),
            "a page that reaches the end"
        );
        assert_eq!(page_of(&ids, 9, 2), (&ids[5..5], None), "past the end");
    }
}
