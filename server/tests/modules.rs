//! No import circles in workbench-server: neither two top-level modules nor two files may
//! name each other (`crate::` / `super::` paths), the rule core's layer test applies to core.
//! A module's `mod.rs` is its facade, so its own children may use what it declares.

#[path = "../../core/tests/support/imports.rs"]
mod imports;

use std::path::Path;

#[test]
fn no_import_circle_between_server_modules_or_files() {
    let g = imports::graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        g.modules.contains_key("routes") && g.files.len() > 10,
        "the checker must see server's modules: {:?}",
        g.modules.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        imports::find_cycle(&g.modules),
        None,
        "an import circle between top-level modules of server"
    );
    assert_eq!(
        imports::find_cycle(&g.files),
        None,
        "an import circle between files of server"
    );
}
