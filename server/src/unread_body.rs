//! A response sent before the request body was read to its end (a 401 from `/mcp`, a refused
//! or oversized request) says `Connection: close`. hyper cannot reuse such a connection (the
//! rest of the body is still on it) and closes it after the response; without the header a
//! client that pools connections sends its next request into the closing socket and sees
//! "server disconnected" (the official MCP Python SDK did, right after its first 401).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};

/// The request body, noting when it has been read to its end.
struct Tracked {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pub async fn layer(req: Request, next: Next) -> Response {
    // HTTP/2 streams end on their own, and a connection header is not allowed there.
    if req.body().is_end_stream() || req.version() >= axum::http::Version::HTTP_2 {
        return next.run(req).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let req = Request::from_parts(
        parts,
        Body::new(Tracked {
            inner: body,
            ended: ended.clone(),
        }),
    );
    let mut res = next.run(req).await;
    if !ended.load(Ordering::Acquire) {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}
