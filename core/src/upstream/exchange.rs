//! One request's conversation with an upstream server, the same over every transport: while
//! its answer is awaited, what the server sends that belongs to it is handled. The server's own
//! requests (`elicitation/create`, `sampling/createMessage`) go to the calling client through
//! the call's relay, several at once if need be, and each answer goes back upstream; progress
//! reaches the client; a request the server cancels (`notifications/cancelled`) is given up at
//! the client. Over streamable HTTP what belongs to a request arrives on its own event stream;
//! over HTTP+SSE and stdio every message shares one stream, and `Waiters` routes each to its
//! request: answers by id, progress by the request's progress token, and a server's request to
//! the one request in flight (these transports do not say which request it is part of, so with
//! none or several in flight it is refused rather than shown to the wrong person).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use futures::stream::{AbortHandle, Abortable, FuturesUnordered, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::rpc_error::RpcError;
use crate::catalog::ClientRelay;

/// What reaches a waiting request: its answer (the whole JSON-RPC message), or a message of
/// the server's that belongs to it.
#[derive(Debug)]
pub(super) enum Routed {
    Answer(Result<Value, RpcError>),
    Server(Value),
}

/// The key a JSON-RPC id is compared by (numbers and strings alike).
fn key(id: &Value) -> String {
    id.to_string()
}

/// Waits for the answer the channel brings, handling the server's messages meanwhile; `reply`
/// sends a JSON-RPC answer to the server. Requests of the server's still open when the answer
/// arrives are given up (dropping them cancels them at the client).
pub(super) async fn converse<F, Fut>(
    rx: &mut mpsc::UnboundedReceiver<Routed>,
    relay: Option<&dyn ClientRelay>,
    reply: F,
) -> Result<Value, RpcError>
where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut asking = FuturesUnordered::new();
    let mut handles: HashMap<String, AbortHandle> = HashMap::new();
    loop {
        tokio::select! {
            message = rx.recv() => match message {
                None => {
                    return Err(RpcError::Transport(
                        "the connection ended before the answer".into(),
                    ))
                }
                Some(Routed::Answer(answer)) => return answer,
                Some(Routed::Server(v)) => {
                    let method = v.get("method").and_then(Value::as_str).unwrap_or_default();
                    match v.get("id").filter(|id| !id.is_null()) {
                        Some(id) => {
                            let id = key(id);
                            let (handle, registration) = AbortHandle::new_pair();
                            handles.insert(id.clone(), handle);
                            asking.push(Abortable::new(
                                async move { (id, server_request(&v, relay).await) },
                                registration,
                            ));
                        }
                        None if method == "notifications/progress" => {
                            if let Some(r) = relay {
                                let p = &v["params"];
                                if let Some(progress) = p.get("progress").and_then(Value::as_f64) {
                                    let total = p.get("total").and_then(Value::as_f64);
                                    let message =
                                        p.get("message").and_then(Value::as_str).map(str::to_owned);
                                    r.progress(progress, total, message).await;
                                }
                            }
                        }
                        None if method == "notifications/cancelled" => {
                            if let Some(h) = v
                                .pointer("/params/requestId")
                                .and_then(|id| handles.remove(&key(id)))
                            {
                                h.abort();
                            }
                        }
                        None => {}
                    }
                }
            },
            Some(done) = asking.next(), if !asking.is_empty() => {
                // An aborted one was cancelled by the server itself: it wants no answer.
                if let Ok((id, answer)) = done {
                    handles.remove(&id);
                    reply(answer).await;
                }
            }
        }
    }
}

