//! Email (`email.send`): messages go out through the operator's SMTP server, only from sender
//! domains the project has proven it controls (a TXT record at `_workbench.<domain>`), and at
//! most so many an hour per project. `domain.rs` says what a domain and its proof are, `dns.rs`
//! looks the proof up, `message.rs` builds the MIME message, `smtp.rs` talks to the server.

mod dns;
mod domain;
mod message;
mod smtp;

use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use crate::auth::{Operation, Principal};
use crate::clock::{rfc3339, Clock};
use crate::crypto::random_base62;
use crate::ids::new_id;
use crate::store::email::{self as rows, DomainRow, DomainStatus};
use crate::store::Db;
use crate::{Error, Result};

pub use dns::{LookupError, TxtResolver};
pub use domain::normalize as normalize_domain;
pub use message::{
    build_with as build_message, parse_content_type, parse_mailbox, AttachmentData, BuildOptions,
    Draft,
};
pub use smtp::{Mailer, SmtpFailure, SmtpUrl};

/// Recipients (to, cc and bcc together) one message may have.
pub const MAX_RECIPIENTS: usize = 50;
/// Attachments' decoded bytes, all together.
pub const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
/// Messages a project may send an hour unless the operator says otherwise.
pub const DEFAULT_HOURLY_LIMIT: u32 = 100;
const HOUR_MS: i64 = 3_600_000;

/// The operator's email settings.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// The mail server (none: email.send answers UNAVAILABLE saying what to set).
    pub smtp: Option<SmtpUrl>,
    /// The DNS server verification asks (none: the system's resolver).
    pub dns_server: Option<SocketAddr>,
    /// Messages one project may send per rolling hour.
    pub hourly_limit: u32,
}

impl Default for EmailSettings {
    fn default() -> Self {
        EmailSettings {
            smtp: None,
            dns_server: None,
            hourly_limit: DEFAULT_HOURLY_LIMIT,
        }
    }
}

/// The TXT record to publish.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DnsRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub value: String,
}

/// A sender domain as the API and the portal show it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DomainView {
    pub id: String,
    pub object: &'static str,
    pub domain: String,
    pub status: DomainStatus,
    pub dns_record: DnsRecord,
    pub created_at: String,
    pub verified_at: Option<String>,
    pub last_checked_at: Option<String>,
    pub last_error: Option<String>,
}

fn view(r: DomainRow) -> DomainView {
    let (name, value) = domain::txt_record(&r.domain, &r.token);
    DomainView {
        id: r.id,
        object: "email_domain",
        domain: r.domain,
        status: r.status,
        dns_record: DnsRecord {
            kind: "TXT",
            name,
            value,
        },
        created_at: rfc3339(r.created_at),
        verified_at: r.verified_at.map(rfc3339),
        last_checked_at: r.last_checked_at.map(rfc3339),
        last_error: r.last_error,
    }
}

/// How this project's sending stands.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SendingStatus {
    /// Whether the operator has configured a mail server.
    pub configured: bool,
    pub sent_last_hour: i64,
    /// The limit in force: the project's own, or else the operator's.
    pub hourly_limit: u32,
    /// The project's own limit, if an admin set one.
    pub project_hourly_limit: Option<u32>,
    /// The operator's limit, the most a project may set.
    pub operator_hourly_limit: u32,
}

/// Why verification did not succeed.
#[derive(Debug)]
pub enum VerifyError {
    /// The record is not there (yet), or holds something else; the message says what to do.
    NotProven(String),
    /// DNS could not be asked.
    Lookup(String),
    Other(Error),
}

impl From<Error> for VerifyError {
    fn from(e: Error) -> Self {
        VerifyError::Other(e)
    }
}

/// Why a message was not sent. Nothing was sent in any case.
#[derive(Debug)]
pub enum SendError {
    /// No mail server is configured.
    NotConfigured,
    /// The sender's domain is not verified for this project (`added`: it is listed, pending).
    UnverifiedDomain {
        domain: String,
        added: bool,
    },
    /// The project sent its hourly allowance; the next frees up in `retry_after_secs`.
    HourlyLimit {
        limit: u32,
        retry_after_secs: i64,
    },
    Smtp(SmtpFailure),
    Other(Error),
}

impl From<Error> for SendError {
    fn from(e: Error) -> Self {
        SendError::Other(e)
    }
}

/// What the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub message_id: String,
    pub accepted: Vec<String>,
}

#[derive(Clone)]
pub struct Email {
    db: Db,
    clock: Arc<dyn Clock>,
    mailer: Option<Mailer>,
    resolver: TxtResolver,
    hourly_limit: u32,
}

