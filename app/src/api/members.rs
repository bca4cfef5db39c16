//! Server functions of the Members page: list the project's members and add one.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    pub email: String,
    pub role: String,
    pub joined: String,
    pub is_you: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersData {
    pub members: Vec<MemberView>,
    pub can_manage: bool,
}

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
            is_you: m.user_id == p.user_id,
            email: m.email,
            role: m.role.as_str().to_owned(),
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
    use workbench_core::auth::Role;
    let p = ssr::principal().await?;
    let role = Role::parse(&role)
        .ok_or_else(|| AppError::Message("role must be admin or member".into()))?;
    ssr::wb()?
        .accounts()
        .add_member(&p, &email, &password, role)
        .await?;
    Ok(())
}
