//! Local MCP servers over stdio (issue 32): what an admin registers (`command`, `args`, `env`,
//! `cwd`, `limits`), checked against what the operator allows (`StdioSettings`: stdio is off
//! until the operator lists the commands it may run), and the parts that run one: `guard`
//! (confined start, nothing outlives workbench), `session` (JSON-RPC over the pipes, bounded
//! lines, stderr captured) and `supervisor` (start on use, restart with backoff, stop).

pub mod guard;
pub mod landlock;
pub mod pool;
pub mod session;
pub mod supervisor;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// What the operator lets admins run (`WB_STDIO_COMMANDS`, `WB_DATA_DIR`/stdio).
#[derive(Debug, Clone, Default)]
pub struct StdioSettings {
    /// Absolute paths of the programs a stdio server may start; empty: stdio is off.
    pub commands: Vec<PathBuf>,
    /// Where each server's own working directory is made (`<root>/<server id>`).
    pub work_root: PathBuf,
}

impl StdioSettings {
    /// The allowed program `command` names (an absolute path, or a name matching an allowed
    /// path's file name).
    fn resolve(&self, command: &str) -> Option<&Path> {
        self.commands
            .iter()
            .find(|p| {
                p.as_os_str() == command
                    || (!command.contains('/') && p.file_name().is_some_and(|f| f == command))
            })
            .map(PathBuf::as_path)
    }
}

/// Resource limits of a server's process (an omitted field: its default; 0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Resident memory of the process and everything it started, MiB: workbench kills the
    /// server when they use more (checked twice a second) and reports it.
    pub memory_mb: u64,
    /// Address space of each process (RLIMIT_AS), MiB; 0: unlimited, as runtimes with a JIT
    /// (node, the JVM) reserve far more address space than they use.
    pub address_space_mb: u64,
    /// Processes and threads of the user (RLIMIT_NPROC); not enforced for root.
    pub processes: u64,
    pub open_files: u64,
    /// CPU seconds over the process's life (RLIMIT_CPU).
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 1024,
            address_space_mb: 0,
            processes: 4096,
            open_files: 1024,
            cpu_seconds: 0,
        }
    }
}

/// The paths a server may use beyond the system directories (read) and its working
/// directory (read and write), enforced with Landlock where the kernel offers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Filesystem {
    /// Absolute paths (directories or files) it may read and execute.
    pub read: Vec<String>,
    /// Absolute paths it may also write, create and remove under.
    pub write: Vec<String>,
}

impl Filesystem {
    fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }
}

/// When a server's process starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// At the first call (or listing) that needs it.
    #[default]
    OnUse,
    /// When workbench loads the server.
    Boot,
}

/// A stdio server as registered (stored as JSON; vault references, never values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory; by default the server's own under the operator's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The whole environment the process gets: literal values, or `{{vault:NAME}}` for a
    /// secret resolved at start.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default, skip_serializing_if = "Filesystem::is_empty")]
    pub filesystem: Filesystem,
    #[serde(default)]
    pub start: Start,
    /// How many processes of the server run on each instance (calls spread over them).
    #[serde(default = "one")]
    pub pool: u64,
    /// Stop the process after this many seconds without a call (0: never).
    #[serde(default)]
    pub idle_shutdown_s: u64,
}

fn one() -> u64 {
    1
}

/// The `url` a stdio server is stored with (it has none).
pub const STDIO_URL: &str = "stdio:";
pub const MAX_ARGS: usize = 64;
pub const MAX_ENV: usize = 64;
pub const MAX_IDLE_SHUTDOWN_S: u64 = 7 * 24 * 3600;
pub const MAX_POOL: u64 = 16;
pub const MAX_PATHS: usize = 32;

/// The vault secret a whole env value refers to (`{{vault:NAME}}`).
pub fn vault_ref(value: &str) -> Option<&str> {
    value
        .strip_prefix("{{vault:")?
        .strip_suffix("}}")
        .filter(|n| !n.is_empty())
}

