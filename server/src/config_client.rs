//! `workbench config export|apply`: the command-line client of `GET /v1/config` and
//! `POST /v1/config/apply`, so a project's configuration can live in git and be applied by CI
//! against a running workbench with an admin's API key.

use std::io::Read;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::Value;

/// Where the server is and whose key to use.
#[derive(Debug, Clone, Args)]
pub struct Remote {
    /// The workbench to talk to; by default the one `serve` runs on this machine (from WB_BIND).
    #[arg(long, env = "WB_URL")]
    pub url: Option<String>,
    /// The address `serve` listens on, used when --url is not given.
    #[arg(long, env = "WB_BIND", default_value = crate::config::DEFAULT_BIND, hide = true)]
    pub bind: String,
    /// An admin's API key (`wb_…`); the key's policy limits what it may apply.
    #[arg(long, env = "WB_API_KEY", hide_env_values = true)]
    pub api_key: String,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the project's configuration (settings, egress, policies, apps, MCP servers, tool sets) as
    /// YAML on standard output. Secrets appear as vault names only.
    Export {
        #[command(flatten)]
        remote: Remote,
        /// yaml (the default) or json.
        #[arg(long, default_value = "yaml", value_parser = ["yaml", "json"])]
        format: String,
    },
    /// Make the project match FILE (`-` reads standard input) and print what changed, one line
    /// each: `+` created, `~` updated, `!` replaced, `-` deleted. Every entry is checked first;
    /// if any fails, nothing changes.
    Apply {
        #[command(flatten)]
        remote: Remote,
        /// The configuration file (YAML or JSON).
        file: std::path::PathBuf,
        /// Only say what would change.
        #[arg(long)]
        dry_run: bool,
    },
}

impl Remote {
    fn base(&self) -> Result<String, String> {
        match &self.url {
            Some(url) => Ok(url.trim_end_matches('/').to_owned()),
            None => Ok(format!("http://{}", crate::health::loopback(&self.bind)?)),
        }
    }
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// The body of a failed response as the operator should read it: the API's error message.
async fn failure(url: &str, response: reqwest::Response) -> String {
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(500).collect());
    format!("{url} answered {status}: {message}")
}

pub async fn run(cmd: ConfigCommand) -> Result<(), String> {
    match cmd {
        ConfigCommand::Export { remote, format } => {
            let url = format!("{}/v1/config?format={format}", remote.base()?);
            let response = client()?
                .get(&url)
                .bearer_auth(&remote.api_key)
                .send()
                .await
                .map_err(|e| format!("cannot reach {url}: {e}"))?;
            if !response.status().is_success() {
                return Err(failure(&url, response).await);
            }
            let text = response.text().await.map_err(|e| format!("{url}: {e}"))?;
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(())
        }
        ConfigCommand::Apply {
            remote,
            file,
            dry_run,
        } => {
            let mut text = String::new();
            let limit = workbench_core::config_file::MAX_FILE_BYTES as u64 + 1;
            let read = if file.as_os_str() == "-" {
                std::io::stdin().take(limit).read_to_string(&mut text)
            } else {
                std::fs::File::open(&file).and_then(|f| f.take(limit).read_to_string(&mut text))
            };
            read.map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let kind = if text.trim_start().starts_with('{') {
                "application/json"
            } else {
                "application/yaml"
            };
            let url = format!("{}/v1/config/apply?dry_run={dry_run}", remote.base()?);
            let response = client()?
                .post(&url)
                .bearer_auth(&remote.api_key)
                .header(reqwest::header::CONTENT_TYPE, kind)
                .body(text)
                .send()
                .await
                .map_err(|e| format!("cannot reach {url}: {e}"))?;
            if !response.status().is_success() {
                return Err(failure(&url, response).await);
            }
            let outcome: Value = response
                .json()
                .await
                .map_err(|e| format!("{url} answered something other than an outcome: {e}"))?;
            print!("{}", outcome["diff"].as_str().unwrap_or_default());
            for note in outcome["notes"].as_array().into_iter().flatten() {
                eprintln!("note: {}", note.as_str().unwrap_or_default());
            }
            let changes = outcome["changes"].as_array().map_or(0, Vec::len);
            let unchanged = outcome["unchanged"].as_u64().unwrap_or(0);
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            if dry_run {
                eprintln!(
                    "workbench: dry run: {changes} change{} would be made, {unchanged} unchanged",
                    plural(changes)
                );
            } else {
                eprintln!(
                    "workbench: {changes} change{} made, {unchanged} unchanged",
                    plural(changes)
                );
            }
            Ok(())
        }
    }
}
