//! The layering of workbench-core, checked from the source: each top-level module may import
//! (`crate::<module>`) only modules of a lower layer, and no two files import each other.
//! A module's root file (`mod.rs`) is its facade: its children may use what it declares and
//! re-exports, so child → root edges are not counted as file-level imports. The layer order
//! is read from `core/README.md` ("The order, bottom first: …"), so the picture a newcomer
//! reads is the one this test enforces.

#[path = "support/imports.rs"]
mod imports;

use imports::{find_cycle, graph, imports, Graph};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn core_graph() -> Graph {
    graph(&src())
}

/// The layers, bottom first, as `core/README.md` lists them after "The order, bottom first:"
/// (backticked names up to the end of that paragraph).
fn layers() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("core/README.md");
    let marker = "The order, bottom first:";
    let at = readme
        .find(marker)
        .expect("core/README.md lists the layer order after \"The order, bottom first:\"");
    let paragraph = readme[at + marker.len()..]
        .split("\n\n")
        .next()
        .unwrap_or_default();
    let layers: Vec<String> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert!(
        layers.len() > 10,
        "too few layers read from core/README.md: {layers:?}"
    );
    layers
}

#[test]
fn every_module_imports_only_modules_of_a_lower_layer() {
    let g = core_graph();
    let layers = layers();
    let mut problems = Vec::new();
    for (module, deps) in &g.modules {
        let Some(at) = layers.iter().position(|l| l == module) else {
            problems.push(format!(
                "module {module} is not placed in the layer order of core/README.md"
            ));
            continue;
        };
        for d in deps {
            match layers.iter().position(|l| l == d) {
                Some(i) if i < at => {}
                Some(_) => problems.push(format!("{module} imports {d}, which is not below it")),
                None => problems.push(format!(
                    "{module} imports {d}, which is not placed in the layer order of core/README.md"
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
    let g = core_graph();
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
    let g = core_graph();
    let engine = &g.modules["engine"];
    assert!(
        engine.contains("catalog") && engine.contains("store"),
        "{engine:?}"
    );
    // The order comes from the README, bottom to top.
    let layers = layers();
    assert_eq!(
        layers.first().map(String::as_str),
        Some("error"),
        "{layers:?}"
    );
    // The wiring is the top but for what drives a whole project through it.
    assert_eq!(
        layers[layers.len() - 2..],
        ["workbench".to_owned(), "config_file".to_owned()],
        "{layers:?}"
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
