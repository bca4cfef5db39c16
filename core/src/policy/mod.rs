//! Policies (D14, D20): a project's tool allowlists, which one applies to a caller (the key's
//! own, else the project's default, else none: everything allowed), and managing them. The
//! rules themselves are in rules.rs; the engine asks `decide` for every execution and every
//! listing. Policies are cached per project and reloaded when the project's policy generation
//! (read with the API key) moves, so a change made on any instance applies to the next request.
//! preview.rs answers what a policy does with the project's tools (a key's preview, a pattern
//! list's check).

pub mod limits;
mod preview;
mod rules;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

pub use limits::{Counted, Limit, Period};
pub use preview::{check_patterns, lines};
pub use rules::{
    pattern_matches, pattern_problem, Decision, Mode, Rule, ToolAllowlist, MAX_PATTERNS,
    MAX_PATTERN_CHARS,
};

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::ids::new_id;
use crate::store::{self, policies::PolicyRow, Db};
use crate::{Error, Result};

const MAX_NAME_CHARS: usize = 100;

/// A policy as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub id: String,
    pub object: String,
    pub name: String,
    pub tool_allowlist: ToolAllowlist,
    /// Rate limits and quotas (`limits.rs`).
    pub limits: Vec<Limit>,
    pub default: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// What an admin sends to create or replace a policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyInput {
    pub name: String,
    pub tool_allowlist: ToolAllowlist,
    #[serde(default)]
    pub limits: Vec<Limit>,
    #[serde(default)]
    pub default: bool,
}

impl Policy {
    fn from_row(r: PolicyRow) -> Result<Policy> {
        let tool_allowlist: ToolAllowlist = serde_json::from_str(&r.tool_allowlist)
            .map_err(|e| Error::internal(format!("policy {} has unreadable rules: {e}", r.id)))?;
        let limits: Vec<Limit> = serde_json::from_str(&r.limits)
            .map_err(|e| Error::internal(format!("policy {} has unreadable limits: {e}", r.id)))?;
        Ok(Policy {
            id: r.id,
            object: "policy".into(),
            name: r.name,
            tool_allowlist,
            limits,
            default: r.is_default != 0,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
        })
    }

    pub fn decide(&self, tool: &str) -> Decision {
        self.tool_allowlist.decide(&self.id, tool)
    }
}

/// A project's policies as loaded at one generation.
#[derive(Debug, Default)]
pub struct ProjectPolicies {
    by_id: HashMap<String, Arc<Policy>>,
    default: Option<Arc<Policy>>,
}

/// The policies that apply to one caller: the key's or grant's own (else the project's default;
/// None: everything is allowed) and the cap the user's groups give them (single sign-on; None:
/// no cap). A tool runs only when both allow it.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub policy: Option<Arc<Policy>>,
    pub cap: Option<Arc<Policy>>,
}

impl Applied {
    pub fn one(policy: Option<Arc<Policy>>) -> Applied {
        Applied { policy, cap: None }
    }

    /// Every policy that applies, the caller's own first.
    pub fn policies(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policy.iter().chain(self.cap.iter())
    }

    /// What both policies say: a denial by either denies, else a confirmation by either holds
    /// the call, else it runs.
    pub fn decide(&self, tool: &str) -> Decision {
        let mut held = None;
        for p in self.policies() {
            match p.decide(tool) {
                Decision::Deny(rule) => return Decision::Deny(rule),
                Decision::Confirm(rule) => {
                    held.get_or_insert(rule);
                }
                Decision::Run => {}
            }
        }
        held.map_or(Decision::Run, Decision::Confirm)
    }

    /// Whether `name` is on the allow list of every policy that applies.
    pub fn explicitly_allows(&self, name: &str) -> bool {
        self.policies().all(|p| {
            p.tool_allowlist
                .allow
                .iter()
                .any(|pattern| rules::pattern_matches(pattern, name))
        })
    }
}

/// A project's policies with the generation they were read at.
type Cached = (i64, Arc<ProjectPolicies>);

#[derive(Clone)]
pub struct Policies {
    db: Db,
    clock: Arc<dyn Clock>,
    /// Per project: the policies generation the copy was read at, and the policies.
    cache: Arc<RwLock<HashMap<String, Cached>>>,
}

/// A name an admin gives (a policy's, a tool set's): trimmed, 1 to 100 printable characters.
pub(crate) fn clean_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(Error::invalid(format!(
            "name must be 1 to {MAX_NAME_CHARS} printable characters"
        )));
    }
    Ok(name.to_owned())
}

