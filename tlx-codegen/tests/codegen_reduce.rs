//! Reductions, softmax and loops: compiled for every architecture and checked
//! by `ptxas`; reductions must use butterfly shuffles.

use crate::codegen_common::*;
use tlx_core::ir::*;

/// Row softmax of a `[rows, cols]` tile: `exp(x - max) / sum(exp(x - max))`.
pub fn softmax(rows: usize, cols: usize, num_warps: u32) -> Kernel {
    let mut k = K::new("softmax", num_warps);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let stride = k.scalar_param("stride", ScalarType::I32);
    let n_cols = k.scalar_param("n_cols", ScalarType::I32);
    let shape = [rows, cols];
    let r = k.arange(rows);
    let r = k.expand(r, 1);
    let st = k.splat(stride, &[rows, 1]);
    let r = k.bin(BinaryOp::Mul, r, st);
    let r = k.broadcast(r, &shape);
    let c = k.arange(cols);
    let c = k.expand(c, 0);
    let c = k.broadcast(c, &shape);
    let offs = k.bin(BinaryOp::Add, r, c);
    let nc = k.splat(n_cols, &shape);
    let mask = k.cmp(CmpPred::Lt, c, nc);
    let ninf = k.float(f64::NEG_INFINITY, ScalarType::F32, &shape);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, Some(mask), Some(ninf));
    let m = k.reduce(v, 1, ReduceKind::Max);
    let m = k.expand(m, 1);
    let m = k.broadcast(m, &shape);
    let d = k.bin(BinaryOp::Sub, v, m);
    let e = k.un(UnaryOp::Exp, d);
    let s = k.reduce(e, 1, ReduceKind::Sum);
    let s = k.expand(s, 1);
    let s = k.broadcast(s, &shape);
    let y = k.bin(BinaryOp::Div, e, s);
    let po = k.add_ptr(out, offs);
    k.store(po, y, Some(mask));
    k.finish()
}

#[test]
fn softmax_reduces_with_shuffles_and_needs_no_conversion() {
    for (rows, cols, warps) in [(4, 1024, 4), (16, 128, 4), (1, 64, 1), (2, 8, 8)] {
        for c in compile_all(&softmax(rows, cols, warps)) {
            assert!(c.ptx.contains("shfl.sync.bfly.b32"), "{}", c.ptx);
            assert!(c.ptx.contains("ex2.approx.ftz.f32"));
            // Reductions across warps use shared memory; the broadcasts back do not.
            let per_row = c.shared_bytes as usize;
            assert!(
                per_row <= rows * 4 * warps as usize,
                "{rows}x{cols}: {per_row}"
            );
        }
    }
}

#[test]
fn every_reduction_along_each_axis_assembles() {
    for s in [
        ScalarType::F32,
        ScalarType::F16,
        ScalarType::F8E4M3,
        ScalarType::BF16,
        ScalarType::I32,
        ScalarType::U8,
        ScalarType::I64,
    ] {
        for kind in [
            ReduceKind::Sum,
            ReduceKind::Max,
            ReduceKind::Min,
            ReduceKind::Argmax,
            ReduceKind::Argmin,
        ] {
            for axis in 0..2 {
                let mut k = K::new("reduce", 4);
                let x = k.ptr("x", s);
                let out = k.ptr(
                    "out",
                    if kind == ReduceKind::Argmax || kind == ReduceKind::Argmin {
                        ScalarType::I32
                    } else {
                        s
                    },
                );
                let shape = [64, 32];
                let r = k.arange(64);
                let r = k.expand(r, 1);
                let w = k.int(32, &[64, 1]);
                let r = k.bin(BinaryOp::Mul, r, w);
                let r = k.broadcast(r, &shape);
                let c = k.arange(32);
                let c = k.expand(c, 0);
                let c = k.broadcast(c, &shape);
                let offs = k.bin(BinaryOp::Add, r, c);
                let p = k.add_ptr(x, offs);
                let v = k.load(p, None, None);
                let red = k.reduce(v, axis, kind);
                let o = k.arange(if axis == 0 { 32 } else { 64 });
                let po = k.add_ptr(out, o);
                k.store(po, red, None);
                let kernel = k.finish();
                for c in compile_all(&kernel) {
                    assert!(
                        c.ptx.contains("shfl.sync.bfly") || c.shared_bytes > 0,
                        "{s} {kind:?} {axis}"
                    );
                }
            }
        }
    }
}

