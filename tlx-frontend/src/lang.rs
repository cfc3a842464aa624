//! The kernel language's builtins as users read about them, taken from the
//! tables of `docs/language.md` (embedded at build time, so the page stays
//! the one source): each builtin's name, the table cell that writes its
//! call, what it means and its TLX spelling. `tlx::lang` is generated from
//! this, so rustdoc and IDE hovers show the same text as the page.

/// One builtin and what the page says about it (one entry per name; a name
/// in several rows gathers them all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinDoc {
    pub name: String,
    /// Markdown: the call as the page writes it, what it does, and TLX's
    /// spelling where the page gives one.
    pub doc: String,
}

const LANGUAGE_PAGE: &str = include_str!("../../docs/language.md");

/// Every builtin the page's function tables name, in page order (parsed
/// once per process: the macro asks for every kernel it expands).
pub fn builtins() -> &'static [BuiltinDoc] {
    static BUILTINS: std::sync::OnceLock<Vec<BuiltinDoc>> = std::sync::OnceLock::new();
    BUILTINS.get_or_init(|| builtins_in(LANGUAGE_PAGE))
}

/// The builtins of the tables in `page` whose first column is `function` or
/// `tlx-rs`: the names called in the first cell (`name(`, not `Type::name(`)
/// and the bare names listed beside them (`` `max` ``).
pub fn builtins_in(page: &str) -> Vec<BuiltinDoc> {
    let mut out: Vec<BuiltinDoc> = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for line in page.lines() {
        let Some(cells) = table_cells(line) else {
            header = None;
            continue;
        };
        let Some(head) = &header else {
            header = Some(cells);
            continue;
        };
        if !matches!(head[0].as_str(), "function" | "tlx-rs") || cells[0].starts_with("---") {
            continue;
        }
        let meaning = column(head, &cells, "meaning");
        let tlx = column(head, &cells, "TLX (Python)");
        let mut doc = format!("{}\n\n{}", cells[0], meaning.unwrap_or_default());
        if let Some(tlx) = tlx.filter(|t| !t.is_empty() && *t != "the same") {
            doc.push_str(&format!("\n\nTLX: {tlx}"));
        }
        for name in names_in(&cells[0]) {
            match out.iter_mut().find(|b| b.name == name) {
                Some(entry) => {
                    entry.doc.push_str("\n\n");
                    entry.doc.push_str(&doc);
                }
                None => out.push(BuiltinDoc {
                    name,
                    doc: doc.clone(),
                }),
            }
        }
    }
    out
}

/// The cells of a markdown table row, trimmed; `None` for other lines.
fn table_cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    for c in inner.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    Some(cells)
}

fn column<'c>(head: &[String], cells: &'c [String], name: &str) -> Option<&'c str> {
    let index = head.iter().position(|h| h == name)?;
    cells.get(index).map(String::as_str)
}

