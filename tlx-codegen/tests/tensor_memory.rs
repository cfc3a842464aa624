//! Blackwell's tensor memory end to end, without a Blackwell GPU: a
//! warp-specialized GEMM whose accumulator lives in tensor memory passes the
//! protocol checker, its misuses are errors at the call (an accumulator read
//! before the barrier that tracks its MMAs, a commit counted twice, a
//! missing commit), and its PTX for sm_100a allocates, multiplies, commits,
//! loads and frees tensor memory and is accepted by `ptxas`.

use tlx_core::check::{check_protocol, ProtocolReport, Rule};
use tlx_core::ir::Arch;

use crate::codegen_common;
use crate::kernels::{compile, download_f32, run_gemm, upload, upload_bf16};
use tlx_core::interp::InterpError;

const TMEM_GEMM: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [(BM = 128, BN = 64, BK = 64)])]
fn gemm<const BM: usize, const BN: usize, const BK: usize>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_buf = local_alloc([BM, BK], bf16, 1);
    let b_buf = local_alloc([BK, BN], bf16, 1);
    let acc = local_alloc([BM, BN], f32, 1, storage = "tmem");
    let full = alloc_barriers(1, 1);
    let empty = alloc_barriers(1, 1);
    let done = alloc_barriers(1, 1);
    let off_m = program_id(0) * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = (k + BK - 1) / BK;
    async_tasks! {
        task(default) {
            barrier_wait(local_view(done, 0), 0);
            let tile = local_load(local_view(acc, 0));
            let rows = off_m + arange(0, BM);
            let cols = off_n + arange(0, BN);
            store(c + rows[(.., None)] * n + cols[(None, ..)], tile, mask = rows[(.., None)] < m);
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                barrier_wait(local_view(empty, 0), i % 2 ^ 1);
                let bar = local_view(full, 0);
                barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(bf16));
                async_descriptor_load(a_desc, local_view(a_buf, 0), [off_m, i * BK], bar);
                async_descriptor_load(b_desc, local_view(b_buf, 0), [i * BK, off_n], bar);
            }
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                barrier_wait(local_view(full, 0), i % 2);
                async_dot(
                    local_view(a_buf, 0),
                    local_view(b_buf, 0),
                    local_view(acc, 0),
                    use_acc = i > 0,
                    mbarriers = [local_view(empty, 0)],
                );
            }
            tcgen05_commit(local_view(done, 0));
        }
    }
}
"#;

fn broken(from: &str, to: &str) -> String {
    assert!(TMEM_GEMM.contains(from), "{from:?} not in the kernel");
    TMEM_GEMM.replacen(from, to, 1)
}

/// The one error of `src`: its rule and the line of the call it names.
fn error_of(src: &str) -> (Rule, String) {
    let report = check_protocol(&compile(src));
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    let line = src.lines().nth(finding.at.line as usize - 1).unwrap_or("");
    (finding.rule, line.trim().to_owned())
}

#[test]
fn a_tensor_memory_gemm_passes_the_checker() {
    assert_eq!(
        check_protocol(&compile(TMEM_GEMM)),
        ProtocolReport::default()
    );
}

#[test]
fn reading_the_accumulator_before_its_mmas_is_an_error() {
    // The copies have landed, but the MMAs are not waited for.
    let src = broken(
        "barrier_wait(local_view(done, 0), 0);",
        "barrier_wait(local_view(full, 0), 0);",
    );
    let (rule, line) = error_of(&src);
    assert_eq!(rule, Rule::AccumulatorBeforeWait);
    assert!(line.starts_with("let tile = local_load"), "{line}");
}

#[test]
fn reading_the_accumulator_after_the_first_mma_only_is_an_overwrite() {
    // The first stage's release tracks the first MMA only: the next one
    // overwrites the accumulator while the epilogue may be reading it.
    let src = broken(
        "barrier_wait(local_view(done, 0), 0);",
        "barrier_wait(local_view(empty, 0), 0);",
    );
    let (rule, line) = error_of(&src);
    assert_eq!(rule, Rule::OverwriteBeforeRelease);
    assert!(line.starts_with("async_dot("), "{line}");
}

#[test]
fn a_commit_on_the_barrier_the_mmas_arrive_on_is_an_error() {
    let src = broken(
        "tcgen05_commit(local_view(done, 0));",
        "tcgen05_commit(local_view(empty, 0));\n            tcgen05_commit(local_view(done, 0));",
    );
    let (rule, line) = error_of(&src);
    assert_eq!(rule, Rule::MmaCompletion);
    assert_eq!(line, "tcgen05_commit(local_view(empty, 0));");
}

