//! Tells `cache.rs` who the compiler is and where its cache lives: a
//! fingerprint of everything that decides a kernel's protocol report and
//! PTX besides its IR (the sources of tlx-core and tlx-codegen, the
//! workspace's lock file, the rustc that builds them), and the cache folder
//! in the target directory this build writes to (the one holding cargo's
//! `CACHEDIR.TAG`), shared by every profile and crate built there.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut hasher = DefaultHasher::new();
    std::env::var("CARGO_PKG_VERSION")
        .unwrap_or_default()
        .hash(&mut hasher);
    if let Some(rustc) = std::env::var_os("RUSTC") {
        if let Ok(out) = std::process::Command::new(rustc).arg("-vV").output() {
            out.stdout.hash(&mut hasher);
        }
    }
    // In the workspace; a published crate's versions say the same.
    for input in [
        "../tlx-core/src",
        "../tlx-core/build.rs",
        "../tlx-core/Cargo.toml",
        "../tlx-codegen/src",
        "../tlx-codegen/Cargo.toml",
        "../Cargo.lock",
    ] {
        let path = manifest.join(input);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
            hash_tree(&path, &mut hasher);
        }
    }
    println!(
        "cargo:rustc-env=TLX_COMPILER_FINGERPRINT={:016x}",
        hasher.finish()
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let cache = out
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(|target| target.join("tlx-cache"))
        .unwrap_or_default();
    println!("cargo:rustc-env=TLX_TARGET_CACHE={}", cache.display());
}

/// Hashes a file's name and bytes, or a folder's files in name order.
fn hash_tree(path: &Path, hasher: &mut DefaultHasher) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        entries.sort();
        for entry in entries {
            hash_tree(&entry, hasher);
        }
    } else if let Ok(bytes) = std::fs::read(path) {
        path.file_name().hash(hasher);
        bytes.hash(hasher);
    }
}
