//! `email.send`: one message through the operator's SMTP server, from a verified sender domain
//! of the project. Reading the arguments (addresses, body, attachments inline or from project
//! storage) is here; domains, limits and SMTP are `crate::email`. A message passes the project's
//! scrubber before it is built: subject, bodies and text attachments are sent with any vault
//! secret replaced by `[redacted:NAME]`; an address, file name or type holding one, or an
//! attachment that is not text and holds one, is refused and nothing is sent.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};

use super::storage::{project_scrubber, secret_names};
use super::{make_spec, ObjectStorage};
use crate::catalog::{CallContext, HandlerError, SideEffects, ToolHandler, ToolSpec};
use crate::email::{
    self, AttachmentData, Draft, Email, SendError, SmtpFailure, MAX_ATTACHMENT_BYTES,
    MAX_RECIPIENTS,
};
use crate::vault::{Scrubber, Vault};
use crate::Result;

/// Longest text or HTML body, in characters.
const MAX_BODY_CHARS: usize = 2 * 1024 * 1024;
const MAX_ATTACHMENTS: usize = 20;

pub fn spec() -> Result<ToolSpec> {
    let mut spec = spec_shape()?;
    // A message leaves for any address: the pipeline refuses vault references in it, and the
    // handler scrubs what it sends.
    spec.no_vault_refs = true;
    Ok(spec)
}

fn spec_shape() -> Result<ToolSpec> {
    let address = |what: &str| json!({ "type": "string", "minLength": 3, "maxLength": 320, "description": what });
    let list =
        |what: &str| json!({ "type": "array", "maxItems": MAX_RECIPIENTS, "items": address(what) });
    let mut to = list("A recipient: a@example.com or Name <a@example.com>.");
    to["minItems"] = json!(1);
    make_spec(
        "email.send",
        "Send an email: deliver a message (text and/or HTML, with optional file attachments) to up to 50 recipients \
         (to, cc, bcc) from an address at one of the project's verified sender domains. Use it to mail a report, notify \
         someone, reply to a person or share a file by email. Vault secrets never leave in a message: subject, bodies and text \
         attachments are sent with any secret replaced by [redacted:NAME], and a binary attachment holding one is refused.",
        SideEffects::Destructive,
        json!({
            "type": "object",
            "required": ["from", "to", "subject"],
            "additionalProperties": false,
            "properties": {
                "from": address("The sender, at a verified sender domain of the project: reports@example.com or Reports <reports@example.com>."),
                "to": to,
                "cc": list("A copy recipient."),
                "bcc": list("A hidden recipient (not shown to the others)."),
                "reply_to": address("Where replies go, if not to the sender."),
                "subject": { "type": "string", "minLength": 1, "maxLength": 998, "description": "The subject line (one line)." },
                "text": { "type": "string", "maxLength": MAX_BODY_CHARS, "description": "The plain-text body. Give text, html or both." },
                "html": { "type": "string", "maxLength": MAX_BODY_CHARS, "description": "The HTML body. Give text, html or both." },
                "attachments": {
                    "type": "array",
                    "maxItems": MAX_ATTACHMENTS,
                    "description": "Files to attach, at most 10 MiB in all: each inline as base64 or an object of project storage.",
                    "items": {
                        "type": "object",
                        "required": ["filename"],
                        "additionalProperties": false,
                        "properties": {
                            "filename": { "type": "string", "minLength": 1, "maxLength": 255, "description": "The file name the recipient sees, e.g. report.csv." },
                            "content_type": { "type": "string", "maxLength": 255, "description": "Its MIME type, e.g. application/pdf (default: the stored object's type, else application/octet-stream)." },
                            "content_base64": { "type": "string", "maxLength": MAX_ATTACHMENT_BYTES / 3 * 4 + 4, "description": "The file's bytes, base64. Give this or storage_key." },
                            "storage_key": { "type": "string", "minLength": 1, "maxLength": 512, "description": "The key of an object in project storage (storage.put) to attach. Give this or content_base64." }
                        }
                    }
                }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "message_id": { "type": "string" },
                "accepted": { "type": "array", "items": { "type": "string" } },
                "redacted": { "type": "array", "items": { "type": "string" }, "description": "The vault secrets replaced by [redacted:NAME] in what was sent (absent when none)." }
            }
        })),
    )
}

pub struct EmailSend {
    pub email: Arc<Email>,
    pub storage: Arc<ObjectStorage>,
    /// The project's secrets, which a message must not carry.
    pub vault: Vault,
}

/// What a message is checked against, and the secrets redacted from it so far.
struct Scrub {
    scrubber: Scrubber,
    redacted: Vec<String>,
}

impl Scrub {
    /// `text` with any secret redacted.
    fn text(&mut self, text: &str) -> String {
        match self.scrubber.scrub_named(text) {
            Some((clean, names)) => {
                self.redacted.extend(names);
                clean
            }
            None => text.to_owned(),
        }
    }

