//! GPU timelines (`tlx_core::instrument::timeline`): the rewritten kernel
//! marks its program, each task and each barrier wait, computes what the
//! original does (on the interpreter, where the marks do nothing), and
//! compiles to PTX that reads the timers and that ptxas accepts.

use tlx_core::instrument::{instrument_timeline, SliceKind};
use tlx_core::interp::{ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Arch;

use crate::codegen_common::{assemble, ptxas};
use crate::kernels::{compile, run_gemm_kernel, WS_GEMM};

#[test]
fn a_warp_specialized_gemm_marks_its_tasks_and_waits_and_computes_the_same() {
    let mut kernel = compile(WS_GEMM);
    let params = kernel.params.len();
    let slices = instrument_timeline(&mut kernel);
    tlx_core::check::verify(&kernel).expect("the rewritten kernel verifies");
    assert_eq!(kernel.params.len(), params + 2);
    let kinds: Vec<(SliceKind, &str)> = slices.iter().map(|s| (s.kind, s.label.as_str())).collect();
    assert_eq!(kinds[0], (SliceKind::Wait, "wait: mbarrier (line 24)"));
    assert!(
        kinds.contains(&(SliceKind::Task, "default task")),
        "{kinds:?}"
    );
    assert!(kinds.contains(&(SliceKind::Task, "task 1")), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&(SliceKind::Program, "program")));
    let waits = kinds.iter().filter(|(k, _)| *k == SliceKind::Wait).count();
    assert_eq!(waits, 2, "{kinds:?}");
    // The interpreter does nothing for the marks: a null buffer of no
    // capacity, as a launch that records nothing passes.
    let mem = HostMemory::new();
    let unused = mem.alloc(8);
    let extra = vec![ArgValue::ptr(unused), ArgValue::i32(0)];
    let dims = (80, 72, 40);
    let (got, want) =
        run_gemm_kernel(&mem, &kernel, dims, &InterpOptions::default(), extra).expect("runs");
    assert_eq!(got, want);
}

#[test]
fn timelines_compile_to_timer_reads_that_ptxas_accepts() {
    let plain = compile(WS_GEMM);
    let mut kernel = plain.clone();
    instrument_timeline(&mut kernel);
    let arch = Arch::Sm90a;
    let ptx = tlx_codegen::compile(&kernel, arch).expect("compiles").ptx;
    for needle in ["%globaltimer", "%clock", "%smid"] {
        assert!(ptx.contains(needle), "no {needle} in the PTX");
    }
    // Without timelines none of it is there.
    let untimed = tlx_codegen::compile(&plain, arch).expect("compiles").ptx;
    assert!(!untimed.contains("%globaltimer"));
    match ptxas() {
        Some(p) => assemble(&p, arch, &kernel.name, &ptx),
        None => println!("skipped: ptxas not found"),
    }
}
