//! Frontend tests: the five example kernels, each construct of the
//! language, and diagnostics for misuse (message and position).

use super::compile_str;
use crate::diag::Diagnostic;
use tlx_core::ir::{
    BinaryOp, Block, Elem, Kernel, Literal, Op, OpKind, ReduceKind, ScalarType, Type, ValueId,
};

fn compile(src: &str) -> Vec<Kernel> {
    match compile_str(src) {
        Ok(k) => k,
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn compile_one(src: &str) -> Kernel {
    let mut ks = compile(src);
    assert_eq!(ks.len(), 1);
    ks.remove(0)
}

fn all_ops(block: &Block) -> Vec<&Op> {
    let mut out = Vec::new();
    for op in &block.ops {
        out.push(op);
        for b in op.kind.blocks() {
            out.extend(all_ops(b));
        }
    }
    out
}

fn find(k: &Kernel, pred: impl Fn(&OpKind) -> bool) -> Vec<&Op> {
    all_ops(&k.body)
        .into_iter()
        .filter(|o| pred(&o.kind))
        .collect()
}

fn ty(k: &Kernel, v: ValueId) -> &Type {
    k.type_of(v)
}

fn tensor(s: ScalarType, shape: &[usize]) -> Type {
    Type::tensor(Elem::Scalar(s), shape.to_vec())
}

const VECTOR_ADD: &str = r#"
#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)])]
fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask = mask, other = 0.0);
    store(out + offs, a + b, mask = mask);
}
"#;

#[test]
fn vector_add_compiles_every_config() {
    let ks = compile(VECTOR_ADD);
    assert_eq!(ks.len(), 2);
    assert_eq!(ks[0].consts, vec![("BLOCK".to_string(), 1024)]);
    assert_eq!(ks[1].options.num_warps, 8);
    assert_eq!(ks[0].options.num_warps, 4);
    let k = &ks[1];
    let loads = find(k, |o| matches!(o, OpKind::Load { .. }));
    assert_eq!(loads.len(), 2);
    assert_eq!(
        ty(k, loads[0].results[0]),
        &tensor(ScalarType::F32, &[4096])
    );
    let stores = find(k, |o| matches!(o, OpKind::Store { .. }));
    assert_eq!(stores.len(), 1);
    // Scalars splat to [BLOCK]: the program offset, `n`, three pointers, two `other`s.
    assert_eq!(find(k, |o| matches!(o, OpKind::Splat(_))).len(), 7);
    assert_eq!(stores[0].loc.line, 8);
    let params: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(params, ["x", "y", "out", "n"]);
}

#[test]
fn softmax_reduces_rows() {
    let k = compile_one(
        r#"
#[kernel(configs = [(BLOCK = 1024)])]
fn softmax<const BLOCK: usize>(out: Ptr<f32>, inp: Ptr<f32>, stride: i32, n: i32) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let x = load(inp + row * stride + cols, mask = mask, other = f32::NEG_INFINITY);
    let x = x - max(x, axis = 0);
    let num = exp(x);
    let den = sum(num, axis = 0);
    store(out + row * stride + cols, num / den, mask = mask);
}
"#,
    );
    let reduces = find(&k, |o| matches!(o, OpKind::Reduce { .. }));
    assert_eq!(reduces.len(), 2);
    assert_eq!(
        ty(&k, reduces[0].results[0]),
        &Type::scalar(ScalarType::F32)
    );
    let load = find(&k, |o| matches!(o, OpKind::Load { .. }))[0];
    let OpKind::Load {
        other: Some(other), ..
    } = &load.kind
    else {
        panic!("load without other")
    };
    assert_eq!(ty(&k, *other), &tensor(ScalarType::F32, &[1024]));
    let neg_inf = find(
        &k,
        |o| matches!(o, OpKind::Constant(Literal::Float(f)) if *f == f64::NEG_INFINITY),
    );
    assert_eq!(neg_inf.len(), 1);
}

const LAYERNORM: &str = r#"
#[kernel(num_warps = 8, configs = [(BLOCK = 512)])]
fn layernorm<const BLOCK: usize>(x: Ptr<bf16>, y: Ptr<bf16>, w: Ptr<f32>, b: Ptr<f32>, stride: i32, n: i32, eps: f32) {
    let row = program_id(0);
    let x = x + row * stride;
    let y = y + row * stride;
    let mut acc = zeros([BLOCK], f32);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let v = load(x + cols, mask = cols < n, other = 0.0).to(f32);
        acc += v;
    }
    let mean = sum(acc, axis = 0) / (n as f32);
    let mut var_acc = zeros([BLOCK], f32);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let v = load(x + cols, mask = cols < n, other = 0.0).to(f32);
        let d = select(cols < n, v - mean, 0.0);
        var_acc += d * d;
    }
    let rstd = rsqrt(sum(var_acc, axis = 0) / (n as f32) + eps);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let mask = cols < n;
        let v = load(x + cols, mask = mask, other = 0.0).to(f32);
        let out = (v - mean) * rstd * load(w + cols, mask = mask) + load(b + cols, mask = mask);
        store(y + cols, out.to(bf16), mask = mask);
    }
}
"#;

#[test]
fn layernorm_carries_accumulators_through_loops() {
    let k = compile_one(LAYERNORM);
    let fors: Vec<&Op> = k
        .body
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::For { .. }))
        .collect();
    assert_eq!(fors.len(), 3);
    for (f, carried) in fors.iter().zip([1, 1, 0]) {
        let OpKind::For { inits, body, .. } = &f.kind else {
            unreachable!()
        };
        assert_eq!(inits.len(), carried);
        assert_eq!(body.args.len(), carried + 1);
    }
    assert_eq!(ty(&k, fors[0].results[0]), &tensor(ScalarType::F32, &[512]));
    assert_eq!(
        find(&k, |o| matches!(
            o,
            OpKind::Unary {
                op: tlx_core::ir::UnaryOp::Rsqrt,
                ..
            }
        ))
        .len(),
        1
    );
    let store = find(&k, |o| matches!(o, OpKind::Store { .. }))[0];
    let OpKind::Store { value, .. } = &store.kind else {
        unreachable!()
    };
    assert_eq!(ty(&k, *value), &tensor(ScalarType::BF16, &[512]));
}