/// How workbench answers a server's own request: `ping` itself; `elicitation/create` and
/// `sampling/createMessage` by the MCP client the call came from, when it declared the
/// capability; anything else, or a client that cannot answer, with -32601.
async fn server_request(v: &Value, relay: Option<&dyn ClientRelay>) -> Value {
    let id = v.get("id").cloned().unwrap_or(Value::Null);
    let method = v.get("method").and_then(Value::as_str).unwrap_or_default();
    let error = |code: i64, message: String| json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    let capability = match method {
        "ping" => return json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        other => {
            return error(
                -32601,
                format!("workbench does not pass {other} on to MCP clients"),
            )
        }
    };
    match relay {
        Some(r) if r.supports(capability) => {
            let params = v.get("params").cloned().unwrap_or(Value::Null);
            match r.request(method, params).await {
                Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
                Err((code, message)) => error(code, message),
            }
        }
        _ => error(
            -32601,
            format!("the MCP client that made this call does not support {capability}"),
        ),
    }
}

/// The answer to a request of the server's that belongs to no call (sent on the standalone
/// stream): `ping` is answered, anything else refused, since there is nobody to ask. None for
/// what is not a request.
pub(super) fn outside_a_call(v: &Value) -> Option<Value> {
    let id = v.get("id").filter(|id| !id.is_null())?;
    let method = v.get("method").and_then(Value::as_str)?;
    Some(match method {
        "ping" => json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
        other => json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601,
            "message": format!("workbench passes {other} on to MCP clients only during a call") } }),
    })
}

/// A request waiting on a shared stream.
struct Waiter {
    tx: mpsc::UnboundedSender<Routed>,
    /// The `_meta.progressToken` it was sent with, if any.
    progress: Option<String>,
    /// The server's requests handed to it (their ids), so a cancellation finds it.
    asked: HashSet<String>,
}

/// The requests waiting on one shared stream (HTTP+SSE, stdio), and where each message of the
/// server's goes.
#[derive(Default)]
pub(super) struct Waiters {
    map: Mutex<HashMap<u64, Waiter>>,
}

impl Waiters {
    /// Registers request `id` (sent with `params`) and gives the channel its messages arrive on.
    pub fn add(&self, id: u64, params: &Value) -> mpsc::UnboundedReceiver<Routed> {
        let (tx, rx) = mpsc::unbounded_channel();
        let progress = params.pointer("/_meta/progressToken").map(key);
        self.map.lock().expect("waiters lock").insert(
            id,
            Waiter {
                tx,
                progress,
                asked: HashSet::new(),
            },
        );
        rx
    }

    /// Forgets request `id` (answered, given up, or never sent).
    pub fn remove(&self, id: u64) {
        self.map.lock().expect("waiters lock").remove(&id);
    }

    /// Hands a message of the server's to the request it belongs to. What must be answered
    /// now is returned: `ping`, and a request of the server's that cannot be told apart by
    /// request (none or several in flight), refused.
    pub fn route(&self, v: Value) -> Option<Value> {
        let mut map = self.map.lock().expect("waiters lock");
        let method = v.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = v.get("id").filter(|id| !id.is_null()).cloned();
        match (method.as_deref(), id) {
            // An answer.
            (None, Some(id)) => {
                if let Some(w) = id.as_u64().and_then(|id| map.remove(&id)) {
                    let _ = w.tx.send(Routed::Answer(Ok(v)));
                }
                None
            }
            (Some("ping"), Some(id)) => Some(json!({ "jsonrpc": "2.0", "id": id, "result": {} })),
            // A request of the server's: it can only be the one request in flight's.
            (Some(method), Some(id)) => {
                if map.len() == 1 {
                    let w = map.values_mut().next().expect("one waiter");
                    w.asked.insert(key(&id));
                    if w.tx.send(Routed::Server(v)).is_ok() {
                        return None;
                    }
                }
                let why = match map.len() {
                    0 => "no call is in flight".to_owned(),
                    n => format!("{n} calls are in flight on this connection"),
                };
                Some(
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601,
                    "message": format!("workbench cannot tell which call {method} belongs to ({why}), so it cannot pass it on") } }),
                )
            }
            (Some("notifications/progress"), None) => {
                let token = v.pointer("/params/progressToken").map(key)?;
                if let Some(w) = map.values().find(|w| w.progress.as_ref() == Some(&token)) {
                    let _ = w.tx.send(Routed::Server(v));
                }
                None
            }
            (Some("notifications/cancelled"), None) => {
                let asked = v.pointer("/params/requestId").map(key)?;
                if let Some(w) = map.values().find(|w| w.asked.contains(&asked)) {
                    let _ = w.tx.send(Routed::Server(v));
                }
                None
            }
            _ => None,
        }
    }

    /// The stream ended: every waiting request fails with `why`.
    pub fn fail_all(&self, why: &str) {
        for (_, w) in self.map.lock().expect("waiters lock").drain() {
            let _ =
                w.tx.send(Routed::Answer(Err(RpcError::Transport(why.to_owned()))));
        }
    }
}

