//! Atomics, cumsum, extract/insert tile, device_print and device_assert:
//! compiled for every architecture and checked by `ptxas`.

use crate::codegen_common::*;
use tlx_core::ir::*;

#[test]
fn atomics_assemble_with_semantics_and_scope() {
    let mut k = K::new("atomics", 4);
    let xf = k.ptr("xf", ScalarType::F32);
    let xi = k.ptr("xi", ScalarType::I32);
    let xl = k.ptr("xl", ScalarType::I64);
    let xh = k.ptr("xh", ScalarType::F16);
    let out = k.ptr("out", ScalarType::I32);
    let n = k.scalar_param("n", ScalarType::I32);
    let offs = k.arange(256);
    let nn = k.splat(n, &[256]);
    let mask = k.cmp(CmpPred::Lt, offs, nn);
    let pf = k.add_ptr(xf, offs);
    let one = k.float(1.0, ScalarType::F32, &[256]);
    let old_f = k.b.push1(
        OpKind::AtomicRmw {
            op: AtomicOp::Add,
            ptr: pf,
            value: one,
            mask: Some(mask),
            sem: MemSem::Relaxed,
            scope: MemScope::Gpu,
        },
        ty(ScalarType::F32, &[256]),
    );
    let pi = k.add_ptr(xi, offs);
    let old_i = k.b.push1(
        OpKind::AtomicRmw {
            op: AtomicOp::Max,
            ptr: pi,
            value: offs,
            mask: None,
            sem: MemSem::AcqRel,
            scope: MemScope::Cta,
        },
        i32t(&[256]),
    );
    let cas = k.b.push1(
        OpKind::AtomicCas {
            ptr: pi,
            cmp: old_i,
            value: offs,
            sem: MemSem::Acquire,
            scope: MemScope::System,
        },
        i32t(&[256]),
    );
    // A scalar atomic: one thread performs it, every thread sees the old value.
    let zero = k.b.push1(OpKind::Constant(Literal::Int(0)), i32t(&[]));
    let one_l =
        k.b.push1(OpKind::Constant(Literal::Int(1)), ty(ScalarType::I64, &[]));
    let pl = k.add_ptr(xl, zero);
    let old_l = k.b.push1(
        OpKind::AtomicRmw {
            op: AtomicOp::Add,
            ptr: pl,
            value: one_l,
            mask: None,
            sem: MemSem::AcqRel,
            scope: MemScope::Gpu,
        },
        ty(ScalarType::I64, &[]),
    );
    let ph = k.add_ptr(xh, offs);
    let oh = k.float(0.5, ScalarType::F16, &[256]);
    k.b.push1(
        OpKind::AtomicRmw {
            op: AtomicOp::Add,
            ptr: ph,
            value: oh,
            mask: None,
            sem: MemSem::Relaxed,
            scope: MemScope::Gpu,
        },
        ty(ScalarType::F16, &[256]),
    );
    // A scalar counter whose old value nothing reads: a `red`, one thread.
    let one = k.b.push1(OpKind::Constant(Literal::Int(1)), i32t(&[]));
    let pc = k.add_ptr(xi, zero);
    k.b.push1(
        OpKind::AtomicRmw {
            op: AtomicOp::Add,
            ptr: pc,
            value: one,
            mask: None,
            sem: MemSem::Release,
            scope: MemScope::Gpu,
        },
        i32t(&[]),
    );
    let po = k.add_ptr(out, offs);
    let fi = k.cast(old_f, ScalarType::I32);
    let s1 = k.bin(BinaryOp::Add, fi, cas);
    let li = k.cast(old_l, ScalarType::I32);
    let li = k.splat(li, &[256]);
    let s2 = k.bin(BinaryOp::Add, s1, li);
    k.store(po, s2, None);
    for c in compile_all(&k.finish()) {
        for needle in [
            "atom.relaxed.gpu.global.add.f32",
            "atom.acq_rel.cta.global.max.s32",
            "atom.acquire.sys.global.cas.b32",
            "atom.acq_rel.gpu.global.add.u64",
            // The two updates whose old values nothing reads.
            "red.relaxed.gpu.global.add.noftz.f16",
            "red.release.gpu.global.add.u32",
        ] {
            assert!(c.ptx.contains(needle), "{needle} missing");
        }
        assert!(!c.ptx.contains("atom.relaxed.gpu.global.add.noftz.f16"));
        assert!(!c.ptx.contains("atom.release"));
    }
}