impl Email {
    /// Starts the mail server's connection pool (needs a running Tokio runtime when one is set).
    pub fn new(db: Db, clock: Arc<dyn Clock>, settings: EmailSettings) -> Result<Email> {
        let mailer = settings.smtp.as_ref().map(Mailer::new).transpose()?;
        Ok(Email {
            db,
            clock,
            mailer,
            resolver: TxtResolver::new(settings.dns_server),
            hourly_limit: settings.hourly_limit,
        })
    }

    pub async fn list_domains(&self, who: &Principal) -> Result<Vec<DomainView>> {
        Ok(rows::list_domains(self.db.pool(), &who.project_id)
            .await?
            .into_iter()
            .map(view)
            .collect())
    }

    pub async fn get_domain(&self, who: &Principal, id: &str) -> Result<Option<DomainView>> {
        Ok(rows::get_domain(self.db.pool(), &who.project_id, id)
            .await?
            .map(view))
    }

    /// Adds a sender domain, pending until its TXT record is found. Admins only; a domain the
    /// project already has is a conflict naming it.
    pub async fn add_domain(&self, admin: &Principal, domain: &str) -> Result<DomainView> {
        admin.require(Operation::EmailDomainsManage)?;
        let domain = domain::normalize(domain).map_err(Error::Invalid)?;
        if let Some(existing) =
            rows::find_domain(self.db.pool(), &admin.project_id, &domain).await?
        {
            return Err(Error::Conflict(format!(
                "{domain} is already a sender domain of this project ({})",
                existing.id
            )));
        }
        let row = DomainRow {
            id: new_id("edom"),
            project_id: admin.project_id.clone(),
            domain,
            token: domain::new_token(),
            status: DomainStatus::Pending,
            created_at: self.clock.now_ms(),
            verified_at: None,
            last_checked_at: None,
            last_error: None,
        };
        match rows::insert_domain(self.db.pool(), &row).await {
            Err(e) if e.is_unique_violation() => Err(Error::Conflict(format!(
                "{} is already a sender domain of this project",
                row.domain
            ))),
            other => other.map(|()| view(row)),
        }
    }

