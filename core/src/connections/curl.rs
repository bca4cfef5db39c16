//! curl_session's rules: the token's lifetime, and which integrations it may name (known, curl
//! proxy enabled, connected); all-or-nothing, with every problem listed.

use serde::Deserialize;

use super::proxy_token::{ProxyTokens, DEFAULT_TTL_SECS, MAX_TTL_SECS, MIN_TTL_SECS};
use super::Connections;
use crate::args::Arg;
use crate::auth::Principal;
use crate::Error;

/// A curl_session request as the agent sent it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CurlSessionRequest {
    #[serde(default)]
    pub integrations: Option<Arg<Vec<Arg<String>>>>,
    #[serde(default, rename = "expiresInSeconds")]
    pub expires_in_seconds: Option<Arg<u64>>,
}

impl CurlSessionRequest {
    /// The integration names that are strings, as sent.
    pub fn names(&self) -> Vec<String> {
        match &self.integrations {
            Some(Arg::Ok(list)) => list
                .iter()
                .filter_map(|v| match v {
                    Arg::Ok(s) => Some(s.clone()),
                    Arg::Wrong(_) => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A minted proxy token.
#[derive(Debug, Clone)]
pub struct CurlSession {
    pub token: String,
    pub expires_in: u64,
}

impl Connections {
    /// curl_session: checks the whole request, then mints a token. A refused request is
    /// `Error::Invalid` with every problem joined by "; ".
    pub async fn curl_session(
        &self,
        tokens: &ProxyTokens,
        who: &Principal,
        req: CurlSessionRequest,
    ) -> crate::Result<CurlSession> {
        let mut problems = Vec::new();
        let names: Vec<String> = match req.integrations {
            Some(Arg::Ok(list)) => list
                .into_iter()
                .filter_map(|v| match v {
                    Arg::Ok(s) => Some(s),
                    Arg::Wrong(v) => {
                        problems.push(format!("integration names must be strings, got {v}"));
                        None
                    }
                })
                .collect(),
            _ => {
                problems.push("integrations must be an array of integration names".to_string());
                Vec::new()
            }
        };
        let ttl = match req.expires_in_seconds {
            None => DEFAULT_TTL_SECS,
            Some(v) => {
                match v.ok().filter(|n| (MIN_TTL_SECS..=MAX_TTL_SECS).contains(n)) {
                    Some(n) => n,
                    None => {
                        problems.push(format!("expiresInSeconds must be an integer from {MIN_TTL_SECS} to {MAX_TTL_SECS}"));
                        DEFAULT_TTL_SECS
                    }
                }
            }
        };
        if !names.is_empty() || problems.is_empty() {
            let valid = self.check_proxy_request(who, &names, &mut problems).await;
            if problems.is_empty() {
                let (token, _) = tokens.mint(who, valid, ttl).await?;
                return Ok(CurlSession {
                    token,
                    expires_in: ttl,
                });
            }
        }
        Err(Error::Invalid(problems.join("; ")))
    }

    /// Checks the integrations of a curl_session request: every name must be a known
    /// integration with the curl proxy enabled that the user has connected. The names that
    /// pass; every failure is added to `problems`.
    async fn check_proxy_request(
        &self,
        who: &Principal,
        names: &[String],
        problems: &mut Vec<String>,
    ) -> Vec<String> {
        let mut ok = Vec::new();
        if names.is_empty() {
            problems.push("integrations is empty; name at least one".into());
            return ok;
        }
        for name in names {
            if ok.contains(name) {
                continue;
            }
            match self.lookup(&who.project_id, name).as_deref() {
                None => problems.push(format!("unknown integration {name}")),
                Some(i) if !i.def.curl_proxy => {
                    problems.push(format!("{name} does not have the curl proxy enabled"))
                }
                Some(i) if i.needs_connection() => match self.credential(who, i).await {
                    Ok(Ok(_)) => ok.push(name.clone()),
                    Ok(Err(_)) => {
                        problems.push(format!("{name} is not connected; call connect first"))
                    }
                    Err(_) => {
                        problems.push(format!("{name}: connections cannot be read right now"))
                    }
                },
                Some(_) => ok.push(name.clone()),
            }
        }
        ok
    }
}
