//! `dot` in a K loop (a matmul tile): tensor cores for f16/bf16/tf32/i8,
//! FMAs otherwise; compiled for every architecture and checked by `ptxas`.

use crate::codegen_common::*;
use tlx_core::ir::*;

/// Offsets `row * ld + col` of a row-major `[rows, cols]` tile.
fn tile_offsets(k: &mut K, rows: usize, cols: usize, ld: ValueId) -> ValueId {
    let r = k.arange(rows);
    let r = k.expand(r, 1);
    let ldv = k.splat(ld, &[rows, 1]);
    let r = k.bin(BinaryOp::Mul, r, ldv);
    let r = k.broadcast(r, &[rows, cols]);
    let c = k.arange(cols);
    let c = k.expand(c, 0);
    let c = k.broadcast(c, &[rows, cols]);
    k.bin(BinaryOp::Add, r, c)
}

/// `c[M, N] = a[M, K] @ b[K, N]`, stepping K by `bk` in a loop that carries the accumulator.
fn matmul(
    s: ScalarType,
    acc_s: ScalarType,
    m: usize,
    n: usize,
    bk: usize,
    precision: DotPrecision,
) -> Kernel {
    let mut k = K::new("matmul", 4);
    let a = k.ptr("a", s);
    let b = k.ptr("b", s);
    let c = k.ptr("c", acc_s);
    let kdim = k.scalar_param("k", ScalarType::I32);
    let lda = k.scalar_param("lda", ScalarType::I32);
    let ldb = k.scalar_param("ldb", ScalarType::I32);
    let ldc = k.scalar_param("ldc", ScalarType::I32);
    let zero = k.b.push1(OpKind::Constant(Literal::Int(0)), i32t(&[]));
    let step =
        k.b.push1(OpKind::Constant(Literal::Int(bk as i64)), i32t(&[]));
    let acc0 =
        k.b.push1(OpKind::Constant(Literal::Int(0)), ty(acc_s, &[m, n]));
    let a_offs = tile_offsets(&mut k, m, bk, lda);
    let b_offs = tile_offsets(&mut k, bk, n, ldb);
    let args = k.b.begin_block(vec![i32t(&[]), ty(acc_s, &[m, n])]);
    let kk = k.splat(args[0], &[m, bk]);
    let ao = k.bin(BinaryOp::Add, a_offs, kk);
    let kb = k.bin(BinaryOp::Mul, args[0], ldb);
    let kb = k.splat(kb, &[bk, n]);
    let bo = k.bin(BinaryOp::Add, b_offs, kb);
    let pa = k.add_ptr(a, ao);
    let pb = k.add_ptr(b, bo);
    let ta = k.load(pa, None, None);
    let tb = k.load(pb, None, None);
    let next = k.b.push1(
        OpKind::Dot {
            a: ta,
            b: tb,
            acc: args[1],
            precision,
        },
        ty(acc_s, &[m, n]),
    );
    k.b.push(OpKind::Yield(vec![next]), vec![]);
    let body = k.b.end_block();
    let acc = k.b.push1(
        OpKind::For {
            lower: zero,
            upper: kdim,
            step,
            inits: vec![acc0],
            body,
        },
        ty(acc_s, &[m, n]),
    );
    let c_offs = tile_offsets(&mut k, m, n, ldc);
    let pc = k.add_ptr(c, c_offs);
    k.store(pc, acc, None);
    k.finish()
}

#[test]
fn tensor_core_dots_use_mma_sync() {
    let cases = [
        (
            ScalarType::F16,
            ScalarType::F32,
            DotPrecision::Tf32,
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        ),
        (
            ScalarType::BF16,
            ScalarType::F32,
            DotPrecision::Tf32,
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        ),
        (
            ScalarType::F32,
            ScalarType::F32,
            DotPrecision::Tf32,
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        ),
        (
            ScalarType::I8,
            ScalarType::I32,
            DotPrecision::Tf32,
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
        ),
    ];
    for (s, acc, precision, needle) in cases {
        for (arch, c) in Arch::ALL
            .into_iter()
            .zip(compile_all(&matmul(s, acc, 64, 64, 32, precision)))
        {
            // 16-bit inputs take wgmma on sm_90a (see below).
            let wgmma = arch == Arch::Sm90a && s.size_bytes() == 2;
            assert_eq!(c.ptx.contains(needle), !wgmma, "{s} on {arch:?}: {needle}");
            assert!(c.shared_bytes >= (64 * 32 * 2 * s.size_bytes()) as u32);
        }
    }
}

/// On sm_90a, 16-bit dots whose tiles split into warp groups run on
/// `wgmma.mma_async` from swizzled shared memory: one instruction per
/// 16-wide K step and 64 rows of each warp group, fenced for the async
/// proxy, each group waited for.
#[test]
fn sixteen_bit_dots_use_wgmma_on_hopper() {
    for (s, m, n, bk, warps, dtype) in [
        (ScalarType::BF16, 64, 128, 64, 4, "bf16"),
        (ScalarType::F16, 128, 64, 32, 4, "f16"),
        (ScalarType::BF16, 128, 256, 64, 8, "bf16"),
        (ScalarType::F16, 64, 64, 16, 4, "f16"),
    ] {
        let mut kernel = matmul(s, ScalarType::F32, m, n, bk, DotPrecision::Tf32);
        kernel.options.num_warps = warps;
        let c = compile_all(&kernel);
        let ptx = &c[0].ptx;
        let instr = format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}");
        let per_group_rows = m / (warps as usize / 4);
        let issued = (bk / 16) * (per_group_rows / 64);
        assert_eq!(ptx.matches(&instr).count(), issued, "{m}x{n}x{bk}: {instr}");
        assert!(ptx.contains("fence.proxy.async.shared::cta"));
        assert!(ptx.contains("wgmma.wait_group.sync.aligned 0"));
        assert!(ptx.contains(".extern .shared .align 1024"));
        assert!(!ptx.contains("mma.sync"));
        // sm_100a has no wgmma: the same kernel stays on mma.sync there.
        assert!(!c[1].ptx.contains("wgmma") && c[1].ptx.contains("mma.sync"));
    }
}

