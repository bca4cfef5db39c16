//! Resource subscriptions passed through to upstream servers (issue 33): a client of a set
//! subscribing to one of its resources subscribes workbench to it at the server
//! (`resources/subscribe`), once per server and URI however many clients want it (counted; the
//! last one to let go unsubscribes), again on every new session with the server; each
//! `notifications/resources/updated` the server sends is broadcast (`Upstreams::updates`), and
//! set endpoints tell the clients that subscribed. Only servers that offer subscriptions
//! (`resources.subscribe` in their initialize answer) are asked, and not servers each user
//! signs in to (one subscription would need a session per user). Subscriptions live on the
//! instance holding the client's session; a server replaced by new settings is subscribed to
//! again by clients that subscribe again.

use std::sync::Arc;

use serde_json::json;

use super::connection::offers_subscriptions;
use super::live::Live;
use super::Upstreams;
use crate::catalog::HandlerError;

/// A server said a resource changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUpdated {
    pub project_id: String,
    pub server_id: String,
    /// The server's own URI.
    pub uri: String,
}

/// How many updates a slow listener may fall behind before older ones are dropped for it.
pub(super) const UPDATE_BACKLOG: usize = 1024;

/// One subscription to a server's resource; dropping it lets go of it (the last one to let
/// go unsubscribes at the server).
pub struct Subscription {
    live: Arc<Live>,
    pub server_id: String,
    /// The server's own URI.
    pub uri: String,
}

impl Subscription {
    /// Whether `update` is about this subscription's resource.
    pub fn hears(&self, update: &ResourceUpdated) -> bool {
        update.server_id == self.server_id && update.uri == self.uri
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut counts = self.live.subscribed.lock().expect("subscribed lock");
            match counts.get_mut(&self.uri) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    counts.remove(&self.uri);
                    true
                }
                None => false,
            }
        };
        if !last {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (live, uri) = (self.live.clone(), self.uri.clone());
        rt.spawn(async move {
            let timeout = live.timeout;
            if let Err(e) = live
                .request("resources/unsubscribe", json!({ "uri": uri }), timeout)
                .await
            {
                tracing::debug!(server = %live.name, error = %e, "unsubscribing from a resource failed");
            }
        });
    }
}

impl Upstreams {
    /// Every resource update a server of any project sends from now on.
    pub fn updates(&self) -> tokio::sync::broadcast::Receiver<ResourceUpdated> {
        self.updates.subscribe()
    }

    /// Subscribes to `uri` (the server's own URI) at the server `server_id`, unless this
    /// instance already is. A server that does not offer subscriptions is an invalid request;
    /// one that cannot be reached fails as its tools would.
    pub async fn subscribe(
        &self,
        server_id: &str,
        uri: &str,
    ) -> std::result::Result<Subscription, HandlerError> {
        let live = self.running(server_id)?;
        if live.auth.user_oauth().is_some() {
            return Err(HandlerError::invalid(
                "uri",
                format!(
                    "resource subscriptions are not offered for {}, a server each user signs in to",
                    live.name
                ),
            ));
        }
        let capabilities = live
            .capabilities()
            .await
            .map_err(|e| HandlerError::Unavailable(format!("{}: {e}", live.name)))?;
        if !offers_subscriptions(&capabilities) {
            return Err(HandlerError::invalid(
                "uri",
                format!(
                    "the MCP server {} does not offer resource subscriptions",
                    live.name
                ),
            ));
        }
        let first = {
            let mut counts = live.subscribed.lock().expect("subscribed lock");
            let n = counts.entry(uri.to_owned()).or_insert(0);
            *n += 1;
            *n == 1
        };
        let subscription = Subscription {
            live: live.clone(),
            server_id: server_id.to_owned(),
            uri: uri.to_owned(),
        };
        if first {
            // A failure drops `subscription`, which takes the count back.
            super::handler::guarded(&live, "resources/subscribe", json!({ "uri": uri })).await?;
        }
        Ok(subscription)
    }
}
