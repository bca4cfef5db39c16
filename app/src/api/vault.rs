//! Server functions of the Vault page: list names, set and delete secrets.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::accounts::SecretView;

#[cfg(feature = "ssr")]
use crate::ssr;

/// The project's vault as the portal lists it: names and times, never values.
#[server(endpoint = "vault_page")]
pub async fn vault_page() -> Result<Vec<SecretView>, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let secrets = ssr::wb()?.vault().list(&p).await?;
    Ok(secrets
        .into_iter()
        .map(|s| SecretView {
            name: s.name,
            id: s.id,
            created: display_time(s.created_at_ms),
            updated: display_time(s.updated_at_ms),
        })
        .collect())
}

/// Creates a secret or replaces its value. The value is never sent back.
#[server(endpoint = "set_secret")]
pub async fn set_secret(name: String, value: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let value = zeroize_on_drop(value);
    ssr::wb()?.vault().set(&p, name.trim(), &value).await?;
    Ok(())
}

#[cfg(feature = "ssr")]
fn zeroize_on_drop(s: String) -> workbench_core::vault::Secret {
    workbench_core::vault::Secret::from(s)
}

#[server(endpoint = "delete_secret")]
pub async fn delete_secret(name: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.vault().delete(&p, &name).await?;
    Ok(())
}
