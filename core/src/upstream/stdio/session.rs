//! One MCP session with a stdio server's process: newline-delimited JSON-RPC on its stdin and
//! stdout (the MCP stdio transport), answers matched to requests by id, the server's `ping`
//! answered, its requests and progress handed to the call they belong to (`exchange`),
//! `notifications/tools/list_changed` passed on. Output that is not JSON-RPC, or a
//! line longer than `MAX_ANSWER_BYTES`, ends the session with a clear reason (never a hang or
//! unbounded memory). stderr is read line by line, scrubbed of the project's secrets, logged
//! at a bounded rate and kept as the last lines for the registry view.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::catalog::ClientRelay;
use crate::upstream::client::{is_notice, OnToolsChanged, RpcError, MAX_ANSWER_BYTES};
use crate::upstream::exchange::{request_on, SharedStream, Waiters};
use crate::vault::Scrubber;

/// How long a process that closed its stdout is given to finish writing its stderr.
const STDERR_GRACE: std::time::Duration = std::time::Duration::from_secs(1);
/// stderr lines kept for the registry view.
pub const STDERR_TAIL: usize = 50;
/// Longest stderr line kept (longer ones are cut).
const STDERR_LINE: usize = 2_000;
/// stderr lines logged per window; the rest are counted.
const STDERR_LOGGED: u32 = 50;
const STDERR_WINDOW: Duration = Duration::from_secs(10);

/// The last stderr lines of a server's processes (shared with its supervisor).
pub type Tail = Arc<Mutex<VecDeque<String>>>;

type Stdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

pub struct StdioSession {
    stdin: Stdin,
    waiters: Arc<Waiters>,
    next_id: AtomicU64,
    /// Why the session ended, once it has.
    ended: Arc<Mutex<Option<String>>>,
    reader: tokio::task::JoinHandle<()>,
    /// What the server's initialize answer said it offers (set by the supervisor).
    pub capabilities: std::sync::OnceLock<Value>,
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl StdioSession {
    /// Starts reading the process's stdout (answers) and stderr (into `tail` and the log).
    pub fn start(
        server: &str,
        stdin: ChildStdin,
        stdout: ChildStdout,
        stderr: ChildStderr,
        scrubber: Scrubber,
        tail: Tail,
        on_changed: OnToolsChanged,
    ) -> Arc<StdioSession> {
        let waiters: Arc<Waiters> = Arc::default();
        let ended: Arc<Mutex<Option<String>>> = Arc::default();
        let stderr_read = tokio::spawn(read_stderr(server.to_owned(), stderr, scrubber, tail));
        let stdin: Stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        Arc::new(StdioSession {
            stdin: stdin.clone(),
            waiters: waiters.clone(),
            next_id: AtomicU64::new(1),
            capabilities: std::sync::OnceLock::new(),
            ended: ended.clone(),
            reader: tokio::spawn(read_stdout(
                stdout,
                stdin,
                waiters,
                ended,
                on_changed,
                stderr_read,
            )),
        })
    }

    /// Why the session ended, if it has.
    pub fn ended(&self) -> Option<String> {
        self.ended.lock().expect("ended lock").clone()
    }

    /// Closes the process's stdin (the MCP way to ask a stdio server to exit).
    pub async fn close_stdin(&self) {
        self.stdin.lock().await.take();
    }

    async fn write(&self, message: &Value) -> Result<(), RpcError> {
        write(&self.stdin, message).await
    }

    pub async fn notify(&self, method: &str) -> Result<(), RpcError> {
        self.write(&json!({ "jsonrpc": "2.0", "method": method }))
            .await
    }

    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        self.request_relayed(method, params, timeout, None).await
    }

    /// A request and its result, with what the server asks meanwhile relayed
    /// (`exchange::request_on`).
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        request_on(self, method, params, timeout, relay).await
    }
}

impl SharedStream for StdioSession {
    fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn gone(&self) -> Option<RpcError> {
        self.ended().map(RpcError::NotSent)
    }

