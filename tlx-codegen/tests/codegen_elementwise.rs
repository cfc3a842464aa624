//! Elementwise kernels, loads and stores: compiled for every architecture and
//! checked by `ptxas`; vector add must use 16-byte vector accesses.

use crate::codegen_common::*;
use tlx_core::ir::*;

/// `out[i] = x[i] + y[i]` over blocks of `block`, masked by `n`.
pub fn vector_add(s: ScalarType, block: usize) -> Kernel {
    let mut k = K::new("vector_add", 4);
    let x = k.ptr("x", s);
    let y = k.ptr("y", s);
    let out = k.ptr("out", s);
    let n = k.scalar_param("n", ScalarType::I32);
    let pid = k.pid(0);
    let bs =
        k.b.push1(OpKind::Constant(Literal::Int(block as i64)), i32t(&[]));
    let start = k.bin(BinaryOp::Mul, pid, bs);
    let start = k.splat(start, &[block]);
    let ar = k.arange(block);
    let offs = k.bin(BinaryOp::Add, start, ar);
    let nn = k.splat(n, &[block]);
    let mask = k.cmp(CmpPred::Lt, offs, nn);
    let px = k.add_ptr(x, offs);
    let py = k.add_ptr(y, offs);
    let a = k.load(px, Some(mask), None);
    let b = k.load(py, Some(mask), None);
    let sum = k.bin(BinaryOp::Add, a, b);
    let po = k.add_ptr(out, offs);
    k.store(po, sum, Some(mask));
    k.finish()
}

#[test]
fn vector_add_f32_uses_v4_accesses() {
    for c in compile_all(&vector_add(ScalarType::F32, 1024)) {
        println!("{}", c.ptx);
        assert!(c.ptx.contains("ld.global.v4.b32"), "{}", c.ptx);
        assert!(c.ptx.contains("st.global.v4.b32"));
        assert!(c.ptx.contains(".maxntid 128"), "{}", c.ptx);
        assert_eq!(c.num_warps, 4);
        assert_eq!(c.shared_bytes, 0);
    }
}

#[test]
fn vector_add_narrow_and_wide_types_assemble() {
    for s in [
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::I8,
        ScalarType::U8,
        ScalarType::I64,
        ScalarType::U32,
    ] {
        for c in compile_all(&vector_add(s, 512)) {
            assert!(c.ptx.contains("ld.global.v"), "{s}: {}", c.ptx);
        }
    }
}

/// Loads `x` (of `s`) and `y`, applies every binary, unary and comparison op that
/// `s` supports, and stores each result to `out` (of `s`) or `flags` (bool).
fn all_ops(s: ScalarType) -> Kernel {
    let mut k = K::new(&format!("ops_{s}"), 2);
    let x = k.ptr("x", s);
    let out = k.ptr("out", s);
    let flags = k.ptr("flags", ScalarType::Bool);
    let offs = k.arange(64);
    let px = k.add_ptr(x, offs);
    let a = k.load(px, None, None);
    let one = k.int(3, &[64]);
    let offs2 = k.bin(BinaryOp::Add, offs, one);
    let px2 = k.add_ptr(x, offs2);
    let b = k.load(px2, None, None);
    let po = k.add_ptr(out, offs);
    let pf = k.add_ptr(flags, offs);
    let float = s.is_float();
    let binaries: &[BinaryOp] = if float {
        &[
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Rem,
            BinaryOp::Max,
            BinaryOp::Min,
        ]
    } else {
        &[
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Rem,
            BinaryOp::Max,
            BinaryOp::Min,
            BinaryOp::And,
            BinaryOp::Or,
            BinaryOp::Xor,
            BinaryOp::Shl,
            BinaryOp::Shr,
        ]
    };
    for op in binaries {
        let r = k.bin(*op, a, b);
        k.store(po, r, None);
    }
    let unaries: &[UnaryOp] = if float {
        &[
            UnaryOp::Neg,
            UnaryOp::Exp,
            UnaryOp::Exp2,
            UnaryOp::Log,
            UnaryOp::Log2,
            UnaryOp::Sqrt,
            UnaryOp::Rsqrt,
            UnaryOp::Sin,
            UnaryOp::Cos,
            UnaryOp::Abs,
            UnaryOp::Floor,
            UnaryOp::Ceil,
        ]
    } else {
        &[UnaryOp::Neg, UnaryOp::Not, UnaryOp::Abs]
    };
    for op in unaries {
        let r = k.un(*op, a);
        k.store(po, r, None);
    }
    for pred in [
        CmpPred::Eq,
        CmpPred::Ne,
        CmpPred::Lt,
        CmpPred::Le,
        CmpPred::Gt,
        CmpPred::Ge,
    ] {
        let r = k.cmp(pred, a, b);
        k.store(pf, r, None);
    }
    let c = k.cmp(CmpPred::Lt, a, b);
    let sel = k.b.push1(
        OpKind::Select {
            cond: c,
            on_true: a,
            on_false: b,
        },
        k.ty(a),
    );
    let fma = k.b.push1(OpKind::Fma { a: sel, b, c: a }, k.ty(a));
    k.store(po, fma, Some(c));
    k.finish()
}

