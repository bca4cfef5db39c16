//! The import graph of a crate, read from its source: which top-level modules and which files
//! name each other through `crate::` and `super::` paths. Shared by core's layer test and
//! server's circle test (included with `#[path]`), so both judge imports the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
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
pub fn imports(module: &[String], code: &str) -> Vec<Vec<String>> {
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

pub struct Graph {
    /// top-level module → top-level modules it imports
    pub modules: BTreeMap<String, BTreeSet<String>>,
    /// file → files it imports (child → facade edges left out)
    pub files: BTreeMap<String, BTreeSet<String>>,
}

/// The import graph of the crate whose sources are under `src`.
pub fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let known: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            (
                module_of(src, f),
                f.strip_prefix(src).unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut g = Graph {
        modules: BTreeMap::new(),
        files: BTreeMap::new(),
    };
    for f in &files {
        let module = module_of(src, f);
        let name = f.strip_prefix(src).unwrap().to_string_lossy().into_owned();
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

pub fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
