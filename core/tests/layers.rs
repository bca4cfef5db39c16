//! The layering of workbench-core, checked from the source: each top-level module may import
//! (`crate::<module>`) only modules of a lower layer, and no two files import each other.
//! A module's root file (`mod.rs`) is its facade: its children may use what it declares and
//! re-exports, so child → root edges are not counted as file-level imports. The layer list
//! below is the one `core/README.md` draws; a new module must be placed in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom first. A module may import only modules that come before it.
const LAYERS: &[&str] = &[
    // foundation
    "error",
    "crypto",
    "ids",
    "clock",
    "args",
    "store",
    "auth",
    "vault",
    "egress",
    "metrics",
    "audit",
    "metering",
    "policy",
    "notify",
    // tool specs and the handler seam
    "catalog",
    // integrations as data
    "integrations",
    // services over integrations and built-in tools
    "connections",
    "oauth",
    "schedule",
    "email",
    "builtin",
    "upstream",
    // the pipeline, and plugin tools with the app service
    "engine",
    "plugins",
    // wiring
    "workbench",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `engine/mod.rs` → ["engine"], `engine/batch.rs` → ["engine", "batch"].
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// Source without comments and string literals, so prose and messages never count as imports.
fn code_only(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Every module path a file names: `crate::a::b`, `super::x` (resolved), and the items of
/// `crate::{a::x, b}` groups.
fn imports(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{' || c == ','))
        .collect();
    for w in words {
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(module))] {
            let mut rest = w;
            while let Some(at) = rest.find(prefix) {
                let tail = &rest[at + prefix.len()..];
                let path_text: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut path = base.clone();
                path.extend(
                    path_text
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                out.push(path);
                rest = &tail[path_text.len()..];
            }
        }
    }
    // Grouped imports: `crate::{engine::X, vault}`.
    let mut rest = code;
    while let Some(at) = rest.find("crate::{") {
        let tail = &rest[at + "crate::{".len()..];
        let end = tail.find('}').unwrap_or(tail.len());
        for item in tail[..end].split(',') {
            let name = item.trim().split("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                out.push(vec![name.to_owned()]);
            }
        }
        rest = &tail[end..];
    }
    out
}

/// What `super` names from a file of `module` (a root file's module is its folder's).
fn parent(module: &[String]) -> Vec<String> {
    let mut p = module.to_vec();
    p.pop();
    p
}

struct Graph {
    /// top-level module → top-level modules it imports
    modules: BTreeMap<String, BTreeSet<String>>,
    /// file → files it imports (child → facade edges left out)
    files: BTreeMap<String, BTreeSet<String>>,
}

fn graph() -> Graph {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let known: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            (
                module_of(f),
                f.strip_prefix(src())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            )
        })
        .collect();
    let mut g = Graph {
        modules: BTreeMap::new(),
        files: BTreeMap::new(),
    };
    for f in &files {
        let module = module_of(f);
        let name = f
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        let code = code.split("#[cfg(test)]").next().unwrap_or_default();
        for path in imports(&module, code) {
            let Some(top) = path.first() else { continue };
            if matches!(top.as_str(), "Error" | "Result") {
                if module.first().is_some_and(|m| m != "error") {
                    g.modules
                        .entry(module[0].clone())
                        .or_default()
                        .insert("error".into());
                }
                continue;
            }
            if let Some(own) = module.first() {
                if top != own {
                    g.modules
                        .entry(own.clone())
                        .or_default()
                        .insert(top.clone());
                }
            }
            // The deepest file the path names.
            let mut target = None;
            for n in (1..=path.len()).rev() {
                if let Some(file) = known.get(&path[..n]) {
                    target = Some((path[..n].to_vec(), file.clone()));
                    break;
                }
            }
            let Some((target_module, target_file)) = target else {
                continue;
            };
            let facade = target_file.ends_with("mod.rs") && module.starts_with(&target_module);
            if target_file != name && !facade && target_file != "lib.rs" {
                g.files.entry(name.clone()).or_default().insert(target_file);
            }
        }
    }
    g
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_owned(), 1);
        stack.push(n.to_owned());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied() {
                Some(1) => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if !state.contains_key(n.as_str()) {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn every_module_imports_only_modules_of_a_lower_layer() {
    let g = graph();
    let mut problems = Vec::new();
    for (module, deps) in &g.modules {
        let Some(at) = LAYERS.iter().position(|l| l == module) else {
            problems.push(format!(
                "module {module} is not placed in LAYERS (core/tests/layers.rs and core/README.md)"
            ));
            continue;
        };
        for d in deps {
            match LAYERS.iter().position(|l| l == d) {
                Some(i) if i < at => {}
                Some(_) => problems.push(format!("{module} imports {d}, which is not below it")),
                None => problems.push(format!(
                    "{module} imports {d}, which is not placed in LAYERS"
                )),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_import_circle_between_modules_or_files() {
    let g = graph();
    assert_eq!(
        find_cycle(&g.modules),
        None,
        "an import circle between top-level modules"
    );
    assert_eq!(find_cycle(&g.files), None, "an import circle between files");
}

#[test]
fn the_checker_sees_imports_and_circles() {
    // The checker must find the edges it judges: engine uses catalog and the store.
    let g = graph();
    let engine = &g.modules["engine"];
    assert!(
        engine.contains("catalog") && engine.contains("store"),
        "{engine:?}"
    );
    let mut circle = BTreeMap::new();
    circle.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    circle.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(find_cycle(&circle).is_some());
    // Grouped and `super::` imports are resolved.
    let paths = imports(
        &["engine".into(), "compose".into()],
        "use super::template; use crate::{vault::Vault, store};",
    );
    assert!(
        paths.contains(&vec!["engine".to_string(), "template".to_string()]),
        "{paths:?}"
    );
    assert!(paths.contains(&vec!["vault".to_string()]), "{paths:?}");
    assert!(paths.contains(&vec!["store".to_string()]), "{paths:?}");
}
