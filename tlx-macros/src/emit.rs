//! Expansion of `#[tlx::kernel]`: compile every configuration, then emit the
//! launcher type with its embedded artifacts.
//!
//! The launcher for `fn add<const BLOCK: usize>(x: Ptr<f32>, n: i32)` is
//! `struct add<const BLOCK: usize>;` with
//! `add::<1024>::launch(&device, grid, &x, n)`: the const arguments pick the
//! configuration at compile time, and a value that was not compiled is a
//! compile error where `launch` is called.

use std::time::{Duration, Instant};

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use tlx_codegen as codegen;
use tlx_core::instrument::{
    instrument_bounds, instrument_timeline, BoundsSite, SliceKind, TimelineSlice,
};
use tlx_core::ir::{Arch, ParamKind, ScalarType, SrcLoc};
use tlx_frontend::diag::{Diagnostic, Diagnostics};
use tlx_frontend::{self as frontend, ConfigAttr, KernelAttr, SigParam, Signature};

use crate::autotune::{autotune_tokens, camel_case, AutotunePlan, ConfigValues, Launcher};
use crate::cache::Cache;
use crate::dump::DumpRequest;

/// Everything the macro produced for one configuration.
struct CompiledConfig {
    consts: Vec<(String, i64)>,
    num_warps: u32,
    cluster: [u32; 3],
    launch_pdl: bool,
    shared_bytes: u32,
    global_scratch_bytes: u32,
    ptx: Vec<(Arch, String)>,
    ir_text: String,
    /// The parameters as this configuration takes them.
    params: Vec<ParamKind>,
    /// With `check_bounds`: the checked accesses, and the source file.
    bounds: Option<(Vec<BoundsSite>, String)>,
    /// With `timeline`: the slices the GPU code marks.
    timeline: Option<Vec<TimelineSlice>>,
    /// What the protocol checker could not decide, as warnings.
    warnings: Vec<Diagnostic>,
}

/// What the build around the macro asks of it: read from the environment
/// once per expansion (a test passes its own).
pub struct BuildEnv {
    /// `TLX_DUMP`: every stage's output, compiled afresh.
    pub dump: Option<DumpRequest>,
    /// The on-disk cache of protocol reports and PTX (`TLX_CACHE`).
    pub cache: Option<Cache>,
    /// `cargo check` or an editor: no PTX is embedded, so LLVM is not run.
    pub metadata_only: bool,
}

impl BuildEnv {
    pub fn from_env() -> BuildEnv {
        BuildEnv {
            dump: DumpRequest::from_env(),
            cache: Cache::from_env(),
            metadata_only: crate::rustc::emits_metadata_only(),
        }
    }
}

