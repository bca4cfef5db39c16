//! The MCP client of a session as core's `ClientRelay` (issue 33): what an upstream server asks
//! during a call (`elicitation/create`, `sampling/createMessage`) goes to the client on the
//! call's own event stream and its answer goes back, and the upstream's progress reaches the
//! client when it asked for progress. Only a client in a session can answer (a stateless
//! request has no way back), so for the others there is no relay and the upstream is told the
//! client does not support it. A request the upstream gives up on (it cancels it, or the call
//! ends first) is cancelled at the client too.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    CancelledNotificationParam, CustomRequest, ProgressNotificationParam, ProgressToken, RequestId,
    ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext, ServiceError};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use workbench_core::catalog::ClientRelay;
use workbench_core::engine::Client;

pub struct PeerRelay {
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    /// Cancelled when the client cancels the request.
    cancelled: tokio_util::sync::CancellationToken,
}

impl PeerRelay {
    /// The client that sent this request, when it is in a session (else None).
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Client> {
        let parts = context.extensions.get::<http::request::Parts>()?;
        parts.headers.get(super::sessions::SESSION_HEADER)?;
        Some(Client(Arc::new(PeerRelay {
            peer: context.peer.clone(),
            progress: context.meta.get_progress_token(),
            cancelled: context.ct.clone(),
        })))
    }
}

#[async_trait]
impl ClientRelay for PeerRelay {
    fn supports(&self, capability: &str) -> bool {
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        match capability {
            "elicitation" => info.capabilities.elicitation.is_some(),
            "sampling" => info.capabilities.sampling.is_some(),
            _ => false,
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, (i64, String)> {
        let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let asked = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await;
        let answer = match asked {
            Ok(handle) => {
                let mut withdrawn = Withdrawn {
                    peer: self.peer.clone(),
                    id: Some(handle.id.clone()),
                };
                let answer = handle.await_response().await;
                withdrawn.id = None;
                answer
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(result) => serde_json::to_value(result).map_err(|e| (-32603, e.to_string())),
            Err(ServiceError::McpError(e)) => Err((i64::from(e.code.0), e.message.to_string())),
            Err(e) => Err((-32603, format!("the MCP client did not answer: {e}"))),
        }
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = &self.progress else {
            return;
        };
        let mut p = ProgressNotificationParam::new(token.clone(), progress);
        if let Some(t) = total {
            p = p.with_total(t);
        }
        if let Some(m) = message {
            p = p.with_message(m);
        }
        let _ = self.peer.notify_progress(p).await;
    }

    async fn cancelled(&self) {
        self.cancelled.cancelled().await
    }
}

/// A request to the client that is dropped before its answer (the upstream cancelled it, or
/// the call it belongs to ended): the client is told `notifications/cancelled`, so a form
/// nobody waits for any more is taken down.
struct Withdrawn {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for Withdrawn {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let reason = "the server no longer needs this answer".to_owned();
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason)))
                .await;
        });
    }
}
