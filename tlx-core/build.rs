//! Generates the primitive registry (the `Prim` enum, each name's
//! definition and family) from the definitions themselves: every
//! `pub(super) const NAME: PrimDef` in a family file `src/ir/prims/f.rs`
//! becomes `Prim::Name => f::NAME` of `Family::F`, so adding a primitive
//! needs no line anywhere but its definition, and the interpreter and code
//! generator dispatch by family. Files in name order, definitions in file
//! order.

use std::fmt::Write as _;
use std::path::Path;

/// Files of `src/ir/prims/` that hold no definitions.
const NOT_FAMILIES: [&str; 3] = ["mod.rs", "rules.rs", "tests.rs"];

fn main() {
    let dir = Path::new("src/ir/prims");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| !NOT_FAMILIES.iter().any(|n| p.ends_with(n)))
        .collect();
    files.sort();
    let mut rows = String::new();
    let mut families = String::new();
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let family = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_else(|| panic!("a family file name: {}", path.display()));
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("pub(super) const ") else {
                continue;
            };
            let Some((name, ty)) = rest.split_once(':') else {
                continue;
            };
            if !ty.trim_start().starts_with("PrimDef =") {
                continue;
            }
            let line = format!(
                "    {} => {} {family}::{name},",
                camel_case(name),
                camel_case(family)
            );
            writeln!(rows, "{line}").unwrap_or_else(|e| panic!("formatting the registry: {e}"));
        }
        writeln!(families, "    {},", camel_case(family))
            .unwrap_or_else(|e| panic!("formatting the registry: {e}"));
    }
    let out = std::env::var("OUT_DIR").unwrap_or_else(|e| panic!("OUT_DIR: {e}"));
    let generated = format!("registry! {{\n{{\n{families}}}\n{{\n{rows}}}\n}}\n");
    std::fs::write(Path::new(&out).join("prim_registry.rs"), generated)
        .unwrap_or_else(|e| panic!("writing the registry: {e}"));
}

/// `ASYNC_DOT_WAIT` -> `AsyncDotWait`, `TCGEN05_MMA` -> `Tcgen05Mma`.
fn camel_case(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let lower = word.to_ascii_lowercase();
            let mut chars = lower.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}
