//! Turning a checked draft into one MIME message: text and/or HTML (alternatives of one
//! another), attachments beside them, Bcc only in the envelope, a Message-ID under the sender's
//! domain. lettre encodes every header, so no field can add another.

use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::Message;

/// A file to attach, already decoded.
pub struct AttachmentData {
    pub filename: String,
    pub content_type: ContentType,
    pub bytes: Vec<u8>,
}

/// Everything one message says.
pub struct Draft {
    pub from: Mailbox,
    pub to: Vec<Mailbox>,
    pub cc: Vec<Mailbox>,
    pub bcc: Vec<Mailbox>,
    pub reply_to: Option<Mailbox>,
    pub subject: String,
    pub text: Option<String>,
    pub html: Option<String>,
    pub attachments: Vec<AttachmentData>,
}

impl Draft {
    /// Every envelope recipient, in order: to, cc, bcc.
    pub fn recipients(&self) -> Vec<String> {
        self.to
            .iter()
            .chain(&self.cc)
            .chain(&self.bcc)
            .map(|m| m.email.to_string())
            .collect()
    }

    /// The sender's domain as the domain list stores it.
    pub fn sender_domain(&self) -> Result<String, String> {
        super::domain::normalize(self.from.email.domain())
    }
}

/// `"Name <a@example.com>"` or `"a@example.com"` as a mailbox, or why not.
pub fn parse_mailbox(text: &str) -> Result<Mailbox, String> {
    if text.chars().any(char::is_control) {
        return Err("an address cannot contain line breaks or control characters".into());
    }
    text.trim().parse::<Mailbox>().map_err(|_| {
        format!("{text:?} is not an email address (write a@example.com or Name <a@example.com>)")
    })
}

/// The MIME type of an attachment, or why not.
pub fn parse_content_type(text: &str) -> Result<ContentType, String> {
    ContentType::parse(text)
        .map_err(|_| format!("{text:?} is not a MIME type such as application/pdf"))
}

/// What differs between sending over SMTP and handing a whole message to an API (Gmail).
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Keep the Bcc header in the message (an API that reads recipients from the headers).
    pub keep_bcc: bool,
    /// The Message-ID this one answers (`In-Reply-To` and `References`).
    pub in_reply_to: Option<String>,
}

/// The message, under `message_id` (`<…@domain>`).
pub fn build(draft: &Draft, message_id: &str) -> crate::Result<Message> {
    build_with(draft, message_id, BuildOptions::default())
}

/// The message, under `message_id`, with the options.
pub fn build_with(draft: &Draft, message_id: &str, opts: BuildOptions) -> crate::Result<Message> {
    let mut b = Message::builder()
        .from(draft.from.clone())
        .subject(draft.subject.clone())
        .message_id(Some(message_id.to_owned()))
        .date_now();
    if opts.keep_bcc {
        b = b.keep_bcc();
    }
    if let Some(id) = opts.in_reply_to {
        b = b.in_reply_to(id.clone()).references(id);
    }
    for m in &draft.to {
        b = b.to(m.clone());
    }
    for m in &draft.cc {
        b = b.cc(m.clone());
    }
    for m in &draft.bcc {
        b = b.bcc(m.clone());
    }
    if let Some(m) = &draft.reply_to {
        b = b.reply_to(m.clone());
    }
    enum Body {
        One(SinglePart),
        Both(MultiPart),
    }
    let body = match (&draft.text, &draft.html) {
        (Some(t), Some(h)) => Body::Both(MultiPart::alternative_plain_html(t.clone(), h.clone())),
        (None, Some(h)) => Body::One(SinglePart::html(h.clone())),
        (Some(t), None) => Body::One(SinglePart::plain(t.clone())),
        (None, None) => Body::One(SinglePart::plain(String::new())),
    };
    let built = if draft.attachments.is_empty() {
        match body {
            Body::One(p) => b.singlepart(p),
            Body::Both(m) => b.multipart(m),
        }
    } else {
        let mut mixed = match body {
            Body::One(p) => MultiPart::mixed().singlepart(p),
            Body::Both(m) => MultiPart::mixed().multipart(m),
        };
        for a in &draft.attachments {
            mixed = mixed.singlepart(
                Attachment::new(a.filename.clone()).body(a.bytes.clone(), a.content_type.clone()),
            );
        }
        b.multipart(mixed)
    };
    built.map_err(|e| crate::Error::internal(format!("building a message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> Draft {
        Draft {
            from: parse_mailbox("Ops <ops@example.com>").unwrap(),
            to: vec![parse_mailbox("a@example.org").unwrap()],
            cc: vec![],
            bcc: vec![parse_mailbox("hidden@example.net").unwrap()],
            reply_to: None,
            subject: "Hello\r\nBcc: evil@attacker.example".into(),
            text: Some("plain".into()),
            html: Some("<p>rich</p>".into()),
            attachments: vec![AttachmentData {
                filename: "r.csv".into(),
                content_type: parse_content_type("text/csv").unwrap(),
                bytes: b"a,b\n".to_vec(),
            }],
        }
    }

    #[test]
    fn bcc_stays_in_the_envelope_and_a_subject_cannot_add_headers() {
        let d = draft();
        let m = build(&d, "<x1@example.com>").unwrap();
        let text = String::from_utf8(m.formatted()).unwrap();
        assert!(!text.contains("hidden@example.net"), "{text}");
        assert!(!text.contains("\r\nBcc:"), "{text}");
        assert!(
            text.lines().filter(|l| l.starts_with("Subject:")).count() == 1,
            "{text}"
        );
        assert!(text.contains("Message-ID: <x1@example.com>"), "{text}");
        assert!(
            text.contains("multipart/mixed")
                && text.contains("multipart/alternative")
                && text.contains("r.csv"),
            "{text}"
        );
        let env: Vec<String> = m.envelope().to().iter().map(|a| a.to_string()).collect();
        assert_eq!(env, vec!["a@example.org", "hidden@example.net"]);
        assert_eq!(d.recipients(), vec!["a@example.org", "hidden@example.net"]);
        assert_eq!(d.sender_domain().unwrap(), "example.com");
    }

    #[test]
    fn addresses_and_types_are_checked() {
        assert!(parse_mailbox("not an address").is_err());
        assert!(parse_mailbox("a@example.com\r\nBcc: b@example.com").is_err());
        assert!(parse_content_type("pdf").is_err());
        assert_eq!(
            parse_mailbox(" Ann <ann@example.com> ")
                .unwrap()
                .email
                .to_string(),
            "ann@example.com"
        );
    }
}