const MATMUL: &str = r#"
#[kernel(num_warps = 4, configs = [(BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32)])]
fn matmul<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: Ptr<f16>, b: Ptr<f16>, c: Ptr<f32>, M: i32, N: i32, K: i32,
    stride_am: i32, stride_ak: i32, stride_bk: i32, stride_bn: i32, stride_cm: i32, stride_cn: i32,
) {
    let pid_m = program_id(0);
    let pid_n = program_id(1);
    let offs_m = pid_m * BLOCK_M + arange(0, BLOCK_M);
    let offs_n = pid_n * BLOCK_N + arange(0, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let mut a_ptrs = a + offs_m[(.., None)] * stride_am + offs_k[(None, ..)] * stride_ak;
    let mut b_ptrs = b + offs_k[(.., None)] * stride_bk + offs_n[(None, ..)] * stride_bn;
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k in (0..K).step_by(BLOCK_K) {
        let a_mask = (offs_m[(.., None)] < M) & (offs_k[(None, ..)] + k < K);
        let b_mask = (offs_k[(.., None)] + k < K) & (offs_n[(None, ..)] < N);
        let x = load(a_ptrs, mask = a_mask, other = 0.0);
        let y = load(b_ptrs, mask = b_mask, other = 0.0);
        acc = dot(x, y, acc);
        a_ptrs += BLOCK_K * stride_ak;
        b_ptrs += BLOCK_K * stride_bk;
    }
    let c_ptrs = c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)] * stride_cn;
    store(c_ptrs, acc, mask = (offs_m[(.., None)] < M) & (offs_n[(None, ..)] < N));
}
"#;

#[test]
fn matmul_builds_2d_tiles_and_carries_pointers() {
    let k = compile_one(MATMUL);
    let f = k
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::For { .. }))
        .expect("a loop");
    let OpKind::For { inits, .. } = &f.kind else {
        unreachable!()
    };
    let carried: Vec<String> = inits.iter().map(|v| ty(&k, *v).to_string()).collect();
    // Sorted by name: a_ptrs, acc, b_ptrs.
    assert_eq!(
        carried,
        [
            "tensor<64x32xptr<f16>>",
            "tensor<64x64xf32>",
            "tensor<32x64xptr<f16>>"
        ]
    );
    let dot = find(&k, |o| matches!(o, OpKind::Dot { .. }))[0];
    assert_eq!(ty(&k, dot.results[0]), &tensor(ScalarType::F32, &[64, 64]));
    assert!(!find(&k, |o| matches!(o, OpKind::ExpandDims { .. })).is_empty());
    assert!(!find(&k, |o| matches!(o, OpKind::Broadcast(_))).is_empty());
}

const COMPACT: &str = r#"
#[kernel(configs = [(BLOCK = 256)])]
fn compact<const BLOCK: usize>(inp: Ptr<f32>, out: Ptr<f32>, count: Ptr<i32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let x = load(inp + offs, mask = offs < n, other = 0.0);
    let keep = (x > 0.0) & (offs < n);
    let (pos, total) = cumsum(keep.to(i32), 0);
    let base = atomic_add(count, total);
    store(out + base + pos, x, mask = keep);
}
"#;

#[test]
fn stream_compaction_uses_cumsum_pair() {
    let k = compile_one(COMPACT);
    let scan = find(&k, |o| matches!(o, OpKind::Scan { .. }))[0];
    assert_eq!(scan.results.len(), 2);
    assert_eq!(ty(&k, scan.results[0]), &tensor(ScalarType::I32, &[256]));
    assert_eq!(ty(&k, scan.results[1]), &Type::scalar(ScalarType::I32));
    let atomic = find(&k, |o| matches!(o, OpKind::AtomicRmw { .. }))[0];
    assert_eq!(ty(&k, atomic.results[0]), &Type::scalar(ScalarType::I32));
}

fn kernel_with(body: &str) -> String {
    format!(
        "#[kernel(configs = [(B = 16)])]\nfn k<const B: usize>(p: Ptr<f32>, h: Ptr<f16>, q: Ptr<i32>, n: i32, m: i64, f: f32) {{\n{body}\n}}"
    )
}

#[test]
fn literals_adopt_the_other_operands_type() {
    let k = compile_one(&kernel_with(
        "let x = load(h + arange(0, B)); store(h + arange(0, B), x * 2.0);",
    ));
    let mul = find(&k, |o| {
        matches!(
            o,
            OpKind::Binary {
                op: BinaryOp::Mul,
                ..
            }
        )
    })[0];
    assert_eq!(ty(&k, mul.results[0]), &tensor(ScalarType::F16, &[16]));
    assert!(find(&k, |o| matches!(o, OpKind::Cast(_))).is_empty());
}

#[test]
fn adopted_constants_fit_their_type() {
    let k = compile_one(&kernel_with(
        "let x = bitcast(n, u32) + -1; store(q, bitcast(x, i32));",
    ));
    let lits: Vec<&Op> = find(&k, |o| matches!(o, OpKind::Constant(_)));
    assert_eq!(lits.len(), 1);
    assert_eq!(
        lits[0].kind,
        OpKind::Constant(Literal::Int(i64::from(u32::MAX)))
    );
}

#[test]
fn mixed_types_promote() {
    let k = compile_one(&kernel_with(
        "let a = n + m; let b = n.to(f16) + f; store(p, b); store(q, (a * 0).to(i32)); let c = n + 1.5; store(p, c);",
    ));
    let adds = find(&k, |o| {
        matches!(
            o,
            OpKind::Binary {
                op: BinaryOp::Add,
                ..
            }
        )
    });
    let types: Vec<String> = adds
        .iter()
        .map(|o| ty(&k, o.results[0]).to_string())
        .collect();
    assert_eq!(types, ["i64", "f32", "f32"]);
}

