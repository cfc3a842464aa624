//! The macro's fuzzer (issue 52): every kernel of the workspace, mutated a
//! token or an argument at a time (deletions, swaps, duplicates, other
//! names, types and literals, arguments dropped or repeated, neighbouring
//! statements swapped, the attribute too), goes through the whole expansion: frontend, protocol checker, code
//! generation and LLVM. Each input must come out as a launcher or as errors
//! placed at one of its tokens: a panic, an internal compiler error, an
//! error at no token or an expansion that is not Rust is a failure, printed
//! with the mutated source and the seed that makes it again.
//!
//! With `TLX_PTXAS` set (the test suite sets it), the PTX of every input
//! that compiled goes through `ptxas` too.
//!
//! `TLX_FUZZ_INPUTS` (default 1000, what the test suite runs),
//! `TLX_FUZZ_SEED` (default: from the clock, printed), `TLX_FUZZ_ONLY=i`
//! (one input of the seed), `TLX_FUZZ_TIMEOUT_S` (default 120: an input
//! that runs longer is a hang), `TLX_FUZZ_VERBOSE=1` (each input named as
//! it starts, for a crash that ends the process). The inputs that once failed live in
//! `fuzz/regressions/` and run first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

use crate::emit::{expand, BuildEnv};

/// A kernel of the workspace: its attribute's arguments and the function
/// without the attribute, as token lists.
#[derive(Clone)]
struct Seed {
    origin: String,
    attr: Vec<Lex>,
    function: Vec<Lex>,
}

/// A token with groups flattened into their delimiters, so that a mutation
/// is an edit of a list.
#[derive(Clone, PartialEq, Debug)]
enum Lex {
    Open(Delimiter),
    Close(Delimiter),
    Ident(String),
    Punct(char, Spacing),
    Literal(String),
}

fn flatten(tokens: TokenStream, out: &mut Vec<Lex>) {
    for tree in tokens {
        match tree {
            TokenTree::Group(g) => {
                out.push(Lex::Open(g.delimiter()));
                flatten(g.stream(), out);
                out.push(Lex::Close(g.delimiter()));
            }
            TokenTree::Ident(i) => out.push(Lex::Ident(i.to_string())),
            TokenTree::Punct(p) => out.push(Lex::Punct(p.as_char(), p.spacing())),
            TokenTree::Literal(l) => out.push(Lex::Literal(l.to_string())),
        }
    }
}

/// Source text of a token list, a line per statement so that errors have
/// lines to point at. It starts with an empty line: no token of the input
/// is on line 1, where a span at no token (the call site) resolves.
fn render(lexes: &[Lex]) -> String {
    let mut s = String::from("\n");
    for (i, lex) in lexes.iter().enumerate() {
        match lex {
            Lex::Open(d) => s.push_str(match d {
                Delimiter::Parenthesis => "(",
                Delimiter::Brace => "{\n",
                Delimiter::Bracket => "[",
                Delimiter::None => "",
            }),
            Lex::Close(d) => s.push_str(match d {
                Delimiter::Parenthesis => ")",
                Delimiter::Brace => "}\n",
                Delimiter::Bracket => "]",
                Delimiter::None => "",
            }),
            Lex::Ident(x) | Lex::Literal(x) => s.push_str(x),
            Lex::Punct(c, spacing) => {
                s.push(*c);
                if *c == ';' {
                    s.push('\n');
                }
                // `+=`, `..`, and a lifetime's `'` before its name.
                if *spacing == Spacing::Joint
                    && matches!(lexes.get(i + 1), Some(Lex::Punct(..) | Lex::Ident(_)))
                {
                    continue;
                }
            }
        }
        s.push(' ');
    }
    s
}

fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `#[tlx::kernel]` function of the examples, benches, ops, tests and
/// ui-tests, in a stable order.
fn seeds() -> Vec<Seed> {
    struct Finder<'a> {
        origin: &'a str,
        out: Vec<Seed>,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            let is_kernel = |a: &syn::Attribute| {
                a.path()
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "kernel")
            };
            if let Some(attr) = f.attrs.iter().find(|a| is_kernel(a)) {
                let mut attr_lexes = Vec::new();
                if let syn::Meta::List(list) = &attr.meta {
                    flatten(list.tokens.clone(), &mut attr_lexes);
                }
                let mut function = f.clone();
                function.attrs.retain(|a| !is_kernel(a));
                let mut lexes = Vec::new();
                flatten(quote::quote!(#function), &mut lexes);
                self.out.push(Seed {
                    origin: format!("{} `{}`", self.origin, f.sig.ident),
                    attr: attr_lexes,
                    function: lexes,
                });
            }
            syn::visit::visit_item_fn(self, f);
        }
    }
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["examples", "benches", "src", "tests", "ui-tests/tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut seeds = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(parsed) = syn::parse_file(&text) else {
            continue;
        };
        let origin = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut finder = Finder {
            origin: &origin,
            out: Vec::new(),
        };
        finder.visit_file(&parsed);
        seeds.extend(finder.out);
    }
    seeds
}

/// splitmix64: small and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

const TYPES: &[&str] = &[
    "f32", "f16", "bf16", "f64", "i32", "i64", "u32", "u8", "bool", "usize", "Ptr",
];
const KEYWORDS: &[&str] = &[
    "let", "mut", "for", "in", "if", "else", "loop", "while", "return", "break", "continue", "as",
    "true", "false", "const", "fn",
];
const LITERALS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "64",
    "100",
    "1000000",
    "2147483647",
    "4294967296",
    "1.5",
    "0.0",
    "-0.5",
    "1e30",
    "true",
    "\"x\"",
    "0u8",
    "3i64",
    "2.0f32",
];
const INSERTED: &[&str] = &["-", "*", "&", "!", ".", "as", "0", ",", "..", "=", "+"];

/// The names a replacement may take: the kernel's own, the language's
/// builtins, types and keywords.
fn vocabulary(seed: &Seed) -> Vec<String> {
    let mut names: BTreeSet<String> = seed
        .function
        .iter()
        .chain(&seed.attr)
        .filter_map(|l| match l {
            Lex::Ident(x) => Some(x.clone()),
            _ => None,
        })
        .collect();
    names.extend(
        tlx_frontend::lang::builtins()
            .iter()
            .map(|b| b.name.clone()),
    );
    names.extend(TYPES.iter().chain(KEYWORDS).map(|s| s.to_string()));
    names.into_iter().collect()
}

fn is_delimiter(lex: &Lex) -> bool {
    matches!(lex, Lex::Open(_) | Lex::Close(_))
}