#[test]
fn other_dots_fall_back_to_fma() {
    for (s, m, n, bk, precision) in [
        (ScalarType::F32, 32, 32, 16, DotPrecision::Ieee),
        (ScalarType::F16, 8, 8, 8, DotPrecision::Tf32),
    ] {
        for c in compile_all(&matmul(s, ScalarType::F32, m, n, bk, precision)) {
            assert!(!c.ptx.contains("mma.sync"));
            assert!(c.ptx.contains("fma.rn.f32"));
        }
    }
}

#[test]
fn accumulator_stays_in_registers_across_iterations() {
    let c = compile_all(&matmul(
        ScalarType::F16,
        ScalarType::F32,
        64,
        64,
        32,
        DotPrecision::Tf32,
    ));
    // Per iteration: one barrier before staging, one after; the accumulator is stored
    // from its fragment layout (pairs of columns), not through shared memory.
    assert_eq!(c[0].ptx.matches("barrier.sync").count(), 2, "{}", c[0].ptx);
    assert!(c[0].ptx.contains("st.global.v2.b32"));
}

/// Attention-style: row max of a `dot` result subtracted from it. The
/// max stays in the MMA layout's slice, and the store follows the MMA layout.
#[test]
fn row_max_of_a_dot_result_needs_no_extra_conversion() {
    let mut k = K::new("rowmax", 4);
    let a = k.ptr("a", ScalarType::F16);
    let b = k.ptr("b", ScalarType::F16);
    let c = k.ptr("c", ScalarType::F32);
    let ld = k.b.push1(OpKind::Constant(Literal::Int(64)), i32t(&[]));
    let offs = tile_offsets(&mut k, 64, 64, ld);
    let pa = k.add_ptr(a, offs);
    let pb = k.add_ptr(b, offs);
    let ta = k.load(pa, None, None);
    let tb = k.load(pb, None, None);
    let zero = k.float(0.0, ScalarType::F32, &[64, 64]);
    let s = k.b.push1(
        OpKind::Dot {
            a: ta,
            b: tb,
            acc: zero,
            precision: DotPrecision::Tf32,
        },
        ty(ScalarType::F32, &[64, 64]),
    );
    let m = k.reduce(s, 1, ReduceKind::Max);
    let m = k.expand(m, 1);
    let m = k.broadcast(m, &[64, 64]);
    let d = k.bin(BinaryOp::Sub, s, m);
    let pc = k.add_ptr(c, offs);
    k.store(pc, d, None);
    for c in compile_all(&k.finish()) {
        // Only the two barriers that stage the operands.
        assert_eq!(c.ptx.matches("barrier.sync").count(), 2, "{}", c.ptx);
    }
}

/// A pipelined K loop feeding wgmma: the operand tiles are copied with
/// `cp.async` straight into swizzled ring slots that wgmma reads in place,
/// one group stays in flight across iterations, and the loop's end waits
/// for it. `ptxas` keeps the wgmma pipeline intact (it warns when it must
/// serialize it) and, below 128x256 tiles, every register. (These tiles
/// promise no alignment, so each copy carries an element-wise fallback whose
/// addresses a 128x256 tile cannot keep in registers; the GEMM bench, which
/// promises alignment, is checked for spills by `examples_ptx`.)
#[test]
fn pipelined_wgmma_reads_operands_from_the_rings() {
    for (m, n, bk, warps, stages) in [
        (128, 128, 64, 8, 4),
        (64, 128, 32, 4, 3),
        (128, 256, 64, 8, 4),
    ] {
        let mut kernel = matmul(
            ScalarType::BF16,
            ScalarType::F32,
            m,
            n,
            bk,
            DotPrecision::Tf32,
        );
        kernel.options.num_warps = warps;
        kernel.options.num_stages = stages;
        let c = compile_all(&kernel);
        let ptx = &c[0].ptx;
        if std::env::var("TLX_TEST_DUMP").is_ok() {
            std::fs::write(format!("/tmp/wgmma_{m}x{n}x{bk}.ptx"), ptx).unwrap();
        }
        assert!(ptx.contains("cp.async.cg.shared.global"), "{m}x{n}x{bk}");
        assert!(ptx.contains("wgmma.wait_group.sync.aligned 1"));
        assert!(ptx.contains("wgmma.wait_group.sync.aligned 0"));
        // Operands are not staged through registers: the only shared
        // stores are the element-wise fallback for unaligned tiles.
        assert!(!ptx.contains("st.shared.v4"), "{m}x{n}x{bk}");
        // Slots of A and B plus the stages: all on swizzle periods.
        let slot = m * bk * 2 + bk * n * 2;
        assert!(c[0].shared_bytes as usize >= slot * stages as usize);
        if let Some(p) = ptxas() {
            let report = ptxas_verbose(&p, ptx);
            if n < 256 {
                assert!(report.contains(" 0 bytes spill stores"), "{report}");
            }
            assert!(
                !report.contains("wgmma"),
                "ptxas warns about wgmma:\n{report}"
            );
        }
    }
}