    /// Refuses a field that is sent as written (an address, a file name) when it holds a secret.
    fn refuse_in(
        &self,
        path: impl Into<String>,
        what: &str,
        text: &str,
    ) -> Result<(), HandlerError> {
        let held = self.scrubber.secrets_in(text.as_bytes());
        if held.is_empty() {
            return Ok(());
        }
        Err(HandlerError::invalid(
            path,
            format!(
                "{what} holds the value of {}; nothing was sent",
                secret_names(&held)
            ),
        ))
    }
}

/// Whether a MIME type is text the scrubber may rewrite (as opposed to bytes sent as they are).
fn is_text_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-ndjson"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/csv"
                | "application/sql"
                | "application/x-sh"
                | "application/x-www-form-urlencoded"
                | "message/rfc822"
        )
}

fn mailboxes(
    args: &Value,
    field: &str,
    scrub: &Scrub,
) -> Result<Vec<lettre::message::Mailbox>, HandlerError> {
    let Some(items) = args.get(field).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let text = v.as_str().unwrap_or_default();
            scrub.refuse_in(format!("/{field}/{i}"), "an address", text)?;
            email::parse_mailbox(text)
                .map_err(|m| HandlerError::invalid(format!("/{field}/{i}"), m))
        })
        .collect()
}

impl EmailSend {
    async fn attachments(
        &self,
        ctx: &CallContext<'_>,
        args: &Value,
        scrub: &mut Scrub,
    ) -> Result<Vec<AttachmentData>, HandlerError> {
        let mut out = Vec::new();
        let mut total = 0usize;
        for (i, a) in args
            .get("attachments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = |field: &str| format!("/attachments/{i}/{field}");
            let filename = a["filename"].as_str().unwrap_or_default();
            if filename.chars().any(char::is_control) || filename.contains(['/', '\\']) {
                return Err(HandlerError::invalid(
                    at("filename"),
                    "a file name cannot contain slashes or control characters",
                ));
            }
            scrub.refuse_in(at("filename"), "the file name", filename)?;
            let (bytes, stored_type) = match (
                a.get("content_base64").and_then(Value::as_str),
                a.get("storage_key").and_then(Value::as_str),
            ) {
                (Some(_), Some(_)) | (None, None) => {
                    return Err(HandlerError::invalid(
                        format!("/attachments/{i}"),
                        "give content_base64 or storage_key, exactly one",
                    ))
                }
                (Some(b64), None) => {
                    let clean: String = b64.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(clean.as_bytes())
                        .map_err(|_| {
                            HandlerError::invalid(at("content_base64"), "not valid base64")
                        })?;
                    (bytes, None)
                }
                (None, Some(key)) => {
                    super::storage::check_key(key).map_err(|_| {
                        HandlerError::invalid(
                            at("storage_key"),
                            "key segments cannot be '.' or '..'",
                        )
                    })?;
                    match self.storage.get(&ctx.principal.project_id, key).await {
                        Ok(Some((row, bytes))) => (bytes.to_vec(), Some(row.content_type)),
                        Ok(None) => {
                            return Err(HandlerError::invalid(
                                at("storage_key"),
                                format!("no object with key {key:?} in this project's storage"),
                            ))
                        }
                        Err(e) => {
                            tracing::error!(error = ?e, "reading an attachment from storage failed");
                            return Err(HandlerError::Unavailable(
                                "project storage is unavailable; nothing was sent, try again"
                                    .into(),
                            ));
                        }
                    }
                }
            };
            let type_text = a
                .get("content_type")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(stored_type)
                .unwrap_or_else(|| "application/octet-stream".into());
            scrub.refuse_in(at("content_type"), "the content type", &type_text)?;
            // Text is sent with secrets redacted; anything else goes byte for byte, so it must
            // hold none, neither as it is nor in the base64 it travels in.
            let bytes = match std::str::from_utf8(&bytes) {
                Ok(text) if is_text_type(&type_text) => scrub.text(text).into_bytes(),
                _ => bytes,
            };
            let mut held = scrub.scrubber.secrets_in(&bytes);
            if held.is_empty() && !scrub.scrubber.is_empty() {
                held = scrub.scrubber.secrets_in(
                    base64::engine::general_purpose::STANDARD
                        .encode(&bytes)
                        .as_bytes(),
                );
            }
            if !held.is_empty() {
                return Err(HandlerError::invalid(
                    format!("/attachments/{i}"),
                    format!(
                        "attachment {filename:?} holds the value of {} and is not text that could be redacted; nothing was sent: leave the secret out of the file",
                        secret_names(&held)
                    ),
                ));
            }
            total += bytes.len();
            if total > MAX_ATTACHMENT_BYTES {
                return Err(HandlerError::invalid(
                    "/attachments",
                    format!("attachments are at most {MAX_ATTACHMENT_BYTES} bytes (10 MiB) in all"),
                ));
            }
            let content_type = email::parse_content_type(&type_text)
                .map_err(|m| HandlerError::invalid(at("content_type"), m))?;
            out.push(AttachmentData {
                filename: filename.to_owned(),
                content_type,
                bytes,
            });
        }
        Ok(out)
    }

