//! Elementwise kernels, loads and stores: compiled for every architecture and
//! checked by `ptxas`; vector add must use 16-byte vector accesses.

mod codegen_common;
use codegen_common::*;
use tlx_core::ir::*;

/// `out[i] = x[i] + y[i]` over blocks of `block`, masked by `n`.
fn vector_add(s: ScalarType, block: usize) -> Kernel {
    let mut k = K::new("vector_add", 4);
    let x = k.ptr("x", s);
    let y = k.ptr("y", s);
    let out = k.ptr("out", s);
    let n = k.scalar_param("n", ScalarType::I32);
    let pid = k.pid(0);
    let bs = k.b.push1(OpKind::Constant(Literal::Int(block as i64)), i32t(&[]));
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
