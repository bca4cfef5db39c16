//! Server functions of single sign-on: what the sign-in page offers (providers, whether
//! passwords are accepted), the admins' Sign-in page (providers and their mappings) and the
//! mapping preview ("what would a person with these groups get").

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::sso::{SignInChoices, SsoPageData, SsoProvider};

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "sign_in_options")]
pub async fn sign_in_options() -> Result<SignInChoices, AppError> {
    let wb = ssr::wb()?;
    Ok(wb
        .sso()
        .sign_in_options(wb.accounts().password_sign_in())
        .await?)
}

#[server(endpoint = "sso_page")]
pub async fn sso_page() -> Result<SsoPageData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let providers = wb.sso().list(&p).await?;
    let policies = wb
        .policies()
        .list(&p)
        .await?
        .into_iter()
        .map(|x| (x.id, x.name))
        .collect();
    Ok(SsoPageData {
        providers,
        policies,
        password_sign_in: wb.accounts().password_sign_in(),
    })
}

/// The preview in words: the role and policy a person with `groups` (comma separated) gets.
#[server(endpoint = "sso_preview")]
pub async fn sso_preview(slug: String, groups: String) -> Result<String, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let groups: Vec<String> = groups
        .split(',')
        .map(|g| g.trim().to_owned())
        .filter(|g| !g.is_empty())
        .collect();
    let preview = wb.sso().preview(&p, &slug, &groups).await?;
    let Some(role) = preview.role else {
        return Ok(
            "cannot sign in: none of these groups is mapped and there is no default role".into(),
        );
    };
    let policy = match &preview.policy_id {
        Some(id) => {
            let name = wb
                .policies()
                .get(&p, id)
                .await
                .map(|x| x.name)
                .unwrap_or_else(|_| id.clone());
            format!("capped by policy {name}")
        }
        None => "with no policy cap beyond the project's".into(),
    };
    let why = match &preview.matched {
        Some(g) => format!("matched group {g}"),
        None => "the default".into(),
    };
    Ok(format!("signs in as {} {policy} ({why})", role.as_str()))
}
