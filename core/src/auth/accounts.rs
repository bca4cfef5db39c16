//! Account operations: first-admin setup, users, sign-in with throttling, and API key issue /
//! list / revoke / authenticate. Members of a project are in `members.rs`.

use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::principals::touch_from;
use super::{
    hash_password, normalize_email, password::dummy_hash, verify_password, ApiKey, Principal, Role,
};
use crate::clock::Clock;
use crate::ids::new_id;
use crate::store::{self, api_keys::ApiKeyRow, projects::ProjectRow, users::UserRow, Db};
use crate::{Error, Result};

/// Sign-in failures allowed per account within the window before it is throttled.
pub const ACCOUNT_FAILURE_LIMIT: i64 = 5;
/// Sign-in failures allowed per client address within the window.
pub const IP_FAILURE_LIMIT: i64 = 20;
pub const FAILURE_WINDOW_MS: i64 = 15 * 60 * 1000;
/// `last_used_at` of a key is written at most this often.
const KEY_TOUCH_GRANULARITY_MS: i64 = 60 * 1000;
/// The highest per-key rate limit, in calls per minute.
pub const MAX_RATE_LIMIT: i64 = 100_000;
pub const DEFAULT_PROJECT_NAME: &str = "default";
const MAX_NAME_CHARS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub created_at: i64,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> Self {
        User {
            id: r.id,
            email: r.email,
            created_at: r.created_at,
        }
    }
}

/// An API key as listed: never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyInfo {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub user_id: String,
    pub owner_email: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub policy_id: Option<String>,
    pub rate_limit_per_minute: Option<i64>,
    /// The tool sets the key is limited to (None: not limited).
    pub tool_sets: Option<Vec<String>>,
}

impl From<ApiKeyRow> for ApiKeyInfo {
    fn from(r: ApiKeyRow) -> Self {
        ApiKeyInfo {
            id: r.id,
            name: r.name,
            prefix: r.key_prefix,
            user_id: r.user_id,
            owner_email: r.owner_email.unwrap_or_default(),
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
            policy_id: r.policy_id,
            rate_limit_per_minute: r.rate_limit_per_minute,
            tool_sets: parse_key_sets(r.tool_sets.as_deref()),
        }
    }
}

/// A freshly issued key: the only time the secret exists outside the caller's hands.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub info: ApiKeyInfo,
    pub secret: ApiKey,
}

#[derive(Clone)]
pub struct Accounts {
    pub(super) db: Db,
    clock: Arc<dyn Clock>,
    /// Key → principal, good while the database's change epoch stands (`principals.rs`).
    principals: Arc<super::principals::Principals>,
    /// The operator's setting: off, only break-glass accounts sign in with a password.
    password_sign_in: bool,
}

fn clean_name(raw: &str, what: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid(format!(
            "invalid {what}; use 1 to {MAX_NAME_CHARS} printable characters"
        )));
    }
    Ok(name.to_owned())
}

impl Accounts {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Self {
        Accounts {
            db,
            clock,
            principals: Arc::default(),
            password_sign_in: true,
        }
    }

    /// Turns password sign-in on or off (operator setting); break-glass accounts keep it.
    pub fn with_password_sign_in(mut self, on: bool) -> Self {
        self.password_sign_in = on;
        self
    }

    pub fn password_sign_in(&self) -> bool {
        self.password_sign_in
    }

    /// Marks the account with this email as break-glass (it signs in with its password even
    /// when password sign-in is off), or not. Operator path (CLI).
    pub async fn set_break_glass(&self, email: &str, on: bool) -> Result<()> {
        let email = normalize_email(email)?;
        let user = store::users::by_email(self.db.pool(), &email)
            .await?
            .ok_or_else(|| Error::invalid(format!("no user with email {email}")))?;
        store::users::set_break_glass(self.db.pool(), &user.id, on).await?;
        tracing::info!(user_id = %user.id, on, "break-glass sign-in changed");
        Ok(())
    }

    pub(super) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// True once a first admin exists (from the portal or the CLI).
    pub async fn is_set_up(&self) -> Result<bool> {
        store::projects::is_set_up(self.db.pool()).await
    }