#[test]
fn every_op_on_every_arithmetic_type_assembles() {
    for s in [
        ScalarType::I8,
        ScalarType::U8,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F8E4M3,
        ScalarType::F8E5M2,
    ] {
        let c = compile_all(&all_ops(s));
        if s == ScalarType::F32 {
            for needle in [
                "ex2.approx.ftz.f32",
                "lg2.approx.f32",
                "sqrt.rn.f32",
                "rsqrt.approx.f32",
                "sin.approx.f32",
                "cos.approx.f32",
                "div.rn.f32",
            ] {
                assert!(c[0].ptx.contains(needle), "{needle} missing:\n{}", c[0].ptx);
            }
        }
    }
}

/// Casts and bitcasts between every pair of scalar types.
#[test]
fn every_cast_assembles() {
    let mut k = K::new("casts", 1);
    let ptrs: Vec<(ScalarType, ValueId)> = ScalarType::ALL
        .into_iter()
        .map(|s| (s, k.ptr(&format!("p_{s}"), s)))
        .collect();
    let offs = k.arange(32);
    let loaded: Vec<(ScalarType, ValueId, ValueId)> = ptrs
        .iter()
        .map(|&(s, p)| {
            let pp = k.add_ptr(p, offs);
            (s, pp, k.load(pp, None, None))
        })
        .collect();
    for &(from, _, v) in &loaded {
        for &(to, dst, _) in &loaded {
            let c = k.cast(v, to);
            k.store(dst, c, None);
            if from.size_bytes() == to.size_bytes()
                && from != ScalarType::Bool
                && to != ScalarType::Bool
            {
                let t = k.ty(v).with_elem(Elem::Scalar(to));
                let bc = k.b.push1(OpKind::Bitcast(v), t);
                k.store(dst, bc, None);
            }
        }
    }
    let c = compile_all(&k.finish());
    assert!(c[0].ptx.contains("cvt.rn.satfinite.e4m3x2.f32"));
    assert!(c[0].ptx.contains("cvt.rn.f16x2.e5m2x2"));
    assert!(
        c[0].ptx.contains("cvt.rzi.s32.f32")
            || c[0].ptx.contains("cvt.rzi.sat.s32.f32")
            || c[0].ptx.contains("cvt.rzi")
    );
}