#[test]
fn if_else_merges_assigned_variables() {
    let k = compile_one(&kernel_with(
        "let mut s = 0.0; let mut t = 1; if n > 0 { s = f; } else { t = 2; } store(p, s); store(q, t);",
    ));
    let iff = k
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::If { .. }))
        .expect("an if");
    assert_eq!(iff.results.len(), 2);
    assert_eq!(ty(&k, iff.results[0]), &Type::scalar(ScalarType::F32));
    assert_eq!(ty(&k, iff.results[1]), &Type::scalar(ScalarType::I32));
}

#[test]
fn if_expressions_give_values() {
    let k = compile_one(&kernel_with(
        "let v = if n > 0 { f } else if n < -4 { 2.0 } else { 0.5 }; store(p, v); let c = if B > 4 { 1 } else { 2 }; store(q, c);",
    ));
    let ifs: Vec<&Op> = k
        .body
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::If { .. }))
        .collect();
    assert_eq!(ifs.len(), 1, "the constant `if` folds");
    assert_eq!(ty(&k, ifs[0].results[0]), &Type::scalar(ScalarType::F32));
    let consts = find(&k, |o| matches!(o, OpKind::Constant(Literal::Int(1))));
    assert_eq!(consts.len(), 1);
}

#[test]
fn constant_conditions_fold() {
    let k = compile_one(&kernel_with(
        "if B > 8 { store(p, 1.0); } else { store(p, 2.0); } if B == 3 { store(p, 3.0); }",
    ));
    assert!(find(&k, |o| matches!(o, OpKind::If { .. })).is_empty());
    let stores = find(&k, |o| matches!(o, OpKind::Store { .. }));
    assert_eq!(stores.len(), 1);
}

#[test]
fn a_constant_absorbs_a_run_time_condition() {
    // `false & c` and `true | c` are known whatever `c`: the branch goes at
    // compile time, as for a constant condition alone.
    let k = compile_one(&kernel_with(
        "if (B == 3) & (n > 0) { store(p, 1.0); } \
         if (n > 0) && (B == 3) { store(p, 2.0); } \
         if (B > 8) | (n > 0) { store(p, 3.0); }",
    ));
    assert!(find(&k, |o| matches!(o, OpKind::If { .. })).is_empty());
    assert_eq!(find(&k, |o| matches!(o, OpKind::Store { .. })).len(), 1);
    // The other constant decides nothing: the run-time test stays.
    let k = compile_one(&kernel_with("if (B > 8) & (n > 0) { store(p, 1.0); }"));
    assert_eq!(find(&k, |o| matches!(o, OpKind::If { .. })).len(), 1);
    // A tensor condition keeps its shape: no fold.
    let k = compile_one(&kernel_with(
        "let c = (B == 3) & (arange(0, B) < n); store(p + arange(0, B), 1.0, mask = c);",
    ));
    assert_eq!(find(&k, |o| matches!(o, OpKind::Store { .. })).len(), 1);
}

#[test]
fn return_guards_the_rest_of_the_kernel() {
    let k = compile_one(&kernel_with(
        "let pid = program_id(0); if pid >= n { return; } store(p + pid, 1.0);",
    ));
    let ifs: Vec<&Op> = k
        .body
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::If { .. }))
        .collect();
    assert_eq!(ifs.len(), 2, "the early exit and the guard around the rest");
    let OpKind::If { then_block, .. } = &ifs[1].kind else {
        unreachable!()
    };
    assert!(then_block
        .ops
        .iter()
        .any(|o| matches!(o.kind, OpKind::Store { .. })));
    // A top-level return ends the kernel at compile time.
    let k = compile_one(&kernel_with("store(p, 1.0); return; store(p, 2.0);"));
    assert_eq!(find(&k, |o| matches!(o, OpKind::Store { .. })).len(), 1);
}

#[test]
fn return_inside_a_loop_stops_later_iterations() {
    let k = compile_one(&kernel_with(
        "for i in 0..n { if i == 3 { return; } store(p + i, 1.0); } store(p, 0.0);",
    ));
    let f = k
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::For { .. }))
        .expect("a loop");
    let OpKind::For { inits, .. } = &f.kind else {
        unreachable!()
    };
    assert_eq!(inits.len(), 1);
    assert_eq!(ty(&k, inits[0]), &Type::scalar(ScalarType::Bool));
    // The final store runs under the guard.
    let last = k.body.ops.last().expect("ops");
    assert!(matches!(last.kind, OpKind::If { .. }));
}

#[test]
fn while_loops_carry_values() {
    let k = compile_one(&kernel_with(
        "let mut i = 0; let mut s = 0.0; while i < n { s += 1.5; i += 1; } store(p, s);",
    ));
    let w = k
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::While { .. }))
        .expect("a while");
    let OpKind::While { inits, cond, .. } = &w.kind else {
        unreachable!()
    };
    assert_eq!(inits.len(), 2);
    assert!(matches!(
        cond.ops.last().map(|o| &o.kind),
        Some(OpKind::Condition(_))
    ));
}

#[test]
fn a_let_in_a_loop_shadows_without_carrying_the_outer_variable() {
    // The body's `s` is its own: the loop carries `i` alone, and the store
    // after it sees the outer scalar.
    let k = compile_one(&kernel_with(
        "let s = f; let mut i = 0; while i < n { let mut s = zeros([B], f32); s = s + 1.0; store(p + arange(0, B), s); i += 1; } store(p, s);",
    ));
    let w = find(&k, |o| matches!(o, OpKind::While { .. }))[0];
    let OpKind::While { inits, .. } = &w.kind else {
        unreachable!()
    };
    assert_eq!(inits.len(), 1);
}