    async fn draft(
        &self,
        ctx: &CallContext<'_>,
        args: &Value,
        scrub: &mut Scrub,
    ) -> Result<Draft, HandlerError> {
        let one = |field: &str,
                   scrub: &Scrub|
         -> Result<Option<lettre::message::Mailbox>, HandlerError> {
            args.get(field)
                .and_then(Value::as_str)
                .map(|s| {
                    scrub.refuse_in(format!("/{field}"), "an address", s)?;
                    email::parse_mailbox(s)
                        .map_err(|m| HandlerError::invalid(format!("/{field}"), m))
                })
                .transpose()
        };
        let from = one("from", scrub)?
            .ok_or_else(|| HandlerError::invalid("/from", "a sender is required"))?;
        let (to, cc, bcc) = (
            mailboxes(args, "to", scrub)?,
            mailboxes(args, "cc", scrub)?,
            mailboxes(args, "bcc", scrub)?,
        );
        let count = to.len() + cc.len() + bcc.len();
        if count > MAX_RECIPIENTS {
            return Err(HandlerError::invalid(
                "/to",
                format!("{count} recipients in to, cc and bcc together; at most {MAX_RECIPIENTS}"),
            ));
        }
        let subject = args["subject"].as_str().unwrap_or_default();
        if subject.chars().any(char::is_control) {
            return Err(HandlerError::invalid(
                "/subject",
                "the subject is one line: no line breaks or control characters",
            ));
        }
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .map(|t| scrub.text(t));
        let html = args
            .get("html")
            .and_then(Value::as_str)
            .map(|h| scrub.text(h));
        if text.is_none() && html.is_none() {
            return Err(HandlerError::invalid(
                "",
                "give the message's text, html or both",
            ));
        }
        let reply_to = one("reply_to", scrub)?;
        let subject = scrub.text(subject);
        Ok(Draft {
            from,
            to,
            cc,
            bcc,
            reply_to,
            subject,
            text,
            html,
            attachments: self.attachments(ctx, args, scrub).await?,
        })
    }
}

#[async_trait]
impl ToolHandler for EmailSend {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let mut scrub = Scrub {
            scrubber: project_scrubber(&self.vault, ctx).await?,
            redacted: Vec::new(),
        };
        let draft = self.draft(ctx, &args, &mut scrub).await?;
        let size: usize = draft.text.as_ref().map_or(0, String::len)
            + draft.html.as_ref().map_or(0, String::len)
            + draft
                .attachments
                .iter()
                .map(|a| a.bytes.len())
                .sum::<usize>();
        let sent = self
            .email
            .send(ctx.principal, draft)
            .await
            .map_err(explain)?;
        ctx.add_egress(size as u64);
        let mut out = json!({ "message_id": sent.message_id, "accepted": sent.accepted });
        scrub.redacted.sort();
        scrub.redacted.dedup();
        if !scrub.redacted.is_empty() {
            out["redacted"] = json!(scrub.redacted);
        }
        Ok(out)
    }
}

/// Why email.send is unavailable without a mail server: what the catalog shows and a call
/// answers.
pub(super) const NOT_CONFIGURED: &str = "no mail relay (SMTP server) is configured: the operator sets --smtp-url (WB_SMTP_URL) and restarts workbench";

/// A refusal in the tool's terms: what happened, that nothing was sent, and what to do.
fn explain(e: SendError) -> HandlerError {
    match e {
        SendError::NotConfigured => HandlerError::Unavailable(NOT_CONFIGURED.into()),
        SendError::UnverifiedDomain { domain, added: false } => HandlerError::invalid(
            "/from",
            format!(
                "{domain} is not a verified sender domain of this project; nothing was sent. An admin adds it on the Email page \
                 (or POST /v1/email/domains {{\"domain\": \"{domain}\"}}), publishes the TXT record shown there, and verifies it"
            ),
        ),
        SendError::UnverifiedDomain { domain, added: true } => HandlerError::invalid(
            "/from",
            format!(
                "{domain} is not verified yet; nothing was sent. An admin publishes the TXT record at _workbench.{domain} shown on \
                 the Email page and presses Verify (or POST /v1/email/domains/{{id}}/verify)"
            ),
        ),
        SendError::HourlyLimit { limit, retry_after_secs } => HandlerError::Unavailable(format!(
            "this project has sent its {limit} messages for this hour; nothing was sent, the next can go in {retry_after_secs} s"
        )),
        SendError::Smtp(SmtpFailure::Refused(reply)) => HandlerError::failed(format!("the mail server refused the message ({reply}); nothing was sent")),
        SendError::Smtp(SmtpFailure::Deferred(reply)) => {
            HandlerError::Unavailable(format!("the mail server asked to try later ({reply}); nothing was sent"))
        }
        SendError::Smtp(SmtpFailure::Unreachable) => {
            HandlerError::Unavailable("the mail server cannot be reached right now; nothing was sent, try again".into())
        }
        SendError::Other(crate::Error::Invalid(m)) => HandlerError::invalid("/from", m),
        SendError::Other(e) => {
            tracing::error!(error = ?e, "sending an email failed");
            HandlerError::Unavailable("email cannot be sent right now; nothing was sent, try again".into())
        }
    }
}