pub fn expand(attr: TokenStream, function: &syn::ItemFn, env: &BuildEnv) -> TokenStream {
    let signature = match frontend::parse_signature(function) {
        Ok(s) => s,
        Err(diags) => {
            // Without a signature no typed launcher can be emitted; a unit
            // struct still keeps later uses of the name from cascading.
            let name = &function.sig.ident;
            let vis = &function.vis;
            let errors = diags.to_compile_errors();
            let types_alias = written_types_alias(function);
            return quote! {
                #errors
                #types_alias
                #[allow(non_camel_case_types)]
                #vis struct #name;
            };
        }
    };
    let attr = frontend::parse_attr(attr);
    // Without a usable attribute, `autotune` still exists (keyed by every
    // scalar), so that the attribute's errors do not cascade.
    let planned = attr
        .as_ref()
        .map(|a| AutotunePlan::new(&signature, a.autotune_key.as_deref(), &a.restore));
    let (plan, plan_errors) = match planned {
        Ok(Ok(plan)) => (plan, quote! {}),
        Ok(Err(diags)) => (
            AutotunePlan::every_scalar(&signature),
            diags.to_compile_errors(),
        ),
        Err(_) => (AutotunePlan::every_scalar(&signature), quote! {}),
    };
    let compiled = attr.and_then(|attr| {
        frontend::check_configs(&attr, function)?;
        compile_all(&attr, function, &signature, env)
    });
    // Naming the variables makes rustc track them: changing one rebuilds
    // the kernels with or without timed waits, or checked accesses.
    let tracked = quote! {
        const _: ::core::option::Option<&str> = ::core::option_env!("TLX_MBAR_TIMEOUT_NS");
        const _: ::core::option::Option<&str> = ::core::option_env!("TLX_CHECK_BOUNDS");
        const _: ::core::option::Option<&str> = ::core::option_env!("TLX_TRACE");
    };
    let lang = lang_refs(function);
    let tracked_and = |rest: TokenStream| quote! { #tracked #lang #plan_errors #rest };
    match compiled {
        Ok(configs) => {
            let warnings = configs
                .iter()
                .flat_map(|c| &c.warnings)
                .enumerate()
                .map(|(i, w)| warning_tokens(i, w))
                .collect();
            launcher(
                function,
                &signature,
                &plan,
                Some(&configs),
                tracked_and(warnings),
            )
        }
        // The launcher is still emitted (with no artifacts) so IDEs and the
        // rest of the crate see the kernel's type and signature.
        Err(diags) => launcher(
            function,
            &signature,
            &plan,
            None,
            tracked_and(diags.to_compile_errors()),
        ),
    }
}

/// A reference to `tlx::lang::NAME` at each builtin the body calls, spanned
/// at the user's name: an editor that expands the macro then finds the
/// builtin's documentation there (hover, go to definition).
fn lang_refs(function: &syn::ItemFn) -> TokenStream {
    struct Calls {
        names: std::collections::HashSet<&'static str>,
        found: Vec<syn::Ident>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Calls {
        fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*call.func {
                if let Some(ident) = p.path.get_ident() {
                    if self.names.contains(ident.to_string().as_str()) {
                        self.found.push(ident.clone());
                    }
                }
            }
            syn::visit::visit_expr_call(self, call);
        }
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if self.names.contains(call.method.to_string().as_str()) {
                self.found.push(call.method.clone());
            }
            syn::visit::visit_expr_method_call(self, call);
        }
    }
    let names = tlx_frontend::lang::builtins()
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    let mut calls = Calls {
        names,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_block(&mut calls, &function.block);
    if calls.found.is_empty() {
        return quote! {};
    }
    let refs = calls
        .found
        .iter()
        .map(|ident| quote_spanned! {ident.span()=> let _ = ::tlx::lang::#ident; });
    quote! {
        const _: () = {
            #[allow(dead_code)]
            fn __tlx_builtins_used() {
                #(#refs)*
            }
        };
    }
}

/// A hidden alias of the parameter types as the user wrote them (`Ptr<f32>`,
/// ...): naming them makes rustc resolve them, so the user's imports count
/// as used and a type that does not exist is reported at its own tokens.
fn written_types_alias(function: &syn::ItemFn) -> TokenStream {
    // A descriptor's block names const generics, out of scope here, a
    // `Strided<T, N>` lacks the host type's lifetime, and `Mesh<N>` (the
    // axes a kernel sees) has no host counterpart; the launcher's
    // `&TensorDesc<'_, T>`, `&Strided<'_, T, N>` and `&MeshRank<'_>`
    // parameters name them.
    let is_descriptor = |ty: &syn::Type| {
        matches!(ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| {
            s.ident == "TensorDesc"
                || s.ident == "Strided"
                || (s.ident == "Mesh" && !s.arguments.is_none())
        }))
    };
    let types = function.sig.inputs.iter().filter_map(|arg| match arg {
        syn::FnArg::Typed(t) if !is_descriptor(&t.ty) => Some(&*t.ty),
        _ => None,
    });
    let alias = format_ident!("__tlx_param_types_{}", function.sig.ident);
    quote! {
        #[doc(hidden)]
        #[allow(dead_code, non_camel_case_types)]
        type #alias = (#(#types,)*);
    }
}

/// The configurations to build: those listed, or one from the attribute's options.
fn configurations(attr: &KernelAttr) -> Vec<ConfigAttr> {
    if attr.configs.is_empty() {
        vec![ConfigAttr {
            consts: Vec::new(),
            options: attr.options.clone(),
        }]
    } else {
        attr.configs.clone()
    }
}

fn compile_all(
    attr: &KernelAttr,
    function: &syn::ItemFn,
    signature: &Signature,
    env: &BuildEnv,
) -> Result<Vec<CompiledConfig>, Diagnostics> {
    let dump = env.dump.as_ref();
    // The frontend reads the function's tokens, which only this thread may
    // touch. The protocol checker and the code generator read IR alone:
    // each configuration is checked, and each (configuration, arch) pair
    // compiled, at once (code generation in an LLVM context per thread);
    // their findings come back here to be placed at the user's tokens.
    let started = Instant::now();
    let kernels = configurations(attr)
        .into_iter()
        .map(|config| {
            let kernel = frontend::lower_kernel(function, &config.consts, &config.options)?;
            Ok((config, kernel))
        })
        .collect::<Result<Vec<_>, Diagnostics>>()?;
    // Repeated builds of the same IR (other crates, profiles, `cargo doc`)
    // take the checker's report and the PTX from the cache; `TLX_DUMP`
    // wants every stage's output, so it compiles afresh.
    let cache = env.cache.as_ref();
    let codegen_cache = cache.filter(|_| dump.is_none());
    let check_protocol = attr.check_protocol;
    let irs: Vec<&tlx_core::ir::Kernel> = kernels.iter().map(|(_, kernel)| kernel).collect();
    // `TLX_DUMP=protocol` wants what each check covered: it runs afresh.
    let report_cache = cache.filter(|_| !dump.is_some_and(|d| d.wants("protocol")));
    let checks = codegen::parallel::map(&irs, |kernel| {
        let started = Instant::now();
        let report = check_protocol.then(|| {
            let Some(cache) = report_cache else {
                return tlx_core::check::check_protocol(kernel);
            };
            let ir = kernel.to_string();
            cache.report(&ir).unwrap_or_else(|| {
                let report = tlx_core::check::check_protocol(kernel);
                cache.store_report(&ir, &report);
                report
            })
        });
        (report, started.elapsed())
    });
    let mut lowered = Vec::with_capacity(kernels.len());
    for ((config, mut kernel), (report, check_time)) in kernels.into_iter().zip(checks) {
        if let (Some(dump), Some(report)) = (dump, &report) {
            let stem = config_stem(&signature.name.to_string(), &config.consts);
            let summary = format!(
                "{}\n{} error(s), {} warning(s), in {:.1} ms\n",
                report.coverage,
                report.errors.len(),
                report.warnings.len(),
                check_time.as_secs_f64() * 1e3
            );
            dump.write("protocol", &stem, "protocol.txt", &summary);
        }
        let warnings = match report {
            Some(report) => protocol_findings(function, signature, &config, &report)?,
            None => Vec::new(),
        };
        // The launcher takes the user's parameters; checked mode appends its own.
        let params = kernel.params.iter().map(|p| p.kind).collect();
        let bounds = attr
            .check_bounds
            .then(|| (instrument_bounds(&mut kernel), kernel.source_file.clone()));
        let ir_text = kernel.to_string();
        // The interpreter keeps timelines of its own: only the GPU's code
        // is rewritten to record them.
        let timeline = attr.timeline.then(|| {
            let mut timed = kernel.clone();
            let slices = instrument_timeline(&mut timed);
            let ir_text = timed.to_string();
            Timed {
                kernel: timed,
                ir_text,
                slices,
            }
        });
        lowered.push(Lowered {
            config,
            kernel,
            ir_text,
            params,
            bounds,
            timeline,
            warnings,
            check_time,
        });
    }
    // Under `cargo check` no binary is linked, so no PTX is embedded: the
    // kernels are lowered for code generation's errors, not run through LLVM.
    let metadata_only = env.metadata_only;
    let arches = &attr.arches;
    let jobs: Vec<(&tlx_core::ir::Kernel, &str, Arch)> = lowered
        .iter()
        .flat_map(|l| {
            let (kernel, ir) = l.gpu_kernel();
            arches.iter().map(move |&arch| (kernel, ir, arch))
        })
        .collect();
    let mut results = codegen::parallel::map(&jobs, |&(kernel, ir, arch)| {
        let started = Instant::now();
        let cached = codegen_cache.and_then(|cache| cache.compiled(ir, arch));
        let compiled = match cached {
            Some(compiled) => Ok(compiled),
            None if metadata_only => codegen::check(kernel, arch),
            None => {
                let keep_llvm_ir = dump.is_some_and(|d| d.wants("llvm"));
                let compiled = if keep_llvm_ir {
                    codegen::compile_with_llvm_ir(kernel, arch)
                } else {
                    codegen::compile(kernel, arch)
                };
                if let (Some(cache), Ok(c)) = (codegen_cache, &compiled) {
                    cache.store_compiled(ir, arch, c);
                }
                compiled
            }
        };
        (compiled, started.elapsed())
    });
    let mut out = Vec::with_capacity(lowered.len());
    for l in &lowered {
        let compiled: Vec<ArchResult> = results.drain(..arches.len()).collect();
        out.push(finish_one(attr, function, signature, l, compiled, dump)?);
    }
    if let Some(dump) = dump {
        dump.record_timing(&format!(
            "{}: {:.1} ms for {} configuration(s) and {} arch(es), compiled in parallel",
            signature.name,
            started.elapsed().as_secs_f64() * 1e3,
            lowered.len(),
            attr.arches.len()
        ));
    }
    Ok(out)
}

/// One configuration as the frontend and the checker left it, for the
/// code generator.
struct Lowered {
    config: ConfigAttr,
    kernel: tlx_core::ir::Kernel,
    ir_text: String,
    params: Vec<ParamKind>,
    bounds: Option<(Vec<BoundsSite>, String)>,
    timeline: Option<Timed>,
    warnings: Vec<Diagnostic>,
    check_time: Duration,
}

/// A configuration's GPU code with timelines (`instrument_timeline`).
struct Timed {
    kernel: tlx_core::ir::Kernel,
    ir_text: String,
    slices: Vec<TimelineSlice>,
}

impl Lowered {
    /// The kernel code generation compiles, and its IR text (the cache's key).
    fn gpu_kernel(&self) -> (&tlx_core::ir::Kernel, &str) {
        match &self.timeline {
            Some(t) => (&t.kernel, &t.ir_text),
            None => (&self.kernel, &self.ir_text),
        }
    }
}

/// A configuration's code generation for one arch, and its time.
type ArchResult = (
    Result<codegen::CompiledKernel, codegen::CodegenError>,
    Duration,
);

fn finish_one(
    attr: &KernelAttr,
    function: &syn::ItemFn,
    signature: &Signature,
    lowered: &Lowered,
    compiled: Vec<ArchResult>,
    dump: Option<&DumpRequest>,
) -> Result<CompiledConfig, Diagnostics> {
    let config = &lowered.config;
    let stem = config_stem(&signature.name.to_string(), &config.consts);
    let mut ptx = Vec::new();
    let mut shared_bytes = 0;
    let mut global_scratch_bytes = 0;
    let mut codegen_time = Duration::ZERO;
    for (&arch, (result, took)) in attr.arches.iter().zip(compiled) {
        codegen_time += took;
        let compiled = result.map_err(|e| codegen_error(function, signature, config, arch, e))?;
        if let Some(dump) = dump {
            let arch_stem = format!("{stem}.{}", arch.name());
            dump.write("llvm", &arch_stem, "ll", &compiled.llvm_ir);
            dump.write("ptx", &arch_stem, "ptx", &compiled.ptx);
            if !compiled.notes.is_empty() {
                dump.write("notes", &arch_stem, "notes.txt", &compiled.notes.join("\n"));
            }
        }
        shared_bytes = shared_bytes.max(compiled.shared_bytes);
        global_scratch_bytes = global_scratch_bytes.max(compiled.global_scratch_bytes);
        ptx.push((arch, compiled.ptx));
    }
    let kernel = &lowered.kernel;
    if let Some(dump) = dump {
        dump.write("ir", &stem, "tlxir", &lowered.ir_text);
        dump.record_timing(&format!(
            "{stem}: protocol check {:.1} ms, code generation {:.1} ms for {} arch(es)",
            lowered.check_time.as_secs_f64() * 1e3,
            codegen_time.as_secs_f64() * 1e3,
            attr.arches.len(),
        ));
    }
    Ok(CompiledConfig {
        consts: config.consts.clone(),
        num_warps: kernel.total_warps(),
        cluster: kernel.options.cluster,
        launch_pdl: kernel.options.launch_pdl,
        shared_bytes,
        global_scratch_bytes,
        ptx,
        ir_text: lowered.ir_text.clone(),
        params: lowered.params.clone(),
        bounds: lowered.bounds.clone(),
        timeline: lowered.timeline.as_ref().map(|t| t.slices.clone()),
        warnings: lowered.warnings.clone(),
    })
}

/// A code generation error as a diagnostic at the user's tokens.
fn codegen_error(
    function: &syn::ItemFn,
    signature: &Signature,
    config: &ConfigAttr,
    arch: Arch,
    e: codegen::CodegenError,
) -> Diagnostics {
    let name = &signature.name;
    let mut span = name.span();
    let (message, hint) = match e {
        codegen::CodegenError::SharedMemoryExceeded { needed, limit } => (
            format!(
                "kernel `{name}` with {} needs {needed} bytes of shared memory, more than the {limit} a program may use",
                config_label(config)
            ),
            "lower `num_stages` or the block sizes of this configuration".to_string(),
        ),
        codegen::CodegenError::Misuse { message, hint, at } => {
            let found = at.and_then(|loc| span_at(function, loc));
            let message = match (found, at) {
                (Some(call), _) => {
                    span = call;
                    message
                }
                (None, Some(loc)) => format!("{message} (line {})", loc.line),
                (None, None) => message,
            };
            (format!("kernel `{name}` with {}: {message}", config_label(config)), hint)
        }
        e => (
            format!(
                "internal compiler error while generating {} code for `{name}`: {e}",
                arch.name()
            ),
            "please report this kernel; `TLX_DUMP=ir` writes its IR".to_string(),
        ),
    };
    Diagnostics(vec![Diagnostic {
        message,
        span,
        hint: Some(hint),
    }])
}

/// Runs the protocol checker: its errors fail the build, each at the call
/// it is about; what it could not decide comes back as warnings.
fn protocol_findings(
    function: &syn::ItemFn,
    signature: &Signature,
    config: &ConfigAttr,
    report: &tlx_core::check::ProtocolReport,
) -> Result<Vec<Diagnostic>, Diagnostics> {
    let name = &signature.name;
    // rustc shows a warning a macro raises at the macro's attribute, not
    // at the span it is given: a warning's message names the line.
    let diagnostic = |f: &tlx_core::check::Finding, warning: bool| {
        let at_line = format!(" (line {})", f.at.line);
        let (span, line) = match span_at(function, f.at) {
            Some(span) if warning && f.at.line > 0 => (span, at_line),
            Some(span) => (span, String::new()),
            None if f.at.line == 0 => (name.span(), String::new()),
            None => (name.span(), at_line),
        };
        let label = if config.consts.is_empty() {
            String::new()
        } else {
            format!(" with {}", config_label(config))
        };
        let code = f.rule.code();
        Diagnostic {
            message: format!(
                "barrier protocol of `{name}`{label}, rule `{}` [{code}]: {}{line}",
                f.rule.name(),
                f.message
            ),
            span,
            hint: Some(format!("{} ({code} in docs/protocol-rules.md)", f.hint)),
        }
    };
    if !report.errors.is_empty() {
        let errors = report.errors.iter().map(|f| diagnostic(f, false));
        return Err(Diagnostics(errors.collect()));
    }
    Ok(report
        .warnings
        .iter()
        .map(|f| diagnostic(f, true))
        .collect())
}

/// A warning at the user's tokens: stable Rust lets a macro warn only
/// through a lint, so this names a deprecated item whose note is the text.
fn warning_tokens(index: usize, warning: &Diagnostic) -> TokenStream {
    let note = match &warning.hint {
        Some(hint) => format!("{}\n  = help: {hint}", warning.message),
        None => warning.message.clone(),
    };
    let item = format_ident!("__tlx_protocol_warning_{}", index);
    quote_spanned! {warning.span=>
        const _: () = {
            #[deprecated(note = #note)]
            #[allow(non_camel_case_types)]
            struct #item;
            let _ = #item;
        };
    }
}

/// The token of the kernel body that starts at `loc` (an op's location is
/// the start of the expression it came from, e.g. a call's name), so that
/// a code-generation error points at the user's call.
fn span_at(function: &syn::ItemFn, loc: SrcLoc) -> Option<proc_macro2::Span> {
    fn find(tokens: TokenStream, loc: SrcLoc) -> Option<proc_macro2::Span> {
        for tree in tokens {
            let start = tree.span().start();
            if start.line as u32 == loc.line && start.column as u32 == loc.col {
                return Some(match &tree {
                    proc_macro2::TokenTree::Group(g) => g.span_open(),
                    other => other.span(),
                });
            }
            if let proc_macro2::TokenTree::Group(g) = tree {
                if let Some(span) = find(g.stream(), loc) {
                    return Some(span);
                }
            }
        }
        None
    }
    if loc.line == 0 {
        return None;
    }
    find(function.block.to_token_stream(), loc)
}

/// The configuration as its attribute writes it: `BLOCK = 1024, num_stages = 3`.
fn config_label(config: &ConfigAttr) -> String {
    let consts = config.consts.iter().map(|(k, v)| format!("{k} = {v}"));
    let options = [
        format!("num_warps = {}", config.options.num_warps),
        format!("num_stages = {}", config.options.num_stages),
    ];
    let all: Vec<String> = consts.chain(options).collect();
    format!("({})", all.join(", "))
}

/// A file-name stem naming the kernel and its constants, e.g. `add.BLOCK=1024`.
fn config_stem(name: &str, consts: &[(String, i64)]) -> String {
    let mut stem = name.to_string();
    for (k, v) in consts {
        stem.push_str(&format!(".{k}={v}"));
    }
    stem
}

/// The launcher type. `configs` is `None` when compilation failed: the type
/// and its `launch` signature are still emitted, with `errors` beside them.
fn launcher(
    function: &syn::ItemFn,
    signature: &Signature,
    plan: &AutotunePlan,
    configs: Option<&[CompiledConfig]>,
    errors: TokenStream,
) -> TokenStream {
    let name = &signature.name;
    let vis = &function.vis;
    let spec_name = format_ident!("__TLX_SPEC_{}", name);
    let const_names: Vec<&syn::Ident> = signature.consts.iter().map(|c| &c.name).collect();
    let const_types: Vec<TokenStream> = signature
        .consts
        .iter()
        .map(|c| c.written.to_token_stream())
        .collect();
    let generics = if const_names.is_empty() {
        quote! {}
    } else {
        quote! { <#(const #const_names: #const_types),*> }
    };
    // The struct's defaults name the instance `autotune` belongs to.
    let const_defaults: Vec<TokenStream> = signature
        .consts
        .iter()
        .map(|c| const_literal(c.ty, 0))
        .collect();
    let struct_generics = if const_names.is_empty() {
        quote! {}
    } else {
        quote! { <#(const #const_names: #const_types = #const_defaults),*> }
    };
    let generic_args = if const_names.is_empty() {
        quote! {}
    } else {
        quote! { <#(#const_names),*> }
    };

    let mut launch_params = Vec::new();
    let mut launch_args = Vec::new();
    // The same arguments as named fields of `<Kernel>Args`, for `launch_with`.
    let mut arg_fields = Vec::new();
    let mut field_args = Vec::new();
    let mut param_specs = Vec::new();
    // The kernel parameter (IR param) of each signature parameter: a
    // `Strided` one is several.
    let mut ir_index = 0;
    for (ident, param) in signature.params.iter() {
        let name_str = ident.to_string();
        // A descriptor's block depends on the configuration; the spec
        // names the first one's (launches check element type and rank).
        let kind = match param {
            SigParam::Plain(kind) => Some(*kind),
            SigParam::Strided { elem, .. } | SigParam::Sym { elem } => Some(ParamKind::Ptr(*elem)),
            SigParam::Mesh { .. } => Some(ParamKind::Scalar(ScalarType::I32)),
            SigParam::Desc { .. } => configs
                .and_then(|c| c.first())
                .and_then(|c| c.params.get(ir_index).copied()),
        };
        ir_index += param.arg_count();
        if let Some(kind) = kind {
            let kind_tokens = param_kind_tokens(kind);
            param_specs.push(quote! {
                ::tlx::__private::ParamSpec { name: #name_str, kind: #kind_tokens }
            });
        }
        for (trailing_name, trailing_kind) in param.trailing_params(&name_str) {
            let kind_tokens = param_kind_tokens(trailing_kind);
            param_specs.push(quote! {
                ::tlx::__private::ParamSpec { name: #trailing_name, kind: #kind_tokens }
            });
        }
        match param {
            SigParam::Strided { elem, rank } => {
                let ty = rust_type(*elem);
                launch_params
                    .push(quote_spanned! {ident.span()=> #ident: &::tlx::Strided<'_, #ty, #rank> });
                arg_fields.push(quote! { pub #ident: &'a ::tlx::Strided<'a, #ty, #rank> });
                for i in 0..param.arg_count() {
                    launch_args.push(quote! { #ident.kernel_arg(#i) });
                    field_args.push(quote! { args.#ident.kernel_arg(#i) });
                }
            }
            SigParam::Mesh { .. } => {
                launch_params.push(quote_spanned! {ident.span()=> #ident: &::tlx::MeshRank<'_> });
                arg_fields.push(quote! { pub #ident: &'a ::tlx::MeshRank<'a> });
                for i in 0..param.arg_count() {
                    launch_args.push(quote! { #ident.kernel_arg(#i) });
                    field_args.push(quote! { args.#ident.kernel_arg(#i) });
                }
            }
            SigParam::Sym { elem } => {
                let ty = rust_type(*elem);
                launch_params
                    .push(quote_spanned! {ident.span()=> #ident: &::tlx::SymRank<'_, #ty> });
                arg_fields.push(quote! { pub #ident: &'a ::tlx::SymRank<'a, #ty> });
                for i in 0..param.arg_count() {
                    launch_args.push(quote! { #ident.kernel_arg(#i) });
                    field_args.push(quote! { args.#ident.kernel_arg(#i) });
                }
            }
            SigParam::Plain(ParamKind::Ptr(t)) => {
                let ty = rust_type(*t);
                launch_params.push(
                    quote_spanned! {ident.span()=> #ident: &(impl ::tlx::PtrArg<#ty> + ?Sized) },
                );
                launch_args.push(quote! { ::tlx::PtrArg::kernel_arg(#ident) });
                arg_fields.push(quote! { pub #ident: &'a dyn ::tlx::PtrArg<#ty> });
                field_args.push(quote! { ::tlx::PtrArg::kernel_arg(args.#ident) });
            }
            SigParam::Plain(ParamKind::Scalar(t)) => {
                let ty = rust_type(*t);
                launch_params.push(quote_spanned! {ident.span()=> #ident: #ty });
                launch_args.push(quote! { ::tlx::ScalarArg::kernel_arg(#ident) });
                arg_fields.push(quote! { pub #ident: #ty });
                field_args.push(quote! { ::tlx::ScalarArg::kernel_arg(args.#ident) });
            }
            SigParam::Plain(ParamKind::TensorDesc(block)) => {
                let ty = rust_type(block.elem());
                launch_params
                    .push(quote_spanned! {ident.span()=> #ident: &::tlx::TensorDesc<'_, #ty> });
                launch_args.push(quote! { #ident.kernel_arg() });
                arg_fields.push(quote! { pub #ident: &'a ::tlx::TensorDesc<'a, #ty> });
                field_args.push(quote! { args.#ident.kernel_arg() });
            }
            SigParam::Desc { elem, .. } => {
                let ty = rust_type(*elem);
                launch_params
                    .push(quote_spanned! {ident.span()=> #ident: &::tlx::TensorDesc<'_, #ty> });
                launch_args.push(quote! { #ident.kernel_arg() });
                arg_fields.push(quote! { pub #ident: &'a ::tlx::TensorDesc<'a, #ty> });
                field_args.push(quote! { args.#ident.kernel_arg() });
            }
        }
    }

    let kernel_name = name.to_string();
    let doc = format!(
        "Launcher for the tlx kernel `{kernel_name}`: `{kernel_name}{}::launch(&device, grid, args...)`.",
        if const_names.is_empty() { "" } else { "::<...>" }
    );
    let (spec_item, config_index, launch_body) = match configs {
        Some(configs) => {
            let config_specs = configs.iter().map(config_spec_tokens);
            let index = config_index_tokens(name, &signature.consts, configs);
            (
                quote! {
                    #[doc(hidden)]
                    #[allow(non_upper_case_globals)]
                    static #spec_name: ::tlx::__private::KernelSpec = ::tlx::__private::KernelSpec {
                        name: #kernel_name,
                        params: &[#(#param_specs),*],
                        configs: &[#(#config_specs),*],
                    };
                },
                quote! {
                    #[doc(hidden)]
                    const __TLX_CONFIG: usize = #index;
                },
                quote! {
                    ::tlx::__private::launch(device, &#spec_name, Self::__TLX_CONFIG, grid, args)
                },
            )
        }
        None => (
            quote! {},
            quote! {},
            quote! {
                let _ = (device, grid, args);
                ::core::result::Result::Err(::tlx::Error::NotCompiled { kernel: #kernel_name })
            },
        ),
    };
    // Only pointers and descriptors borrow.
    let borrows = signature
        .params
        .iter()
        .any(|(_, p)| !matches!(p, SigParam::Plain(ParamKind::Scalar(_))));
    let (compiled_trait, compiled_bound) = match configs {
        Some(configs) => compiled_marker(vis, name, &signature.consts, configs),
        // A kernel that did not compile has its own errors; launches of it
        // report `NotCompiled` at run time rather than more errors here.
        None => (quote! {}, quote! {}),
    };
    let (args_struct, launch_with) = named_args(
        vis,
        name,
        borrows,
        &arg_fields,
        &field_args,
        &compiled_bound,
    );
    let config_values: Option<Vec<ConfigValues>> = configs.map(|configs| {
        configs
            .iter()
            .map(|c| ConfigValues {
                consts: const_literals(&signature.consts, c),
                num_warps: c.num_warps,
            })
            .collect()
    });
    let autotune = autotune_tokens(
        &Launcher {
            vis,
            name,
            spec_name: &spec_name,
            signature,
            const_types: &const_types,
            const_defaults: &const_defaults,
            launch_params: &launch_params,
            launch_args: &launch_args,
        },
        plan,
        config_values.as_deref(),
    );

    let types_alias = written_types_alias(function);
    quote! {
        #errors
        #spec_item
        #compiled_trait
        #types_alias
        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #vis struct #name #struct_generics;

        impl #generics #name #generic_args {
            #config_index

            /// Launches the kernel on `grid` programs (asynchronous on a GPU).
            #[allow(clippy::too_many_arguments)]
            pub fn launch(
                device: &::tlx::Device,
                grid: impl ::core::convert::Into<::tlx::Grid>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), ::tlx::Error> #compiled_bound {
                Self::__tlx_launch(device, grid.into(), &[#(#launch_args),*])
            }

            #launch_with

            fn __tlx_launch(
                device: &::tlx::Device,
                grid: ::tlx::Grid,
                args: &[::tlx::args::KernelArg<'_>],
            ) -> ::core::result::Result<(), ::tlx::Error> {
                #launch_body
            }
        }

        #args_struct
        #autotune
    }
}

/// `<Kernel>Args`, the kernel's parameters as named fields, and
/// `launch_with`, which takes it: a launch whose arguments cannot be given
/// in the wrong order (none for a kernel without parameters). The struct
/// takes a lifetime when a field `borrows`.
fn named_args(
    vis: &syn::Visibility,
    kernel: &syn::Ident,
    borrows: bool,
    fields: &[TokenStream],
    args: &[TokenStream],
    compiled_bound: &TokenStream,
) -> (TokenStream, TokenStream) {
    if fields.is_empty() {
        return (quote! {}, quote! {});
    }
    let camel = camel_case(&kernel.to_string());
    let struct_name = format_ident!("{camel}Args", span = kernel.span());
    let (params, used) = if borrows {
        (quote! { <'a> }, quote! { <'_> })
    } else {
        (quote! {}, quote! {})
    };
    let doc =
        format!("The arguments of the tlx kernel `{kernel}` by name, for `{kernel}::launch_with`.");
    let args_struct = quote! {
        #[doc = #doc]
        #[allow(missing_docs)]
        #vis struct #struct_name #params {
            #(#fields),*
        }
    };
    let launch_with = quote! {
        /// Launches the kernel on `grid` programs with its arguments named
        /// (asynchronous on a GPU).
        pub fn launch_with(
            device: &::tlx::Device,
            grid: impl ::core::convert::Into<::tlx::Grid>,
            args: #struct_name #used,
        ) -> ::core::result::Result<(), ::tlx::Error> #compiled_bound {
            Self::__tlx_launch(device, grid.into(), &[#(#args),*])
        }
    };
    (args_struct, launch_with)
}

/// A marker trait that exactly the compiled instances of the launcher
/// implement, and the `where` clause that makes `launch` ask for it: a
/// launch with const arguments no configuration has is then a type error at
/// the call, reported with the other type errors (a failed constant would
/// surface only once they are fixed), in words from
/// `#[diagnostic::on_unimplemented]`.
fn compiled_marker(
    vis: &syn::Visibility,
    name: &syn::Ident,
    consts: &[frontend::ConstParam],
    configs: &[CompiledConfig],
) -> (TokenStream, TokenStream) {
    let marker = format_ident!("__TlxCompiled_{}", name);
    let labels: Vec<String> = configs.iter().map(consts_label).collect();
    let message = format!("kernel `{name}` was not compiled for `{{Self}}`");
    let note = format!(
        "the compiled configurations are {}; add this one to `configs` in its #[tlx::kernel] attribute",
        labels.join(", ")
    );
    let impls = configs.iter().map(|c| {
        let args = const_literals(consts, c);
        let generic_args = if consts.is_empty() {
            quote! {}
        } else {
            quote! { <#(#args),*> }
        };
        quote! { impl #marker for #name #generic_args {} }
    });
    let marker_item = quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #[diagnostic::on_unimplemented(
            message = #message,
            label = "no configuration has these const arguments",
            note = #note
        )]
        #vis trait #marker {}
        #(#impls)*
    };
    (marker_item, quote! { where Self: #marker })
}

/// A constant expression giving the index of the configuration matching the
/// const generics; a combination that was not compiled fails compilation
/// (after the marker trait of [`compiled_marker`] has reported it).
fn config_index_tokens(
    name: &syn::Ident,
    consts: &[frontend::ConstParam],
    configs: &[CompiledConfig],
) -> TokenStream {
    if consts.is_empty() {
        return quote! { 0 };
    }
    let compiled: Vec<String> = configs.iter().map(consts_label).collect();
    let message = format!(
        "tlx: this combination of const arguments was not compiled for kernel `{name}`; compiled: {}. Add it to `configs` in its #[tlx::kernel] attribute.",
        compiled.join(", ")
    );
    let arms = configs.iter().enumerate().map(|(i, c)| {
        let conds = consts
            .iter()
            .zip(const_literals(consts, c))
            .map(|(cp, lit)| {
                let ident = &cp.name;
                quote! { #ident == #lit }
            });
        quote! { if #(#conds)&&* { #i } else }
    });
    quote! { #(#arms)* { ::core::panic!(#message) } }
}

/// The value `config` gives each const generic, in the signature's order.
fn const_literals(consts: &[frontend::ConstParam], config: &CompiledConfig) -> Vec<TokenStream> {
    consts
        .iter()
        .map(|cp| {
            let value = config
                .consts
                .iter()
                .find(|(k, _)| cp.name == k.as_str())
                .map_or(0, |(_, v)| *v);
            const_literal(cp.ty, value)
        })
        .collect()
}

/// A configuration's constants as `(BM = 64, BN = 128)`.
fn consts_label(config: &CompiledConfig) -> String {
    let values: Vec<String> = config
        .consts
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    format!("({})", values.join(", "))
}

fn const_literal(ty: ScalarType, value: i64) -> TokenStream {
    match ty {
        ScalarType::Bool => {
            if value != 0 {
                quote! { true }
            } else {
                quote! { false }
            }
        }
        _ => {
            let lit = proc_macro2::Literal::i64_unsuffixed(value);
            quote! { #lit }
        }
    }
}

fn config_spec_tokens(config: &CompiledConfig) -> TokenStream {
    let keys = config.consts.iter().map(|(k, _)| k.as_str());
    let values = config.consts.iter().map(|(_, v)| *v);
    let num_warps = config.num_warps;
    let [cx, cy, cz] = config.cluster;
    let launch_pdl = config.launch_pdl;
    let shared_bytes = config.shared_bytes;
    let global_scratch_bytes = config.global_scratch_bytes;
    let arches = config.ptx.iter().map(|(a, _)| arch_tokens(*a));
    let texts = config.ptx.iter().map(|(_, p)| p.as_str());
    let ir = config.ir_text.as_str();
    let params = config.params.iter().map(|k| param_kind_tokens(*k));
    let bounds = match &config.bounds {
        None => quote! { ::core::option::Option::None },
        Some((sites, file)) => {
            let sites = sites.iter().map(|site| {
                let names = site.params.iter().map(String::as_str);
                let access = site.access;
                let (line, column) = (site.loc.line, site.loc.col + 1);
                quote! {
                    ::tlx::__private::BoundsSiteSpec {
                        params: &[#(#names),*],
                        access: #access,
                        file: #file,
                        line: #line,
                        column: #column,
                    }
                }
            });
            quote! { ::core::option::Option::Some(&[#(#sites),*]) }
        }
    };
    let timeline = match &config.timeline {
        None => quote! { ::core::option::Option::None },
        Some(slices) => {
            let slices = slices.iter().map(|slice| {
                let kind = match slice.kind {
                    SliceKind::Program => quote! { Program },
                    SliceKind::Task => quote! { Task },
                    SliceKind::Wait => quote! { Wait },
                };
                let label = slice.label.as_str();
                quote! {
                    ::tlx::__private::TimelineSliceSpec {
                        kind: ::tlx::__private::SliceKind::#kind,
                        label: #label,
                    }
                }
            });
            quote! { ::core::option::Option::Some(&[#(#slices),*]) }
        }
    };
    quote! {
        ::tlx::__private::ConfigSpec {
            consts: &[#((#keys, #values)),*],
            num_warps: #num_warps,
            cluster: [#cx, #cy, #cz],
            launch_pdl: #launch_pdl,
            shared_bytes: #shared_bytes,
            global_scratch_bytes: #global_scratch_bytes,
            ptx: &[#((#arches, #texts)),*],
            ir: #ir,
            params: &[#(#params),*],
            bounds: #bounds,
            timeline: #timeline,
        }
    }
}

fn arch_tokens(arch: Arch) -> TokenStream {
    match arch {
        Arch::Sm90a => quote! { ::tlx::__private::ir::Arch::Sm90a },
        Arch::Sm100a => quote! { ::tlx::__private::ir::Arch::Sm100a },
    }
}

fn scalar_tokens(t: ScalarType) -> TokenStream {
    let variant = match t {
        ScalarType::Bool => quote! { Bool },
        ScalarType::I8 => quote! { I8 },
        ScalarType::U8 => quote! { U8 },
        ScalarType::I32 => quote! { I32 },
        ScalarType::U32 => quote! { U32 },
        ScalarType::I64 => quote! { I64 },
        ScalarType::F16 => quote! { F16 },
        ScalarType::BF16 => quote! { BF16 },
        ScalarType::F32 => quote! { F32 },
        ScalarType::F64 => quote! { F64 },
        ScalarType::F8E4M3 => quote! { F8E4M3 },
        ScalarType::F8E5M2 => quote! { F8E5M2 },
    };
    quote! { ::tlx::__private::ir::ScalarType::#variant }
}

fn param_kind_tokens(kind: ParamKind) -> TokenStream {
    match kind {
        ParamKind::Ptr(t) => {
            let t = scalar_tokens(t);
            quote! { ::tlx::__private::ir::ParamKind::Ptr(#t) }
        }
        ParamKind::Scalar(t) => {
            let t = scalar_tokens(t);
            quote! { ::tlx::__private::ir::ParamKind::Scalar(#t) }
        }
        ParamKind::TensorDesc(block) => {
            let t = scalar_tokens(block.elem());
            let dims = block.shape().into_iter().map(|d| d as u32);
            quote! {
                ::tlx::__private::ir::ParamKind::TensorDesc(
                    ::tlx::__private::ir::DescriptorBlock::from_dims(#t, &[#(#dims),*])
                )
            }
        }
    }
}

/// The host-side Rust type of an element or scalar parameter.
fn rust_type(t: ScalarType) -> TokenStream {
    match t {
        ScalarType::Bool => quote! { bool },
        ScalarType::I8 => quote! { i8 },
        ScalarType::U8 => quote! { u8 },
        ScalarType::I32 => quote! { i32 },
        ScalarType::U32 => quote! { u32 },
        ScalarType::I64 => quote! { i64 },
        ScalarType::F16 => quote! { ::tlx::half::f16 },
        ScalarType::BF16 => quote! { ::tlx::half::bf16 },
        ScalarType::F32 => quote! { f32 },
        ScalarType::F64 => quote! { f64 },
        ScalarType::F8E4M3 => quote! { ::tlx::F8E4M3 },
        ScalarType::F8E5M2 => quote! { ::tlx::F8E5M2 },
    }
}