/// A transport whose messages all share one stream (HTTP+SSE, stdio), as `request_on` needs it.
pub(super) trait SharedStream: Sync {
    fn waiters(&self) -> &Waiters;
    /// The next JSON-RPC id of workbench's requests.
    fn next_id(&self) -> u64;
    /// Why nothing can be sent any more, once the stream ended.
    fn gone(&self) -> Option<RpcError>;
    /// Sends one message to the server.
    fn send(
        &self,
        message: &Value,
    ) -> impl std::future::Future<Output = Result<(), RpcError>> + Send;
    /// Sends one message to the server without waiting (from a destructor).
    fn send_later(&self, message: Value);
}

/// A request on a shared stream and its result; what the server asks meanwhile, when this is
/// the only request in flight, goes to `relay`, and so does its progress (`Waiters::route`).
/// A request given up before its answer (the caller cancelled, or timed out) is cancelled at
/// the server.
pub(super) async fn request_on<S: SharedStream>(
    stream: &S,
    method: &str,
    params: Value,
    timeout: std::time::Duration,
    relay: Option<&dyn ClientRelay>,
) -> Result<Value, RpcError> {
    let id = stream.next_id();
    let mut rx = stream.waiters().add(id, &params);
    let mut outstanding = Outstanding {
        stream,
        id,
        armed: false,
    };
    // Checked after waiting is registered: a stream that ends from here on fails it.
    if let Some(e) = stream.gone() {
        return Err(e);
    }
    let started = tokio::time::Instant::now();
    stream
        .send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
        .await?;
    outstanding.armed = method != "initialize";
    let talk = converse(&mut rx, relay, |v| async move {
        let _ = stream.send(&v).await;
    });
    let answer = tokio::time::timeout(timeout.saturating_sub(started.elapsed()), talk)
        .await
        .map_err(|_| RpcError::Timeout(timeout.as_millis() as u64))?;
    outstanding.armed = false;
    super::rpc_error::answer_of(answer?)
}

/// A request sent and not yet answered: dropped so (the caller gave up: cancelled, or timed
/// out), the server is told `notifications/cancelled` so it can stop working on it.
struct Outstanding<'a, S: SharedStream> {
    stream: &'a S,
    id: u64,
    armed: bool,
}

