//! Every `#[tlx::kernel]` of the workspace's `src/`, `examples/` and `benches/`,
//! found by parsing the files (so a new example is covered without editing
//! this test), lowered for each configuration, compiled for every
//! architecture and assembled by `ptxas`, its PTX compared with the golden
//! manifest (`tests/golden/workspace_ptx.txt`). Also prints what each
//! configuration costs to compile, and (ignored by default) measures the
//! macro-equivalent build cost per configuration.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use proc_macro2::TokenStream;
use syn::visit::Visit;
use tlx_codegen as codegen;
use tlx_core::ir::{Arch, Kernel};
use tlx_frontend::{self as frontend, ConfigAttr};

use crate::macro_templates::Template;

/// The folders whose kernels are checked, relative to the workspace root.
const KERNEL_DIRS: [&str; 3] = ["src", "examples", "benches"];

/// One `#[tlx::kernel]` function as written in a source file.
struct FoundKernel {
    /// Relative to the workspace root, e.g. `examples/softmax.rs`.
    file: String,
    line: usize,
    item: syn::ItemFn,
    attr: TokenStream,
}

impl FoundKernel {
    fn label(&self) -> String {
        format!("`{}` ({}:{})", self.item.sig.ident, self.file, self.line)
    }
}

/// The attribute's arguments when `attr` is `#[tlx::kernel...]` (or a bare
/// `#[kernel...]`, as after `use tlx::kernel`).
fn kernel_attr_tokens(attr: &syn::Attribute) -> Option<TokenStream> {
    let segments: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if segments != ["tlx", "kernel"] && segments != ["kernel"] {
        return None;
    }
    Some(match &attr.meta {
        syn::Meta::List(list) => list.tokens.clone(),
        _ => TokenStream::new(),
    })
}

/// Collects kernel functions at any depth of a file, inline modules included,
/// and those a one-rule `macro_rules!` template instantiates
/// (`matmul_kernel!(matmul_bf16, bf16);`: one kernel per element type, as
/// the GEMM bench writes them; see `macro_templates` for the forms taken).
#[derive(Default)]
struct KernelFinder {
    found: Vec<(syn::ItemFn, TokenStream)>,
    /// `macro_rules!` name and template, of the templates that make kernels.
    templates: Vec<(String, Template)>,
    /// Macro invocations at item level: name and arguments.
    invocations: Vec<(String, TokenStream)>,
}

impl<'ast> Visit<'ast> for KernelFinder {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if let Some(attr) = item.attrs.iter().find_map(kernel_attr_tokens) {
            self.found.push((item.clone(), attr));
        }
        // Functions nested in a kernel's body are its inlined helpers, never
        // kernels, so the body is not searched.
    }

    fn visit_item_macro(&mut self, item: &'ast syn::ItemMacro) {
        let name = item.mac.path.segments.last().map(|s| s.ident.to_string());
        match (name.as_deref(), &item.ident) {
            (Some("macro_rules"), Some(ident)) => {
                // Only templates that make kernels matter here.
                let makes_kernels = item.mac.tokens.to_string().contains("tlx :: kernel");
                if let Some(template) = Template::parse(item.mac.tokens.clone()) {
                    if makes_kernels {
                        self.templates.push((ident.to_string(), template));
                    }
                }
            }
            (Some(name), None) => {
                self.invocations
                    .push((name.to_string(), item.mac.tokens.clone()));
            }
            _ => {}
        }
    }
}

fn kernels_in_source(source: &str) -> syn::Result<Vec<(syn::ItemFn, TokenStream)>> {
    let file = syn::parse_file(source)?;
    let mut finder = KernelFinder::default();
    finder.visit_file(&file);
    let mut found = std::mem::take(&mut finder.found);
    for (name, args) in &finder.invocations {
        let mut templates = finder
            .templates
            .iter()
            .filter(|(t, _)| t == name)
            .peekable();
        if templates.peek().is_none() {
            // Not a kernel template of this file (`vec!`, a std macro).
            continue;
        }
        // A template of the file that cannot take the invocation would drop
        // its kernels from the manifest unseen.
        let expansion = templates.find_map(|(_, template)| template.expand(args.clone()));
        let Some(expansion) = expansion else {
            return Err(syn::Error::new(
                proc_macro2::Span::call_site(),
                format!("`{name}!` does not expand by its template here: use ident, ty, literal or tt fragments"),
            ));
        };
        let expanded: syn::File = syn::parse2(expansion)?;
        let mut inner = KernelFinder::default();
        inner.visit_file(&expanded);
        found.extend(inner.found);
    }
    Ok(found)
}

