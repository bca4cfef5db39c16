//! Google tools a request template cannot express: a Drive upload is one multipart/related
//! request (metadata, then the bytes), and Gmail sends a whole RFC 5322 message, base64url
//! encoded, built by lettre so no argument can add a header.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::get;
use crate::catalog::{CallContext, HandlerError};
use crate::email::{self, Draft};
use crate::integrations::request::{self, Body, Prepared};
use crate::plugins::client::Client;

/// The file fields an upload answers with.
const DRIVE_FIELDS: &str = "id,name,mimeType,webViewLink,size";

fn text_arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// The file's bytes: `content` (text) or `content_base64`, exactly one.
fn upload_bytes(args: &Value) -> Result<Vec<u8>, HandlerError> {
    match (text_arg(args, "content"), text_arg(args, "content_base64")) {
        (Some(t), None) => Ok(t.as_bytes().to_vec()),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.trim())
            .map_err(|_| HandlerError::invalid("/content_base64", "is not valid base64")),
        (Some(_), Some(_)) => Err(HandlerError::invalid(
            "/content_base64",
            "give content or content_base64, not both",
        )),
        (None, None) => Err(HandlerError::invalid(
            "/content",
            "is required (or content_base64 for a binary file)",
        )),
    }
}

/// `POST /upload/drive/v3/files?uploadType=multipart`: a JSON metadata part, then the content.
pub async fn drive_upload(
    tool: &Client,
    ctx: &CallContext<'_>,
    args: Value,
) -> Result<Value, HandlerError> {
    let name =
        text_arg(&args, "name").ok_or_else(|| HandlerError::invalid("/name", "is required"))?;
    let bytes = upload_bytes(&args)?;
    let mime = text_arg(&args, "mime_type").unwrap_or("text/plain");
    // The type goes into a part header: it must be one MIME type and nothing more.
    email::parse_content_type(mime).map_err(|m| HandlerError::invalid("/mime_type", m))?;
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    meta.insert("mimeType".into(), json!(mime));
    if let Some(folder) = text_arg(&args, "folder_id") {
        meta.insert("parents".into(), json!([folder]));
    }
    if let Some(d) = text_arg(&args, "description") {
        meta.insert("description".into(), json!(d));
    }
    let boundary = loop {
        let b = format!("workbench-{}", crate::crypto::random_base62(32));
        if !bytes.windows(b.len()).any(|w| w == b.as_bytes()) {
            break b;
        }
    };
    let mut body = Vec::with_capacity(bytes.len() + 512);
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(&serde_json::to_vec(&Value::Object(meta)).unwrap_or_default());
    body.extend_from_slice(format!("\r\n--{boundary}\r\nContent-Type: {mime}\r\n\r\n").as_bytes());
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let base = tool.integration.base_url.clone();
    let mut url = request::join(&base, "/upload/drive/v3/files");
    url.query_pairs_mut()
        .append_pair("uploadType", "multipart")
        .append_pair("fields", DRIVE_FIELDS)
        .append_pair("supportsAllDrives", "true");
    let prepared = Prepared {
        method: reqwest::Method::POST,
        url,
        headers: Vec::new(),
        body: Some(Body::Raw {
            content_type: format!("multipart/related; boundary={boundary}"),
            bytes: body,
        }),
    };
    let reply = tool.send_authorized(ctx, || Ok(prepared.clone())).await?;
    let file = tool.body_of(reply)?;
    Ok(json!({
        "id": file.get("id"), "name": file.get("name"), "mimeType": file.get("mimeType"),
        "webViewLink": file.get("webViewLink"), "size": file.get("size"),
    }))
}

fn mailboxes(args: &Value, field: &str) -> Result<Vec<lettre::message::Mailbox>, HandlerError> {
    let Some(list) = args.get(field).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            let text = v.as_str().unwrap_or_default();
            email::parse_mailbox(text)
                .map_err(|m| HandlerError::invalid(format!("/{field}/{i}"), m))
        })
        .collect()
}

/// Reads the account's address (`users/me/profile`: Gmail sends as it), builds the message
/// and sends it (`users/me/messages/send` with `{raw, threadId?}`).
pub async fn gmail_send(
    tool: &Client,
    ctx: &CallContext<'_>,
    args: Value,
) -> Result<Value, HandlerError> {
    let (to, cc, bcc) = (
        mailboxes(&args, "to")?,
        mailboxes(&args, "cc")?,
        mailboxes(&args, "bcc")?,
    );
    if to.is_empty() {
        return Err(HandlerError::invalid("/to", "needs at least one recipient"));
    }
    let subject = text_arg(&args, "subject").unwrap_or_default();
    if subject.chars().any(char::is_control) {
        return Err(HandlerError::invalid(
            "/subject",
            "cannot contain line breaks or control characters",
        ));
    }
    let in_reply_to = text_arg(&args, "in_reply_to");
    if in_reply_to.is_some_and(|m| {
        m.chars().any(|c| c.is_control() || c.is_whitespace())
            || !m.starts_with('<')
            || !m.ends_with('>')
    }) {
        return Err(HandlerError::invalid(
            "/in_reply_to",
            "must be one Message-ID such as <abc@mail.gmail.com>",
        ));
    }
    let base = tool.integration.base_url.clone();
    let profile = tool.body_of(
        tool.send_authorized(ctx, || {
            request::prepare(&base, &get("/gmail/v1/users/me/profile"), &json!({}))
        })
        .await?,
    )?;
    let from_text = profile
        .get("emailAddress")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            HandlerError::failed("Gmail did not say which address the account sends as")
        })?;
    let from = email::parse_mailbox(from_text).map_err(HandlerError::failed)?;
    let domain = from.email.domain().to_owned();
    let draft = Draft {
        from,
        to,
        cc,
        bcc,
        reply_to: None,
        subject: subject.to_owned(),
        text: text_arg(&args, "text").map(str::to_owned),
        html: text_arg(&args, "html").map(str::to_owned),
        attachments: Vec::new(),
    };
    let message_id = format!("<{}@{domain}>", crate::crypto::random_base62(24));
    // Gmail reads the recipients from the headers, Bcc included, and drops Bcc from the copies
    // it delivers.
    let message = email::build_message(
        &draft,
        &message_id,
        email::BuildOptions {
            keep_bcc: true,
            in_reply_to: in_reply_to.map(str::to_owned),
        },
    )
    .map_err(|e| HandlerError::failed(e.to_string()))?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(message.formatted());
    let mut send = json!({ "raw": raw });
    if let Some(t) = text_arg(&args, "thread_id") {
        send["threadId"] = json!(t);
    }
    let url = request::join(&base, "/gmail/v1/users/me/messages/send");
    let prepared = Prepared {
        method: reqwest::Method::POST,
        url,
        headers: Vec::new(),
        body: Some(Body::Json(send)),
    };
    let sent = tool.body_of(tool.send_authorized(ctx, || Ok(prepared.clone())).await?)?;
    Ok(
        json!({ "id": sent.get("id"), "threadId": sent.get("threadId"), "labelIds": sent.get("labelIds") }),
    )
}