#[test]
fn the_gemm_matches_its_reference_on_the_interpreter() {
    // 64 rows of C: TMA zero-fills A's other 64, the store masks them.
    for k in [16, 64, 200] {
        let (got, want) = run_gemm(TMEM_GEMM, (64, 64, k)).unwrap_or_else(|e| panic!("{e}"));
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| ((g - w) / w.abs().max(1.0)).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "k = {k}: relative error {worst}");
    }
}

#[test]
fn a_missing_commit_deadlocks_the_epilogue_on_the_checker_and_the_interpreter() {
    let src = broken("tcgen05_commit(local_view(done, 0));", "");
    let (rule, line) = error_of(&src);
    assert_eq!(rule, Rule::Deadlock);
    assert_eq!(line, "barrier_wait(local_view(done, 0), 0);");
    let err = run_gemm(&src, (64, 64, 64)).expect_err("deadlocks");
    let InterpError::Deadlock { tasks, .. } = &*err else {
        panic!("the interpreter reports {err}");
    };
    let wait_line = src
        .lines()
        .position(|l| l.trim() == line)
        .map(|i| i as u32 + 1);
    assert!(
        tasks.iter().any(|t| Some(t.wait.line) == wait_line),
        "the interpreter's deadlock: {err}"
    );
}

#[test]
fn the_ptx_allocates_multiplies_commits_loads_and_frees_tensor_memory() {
    let kernel = compile(TMEM_GEMM);
    let ptx = tlx_codegen::compile(&kernel, Arch::Sm100a)
        .expect("compiles for sm_100a")
        .ptx;
    for part in [
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        "tcgen05.relinquish_alloc_permit",
        // f32 D, bf16 A and B, B N-major, N = 64, M = 128.
        "tcgen05.mma.cta_group::1.kind::f16",
        &format!(
            "{}",
            1 << 4 | 1 << 7 | 1 << 10 | 1 << 16 | (64 >> 3) << 17 | (128 >> 4) << 24
        ),
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
        "tcgen05.ld.sync.aligned.32x32b.x32.b32",
        "tcgen05.wait::ld.sync.aligned",
        "tcgen05.fence::after_thread_sync",
        "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
    ] {
        assert!(ptx.contains(part), "no {part:?} in\n{ptx}");
    }
    // K = 64 in steps of 16, each MMA's stage released by one commit, one
    // commit for the tile.
    assert_eq!(ptx.matches("tcgen05.mma.cta_group").count(), 4);
    assert_eq!(ptx.matches("tcgen05.commit").count(), 2);
    match codegen_common::ptxas() {
        Some(ptxas) => codegen_common::assemble(&ptxas, Arch::Sm100a, &kernel.name, &ptx),
        None => println!("skipped: ptxas not found"),
    }
}

#[test]
fn tensor_memory_on_hopper_is_an_error_naming_blackwell() {
    let err = tlx_codegen::compile(&compile(TMEM_GEMM), Arch::Sm90a).expect_err("no TMEM");
    assert!(
        err.to_string().contains("needs Blackwell (sm_100a)"),
        "{err}"
    );
}

/// `tmem_copy` starts the accumulator from shared memory: `C = 1.5 + A B`
/// with every MMA accumulating, on the interpreter; the copy becomes
/// `tcgen05.cp` steps that `ptxas` accepts for sm_100a.
#[test]
fn tmem_copy_starts_the_accumulator_from_shared_memory() {
    let src = broken(
        "    let done = alloc_barriers(1, 1);",
        "    let done = alloc_barriers(1, 1);\n    let c_in = local_alloc([BM, BN], f32, 1);\n    local_store(local_view(c_in, 0), full([BM, BN], 1.5, f32));\n    fence_async_shared();",
    )
    .replacen(
        "            for i in 0..k_tiles {\n                barrier_wait(local_view(full, 0), i % 2);",
        "            tmem_copy(local_view(c_in, 0), local_view(acc, 0));\n            for i in 0..k_tiles {\n                barrier_wait(local_view(full, 0), i % 2);",
        1,
    )
    .replacen("use_acc = i > 0,", "use_acc = true,", 1);
    assert!(src.contains("tmem_copy("));
    let (got, want) = run_gemm(&src, (200, 128, 96)).expect("runs");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - (w + 1.5)).abs() <= 1e-3 * (w + 1.5).abs().max(1.0),
            "element {i}: {g} vs {}",
            w + 1.5
        );
    }
    assert_eq!(check_protocol(&compile(&src)), ProtocolReport::default());
    let kernel = compile(&src);
    let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles");
    assert_eq!(
        c.ptx.matches("tcgen05.cp.cta_group::1.128x256b").count(),
        64 / 8,
        "{}",
        c.ptx
    );
    if let Some(p) = codegen_common::ptxas() {
        codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
    }
}

