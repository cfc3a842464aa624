//! Warp-specialized task regions (`async_tasks`): each task replica runs on
//! warps of its own, synchronizes on a hardware barrier of its own, keeps
//! scratch of its own and may change its register budget; the launch gets
//! every task's warps. Compiled for every architecture, checked by `ptxas`.

use crate::codegen_common::*;
use tlx_core::ir::*;

/// `out[row] = sum(x[row, :])` for a 512-wide row, in the current block.
fn row_sum(k: &mut K, x: ValueId, out: ValueId, row: i64) {
    let cols = k.arange(512);
    let start = k.int(row * 512, &[512]);
    let offs = k.bin(BinaryOp::Add, cols, start);
    let p = k.add_ptr(x, offs);
    let v = k.load(p, None, None);
    let s = k.reduce(v, 0, ReduceKind::Sum);
    let at = k.int(row, &[]);
    let po = k.add_ptr(out, at);
    k.store(po, s, None);
}

/// The default task (4 warps) and a 4-warp consumer each sum a row, so
/// both reduce across warps at the same time; a 4-warp task and two 1-warp
/// replicas store their replica ids. The consumer raises its registers and
/// the 4-warp store task lowers its own (whole warp groups, as
/// `setmaxnreg` wants).
fn three_tasks() -> Kernel {
    let mut k = K::new("tasks", 4);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    k.b.begin_block(vec![]);
    row_sum(&mut k, x, out, 0);
    let default = k.b.end_block();
    k.b.begin_block(vec![]);
    row_sum(&mut k, x, out, 1);
    let consumer = k.b.end_block();
    let store_id = |k: &mut K, offset: i64| {
        k.b.begin_block(vec![]);
        let id = k.b.push1(OpKind::AsyncTaskReplicaId, i32t(&[]));
        let base = k.int(offset, &[]);
        let at = k.bin(BinaryOp::Add, id, base);
        let p = k.add_ptr(out, at);
        let v = k.cast(id, ScalarType::F32);
        k.store(p, v, None);
        k.b.end_block()
    };
    let lowered = store_id(&mut k, 4);
    let replicas = store_id(&mut k, 2);
    let tasks = vec![
        TaskRegion::default_task(default),
        TaskRegion {
            num_regs: Some(160),
            ..TaskRegion::with_warps(4, consumer)
        },
        TaskRegion {
            num_regs: Some(40),
            ..TaskRegion::with_warps(4, lowered)
        },
        TaskRegion {
            replicate: 2,
            ..TaskRegion::with_warps(1, replicas)
        },
    ];
    k.b.push(OpKind::AsyncTasks { tasks }, vec![]);
    k.finish()
}

#[test]
fn task_regions_run_on_warps_of_their_own() {
    let kernel = three_tasks();
    tlx_core::check::verify(&kernel).unwrap();
    // 4 + 4 + 4 + 1 + 1 warps.
    assert_eq!(kernel.total_warps(), 14);
    for c in compile_all(&kernel) {
        assert_eq!(c.num_warps, 14);
        let ptx = &c.ptx;
        assert!(ptx.contains(".maxntid 448\n"), "{ptx}");
        assert!(ptx.contains(".minnctapersm 1"), "{ptx}");
        // The program meets before and after the region; each 4-warp task
        // reduces across its warps on a barrier of its own.
        assert!(ptx.contains("barrier.sync 0;"));
        assert!(ptx.contains("barrier.sync 1, 128;"), "{ptx}");
        assert!(ptx.contains("barrier.sync 2, 128;"), "{ptx}");
        // 65536 over 512 threads (whole warp groups): 128 by default.
        assert!(ptx.contains("setmaxnreg.inc.sync.aligned.u32 160;"));
        assert!(ptx.contains("setmaxnreg.dec.sync.aligned.u32 40;"));
    }
}

