//! docs/protocol-rules.md says which ui-tests break each rule of the
//! protocol checker: every case a section lists must exist and fail with
//! that rule and code (its `.stderr`, which `tests/ui.rs` holds the build
//! to), and every failing case's rule must have a section. Keeps the page's
//! list of checked classes true as rules and cases change.

use std::path::Path;

/// Each section of the page: its code, its rule's name, the cases listed.
fn sections(page: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut in_cases = false;
    for line in page.lines() {
        if let Some(head) = line.strip_prefix("## ") {
            let mut words = head.split_whitespace();
            let code = words.next().unwrap_or_default().to_string();
            let name = words
                .next()
                .unwrap_or_default()
                .trim_matches('`')
                .to_string();
            out.push((code, name, Vec::new()));
            in_cases = false;
            continue;
        }
        in_cases = (in_cases && !line.trim().is_empty()) || line.starts_with("Cases:");
        if let (true, Some(section)) = (in_cases, out.last_mut()) {
            section
                .2
                .extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    out
}

#[test]
fn every_listed_case_fails_with_its_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("../docs/protocol-rules.md"))
        .expect("reading docs/protocol-rules.md");
    let sections = sections(&page);
    assert!(sections.len() >= 14, "{sections:?}");
    let mut problems = Vec::new();
    for (code, name, cases) in &sections {
        for case in cases {
            let stderr = root.join(format!("tests/fail/{case}.stderr"));
            match std::fs::read_to_string(&stderr) {
                Ok(text) if text.contains(&format!("rule `{name}` [{code}]")) => {}
                Ok(_) => problems.push(format!("{case}: its message is not `{name}` [{code}]")),
                Err(e) => problems.push(format!("{case} ({code}): {}: {e}", stderr.display())),
            }
        }
    }
    // And the other way: a case failing with a rule is listed under it.
    let listed: Vec<&String> = sections.iter().flat_map(|s| &s.2).collect();
    let fail = root.join("tests/fail");
    for entry in std::fs::read_dir(&fail).expect("listing tests/fail") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "stderr") {
            let text = std::fs::read_to_string(&path).expect("reading a .stderr");
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            if text.contains("barrier protocol of") {
                let stem = stem.unwrap_or_default();
                if !listed.iter().any(|c| **c == stem) {
                    problems.push(format!("{stem} breaks a rule but no section lists it"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