#[test]
fn tmem_copy_takes_32_bit_rows_of_its_destinations_shape() {
    let err = tlx_frontend::compile_str(&broken(
        "    let done = alloc_barriers(1, 1);",
        "    let done = alloc_barriers(1, 1);\n    let c_in = local_alloc([BM, BN], bf16, 1);\n    tmem_copy(local_view(c_in, 0), local_view(acc, 0));",
    ))
    .expect_err("bf16 rows")
    .to_string();
    assert!(err.contains("a [128, N] buffer of a 32-bit type"), "{err}");
}

/// Every width `tmem_copy` takes lowers (each swizzle its source may have).
#[test]
fn tmem_copy_lowers_for_every_width() {
    for n in [8, 16, 32, 64, 128, 256] {
        let src = format!(
            r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn copy(c: Ptr<f32>) {{
    let src = local_alloc([128, {n}], f32, 1);
    let acc = local_alloc([128, {n}], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    local_store(local_view(src, 0), full([128, {n}], 2.0, f32));
    fence_async_shared();
    tmem_copy(local_view(src, 0), local_view(acc, 0));
    tcgen05_commit(local_view(done, 0));
    barrier_wait(local_view(done, 0), 0);
    let rows = arange(0, 128);
    store(c + rows[(.., None)] * {n} + arange(0, {n})[(None, ..)], local_load(local_view(acc, 0)));
}}
"#
        );
        let kernel = compile(&src);
        let c =
            tlx_codegen::compile(&kernel, Arch::Sm100a).unwrap_or_else(|e| panic!("N = {n}: {e}"));
        assert_eq!(
            c.ptx.matches("tcgen05.cp.cta_group::1.128x256b").count(),
            n / 8
        );
        if let Some(p) = codegen_common::ptxas() {
            codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
        }
    }
}

/// `P` in tensor memory: a bf16 tile stored into a 16-bit tensor-memory
/// buffer (two values per column) is the A operand of an MMA
/// (`tcgen05.mma ... [a_tmem]`) and reads back unchanged.
const TMEM_A: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn ts(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, back: Ptr<bf16>) {
    let b_buf = local_alloc([64, 64], bf16, 1);
    let p = local_alloc([128, 64], bf16, 1, storage = "tmem");
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    let r = arange(0, 128);
    let k = arange(0, 64);
    local_store(local_view(b_buf, 0), load(b + k[(.., None)] * 64 + k[(None, ..)]));
    local_store(local_view(p, 0), load(a + r[(.., None)] * 64 + k[(None, ..)]));
    fence_async_shared();
    async_dot(
        local_view(p, 0),
        local_view(b_buf, 0),
        local_view(acc, 0),
        use_acc = false,
        mbarriers = [local_view(done, 0)],
    );
    barrier_wait(local_view(done, 0), 0);
    store(c + r[(.., None)] * 64 + k[(None, ..)], local_load(local_view(acc, 0)));
    store(back + r[(.., None)] * 64 + k[(None, ..)], local_load(local_view(p, 0)));
}
"#;

#[test]
fn a_16_bit_tensor_memory_buffer_is_an_mmas_a() {
    use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
    let kernel = compile(TMEM_A);
    let mem = HostMemory::new();
    // Exact in bf16.
    let a: Vec<f32> = (0..128 * 64)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.5)
        .collect();
    let b: Vec<f32> = (0..64 * 64).map(|i| (i * 3 % 7) as f32 - 3.0).collect();
    let (da, db) = (upload_bf16(&mem, &a), upload_bf16(&mem, &b));
    let dc = upload(&mem, &vec![0xff; 128 * 64 * 4]);
    let dback = upload(&mem, &vec![0xff; 128 * 64 * 2]);
    let args = [da, db, dc, dback].map(ArgValue::ptr);
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let c = download_f32(&mem, dc, 128 * 64);
    for i in 0..128 {
        for j in 0..64 {
            let want: f32 = (0..64).map(|p| a[i * 64 + p] * b[p * 64 + j]).sum();
            assert_eq!(c[i * 64 + j], want, "c[{i}, {j}]");
        }
    }
    let (mut back, mut sent) = (vec![0u8; 128 * 64 * 2], vec![0u8; 128 * 64 * 2]);
    mem.read(dback, 0, &mut back).expect("read");
    mem.read(da, 0, &mut sent).expect("read");
    assert_eq!(back, sent, "P reads back unchanged");
    assert_eq!(check_protocol(&kernel), ProtocolReport::default());
    let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles");
    // Four K steps of 16, A's columns 8 apart; 32 packed columns stored.
    assert_eq!(
        c.ptx
            .matches("tcgen05.mma.cta_group::1.kind::f16 [")
            .count(),
        4,
        "{}",
        c.ptx
    );
    assert!(
        c.ptx.contains("tcgen05.st.sync.aligned.32x32b.x32.b32"),
        "{}",
        c.ptx
    );
    // The four warps' stores are ordered before the one thread's issue.
    let stored = c.ptx.find("tcgen05.wait::st").expect("a store");
    let issued = c.ptx.find("kind::f16 [").expect("an MMA");
    assert!(c.ptx[stored..issued].contains("barrier.sync"), "{}", c.ptx);
    if let Some(p) = codegen_common::ptxas() {
        codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
    }
}