/// Names a first cell calls or lists: `` `load(ptr, ...)` ``, `` `x.sum(k)` ``,
/// `` `max` ``, `` `exp exp2 log` ``; not `Type::name(..)`, keyword
/// arguments (`` `name = ..` ``) or `r#` names.
fn names_in(cell: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut push = |name: &str| {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    };
    let spans: Vec<&str> = cell.split('`').collect();
    for (i, span) in spans.iter().enumerate() {
        if i % 2 == 0 || span.contains('=') && !span.contains('(') || span.contains('#') {
            continue;
        }
        // A bare name counts at the start of the cell or in a list after a
        // comma, not in prose ("views of `dst` and `barrier`").
        let listed = spans[i - 1].trim().is_empty() || spans[i - 1].trim() == ",";
        let bare = listed
            && !span.is_empty()
            && span.split(' ').all(|w| {
                !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        if bare {
            span.split(' ').for_each(&mut push);
            continue;
        }
        let bytes = span.as_bytes();
        let mut start = None;
        for (at, &b) in bytes.iter().enumerate() {
            let word = b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
            match (start, word) {
                (None, true) => start = Some(at),
                (Some(s), false) => {
                    let qualified = s >= 2 && &bytes[s - 2..s] == b"::";
                    let leading = bytes[s].is_ascii_lowercase() || bytes[s] == b'_';
                    if b == b'(' && !qualified && leading {
                        push(&span[s..at]);
                    }
                    start = None;
                }
                _ => {}
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_give_their_names_and_text() {
        let page = "\
| function | meaning |
| --- | --- |
| `sum(x, axis = k)`, `max`, `min`; methods `x.sum(k)` | reductions |
| `eviction_policy = \"evict_first\"` | a keyword, not a builtin |
| `exp exp2` | math |

| tlx-rs | TLX (Python) | meaning |
| --- | --- | --- |
| `TensorDesc::new(&buf)` | `TensorDescriptor(t)` | not a builtin |
| `local_alloc(shape, dtype)` | `tlx.local_alloc(shape, dtype)` | buffers; `a | b` |
| `max` | the same | again |
";
        let got = builtins_in(page);
        let names: Vec<&str> = got.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["sum", "max", "min", "exp", "exp2", "local_alloc"]);
        let local_alloc = &got[5];
        assert!(
            local_alloc.doc.contains("buffers; `a | b`"),
            "{}",
            local_alloc.doc
        );
        assert!(local_alloc
            .doc
            .contains("TLX: `tlx.local_alloc(shape, dtype)`"));
        assert!(got[1].doc.contains("reductions") && got[1].doc.contains("again"));
    }

    #[test]
    fn the_language_page_documents_the_core_builtins() {
        let names: Vec<&str> = builtins().iter().map(|b| b.name.as_str()).collect();
        for name in [
            "load",
            "store",
            "program_id",
            "dot",
            "local_alloc",
            "barrier_wait",
            "cumsum",
        ] {
            assert!(names.contains(&name), "`{name}` missing from {names:?}");
        }
    }
}

#[cfg(test)]
mod frontend_agrees {
    /// A name the page documents that the frontend does not know would be a
    /// lie in rustdoc: each must get past "unknown function".
    #[test]
    fn every_documented_builtin_is_one_the_frontend_knows() {
        let mut unknown = Vec::new();
        for builtin in super::builtins() {
            let src = format!(
                "#[tlx::kernel]\nfn k(x: Ptr<f32>) {{\n    {}();\n}}\n",
                builtin.name
            );
            if let Err(e) = crate::compile_str(&src) {
                if e.to_string().contains("unknown function") {
                    unknown.push(&builtin.name);
                }
            }
        }
        assert!(unknown.is_empty(), "documented but unknown: {unknown:?}");
    }
}

#[cfg(test)]
mod page_examples {
    /// The kernels in the page's `rust` blocks, each from its
    /// `#[tlx::kernel` attribute to the brace that closes its body.
    fn kernels_in(page: &str) -> Vec<String> {
        let mut kernels = Vec::new();
        for (i, block) in page.split("```").enumerate() {
            let Some(code) = block.strip_prefix("rust\n").filter(|_| i % 2 == 1) else {
                continue;
            };
            let mut rest = code;
            while let Some(start) = rest.find("#[tlx::kernel") {
                let text = &rest[start..];
                let Some(open) = text.find('{') else { break };
                let mut depth = 0usize;
                let mut end = None;
                for (at, c) in text[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(open + at + 1);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else { break };
                kernels.push(text[..end].to_string());
                rest = &text[end..];
            }
        }
        kernels
    }

    /// Every kernel the page shows compiles as written: the examples cannot
    /// drift from the language.
    #[test]
    fn the_pages_kernels_compile() {
        let kernels = kernels_in(super::LANGUAGE_PAGE);
        assert!(kernels.len() >= 3, "found only {} kernels", kernels.len());
        let failures: Vec<String> = kernels
            .iter()
            .filter_map(|src| {
                crate::compile_str(src)
                    .err()
                    .map(|e| format!("{e}\nin:\n{src}"))
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}