#[test]
fn cumsum_forward_and_reverse_assemble() {
    for s in [ScalarType::I32, ScalarType::F32, ScalarType::F16] {
        for reverse in [false, true] {
            for n in [8, 1024] {
                let mut k = K::new("cumsum", 4);
                let x = k.ptr("x", s);
                let out = k.ptr("out", s);
                let tot = k.ptr("total", s);
                let offs = k.arange(n);
                let px = k.add_ptr(x, offs);
                let v = k.load(px, None, None);
                let r = k.b.push(
                    OpKind::Scan {
                        value: v,
                        axis: 0,
                        reverse,
                        combine: BinaryOp::Add,
                    },
                    vec![ty(s, &[n]), ty(s, &[])],
                );
                let po = k.add_ptr(out, offs);
                k.store(po, r[0], None);
                k.store(tot, r[1], None);
                for c in compile_all(&k.finish()) {
                    assert!(c.shared_bytes as usize >= n * 4);
                }
            }
        }
    }
}

#[test]
fn extract_and_insert_tiles_assemble() {
    let mut k = K::new("tiles", 4);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let r = k.arange(32);
    let r = k.expand(r, 1);
    let w = k.int(64, &[32, 1]);
    let r = k.bin(BinaryOp::Mul, r, w);
    let r = k.broadcast(r, &[32, 64]);
    let c = k.arange(64);
    let c = k.expand(c, 0);
    let c = k.broadcast(c, &[32, 64]);
    let offs = k.bin(BinaryOp::Add, r, c);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let tile = k.b.push1(
        OpKind::ExtractTile {
            value: v,
            index: vec![1, 2],
        },
        ty(ScalarType::F32, &[16, 16]),
    );
    let two = k.float(2.0, ScalarType::F32, &[16, 16]);
    let tile = k.bin(BinaryOp::Mul, tile, two);
    let back = k.b.push1(
        OpKind::InsertTile {
            value: v,
            tile,
            index: vec![0, 3],
        },
        ty(ScalarType::F32, &[32, 64]),
    );
    let po = k.add_ptr(out, offs);
    k.store(po, back, None);
    for c in compile_all(&k.finish()) {
        assert_eq!(c.shared_bytes, 32 * 64 * 4);
    }
}

#[test]
fn print_and_assert_call_vprintf_and_trap() {
    let mut k = K::new("debugging", 2);
    k.b.set_source_file("kernels.rs");
    let x = k.ptr("x", ScalarType::F16);
    let offs = k.arange(64);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let pid = k.pid(0);
    k.b.push(
        OpKind::Print {
            prefix: "x = ".into(),
            values: vec![v],
        },
        vec![],
    );
    k.b.push(
        OpKind::Print {
            prefix: "pid 100% ".into(),
            values: vec![pid],
        },
        vec![],
    );
    k.b.push(
        OpKind::Print {
            prefix: "hello".into(),
            values: vec![],
        },
        vec![],
    );
    let zero = k.float(0.0, ScalarType::F16, &[64]);
    let ok = k.cmp(CmpPred::Ge, v, zero);
    k.b.set_loc(SrcLoc { line: 12, col: 4 });
    k.b.push(
        OpKind::Assert {
            cond: ok,
            message: "x must be \"non-negative\"".into(),
        },
        vec![],
    );
    let kernel = k.finish();
    let with_ir = tlx_codegen::compile_with_llvm_ir(&kernel, Arch::Sm90a).expect("compiles");
    assert!(
        with_ir
            .llvm_ir
            .contains("kernels.rs:12: device_assert failed"),
        "{}",
        with_ir.llvm_ir
    );
    for c in compile_all(&kernel) {
        assert!(c.ptx.contains("vprintf"));
        assert!(c.ptx.contains("trap;"));
    }
}

