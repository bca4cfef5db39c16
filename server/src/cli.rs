//! The `workbench` command line: `serve` (the default), `migrate`, `health`, `config` and the
//! `admin` commands that outside scripts call by these exact names. Every flag also reads a `WB_…` environment variable.
//! A command that fails returns a [`CliError`], printed as `workbench: {message}` with exit code 1.
#![allow(clippy::result_large_err)] // CliError wraps ConfigError: made once, at start-up.

use std::io::Read;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use workbench_core::auth::Role;
use workbench_core::store::Db;
use workbench_core::{Workbench, WorkbenchOptions};

use crate::config::{ConfigError, ServeArgs};
use crate::keys::KeyError;

/// Why a command (`serve`, `migrate`, `admin …`) failed. Its message is what the operator reads
/// after `workbench: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A domain or database failure, shown as core renders it.
    #[error(transparent)]
    Core(#[from] workbench_core::Error),
    /// The server keys cannot be loaded, created or rotated.
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// The `serve` flags do not make a usable configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `serve` cannot bind its address.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// `create-user` cannot read standard input.
    #[error("cannot read the password from standard input: {0}")]
    ReadPassword(#[source] std::io::Error),
    /// `create-user` got no password line on standard input.
    #[error("no password on standard input; pipe it in, e.g. `echo \"$PW\" | workbench admin create-user …`")]
    NoPassword,
    /// A `config` command's request failed or the server refused it: what it said.
    #[error("{0}")]
    Remote(String),
    /// Any other i/o failure while serving, shown as is.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Parser)]
#[command(
    name = "workbench",
    version,
    about = "Self-hostable tool gateway for AI agents: MCP meta-tools, REST tool API, credential proxy and admin portal",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// How log lines are written on stderr: text, or one JSON object per line.
    #[arg(long, global = true, env = "WB_LOG_FORMAT", value_enum, default_value_t = crate::telemetry::LogFormat::Text)]
    pub log_format: crate::telemetry::LogFormat,
    /// Options of `serve`, which runs when no command is given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

// Parsed once per process; boxing `serve`'s flags would only make clap's derive noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the portal, /mcp, /v1 and the /c proxy (the default command).
    Serve(ServeArgs),
    /// Apply pending database migrations and exit.
    Migrate(DbArgs),
    /// Operator commands: users and API keys.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Ask a running `workbench serve` on this machine whether it is up (GET /healthz, or
    /// /readyz with --ready); exits 0 if it answers 200. For container health checks, where
    /// no HTTP client is installed.
    Health(HealthArgs),
    /// A project's configuration as a file to keep in git: export it, or apply one to a
    /// running workbench (`docs/deploy.md`, "Configuration as code").
    #[command(subcommand)]
    Config(crate::config_client::ConfigCommand),
}

#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    /// The address `serve` listens on; an unspecified address (0.0.0.0, [::]) is asked on loopback.
    #[arg(long, env = "WB_BIND", default_value = crate::config::DEFAULT_BIND)]
    pub bind: String,
    /// Ask /readyz (the database answers too) instead of /healthz.
    #[arg(long)]
    pub ready: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Database URL: sqlite://FILE (embedded default) or postgres://USER@HOST/DB.
    #[arg(long, env = "WB_DATABASE_URL", default_value = crate::config::DEFAULT_DATABASE_URL)]
    pub database_url: String,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a user (and its project if needed). The password is read from standard input.
    CreateUser {
        #[command(flatten)]
        db: DbArgs,
        /// The user's email address (their sign-in name).
        #[arg(long, env = "WB_ADMIN_EMAIL")]
        email: String,
        /// Read the password from standard input (first line; at least 10 characters).
        #[arg(long, required = true)]
        password_stdin: bool,
        /// Make the user an admin of the project.
        #[arg(long)]
        admin: bool,
        /// Let the account sign in with its password even when password sign-in is turned off
        /// (`--password-sign-in off`): the way in when the identity provider is unavailable.
        #[arg(long)]
        break_glass: bool,
        /// Project to add the user to; created if missing. Defaults to the oldest project, or a
        /// new project named "default".
        #[arg(long, env = "WB_PROJECT")]
        project: Option<String>,
    },
    /// Re-encrypt every vault secret under a new master key version (or, after an interrupted
    /// run, finish re-encrypting under the newest one). Safe to run again.
    RotateMasterKey {
        #[command(flatten)]
        db: DbArgs,
        /// The data directory holding master.key (ignored when WB_MASTER_KEY is set).
        #[arg(long, env = "WB_DATA_DIR", default_value = crate::config::DEFAULT_DATA_DIR)]
        data_dir: std::path::PathBuf,
    },
    /// Write a consistent copy of the embedded SQLite database to a new file while workbench
    /// keeps running (PostgreSQL: use pg_dump). Restore by stopping workbench and putting the
    /// copy in place of the database file.
    Backup {
        #[command(flatten)]
        db: DbArgs,
        /// The file to write; it must not exist yet.
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Create an API key for a user; prints the key alone on one line of standard output.
    CreateApiKey {
        #[command(flatten)]
        db: DbArgs,
        /// Email of the user who will own the key.
        #[arg(long)]
        email: String,
        /// A name that tells the key apart in the portal.
        #[arg(long, default_value = "cli")]
        name: String,
        /// A policy of the user's project to attach (`pol_…`); without it the project's
        /// default policy applies.
        #[arg(long)]
        policy: Option<String>,
    },
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime")
}

pub fn run(cli: Cli) -> ExitCode {
    let runtime = runtime();
    // Traces are exported by `serve` only; an unusable endpoint is reported by `serve` with
    // every other configuration problem.
    let traces = match &cli.command {
        None => Some(&cli.serve),
        Some(Command::Serve(args)) => Some(args),
        Some(_) => None,
    }
    .and_then(|args| {
        crate::config::otlp_traces_endpoint(args, |k| std::env::var(k).ok())
            .ok()
            .flatten()
    });
    let telemetry = crate::telemetry::init(cli.log_format, traces.as_ref(), runtime.handle());
    let result = runtime.block_on(async move {
        match cli.command {
            None => crate::serve_from_args(cli.serve).await,
            Some(Command::Serve(args)) => crate::serve_from_args(args).await,
            Some(Command::Migrate(db)) => migrate(db).await,
            Some(Command::Admin(cmd)) => admin(cmd).await,
            Some(Command::Health(args)) => {
                let path = if args.ready { "/readyz" } else { "/healthz" };
                crate::health::probe(&args.bind, path)
                    .map_err(|e| CliError::Io(std::io::Error::other(e)))
            }
            Some(Command::Config(cmd)) => crate::config_client::run(cmd)
                .await
                .map_err(CliError::Remote),
        }
    });
    // The runtime still runs the exporter's requests here, outside async code.
    telemetry.shutdown();
    drop(runtime);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("workbench: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate(args: DbArgs) -> Result<(), CliError> {
    let db = Db::connect(&args.database_url).await?;
    db.migrate().await?;
    eprintln!("workbench: migrations applied");
    Ok(())
}

async fn open(db: &DbArgs) -> Result<Workbench, CliError> {
    Ok(Workbench::open(&db.database_url, WorkbenchOptions::default()).await?)
}

fn read_password_stdin() -> Result<String, CliError> {
    let mut input = String::new();
    std::io::stdin()
        .take(64 * 1024)
        .read_to_string(&mut input)
        .map_err(CliError::ReadPassword)?;
    let line = input.lines().next().unwrap_or_default().to_string();
    if line.is_empty() {
        return Err(CliError::NoPassword);
    }
    Ok(line)
}

async fn admin(cmd: AdminCommand) -> Result<(), CliError> {
    match cmd {
        AdminCommand::CreateUser {
            db,
            email,
            password_stdin: _,
            admin,
            break_glass,
            project,
        } => {
            let password = read_password_stdin()?;
            let wb = open(&db).await?;
            let role = if admin { Role::Admin } else { Role::Member };
            let (user, project) = wb
                .accounts()
                .create_user(&email, &password, project.as_deref(), role)
                .await?;
            if break_glass {
                wb.accounts().set_break_glass(&user.email, true).await?;
            }
            eprintln!(
                "workbench: created {}{} {} ({}) in project {}",
                role.as_str(),
                if break_glass { " (break-glass)" } else { "" },
                user.email,
                user.id,
                project.name
            );
            Ok(())
        }
        AdminCommand::RotateMasterKey { db, data_dir } => {
            let keys = crate::keys::Keys::load_or_create(&data_dir)?;
            let wb = Workbench::open(
                &db.database_url,
                WorkbenchOptions {
                    master_keys: keys.master.clone(),
                    ..WorkbenchOptions::default()
                },
            )
            .await?;
            // First finish anything an interrupted rotation left on older versions.
            let resumed = wb.vault().reseal_all().await?;
            let resumed_conns = wb.connections().reseal_all().await?;
            let resumed_callbacks = wb.deliveries().reseal_all().await?;
            if resumed + resumed_conns + resumed_callbacks > 0 {
                eprintln!(
                    "workbench: finished an earlier rotation: re-encrypted {resumed} secrets, {resumed_conns} connection credentials and {resumed_callbacks} callback payloads and signing secrets under key version {}",
                    keys.master.current_version().unwrap_or(0)
                );
                return Ok(());
            }
            let ring = crate::keys::add_master_key_version(&data_dir)?;
            let version = ring.current_version().unwrap_or(0);
            wb.vault().set_ring(ring);
            let n = wb.vault().reseal_all().await?;
            let c = wb.connections().reseal_all().await?;
            let cb = wb.deliveries().reseal_all().await?;
            eprintln!(
                "workbench: re-encrypted {n} secrets, {c} connection credentials and {cb} callback payloads and signing secrets under new master key version {version}"
            );
            Ok(())
        }
        AdminCommand::Backup { db, to } => {
            let db = Db::connect(&db.database_url).await?;
            let bytes = workbench_core::store::backup::sqlite_copy(&db, &to).await?;
            eprintln!(
                "workbench: wrote a consistent copy of the database to {} ({bytes} bytes)",
                to.display()
            );
            Ok(())
        }
        AdminCommand::CreateApiKey {
            db,
            email,
            name,
            policy,
        } => {
            let wb = open(&db).await?;
            let key = wb
                .accounts()
                .create_api_key_for_email(&email, &name, policy.as_deref())
                .await?;
            println!("{}", key.secret.expose());
            Ok(())
        }
    }
}