    /// Creates the first admin and its project. Refused once the instance is set up, also when
    /// two requests race: exactly one wins.
    pub async fn setup_first_admin(
        &self,
        email: &str,
        password: &str,
        project_name: &str,
    ) -> Result<Principal> {
        let email = normalize_email(email)?;
        let project_name = clean_name(project_name, "project name")?;
        let hash = hash_password(password).await?;
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        if !store::projects::mark_set_up(&mut *tx, now).await? {
            return Err(Error::Conflict(
                "workbench is already set up; sign in instead".into(),
            ));
        }
        let (project, _) = self.ensure_project(&mut tx, &project_name, now).await?;
        let user = UserRow {
            id: new_id("usr"),
            email: email.clone(),
            password_hash: hash,
            created_at: now,
        };
        store::users::insert(&mut *tx, &user).await?;
        store::projects::upsert_membership(&mut *tx, &project.id, &user.id, "admin", now).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(user_id = %user.id, project_id = %project.id, "first admin created");
        Ok(Principal {
            user_id: user.id,
            email,
            project_id: project.id,
            project_name: project.name,
            role: Role::Admin,
            api_key_id: None,
            via: super::Via::Session,
            oauth_grant_id: None,
            policy_id: None,
            policy_generation: None,
            vault_generation: None,
            credentials_generation: None,
            rate_limit_per_minute: None,
            tool_sets: None,
            user_policy_id: None,
        })
    }

    async fn ensure_project(
        &self,
        tx: &mut store::Tx,
        name: &str,
        now: i64,
    ) -> Result<(ProjectRow, bool)> {
        if let Some(p) = store::projects::by_name(&mut **tx, name).await? {
            return Ok((p, false));
        }
        let p = ProjectRow {
            id: new_id("prj"),
            name: name.to_owned(),
            created_at: now,
        };
        store::projects::insert(&mut **tx, &p).await?;
        Ok((p, true))
    }

    /// Operator path (CLI): creates a user in `project` (created if missing; the oldest project,
    /// or a new "default" one, when `None`) and marks the instance as set up.
    pub async fn create_user(
        &self,
        email: &str,
        password: &str,
        project: Option<&str>,
        role: Role,
    ) -> Result<(User, ProjectRow)> {
        let email = normalize_email(email)?;
        let project = project.map(|p| clean_name(p, "project name")).transpose()?;
        let hash = hash_password(password).await?;
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        if store::users::by_email(&mut *tx, &email).await?.is_some() {
            return Err(Error::Conflict(format!(
                "a user with email {email} already exists"
            )));
        }
        let project = match project {
            Some(name) => self.ensure_project(&mut tx, &name, now).await?.0,
            None => match store::projects::first(&mut *tx).await? {
                Some(p) => p,
                None => {
                    self.ensure_project(&mut tx, DEFAULT_PROJECT_NAME, now)
                        .await?
                        .0
                }
            },
        };
        let user = UserRow {
            id: new_id("usr"),
            email,
            password_hash: hash,
            created_at: now,
        };
        store::users::insert(&mut *tx, &user).await?;
        store::projects::upsert_membership(&mut *tx, &project.id, &user.id, role.as_str(), now)
            .await?;
        store::projects::mark_set_up(&mut *tx, now).await?;
        tx.commit().await?;
        self.db.changed();
        Ok((user.into(), project))
    }

