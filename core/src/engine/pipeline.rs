//! The hops of one execution between its span and its record (`CallScope::run` in scope.rs):
//! resolve → policy → rate limit → connection → substitution → validation with defaults →
//! confirmation gate → the `running` rows of a tool that changes things → handler under a
//! timeout. Each hop reads the request's context from the scope and the execution's own state
//! from `Execution`.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::{json, Value};

use super::scope::{CallScope, Execution};
use super::template;
use super::{apply_defaults, record, violations, FieldError, ToolError};
use crate::catalog::{Availability, CallContext, SideEffects};
use crate::policy::{Applied, Decision};
use crate::vault::Scrubber;

impl CallScope<'_> {
    /// One execution's hops, up to its handler's result (not yet scrubbed or capped).
    pub(super) async fn execute(
        &self,
        x: &mut Execution<'_>,
        policy: &Applied,
    ) -> Result<Value, ToolError> {
        let who = self.who;
        let inv = &x.inv;
        let tool = self
            .snapshot
            .get(&inv.tool)
            .ok_or_else(|| ToolError::NotFound {
                tool: inv.tool.clone(),
                integration: None,
            })?;
        // The policy step (D14), right after the tool is known: a hidden tool called by name
        // answers why, not "not found". An approved call is checked again; its approval
        // answers the confirmation gate.
        let gate = match policy.decide(tool.name()) {
            Decision::Run => None,
            Decision::Deny(rule) => {
                return Err(ToolError::NotAllowed {
                    tool: inv.tool.clone(),
                    rule,
                })
            }
            Decision::Confirm(_) if self.held.is_some() => None,
            Decision::Confirm(rule) => Some(rule),
        };
        // Rate limits and quotas: the key's own, then its policy's (across instances); an
        // approved call was counted when it was made.
        let admitted = if self.held.is_none() {
            match self.engine.limits.admit(who, policy, tool.name()).await {
                Ok(Ok(admitted)) => Some(admitted),
                Ok(Err(refusal)) => {
                    let (policy_id, limit) = match refusal.limit {
                        Some((policy, limit)) => (Some(policy), Some(limit.to_string())),
                        None => (None, None),
                    };
                    return Err(ToolError::RateLimited {
                        retry_after_s: refusal.retry_after_s,
                        policy_id,
                        limit,
                    });
                }
                Err(e) => {
                    tracing::error!(error = ?e, "rate limit cannot be counted");
                    return Err(ToolError::Unavailable {
                        reason: "the rate limit cannot be counted right now".into(),
                    });
                }
            }
        } else {
            None
        };
        // A tool listed as unavailable (vanished or held for review upstream, an open breaker,
        // its configuration missing) answers with the reason the listings show.
        if let Availability::Unavailable(reason) = tool.availability() {
            return Err(ToolError::Unavailable { reason });
        }
        let connection = tool.connection();
        let credential = match connection {
            Some(source) => {
                // The connection step (D5): the user's credential (refreshed if due), or
                // NOT_CONNECTED. Its secrets join the scrubber.
                let c = source.credential(who).await.map_err(ToolError::from)?;
                for secret in c.secrets() {
                    x.scrubber
                        .add(&format!("{}_credential", source.integration()), secret);
                }
                Some(c)
            }
            None => None,
        };
        let template = match &inv.args {
            Value::Null => json!({}),
            other => other.clone(),
        };
        let template_for_messages = template.clone();
        if tool.spec.no_vault_refs && !template::vault_names(&template).is_empty() {
            return Err(ToolError::InvalidArguments {
                errors: vec![FieldError {
                    path: String::new(),
                    message: format!("{} does not take {{{{vault:…}}}} references: its arguments leave for outside recipients", tool.name()),
                }],
            });
        }
        let mut args = if tool.spec.literal_args {
            template
        } else {
            self.substitute(&template, x.results, x.scrubber).await?
        };
        if let Some(secret) = tool.spec.secret_arg {
            // The value being stored is a secret (vault_set): scrub it under its name.
            if let (Some(name), Some(value)) = (
                args.get(secret.name).and_then(Value::as_str),
                args.get(secret.value).and_then(Value::as_str),
            ) {
                x.scrubber.add_exact(name, value);
            }
        }
        apply_defaults(&tool.spec.input_schema, &mut args);
        let errors = violations(&tool.validator, &args);
        if !errors.is_empty() {
            return Err(ToolError::InvalidArguments { errors });
        }
        if let Some(rule) = gate {
            // Valid, and a person must say yes first (D15): hold it (the agent's template, not
            // the resolved arguments), or answer what an identical held call came to.
            return self
                .hold(tool.name(), &inv.args, rule, &mut x.outcome)
                .await;
        }
        if matches!(
            tool.spec.side_effects,
            SideEffects::Write | SideEffects::Destructive
        ) {
            // No record, no call: a tool that changes things runs only once its audit row exists.
            let mut recorded_args = inv.args.clone();
            x.scrubber.scrub(&mut recorded_args);
            let existing = x.outcome.rows == record::Rows::Existing;
            if let Err(e) = record::begin(
                &self.engine.recorder,
                &self.record_of(&recorded_args, x.started_at),
                &x.outcome.id,
                tool.name(),
                existing,
            )
            .await
            {
                record::AUDIT_WRITE_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(error = %e, tool = %tool.name(), "audit log unwritable; a side-effecting call was not started");
                return Err(ToolError::Unavailable { reason: "the audit log cannot be written right now, and tools that change things do not run without it".into() });
            }
            x.outcome.rows = record::Rows::Existing;
        }
        let opts = self.opts;
        // What an upstream asks the caller passes the call's scrubber first, as its result does.
        let relay = opts.client.as_ref().map(|c| crate::catalog::ScrubbedRelay {
            inner: &*c.0,
            scrubber: &*x.scrubber,
        });
        let outcome = &mut x.outcome;
        let mut ctx = CallContext::new(&outcome.id, tool.name(), who, opts.end_user_id.as_deref());
        ctx.template = Some(&template_for_messages);
        ctx.client = relay
            .as_ref()
            .map(|r| r as &dyn crate::catalog::ClientRelay);
        ctx.credential = credential;
        ctx.connection = connection.map(|c| &**c);
        let started = Instant::now();
        // A handler that panics fails its own call, recorded like any failure; it never takes
        // the request (or a batch's other calls) down with it.
        let call = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
            tool.handler.call(&ctx, args),
        ));
        let result = tokio::time::timeout(opts.timeout, call).await;
        outcome.duration_us = started.elapsed().as_micros() as u64;
        outcome.duration_ms = outcome.duration_us / 1000;
        outcome.egress_bytes = ctx.egress_bytes();
        if let Some(admitted) = admitted {
            self.engine.limits.spent(admitted, outcome.egress_bytes);
        }
        match result {
            Err(_) => Err(ToolError::Timeout {
                timeout_ms: opts.timeout.as_millis() as u64,
            }),
            Ok(Err(panic)) => {
                let mut message = Value::String(panic_text(panic.as_ref()));
                x.scrubber.scrub(&mut message);
                tracing::error!(tool = %tool.name(), call_id = %outcome.id, panic = %message, "a tool handler panicked");
                Err(ToolError::Handler {
                    handler_error:
                        "the tool failed with an internal error; the operator's log has the details"
                            .into(),
                })
            }
            Ok(Ok(r)) => r.map_err(ToolError::from),
        }
    }

    /// `{{vault:…}}` and `{{step:…}}` in one pass over the agent's template (D7); every secret
    /// revealed is registered with the scrubber.
    async fn substitute(
        &self,
        template: &Value,
        results: Option<&std::collections::HashMap<String, Value>>,
        scrubber: &mut Scrubber,
    ) -> Result<Value, ToolError> {
        let names = template::vault_names(template);
        let values = if names.is_empty() {
            Default::default()
        } else {
            self.engine
                .vault
                .reveal(&self.who.project_id, &names)
                .await
                .map_err(|e| {
                    tracing::error!(error = ?e, "vault read failed");
                    ToolError::Unavailable {
                        reason: "the vault cannot be read right now".into(),
                    }
                })?
        };
        for (name, value) in &values {
            scrubber.add(name, value);
        }
        // A compose step runs only after every earlier step succeeded: none failed.
        let failed = HashSet::new();
        let ctx = template::Context {
            vault: Some(&values),
            steps: results,
            failed: &failed,
        };
        template::resolve(template, &ctx).map_err(|e| match e {
            template::TemplateError::BadRef(message) => ToolError::BadRef {
                message,
                ref_id: None,
            },
            template::TemplateError::UnknownSecret { path, message } => {
                ToolError::InvalidArguments {
                    errors: vec![FieldError { path, message }],
                }
            }
        })
    }
}

/// What a panic said, when it said it with a string.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "(no message)".into(),
    }
}