impl StdioConfig {
    /// Checks everything but vault references (the caller resolves those): the program must
    /// be one the operator allows; the rest bounded and printable.
    pub fn check(&mut self, settings: &StdioSettings) -> Result<()> {
        if settings.commands.is_empty() {
            return Err(Error::invalid(
                "stdio servers are off on this workbench; an operator allows programs with WB_STDIO_COMMANDS",
            ));
        }
        let program = settings.resolve(&self.command).ok_or_else(|| {
            Error::invalid(format!(
                "command {:?} is not one the operator allows (WB_STDIO_COMMANDS: {})",
                self.command,
                settings
                    .commands
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        self.command = program.display().to_string();
        let printable = |s: &str| !s.chars().any(|c| c.is_control());
        if self.args.len() > MAX_ARGS
            || self
                .args
                .iter()
                .any(|a| a.len() > 4096 || !printable(a) || a.contains('\0'))
        {
            return Err(Error::invalid(format!(
                "args must be at most {MAX_ARGS} printable strings of up to 4096 bytes"
            )));
        }
        if self.env.len() > MAX_ENV {
            return Err(Error::invalid(format!(
                "env may name at most {MAX_ENV} variables"
            )));
        }
        for (k, v) in &self.env {
            let name_ok = !k.is_empty()
                && k.len() <= 128
                && k.chars().next().is_some_and(|c| !c.is_ascii_digit())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name_ok {
                return Err(Error::invalid(format!(
                    "env name {k:?} must be letters, digits and '_', not starting with a digit"
                )));
            }
            if v.len() > 8192 || v.contains('\0') {
                return Err(Error::invalid(format!(
                    "env {k} must be at most 8192 bytes without NUL"
                )));
            }
        }
        if let Some(cwd) = &self.cwd {
            let p = Path::new(cwd);
            if !p.is_absolute() || !p.is_dir() || cwd.contains('\0') {
                return Err(Error::invalid(format!(
                    "cwd {cwd:?} must be an absolute path of an existing directory"
                )));
            }
        }
        for (what, paths) in [
            ("filesystem.read", &self.filesystem.read),
            ("filesystem.write", &self.filesystem.write),
        ] {
            if paths.len() > MAX_PATHS {
                return Err(Error::invalid(format!(
                    "{what} may list at most {MAX_PATHS} paths"
                )));
            }
            for p in paths {
                let path = Path::new(p);
                if p.len() > 4096
                    || p.contains('\0')
                    || !path.is_absolute()
                    || !path.exists()
                    || path
                        .components()
                        .any(|c| c == std::path::Component::ParentDir)
                {
                    return Err(Error::invalid(format!(
                        "{what} entry {p:?} must be the absolute path of an existing file or directory, without '..'"
                    )));
                }
                if path == Path::new("/") {
                    return Err(Error::invalid(format!(
                        "{what} may not grant the whole filesystem (/)"
                    )));
                }
            }
        }
        if !(1..=MAX_POOL).contains(&self.pool) {
            return Err(Error::invalid(format!(
                "pool must be from 1 to {MAX_POOL} processes"
            )));
        }
        let l = &self.limits;
        if l.memory_mb > 1 << 20
            || l.address_space_mb > 1 << 20
            || l.processes > 1 << 20
            || l.open_files > 1 << 20
        {
            return Err(Error::invalid("limits are too large"));
        }
        if self.idle_shutdown_s > MAX_IDLE_SHUTDOWN_S {
            return Err(Error::invalid(format!(
                "idle_shutdown_s must be at most {MAX_IDLE_SHUTDOWN_S}"
            )));
        }
        Ok(())
    }

    /// The vault secrets the environment refers to.
    pub fn vault_refs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env
            .iter()
            .filter_map(|(k, v)| vault_ref(v).map(|n| (k.as_str(), n)))
    }
}
