//! Blackwell's cluster launch control end to end on the CPU interpreter: a
//! persistent kernel launched over every tile takes the tiles of programs
//! that have not started (`clc_producer` / `clc_consumer`), so each tile is
//! done exactly once whatever the schedule, the number of OS threads and
//! the cluster shape; a consumer that waits on the wrong phase and a raw
//! answer read before its barrier are reported; the kernels become their
//! PTX and `ptxas` assembles them for sm_100a, and sm_90a refuses them.

use crate::codegen_common;

use tlx_codegen::{compile, CodegenError};
use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpError, InterpOptions, Schedule};
use tlx_core::ir::{Arch, Kernel};
use tlx_frontend::compile_str;

/// `z = x + y` over tiles of 64, persistent through CLC; each tile counts
/// its visits, so a tile done twice or never shows.
const ADD: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn clc_add(x: Ptr<f32>, y: Ptr<f32>, z: Ptr<f32>, visits: Ptr<i32>, n: i32) {
    let clc = clc_create_context(1);
    let mut tile = program_id(0);
    let mut p_producer = 1;
    let mut p_consumer = 0;
    while tile != -1 {
        clc_producer(clc, p_producer);
        p_producer ^= 1;
        let offs = tile * 64 + arange(0, 64);
        let mask = offs < n;
        store(z + offs, load(x + offs, mask = mask) + load(y + offs, mask = mask), mask = mask);
        atomic_add(visits + tile, 1);
        tile = clc_consumer(clc, p_consumer);
        p_consumer ^= 1;
    }
}
"#;

/// The same in clusters of two programs: program 0 asks for the whole
/// cluster, both get its tiles (the first program's id plus their rank),
/// and both release program 0's context.
const ADD_PAIRS: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4, ctas_per_cga = 2)]
fn clc_add_pairs(x: Ptr<f32>, y: Ptr<f32>, z: Ptr<f32>, visits: Ptr<i32>, n: i32) {
    let clc = clc_create_context(2);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let mut tile = program_id(0);
    let mut p_producer = 1;
    let mut p_consumer = 0;
    while tile != -1 {
        clc_producer(clc, p_producer);
        p_producer ^= 1;
        let offs = tile * 64 + arange(0, 64);
        let mask = offs < n;
        store(z + offs, load(x + offs, mask = mask) + load(y + offs, mask = mask), mask = mask);
        atomic_add(visits + tile, 1);
        tile = clc_consumer(clc, p_consumer);
        p_consumer ^= 1;
    }
    // No program leaves while its peer may still arrive on its barrier.
    cluster_barrier();
}
"#;

fn kernel(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn upload<T: Copy>(
    mem: &HostMemory,
    values: &[T],
    bytes: fn(T) -> [u8; 4],
) -> tlx_core::interp::BufferId {
    let raw: Vec<u8> = values.iter().flat_map(|&v| bytes(v)).collect();
    let id = mem.alloc(raw.len());
    mem.write(id, 0, &raw).expect("fresh buffer");
    id
}

fn download(mem: &HostMemory, id: tlx_core::interp::BufferId, len: usize) -> Vec<[u8; 4]> {
    let mut raw = vec![0u8; len * 4];
    mem.read(id, 0, &mut raw).expect("read back");
    raw.chunks(4).map(|w| [w[0], w[1], w[2], w[3]]).collect()
}

/// Runs `src` over `tiles` programs on `n` elements; the sums are checked
/// here, the visits per tile returned.
fn run_add(src: &str, n: usize, opts: &InterpOptions) -> Result<Vec<i32>, Box<InterpError>> {
    let tiles = n.div_ceil(64);
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() + 1.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() - 0.25).collect();
    let mem = HostMemory::new();
    let ids = [
        upload(&mem, &x, f32::to_le_bytes),
        upload(&mem, &y, f32::to_le_bytes),
        upload(&mem, &vec![f32::NAN; n], f32::to_le_bytes),
        upload(&mem, &vec![0i32; tiles], i32::to_le_bytes),
    ];
    let mut args: Vec<ArgValue> = ids.iter().map(|&id| ArgValue::ptr(id)).collect();
    args.push(ArgValue::i32(n as i32));
    run_kernel(&kernel(src), [tiles as u32, 1, 1], &args, &mem, opts).map_err(Box::new)?;
    let z = download(&mem, ids[2], n);
    for i in 0..n {
        assert_eq!(f32::from_le_bytes(z[i]), x[i] + y[i], "element {i}");
    }
    Ok(download(&mem, ids[3], tiles)
        .into_iter()
        .map(i32::from_le_bytes)
        .collect())
}

fn options(threads: usize, schedule: Schedule) -> InterpOptions {
    InterpOptions::new(threads, true).with_schedule(schedule)
}

#[test]
fn every_tile_is_done_once_on_every_schedule_and_thread_count() {
    let n = 64 * 37 + 5;
    for src in [ADD, ADD_PAIRS] {
        for threads in [1, 2, 4] {
            for schedule in [
                Schedule::RoundRobin,
                Schedule::Random { seed: 7 },
                Schedule::Random { seed: 1234 },
            ] {
                let visits = run_add(src, n, &options(threads, schedule))
                    .unwrap_or_else(|e| panic!("{threads} threads, {schedule:?}: {e}"));
                assert!(
                    visits.iter().all(|&v| v == 1),
                    "{threads} threads, {schedule:?}: visits {visits:?}"
                );
            }
        }
    }
}