#[test]
fn tensors_from_before_the_region_stay_out_of_other_warps_tasks() {
    let mut k = K::new("crossing", 4);
    let x = k.ptr("x", ScalarType::F32);
    let out = k.ptr("out", ScalarType::F32);
    let cols = k.arange(512);
    let p = k.add_ptr(x, cols);
    let v = k.load(p, None, None);
    k.b.begin_block(vec![]);
    let default = k.b.end_block();
    k.b.begin_block(vec![]);
    let q = k.add_ptr(out, cols);
    k.store(q, v, None);
    let other = k.b.end_block();
    let tasks = vec![
        TaskRegion::default_task(default),
        TaskRegion::with_warps(2, other),
    ];
    k.b.push(OpKind::AsyncTasks { tasks }, vec![]);
    let kernel = k.finish();
    match tlx_codegen::compile(&kernel, Arch::Sm90a) {
        Err(tlx_codegen::CodegenError::Misuse { message, hint, .. }) => {
            assert!(message.contains("runs on other warps"), "{message}");
            assert!(hint.contains("compute it inside the task"), "{hint}");
        }
        other => panic!("expected a misuse, got {other:?}"),
    }
}

/// A task of two replicas, each writing its own half of `out`; `reduce`
/// adds a sum across the replica's warps (which needs scratch memory).
fn two_replicas(shared_body: bool, reduce: bool) -> String {
    let value = if reduce { "sum(x, axis = 0) + x" } else { "x" };
    format!(
        r#"
#[tlx::kernel(num_warps = 4)]
fn halves(out: Ptr<f32>) {{
    async_tasks! {{
        task(default) {{
        }}
        task(num_warps = 4, replicate = 2, shared_body = {shared_body}) {{
            let me = async_task_replica_id();
            let cols = me * 512 + arange(0, 512);
            let x = cols.to(f32);
            store(out + cols, {value});
        }}
    }}
}}
"#
    )
}

#[test]
fn shared_body_replicas_run_one_copy_of_the_code() {
    let count = |src: &str| {
        let ptx = tlx_codegen::compile(&crate::kernels::compile(src), Arch::Sm90a)
            .expect("compiles")
            .ptx;
        (ptx.matches("st.global").count(), ptx)
    };
    let (separate, _) = count(&two_replicas(false, false));
    let (shared, ptx) = count(&two_replicas(true, false));
    assert!(
        separate > 0 && shared * 2 == separate,
        "{separate} vs {shared} stores"
    );
    // The replica's hardware barrier is picked at run time, from the warp
    // index as lane 0 holds it (which ptxas knows is the same in every lane).
    assert!(!ptx.contains("barrier.sync 2,"), "{ptx}");
    assert!(ptx.contains("shfl.sync.idx.b32"), "{ptx}");
    // A body that needs scratch of its own keeps a copy per replica.
    let (with_scratch, _) = count(&two_replicas(true, true));
    let (without_sharing, _) = count(&two_replicas(false, true));
    assert_eq!(with_scratch, without_sharing);
}

/// FA3's producer layout: a producer warp holding its warp group at a low
/// budget, a second task on one of that group's idle warps at the same
/// budget, and a consumer group raising its own.
const SHARED_GROUP: &str = r#"
#[tlx::kernel(num_warps = 1)]
fn shared_group(out: Ptr<f32>) {
    async_tasks! {
        task(default, num_regs = 24) {
            store(out, 1.0);
        }
        task(num_warps = 1, num_regs = 24, warp_group_start_id = 1) {
            store(out + 1 + arange(0, 32), full([32], 2.0, f32));
        }
        task(num_warps = 4, num_regs = 240, warp_group_start_id = 4) {
            store(out + 64 + arange(0, 128), full([128], 3.0, f32));
        }
    }
}
"#;

#[test]
fn tasks_sharing_a_warp_group_lower_its_budget_once() {
    let kernel = crate::kernels::compile(SHARED_GROUP);
    tlx_core::check::verify(&kernel).unwrap();
    assert_eq!(kernel.total_warps(), 8);
    for c in compile_all(&kernel) {
        let ptx = &c.ptx;
        // The group executes one `setmaxnreg` together; the sharing task's
        // warp reaches its body from the holder's, past it.
        // (Eight warps start with 256 registers: both budgets lower it.)
        assert_eq!(
            ptx.matches("setmaxnreg.dec.sync.aligned.u32 24;").count(),
            1,
            "{ptx}"
        );
        assert_eq!(
            ptx.matches("setmaxnreg.dec.sync.aligned.u32 240;").count(),
            1,
            "{ptx}"
        );
        assert_eq!(ptx.matches("setmaxnreg").count(), 2, "{ptx}");
    }
}
