//! Server functions of the Egress page: list, add and remove allowed host patterns.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::accounts::EgressData;

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "egress_page")]
pub async fn egress_page() -> Result<EgressData, AppError> {
    let p = ssr::principal().await?;
    let patterns = ssr::wb()?.egress().list(&p).await?;
    Ok(EgressData {
        patterns,
        can_manage: p.allows(workbench_core::auth::Operation::EgressManage),
    })
}

#[server(endpoint = "add_egress_rule")]
pub async fn add_egress_rule(pattern: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.egress().add(&p, &pattern).await?;
    Ok(())
}

#[server(endpoint = "remove_egress_rule")]
pub async fn remove_egress_rule(pattern: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.egress().remove(&p, &pattern).await?;
    Ok(())
}
