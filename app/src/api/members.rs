//! Server functions of the Members page: list the project's members, add and remove one.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::accounts::{MemberView, MembersData, Role};

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "members_page")]
pub async fn members_page() -> Result<MembersData, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let members = ssr::wb()?
        .accounts()
        .members(&p)
        .await?
        .into_iter()
        .map(|m| MemberView {
            user_id: m.user_id.clone(),
            is_you: m.user_id == p.user_id,
            email: m.email,
            role: m.role,
            joined: display_time(m.joined_at),
        })
        .collect();
    Ok(MembersData {
        members,
        can_manage: p.allows(workbench_core::auth::Operation::MembersManage),
    })
}

#[server(endpoint = "add_member")]
pub async fn add_member(email: String, password: String, role: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let role = Role::parse(&role)
        .ok_or_else(|| AppError::Message("role must be admin or member".into()))?;
    ssr::wb()?
        .accounts()
        .add_member(&p, &email, &password, role)
        .await?;
    Ok(())
}

/// Removes a member: their keys, approved MCP clients and connections end with it.
#[server(endpoint = "remove_member")]
pub async fn remove_member(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.remove_member(&p, &id).await?;
    Ok(())
}