/// With one OS thread the first program (or cluster) cancels every other:
/// the launch is one persistent program doing all the work.
#[test]
fn one_thread_leaves_the_first_program_all_the_tiles() {
    let src = ADD.replace(
        "atomic_add(visits + tile, 1);",
        "atomic_add(visits + tile, 1 + program_id(0) * 1000);",
    );
    let visits = run_add(&src, 64 * 9, &options(1, Schedule::RoundRobin)).expect("runs");
    assert_eq!(visits, vec![1; 9]);
}

#[test]
fn a_consumer_waiting_on_the_wrong_phase_is_reported() {
    let src = ADD.replace("let mut p_consumer = 0;", "let mut p_consumer = 1;");
    let err = run_add(&src, 64 * 4, &InterpOptions::default()).expect_err("wrong phase");
    assert!(matches!(*err, InterpError::Deadlock { .. }), "{err}");
    let report = tlx_core::check::check_protocol(&kernel(&src));
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    assert!(
        finding.message.contains("`clc.answered[0]`"),
        "{finding:#?}"
    );
    assert!(
        finding.hint.contains("clc_consumer(clc, phase)"),
        "{finding:#?}"
    );
}

/// The raw primitives under `clc_producer`/`clc_consumer`: the answer read
/// before the wait on its barrier is a race the interpreter names.
#[test]
fn an_answer_read_before_its_barrier_is_reported() {
    let src = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn early(out: Ptr<i32>) {
    let answer = local_alloc([4], i32, 1);
    let bar = alloc_barriers(1, 1);
    barrier_expect_bytes(local_view(bar, 0), 16);
    clc_try_cancel(local_view(answer, 0), local_view(bar, 0), true, 0);
    let tile = clc_query(local_view(answer, 0), "x");
    barrier_wait(local_view(bar, 0), 0);
    store(out + program_id(0), tile);
}
"#;
    let mem = HostMemory::new();
    let out = upload(&mem, &[0i32; 4], i32::to_le_bytes);
    let opts = options(1, Schedule::Random { seed: 3 });
    let err = run_kernel(&kernel(src), [4, 1, 1], &[ArgValue::ptr(out)], &mem, &opts)
        .expect_err("reads before the answer landed");
    assert!(
        matches!(
            err,
            InterpError::SharedMemoryRace { .. } | InterpError::UnwrittenShared { .. }
        ),
        "{err}"
    );
}

#[test]
fn the_protocol_checker_passes_both_kernels() {
    for src in [ADD, ADD_PAIRS] {
        let report = tlx_core::check::check_protocol(&kernel(src));
        assert!(report.errors.is_empty(), "{report:#?}");
    }
}

#[test]
fn the_kernels_become_their_ptx_and_assemble_for_blackwell() {
    let ptxas = codegen_common::ptxas();
    for (src, multicast) in [(ADD, false), (ADD_PAIRS, true)] {
        let k = kernel(src);
        let c = compile(&k, Arch::Sm100a).expect("compiles for sm_100a");
        let issue =
            "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes";
        for needle in [
            issue,
            "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128",
            "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128",
            "ld.shared.b128",
        ] {
            assert!(c.ptx.contains(needle), "no `{needle}` in\n{}", c.ptx);
        }
        assert_eq!(c.ptx.contains(".multicast::cluster::all"), multicast);
        if let Some(p) = &ptxas {
            codegen_common::assemble(p, Arch::Sm100a, &k.name, &c.ptx);
        }
    }
}

#[test]
fn hopper_refuses_cluster_launch_control_at_the_call() {
    let k = kernel(ADD);
    match compile(&k, Arch::Sm90a) {
        Err(CodegenError::Misuse { message, hint, at }) => {
            assert!(
                message.contains("cluster launch control needs Blackwell"),
                "{message}"
            );
            assert!(hint.contains("num_programs(0)"), "{hint}");
            assert!(at.is_some());
        }
        other => panic!("expected a misuse, got {:?}", other.map(|c| c.ptx.len())),
    }
}

/// A request after an answer said no work was left is undefined in PTX:
/// the interpreter names both lines, the checker the rule.
#[test]
fn a_request_after_no_work_is_reported() {
    let src = ADD.replace(
        "        p_consumer ^= 1;\n    }\n}",
        "        p_consumer ^= 1;\n    }\n    clc_producer(clc, p_producer);\n}",
    );
    assert_ne!(src, ADD);
    let err = run_add(&src, 64 * 3, &InterpOptions::default()).expect_err("asks again");
    assert!(
        matches!(
            &*err,
            InterpError::ClcAfterFailure {
                failed_line: 15,
                ..
            }
        ),
        "{err}"
    );
    let report = tlx_core::check::check_protocol(&kernel(&src));
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    assert_eq!(
        finding.rule,
        tlx_core::check::Rule::ClcAfterFailure,
        "{finding:#?}"
    );
}