/// What a caller attached to a policy that is gone gets (it cannot be: deleting one in use is
/// refused): nothing, rather than everything.
fn missing(id: &str) -> Arc<Policy> {
    Arc::new(Policy {
        id: id.to_owned(),
        object: "policy".into(),
        name: "(missing)".into(),
        tool_allowlist: ToolAllowlist {
            mode: Mode::Allowlist,
            allow: vec![],
            deny: vec![],
            require_confirmation: vec![],
        },
        limits: vec![],
        default: false,
        created_at: String::new(),
        updated_at: String::new(),
    })
}

fn forbid_limited(who: &Principal) -> Result<()> {
    who.require(crate::auth::Operation::PoliciesManage)
}

impl Policies {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Policies {
        Policies {
            db,
            clock,
            cache: Default::default(),
        }
    }

    /// The policies `who` runs under: the key's own, else the project's default, else none;
    /// and the cap of the user's groups. A policy that is gone gets nothing rather than
    /// everything.
    pub async fn applied(&self, who: &Principal) -> Result<Applied> {
        let project = self.project(&who.project_id, who.policy_generation).await?;
        let find = |id: &String| {
            project
                .by_id
                .get(id)
                .cloned()
                .unwrap_or_else(|| missing(id))
        };
        Ok(Applied {
            policy: match &who.policy_id {
                Some(id) => Some(find(id)),
                None => project.default.clone(),
            },
            // The same policy twice would count its limits twice.
            cap: who
                .user_policy_id
                .as_ref()
                .filter(|cap| Some(*cap) != who.policy_id.as_ref())
                .map(find),
        })
    }

