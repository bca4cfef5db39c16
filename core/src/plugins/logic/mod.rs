//! The Rust escape hatch: tools whose definition names a `handler` instead of a request run
//! here, with the same request helpers (credential injection, refresh, shaping). One module per
//! provider; this one knows the names.

mod google;
mod hackernews;
mod superset;

use serde_json::Value;

use super::client::Client;
use crate::catalog::{CallContext, HandlerError};
use crate::integrations::definition::RequestDef;

const HANDLERS: &[&str] = &[
    "hackernews_top_stories",
    "google_drive_upload",
    "gmail_send_email",
    "superset_export_csv",
];

pub fn exists(name: &str) -> bool {
    HANDLERS.contains(&name)
}

pub async fn run(
    name: &str,
    tool: &Client,
    ctx: &CallContext<'_>,
    args: Value,
) -> Result<Value, HandlerError> {
    match name {
        "hackernews_top_stories" => hackernews::top_stories(tool, ctx, args).await,
        "google_drive_upload" => google::drive_upload(tool, ctx, args).await,
        "gmail_send_email" => google::gmail_send(tool, ctx, args).await,
        "superset_export_csv" => superset::export_csv(tool, ctx, args).await,
        other => Err(HandlerError::Unavailable(format!(
            "no handler named {other}"
        ))),
    }
}

fn get(path: &str) -> RequestDef {
    RequestDef {
        method: "GET".into(),
        path: path.into(),
        query: Default::default(),
        body: None,
        body_encoding: Default::default(),
        headers: Default::default(),
    }
}