    /// Checks email and password. Unknown email and wrong password answer the same error after
    /// the same work; more than `ACCOUNT_FAILURE_LIMIT` failures for the account or
    /// `IP_FAILURE_LIMIT` for the client address within the window answer `Throttled`, before
    /// the password is even looked at.
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        client_ip: Option<IpAddr>,
    ) -> Result<Principal> {
        let now = self.now();
        let email_key = email.trim().to_lowercase();
        let account_scope = format!("acct:{email_key}");
        let ip_scope = client_ip.map(|ip| format!("ip:{ip}"));
        // Check and count in one step: the attempt is counted as a failure before the password
        // is checked (and forgiven if it was right), so parallel guesses cannot all pass a
        // check that none of them has counted yet.
        let mut scopes = vec![(account_scope.as_str(), ACCOUNT_FAILURE_LIMIT)];
        if let Some(scope) = &ip_scope {
            scopes.push((scope.as_str(), IP_FAILURE_LIMIT));
        }
        self.count_attempt(&scopes, now).await?;
        let user = match normalize_email(email) {
            Ok(e) => store::users::by_email(self.db.pool(), &e).await?,
            Err(_) => None,
        };
        let ok = match &user {
            Some(u) => verify_password(password, &u.password_hash).await,
            None => verify_password(password, dummy_hash().await)
                .await
                .map(|_| false),
        };
        let ok = match ok {
            Ok(ok) => ok,
            Err(e) => {
                // No hashing slot: not a guess, so it is not counted.
                self.forgive_attempt(&scopes, now).await?;
                return Err(e);
            }
        };
        let principal = match (ok, user) {
            (true, Some(u)) => self.principal_for_user(&u.id).await?,
            _ => None,
        };
        match principal {
            Some(p) => {
                store::sign_in::clear(self.db.pool(), &account_scope).await?;
                self.forgive_attempt(&scopes[1..], now).await?;
                if !self.password_sign_in
                    && !store::users::is_break_glass(self.db.pool(), &p.user_id).await?
                {
                    return Err(Error::Forbidden("password sign-in is turned off; sign in with your organisation's identity provider"));
                }
                Ok(p)
            }
            None => Err(Error::Unauthorized("invalid email or password")),
        }
    }

    /// Counts a sign-in attempt in every scope, or refuses it (`Throttled`) when a scope has
    /// reached its limit in the window: one transaction holding each scope's lock.
    async fn count_attempt(&self, scopes: &[(&str, i64)], now: i64) -> Result<()> {
        let mut tx = self.db.begin_write().await?;
        let mut sorted = scopes.to_vec();
        sorted.sort();
        for (scope, _) in &sorted {
            store::sign_in::lock_scope(&mut *tx, scope, now).await?;
        }
        for (scope, limit) in &sorted {
            let (count, oldest) =
                store::sign_in::failures_since(&mut *tx, scope, now - FAILURE_WINDOW_MS).await?;
            if count >= *limit {
                tx.commit().await?;
                let frees_at = oldest.unwrap_or(now) + FAILURE_WINDOW_MS;
                let retry_after_secs = ((frees_at - now).max(1000) / 1000) as u64;
                return Err(Error::Throttled { retry_after_secs });
            }
        }
        for (scope, _) in &sorted {
            store::sign_in::record_failure(&mut *tx, scope, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn forgive_attempt(&self, scopes: &[(&str, i64)], now: i64) -> Result<()> {
        for (scope, _) in scopes {
            store::sign_in::forget_at(self.db.pool(), scope, now).await?;
        }
        Ok(())
    }

    /// The user acting in their home (oldest) project, or None when the user or every
    /// membership is gone.
    pub async fn principal_for_user(&self, user_id: &str) -> Result<Option<Principal>> {
        let Some(user) = store::users::by_id(self.db.pool(), user_id).await? else {
            return Ok(None);
        };
        let memberships = store::projects::memberships_of_user(self.db.pool(), user_id).await?;
        Ok(memberships.into_iter().next().map(|m| Principal {
            user_policy_id: m.policy_id,
            user_id: user.id,
            email: user.email,
            project_id: m.project_id,
            project_name: m.project_name,
            role: Role::parse(&m.role).unwrap_or(Role::Member),
            api_key_id: None,
            via: super::Via::Session,
            oauth_grant_id: None,
            policy_id: None,
            policy_generation: None,
            vault_generation: None,
            credentials_generation: None,
            rate_limit_per_minute: None,
            tool_sets: None,
        }))
    }

    /// The principal a live MCP OAuth grant acts as: its user in the grant's project, under
    /// the policy chosen at consent (D21); None when the grant was revoked or the user left.
    pub async fn principal_for_grant(&self, grant_id: &str) -> Result<Option<Principal>> {
        match store::oauth::get_grant(self.db.pool(), grant_id).await? {
            Some(grant) => self.grant_principal(&grant).await,
            None => Ok(None),
        }
    }

    pub(crate) async fn grant_principal(
        &self,
        grant: &store::oauth::GrantRow,
    ) -> Result<Option<Principal>> {
        if grant.revoked_at.is_some() {
            return Ok(None);
        }
        let Some(mut who) = self.principal_for_user(&grant.user_id).await? else {
            return Ok(None);
        };
        if who.project_id != grant.project_id {
            return Ok(None);
        }
        who.policy_id = grant.policy_id.clone();
        who.rate_limit_per_minute = grant.rate_limit_per_minute;
        who.via = super::Via::OAuthGrant;
        who.oauth_grant_id = Some(grant.id.clone());
        Ok(Some(who))
    }

    pub async fn user(&self, user_id: &str) -> Result<Option<User>> {
        Ok(store::users::by_id(self.db.pool(), user_id)
            .await?
            .map(User::from))
    }

    /// Issues a key for the principal's own user in its project.
    pub async fn create_api_key(&self, who: &Principal, name: &str) -> Result<NewApiKey> {
        self.create_api_key_with_policy(who, name, None).await
    }

    /// Issues a key with a policy of the project attached (`None`: the project's default
    /// applies to it).
    pub async fn create_api_key_with_policy(
        &self,
        who: &Principal,
        name: &str,
        policy_id: Option<&str>,
    ) -> Result<NewApiKey> {
        let name = clean_name(name, "key name")?;
        if let Some(p) = policy_id {
            if store::policies::get(self.db.pool(), &who.project_id, p)
                .await?
                .is_none()
            {
                return Err(Error::invalid(format!(
                    "policy_id {p:?} is not a policy of this project"
                )));
            }
        }
        let secret = ApiKey::generate();
        let row = ApiKeyRow {
            id: new_id("key"),
            project_id: who.project_id.clone(),
            user_id: who.user_id.clone(),
            name,
            key_prefix: secret.display_prefix(),
            created_at: self.now(),
            last_used_at: None,
            revoked_at: None,
            owner_email: Some(who.email.clone()),
            policy_id: policy_id.map(str::to_owned),
            rate_limit_per_minute: None,
            tool_sets: None,
        };
        store::api_keys::insert(self.db.pool(), &row, &secret.hash()).await?;
        Ok(NewApiKey {
            info: row.into(),
            secret,
        })
    }

    /// Operator path (CLI): a key for the user with this email in their home project.
    pub async fn create_api_key_for_email(
        &self,
        email: &str,
        name: &str,
        policy_id: Option<&str>,
    ) -> Result<NewApiKey> {
        let email = normalize_email(email)?;
        let user = store::users::by_email(self.db.pool(), &email)
            .await?
            .ok_or_else(|| Error::invalid(format!("no user with email {email}")))?;
        let principal = self
            .principal_for_user(&user.id)
            .await?
            .ok_or_else(|| Error::invalid(format!("user {email} belongs to no project")))?;
        self.create_api_key_with_policy(&principal, name, policy_id)
            .await
    }

    /// Admins see every key of the project; members see their own.
    pub async fn list_api_keys(&self, who: &Principal) -> Result<Vec<ApiKeyInfo>> {
        let owner = (!who.allows(super::Operation::ApiKeysManage)).then_some(who.user_id.as_str());
        let rows = store::api_keys::list(self.db.pool(), &who.project_id, owner).await?;
        Ok(rows.into_iter().map(ApiKeyInfo::from).collect())
    }

    /// Revokes a key of the project: its owner or an admin may. Another member's key and an
    /// unknown id both answer `NotFound`.
    pub async fn revoke_api_key(&self, who: &Principal, key_id: &str) -> Result<()> {
        let Some(key) = store::api_keys::by_id(self.db.pool(), &who.project_id, key_id).await?
        else {
            return Err(Error::NotFound);
        };
        if key.user_id != who.user_id && !who.allows(super::Operation::ApiKeysManage) {
            return Err(Error::NotFound);
        }
        if key.revoked_at.is_some() {
            return Ok(());
        }
        store::api_keys::revoke(self.db.pool(), &who.project_id, key_id, self.now()).await?;
        self.db.changed();
        tracing::info!(key_id, by = %who.user_id, "api key revoked");
        Ok(())
    }

    /// The principal behind a bearer API key. Malformed, unknown and revoked keys, and keys whose
    /// owner left the project, are all `Unauthorized`.
    pub async fn authenticate_api_key(&self, raw: &str) -> Result<Principal> {
        const BAD: Error = Error::Unauthorized("invalid or revoked api key");
        let key = ApiKey::parse(raw).ok_or(BAD)?;
        let hash = key.hash();
        let now = self.now();
        // Taken before the read: a change committed meanwhile makes the entry stale at once.
        let epoch = self.db.changes().snapshot();
        if let Some(hit) = epoch.and_then(|e| self.principals.get(&hash, e)) {
            let principal = hit.principal.clone().ok_or(BAD)?;
            if hit.touch_due(now, KEY_TOUCH_GRANULARITY_MS) {
                let (db, id) = (
                    self.db.clone(),
                    principal.api_key_id.clone().unwrap_or_default(),
                );
                tokio::spawn(async move {
                    if let Err(e) =
                        store::api_keys::touch(db.pool(), &id, now, KEY_TOUCH_GRANULARITY_MS).await
                    {
                        tracing::warn!(error = %e, "could not record an api key's last use");
                    }
                });
            }
            return Ok(principal);
        }
        let row = store::api_keys::principal_by_hash(self.db.pool(), &hash)
            .await?
            .ok_or(BAD)?;
        let (due, touched) = touch_from(row.last_used_at, now, KEY_TOUCH_GRANULARITY_MS);
        let principal = row.revoked_at.is_none().then(|| key_principal(row));
        if let Some(e) = epoch {
            self.principals.put(hash, e, principal.clone(), (), touched);
        }
        let principal = principal.ok_or(BAD)?;
        if due {
            let id = principal.api_key_id.as_deref().unwrap_or_default();
            store::api_keys::touch(self.db.pool(), id, now, KEY_TOUCH_GRANULARITY_MS).await?;
        }
        Ok(principal)
    }

    /// The principal behind a live key of the project, by its id (a held call runs as the key
    /// that made it); None when the key was revoked or its owner left.
    pub async fn principal_for_key(
        &self,
        project_id: &str,
        key_id: &str,
    ) -> Result<Option<Principal>> {
        let row = store::api_keys::principal_by_id(self.db.pool(), project_id, key_id).await?;
        Ok(row.filter(|r| r.revoked_at.is_none()).map(key_principal))
    }

    /// Sets a key's rate limit in calls per minute (`None`: no limit), 1 to 100,000.
    pub async fn set_rate_limit(
        &self,
        who: &Principal,
        key_id: &str,
        per_minute: Option<i64>,
    ) -> Result<()> {
        who.require(super::Operation::ApiKeysManage)?;
        if per_minute.is_some_and(|n| !(1..=MAX_RATE_LIMIT).contains(&n)) {
            return Err(Error::invalid(format!(
                "rate_limit_per_minute must be 1 to {MAX_RATE_LIMIT}, or null for no limit"
            )));
        }
        if !store::api_keys::set_rate_limit(self.db.pool(), &who.project_id, key_id, per_minute)
            .await?
        {
            return Err(Error::NotFound);
        }
        self.db.changed();
        tracing::info!(key_id, per_minute = ?per_minute, by = %who.user_id, "key rate limit changed");
        Ok(())
    }

    /// Removes expired sessions and old sign-in failures.
    pub async fn purge_expired(&self) -> Result<()> {
        let now = self.now();
        store::sessions::delete_expired(self.db.pool(), now).await?;
        store::sign_in::delete_older_than(self.db.pool(), now - FAILURE_WINDOW_MS).await?;
        Ok(())
    }
}

/// A key's stored tool sets; an unreadable list limits the key to no set at all (fail closed).
fn parse_key_sets(json: Option<&str>) -> Option<Vec<String>> {
    json.map(store::tool_sets::parse_slugs)
}

fn key_principal(row: store::api_keys::KeyPrincipalRow) -> Principal {
    Principal {
        user_id: row.user_id,
        email: row.email,
        project_id: row.project_id,
        project_name: row.project_name,
        role: Role::parse(&row.role).unwrap_or(Role::Member),
        api_key_id: Some(row.id),
        via: super::Via::ApiKey,
        oauth_grant_id: None,
        policy_id: row.policy_id,
        policy_generation: Some(row.policy_generation),
        vault_generation: Some(row.vault_generation),
        credentials_generation: Some(row.credentials_generation),
        rate_limit_per_minute: row.rate_limit_per_minute,
        tool_sets: parse_key_sets(row.tool_sets.as_deref()),
        user_policy_id: row.user_policy_id,
    }
}
