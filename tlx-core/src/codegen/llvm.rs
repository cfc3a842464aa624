//! The LLVM driver: parses the generated LLVM IR text, verifies it, runs the
//! O3 pipeline and emits PTX through the NVPTX target machine.

use super::CodegenError;
use crate::ir::Arch;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::Once;

pub const TRIPLE: &str = "nvptx64-nvidia-cuda";
/// The PTX ISA emitted: 8.6 is the first with `sm_100a`, and ptxas 12.8+ reads it.
const PTX_FEATURES: &str = "+ptx86";

static INIT: Once = Once::new();

fn internal(what: &str, message: impl std::fmt::Display) -> CodegenError {
    CodegenError::Llvm(format!("{what}: {message}"))
}

/// Returns (optimized LLVM IR, PTX).
pub fn compile_to_ptx(module_text: &str, arch: Arch) -> Result<(String, String), CodegenError> {
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
            PTX_FEATURES,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| internal("target machine", arch.name()))?;
    module.set_triple(&triple);
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    module
        .run_passes("default<O3>", &machine, PassBuilderOptions::create())
        .map_err(|e| internal("optimizing", e.to_string()))?;
    module
        .verify()
        .map_err(|e| internal("verifying optimized IR", e.to_string()))?;
    let ptx = machine
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| internal("emitting PTX", e.to_string()))?;
    let ptx = String::from_utf8_lossy(ptx.as_slice()).into_owned();
    Ok((module.print_to_string().to_string(), ptx))
}