/// `for i in 0..n { acc += x[i*B + arange] }` then a `while` halving and an `if`.
#[test]
fn loops_and_branches_carry_tensors() {
    let mut k = K::new("loops", 4);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let n = k.scalar_param("n", ScalarType::I32);
    let flag = k.scalar_param("flag", ScalarType::Bool);
    let zero = k.b.push1(OpKind::Constant(Literal::Int(0)), i32t(&[]));
    let one = k.b.push1(OpKind::Constant(Literal::Int(1)), i32t(&[]));
    let acc0 = k.float(0.0, ScalarType::F32, &[256]);
    let ft = k.ty(acc0);
    let args = k.b.begin_block(vec![i32t(&[]), ft.clone()]);
    let bs = k.b.push1(OpKind::Constant(Literal::Int(256)), i32t(&[]));
    let base = k.bin(BinaryOp::Mul, args[0], bs);
    let base = k.splat(base, &[256]);
    let ar = k.arange(256);
    let offs = k.bin(BinaryOp::Add, base, ar);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let next = k.bin(BinaryOp::Add, args[1], v);
    k.b.push(OpKind::Yield(vec![next]), vec![]);
    let body = k.b.end_block();
    let acc = k.b.push1(
        OpKind::For {
            lower: zero,
            upper: n,
            step: one,
            inits: vec![acc0],
            body,
        },
        ft.clone(),
    );
    // while (count > 1) { count >>= 1; acc = acc * 0.5 }
    let cond_args = k.b.begin_block(vec![i32t(&[]), ft.clone()]);
    let go = k.cmp(CmpPred::Gt, cond_args[0], one);
    k.b.push(OpKind::Condition(go), vec![]);
    let cond = k.b.end_block();
    let body_args = k.b.begin_block(vec![i32t(&[]), ft.clone()]);
    let half_count = k.bin(BinaryOp::Shr, body_args[0], one);
    let half = k.float(0.5, ScalarType::F32, &[256]);
    let scaled = k.bin(BinaryOp::Mul, body_args[1], half);
    k.b.push(OpKind::Yield(vec![half_count, scaled]), vec![]);
    let body = k.b.end_block();
    let res = k.b.push(
        OpKind::While {
            inits: vec![n, acc],
            cond,
            body,
        },
        vec![i32t(&[]), ft.clone()],
    );
    k.b.begin_block(vec![]);
    let neg = k.un(UnaryOp::Neg, res[1]);
    k.b.push(OpKind::Yield(vec![neg]), vec![]);
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    k.b.push(OpKind::Yield(vec![res[1]]), vec![]);
    let else_block = k.b.end_block();
    let fin = k.b.push1(
        OpKind::If {
            cond: flag,
            then_block,
            else_block,
        },
        ft,
    );
    let ar = k.arange(256);
    let po = k.add_ptr(out, ar);
    k.store(po, fin, None);
    for c in compile_all(&k.finish()) {
        assert!(c.ptx.contains("bra"), "{}", c.ptx);
    }
}

/// Compile time of a softmax-sized kernel to PTX (the budget is 100 ms in release;
/// printed, not asserted, since test machines vary).
#[test]
fn softmax_compile_time() {
    let kernel = softmax(1, 1024, 4);
    // The first compile also initializes LLVM's target registry.
    tlx_codegen::compile(&kernel, Arch::Sm90a).expect("softmax compiles");
    let start = std::time::Instant::now();
    let c = tlx_codegen::compile(&kernel, Arch::Sm90a).expect("softmax compiles");
    let elapsed = start.elapsed();
    println!(
        "softmax 1x1024 to PTX: {:.1} ms",
        elapsed.as_secs_f64() * 1e3
    );
    assert!(c.ptx.contains(".entry softmax"));
}

/// A full reduction to a scalar feeds a splat and a loop bound.
#[test]
fn reduction_to_a_scalar_is_a_scalar() {
    let mut k = K::new("total", 4);
    let x = k.ptr("x", ScalarType::I32);
    let out = k.ptr("out", ScalarType::I32);
    let offs = k.arange(512);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let total = k.reduce(v, 0, ReduceKind::Sum);
    let t = k.splat(total, &[512]);
    let y = k.bin(BinaryOp::Sub, v, t);
    let po = k.add_ptr(out, offs);
    k.store(po, y, None);
    k.store(out, total, None);
    for c in compile_all(&k.finish()) {
        assert!(c.ptx.contains("shfl.sync.bfly.b32"));
        assert_eq!(c.shared_bytes, 4 * 4);
    }
}

/// A loaded row vector broadcast over the rows of a tile (a bias) reaches the
/// tile's layout by regrouping registers, not through shared memory.
#[test]
fn loaded_row_vector_broadcasts_without_shared_memory() {
    let mut k = K::new("bias", 4);
    let x = k.ptr("x", ScalarType::F32);
    let bias = k.ptr("bias", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let cols = k.arange(128);
    let pb = k.add_ptr(bias, cols);
    let b = k.load(pb, None, None);
    let b = k.expand(b, 0);
    let b = k.broadcast(b, &[64, 128]);
    let r = k.arange(64);
    let r = k.expand(r, 1);
    let w = k.int(128, &[64, 1]);
    let r = k.bin(BinaryOp::Mul, r, w);
    let r = k.broadcast(r, &[64, 128]);
    let c = k.expand(cols, 0);
    let c = k.broadcast(c, &[64, 128]);
    let offs = k.bin(BinaryOp::Add, r, c);
    let px = k.add_ptr(x, offs);
    let v = k.load(px, None, None);
    let y = k.bin(BinaryOp::Add, v, b);
    let po = k.add_ptr(out, offs);
    k.store(po, y, None);
    for c in compile_all(&k.finish()) {
        assert_eq!(c.shared_bytes, 0);
    }
}