fn workspace_root() -> PathBuf {
    // tlx-core is one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tlx-core has a parent directory")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, recursively, sorted for a stable report order.
fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The kernels of `src/`, `examples/` and `benches/`; files that cannot be read or
/// parsed are reported in the second list.
fn workspace_kernels() -> (Vec<FoundKernel>, Vec<String>) {
    let root = workspace_root();
    let mut kernels = Vec::new();
    let mut failures = Vec::new();
    for dir in KERNEL_DIRS {
        let files = match rust_files(&root.join(dir)) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("cannot list {dir}/: {e}"));
                continue;
            }
        };
        for path in files {
            let file = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let found = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|s| kernels_in_source(&s).map_err(|e| e.to_string()));
            match found {
                Ok(found) => kernels.extend(found.into_iter().map(|(item, attr)| FoundKernel {
                    file: file.clone(),
                    line: item.sig.ident.span().start().line,
                    item,
                    attr,
                })),
                Err(e) => failures.push(format!("{file}: cannot parse: {e}")),
            }
        }
    }
    (kernels, failures)
}

/// The configurations the macro builds: those listed, or one from the
/// attribute's options when the kernel has no const generics.
fn configurations(kernel: &FoundKernel) -> Result<Vec<ConfigAttr>, String> {
    let attr = frontend::parse_attr(kernel.attr.clone()).map_err(|d| d.to_string())?;
    frontend::check_configs(&attr, &kernel.item).map_err(|d| d.to_string())?;
    if attr.configs.is_empty() {
        Ok(vec![ConfigAttr {
            consts: Vec::new(),
            options: attr.options,
        }])
    } else {
        Ok(attr.configs)
    }
}

fn config_label(config: &ConfigAttr) -> String {
    let mut parts: Vec<String> = config
        .consts
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    parts.push(format!("num_warps={}", config.options.num_warps));
    parts.push(format!("num_stages={}", config.options.num_stages));
    if config.options.cluster != [1, 1, 1] {
        let [x, y, z] = config.options.cluster;
        parts.push(format!("ctas_per_cga=({x}, {y}, {z})"));
    }
    if let Some(n) = config.options.maxnreg {
        parts.push(format!("maxnreg={n}"));
    }
    parts.join(" ")
}

/// The architectures a kernel's attribute names (`arch = "sm_90a"` for a
/// Hopper-only kernel), or every one.
fn kernel_arches(kernel: &FoundKernel) -> Vec<Arch> {
    let names_arch = kernel.attr.to_string().contains("arch =");
    match frontend::parse_attr(kernel.attr.clone()) {
        Ok(attr) if names_arch => attr.arches,
        _ => Arch::ALL.to_vec(),
    }
}

/// The configuration's IR, naming its file as the macro does (the path
/// from the workspace root): a span of text parsed here names a
/// `<parsed string N>` whose N counts the files parsed before, which would
/// make the messages of asserts and prints, and so the PTX, depend on
/// which other files hold kernels.
fn lower(kernel: &FoundKernel, config: &ConfigAttr) -> Result<Kernel, String> {
    let mut ir = frontend::lower_kernel(&kernel.item, &config.consts, &config.options)
        .map_err(|d| d.to_string())?;
    ir.source_file = kernel.file.clone();
    Ok(ir)
}

/// `ptxas`: `TLX_PTXAS`, else `ptxas` on the PATH; `None` when neither is
/// there. A `TLX_PTXAS` that cannot be run is an error, not a skip.
fn find_ptxas() -> Result<Option<PathBuf>, String> {
    let runs = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(p) = std::env::var_os("TLX_PTXAS").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if runs(&p) {
            Ok(Some(p))
        } else {
            Err(format!("TLX_PTXAS={} cannot be run", p.display()))
        };
    }
    let on_path = PathBuf::from("ptxas");
    Ok(runs(&on_path).then_some(on_path))
}

