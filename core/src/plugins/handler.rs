//! The handler behind every plugin and custom-app tool: a declarative request template filled
//! with the validated arguments and sent through the integration's client, or a named Rust
//! handler (logic.rs) for tools that need logic.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::client::Client;
use super::logic;
use crate::catalog::{CallContext, HandlerError, ToolHandler};
use crate::integrations::{request, Integration, ToolDef};

#[derive(Clone)]
pub struct PluginTool {
    client: Client,
    tool: ToolDef,
}

impl PluginTool {
    pub fn new(integration: Arc<Integration>, tool: ToolDef) -> Self {
        PluginTool {
            client: Client { integration },
            tool,
        }
    }
}

#[async_trait]
impl ToolHandler for PluginTool {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        if let Some(name) = &self.tool.handler {
            return logic::run(name, &self.client, ctx, args).await;
        }
        let Some(req) = &self.tool.request else {
            return Err(HandlerError::Unavailable("this tool has no request".into()));
        };
        let base = self.client.integration.base_url.clone();
        let filled = request::with_end_user(&args, ctx.end_user_id);
        let reply = self
            .client
            .send_authorized(ctx, || request::prepare(&base, req, &filled))
            .await?;
        let rule = self.tool.result.as_ref();
        if let Some(field) = rule.and_then(|r| r.text_as.as_deref()) {
            return Ok(json!({ field: self.client.text_of(reply)? }));
        }
        let link = reply.link.clone();
        let body = self.client.body_of(reply)?;
        request::shape(
            &self.client.integration.def.display_name,
            rule,
            body,
            link.as_deref(),
            &args,
        )
    }
}
