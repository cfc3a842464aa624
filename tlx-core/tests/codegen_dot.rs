//! `dot` in a K loop (a matmul tile): tensor cores for f16/bf16/tf32/i8,
//! FMAs otherwise; compiled for every architecture and checked by `ptxas`.

#![cfg(feature = "llvm")]

mod codegen_common;
use codegen_common::*;
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
        for c in compile_all(&matmul(s, acc, 64, 64, 32, precision)) {
            assert!(c.ptx.contains(needle), "{s}: {needle} missing");
            assert!(c.shared_bytes >= (64 * 32 * 2 * s.size_bytes()) as u32);
        }
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
    assert_eq!(c[0].ptx.matches("bar.sync").count(), 2, "{}", c[0].ptx);
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
        assert_eq!(c.ptx.matches("bar.sync").count(), 2, "{}", c.ptx);
    }
}