/// An M = 64 MMA: its accumulator is a `[64, N]` tensor-memory buffer (16
/// lanes of each quarter), read back with `tcgen05.ld ... 16x32bx2`; a
/// tile stored into such a buffer reads back unchanged.
const M64: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn m64(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, back: Ptr<f32>) {
    let a_buf = local_alloc([64, 64], bf16, 1);
    let b_buf = local_alloc([64, 128], bf16, 1);
    let acc = local_alloc([64, 128], f32, 1, storage = "tmem");
    let t = local_alloc([64, 128], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    let r = arange(0, 64);
    let n = arange(0, 128);
    local_store(local_view(a_buf, 0), load(a + r[(.., None)] * 64 + r[(None, ..)]));
    local_store(local_view(b_buf, 0), load(b + r[(.., None)] * 128 + n[(None, ..)]));
    fence_async_shared();
    async_dot(local_view(a_buf, 0), local_view(b_buf, 0), local_view(acc, 0),
              use_acc = false, mbarriers = [local_view(done, 0)]);
    barrier_wait(local_view(done, 0), 0);
    let tile = local_load(local_view(acc, 0));
    store(c + r[(.., None)] * 128 + n[(None, ..)], tile);
    local_store(local_view(t, 0), tile * 2.0);
    store(back + r[(.., None)] * 128 + n[(None, ..)], local_load(local_view(t, 0)));
}
"#;

#[test]
fn an_m64_mma_accumulates_into_sixty_four_rows_of_tensor_memory() {
    use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
    let kernel = compile(M64);
    let mem = HostMemory::new();
    // Exact in bf16.
    let a: Vec<f32> = (0..64 * 64).map(|i| (i * 5 % 9) as f32 - 4.0).collect();
    let b: Vec<f32> = (0..64 * 128).map(|i| (i * 3 % 7) as f32 - 3.0).collect();
    let (da, db) = (upload_bf16(&mem, &a), upload_bf16(&mem, &b));
    let dc = upload(&mem, &vec![0xff; 64 * 128 * 4]);
    let dback = upload(&mem, &vec![0xff; 64 * 128 * 4]);
    let args = [da, db, dc, dback].map(ArgValue::ptr);
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let read = |id| download_f32(&mem, id, 64 * 128);
    let (c, back) = (read(dc), read(dback));
    for i in 0..64 {
        for j in 0..128 {
            let want: f32 = (0..64).map(|p| a[i * 64 + p] * b[p * 128 + j]).sum();
            assert_eq!(c[i * 128 + j], want, "c[{i}, {j}]");
            assert_eq!(back[i * 128 + j], 2.0 * want, "back[{i}, {j}]");
        }
    }
    assert_eq!(check_protocol(&kernel), ProtocolReport::default());
    let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles");
    // f32 D, bf16 A (K-major) and B (N-major), N / 8 = 16 at bit 17 and
    // M / 16 = 4 at bit 24.
    let idesc = 1 << 4 | 1 << 7 | 1 << 10 | 1 << 16 | 16 << 17 | 4 << 24;
    assert!(c.ptx.contains(&format!(", {idesc}, p;")), "{}", c.ptx);
    assert!(
        c.ptx.contains("tcgen05.ld.sync.aligned.16x32bx2.x32.b32"),
        "{}",
        c.ptx
    );
    assert!(
        c.ptx.contains("tcgen05.st.sync.aligned.16x32bx2.x32.b32"),
        "{}",
        c.ptx
    );
    if let Some(p) = codegen_common::ptxas() {
        codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
    }
}

/// Storing into A's tensor memory while the MMA that reads it may still run
/// is a race the checker reports.
#[test]
fn overwriting_an_mmas_tensor_memory_a_before_it_completes_is_an_error() {
    let src = TMEM_A.replace(
        "    barrier_wait(local_view(done, 0), 0);\n    store(c",
        "    local_store(local_view(p, 0), full([128, 64], 1.0, bf16));\n    barrier_wait(local_view(done, 0), 0);\n    store(c",
    );
    assert_ne!(src, TMEM_A);
    let report = check_protocol(&compile(&src));
    assert!(!report.errors.is_empty(), "{report:#?}");
}