#[test]
fn static_range_unrolls_with_constant_index() {
    let k = compile_one(&kernel_with(
        "let x = load(p + arange(0, B)); for i in static_range(0, 4) { store(p + i * B + arange(0, B), x.extract_tile([i / 2], [8]).reshape([8]).broadcast_to([8]).sum(0)); }",
    ));
    assert!(find(&k, |o| matches!(o, OpKind::For { .. })).is_empty());
    let tiles = find(&k, |o| matches!(o, OpKind::ExtractTile { .. }));
    let idx: Vec<Vec<usize>> = tiles
        .iter()
        .map(|o| match &o.kind {
            OpKind::ExtractTile { index, .. } => index.clone(),
            _ => vec![],
        })
        .collect();
    assert_eq!(idx, vec![vec![0], vec![0], vec![1], vec![1]]);
}

#[test]
fn helper_functions_are_inlined_with_tuples() {
    let k = compile_one(&kernel_with(
        "fn stats(x: Tensor, scale: f32) -> (Tensor, Tensor) { (sum(x) * scale, max(x)) }\n let x = load(p + arange(0, B)); let (s, mx) = stats(x, 2.0); store(p, s + mx);",
    ));
    assert_eq!(find(&k, |o| matches!(o, OpKind::Reduce { .. })).len(), 2);
}

#[test]
fn a_helper_inlined_twice_makes_two_ops_at_one_location_with_two_ids() {
    let k = compile_one(&kernel_with(
        "fn total(x: Tensor) -> Tensor { sum(x) }\n let x = load(p + arange(0, B)); store(p, total(x) + total(x));",
    ));
    let sums = find(&k, |o| matches!(o, OpKind::Reduce { .. }));
    assert_eq!(sums.len(), 2);
    assert_eq!(sums[0].loc, sums[1].loc);
    assert_ne!(sums[0].id, sums[1].id);
    for op in sums {
        assert_eq!(k.op(op.id), Some(op));
    }
}

#[test]
fn return_inside_a_while_ends_the_loop() {
    let k = compile_one(&kernel_with(
        "let mut i = 0; while i < n { if i > 4 { return; } i += 1; } store(q, i);",
    ));
    let w = k
        .body
        .ops
        .iter()
        .find(|o| matches!(o.kind, OpKind::While { .. }))
        .expect("a while");
    let OpKind::While { inits, cond, .. } = &w.kind else {
        unreachable!()
    };
    assert_eq!(inits.len(), 2, "the flag and `i`");
    // The condition is `i < n && !returned`.
    assert!(cond.ops.iter().any(|o| matches!(
        o.kind,
        OpKind::Binary {
            op: BinaryOp::And,
            ..
        }
    )));
}

#[test]
fn helpers_see_the_kernels_const_items() {
    let k = compile_one(&kernel_with(
        "const ROWS: usize = 4;
         fn rows(x: Tensor) -> Tensor { x.reshape([B / ROWS, ROWS]) }
         let x = load(p + arange(0, B));
         store(p + arange(0, B / ROWS), rows(x).sum(axis = 1));",
    ));
    let reshape = find(&k, |o| matches!(o, OpKind::Reshape(_)))[0];
    assert_eq!(
        ty(&k, reshape.results[0]),
        &tensor(ScalarType::F32, &[4, 4])
    );
}

#[test]
fn a_const_item_ends_with_its_block() {
    expect_error(
        "if n > 0 { const INNER: usize = 2; }
         let z = arange(0, INNER);",
        "INNER)",
        "unknown name `INNER`",
    );
}

#[test]
fn a_helpers_const_items_stay_in_the_helper() {
    expect_error(
        "fn twice(x: Tensor) -> Tensor { const K: usize = 2; x * K }
         let y = twice(arange(0, B));
         let z = y + K;",
        "K;",
        "unknown name `K`",
    );
}

#[test]
fn helpers_take_constants_and_call_helpers() {
    let k = compile_one(&kernel_with(
        "fn rows(x: Tensor, W: usize) -> Tensor { double(x.reshape([B / W, W])) }
         fn double(x: Tensor) -> Tensor { x * 2 }
         let x = load(p + arange(0, B));
         store(p + arange(0, 4), rows(x, 4).sum(axis = 1));",
    ));
    let reshape = find(&k, |o| matches!(o, OpKind::Reshape(_)))[0];
    assert_eq!(
        ty(&k, reshape.results[0]),
        &tensor(ScalarType::F32, &[4, 4])
    );
    assert_eq!(
        find(&k, |o| matches!(
            o,
            OpKind::Binary {
                op: BinaryOp::Mul,
                ..
            }
        ))
        .len(),
        1
    );
}

#[test]
fn dimension_insertion_forms_agree() {
    let k = compile_one(&kernel_with(
        "let a = arange(0, B); let x = a[(.., None)]; let y = a[(None, ..)]; let z = a.expand_dims(1); let w = expand_dims(a, 0); store(q + x + y + z + w, 0);",
    ));
    let dims: Vec<String> = find(&k, |o| matches!(o, OpKind::ExpandDims { .. }))
        .iter()
        .take(4)
        .map(|o| ty(&k, o.results[0]).to_string())
        .collect();
    assert_eq!(
        dims,
        [
            "tensor<16x1xi32>",
            "tensor<1x16xi32>",
            "tensor<16x1xi32>",
            "tensor<1x16xi32>"
        ]
    );
}

#[test]
fn reductions_without_axis_reduce_everything() {
    let k = compile_one(&kernel_with(
        "let t = zeros([B, 4], f32); store(p, sum(t)); store(q, argmax(t, axis = 1, keep_dims = true).sum());",
    ));
    let reshape = find(&k, |o| matches!(o, OpKind::Reshape(_)))[0];
    assert_eq!(ty(&k, reshape.results[0]), &tensor(ScalarType::F32, &[64]));
    let arg = find(&k, |o| {
        matches!(
            o,
            OpKind::Reduce {
                kind: ReduceKind::Argmax,
                ..
            }
        )
    })[0];
    assert_eq!(ty(&k, arg.results[0]), &tensor(ScalarType::I32, &[16]));
}