/// A 2-D tile `out[r, c] = x[r * stride + c] * 2` with a run-time stride: the
/// offsets come from `arange[:, None] * stride + arange[None, :]`.
#[test]
fn two_d_tile_with_runtime_stride() {
    let mut k = K::new("tile2d", 4);
    let x = k.ptr("x", ScalarType::F16);
    let out = k.ptr("out", ScalarType::F16);
    let stride = k.scalar_param("stride", ScalarType::I32);
    let rows = k.arange(32);
    let cols = k.arange(64);
    let r = k.expand(rows, 1);
    let st = k.splat(stride, &[32, 1]);
    let r = k.bin(BinaryOp::Mul, r, st);
    let r = k.broadcast(r, &[32, 64]);
    let c = k.expand(cols, 0);
    let c = k.broadcast(c, &[32, 64]);
    let offs = k.bin(BinaryOp::Add, r, c);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let two = k.float(2.0, ScalarType::F16, &[32, 64]);
    let v = k.bin(BinaryOp::Mul, v, two);
    let po = k.add_ptr(out, offs);
    k.store(po, v, None);
    for c in compile_all(&k.finish()) {
        // Offsets are recomputed in the store layout, never moved through shared memory.
        assert_eq!(c.shared_bytes, 0);
        assert!(c.ptx.contains("ld.global.v4.b32"), "{}", c.ptx);
    }
}

#[test]
fn cache_and_eviction_hints_become_ptx_qualifiers() {
    let mut k = K::new("hints", 4);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let offs = k.arange(512);
    let p = k.add_ptr(x, offs);
    let t = k.ty(p).with_elem(Elem::Scalar(ScalarType::F32));
    let mut loads = Vec::new();
    for (cache, eviction, volatile) in [
        (CacheModifier::Cg, EvictionPolicy::Normal, false),
        (CacheModifier::None, EvictionPolicy::EvictLast, false),
        (CacheModifier::None, EvictionPolicy::Normal, true),
    ] {
        let kind = OpKind::Load {
            ptr: p,
            mask: None,
            other: None,
            cache,
            eviction,
            volatile,
        };
        loads.push(k.b.push1(kind, t.clone()));
    }
    let s = k.bin(BinaryOp::Add, loads[0], loads[1]);
    let s = k.bin(BinaryOp::Add, s, loads[2]);
    let po = k.add_ptr(out, offs);
    for (cache, eviction) in [
        (CacheModifier::Cs, EvictionPolicy::Normal),
        (CacheModifier::None, EvictionPolicy::EvictFirst),
    ] {
        k.b.push(
            OpKind::Store {
                ptr: po,
                value: s,
                mask: None,
                cache,
                eviction,
            },
            vec![],
        );
    }
    for c in compile_all(&k.finish()) {
        for needle in [
            "ld.global.cg.v4.b32",
            "ld.global.L1::evict_last.L2::cache_hint.v4.b32",
            "createpolicy.fractional.L2::evict_last.b64",
            "ld.volatile.global.v4.b32",
            "st.global.cs.v4.b32",
            "st.global.L1::evict_first.L2::cache_hint.v4.b32",
            "createpolicy.fractional.L2::evict_first.b64",
        ] {
            assert!(c.ptx.contains(needle), "{needle} missing");
        }
    }
}

/// fp8 has no arithmetic of its own: operators, math, comparisons,
/// reductions and scans on it compute in f32 and round back.
#[test]
fn fp8_arithmetic_reductions_and_scans_assemble() {
    let src = r#"
#[kernel]
fn fp8_math(x: Ptr<f16>, out: Ptr<f32>) {
    let o = arange(0, 128);
    let a = load(x + o).to(f8e5m2);
    let b = load(x + 128 + o).to(f8e5m2);
    let y = fma(a, b, -a) / b;
    let big = maximum(y, a) >= exp(b);
    let total = sum(y, axis = 0);
    let top = argmax(y, axis = 0);
    let (run, _) = cumsum(y, axis = 0);
    store(out + o, (run + total).to(f32) + top.to(f32), mask = big);
}
"#;
    let kernels = tlx_frontend::compile_str(src).unwrap_or_else(|e| panic!("{e}"));
    for k in &kernels {
        compile_all(k);
    }
}