fn running_in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Spill stores a wgmma kernel may have, by source file and configuration,
/// each checked in its SASS (`cuobjdump -sass` on the H100) to be outside
/// its main loop.
const SPILL_ALLOWANCES: &[(&str, &str, u32)] = &[
    // Flash attention forward at head dim 256: its accumulator takes 128 of
    // the consumer's 240 registers, and ptxas spills a handful of per-tile
    // scalars (tile coordinates' divisors), reloaded once per tile; the key
    // loop has no local-memory access (session 21).
    ("src/ops/attention/forward.rs", "[D=256 ", 96),
    // Flash attention backward: the producer and dQ-writer warps, at 24
    // registers (all the pool leaves beside two consumer groups at 240),
    // spill a few per-tile scalars of the schedule; every spill sits before
    // the consumers' first wgmma in the SASS (session 38, ptxas 12.9).
    ("src/ops/attention/backward.rs", "[D=", 24),
];

/// The spill stores `what` (a kernel and configuration label) may have.
fn spill_allowance(what: &str) -> u32 {
    SPILL_ALLOWANCES
        .iter()
        .filter(|(file, config, _)| what.contains(file) && what.contains(config))
        .map(|&(_, _, bytes)| bytes)
        .max()
        .unwrap_or(0)
}

/// The spilled bytes of a [`resource_summary`]; unknown counts as a spill.
fn spilled_bytes(summary: &str) -> u32 {
    summary
        .strip_suffix(" B spilled")
        .and_then(|rest| rest.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX)
}

/// Register and spill figures `ptxas -v` reported, e.g. `32 regs, 0 B spilled`.
fn resource_summary(verbose_output: &str) -> String {
    let registers = verbose_output
        .split("Used ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("?");
    let spilled = verbose_output
        .find(" bytes spill stores")
        .and_then(|end| {
            verbose_output[..end]
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
        })
        .unwrap_or("?");
    format!("{registers} regs, {spilled} B spilled")
}

/// Assembles `ptx` for `arch` in `scratch`; on failure the PTX is left there
/// and the error names it.
fn assemble(
    ptxas: &Path,
    scratch: &Path,
    stem: &str,
    arch: Arch,
    ptx: &str,
) -> Result<String, String> {
    let source = scratch.join(format!("{stem}.{}.ptx", arch.name()));
    std::fs::write(&source, ptx).map_err(|e| format!("writing {}: {e}", source.display()))?;
    let output = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .arg("-v")
        .arg(&source)
        .arg("-o")
        .arg(source.with_extension("cubin"))
        .output()
        .map_err(|e| format!("cannot run ptxas at {}: {e}", ptxas.display()))?;
    let messages = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if messages.contains("wgmma") {
        return Err(format!(
            "ptxas warns about the wgmma pipeline ({}):\n{}",
            source.display(),
            messages.trim_end()
        ));
    }
    if !output.status.success() {
        return Err(format!(
            "ptxas rejected the PTX ({}):\n{}",
            source.display(),
            messages.trim_end()
        ));
    }
    let _ = std::fs::remove_file(&source);
    let _ = std::fs::remove_file(source.with_extension("cubin"));
    Ok(resource_summary(&messages))
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A file-name-safe stem naming one kernel configuration.
fn file_stem(kernel: &FoundKernel, config: &ConfigAttr) -> String {
    let mut stem = format!(
        "{}.{}",
        kernel.file.replace(['/', '.'], "_"),
        kernel.item.sig.ident
    );
    for (k, v) in &config.consts {
        stem.push_str(&format!(".{k}={v}"));
    }
    stem
}

/// One configuration of one kernel, lowered: a job the sweeps below run on
/// every core (the IR is `Send`; the syn item it came from is not).
struct LoweredConfig {
    /// The kernel, e.g. `` `softmax` (examples/softmax.rs:12) ``.
    kernel: String,
    /// The kernel and its configuration.
    what: String,
    /// A file-name-safe stem for the PTX ptxas reads.
    stem: String,
    /// `file:kernel [config]`, the golden manifest's name (less the arch).
    manifest_name: String,
    arches: Vec<Arch>,
    ir: Kernel,
    lower_time: Duration,
}

/// Lowers every configuration of every kernel; what fails to lower is a
/// failure.
fn lower_every_config(kernels: &[FoundKernel], failures: &mut Vec<String>) -> Vec<LoweredConfig> {
    let mut jobs = Vec::new();
    for kernel in kernels {
        let configs = match configurations(kernel) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{}: attribute: {e}", kernel.label()));
                continue;
            }
        };
        for (index, config) in configs.iter().enumerate() {
            let what = format!("{} [{}]", kernel.label(), config_label(config));
            let started = Instant::now();
            match lower(kernel, config) {
                Ok(ir) => jobs.push(LoweredConfig {
                    kernel: kernel.label(),
                    // Two configurations may differ in options only; the
                    // jobs run at once, so each needs a file of its own.
                    stem: format!("{}.{index}", file_stem(kernel, config)),
                    manifest_name: format!(
                        "{}:{} [{}]",
                        kernel.file,
                        kernel.item.sig.ident,
                        config_label(config)
                    ),
                    arches: kernel_arches(kernel),
                    ir,
                    lower_time: started.elapsed(),
                    what,
                }),
                Err(e) => failures.push(format!("{what}: frontend: {e}")),
            }
        }
    }
    jobs
}

