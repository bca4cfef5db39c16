//! One request's context as one value, built once (`Engine::scope`) and shared by every
//! execution the request makes: the caller, the call options, one catalog snapshot, the
//! scrubber and policy read for it, and for an approved held call the ids it was held under.
//! `CallScope::run` takes one execution through the whole pipeline (pipeline.rs), then scrubs,
//! caps and records it; REST invoke, a batch, a compose run and an approval all go through it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use tracing::Instrument;

use super::record::{self, Rows};
use super::{
    span, CallOptions, CallOutcome, Engine, Invocation, ToolError, POOL_SIZE, RESULT_CAP_CHARS,
};
use crate::auth::Principal;
use crate::catalog::Snapshot;
use crate::ids::new_id;
use crate::policy::Applied;
use crate::vault::Scrubber;

/// An approved call being run: the ids it was held under.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub tool_call_id: String,
    pub confirmation_id: String,
}

/// What every execution of a request starts from: the scrubber (D7) and the caller's policy
/// (D14), read together once.
pub(super) struct Base {
    pub scrubber: Scrubber,
    pub policy: Applied,
}

/// The context of one request, shared by each of its executions (see the module doc).
pub(super) struct CallScope<'r> {
    pub engine: &'r Engine,
    pub who: &'r Principal,
    /// Timeout, end user, surface, REST ceiling and Idempotency-Key, as every record keeps them.
    pub opts: &'r CallOptions,
    /// The catalog as the request found it: a registration meanwhile never changes it.
    pub snapshot: Arc<Snapshot>,
    /// The scrubber and policy, or why they cannot be read: then every execution is refused
    /// (UNAVAILABLE) and recorded, and nothing runs.
    pub base: Result<Base, ToolError>,
    /// Set when the scope runs an approved held call: the execution finishes the held call's
    /// rows under its ids; the confirmation gate and the rate limit were passed when it was made.
    pub held: Option<Held>,
}

/// What a compose run adds to one execution: the earlier steps' results its `{{step:…}}`
/// references resolve against, and the run's scrubber, which keeps every secret any step used
/// (a compose run is one call: every later result is scrubbed of all of them). A step's result
/// is not capped (D6): the run's answer is.
pub(super) struct Chain<'c> {
    pub results: &'c HashMap<String, Value>,
    pub scrubber: &'c mut Scrubber,
}

/// One execution in flight through the pipeline: what differs between the executions of one
/// scope.
pub(super) struct Execution<'x> {
    pub inv: Invocation,
    /// Earlier compose results (`None`: `{{step:…}}` is not allowed).
    pub results: Option<&'x HashMap<String, Value>>,
    /// The execution's scrubber: secrets it reveals are added as it runs.
    pub scrubber: &'x mut Scrubber,
    pub started_at: i64,
    pub outcome: CallOutcome,
}

impl Engine {
    /// The policy `who` runs under (D14).
    pub async fn policy(&self, who: &Principal) -> std::result::Result<Applied, ToolError> {
        self.policies.applied(who).await.map_err(|e| {
            tracing::error!(error = ?e, "policies cannot be read");
            ToolError::Unavailable {
                reason: "policies cannot be read right now".into(),
            }
        })
    }

    /// What every output of a request by `who` is scrubbed of (D7): every live vault secret
    /// of the project and every credential of the caller's connections. Secrets the request
    /// reveals or stores are added as it runs. Without it nothing may be returned.
    pub async fn scrubber(&self, who: &Principal) -> std::result::Result<Scrubber, ToolError> {
        let unavailable = |e: crate::Error| {
            tracing::error!(error = ?e, "secrets for scrubbing cannot be read");
            ToolError::Unavailable {
                reason: "the vault cannot be read right now".into(),
            }
        };
        let mut s = self.vault.scrubber_for(who).await.map_err(unavailable)?;
        for (name, value) in self
            .connections
            .credential_secrets(who)
            .await
            .map_err(unavailable)?
            .iter()
        {
            s.add(name, value);
        }
        s.prepare();
        Ok(s)
    }

    /// The context of one request by `who`: the catalog snapshot, then the scrubber and the
    /// policy, read at once.
    pub(super) async fn scope<'r>(
        &'r self,
        who: &'r Principal,
        opts: &'r CallOptions,
    ) -> CallScope<'r> {
        let snapshot = self.snapshot(who);
        let (scrubber, policy) = tokio::join!(self.scrubber(who), self.policy(who));
        let base = match (scrubber, policy) {
            (Ok(scrubber), Ok(policy)) => Ok(Base { scrubber, policy }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        CallScope {
            engine: self,
            who,
            opts,
            snapshot,
            base,
            held: None,
        }
    }
}

