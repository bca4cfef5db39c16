//! The deployment files (`deploy/workbench.service`, `deploy/workbench.env`) name only flags,
//! commands and variables the binary accepts, so following docs/deploy.md starts a server.

use std::collections::BTreeMap;
use std::process::Command;

fn manifest(rel: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} --help: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `[Section]` → key → values (a key may repeat).
fn unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = String::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value: {line}"));
        assert!(!section.is_empty(), "{line} is outside a section");
        out.entry(section.clone())
            .or_default()
            .entry(k.trim().to_owned())
            .or_default()
            .push(v.trim().to_owned());
    }
    out
}

#[test]
fn the_systemd_unit_and_env_file_use_only_what_the_binary_accepts() {
    let u = unit(&manifest("../deploy/workbench.service"));
    for s in ["Unit", "Service", "Install"] {
        assert!(u.contains_key(s), "no [{s}] section");
    }
    let service = &u["Service"];
    let exec = &service["ExecStart"][0];
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert!(
        words[0].ends_with("/workbench") && words[1] == "serve",
        "{exec}"
    );
    let serve_help = help(&["serve"]);
    for flag in words.iter().filter(|w| w.starts_with("--")) {
        assert!(
            serve_help.contains(&format!("{flag} ")),
            "{flag} is not a flag of `workbench serve`"
        );
    }
    let pre = service["ExecStartPre"][0]
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(pre[1], "migrate", "migrations run before each start");
    let stop: u64 = service["TimeoutStopSec"][0].parse().unwrap();
    let drain = (workbench_server::DRAIN_DEADLINE + workbench_server::RECORDS_DEADLINE).as_secs();
    assert!(
        stop > drain,
        "systemd must wait longer ({stop} s) than the drain and record deadlines ({drain} s)"
    );

    // Every variable the env file sets is one the binary reads.
    let vars = wb_vars(&manifest("../deploy/workbench.env"));
    assert!(vars.len() >= 6, "{vars:?}");
    assert_read_by_workbench(&vars, &serve_help, "deploy/workbench.env");
    assert!(help(&["admin", "backup"]).contains("--to"));
}

#[test]
fn start_up_names_every_configuration_problem_at_once() {
    use clap::Parser;
    let parse = |args: &[&str]| {
        let cli = workbench_server::cli::Cli::try_parse_from(
            std::iter::once("workbench").chain(args.iter().copied()),
        )
        .unwrap();
        workbench_server::config::ServerConfig::from_args(&cli.serve)
    };
    let err = parse(&[
        "--public-url",
        "ftp://tools.example.com",
        "--metrics-token",
        "short",
        "--smtp-url",
        "https://mail.example.com",
        "--searxng-url",
        "http://169.254.169.254/search",
    ])
    .unwrap_err()
    .to_string();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "one line per problem: {err}");
    for needle in [
        "--public-url",
        "--metrics-token",
        "smtps://",
        "--searxng-url",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "{needle} not named in {err}"
        );
    }
    // One problem reads as itself.
    assert_eq!(
        parse(&["--metrics-token", "short"])
            .unwrap_err()
            .to_string(),
        "--metrics-token must be at least 16 characters (it guards /metrics)"
    );
    assert!(parse(&["--metrics-token", "0123456789abcdef"])
        .unwrap()
        .metrics_token
        .is_some());
}

/// Every `WB_…` variable named in `text`: `NAME=…` and `name: NAME` forms.
fn wb_vars(text: &str) -> Vec<String> {
    let mut vars: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("WB_") && !vars.iter().any(|v| v == word) {
            vars.push(word.to_owned());
        }
    }
    vars
}

/// Variables the binary reads outside `serve`'s flags, with the file that reads each.
const READ_ELSEWHERE: &[(&str, &str)] = &[
    ("WB_LOG", "src/telemetry.rs"),
    ("WB_MASTER_KEY", "src/keys.rs"),
    ("WB_JWT_KEY", "src/keys.rs"),
    ("WB_SEARCH_MODEL_DIR", "../core/src/catalog/search/embed.rs"),
];

fn assert_read_by_workbench(vars: &[String], serve_help: &str, file: &str) {
    for v in vars {
        let elsewhere = READ_ELSEWHERE
            .iter()
            .find(|(name, _)| name == v)
            .is_some_and(|(_, src)| manifest(src).contains(&format!("\"{v}\"")));
        assert!(
            serve_help.contains(&format!("env: {v}")) || elsewhere,
            "{file} sets {v}, which workbench does not read"
        );
    }
}

#[test]
fn the_container_image_runs_serve_with_settings_the_binary_accepts() {
    let docker = manifest("../Dockerfile");
    let serve_help = help(&["serve"]);
    let vars = wb_vars(&docker);
    for v in ["WB_BIND", "WB_DATA_DIR", "WB_DATABASE_URL", "WB_SITE_ROOT"] {
        assert!(vars.iter().any(|x| x == v), "the image sets {v}");
    }
    assert_read_by_workbench(&vars, &serve_help, "Dockerfile");
    // The health check is a real command, and the port the image listens on is the one it exposes.
    assert!(
        docker.contains(r#"HEALTHCHECK "#) && docker.contains(r#"CMD ["workbench", "health"]"#)
    );
    assert!(help(&["health"]).contains("--ready"));
    assert!(docker.contains("WB_BIND=0.0.0.0:3000") && docker.contains("EXPOSE 3000"));
    assert!(
        docker.contains("USER 10001:10001"),
        "the image runs as a non-root user"
    );
    assert!(docker.contains(r#"CMD ["serve"]"#));
}

#[test]
fn the_kubernetes_manifests_use_only_what_the_binary_accepts() {
    let serve_help = help(&["serve"]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let mut files = 0;
    let mut all = String::new();
    for layer in ["base", "postgres"] {
        for entry in std::fs::read_dir(dir.join(layer)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_read_by_workbench(&wb_vars(&text), &serve_help, &path.display().to_string());
            all.push_str(&text);
            files += 1;
        }
    }
    assert!(files >= 9, "{files} manifest files");
    // The grace period outlasts the preStop pause plus the binary's drain and record deadlines.
    let number_after = |key: &str| -> u64 {
        let at = all.find(key).unwrap_or_else(|| panic!("no {key}")) + key.len();
        all[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let grace = number_after("terminationGracePeriodSeconds:");
    let pause = number_after("sleep:\n                seconds:");
    let drain = (workbench_server::DRAIN_DEADLINE + workbench_server::RECORDS_DEADLINE).as_secs();
    assert!(
        grace > pause + drain,
        "grace {grace} s must exceed the preStop pause {pause} s + drain and records {drain} s"
    );
    // Probes ask the binary's health routes on the port it binds.
    assert!(all.contains("path: /healthz") && all.contains("path: /readyz"));
    assert!(all.contains("value: \"0.0.0.0:3000\"") && all.contains("containerPort: 3000"));
}