    /// Looks for the domain's TXT record and records what was found; verified once it holds
    /// this project's token (and it stays verified).
    pub async fn verify_domain(
        &self,
        admin: &Principal,
        id: &str,
    ) -> std::result::Result<DomainView, VerifyError> {
        admin.require(Operation::EmailDomainsManage)?;
        let Some(row) = rows::get_domain(self.db.pool(), &admin.project_id, id).await? else {
            return Err(Error::NotFound.into());
        };
        let (name, expected) = domain::txt_record(&row.domain, &row.token);
        // What went wrong, if anything, and whether it was DNS itself (retryable) or the record.
        let failure = match self.resolver.txt(&name).await {
            Ok(values) if values.iter().any(|v| v.trim() == expected) => None,
            Ok(values) => {
                let shown: Vec<String> = values.iter().take(3).map(|v| format!("{:?}", v.chars().take(80).collect::<String>())).collect();
                Some((false, format!(
                    "the TXT records at {name} ({}) do not include {expected}; publish that value and verify again",
                    shown.join(", ")
                )))
            }
            Err(LookupError::NoRecords) => Some((false, format!(
                "no TXT record at {name} yet; publish one with the value {expected} (DNS changes can take a few minutes to appear) and verify again"
            ))),
            Err(LookupError::Failed(reason)) => Some((true, format!("DNS could not be asked about {name}: {reason}; try again"))),
        };
        // A domain verified before stays verified when a later check fails; the failure is kept.
        rows::record_check(
            self.db.pool(),
            &admin.project_id,
            id,
            self.clock.now_ms(),
            failure.as_ref().map(|(_, m)| m.as_str()),
        )
        .await?;
        let fresh = rows::get_domain(self.db.pool(), &admin.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        match failure {
            Some((true, m)) if fresh.status != DomainStatus::Verified => {
                Err(VerifyError::Lookup(m))
            }
            Some((false, m)) if fresh.status != DomainStatus::Verified => {
                Err(VerifyError::NotProven(m))
            }
            _ => Ok(view(fresh)),
        }
    }

    pub async fn delete_domain(&self, admin: &Principal, id: &str) -> Result<bool> {
        admin.require(Operation::EmailDomainsManage)?;
        rows::delete_domain(self.db.pool(), &admin.project_id, id).await
    }

    /// The project's own hourly limit (None: the operator's), and the one in force.
    async fn limits(&self, project_id: &str) -> Result<(Option<u32>, u32)> {
        let own = crate::store::project_settings::get(self.db.pool(), project_id)
            .await?
            .and_then(|s| s.email_hourly_limit)
            .map(|n| n.clamp(1, self.hourly_limit.into()) as u32);
        Ok((own, own.unwrap_or(self.hourly_limit)))
    }

    pub async fn status(&self, who: &Principal) -> Result<SendingStatus> {
        let since = self.clock.now_ms() - HOUR_MS;
        let (own, limit) = self.limits(&who.project_id).await?;
        Ok(SendingStatus {
            configured: self.mailer.is_some(),
            sent_last_hour: rows::sent_since(self.db.pool(), &who.project_id, since).await?,
            hourly_limit: limit,
            project_hourly_limit: own,
            operator_hourly_limit: self.hourly_limit,
        })
    }

    /// Whether the operator configured a mail server (`--smtp-url`): without one nothing is sent.
    pub fn configured(&self) -> bool {
        self.mailer.is_some()
    }

    /// The operator's hourly limit: the most a project may set.
    pub fn operator_hourly_limit(&self) -> u32 {
        self.hourly_limit
    }

    /// The project's own hourly limit, if an admin set one.
    pub async fn project_hourly_limit(&self, who: &Principal) -> Result<Option<u32>> {
        Ok(self.limits(&who.project_id).await?.0)
    }

    /// Refuses a project hourly limit outside 1 up to the operator's (None, the operator's, is
    /// always fine). Settings check everything before changing anything, so this stands alone.
    pub fn check_hourly_limit(&self, limit: Option<i64>) -> Result<()> {
        match limit {
            Some(n) if !(1..=i64::from(self.hourly_limit)).contains(&n) => {
                Err(Error::invalid(format!(
                "email_hourly_limit must be 1 to {} (the operator's limit), or null for that limit",
                self.hourly_limit
            )))
            }
            _ => Ok(()),
        }
    }

    /// Sets the project's own hourly limit, 1 up to the operator's (None: the operator's).
    /// Only an admin whose key has no policy may change it.
    pub async fn set_hourly_limit(&self, admin: &Principal, limit: Option<i64>) -> Result<()> {
        admin.require(Operation::EmailDomainsManage)?;
        self.check_hourly_limit(limit)?;
        crate::store::project_settings::set_email_limit(
            self.db.pool(),
            &admin.project_id,
            limit,
            self.clock.now_ms(),
        )
        .await
    }

    /// Sends `draft` if its sender domain is verified for the caller's project and the hour's
    /// allowance has room. The reservation is taken back when the server refuses the message.
    pub async fn send(
        &self,
        who: &Principal,
        draft: Draft,
    ) -> std::result::Result<Sent, SendError> {
        let Some(mailer) = &self.mailer else {
            return Err(SendError::NotConfigured);
        };
        let domain = draft.sender_domain().map_err(Error::Invalid)?;
        match rows::find_domain(self.db.pool(), &who.project_id, &domain).await? {
            Some(d) if d.status == DomainStatus::Verified => {}
            other => {
                return Err(SendError::UnverifiedDomain {
                    domain,
                    added: other.is_some(),
                })
            }
        }
        let recipients = draft.recipients();
        let now = self.clock.now_ms();
        let window = now - HOUR_MS;
        // Built first: a message that cannot be built never takes a place in the hour.
        let message_id = format!("<{}@{domain}>", random_base62(24));
        let message = message::build(&draft, &message_id).map_err(SendError::Other)?;
        let id = new_id("email");
        let (_, limit) = self.limits(&who.project_id).await?;
        let reserved = rows::reserve_send(
            self.db.pool(),
            &rows::SendReservation {
                id: &id,
                project_id: &who.project_id,
                domain: &domain,
                recipients: recipients.len() as i64,
                now,
                window_start: window,
                limit: limit.into(),
            },
        )
        .await?;
        if !reserved {
            let oldest = rows::oldest_since(self.db.pool(), &who.project_id, window)
                .await?
                .unwrap_or(now);
            return Err(SendError::HourlyLimit {
                limit,
                retry_after_secs: ((oldest + HOUR_MS - now) / 1000).max(1),
            });
        }
        if let Err(e) = mailer.send(message).await {
            if let Err(release) = rows::release_send(self.db.pool(), &id).await {
                tracing::warn!(error = %release, "an unsent message still counts toward the hourly limit");
            }
            return Err(SendError::Smtp(e));
        }
        Ok(Sent {
            message_id,
            accepted: recipients,
        })
    }
}
