//! What the compiler this macro runs inside was asked for. A proc macro
//! is loaded into the rustc process (or rust-analyzer's proc-macro
//! server), so that process's arguments say it. Under `cargo check`,
//! clippy and rust-analyzer rustc emits metadata alone and links no binary,
//! so no PTX would ever be embedded: LLVM (most of code generation's time)
//! is skipped there, while the frontend, the protocol checker and the
//! lowering, whose errors the editor shows, still run.

/// Whether no binary will be linked from this expansion.
pub(crate) fn emits_metadata_only() -> bool {
    metadata_only(std::env::args())
}

fn metadata_only(mut args: impl Iterator<Item = String>) -> bool {
    let Some(program) = args.next() else {
        return false;
    };
    // rust-analyzer expands macros for the editor in a server of its own.
    if program.contains("proc-macro-srv") {
        return true;
    }
    let mut kinds = None;
    while let Some(arg) = args.next() {
        if let Some(value) = arg.strip_prefix("--emit=") {
            kinds = Some(value.to_string());
        } else if arg == "--emit" {
            kinds = args.next();
        }
    }
    // `--emit=dep-info,metadata` (each kind may name a file: `kind=path`).
    kinds.is_some_and(|kinds| {
        kinds
            .split(',')
            .map(|k| k.split('=').next().unwrap_or(k))
            .all(|k| matches!(k, "metadata" | "dep-info"))
    })
}

#[cfg(test)]
mod tests {
    use super::metadata_only;

    fn args(list: &[&str]) -> impl Iterator<Item = String> {
        list.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn check_builds_emit_metadata_only_and_real_builds_link() {
        assert!(metadata_only(args(&[
            "rustc",
            "--crate-name",
            "x",
            "--emit=dep-info,metadata"
        ])));
        assert!(metadata_only(args(&[
            "clippy-driver",
            "--emit",
            "dep-info,metadata=/t/x.rmeta"
        ])));
        assert!(metadata_only(args(&[
            "/home/u/rust-analyzer-proc-macro-srv"
        ])));
        assert!(!metadata_only(args(&[
            "rustc",
            "--emit=dep-info,metadata,link"
        ])));
        assert!(!metadata_only(args(&[
            "rustc",
            "--emit=dep-info,link",
            "-C",
            "opt-level=3"
        ])));
        // Nothing said: build everything, as a plain `rustc x.rs` links.
        assert!(!metadata_only(args(&["rustc", "x.rs"])));
        assert!(!metadata_only(args(&[])));
    }
}
