//! Members of a project: who is in it, adding someone, and removing someone, which ends every
//! credential they hold in the project in the same transaction.

use serde::{Deserialize, Serialize};

use super::{hash_password, normalize_email, Accounts, Principal, Role};
use crate::ids::new_id;
use crate::store::{self, connections::ConnectionRow, users::UserRow};
use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub user_id: String,
    pub email: String,
    pub role: Role,
    pub joined_at: i64,
}

/// What removing a member ended, for the caller to finish outside the transaction.
#[derive(Debug)]
pub struct Removed {
    /// The member's connections that were live, as they were (credential still sealed in the
    /// row): their tokens are revoked at the providers after the commit.
    pub connections: Vec<ConnectionRow>,
}

impl Accounts {
    /// An admin adds a person to their project with an initial password.
    pub async fn add_member(
        &self,
        admin: &Principal,
        email: &str,
        password: &str,
        role: Role,
    ) -> Result<Member> {
        admin.require(super::Operation::MembersManage)?;
        let email = normalize_email(email)?;
        let hash = hash_password(password).await?;
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        if store::users::by_email(&mut *tx, &email).await?.is_some() {
            return Err(Error::Conflict(format!(
                "a user with email {email} already exists"
            )));
        }
        let user = UserRow {
            id: new_id("usr"),
            email: email.clone(),
            password_hash: hash,
            created_at: now,
        };
        store::users::insert(&mut *tx, &user).await?;
        store::projects::upsert_membership(
            &mut *tx,
            &admin.project_id,
            &user.id,
            role.as_str(),
            now,
        )
        .await?;
        tx.commit().await?;
        self.db.changed();
        Ok(Member {
            user_id: user.id,
            email,
            role,
            joined_at: now,
        })
    }

    pub async fn members(&self, who: &Principal) -> Result<Vec<Member>> {
        let rows = store::users::of_project(self.db.pool(), &who.project_id).await?;
        Ok(rows
            .into_iter()
            .map(|r| Member {
                user_id: r.id,
                email: r.email,
                role: Role::parse(&r.role).unwrap_or(Role::Member),
                joined_at: r.created_at,
            })
            .collect())
    }

    /// An admin removes someone from their project. In one transaction the membership ends
    /// and with it every way the person acted here: their API keys, the MCP clients they
    /// approved (grants and tokens), their curl_session proxy tokens and their connections; the
    /// calls they left waiting for a confirmation expire.
    /// An admin cannot remove themselves, so a project always keeps one.
    pub async fn remove_member(&self, admin: &Principal, user_id: &str) -> Result<Removed> {
        admin.require(super::Operation::MembersManage)?;
        if user_id == admin.user_id {
            return Err(Error::Invalid(
                "you cannot remove yourself; another admin can".into(),
            ));
        }
        let project = admin.project_id.as_str();
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        if !store::projects::delete_membership(&mut *tx, project, user_id).await? {
            return Err(Error::NotFound);
        }
        let connections = revoke_what_a_member_held(&mut tx, project, user_id, now).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(user_id, by = %admin.user_id, project, "member removed");
        Ok(Removed { connections })
    }
}

/// Revokes what a former member held in the project: API keys, MCP OAuth grants, proxy tokens,
/// held calls and connections (returned, so their tokens can be revoked upstream). Used when an
/// admin removes a member and when an identity provider's groups no longer let them in.
pub(crate) async fn revoke_what_a_member_held(
    tx: &mut store::Tx,
    project: &str,
    user_id: &str,
    now: i64,
) -> Result<Vec<store::connections::ConnectionRow>> {
    store::api_keys::revoke_of_member(&mut **tx, project, user_id, now).await?;
    store::oauth::revoke_grants_of_member(tx, project, user_id, now).await?;
    store::proxy_tokens::revoke_of_member(&mut **tx, project, user_id, now).await?;
    store::confirmations::expire_of_member(&mut **tx, project, user_id).await?;
    let mut connections = Vec::new();
    for row in store::connections::list_for_user(&mut **tx, project, user_id).await? {
        if row.status == store::connections::ConnectionStatus::Revoked {
            continue;
        }
        store::connections::set_status(
            &mut **tx,
            &row.id,
            store::connections::ConnectionStatus::Revoked,
            now,
        )
        .await?;
        connections.push(row);
    }
    Ok(connections)
}