    /// The policies an API key of the project runs under (for the preview): its own (else the
    /// default) and its owner's cap.
    pub async fn applied_to_key(
        &self,
        project_id: &str,
        policy_id: Option<&str>,
        cap: Option<&str>,
    ) -> Result<Applied> {
        let project = self.project(project_id, None).await?;
        Ok(Applied {
            policy: match policy_id {
                Some(id) => project.by_id.get(id).cloned(),
                None => project.default.clone(),
            },
            cap: cap.map(|id| {
                project
                    .by_id
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| missing(id))
            }),
        })
    }

    async fn project(
        &self,
        project_id: &str,
        generation: Option<i64>,
    ) -> Result<Arc<ProjectPolicies>> {
        let generation = match generation {
            Some(g) => g,
            None => store::policies::generation(self.db.pool(), project_id).await?,
        };
        if let Some((g, p)) = self
            .cache
            .read()
            .expect("policy cache lock")
            .get(project_id)
        {
            if *g == generation {
                return Ok(p.clone());
            }
        }
        let rows = store::policies::list(self.db.pool(), project_id).await?;
        let mut loaded = ProjectPolicies::default();
        for row in rows {
            match Policy::from_row(row) {
                Ok(p) => {
                    let p = Arc::new(p);
                    if p.default {
                        loaded.default = Some(p.clone());
                    }
                    loaded.by_id.insert(p.id.clone(), p);
                }
                // Policies are validated before they are stored; one that no longer reads is
                // logged, and keys attached to it get nothing (see `applied`).
                Err(e) => tracing::error!(error = %e, "a stored policy cannot be read"),
            }
        }
        let loaded = Arc::new(loaded);
        let mut cache = self.cache.write().expect("policy cache lock");
        // Another request may have loaded a newer generation meanwhile: keep the newest.
        if cache.get(project_id).is_none_or(|(g, _)| *g <= generation) {
            cache.insert(project_id.to_owned(), (generation, loaded.clone()));
        }
        Ok(loaded)
    }

    pub async fn list(&self, who: &Principal) -> Result<Vec<Policy>> {
        forbid_limited(who)?;
        store::policies::list(self.db.pool(), &who.project_id)
            .await?
            .into_iter()
            .map(Policy::from_row)
            .collect()
    }

    pub async fn get(&self, who: &Principal, id: &str) -> Result<Policy> {
        forbid_limited(who)?;
        Policy::from_row(
            store::policies::get(self.db.pool(), &who.project_id, id)
                .await?
                .ok_or(Error::NotFound)?,
        )
    }

    /// The policy's name, rules and limits as stored, once every part is valid.
    pub(crate) fn checked(input: &PolicyInput) -> Result<(String, String, String)> {
        let name = clean_name(&input.name)?;
        input.tool_allowlist.check()?;
        limits::check(&input.limits)?;
        let rules = serde_json::to_string(&input.tool_allowlist)
            .map_err(|e| Error::internal(e.to_string()))?;
        let limits =
            serde_json::to_string(&input.limits).map_err(|e| Error::internal(e.to_string()))?;
        Ok((name, rules, limits))
    }

    pub async fn create(&self, who: &Principal, input: &PolicyInput) -> Result<Policy> {
        forbid_limited(who)?;
        let (name, rules, limits) = Self::checked(input)?;
        let now = self.clock.now_ms();
        let row = PolicyRow {
            id: new_id("pol"),
            project_id: who.project_id.clone(),
            name,
            tool_allowlist: rules,
            limits,
            is_default: input.default as i64,
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.db.begin_write().await?;
        if store::policies::list(&mut *tx, &who.project_id)
            .await?
            .iter()
            .any(|p| p.name == row.name)
        {
            return Err(Error::Conflict(format!(
                "a policy named {:?} exists; pick another name",
                row.name
            )));
        }
        if input.default {
            store::policies::clear_default(&mut *tx, &who.project_id).await?;
        }
        store::policies::insert(&mut *tx, &row).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(policy_id = %row.id, by = %who.user_id, "policy created");
        Policy::from_row(row)
    }

    /// Replaces a policy's name, rules and default flag (PUT).
    pub async fn replace(&self, who: &Principal, id: &str, input: &PolicyInput) -> Result<Policy> {
        forbid_limited(who)?;
        let (name, rules, limits) = Self::checked(input)?;
        let mut tx = self.db.begin_write().await?;
        let existing = store::policies::get(&mut *tx, &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        if store::policies::list(&mut *tx, &who.project_id)
            .await?
            .iter()
            .any(|p| p.name == name && p.id != id)
        {
            return Err(Error::Conflict(format!(
                "a policy named {name:?} exists; pick another name"
            )));
        }
        if input.default {
            store::policies::clear_default(&mut *tx, &who.project_id).await?;
        }
        let row = PolicyRow {
            name,
            tool_allowlist: rules,
            limits,
            is_default: input.default as i64,
            updated_at: self.clock.now_ms(),
            ..existing
        };
        store::policies::update(&mut *tx, &row).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(policy_id = %row.id, by = %who.user_id, "policy replaced");
        Policy::from_row(row)
    }

    /// The live keys (id, name) a policy is attached to: it cannot be deleted while any is.
    pub async fn keys_using(&self, who: &Principal, id: &str) -> Result<Vec<(String, String)>> {
        forbid_limited(who)?;
        store::policies::live_keys_using(self.db.pool(), &who.project_id, id).await
    }

    /// Deletes a policy no live key uses (409 naming the keys otherwise).
    pub async fn delete(&self, who: &Principal, id: &str) -> Result<()> {
        forbid_limited(who)?;
        let mut tx = self.db.begin_write().await?;
        if store::policies::get(&mut *tx, &who.project_id, id)
            .await?
            .is_none()
        {
            return Err(Error::NotFound);
        }
        let keys = store::policies::live_keys_using(&mut *tx, &who.project_id, id).await?;
        if !keys.is_empty() {
            let names: Vec<String> = keys
                .iter()
                .map(|(id, name)| format!("{name} ({id})"))
                .collect();
            return Err(Error::Conflict(format!(
                "the policy is attached to {}; detach it from them first",
                names.join(", ")
            )));
        }
        for r in store::sso::providers(&mut *tx, &who.project_id).await? {
            let c: serde_json::Value = serde_json::from_str(&r.config).unwrap_or_default();
            let names = |v: &serde_json::Value| v.as_str() == Some(id);
            if names(&c["default_policy_id"])
                || c["mappings"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| names(&m["policy_id"])))
            {
                return Err(Error::Conflict(format!(
                    "sign-in provider {} maps groups to the policy; change its mapping first",
                    r.slug
                )));
            }
        }
        if store::sso::policy_caps_someone(&mut *tx, &who.project_id, id).await? {
            return Err(Error::Conflict(
                "the policy caps members who signed in through a provider; they keep it until they sign in again under a changed mapping, or leave the project".into(),
            ));
        }
        store::policies::detach_from_revoked_keys(&mut *tx, &who.project_id, id).await?;
        store::policies::delete(&mut *tx, &who.project_id, id).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(policy_id = %id, by = %who.user_id, "policy deleted");
        Ok(())
    }

    /// Attaches a policy of the project to one of its keys (`None` detaches).
    pub async fn attach(
        &self,
        who: &Principal,
        key_id: &str,
        policy_id: Option<&str>,
    ) -> Result<()> {
        forbid_limited(who)?;
        let mut tx = self.db.begin_write().await?;
        if let Some(p) = policy_id {
            if store::policies::get(&mut *tx, &who.project_id, p)
                .await?
                .is_none()
            {
                return Err(Error::invalid(format!(
                    "policy_id {p:?} is not a policy of this project"
                )));
            }
        }
        if !store::policies::attach(&mut *tx, &who.project_id, key_id, policy_id).await? {
            return Err(Error::NotFound);
        }
        tx.commit().await?;
        self.db.changed();
        tracing::info!(key_id, policy_id = ?policy_id, by = %who.user_id, "key policy changed");
        Ok(())
    }
}
