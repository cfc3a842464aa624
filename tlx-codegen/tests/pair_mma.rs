//! Blackwell's 2-CTA MMAs (`two_ctas = true`) without a Blackwell GPU: a
//! GEMM whose programs work in pairs of a cluster, each loading its 128 rows
//! of A and its half of B, the even program issuing one `cta_group::2` MMA
//! for both, matches the reference on the interpreter under several
//! schedules and passes the checker; the misuses are errors (an MMA issued
//! before the odd program's operands are in, a pair in clusters of one, a
//! kernel mixing pairs and single programs); and the PTX allocates, issues
//! and commits with `cta_group::2` and is accepted by `ptxas`.

use tlx_core::check::check_protocol;
use tlx_core::interp::{HostMemory, InterpError, InterpOptions, Schedule};
use tlx_core::ir::Arch;
use tlx_frontend::compile_str;

use crate::codegen_common;
use crate::kernels::{compile, run_gemm_on};

/// Each pair computes a `[256, 128]` tile of `C`: program `r` of the pair
/// loads rows `128 r..` of the tile's A and columns `64 r..` of its B; per
/// K step both arrive on the even program's `ready` once their copies
/// landed, the even one issues the MMA, and its completion arrives on
/// `done` of both.
const PAIR_GEMM: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4, ctas_per_cga = 2)]
fn pair_gemm(
    a_desc: TensorDesc<bf16, 128, 64>,
    b_desc: TensorDesc<bf16, 64, 64>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_buf = local_alloc([128, 64], bf16, 1);
    let b_buf = local_alloc([64, 64], bf16, 1);
    let acc = local_alloc([128, 128], f32, 1, storage = "tmem");
    let full = alloc_barriers(1, 1);
    let ready = alloc_barriers(1, 2);
    let done = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let off_m = program_id(0) / 2 * 256 + rank * 128;
    let off_n = program_id(1) * 128;
    for kk in 0..cdiv(k, 64) {
        let phase = kk % 2;
        barrier_expect_bytes(local_view(full, 0), (128 * 64 + 64 * 64) * 2);
        async_descriptor_load(a_desc, local_view(a_buf, 0), [off_m, kk * 64], local_view(full, 0));
        async_descriptor_load(b_desc, local_view(b_buf, 0), [kk * 64, off_n + rank * 64], local_view(full, 0));
        barrier_wait(local_view(full, 0), phase);
        barrier_arrive(local_view(ready, 0), 1, remote_cta_rank = 0);
        barrier_wait(local_view(ready, 0), phase, pred = rank == 0);
        async_dot(
            local_view(a_buf, 0),
            local_view(b_buf, 0),
            local_view(acc, 0),
            use_acc = kk > 0,
            mbarriers = [local_view(done, 0)],
            two_ctas = true,
        );
        barrier_wait(local_view(done, 0), phase);
    }
    let rows = off_m + arange(0, 128);
    let cols = off_n + arange(0, 128);
    let mask = (rows < m)[(.., None)] & (cols < n)[(None, ..)];
    store(c + rows[(.., None)] * n + cols[(None, ..)], local_load(local_view(acc, 0)), mask = mask);
    // The even program may still write this one's accumulator until both are here.
    cluster_barrier();
}
"#;

fn run(
    src: &str,
    (m, n, k): (usize, usize, usize),
    opts: &InterpOptions,
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let grid = [2 * m.div_ceil(256) as u32, n.div_ceil(128) as u32, 1];
    run_gemm_on(
        &HostMemory::new(),
        &compile(src),
        (m, n, k),
        grid,
        opts,
        Vec::new(),
    )
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-3 * w.abs().max(1.0),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn a_pair_multiplies_its_tile_on_every_schedule() {
    for (i, opts) in [
        InterpOptions::default(),
        InterpOptions::new(1, true).with_schedule(Schedule::Random { seed: 5 }),
        InterpOptions::new(2, true).with_schedule(Schedule::Random { seed: 77 }),
    ]
    .iter()
    .enumerate()
    {
        let (got, want) =
            run(PAIR_GEMM, (512, 256, 192), opts).unwrap_or_else(|e| panic!("run {i}: {e}"));
        assert_close(&got, &want, &format!("run {i}"));
    }
}

#[test]
fn the_checker_passes_the_pair_gemm() {
    let report = check_protocol(&compile(PAIR_GEMM));
    assert!(report.errors.is_empty(), "{report:#?}");
}

/// The even program issues before the odd one's copies are in: it reads
/// the odd program's buffers unordered after their landing.
#[test]
fn an_mma_before_the_peers_operands_is_reported() {
    let src = PAIR_GEMM.replace(
        "barrier_wait(local_view(ready, 0), phase, pred = rank == 0);",
        "",
    );
    let err = run(
        &src,
        (256, 128, 64),
        &InterpOptions::new(1, true).with_schedule(Schedule::Random { seed: 3 }),
    )
    .expect_err("races with the odd program's copies");
    assert!(
        matches!(
            *err,
            InterpError::SharedMemoryRace { .. }
                | InterpError::UnwrittenShared { .. }
                | InterpError::Deadlock { .. }
        ),
        "{err}"
    );
}

#[test]
fn a_pair_needs_clusters_of_pairs_and_one_mode_per_kernel() {
    let alone = PAIR_GEMM.replace(", ctas_per_cga = 2", "");
    let err = compile_str(&alone).expect_err("no pairs").to_string();
    assert!(
        err.contains("`two_ctas = true` in a cluster of [1, 1, 1]"),
        "{err}"
    );
    let mixed = PAIR_GEMM.replace(
        "    let rows = off_m",
        "    tcgen05_commit(local_view(done, 0));\n    let rows = off_m",
    );
    let err = compile_str(&mixed).expect_err("mixed").to_string();
    assert!(
        err.contains("`two_ctas = false` here, `two_ctas = true` at line"),
        "{err}"
    );
}

#[test]
fn the_pair_gemm_becomes_cta_group_2_ptx_and_assembles() {
    let kernel = compile(PAIR_GEMM);
    let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles for sm_100a");
    for needle in [
        "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
        "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned",
        "tcgen05.mma.cta_group::2.kind::f16",
        "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",
        "tcgen05.dealloc.cta_group::2.sync.aligned.b32",
        "%cluster_ctarank",
    ] {
        assert!(c.ptx.contains(needle), "no `{needle}` in\n{}", c.ptx);
    }
    assert!(
        !c.ptx.contains("cta_group::1"),
        "a pair kernel mixes groups"
    );
    if let Some(p) = codegen_common::ptxas() {
        codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
    }
}