#[test]
fn dot_without_acc_creates_f32_zeros() {
    let k = compile_one(&kernel_with(
        "let a = zeros([B, 32], f16); let b = zeros([32, B], f16); let c = dot(a, b, input_precision = \"ieee\"); store(p + arange(0, B)[(.., None)] * B + arange(0, B)[(None, ..)], c);",
    ));
    let dot = find(&k, |o| matches!(o, OpKind::Dot { .. }))[0];
    let OpKind::Dot { acc, precision, .. } = &dot.kind else {
        unreachable!()
    };
    assert_eq!(ty(&k, *acc), &tensor(ScalarType::F32, &[16, 16]));
    assert_eq!(*precision, tlx_core::ir::DotPrecision::Ieee);
}

#[test]
fn misc_builtins_lower() {
    let k = compile_one(&kernel_with(
        "let x = load(p + arange(0, B));
         let u = bitcast(x, u32);
         let t = trans(zeros([B, 32], f32));
         let s = full([B], f, f32) + fma(x, x, 1.0) + maximum(x, 0.0) + minimum(x, 1.0) + r#where(x > 0.0, x, -x);
         device_print(\"s =\", s);
         device_assert(u >= 0, \"non-negative\");
         store(q, cdiv(n, B) + num_programs(1));
         store(p + arange(0, B), s + t.sum(axis = 0) + x.abs().sqrt().exp2().log());
         let _old = atomic_cas(q, 0, 1, sem = \"relaxed\", scope = \"gpu\");",
    ));
    for pred in [
        |o: &OpKind| matches!(o, OpKind::Bitcast(_)),
        |o: &OpKind| matches!(o, OpKind::Trans { .. }),
        |o: &OpKind| matches!(o, OpKind::Fma { .. }),
        |o: &OpKind| matches!(o, OpKind::Select { .. }),
        |o: &OpKind| matches!(o, OpKind::Print { .. }),
        |o: &OpKind| matches!(o, OpKind::Assert { .. }),
        |o: &OpKind| matches!(o, OpKind::AtomicCas { .. }),
        |o: &OpKind| matches!(o, OpKind::NumPrograms { axis: 1 }),
    ] {
        assert_eq!(find(&k, pred).len(), 1);
    }
}

#[test]
fn ops_carry_source_locations() {
    let k = compile_one(&kernel_with("let x = arange(0, B);\n    let y = x * 3;"));
    let mul = find(&k, |o| {
        matches!(
            o,
            OpKind::Binary {
                op: BinaryOp::Mul,
                ..
            }
        )
    })[0];
    assert_eq!((mul.loc.line, mul.loc.col), (4, 12));
}

// ---- diagnostics ----

fn error(src: &str) -> Diagnostic {
    match compile_str(src) {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e.0.into_iter().next().expect("at least one diagnostic"),
    }
}

/// Line (1-based) and column (0-based) of the first occurrence of `needle` in `src`.
fn position(src: &str, needle: &str) -> (usize, usize) {
    let at = src
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in source"));
    let line = src[..at].matches('\n').count() + 1;
    let col = at - src[..at].rfind('\n').map_or(0, |i| i + 1);
    (line, col)
}

/// Asserts the first diagnostic for `body` contains `message` and points at `token`.
fn expect_error(body: &str, token: &str, message: &str) -> Diagnostic {
    let src = kernel_with(body);
    let d = error(&src);
    assert!(
        d.message.contains(message),
        "message `{}` lacks `{message}`",
        d.message
    );
    let start = d.span.start();
    assert_eq!(
        (start.line, start.column),
        position(&src, token),
        "span of `{}`",
        d.message
    );
    d
}

#[test]
fn a_task_assigning_an_outer_variable_in_a_loop_is_refused_at_the_loop() {
    expect_error(
        "let mut total = 0.0; async_tasks! { task(default) { let mut i = 0; while i < n { total += 1.0; i += 1; } } task(num_warps = 1) { store(p, 1.0); } } store(p, total);",
        "while i < n",
        "this task assigns `total`, a variable declared outside it",
    );
}

#[test]
fn a_task_may_shadow_an_outer_variable_and_assign_its_own() {
    compile_one(&kernel_with(
        "let total = 0.0; async_tasks! { task(default) { let mut total = 1.0; let mut i = 0; while i < n { total += 1.0; i += 1; } store(p, total); } task(num_warps = 1) { store(p, 1.0); } } store(p, total);",
    ));
}

#[test]
fn runtime_value_as_shape() {
    let d = expect_error(
        "let z = zeros([n, 4], f32);",
        "n, 4",
        "`n` is a run-time value; a shape must be a compile-time constant",
    );
    assert_eq!(
        d.hint.as_deref(),
        Some("use a const generic, e.g. `const BLOCK: usize`")
    );
}

#[test]
fn non_power_of_two_shape() {
    expect_error(
        "let z = zeros([B, 12], f32);",
        "12",
        "block dimension 12 is not a power of two",
    );
}

#[test]
fn unknown_function() {
    expect_error(
        "let z = frobnicate(n);",
        "frobnicate",
        "unknown function `frobnicate`",
    );
}

#[test]
fn unknown_method() {
    expect_error("let z = n.frob();", "frob", "unknown method `frob`");
}

#[test]
fn unknown_keyword_argument() {
    expect_error(
        "let z = load(p, maks = n > 0);",
        "maks",
        "`load` has no argument named `maks`",
    );
}

#[test]
fn too_many_arguments() {
    expect_error(
        "let z = program_id(0, 1);",
        "1)",
        "`program_id` takes at most 1 arguments",
    );
}

#[test]
fn closures_are_rejected() {
    let d = expect_error("let c = |x| x + 1;", "|x|", "closures are not supported");
    assert!(d.hint.is_some());
}

#[test]
fn match_is_rejected() {
    expect_error("match n { _ => {} }", "match", "`match` is not supported");
}

#[test]
fn loop_is_rejected_and_break_needs_a_loop() {
    expect_error("loop { }", "loop", "`loop` is not supported");
    expect_error("break;", "break", "`break` outside a loop");
    expect_error(
        "for i in 0..n { continue 'outer; }",
        "continue",
        "a labelled or valued `continue` is not supported",
    );
}

#[test]
fn references_are_rejected() {
    expect_error("let r = &n;", "&n", "references are not supported");
}

#[test]
fn strings_outside_print() {
    expect_error(
        "let s = \"hello\";",
        "\"hello\"",
        "a string is only allowed in",
    );
}

#[test]
fn unknown_variable() {
    expect_error("let z = nope + 1;", "nope", "unknown name `nope`");
}

#[test]
fn non_bool_condition() {
    expect_error(
        "if n { store(p, 1.0); }",
        "n {",
        "a condition must be a scalar `bool`, found `i32`",
    );
}

#[test]
fn carried_variable_changes_shape() {
    expect_error(
        "let mut acc = 0.0; for i in 0..n { acc += load(p + arange(0, B)); } store(p, acc);",
        "for",
        "loop-carried variable `acc` changes from f32 to tensor<16xf32>",
    );
}

#[test]
fn branches_disagree_on_type() {
    expect_error(
        "let mut s = f; if n > 0 { s = n.to(f16); } store(p, s);",
        "if",
        "`s` is f16 after the `if` branch but f32 after the `else` branch",
    );
}

#[test]
fn if_value_types_disagree() {
    expect_error(
        "let v = if n > 0 { f } else { n.to(f16) };",
        "if",
        "the value of this `if` is f32 after the `if` branch but f16 after the `else` branch",
    );
}

#[test]
fn pointer_variable_given_a_number() {
    expect_error(
        "let mut r = p; for i in 0..n { r = 0; } store(r, 1.0);",
        "for",
        "`r` is a pointer on one path and a number on another",
    );
}

#[test]
fn dot_shape_mismatch() {
    expect_error(
        "let c = dot(zeros([16, 32], f16), zeros([16, 16], f16));",
        "dot",
        "`dot` inner dimensions differ: [16, 32] x [16, 16]",
    );
}

#[test]
fn broadcast_mismatch() {
    expect_error(
        "let z = arange(0, B) + arange(0, 32);",
        "+ arange(0, 32)",
        "shapes [16] and [32] cannot be broadcast together",
    );
}

#[test]
fn helper_arity_and_recursion() {
    expect_error(
        "fn h(a: i32) -> i32 { a } let z = h(1, 2);",
        "h(1",
        "`h` takes 1 arguments, 2 given",
    );
    expect_error(
        "fn h(a: i32) -> i32 { h(a) } let z = h(1);",
        "h(a)",
        "nested too deeply",
    );
}

#[test]
fn runtime_value_as_arange_bound() {
    expect_error(
        "let z = arange(0, n);",
        "n)",
        "`n` is a run-time value; an `arange` bound must be a compile-time constant",
    );
}

#[test]
fn max_of_two_tensors_points_to_maximum() {
    let d = expect_error(
        "let a = arange(0, B); let b = arange(0, B); let m = max(a, b);",
        "b);",
        "`b` is a run-time value; an axis must be a compile-time constant",
    );
    assert!(d.hint.is_some_and(|h| h.contains("maximum(a, b)")));
}

#[test]
fn assignment_to_const_generic() {
    expect_error("B = 4;", "B = 4", "cannot assign to const generic `B`");
}

#[test]
fn macros_are_rejected() {
    expect_error("println!(\"x\");", "println", "macros are not supported");
}

#[test]
fn independent_statement_errors_are_all_reported() {
    let src = kernel_with(
        "store(p, frob(1));\n    println!(\"x\");\n    let y = nope;\n    store(p, y);",
    );
    let err = compile_str(&src).expect_err("three errors");
    let messages: Vec<&str> = err.0.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "unknown function `frob`",
            "macros are not supported in kernels",
            "unknown name `nope`"
        ]
    );
}

#[test]
fn kernel_level_errors() {
    let src = "fn k<const B: usize>(p: Ptr<f32>) { }";
    let d = error(src);
    assert!(d.message.contains("needs `configs`"));
    assert!(d
        .hint
        .as_deref()
        .is_some_and(|h| h.contains("configs = [(B = ...)]")));
    let src = "#[kernel(configs = [(C = 1)])]\nfn k<const B: usize>(p: Ptr<f32>) { }";
    let d = error(src);
    assert_eq!(d.message, "a config gives no value for `B`");
    assert_eq!(
        (d.span.start().line, d.span.start().column),
        position(src, "B:")
    );
    let src = "#[kernel(num_warps = 3)]\nfn k(p: Ptr<f32>) { }";
    let d = error(src);
    assert_eq!(d.message, "num_warps = 3 is not supported");
    assert_eq!(
        (d.span.start().line, d.span.start().column),
        position(src, "3)")
    );
    let src = "fn k(p: Ptr<u16>) { }";
    let d = error(src);
    assert_eq!(d.message, "unsupported kernel parameter type");
    assert_eq!(
        (d.span.start().line, d.span.start().column),
        position(src, "Ptr")
    );
}

#[test]
fn misuse_is_reported_not_panicked() {
    let cases = [
        "let x = arange(0, 0);",
        "let x = arange(4, 2);",
        "let x = reshape(arange(0, B), [4]);",
        "let x = trans(arange(0, B));",
        "let x = arange(0, B).extract_tile([5], [4]);",
        "let x = arange(0, B).extract_tile([0], [3]);",
        "let x = dot(zeros([16, 16], i32), zeros([16, 16], i32));",
        "let x = dot(zeros([16, 16], f16), zeros([16, 16], f32));",
        "let x = program_id(5);",
        "let (a, b) = n;",
        "let (a, b) = cumsum(arange(0, B));  let (c,) = (a,);  let (d, e, g) = (a, b);",
        "let x = cumsum(n);",
        "let x = sum(n);",
        "let x = bitcast(n, f16);",
        "let x = load(n);",
        "store(p, p);",
        "let x = p + p;",
        "let x = p * 2;",
        "let x = 1 / 0;",
        "let x = B % 0;",
        "for i in (0..n).step_by(0) {}",
        "for i in static_range(0, n) {}",
        "for i in (0..n).rev() {}",
        "for i in 0..=n {}",
        "for (i, j) in 0..n {}",
        "let x = arange(0, B)[B];",
        "let x = n.0;",
        "let v = if n > 0 { 1 } else { p };",
        "while n {}",
        "let x = -true;",
        "let x = !1.5;",
        "let x = i32::FOO;",
        "let x = 1u16;",
        "let x = load(p, other = \"a\");",
        "let x = load(p, cache_modifier = \".zz\");",
        "let x = expand_dims(n, 5);",
        "let x = permute(zeros([B, 4], f32), [0, 0]);",
        "let x = full([B], arange(0, B), f32);",
        "let x = atomic_add(q, 1, sem = \"x\");",
        "device_print(n);",
        "device_assert(n);",
        "let x = maximum(true, false);",
        "let x = select(n, 1, 2);",
        "let x = fma(p, 1, 2);",
        "let x = zeros([B], u16);",
        "let x = exp(zeros([B], f64));",
        "let x = zeros(B, f32);",
        "let x = load(p, mask = n);",
        "let x = f << 1;",
        "let x = f & f;",
        "let x = (n > 0) + 1.0 && true;",
        "let x;",
        "let x = async { 1 };",
        "let x = B.to(f32) as usize;",
        "unsafe { }",
        "let x = n.exp::<f32>();",
        "fn h<T>(a: T) -> T { a } let z = h(1);",
        "fn h(a: i32) -> i32 { return a; } let z = h(1);",
        "fn h(a: i32) {} fn h(b: i32) {}",
        "return 5;",
        "let x = p[(.., None)];",
        "let x = arange(0, B)[(.., .., None)];",
        "let x = sum(arange(0, B), axis = 3);",
        "let x = f(1);",
        "let t = (n, n); if n > 0 { t = (1, 1); }",
        "let x = dot(zeros([8, 16], f16), zeros([16, 16], f16));",
        "let x = dot(zeros([16, 16], f16), zeros([16, 16], f16), zeros([16, 16], f16));",
        "let x = arange(0, B).insert_tile(zeros([4, 4], f32), [0, 0]);",
        "let x = reshape(arange(0, B), [3, 5]);",
        "let x = broadcast_to(arange(0, B), [4, 8]);",
        "let x = broadcast_to(zeros([B, 2], f32), [B]);",
    ];
    let mut wrong = Vec::new();
    for body in cases {
        let src = kernel_with(body);
        match std::panic::catch_unwind(|| compile_str(&src)) {
            Ok(Err(d)) if !d.0.is_empty() && !d.0[0].message.contains("internal") => {}
            Ok(Err(d)) => wrong.push(format!("{body}: {d}")),
            Ok(Ok(_)) => wrong.push(format!("{body}: accepted")),
            Err(_) => wrong.push(format!("{body}: panicked")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn const_items_are_compile_time_constants() {
    let k = compile_one(&kernel_with(
        "const ROWS: usize = 2 * 8;\n    const SCALE: f32 = 3;\n    static_assert(ROWS % 16 == 0, \"whole tiles\");\n    store(p + arange(0, ROWS), full([ROWS], SCALE, f32));",
    ));
    // The shape came from the constant, and the store's value is 3.0.
    assert!(!find(&k, |o| matches!(o, OpKind::Arange { end: 16, .. })).is_empty());
    assert!(!find(
        &k,
        |o| matches!(o, OpKind::Constant(Literal::Float(f)) if *f == 3.0)
    )
    .is_empty());
}

#[test]
fn a_const_item_needs_a_compile_time_value() {
    let d = expect_error(
        "const N: usize = n;",
        "n;",
        "`const N` needs a value known at compile time",
    );
    assert!(d.hint.as_deref().is_some_and(|h| h.contains("`let`")));
    expect_error(
        "const F: bool = 2;",
        "bool",
        "`const F`: this type cannot hold `2`",
    );
}

#[test]
fn a_failed_static_assert_stops_the_build_with_its_message() {
    expect_error(
        "const B: usize = 24;\n    static_assert(B % 16 == 0, \"B must be a multiple of 16\");",
        "B % 16",
        "B must be a multiple of 16",
    );
    expect_error(
        "static_assert(n > 0);",
        "n > 0",
        "a `static_assert` condition",
    );
}

#[test]
fn a_constant_index_past_the_dimension_is_refused_at_the_index() {
    expect_error(
        "let t = arange(0, 16); store(p, t[16].to(f32));",
        "16]",
        "index 16 is out of bounds for dimension 0 of size 16",
    );
}

#[test]
fn more_indices_than_dimensions_are_refused() {
    expect_error(
        "let t = arange(0, 16); store(p, t[(1, 2)].to(f32));",
        "2)]",
        "too many indices for a tensor of rank 1",
    );
}

#[test]
fn boundary_check_on_a_tensor_of_pointers_is_refused() {
    expect_error(
        "let v = load(p + arange(0, 16), boundary_check = (0,)); store(p + arange(0, 16), v);",
        "(0,)",
        "`boundary_check` and `padding_option` apply to block pointers",
    );
}

#[test]
fn a_block_pointer_load_with_a_mask_is_refused() {
    expect_error(
        "let b = make_block_ptr(p, (n,), (1,), (0,), (16,), (0,)); let v = load(b, mask = arange(0, 16) < n); store(p + arange(0, 16), v);",
        "arange(0, 16) < n",
        "a block pointer's load takes no `mask` or `other`",
    );
}

#[test]
fn a_block_pointer_with_a_wrong_number_of_offsets_is_refused() {
    expect_error(
        "let b = make_block_ptr(p, (n,), (1,), (0, 0), (16,), (0,)); store(p + arange(0, 16), load(b));",
        "(0, 0)",
        "`offsets` needs 1 values",
    );
}

#[test]
fn bitcast_of_bools_is_refused() {
    expect_error(
        "let b = arange(0, 16) < n; store(p + arange(0, 16), bitcast(b, u8).to(f32));",
        "bitcast(b",
        "a `bool` has no bit pattern of its own",
    );
}

/// What code generation has no lowering for, refused here at the user's
/// token. Each case's tag is named by `tlx-codegen/tests/ice_guards.rs`
/// for the `refused_upstream` site it keeps unreachable.
#[test]
fn what_codegen_cannot_lower_is_refused_at_the_call() {
    let cases = [
        (
            "guard:reduce-pointers",
            "let x = max(p + arange(0, B), axis = 0);",
            "cannot be a pointer",
        ),
        (
            "guard:reduce-pointers",
            "let x = argmin(p + arange(0, B), axis = 0);",
            "cannot be a pointer",
        ),
        (
            "guard:scan-bools",
            "let x = cummax(arange(0, B) > n);",
            "not bools",
        ),
        (
            "guard:dot-accumulator",
            "let x = dot(zeros([16, 16], f16), zeros([16, 16], f16), zeros([16, 16], f16));",
            "accumulator must be",
        ),
        (
            "guard:float-bit-operation",
            "let x = f & f;",
            "does not apply",
        ),
        (
            "guard:float-bit-operation",
            "let x = f << 1;",
            "does not apply",
        ),
        (
            "guard:bool-arithmetic",
            "let x = (n > 0) * (n > 1);",
            "does not apply",
        ),
        ("guard:fast-division", "let x = fdiv(n, n);", "divides f32"),
        (
            "guard:f64-math",
            "let x = exp(zeros([B], f64));",
            "not available",
        ),
        (
            "guard:f64-math",
            "let x = pow(zeros([B], f32) + 1.0, zeros([B], f64));",
            "not available",
        ),
        ("guard:unary-operator", "let x = !f;", "does not apply"),
        ("guard:elementwise-pointers", "let x = -p;", "pointer"),
        (
            "guard:elementwise-pointers",
            "let x = fma(p, 1, 2);",
            "pointer",
        ),
        ("guard:elementwise-pointers", "let x = p * 2;", "pointer"),
        ("guard:bitcast", "let x = bitcast(n > 0, u8);", "bool"),
        ("guard:bitcast", "let x = bitcast(n, f16);", "size"),
    ];
    let mut wrong = Vec::new();
    for (tag, body, expected) in cases {
        match compile_str(&kernel_with(body)) {
            Err(d) if d.0[0].message.contains(expected) && !d.0[0].message.contains("internal") => {
            }
            Err(d) => wrong.push(format!("{tag} `{body}`: {d}")),
            Ok(_) => wrong.push(format!("{tag} `{body}`: accepted")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Tensors larger than a tile can be, and TMA blocks no tile matches,
/// are refused where the shape is written.
#[test]
fn oversized_and_odd_shaped_blocks_are_refused_where_written() {
    for (body, expected) in [
        ("let x = zeros([65536, 65536], f32);", "at most 1048576"),
        ("let x = arange(0, 1 << 21);", "at most 1048576"),
        (
            "let x = arange(0, 1 << 20)[(.., None)] + arange(0, 1 << 20)[(None, ..)];",
            "at most 1048576",
        ),
    ] {
        let d = compile_str(&kernel_with(body)).expect_err(body);
        assert!(d.0[0].message.contains(expected), "{body}: {d}");
    }
    let desc =
        "#[kernel(configs = [(B = 48)])]\nfn k<const B: usize>(d: TensorDesc<f16, B, 64>) {}";
    let d = compile_str(desc).expect_err("a 48-row TMA block");
    assert!(d.0[0].message.contains("48 is not a power of two"), "{d}");
    let made = kernel_with("let d = make_tensor_descriptor(h, [n, n], [n, 1], [48, 64]);");
    let d = compile_str(&made).expect_err("a 48-row made descriptor");
    assert!(d.0[0].message.contains("power-of-two"), "{d}");
}

/// fp8 arithmetic, comparisons and reductions run in f32 and round back.
#[test]
fn fp8_values_compute() {
    compile_one(&kernel_with(
        "let o = arange(0, B);\n    let x = load(h + o).to(f8e4m3);\n    let y = -x * x + x;\n    let big = y > x;\n    let total = sum(y, axis = 0);\n    let top = max(y, axis = 0);\n    let (run, _) = cumsum(y, axis = 0);\n    store(p + o, (run + exp(y) + total + top).to(f32), mask = big);",
    ));
}

#[test]
fn the_instrumentations_event_is_not_a_call_a_kernel_can_make() {
    let d = expect_error(
        "trace_event(p, 0, 1, 0);",
        "trace_event(",
        "`trace_event` is not a call of the kernel language",
    );
    assert!(
        d.hint.as_deref().is_some_and(|h| h.contains("TLX_TRACE")),
        "{d:?}"
    );
}

/// What the macro's fuzzer found (tlx-macros/src/fuzz.rs): TLX handles
/// used as tensors reached the IR verifier as internal errors, a task of
/// two billion replicas exhausted memory, and a lone `;` was refused with
/// no place to point at.
#[test]
fn fuzzer_findings_are_errors_at_the_users_tokens() {
    let cases = [
        (
            "let bars = alloc_barriers(1, 1); let x = -bars;",
            "must be a tensor, not mbarriers",
        ),
        (
            "let bufs = local_alloc([16], f32, 1); store(p + arange(0, B), bufs);",
            "must be a tensor, not shared-memory buffers",
        ),
        (
            "async_tasks! { task(default) { } task(num_warps = 1, replicate = 2147483647) { } }",
            "at most 32 warps",
        ),
    ];
    let mut wrong = Vec::new();
    for (body, expected) in cases {
        match compile_str(&kernel_with(body)) {
            Err(d) if d.0[0].message.contains(expected) => {}
            Err(d) => wrong.push(format!("`{body}`: {d}")),
            Ok(_) => wrong.push(format!("`{body}`: accepted")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    compile_one(&kernel_with("store(p + arange(0, B), 1.0);;"));
}