impl CallScope<'_> {
    /// The scope of running the approved call `held` (`who` is the caller that made it).
    pub fn held(mut self, held: Held) -> Self {
        self.held = Some(held);
        self
    }

    /// Runs one execution through the whole pipeline and records it, in its own
    /// `tool.execute` span (span.rs), which outbound requests take their trace context from.
    /// Alone (`chain` is `None`) it starts from a copy of the request's scrubber and its result
    /// is capped (D6); as a compose step it resolves `{{step:…}}` against the earlier results
    /// and adds the secrets it reveals to the run's scrubber.
    pub async fn run(&self, inv: Invocation, chain: Option<Chain<'_>>) -> CallOutcome {
        let span = span::open(self.opts);
        let outcome = match &self.base {
            Ok(base) => {
                self.run_in_span(inv, chain, base)
                    .instrument(span.clone())
                    .await
            }
            Err(e) => self.refuse(inv, e.clone()).instrument(span.clone()).await,
        };
        span::close(&span, &outcome);
        outcome
    }

    async fn run_in_span(
        &self,
        inv: Invocation,
        chain: Option<Chain<'_>>,
        base: &Base,
    ) -> CallOutcome {
        let mut own;
        let (scrubber, results) = match chain {
            Some(c) => (c.scrubber, Some(c.results)),
            None => {
                own = base.scrubber.clone();
                (&mut own, None)
            }
        };
        let cap = results.is_none();
        let mut x = Execution {
            started_at: self.engine.clock.now_ms(),
            outcome: self.outcome(&inv.tool),
            inv,
            results,
            scrubber,
        };
        let result = self.execute(&mut x, &base.policy).await;
        let Execution {
            inv,
            scrubber,
            started_at,
            mut outcome,
            ..
        } = x;
        outcome.result = result;
        match &mut outcome.result {
            Ok(v) => scrubber.scrub(v),
            Err(e) => e.scrub(scrubber),
        }
        if cap {
            self.cap(&mut outcome);
        }
        // The arguments recorded are the agent's template, scrubbed.
        let mut recorded_args = inv.args;
        scrubber.scrub(&mut recorded_args);
        record::write(
            &self.engine.recorder,
            &self.record_of(&recorded_args, started_at),
            &outcome,
        )
        .await;
        outcome
    }

    /// Records and answers an execution that did not start.
    async fn refuse(&self, inv: Invocation, e: ToolError) -> CallOutcome {
        let mut outcome = self.outcome(&inv.tool);
        outcome.result = Err(e);
        let now = self.engine.clock.now_ms();
        record::write(
            &self.engine.recorder,
            &self.record_of(&json!({}), now),
            &outcome,
        )
        .await;
        outcome
    }

    /// A new call's outcome, or for an approved held call the one that finishes its rows.
    fn outcome(&self, tool: &str) -> CallOutcome {
        match &self.held {
            Some(h) => {
                let mut o = CallOutcome::new(h.tool_call_id.clone(), tool.to_owned());
                o.rows = Rows::Existing;
                o.confirmation_id = Some(h.confirmation_id.clone());
                o
            }
            None => CallOutcome::new(new_id("tcall"), tool.to_owned()),
        }
    }

    /// What the record of an execution of this scope is written from.
    pub fn record_of<'a>(&'a self, args: &'a Value, at: i64) -> record::Call<'a> {
        record::Call {
            who: self.who,
            opts: self.opts,
            args,
            at,
        }
    }

    /// The size cap of a result (D6): REST invoke's ceiling in bytes of JSON, reported as the
    /// handler's failure (502); elsewhere `{ "result": … }` over 60,000 characters.
    fn cap(&self, outcome: &mut CallOutcome) {
        let Ok(v) = &outcome.result else { return };
        match self.opts.rest_result_max_bytes {
            Some(max) => {
                let size = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
                if size > max {
                    outcome.result = Err(ToolError::Handler {
                        handler_error: format!("the result is {size} bytes of JSON, over this server's REST ceiling of {max} bytes"),
                    });
                }
            }
            None => {
                let size = json!({ "result": v }).to_string().chars().count();
                if size > RESULT_CAP_CHARS {
                    outcome.result = Err(ToolError::ResultTooLarge { size });
                }
            }
        }
    }

    /// Runs up to `BATCH_MAX` executions, at most `POOL_SIZE` at a time, each on its own copy of
    /// the request's scrubber and recorded as its own call; outcomes are index-aligned with
    /// `invocations` whatever the completion order, and one failure does not stop the others.
    pub async fn run_all(&self, invocations: Vec<Invocation>) -> Vec<CallOutcome> {
        let mut slots: Vec<Option<CallOutcome>> = (0..invocations.len()).map(|_| None).collect();
        let mut done = stream::iter(invocations.into_iter().enumerate())
            .map(|(i, inv)| async move { (i, self.run(inv, None).await) })
            .buffer_unordered(POOL_SIZE);
        while let Some((i, outcome)) = done.next().await {
            slots[i] = Some(outcome);
        }
        slots
            .into_iter()
            .map(|o| o.expect("every execution yields an outcome"))
            .collect()
    }
}
