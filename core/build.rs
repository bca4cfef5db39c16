//! Embeds every shipped plugin definition (`plugins/*.json`) in the binary: adding a file to
//! `core/plugins/` ships it, with no list to keep in step.

use std::path::Path;

fn main() {
    // Read at run time: a build script binary may be reused for another checkout of the crate.
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("plugins");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("core/plugins exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = String::from("&[\n");
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    out.push_str("]\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("plugins.rs");
    std::fs::write(dest, out).unwrap();
}