/// What checking one configuration found.
struct CheckedConfig {
    /// One line: the configuration, its compile times and ptxas's resource use.
    report: String,
    /// Frontend plus codegen for every architecture; assembly is left out,
    /// being this test's cost and not the macro's.
    compile_time: Duration,
    assembled: usize,
    failures: Vec<String>,
    /// `file:kernel [config] arch` and a hash of its PTX, for the golden manifest.
    ptx_hashes: Vec<(String, u64)>,
}

/// Compiles one lowered configuration for every architecture and
/// assembles each PTX when `ptxas` is given.
fn check_config(job: &LoweredConfig, ptxas: Option<&Path>, scratch: &Path) -> CheckedConfig {
    let what = &job.what;
    let mut checked = CheckedConfig {
        report: format!("{what}: lower {:.1} ms", millis(job.lower_time)),
        compile_time: job.lower_time,
        assembled: 0,
        failures: Vec::new(),
        ptx_hashes: Vec::new(),
    };
    for &arch in &job.arches {
        let arch_started = Instant::now();
        let compiled = codegen::compile(&job.ir, arch);
        let arch_time = arch_started.elapsed();
        checked.compile_time += arch_time;
        let compiled = match compiled {
            Ok(c) => c,
            Err(e) => {
                checked
                    .failures
                    .push(format!("{what}, {}: codegen: {e}", arch.name()));
                continue;
            }
        };
        checked
            .report
            .push_str(&format!(", {} {:.1} ms", arch.name(), millis(arch_time)));
        checked.ptx_hashes.push((
            format!("{} {}", job.manifest_name, arch.name()),
            fnv1a(compiled.ptx.as_bytes()),
        ));
        let Some(ptxas) = ptxas else { continue };
        match assemble(ptxas, scratch, &job.stem, arch, &compiled.ptx) {
            Ok(resources) => {
                checked.assembled += 1;
                checked.report.push_str(&format!(" ({resources})"));
                // Tensor-core main loops must keep their accumulators and
                // addresses in registers.
                if compiled.ptx.contains("wgmma.mma_async")
                    && spilled_bytes(&resources) > spill_allowance(what)
                {
                    checked.failures.push(format!(
                        "{what}, {}: a wgmma kernel spills: {resources}",
                        arch.name()
                    ));
                }
            }
            Err(e) => checked
                .failures
                .push(format!("{what}, {}: {e}", arch.name())),
        }
    }
    checked
}

