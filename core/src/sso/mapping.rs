//! What a person's groups give them in a provider's project: the first mapping rule whose group
//! they are in decides the role and the policy cap; else the provider's default; else nothing.

use crate::auth::Role;
use workbench_model::sso::GroupMapping;

/// The outcome of a mapping for a set of groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub role: Role,
    pub policy_id: Option<String>,
    /// The group of the rule that decided (None: the default).
    pub matched: Option<String>,
}

/// What `groups` get under `mappings`, falling back to `default_role` (None: no sign-in).
pub fn grant(
    mappings: &[GroupMapping],
    default_role: Option<Role>,
    default_policy_id: Option<&str>,
    groups: &[String],
) -> Option<Granted> {
    if let Some(rule) = mappings.iter().find(|m| groups.contains(&m.group)) {
        return Some(Granted {
            role: rule.role,
            policy_id: rule.policy_id.clone(),
            matched: Some(rule.group.clone()),
        });
    }
    default_role.map(|role| Granted {
        role,
        policy_id: default_policy_id.map(str::to_owned),
        matched: None,
    })
}

/// The groups an ID token names under `claim`: an array of strings, or one string; anything
/// else (missing, numbers, objects) names none. Group names compare exactly.
pub fn groups_of(claims: &serde_json::Value, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(group: &str, role: Role, policy: Option<&str>) -> GroupMapping {
        GroupMapping {
            group: group.into(),
            role,
            policy_id: policy.map(str::to_owned),
        }
    }

    #[test]
    fn the_first_rule_a_person_matches_decides_role_and_policy() {
        let rules = [
            rule("admins", Role::Admin, None),
            rule("eng", Role::Member, Some("pol_eng")),
        ];
        let both = grant(&rules, None, None, &["eng".into(), "admins".into()]).unwrap();
        assert_eq!(
            both.role,
            Role::Admin,
            "rule order decides, not group order"
        );
        assert_eq!(both.matched.as_deref(), Some("admins"));
        let eng = grant(&rules, None, None, &["eng".into()]).unwrap();
        assert_eq!(
            (eng.role, eng.policy_id.as_deref()),
            (Role::Member, Some("pol_eng"))
        );
    }

    #[test]
    fn a_person_in_no_mapped_group_gets_the_default_or_nothing() {
        let rules = [rule("eng", Role::Member, Some("pol_eng"))];
        assert_eq!(
            grant(&rules, None, None, &["Eng".into()]),
            None,
            "exact names"
        );
        assert_eq!(grant(&rules, None, None, &[]), None);
        let d = grant(&rules, Some(Role::Member), Some("pol_d"), &["sales".into()]).unwrap();
        assert_eq!(
            (d.role, d.policy_id.as_deref(), d.matched),
            (Role::Member, Some("pol_d"), None)
        );
    }

    #[test]
    fn groups_are_read_from_an_array_or_a_single_string_only() {
        assert_eq!(groups_of(&json!({"g": ["a", 1, "b"]}), "g"), vec!["a", "b"]);
        assert_eq!(groups_of(&json!({"g": "a"}), "g"), vec!["a"]);
        assert!(groups_of(&json!({"g": {"a": true}}), "g").is_empty());
        assert!(groups_of(&json!({}), "g").is_empty());
    }
}
