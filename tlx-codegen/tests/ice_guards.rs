//! Every place code generation refuses a kernel because an earlier stage
//! should have (`refused_upstream`) is listed here with the test that shows
//! that stage refusing it at the user's token. A new such site, or one whose
//! guard test is gone, fails this test: a valid kernel must never reach an
//! internal compiler error, and each refusal must be proven upstream.

use std::path::{Path, PathBuf};

/// Where a construct is refused before code generation.
enum Guard {
    /// A case tagged so in `tlx-frontend/src/tests.rs`.
    Frontend(&'static str),
    /// A `ui-tests/tests/fail/<name>.rs` case.
    Ui(&'static str),
}

/// Each `refused_upstream` site, by the start of its message.
const SITES: &[(&str, Guard)] = &[
    (
        "bit operation ",
        Guard::Frontend("guard:float-bit-operation"),
    ),
    ("{op:?} on bool", Guard::Frontend("guard:bool-arithmetic")),
    ("fast division of ", Guard::Frontend("guard:fast-division")),
    ("{op:?} on f64 ", Guard::Frontend("guard:f64-math")),
    ("unary {op:?} on ", Guard::Frontend("guard:unary-operator")),
    ("bitcast from ", Guard::Frontend("guard:bitcast")),
    (
        "reducing pointers",
        Guard::Frontend("guard:reduce-pointers"),
    ),
    ("a scan of ", Guard::Frontend("guard:scan-bools")),
    (
        "dot accumulating in ",
        Guard::Frontend("guard:dot-accumulator"),
    ),
    (
        "{kind:?} on pointers",
        Guard::Frontend("guard:elementwise-pointers"),
    ),
    ("atomic {op:?} on ", Guard::Ui("atomic_max_of_floats")),
    ("atomic_cas on ", Guard::Ui("atomic_cas_of_f16")),
    (
        "cluster_barrier inside an async task",
        Guard::Ui("task_cluster_barrier"),
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first string literal of each `refused_upstream(...)` call.
fn refusal_messages(src: &str) -> Vec<String> {
    let call = "refused_upstream(";
    let mut found = Vec::new();
    for (at, _) in src.match_indices(call) {
        if src[..at].ends_with("fn ") {
            continue;
        }
        let rest = &src[at + call.len()..];
        let Some(open) = rest.find('"') else { continue };
        let literal = &rest[open + 1..];
        let end = literal.find('"').unwrap_or(literal.len());
        found.push(literal[..end].to_string());
    }
    found
}

#[test]
fn every_refusal_in_code_generation_has_an_upstream_guard_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = root.parent().expect("the workspace folder");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut problems = Vec::new();
    let mut seen = vec![false; SITES.len()];
    for file in &files {
        let src = std::fs::read_to_string(file).expect("a readable source file");
        for message in refusal_messages(&src) {
            match SITES
                .iter()
                .position(|(start, _)| message.starts_with(start))
            {
                Some(i) => seen[i] = true,
                None => problems.push(format!(
                    "{}: `refused_upstream(\"{message}\")` has no entry in SITES: \
                     refuse the construct in the frontend, add a test, and list it here",
                    file.display()
                )),
            }
        }
        for phrase in ["not supported", "does not support", "Unsupported("] {
            if src.contains(phrase) {
                problems.push(format!(
                    "{}: says \"{phrase}\": implement it, or refuse it upstream",
                    file.display()
                ));
            }
        }
    }
    let frontend_tests = std::fs::read_to_string(workspace.join("tlx-frontend/src/tests.rs"))
        .expect("the frontend's tests");
    for ((start, guard), seen) in SITES.iter().zip(seen) {
        if !seen {
            problems.push(format!("SITES lists \"{start}\", which no longer occurs"));
        }
        let shown = match guard {
            Guard::Frontend(tag) => frontend_tests.contains(&format!("\"{tag}\"")),
            Guard::Ui(name) => workspace
                .join(format!("ui-tests/tests/fail/{name}.rs"))
                .is_file(),
        };
        if !shown {
            problems.push(format!("the guard test of \"{start}\" is missing"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
