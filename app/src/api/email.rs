//! Server functions of the Email page: the project's sender domains with the TXT record each
//! needs, whether sending is set up and how much of the hour's allowance is used; admins add,
//! verify and remove domains.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::email::{DomainStatus, EmailData, EmailDomain};

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "email_page")]
pub async fn email_page() -> Result<EmailData, AppError> {
    let p = ssr::principal().await?;
    let email = ssr::wb()?.email().clone();
    let status = email.status(&p).await?;
    let domains = email
        .list_domains(&p)
        .await?
        .into_iter()
        .map(|d| EmailDomain {
            id: d.id,
            domain: d.domain,
            status: d.status,
            record_name: d.dns_record.name,
            record_value: d.dns_record.value,
            created_at: d.created_at,
            verified_at: d.verified_at,
            last_checked_at: d.last_checked_at,
            last_error: d.last_error,
        })
        .collect();
    Ok(EmailData {
        domains,
        configured: status.configured,
        sent_last_hour: status.sent_last_hour,
        hourly_limit: status.hourly_limit,
        can_manage: p.allows(workbench_core::auth::Operation::EmailDomainsManage),
    })
}

#[server(endpoint = "add_email_domain")]
pub async fn add_email_domain(domain: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.email().add_domain(&p, &domain).await?;
    Ok(())
}

/// Looks the record up; a record that is missing or wrong is the message shown.
#[server(endpoint = "verify_email_domain")]
pub async fn verify_email_domain(id: String) -> Result<(), AppError> {
    use workbench_core::email::VerifyError;
    let p = ssr::principal().await?;
    match ssr::wb()?.email().verify_domain(&p, &id).await {
        Ok(_) => Ok(()),
        Err(VerifyError::NotProven(m) | VerifyError::Lookup(m)) => Err(AppError::Message(m)),
        Err(VerifyError::Other(e)) => Err(e.into()),
    }
}

#[server(endpoint = "remove_email_domain")]
pub async fn remove_email_domain(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    if !ssr::wb()?.email().delete_domain(&p, &id).await? {
        return Err(workbench_core::Error::NotFound.into());
    }
    Ok(())
}