#[test]
fn unsupported_and_malformed_kernels_are_errors_not_panics() {
    use tlx_codegen::{compile, CodegenError};
    // A scan of bools (the frontend refuses it).
    let mut k = K::new("bad", 4);
    let x = k.ptr("x", ScalarType::F32);
    let t = ty(ScalarType::Bool, &[4, 4]);
    let zero = k.b.push1(OpKind::Constant(Literal::Bool(false)), t.clone());
    k.b.push(
        OpKind::Scan {
            value: zero,
            axis: 1,
            reverse: false,
            combine: BinaryOp::Add,
        },
        vec![t, ty(ScalarType::Bool, &[4])],
    );
    k.store(x, zero, None);
    assert!(matches!(
        compile(&k.finish(), Arch::Sm90a),
        Err(CodegenError::MalformedIr(_))
    ));

    // A cluster barrier inside a task: the program's other warps never arrive.
    let mut k = K::new("tasks", 4);
    let x = k.ptr("x", ScalarType::F32);
    k.b.begin_block(vec![]);
    let value = k.float(1.0, ScalarType::F32, &[]);
    k.store(x, value, None);
    let body = k.b.end_block();
    k.b.begin_block(vec![]);
    k.b.push(OpKind::ClusterBarrier, vec![]);
    let waits = k.b.end_block();
    k.b.push(
        OpKind::AsyncTasks {
            tasks: vec![
                TaskRegion::default_task(body),
                TaskRegion::with_warps(1, waits),
            ],
        },
        vec![],
    );
    match compile(&k.finish(), Arch::Sm90a) {
        Err(CodegenError::MalformedIr(what)) => {
            assert!(what.starts_with("cluster_barrier inside"), "{what}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    let mut k = K::new("odd", 4);
    let x = k.ptr("x", ScalarType::F32);
    let three = k.b.push1(
        OpKind::Constant(Literal::Float(1.0)),
        ty(ScalarType::F32, &[3]),
    );
    let offs = k.b.push1(OpKind::Arange { start: 0, end: 3 }, i32t(&[3]));
    let p = k.add_ptr(x, offs);
    k.store(p, three, None);
    assert!(matches!(
        compile(&k.finish(), Arch::Sm90a),
        Err(CodegenError::Layout(_))
    ));
}

/// A row sum whose loop loads `x` at the loop index: `num_stages`.
fn row_sum(stages: u32) -> String {
    format!(
        r#"
#[tlx::kernel(num_warps = 4, num_stages = {stages}, configs = [(BLOCK = 1024)])]
fn row_sum<const BLOCK: usize>(x: Ptr<bf16>, out: Ptr<f32>, n: i32) {{
    let row = program_id(0);
    let mut acc = zeros([BLOCK], f32);
    for off in (0..n).step_by(BLOCK) {{
        let cols = off + arange(0, BLOCK);
        acc += load(x + row * n + cols, mask = cols < n, other = 1.0).to(f32);
    }}
    store(out + row, sum(acc, axis = 0));
}}
"#
    )
}

#[test]
fn pipelined_loops_prefetch_through_a_shared_ring() {
    let compile = |stages: u32| {
        let mut kernels = tlx_frontend::compile_str(&row_sum(stages))
            .unwrap_or_else(|e| panic!("frontend:\n{e}"));
        // sm_90a's copy, after every architecture went through ptxas.
        compile_all(&kernels.remove(0)).remove(0)
    };
    let plain = compile(1);
    assert!(!plain.ptx.contains("cp.async"), "{}", plain.ptx);
    let piped = compile(3);
    // 1024 bf16 over 128 threads: one 16-byte copy per thread and iteration,
    // once in the loop that issues the first two iterations and once in the
    // body (LLVM may unroll that small loop, but then it is two copies).
    let copies = piped.ptx.matches("cp.async.cg.shared.global").count();
    assert!((2..=3).contains(&copies), "{copies} copies:\n{}", piped.ptx);
    assert_eq!(piped.ptx.matches("cp.async.commit_group").count(), copies);
    // The newest two groups may stay in flight while this iteration reads.
    assert!(piped.ptx.contains("cp.async.wait_group 2"), "{}", piped.ptx);
    assert!(piped.ptx.contains("cp.async.wait_all"), "{}", piped.ptx);
    // Three slots of 2 KB; the reduction after the loop reuses their bytes
    // for its scratch, so the total is the larger of the two.
    let ring = 3 * 1024 * 2;
    assert_eq!(
        piped.shared_bytes as usize,
        ring.max(plain.shared_bytes as usize),
        "{} vs {}",
        piped.shared_bytes,
        plain.shared_bytes
    );
}

/// A row split over a cluster: partial sums through global memory and one
/// `cluster_barrier()` (the shape of the cluster LayerNorm).
const CLUSTER_ROW_SUM: &str = r#"
#[tlx::kernel(configs = [(SLICE = 256, K = 4, num_warps = 2, ctas_per_cga = K)])]
fn cluster_row_sum<const SLICE: usize, const K: usize>(x: Ptr<f32>, partial: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let row = program_id(0) / cluster_num_ctas();
    let cols = cluster_cta_rank() * SLICE + arange(0, SLICE);
    let v = load(x + row * n + cols, mask = cols < n, other = 0.0);
    store(partial + program_id(0), sum(v, axis = 0));
    cluster_barrier();
    let total = sum(load(partial + row * K + arange(0, K)), axis = 0);
    store(out + row * n + cols, v / total, mask = cols < n);
}
"#;

#[test]
fn clusters_reach_the_ptx_and_assemble() {
    let kernels = tlx_frontend::compile_str(CLUSTER_ROW_SUM).expect("frontend");
    for c in compile_all(&kernels[0]) {
        for part in [
            ".reqnctapercluster 4, 1, 1",
            "%cluster_ctarank",
            "barrier.cluster.arrive.aligned;",
            "barrier.cluster.wait.aligned;",
        ] {
            assert!(c.ptx.contains(part), "PTX lacks {part:?}:\n{}", c.ptx);
        }
    }
}

/// A bf16 slice reduced before a cluster barrier and converted again after
/// it, in a 16-program cluster with a register cap.
const CLUSTER_REPACK: &str = r#"
#[tlx::kernel(configs = [(SLICE = 1024, K = 16, num_warps = 2, ctas_per_cga = K, maxnreg = 72)])]
fn cluster_center<const SLICE: usize, const K: usize>(x: Ptr<bf16>, partial: Ptr<f32>, out: Ptr<bf16>, n: i32) {
    let row = program_id(0) / K;
    let cols = cluster_cta_rank() * SLICE + arange(0, SLICE);
    let v = load(x + row * n + cols);
    store(partial + program_id(0), sum(v.to(f32), axis = 0));
    cluster_barrier();
    let mean = sum(load(partial + row * K + arange(0, K)), axis = 0) / n.to(f32);
    store(out + row * n + cols, (v.to(f32) - mean).to(bf16));
}
"#;

#[test]
fn narrow_values_cross_a_cluster_barrier_packed() {
    let kernels = tlx_frontend::compile_str(CLUSTER_REPACK).expect("frontend");
    for c in compile_all(&kernels[0]) {
        assert!(c.ptx.contains(".reqnctapercluster 16, 1, 1"), "{}", c.ptx);
        assert!(c.ptx.contains(".maxnreg 72"), "{}", c.ptx);
        // 1024 bf16 over 64 threads: 8 packed words per thread, each copied
        // opaquely after the barrier and widened there again, so that the
        // f32 values of the first conversion die at the barrier.
        let (_, after) = c
            .ptx
            .split_once("barrier.cluster.wait.aligned;")
            .expect("a cluster barrier");
        let copies = after.matches("mov.b32 %r").count();
        assert!(
            copies >= 8,
            "{copies} opaque copies after the barrier:\n{}",
            c.ptx
        );
        let widened = after.matches("shl.b32").count() + after.matches("cvt.f32.bf16").count();
        assert!(
            widened >= 8,
            "{widened} conversions after the barrier:\n{}",
            c.ptx
        );
    }
}