/// The index of the delimiter closing the group opened at `open`.
fn closing(lexes: &[Lex], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, lex) in lexes.iter().enumerate().skip(open) {
        match lex {
            Lex::Open(_) => depth += 1,
            Lex::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level elements of a parenthesized group: (start, end) ranges
/// without their commas.
fn arguments(lexes: &[Lex], open: usize, close: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, open + 1);
    for (i, lex) in lexes.iter().enumerate().take(close).skip(open + 1) {
        match lex {
            Lex::Open(_) => depth += 1,
            Lex::Close(_) => depth -= 1,
            Lex::Punct(',', _) if depth == 0 => {
                out.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < close {
        out.push((start, close));
    }
    out
}

/// The statements of a brace block, as token ranges: each ends after a
/// top-level `;` or a nested block (`for`, `if`, `async_tasks!`).
fn statements(lexes: &[Lex], open: usize, close: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, open + 1);
    for (i, lex) in lexes.iter().enumerate().take(close).skip(open + 1) {
        match lex {
            Lex::Open(_) => depth += 1,
            Lex::Close(d) => {
                depth -= 1;
                // `if .. {} else {}` goes on; `let x = {..};` ends at its `;`.
                let next = lexes.get(i + 1);
                let goes_on = matches!(next, Some(Lex::Ident(w)) if w == "else")
                    || matches!(next, Some(Lex::Punct(';', _)));
                if depth == 0 && *d == Delimiter::Brace && !goes_on {
                    out.push((start, i + 1));
                    start = i + 1;
                }
            }
            Lex::Punct(';', _) if depth == 0 => {
                out.push((start, i + 1));
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// One mutation of `lexes`, described for the report; `None` when the
/// chosen kind found nothing to act on.
fn mutate(lexes: &mut Vec<Lex>, vocabulary: &[String], rng: &mut Rng) -> Option<String> {
    let plain: Vec<usize> = (0..lexes.len())
        .filter(|&i| !is_delimiter(&lexes[i]))
        .collect();
    let at = *rng.pick(&plain)?;
    let show = |l: &Lex| render(std::slice::from_ref(l)).trim().to_string();
    // Literal changes keep the source Rust and reach the later stages
    // (the checker with other phases and counts, codegen with odd shapes).
    match rng.below(14) {
        // Two neighbouring statements of one block swapped: a wait after
        // the read it guards, an arrive before the write it announces.
        12 | 13 => {
            let blocks: Vec<usize> = (0..lexes.len())
                .filter(|&i| lexes[i] == Lex::Open(Delimiter::Brace))
                .collect();
            let open = *rng.pick(&blocks)?;
            let close = closing(lexes, open)?;
            let statements = statements(lexes, open, close);
            if statements.len() < 2 {
                return None;
            }
            let k = rng.below(statements.len() - 1);
            let ((a0, a1), (b0, b1)) = (statements[k], statements[k + 1]);
            let first: Vec<Lex> = lexes[a0..a1].to_vec();
            let second: Vec<Lex> = lexes[b0..b1].to_vec();
            let said = format!(
                "swapped `{}` and `{}`",
                render(&first).trim().replace('\n', " "),
                render(&second).trim().replace('\n', " ")
            );
            lexes.splice(a0..b1, second.into_iter().chain(first));
            Some(said)
        }
        0 => {
            let gone = lexes.remove(at);
            Some(format!("deleted `{}`", show(&gone)))
        }
        1 => {
            let next = at + 1;
            (next < lexes.len() && !is_delimiter(&lexes[next])).then(|| {
                lexes.swap(at, next);
                format!(
                    "swapped `{}` and `{}`",
                    show(&lexes[next]),
                    show(&lexes[at])
                )
            })
        }
        2 => {
            let copy = lexes[at].clone();
            lexes.insert(at, copy.clone());
            Some(format!("doubled `{}`", show(&copy)))
        }
        3 | 4 => {
            let Lex::Ident(old) = &lexes[at] else {
                return None;
            };
            let new = rng.pick(vocabulary)?.clone();
            let said = format!("`{old}` became `{new}`");
            lexes[at] = Lex::Ident(new);
            Some(said)
        }
        5 | 9 | 10 | 11 => {
            let literals: Vec<usize> = plain
                .iter()
                .copied()
                .filter(|&i| matches!(lexes[i], Lex::Literal(_)))
                .collect();
            let at = *rng.pick(&literals)?;
            let Lex::Literal(old) = &lexes[at] else {
                return None;
            };
            let new = match old.parse::<i64>() {
                Ok(n) if rng.below(2) == 0 => {
                    let near = [n + 1, n - 1, n * 2, n / 2, n + 7];
                    rng.pick(&near)?.to_string()
                }
                _ => rng.pick(LITERALS)?.to_string(),
            };
            let said = format!("`{old}` became `{new}`");
            let mut replacement = Vec::new();
            flatten(TokenStream::from_str(&new).ok()?, &mut replacement);
            lexes.splice(at..=at, replacement);
            Some(said)
        }
        6 | 7 => {
            let groups: Vec<usize> = (0..lexes.len())
                .filter(|&i| lexes[i] == Lex::Open(Delimiter::Parenthesis))
                .collect();
            let open = *rng.pick(&groups)?;
            let close = closing(lexes, open)?;
            let args = arguments(lexes, open, close);
            let &(start, end) = rng.pick(&args)?;
            let text = render(&lexes[start..end]).trim().replace('\n', " ");
            if rng.below(2) == 0 {
                // The argument and the comma after it (or before it, last).
                let (from, to) = if end < close {
                    (start, end + 1)
                } else {
                    (if start > open + 1 { start - 1 } else { start }, end)
                };
                lexes.drain(from..to);
                Some(format!("dropped the argument `{text}`"))
            } else {
                let mut copy: Vec<Lex> = lexes[start..end].to_vec();
                copy.push(Lex::Punct(',', Spacing::Alone));
                lexes.splice(start..start, copy);
                Some(format!("repeated the argument `{text}`"))
            }
        }
        _ => {
            let new = rng.pick(INSERTED)?;
            let mut inserted = Vec::new();
            flatten(TokenStream::from_str(new).ok()?, &mut inserted);
            lexes.splice(at..at, inserted);
            Some(format!(
                "inserted `{new}` before `{}`",
                show(&lexes[at + 1])
            ))
        }
    }
}

/// A mutated kernel, ready to expand.
struct Input {
    label: String,
    attr: String,
    function: String,
    /// An error about the attribute as a whole (its arguments cut short)
    /// rightly points at the attribute, the macro's call site.
    attr_mutated: bool,
}

impl Input {
    fn source(&self) -> String {
        format!("#[tlx::kernel({})]{}", self.attr.trim(), self.function)
    }
}

fn make_input(seeds: &[Seed], seed: u64, index: usize) -> Option<Input> {
    let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let kernel = rng.pick(seeds)?;
    let vocabulary = vocabulary(kernel);
    let (mut attr, mut function) = (kernel.attr.clone(), kernel.function.clone());
    let mut said = Vec::new();
    let mut attr_mutated = false;
    for _ in 0..1 + rng.below(3) {
        let target = if rng.below(7) == 0 && !attr.is_empty() {
            attr_mutated = true;
            &mut attr
        } else {
            &mut function
        };
        said.extend(mutate(target, &vocabulary, &mut rng));
    }
    Some(Input {
        label: format!("{} ({})", kernel.origin, said.join("; ")),
        attr: render(&attr),
        function: render(&function),
        attr_mutated,
    })
}

/// What one input came to.
enum Outcome {
    /// rustc's parser would have refused it before the macro ran.
    NotRust,
    Compiled,
    Refused,
    Failed(String),
}

/// The `compile_error!`s of an expansion: each message and the line its
/// span starts on.
fn compile_errors(tokens: TokenStream, out: &mut Vec<(String, usize)>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(id) if id == "compile_error" => {
                let message = match trees.get(i + 2) {
                    Some(TokenTree::Group(g)) => g.stream().to_string(),
                    _ => String::new(),
                };
                out.push((message, id.span().start().line));
            }
            TokenTree::Group(g) => compile_errors(g.stream(), out),
            _ => {}
        }
    }
}

/// The PTX modules an expansion embeds (string literals holding an entry).
fn embedded_ptx(tokens: TokenStream, out: &mut Vec<String>) {
    for tree in tokens {
        match tree {
            TokenTree::Group(g) => embedded_ptx(g.stream(), out),
            TokenTree::Literal(l) => {
                let text = l.to_string();
                if text.contains(".entry") && text.contains(".target") {
                    if let Ok(s) = syn::parse_str::<syn::LitStr>(&text) {
                        out.push(s.value());
                    }
                }
            }
            _ => {}
        }
    }
}

/// How many modules went through `ptxas`.
static ASSEMBLED: AtomicUsize = AtomicUsize::new(0);

/// `ptxas` over each module when `TLX_PTXAS` names it: what LLVM emitted
/// must assemble for the arch it targets.
fn assemble(modules: &[String]) -> Result<(), String> {
    let Some(ptxas) = std::env::var_os("TLX_PTXAS") else {
        return Ok(());
    };
    for ptx in modules {
        let arch = ptx
            .lines()
            .find_map(|l| l.trim().strip_prefix(".target "))
            .map(|t| t.split(',').next().unwrap_or(t).trim().to_string())
            .unwrap_or_else(|| "sm_90a".to_string());
        let file = std::env::temp_dir().join(format!(
            "tlx-fuzz-{}-{}.ptx",
            std::process::id(),
            ASSEMBLED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&file, ptx).map_err(|e| format!("writing {}: {e}", file.display()))?;
        let ran = std::process::Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg(&file)
            .args(["-o", "/dev/null"])
            .output();
        let _ = std::fs::remove_file(&file);
        let ran = ran.map_err(|e| format!("running ptxas: {e}"))?;
        if !ran.status.success() {
            return Err(format!(
                "ptxas refused the PTX for {arch}: {}",
                String::from_utf8_lossy(&ran.stderr)
            ));
        }
    }
    Ok(())
}

fn run_one(input: &Input) -> Outcome {
    let (Ok(attr), Ok(function)) = (
        TokenStream::from_str(&input.attr),
        syn::parse_str::<syn::ItemFn>(&input.function),
    ) else {
        return Outcome::NotRust;
    };
    let env = BuildEnv {
        dump: None,
        cache: None,
        metadata_only: false,
    };
    let expanded = match std::panic::catch_unwind(|| expand(attr, &function, &env)) {
        Ok(tokens) => tokens,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Outcome::Failed(format!("the macro panicked: {message}"));
        }
    };
    if let Err(e) = syn::parse2::<syn::File>(expanded.clone()) {
        return Outcome::Failed(format!("the expansion is not Rust: {e}"));
    }
    let mut errors = Vec::new();
    let mut expanded_ptx = Vec::new();
    embedded_ptx(expanded.clone(), &mut expanded_ptx);
    compile_errors(expanded, &mut errors);
    for (message, line) in &errors {
        if message.contains("internal compiler error") {
            return Outcome::Failed(format!("an internal compiler error: {message}"));
        }
        if *line < 2 && !input.attr_mutated {
            return Outcome::Failed(format!("an error at no token of the kernel: {message}"));
        }
    }
    if errors.is_empty() {
        match assemble(&expanded_ptx) {
            Ok(()) => Outcome::Compiled,
            Err(why) => Outcome::Failed(why),
        }
    } else {
        Outcome::Refused
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The inputs kept from earlier failures: `fuzz/regressions/*.rs`, each a
/// kernel with its attribute.
fn regressions() -> Vec<Input> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let function: syn::ItemFn = syn::parse_str(&text)
                .unwrap_or_else(|e| panic!("{}: not a kernel: {e}", path.display()));
            let attr = function.attrs.iter().find_map(|a| match &a.meta {
                syn::Meta::List(l) => Some(l.tokens.to_string()),
                _ => None,
            });
            let mut bare = function.clone();
            bare.attrs.clear();
            Input {
                label: path.display().to_string(),
                attr: format!("\n{}", attr.unwrap_or_default()),
                attr_mutated: true,
                function: render(&{
                    let mut lexes = Vec::new();
                    flatten(quote::quote!(#bare), &mut lexes);
                    lexes
                }),
            }
        })
        .collect()
}

/// What a worker is running, and since when.
type Running = Option<(Instant, String)>;

/// Counts of what the inputs came to.
#[derive(Default)]
struct Tally {
    not_rust: AtomicUsize,
    compiled: AtomicUsize,
    refused: AtomicUsize,
}

#[test]
fn mutated_kernels_get_errors_at_their_tokens_never_a_crash() {
    let seeds = seeds();
    assert!(seeds.len() > 100, "found only {} kernels", seeds.len());
    let count = env_number("TLX_FUZZ_INPUTS").unwrap_or(1000) as usize;
    let seed = env_number("TLX_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let only = env_number("TLX_FUZZ_ONLY").map(|i| i as usize);
    // Names each input as it starts: what to run again after a crash that
    // ends the process (the OOM killer's signal, an LLVM abort).
    let verbose = std::env::var_os("TLX_FUZZ_VERBOSE").is_some();
    let timeout = Duration::from_secs(env_number("TLX_FUZZ_TIMEOUT_S").unwrap_or(120));
    println!(
        "fuzz: {} kernels, {count} inputs, TLX_FUZZ_SEED={seed}",
        seeds.len()
    );
    let mut inputs: Vec<(String, Input)> = regressions()
        .into_iter()
        .map(|input| ("regression".to_string(), input))
        .collect();
    let indices: Vec<usize> = match only {
        Some(i) => vec![i],
        None => (0..count).collect(),
    };
    inputs.extend(indices.into_iter().filter_map(|i| {
        let input = make_input(&seeds, seed, i)?;
        Some((format!("TLX_FUZZ_SEED={seed} TLX_FUZZ_ONLY={i}"), input))
    }));
    let started = Instant::now();
    let tally = Tally::default();
    let failures = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    // Each worker says what it is running and since when; a watchdog ends
    // the run on an input that hangs (the checker or LLVM looping).
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let running: Arc<Mutex<Vec<Running>>> = Arc::new(Mutex::new(vec![None; workers]));
    let watched = Arc::clone(&running);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = Instant::now();
        let guard = watched.lock().unwrap_or_else(|e| e.into_inner());
        for (since, what) in guard.iter().flatten() {
            if now - *since > timeout {
                eprintln!("fuzz: an input ran past {timeout:?} (a hang?):\n{what}");
                std::process::exit(101);
            }
        }
    });
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (inputs, tally, failures, next, running, verbose) =
                (&inputs, &tally, &failures, &next, &running, verbose);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((repro, input)) = inputs.get(i) else {
                    break;
                };
                let what = format!("{repro}: {}\n{}", input.label, input.source());
                if verbose {
                    eprintln!("fuzz: {repro}");
                }
                running.lock().unwrap_or_else(|e| e.into_inner())[worker] =
                    Some((Instant::now(), what.clone()));
                let outcome = run_one(input);
                // Spans of this input are not needed any more.
                proc_macro2::extra::invalidate_current_thread_spans();
                running.lock().unwrap_or_else(|e| e.into_inner())[worker] = None;
                let counter = match outcome {
                    Outcome::NotRust => &tally.not_rust,
                    Outcome::Compiled => &tally.compiled,
                    Outcome::Refused => &tally.refused,
                    Outcome::Failed(why) => {
                        let mut failed = failures.lock().unwrap_or_else(|e| e.into_inner());
                        failed.push(format!("{why}\n  {what}"));
                        continue;
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    println!(
        "fuzz: {} inputs in {:.1} s: {} not Rust (rustc refuses them first), {} refused with errors at their tokens, {} compiled ({} PTX modules through ptxas), {} failed",
        inputs.len(),
        started.elapsed().as_secs_f64(),
        tally.not_rust.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        tally.compiled.load(Ordering::Relaxed),
        ASSEMBLED.load(Ordering::Relaxed),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} fuzz inputs failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_seed_renders_back_to_a_function() {
    let seeds = seeds();
    for seed in &seeds {
        let text = render(&seed.function);
        assert!(
            syn::parse_str::<syn::ItemFn>(&text).is_ok(),
            "{}:\n{text}",
            seed.origin
        );
        assert!(
            TokenStream::from_str(&render(&seed.attr)).is_ok(),
            "{}",
            seed.origin
        );
    }
}

#[test]
fn statements_split_at_semicolons_and_closing_blocks() {
    let mut lexes = Vec::new();
    let body =
        "{ let a = 1; for i in 0..n { f(i); } if a { g(); } else { h(); } let b = { 2 }; x }";
    flatten(TokenStream::from_str(body).unwrap_or_default(), &mut lexes);
    let close = closing(&lexes, 0).unwrap_or(0);
    let texts: Vec<String> = statements(&lexes, 0, close)
        .into_iter()
        .map(|(a, b)| {
            render(&lexes[a..b])
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        texts,
        [
            "let a = 1 ;",
            "for i in 0 .. n { f ( i ) ; }",
            "if a { g ( ) ; } else { h ( ) ; }",
            "let b = { 2 } ;",
        ]
    );
}