/// Fails with every failure listed; otherwise removes the scratch folder
/// (kept on failure: the PTX ptxas rejected is there).
fn finish(scratch: &Path, failures: &[String]) {
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(scratch);
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Checked mode (`check_bounds`) rewrites every global access; the first
/// configuration of every example kernel, so rewritten, must still verify,
/// compile and assemble for its first architecture.
#[test]
fn every_example_kernel_assembles_with_checked_accesses() {
    let ptxas = find_ptxas().unwrap_or_else(|e| panic!("{e}"));
    let scratch = std::env::temp_dir().join(format!("tlx_checked_ptx_{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("creating a scratch directory");
    let (kernels, mut failures) = workspace_kernels();
    let mut sites = 0;
    let mut jobs = Vec::new();
    for kernel in &kernels {
        let Some(config) = configurations(kernel)
            .ok()
            .and_then(|c| c.into_iter().next())
        else {
            continue;
        };
        let what = format!("{} [{}], checked", kernel.label(), config_label(&config));
        let mut lowered = match lower(kernel, &config) {
            Ok(k) => k,
            Err(e) => {
                failures.push(format!("{what}: frontend: {e}"));
                continue;
            }
        };
        sites += tlx_core::instrument::instrument_bounds(&mut lowered).len();
        if let Err(e) = tlx_core::check::verify(&lowered) {
            failures.push(format!("{what}: the rewritten kernel does not verify: {e}"));
            continue;
        }
        let stem = format!("{}.checked", file_stem(kernel, &config));
        jobs.push((what, stem, kernel_arches(kernel)[0], lowered));
    }
    let results = codegen::parallel::map(&jobs, |(what, stem, arch, lowered)| {
        let compiled =
            codegen::compile(lowered, *arch).map_err(|e| format!("{what}: codegen: {e}"))?;
        let Some(ptxas) = &ptxas else { return Ok(()) };
        match assemble(ptxas, &scratch, stem, *arch, &compiled.ptx) {
            // The checks between wgmmas serialize them: slower, still right.
            Err(e) if e.contains("wgmma pipeline") && !e.contains("error") => Ok(()),
            Err(e) => Err(format!("{what}: {e}")),
            Ok(_) => Ok(()),
        }
    });
    failures.extend(results.into_iter().filter_map(Result::err));
    finish(&scratch, &failures);
    assert!(sites > 0, "no global access was checked");
    println!("{} kernel(s), {sites} checked access(es)", kernels.len());
}

#[test]
fn every_example_kernel_assembles_for_every_arch() {
    let ptxas = find_ptxas().unwrap_or_else(|e| panic!("{e}"));
    match &ptxas {
        Some(p) => println!("ptxas: {}", p.display()),
        None if running_in_ci() => {
            panic!("ptxas not found and CI is set: set TLX_PTXAS (scripts/test.sh does)")
        }
        None => println!("skipped: ptxas not found (PTX is generated but not assembled)"),
    }
    let scratch = std::env::temp_dir().join(format!("tlx_examples_ptx_{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("creating a scratch directory");

    let (kernels, mut failures) = workspace_kernels();
    assert!(
        !kernels.is_empty(),
        "no #[tlx::kernel] found under {KERNEL_DIRS:?} of {}",
        workspace_root().display()
    );
    let jobs = lower_every_config(&kernels, &mut failures);
    let results =
        codegen::parallel::map(&jobs, |job| check_config(job, ptxas.as_deref(), &scratch));
    let mut assembled = 0;
    let mut ptx_hashes = Vec::new();
    // Results come in the jobs' order: a kernel's configurations in a row.
    let mut per_kernel: Vec<(&str, usize, Duration)> = Vec::new();
    for (job, checked_config) in jobs.iter().zip(results) {
        println!("{}", checked_config.report);
        match per_kernel.last_mut() {
            Some((kernel, configs, time)) if *kernel == job.kernel => {
                *configs += 1;
                *time += checked_config.compile_time;
            }
            _ => per_kernel.push((&job.kernel, 1, checked_config.compile_time)),
        }
        assembled += checked_config.assembled;
        failures.extend(checked_config.failures);
        ptx_hashes.extend(checked_config.ptx_hashes);
    }
    for (kernel, configs, time) in per_kernel {
        println!(
            "{kernel}: {configs} config(s), frontend+codegen {:.1} ms",
            millis(time)
        );
    }
    if failures.is_empty() {
        failures.extend(compare_with_golden_ptx(ptx_hashes));
    }
    finish(&scratch, &failures);
    println!(
        "{} kernel(s), {assembled} PTX file(s) assembled",
        kernels.len()
    );
}

/// The golden manifest: one line per kernel configuration and architecture
/// with a hash of its PTX, under the LLVM version that made it.
const GOLDEN_PTX: &str = "tests/golden/workspace_ptx.txt";

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Differences between this build's PTX and the golden manifest: a
/// refactoring of the compiler must leave every kernel's PTX byte-identical.
/// `TLX_BLESS_PTX=1` rewrites the manifest; do that only in a commit of its
/// own that says why the PTX changed. Under another LLVM version than the
/// manifest's the comparison is skipped (LLVM's own output may differ).
fn compare_with_golden_ptx(mut hashes: Vec<(String, u64)>) -> Vec<String> {
    hashes.sort();
    let (major, minor, patch) = inkwell::support::get_llvm_version();
    let llvm = format!("# llvm {major}.{minor}.{patch}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN_PTX);
    let lines: Vec<String> = hashes
        .iter()
        .map(|(name, hash)| format!("{name} {hash:016x}"))
        .collect();
    if std::env::var_os("TLX_BLESS_PTX").is_some() {
        let text = format!("{llvm}\n{}\n", lines.join("\n"));
        std::fs::write(&path, text).expect("writing the golden PTX manifest");
        println!("wrote {} ({} entries)", path.display(), lines.len());
        return Vec::new();
    }
    let Ok(golden) = std::fs::read_to_string(&path) else {
        return vec![format!(
            "{} is missing: run with TLX_BLESS_PTX=1 to write it",
            path.display()
        )];
    };
    let mut golden_lines = golden.lines();
    if golden_lines.next() != Some(llvm.as_str()) {
        println!("skipped the golden PTX comparison: the manifest is not from {llvm}");
        return Vec::new();
    }
    let golden: std::collections::BTreeMap<&str, &str> =
        golden_lines.filter_map(|l| l.rsplit_once(' ')).collect();
    let now: std::collections::BTreeMap<&str, &str> =
        lines.iter().filter_map(|l| l.rsplit_once(' ')).collect();
    let mut differences = Vec::new();
    for (name, hash) in &now {
        match golden.get(name) {
            None => differences.push(format!("new: {name}")),
            Some(h) if h != hash => differences.push(format!("changed: {name}")),
            Some(_) => {}
        }
    }
    differences.extend(
        golden
            .keys()
            .filter(|name| !now.contains_key(*name))
            .map(|name| format!("gone: {name}")),
    );
    if differences.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "the PTX differs from {GOLDEN_PTX} for {} kernel configuration(s):\n{}\n\
         if the change is meant (a new kernel, a better lowering), rewrite the manifest with \
         TLX_BLESS_PTX=1 in a commit of its own that says why",
        differences.len(),
        differences.join("\n")
    )]
}

/// Build cost per configuration as the macro pays it (lower, protocol
/// check where the kernel keeps it on, codegen for the kernel's first
/// architecture: sm_90a unless it is Blackwell-only), the best and median
/// of several runs; `TLX_COST_FILTER=name` measures the kernels whose label
/// contains `name` only. Meaningful in release:
/// `cargo test --release -p tlx-codegen --test compiler -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run with --ignored --nocapture, preferably in release"]
fn build_cost_per_config() {
    const RUNS: usize = 7;
    let (kernels, failures) = workspace_kernels();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let filter = std::env::var("TLX_COST_FILTER").unwrap_or_default();
    println!(
        "| kernel | config | lower ms | protocol check ms | interleavings explored | codegen ms | total ms (min/median) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut sums = [Duration::ZERO; 4];
    for kernel in kernels.iter().filter(|k| k.label().contains(&filter)) {
        let configs = configurations(kernel).expect("the attribute parses");
        let arch = kernel_arches(kernel)[0];
        let checked = frontend::parse_attr(kernel.attr.clone()).map_or(true, |a| a.check_protocol);
        for config in &configs {
            let mut times: [Vec<Duration>; 4] = Default::default();
            let mut explored = String::from("-");
            for _ in 0..RUNS {
                let started = Instant::now();
                let lowered = lower(kernel, config).expect("the kernel lowers");
                let lowered_at = Instant::now();
                if checked {
                    let report = tlx_core::check::check_protocol(&lowered);
                    assert!(report.errors.is_empty(), "{:?}", report.errors);
                    let c = &report.coverage;
                    explored = format!(
                        "{}{}",
                        c.explored,
                        if c.explored_all { " (all)" } else { "" }
                    );
                }
                let checked_at = Instant::now();
                codegen::compile(&lowered, arch).expect("the kernel compiles");
                let done = Instant::now();
                times[0].push(lowered_at - started);
                times[1].push(checked_at - lowered_at);
                times[2].push(done - checked_at);
                times[3].push(done - started);
            }
            for (sum, t) in sums.iter_mut().zip(times.iter_mut()) {
                t.sort();
                *sum += t[RUNS / 2];
            }
            let median = |t: &[Duration]| millis(t[RUNS / 2]);
            println!(
                "| {} | {} | {:.2} | {:.1} | {} | {:.1} | {:.1} / {:.1} |",
                kernel.label(),
                config_label(config),
                median(&times[0]),
                median(&times[1]),
                explored,
                median(&times[2]),
                millis(times[3][0]),
                median(&times[3]),
            );
        }
    }
    println!(
        "sums of medians: lower {:.1} ms, protocol check {:.1} ms, codegen {:.1} ms, total {:.1} ms",
        millis(sums[0]),
        millis(sums[1]),
        millis(sums[2]),
        millis(sums[3])
    );
}

mod tests {
    use super::*;

    #[test]
    fn finds_kernels_at_any_depth_and_only_kernels() {
        let source = r#"
            use tlx::prelude::*;
            #[tlx::kernel(configs = [(BLOCK = 64)])]
            fn top<const BLOCK: usize>(x: Ptr<f32>) {
                fn helper(v: i32) -> i32 { v }
            }
            mod inner {
                #[kernel]
                fn nested(x: Ptr<f32>) {}
            }
            #[test]
            fn not_a_kernel() {}
            #[other::kernel]
            fn foreign_kernel() {}
        "#;
        let found = kernels_in_source(source).expect("the source parses");
        let names: Vec<String> = found.iter().map(|(f, _)| f.sig.ident.to_string()).collect();
        assert_eq!(names, ["top", "nested"]);
        assert_eq!(found[0].1.to_string(), "configs = [(BLOCK = 64)]");
        assert!(found[1].1.is_empty());
    }

    #[test]
    fn resource_summary_reads_ptxas_verbose_output() {
        let output = "ptxas info    : Function properties for k\n    \
            0 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads\n\
            ptxas info    : Used 40 registers, used 1 barriers, 384 bytes cmem[0]\n";
        assert_eq!(resource_summary(output), "40 regs, 24 B spilled");
        assert_eq!(resource_summary(""), "? regs, ? B spilled");
        assert_eq!(spilled_bytes("40 regs, 24 B spilled"), 24);
        assert_eq!(spilled_bytes("? regs, ? B spilled"), u32::MAX);
    }

    #[test]
    fn config_labels_name_consts_and_options() {
        let config = ConfigAttr {
            consts: vec![("BLOCK".to_string(), 1024)],
            options: tlx_core::ir::KernelOptions {
                num_warps: 8,
                num_stages: 2,
                cluster: [2, 1, 1],
                maxnreg: Some(64),
                mbar_timeout_ns: None,
                launch_pdl: false,
            },
        };
        assert_eq!(
            config_label(&config),
            "BLOCK=1024 num_warps=8 num_stages=2 ctas_per_cga=(2, 1, 1) maxnreg=64"
        );
    }
}