    async fn send(&self, message: &Value) -> Result<(), RpcError> {
        write(&self.stdin, message).await
    }

    fn send_later(&self, message: Value) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let stdin = self.stdin.clone();
        rt.spawn(async move {
            let _ = write(&stdin, &message).await;
        });
    }
}

async fn write(stdin: &Stdin, message: &Value) -> Result<(), RpcError> {
    let mut line = serde_json::to_vec(message).map_err(|e| RpcError::Protocol(e.to_string()))?;
    line.push(b'\n');
    let mut stdin = stdin.lock().await;
    let Some(w) = stdin.as_mut() else {
        return Err(RpcError::NotSent("the server's stdin is closed".into()));
    };
    let written = match w.write_all(&line).await {
        Ok(()) => w.flush().await,
        Err(e) => Err(e),
    };
    written.map_err(|e| RpcError::NotSent(format!("cannot write to the server process: {e}")))
}

/// Reads one line of at most `limit` bytes (without the newline); `Ok(None)` at EOF.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut tokio::io::BufReader<R>,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                None
            } else {
                Some(too_long)
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = limit.saturating_sub(buf.len());
        let body = if done { take - 1 } else { take };
        if body > room {
            too_long = true;
            buf.extend_from_slice(&chunk[..room]);
        } else {
            buf.extend_from_slice(&chunk[..body]);
        }
        r.consume(take);
        if done {
            return Ok(Some(too_long));
        }
    }
}

async fn read_stdout(
    stdout: ChildStdout,
    stdin: Stdin,
    waiters: Arc<Waiters>,
    ended: Arc<Mutex<Option<String>>>,
    on_changed: OnToolsChanged,
    stderr_read: tokio::task::JoinHandle<()>,
) {
    let mut r = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let why = loop {
        match read_line(&mut r, &mut line, MAX_ANSWER_BYTES).await {
            Err(e) => break format!("reading the server's stdout failed: {e}"),
            Ok(None) => {
                // A process that closes stdout is most often exiting, with why on stderr: let
                // that be read (briefly) before anyone is told it ended, so the line is there.
                let _ = tokio::time::timeout(STDERR_GRACE, stderr_read).await;
                break "the server process closed its stdout".to_owned();
            }
            Ok(Some(true)) => {
                break format!(
                    "the server wrote a line of more than {MAX_ANSWER_BYTES} bytes on stdout; the process was stopped"
                )
            }
            Ok(Some(false)) => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            break "the server wrote a line that is not JSON-RPC on stdout (stdout is for MCP messages only; logs belong on stderr); the process was stopped".to_owned();
        };
        if is_notice(&message) {
            on_changed(&message);
        }
        // Answers go to their requests, and so does what the server sends during one; `ping`,
        // and a request that belongs to no call workbench can tell, are answered here.
        if let Some(reply) = waiters.route(message) {
            let _ = write(&stdin, &reply).await;
        }
    };
    *ended.lock().expect("ended lock") = Some(why.clone());
    waiters.fail_all(&why);
}

async fn read_stderr(server: String, stderr: ChildStderr, scrubber: Scrubber, tail: Tail) {
    let mut r = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    let mut window = tokio::time::Instant::now();
    let (mut logged, mut dropped) = (0u32, 0u64);
    while let Ok(Some(_)) = read_line(&mut r, &mut line, STDERR_LINE).await {
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text.is_empty() {
            continue;
        }
        let clean = scrubber.scrub_str(text).unwrap_or_else(|| text.to_owned());
        {
            let mut t = tail.lock().expect("tail lock");
            if t.len() >= STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(clean.clone());
        }
        if window.elapsed() >= STDERR_WINDOW {
            if dropped > 0 {
                tracing::warn!(server = %server, dropped, "stdio server stderr lines not logged (rate limit)");
            }
            window = tokio::time::Instant::now();
            (logged, dropped) = (0, 0);
        }
        if logged < STDERR_LOGGED {
            logged += 1;
            tracing::info!(server = %server, stderr = %clean, "stdio server");
        } else {
            dropped += 1;
        }
    }
}