impl<S: SharedStream> Drop for Outstanding<'_, S> {
    fn drop(&mut self) {
        self.stream.waiters().remove(self.id);
        if self.armed {
            self.stream.send_later(
                json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": { "requestId": self.id, "reason": "the caller gave up on the call" } }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_go_by_id_and_progress_by_token() {
        let w = Waiters::default();
        let mut one = w.add(1, &json!({ "_meta": { "progressToken": "call_a" } }));
        let mut two = w.add(2, &json!({ "_meta": { "progressToken": 7 } }));
        assert!(w
            .route(json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": 7, "progress": 1 } }))
            .is_none());
        assert!(matches!(two.try_recv(), Ok(Routed::Server(_))));
        assert!(
            one.try_recv().is_err(),
            "progress went to its own request only"
        );
        w.route(json!({ "jsonrpc": "2.0", "id": 1, "result": { "ok": true } }));
        match one.try_recv() {
            Ok(Routed::Answer(Ok(v))) => assert_eq!(v["result"]["ok"], true),
            other => panic!("{other:?}"),
        }
        assert!(two.try_recv().is_err());
    }

    #[test]
    fn a_servers_request_goes_to_the_one_request_in_flight_and_is_refused_otherwise() {
        let w = Waiters::default();
        let ask =
            json!({ "jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": {} });
        let refused = w
            .route(ask.clone())
            .expect("refused with nothing in flight");
        assert_eq!(refused["error"]["code"], -32601);
        assert_eq!(refused["id"], "s1");

        let mut one = w.add(1, &json!({}));
        assert!(w.route(ask.clone()).is_none());
        assert!(matches!(one.try_recv(), Ok(Routed::Server(_))));
        // Its cancellation follows it.
        w.route(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "s1" } }));
        assert!(
            matches!(one.try_recv(), Ok(Routed::Server(v)) if v["method"] == "notifications/cancelled")
        );

        let _two = w.add(2, &json!({}));
        let refused = w.route(ask).expect("ambiguous with two in flight");
        assert!(refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 calls are in flight"));
        assert!(one.try_recv().is_err(), "not guessed");

        let pong = w
            .route(json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }))
            .unwrap();
        assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": 9, "result": {} }));
    }

    #[test]
    fn a_stream_that_ends_fails_every_waiting_request() {
        let w = Waiters::default();
        let mut one = w.add(1, &json!({}));
        w.fail_all("gone");
        assert!(
            matches!(one.try_recv(), Ok(Routed::Answer(Err(RpcError::Transport(m)))) if m == "gone")
        );
    }

    /// A relay that answers after it is told to, and records what it was asked.
    struct Slow(tokio::sync::Notify, Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl ClientRelay for Slow {
        fn supports(&self, _: &str) -> bool {
            true
        }
        async fn request(&self, method: &str, _: Value) -> Result<Value, (i64, String)> {
            self.1.lock().unwrap().push(method.to_owned());
            self.0.notified().await;
            Ok(json!({ "action": "accept" }))
        }
        async fn progress(&self, p: f64, _: Option<f64>, _: Option<String>) {
            self.1.lock().unwrap().push(format!("progress {p}"));
        }
    }

    #[tokio::test]
    async fn a_request_the_server_cancels_gets_no_answer_and_the_call_goes_on() {
        let relay = Slow(tokio::sync::Notify::new(), Mutex::new(vec![]));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let replies = Mutex::new(Vec::<Value>::new());
        tx.send(Routed::Server(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {} }),
        ))
        .unwrap();
        tx.send(Routed::Server(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage", "params": {} }),
        ))
        .unwrap();
        let talk = converse(&mut rx, Some(&relay), |v| {
            replies.lock().unwrap().push(v);
            async {}
        });
        let drive = async {
            tokio::task::yield_now().await;
            tx.send(Routed::Server(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } })))
                .unwrap();
            tx.send(Routed::Server(json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": { "progressToken": "t", "progress": 0.5 } })))
                .unwrap();
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            relay.0.notify_waiters();
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            tx.send(Routed::Answer(Ok(
                json!({ "jsonrpc": "2.0", "id": 5, "result": {} }),
            )))
            .unwrap();
        };
        let (answer, ()) = tokio::join!(talk, drive);
        assert_eq!(answer.unwrap()["id"], 5);
        let replies = replies.into_inner().unwrap();
        assert_eq!(
            replies.len(),
            1,
            "only the request still wanted is answered: {replies:?}"
        );
        assert_eq!(replies[0]["id"], 2);
        assert_eq!(replies[0]["result"]["action"], "accept");
        let asked = relay.1.into_inner().unwrap();
        assert_eq!(
            asked,
            [
                "elicitation/create",
                "sampling/createMessage",
                "progress 0.5"
            ],
            "both were asked at once, and progress went on meanwhile"
        );
    }
}
