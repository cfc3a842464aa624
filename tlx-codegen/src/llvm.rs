//! The LLVM driver: parses the generated LLVM IR text, verifies it, runs our
//! optimization pipeline (LLVM's O2 without its vectorizers, see [`FUNCTION_PASSES`])
//! and emits PTX through the NVPTX target machine.

use super::CodegenError;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::Once;
use tlx_core::ir::Arch;

pub const TRIPLE: &str = "nvptx64-nvidia-cuda";

static INIT: Once = Once::new();

/// `simplifycfg` as LLVM's O2 function simplification runs it.
const SIMPLIFYCFG: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
     switch-range-to-icmp;no-switch-to-arithmetic;no-switch-to-lookup;keep-loops;\
     no-hoist-common-insts;no-hoist-loads-stores-with-cond-faulting;no-sink-common-insts;\
     speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
/// O2's last `simplifycfg` of function simplification: hoists and sinks common code.
const SIMPLIFYCFG_HOIST_SINK: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
     switch-range-to-icmp;switch-to-arithmetic;no-switch-to-lookup;keep-loops;\
     hoist-common-insts;no-hoist-loads-stores-with-cond-faulting;sink-common-insts;\
     speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
/// O2's `simplifycfg` after the loop optimizations, which may now break loop form.
const SIMPLIFYCFG_LATE: &str = "simplifycfg<bonus-inst-threshold=1;forward-switch-cond;\
     switch-range-to-icmp;switch-to-arithmetic;switch-to-lookup;no-keep-loops;\
     hoist-common-insts;no-hoist-loads-stores-with-cond-faulting;sink-common-insts;\
     speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
/// O2's final `simplifycfg`.
const SIMPLIFYCFG_FINAL: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
     switch-range-to-icmp;switch-to-arithmetic;no-switch-to-lookup;keep-loops;\
     no-hoist-common-insts;hoist-loads-stores-with-cond-faulting;no-sink-common-insts;\
     speculate-blocks;simplify-cond-branch;speculate-unpredictables>";
const INSTCOMBINE: &str = "instcombine<max-iterations=1;no-verify-fixpoint>";

/// The function passes run on the kernel: LLVM 22's `default<O2>` function
/// pipeline (as `opt -passes='default<O2>' -print-pipeline-passes` spells
/// it), less what does nothing for one call-free kernel but costs build time:
///
/// - the vectorizers (loop, SLP, vector-combine) and the `instcombine`s that
///   clean up after them: the emitter already emits vector accesses, and the
///   PTX of every example and bench kernel is byte-identical without them,
///   while SLP alone took a fifth of a matmul tile's build;
/// - the `instcombine` ending function simplification and the second
///   `jump-threading` + `correlated-propagation` after GVN (again the same PTX);
/// - the inliner and interprocedural passes (one function, no calls).
///
/// It ends with `separate-const-offset-from-gep` and `early-cse`, which NVPTX
/// code generation would otherwise run itself, without a CSE in between,
/// right before straight-line strength reduction: the dozens of identical
/// GEPs that splitting per-element addresses creates made that pass
/// quadratic (30 ms of a 128x128 matmul tile). Splitting and merging them
/// here first leaves it nothing to redo; the PTX is byte-identical.
const FUNCTION_PASSES: [&str; 44] = [
    // Range metadata on the special registers (thread and block ids).
    "nvvm-intr-range",
    // Early simplification.
    SIMPLIFYCFG,
    "sroa<modify-cfg>",
    "early-cse<>",
    INSTCOMBINE,
    SIMPLIFYCFG,
    // Function simplification.
    "early-cse<memssa>",
    "speculative-execution<only-if-divergent-target>",
    "jump-threading",
    "correlated-propagation",
    SIMPLIFYCFG,
    INSTCOMBINE,
    "aggressive-instcombine",
    SIMPLIFYCFG,
    "reassociate",
    "constraint-elimination",
    "loop-mssa(loop-instsimplify,loop-simplifycfg,licm<no-allowspeculation>,\
     loop-rotate<header-duplication;no-prepare-for-lto>,licm<allowspeculation>,\
     simple-loop-unswitch<no-nontrivial;trivial>)",
    SIMPLIFYCFG,
    INSTCOMBINE,
    "loop(loop-idiom,indvars,loop-deletion,loop-unroll-full)",
    "sroa<modify-cfg>",
    "mldst-motion<no-split-footer-bb>",
    "gvn<>",
    "sccp",
    "bdce",
    INSTCOMBINE,
    "adce",
    "dse",
    "loop-mssa(licm<allowspeculation>)",
    SIMPLIFYCFG_HOIST_SINK,
    // Late loop optimizations and cleanup.
    "loop(loop-rotate<header-duplication;no-prepare-for-lto>,loop-deletion)",
    "infer-alignment",
    SIMPLIFYCFG_LATE,
    "loop-unroll<O2>",
    "sroa<preserve-cfg>",
    "infer-alignment",
    INSTCOMBINE,
    "loop-mssa(licm<allowspeculation>)",
    "loop-sink",
    "instsimplify",
    "div-rem-pairs",
    SIMPLIFYCFG_FINAL,
    // Ahead of NVPTX's straight-line scalar optimizations (see above).
    "separate-const-offset-from-gep",
    "early-cse<>",
];

/// The whole pipeline: attribute inference as O2 does it, the function
/// passes, and dropping the shared-memory global when nothing uses it.
fn pipeline() -> String {
    format!(
        "inferattrs,cgscc(function-attrs),function({}),globaldce",
        FUNCTION_PASSES.join(",")
    )
}

fn internal(what: &str, message: impl std::fmt::Display) -> CodegenError {
    CodegenError::Llvm(format!("{what}: {message}"))
}

/// Returns (optimized LLVM IR, or nothing unless `keep_llvm_ir`; PTX) in
/// the PTX ISA `ptx_features` names (`+ptx86`: 8.6, the first with
/// `sm_100a`, which ptxas 12.8+ reads).
pub fn compile_to_ptx(
    module_text: &str,
    arch: Arch,
    ptx_features: &str,
    keep_llvm_ir: bool,
) -> Result<(String, String), CodegenError> {
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(module_text.as_bytes(), "kernel");
    let module = context
        .create_module_from_ir(buffer)
        .map_err(|e| internal("parsing generated IR", e.to_string()))?;
    module
        .verify()
        .map_err(|e| internal("verifying generated IR", e.to_string()))?;
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| internal("target", e.to_string()))?;
    let machine = target
        .create_target_machine(
            &triple,
            arch.name(),
            ptx_features,
            // Aggressive only swaps the EarlyCSE after NVPTX's straight-line
            // scalar optimizations for two GVN runs (a tenth of a matmul
            // tile's build), for byte-identical PTX on every example kernel.
            OptimizationLevel::Default,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| internal("target machine", arch.name()))?;
    module.set_triple(&triple);
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    module
        .run_passes(&pipeline(), &machine, PassBuilderOptions::create())
        .map_err(|e| internal("optimizing", e.to_string()))?;
    module
        .verify()
        .map_err(|e| internal("verifying optimized IR", e.to_string()))?;
    let ptx = machine
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| internal("emitting PTX", e.to_string()))?;
    let ptx = String::from_utf8_lossy(ptx.as_slice()).into_owned();
    let ptx = crate::ptxas_workarounds::apply(ptx);
    let llvm_ir = if keep_llvm_ir {
        module.print_to_string().to_string()
    } else {
        String::new()
    };
    Ok((llvm_ir, ptx))
}
