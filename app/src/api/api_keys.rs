//! Server functions of the API keys page: list, create (secret shown once) and revoke keys.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::accounts::{ApiKeyView, ApiKeysData, NewApiKeyView};

#[cfg(feature = "ssr")]
use crate::ssr;

#[cfg(feature = "ssr")]
const NEW_KEY_FLASH: &str = "flash_new_api_key";

#[server(endpoint = "api_keys_page")]
pub async fn api_keys_page() -> Result<ApiKeysData, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let keys = ssr::wb()?
        .accounts()
        .list_api_keys(&p)
        .await?
        .into_iter()
        .map(|k| ApiKeyView {
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            owner: k.owner_email,
            created: display_time(k.created_at),
            last_used: k.last_used_at.map(display_time),
            revoked: k.revoked_at.map(display_time),
            policy_id: k.policy_id,
        })
        .collect();
    let can_manage_policies = p.allows(workbench_core::auth::Operation::PoliciesManage);
    let policies = if can_manage_policies {
        ssr::wb()?.policies().choices(&p).await?
    } else {
        Vec::new()
    };
    let session = ssr::session().await?;
    let just_created = session
        .remove::<NewApiKeyView>(NEW_KEY_FLASH)
        .await
        .ok()
        .flatten();
    Ok(ApiKeysData {
        keys,
        policies,
        can_manage_policies,
        just_created,
    })
}

#[server(endpoint = "create_api_key")]
pub async fn create_api_key(name: String) -> Result<NewApiKeyView, AppError> {
    let p = ssr::principal().await?;
    let key = ssr::wb()?.accounts().create_api_key(&p, &name).await?;
    let view = NewApiKeyView {
        name: key.info.name,
        secret: key.secret.expose().to_owned(),
    };
    if ssr::is_plain_form_post() {
        // Without JavaScript the browser is redirected back to the page, which shows this once.
        ssr::session()
            .await?
            .insert(NEW_KEY_FLASH, &view)
            .await
            .map_err(|_| {
                AppError::Message("cannot keep the new key for display; try again".into())
            })?;
    }
    Ok(view)
}

#[server(endpoint = "revoke_api_key")]
pub async fn revoke_api_key(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.accounts().revoke_api_key(&p, &id).await?;
    Ok(())
}
