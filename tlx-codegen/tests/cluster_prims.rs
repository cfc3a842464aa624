//! The cluster's TLX primitives end to end on the CPU interpreter: a
//! two-program cluster that exchanges rows through distributed shared
//! memory (`remote_shmem_store` and `async_remote_shmem_store`), signals
//! the peer with a remote `barrier_arrive`, and shares a tile loaded half by
//! each program with multicast TMA; checked against the host's arithmetic.
//! Broken variants are reported: a missing `fence_mbarrier_init_cluster`
//! or `cluster_barrier`, a rank outside the cluster, a read that did not
//! wait; and the misuses the types show (a wait on or a load of a remote
//! view) fail to compile. The same kernel goes through code generation and
//! `ptxas`.

use crate::codegen_common;
use crate::kernels::{download_f32, upload_f32};

use tlx_core::interp::{
    run_kernel, ArgValue, HostMemory, InterpError, InterpOptions, RemoteError, Schedule,
};
use tlx_core::ir::{Kernel, ScalarType};
use tlx_frontend::compile_str;

/// Programs `2c` and `2c + 1` form cluster `c`. Each sends its row of `x`,
/// doubled, to the other's `inbox[0]` and arrives on the other's barrier 0;
/// sends it plus one to `inbox[1]` asynchronously, completing on the other's
/// barrier 1; and loads its half of the cluster's 16-row tile with TMA,
/// multicast to both. Then each writes what it received.
const EXCHANGE: &str = r#"
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn exchange(x: Ptr<f32>, desc: TensorDesc<f32, 8, 32>, sent: Ptr<f32>, tiles: Ptr<f32>) {
    let inbox = local_alloc([64], f32, 2);
    let tile = local_alloc([16, 32], f32, 1);
    // 0: the peer's synchronous store is in; 1: its asynchronous one; 2: the tile.
    let bars = alloc_barriers(3, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let peer = rank ^ 1;
    barrier_expect_bytes(local_view(bars, 1), 64 * 4);
    barrier_expect_bytes(local_view(bars, 2), 16 * 32 * 4);
    let row = load(x + program_id(0) * 64 + arange(0, 64));
    remote_shmem_store(local_view(inbox, 0), row * 2.0, peer);
    barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = peer);
    async_remote_shmem_store(local_view(inbox, 1), row + 1.0, peer, local_view(bars, 1));
    let half = local_slice(local_view(tile, 0), [rank * 8, 0], [8, 32]);
    let first_row = program_id(0) / 2 * 16 + rank * 8;
    async_descriptor_load(desc, half, [first_row, 0], local_view(bars, 2), multicast_targets = [rank, peer]);
    barrier_wait(local_view(bars, 0), 0);
    barrier_wait(local_view(bars, 1), 0);
    barrier_wait(local_view(bars, 2), 0);
    let offs = program_id(0) * 128 + arange(0, 64);
    store(sent + offs, local_load(local_view(inbox, 0)));
    store(sent + offs + 64, local_load(local_view(inbox, 1)));
    let r = arange(0, 16);
    let c = arange(0, 32);
    store(tiles + program_id(0) * 512 + r[(.., None)] * 32 + c[(None, ..)], local_load(local_view(tile, 0)));
    // No program leaves while a peer may still write into it.
    cluster_barrier();
}
"#;

const PROGRAMS: usize = 4;

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn compile_error(src: &str) -> String {
    match compile_str(src) {
        Ok(_) => panic!("compiled, but should not have"),
        Err(e) => e.to_string(),
    }
}

fn broken(from: &str, to: &str) -> String {
    assert!(EXCHANGE.contains(from), "{from}");
    EXCHANGE.replacen(from, to, 1)
}

/// What the programs received: (rows sent to each, tiles), and the inputs.
#[derive(Debug)]
struct Exchanged {
    x: Vec<f32>,
    matrix: Vec<f32>,
    sent: Vec<f32>,
    tiles: Vec<f32>,
}

fn run_exchange(src: &str, opts: &InterpOptions) -> Result<Exchanged, Box<InterpError>> {
    let kernel = compile(src);
    let mem = HostMemory::new();
    let x: Vec<f32> = (0..PROGRAMS * 64).map(|i| i as f32 * 0.5 - 7.0).collect();
    let rows = PROGRAMS / 2 * 16;
    let matrix: Vec<f32> = (0..rows * 32).map(|i| (i % 97) as f32 - 40.0).collect();
    let x_id = upload_f32(&mem, &x);
    let m_id = upload_f32(&mem, &matrix);
    let sent_id = upload_f32(&mem, &vec![f32::NAN; PROGRAMS * 128]);
    let tiles_id = upload_f32(&mem, &vec![f32::NAN; PROGRAMS * 512]);
    let args = [
        ArgValue::ptr(x_id),
        ArgValue::TensorDesc {
            buffer: m_id,
            offset_elems: 0,
            elem: ScalarType::F32,
            rank: 2,
            shape: [rows as i64, 32, 0, 0, 0],
            strides: [32, 1, 0, 0, 0],
        },
        ArgValue::ptr(sent_id),
        ArgValue::ptr(tiles_id),
    ];
    run_kernel(&kernel, [PROGRAMS as u32, 1, 1], &args, &mem, opts).map_err(Box::new)?;
    Ok(Exchanged {
        x,
        matrix,
        sent: download_f32(&mem, sent_id, PROGRAMS * 128),
        tiles: download_f32(&mem, tiles_id, PROGRAMS * 512),
    })
}

fn check(got: &Exchanged, label: &str) {
    for pid in 0..PROGRAMS {
        let peer = pid ^ 1;
        for i in 0..64 {
            let from_peer = got.x[peer * 64 + i];
            assert_eq!(
                got.sent[pid * 128 + i],
                from_peer * 2.0,
                "{label}: program {pid} inbox 0 [{i}]"
            );
            assert_eq!(
                got.sent[pid * 128 + 64 + i],
                from_peer + 1.0,
                "{label}: program {pid} inbox 1 [{i}]"
            );
        }
        let cluster_rows = &got.matrix[pid / 2 * 512..pid / 2 * 512 + 512];
        assert_eq!(
            &got.tiles[pid * 512..pid * 512 + 512],
            cluster_rows,
            "{label}: program {pid}'s tile"
        );
    }
}

#[test]
fn a_cluster_exchanges_rows_and_shares_a_multicast_tile() {
    let got = run_exchange(EXCHANGE, &InterpOptions::default()).expect("runs");
    check(&got, "round robin");
    // Remote writes and multicast copies land at random points too.
    for seed in 0..16 {
        let opts = InterpOptions {
            schedule: Schedule::Random { seed },
            ..InterpOptions::default()
        };
        let got = run_exchange(EXCHANGE, &opts).expect("runs");
        check(&got, &format!("seed {seed}"));
    }
}

#[test]
fn remote_stores_take_remote_views_as_well_as_ranks() {
    let mut src = broken(
        "remote_shmem_store(local_view(inbox, 0), row * 2.0, peer);",
        "remote_shmem_store(remote_view(local_view(inbox, 0), peer), row * 2.0);",
    );
    let old =
        "async_remote_shmem_store(local_view(inbox, 1), row + 1.0, peer, local_view(bars, 1));";
    assert!(src.contains(old));
    src = src.replace(
        old,
        "async_remote_shmem_store(remote_view(local_view(inbox, 1), peer), row + 1.0, barrier = remote_view(local_view(bars, 1), peer));",
    );
    let got = run_exchange(&src, &InterpOptions::default()).expect("runs");
    check(&got, "remote views");
    let own = broken(
        "remote_shmem_store(local_view(inbox, 0), row * 2.0, peer);",
        "remote_shmem_store(local_view(inbox, 0), row * 2.0);",
    );
    let text = compile_error(&own);
    assert!(text.contains("without `remote_cta_rank`"), "{text}");
}

/// The line of `needle` in the kernel source (1-based, as reports count).
fn line_of(src: &str, needle: &str) -> u32 {
    src.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .expect("the needle is in the source")
}

#[test]
fn a_remote_arrival_before_the_peer_fenced_its_barriers_is_reported() {
    let src = broken("fence_mbarrier_init_cluster();", "");
    let err = run_exchange(&src, &InterpOptions::default()).expect_err("not published");
    let text = err.to_string();
    assert!(
        matches!(&*err, InterpError::Remote { error, .. } if matches!(**error, RemoteError::BarrierNotPublished { .. })),
        "{text}"
    );
    let line = line_of(
        &src,
        "barrier_arrive(local_view(bars, 0), 1, remote_cta_rank",
    );
    assert!(text.contains("op `barrier_arrive` at"), "{text}");
    assert!(text.contains(&format!("line {line},")), "{text}");
    // Round robin: program 1 gets there first, and finds program 0's barrier unfenced.
    assert!(
        text.contains("task `default of program (1, 0, 0)`"),
        "{text}"
    );
    assert!(text.contains("mbarrier #0 of CTA rank 0"), "{text}");
    assert!(text.contains("fence_mbarrier_init_cluster()"), "{text}");
}

#[test]
fn a_remote_store_before_the_first_cluster_barrier_is_reported() {
    let src = broken("    cluster_barrier();\n    let rank", "    let rank");
    let err = run_exchange(&src, &InterpOptions::default()).expect_err("peer not known started");
    let text = err.to_string();
    assert!(
        matches!(&*err, InterpError::Remote { error, .. } if matches!(**error, RemoteError::BufferNotPublished { .. } | RemoteError::NotMade { .. })),
        "{text}"
    );
    assert!(text.contains("op `remote_shmem_store`"), "{text}");
}

#[test]
fn a_rank_outside_the_cluster_is_reported() {
    let src = broken("let peer = rank ^ 1;", "let peer = rank + 1;");
    let err = run_exchange(&src, &InterpOptions::default()).expect_err("rank 2 of 2");
    let text = err.to_string();
    assert!(
        matches!(&*err, InterpError::Remote { error, .. } if matches!(**error, RemoteError::BadRank { rank: 2, size: 2 })),
        "{text}"
    );
    assert!(text.contains("program (1, 0, 0)"), "{text}");
}

#[test]
fn reading_a_multicast_tile_without_waiting_is_reported() {
    let src = broken("barrier_wait(local_view(bars, 2), 0);", "");
    let err = run_exchange(&src, &InterpOptions::default()).expect_err("races");
    assert!(
        matches!(
            &*err,
            InterpError::SharedMemoryRace { .. } | InterpError::UnwrittenShared { .. }
        ),
        "{err}"
    );
}

#[test]
fn a_wait_on_a_remote_barrier_does_not_compile() {
    let src = broken(
        "barrier_wait(local_view(bars, 0), 0);",
        "barrier_wait(remote_view(local_view(bars, 0), peer), 0);",
    );
    let text = compile_error(&src);
    assert!(text.contains("`barrier_wait` of a remote view"), "{text}");
    assert!(text.contains("arrive remote, wait local"), "{text}");
}

#[test]
fn a_load_of_a_remote_buffer_does_not_compile() {
    let src = broken(
        "local_load(local_view(inbox, 0))",
        "local_load(remote_view(local_view(inbox, 0), peer))",
    );
    let text = compile_error(&src);
    assert!(text.contains("`local_load` of a remote view"), "{text}");
    assert!(text.contains("remote_shmem_store"), "{text}");
}

#[test]
fn a_constant_rank_outside_the_cluster_does_not_compile() {
    let src = broken("remote_cta_rank = peer)", "remote_cta_rank = 2)");
    let text = compile_error(&src);
    assert!(
        text.contains("CTA rank 2 is not in this cluster of 2"),
        "{text}"
    );
}

#[test]
fn the_ir_names_a_remote_view_in_its_type() {
    let text = tlx_core::ir::print(&compile(EXCHANGE));
    assert!(text.contains("remote_view"), "{text}");
    assert!(text.contains(": barriers<1, remote>"), "{text}");
    assert!(text.contains("swizzle none, mutable, remote>"), "{text}");
    assert!(text.contains("async_descriptor_load_multicast"), "{text}");
    let round_trip = tlx_core::ir::parse(&text).expect("parses");
    assert_eq!(tlx_core::ir::print(&round_trip), text);
}

/// A ring of two stages that both programs of a cluster fill together: each
/// loads half of a 16-row tile and multicasts it to both; each consumer sums
/// the tiles, program 1's a little later than program 0's. A producer may
/// refill a stage only when it is free in both programs (`pair_free`: one
/// local and one remote arrival).
const RING_SUM: &str = r#"
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn ring_sum(desc: TensorDesc<f32, 8, 32>, out: Ptr<f32>, steps: i32) {
    let bufs = local_alloc([16, 32], f32, 2);
    let full = alloc_barriers(2, 1);
    let empty = alloc_barriers(2, 1);
    let pair_free = alloc_barriers(2, 2);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let peer = rank ^ 1;
    async_tasks! {
        task(default) {
            let mut acc = zeros([16, 32], f32);
            for i in 0..steps {
                let slot = i % 2;
                barrier_wait(local_view(full, slot), (i / 2) % 2);
                // Program 1's consumer lags (as on a busier SM): more steps here.
                for _ in 0..rank * 8 {
                    acc = acc + 0.0;
                }
                acc = acc + local_load(local_view(bufs, slot));
                barrier_arrive(local_view(empty, slot));
            }
            let r = arange(0, 16);
            let c = arange(0, 32);
            store(out + program_id(0) * 512 + r[(.., None)] * 32 + c[(None, ..)], acc);
        }
        task(num_warps = 1) {
            for i in 0..steps {
                let slot = i % 2;
                let phase = (i / 2) % 2;
                barrier_wait(local_view(empty, slot), phase ^ 1);
                let bar = local_view(full, slot);
                barrier_expect_bytes(bar, 16 * 32 * 4);
                let free = local_view(pair_free, slot);
                barrier_arrive(free);
                barrier_arrive(free, 1, remote_cta_rank = peer);
                barrier_wait(free, phase);
                let half = local_slice(local_view(bufs, slot), [rank * 8, 0], [8, 32]);
                async_descriptor_load(desc, half, [i * 16 + rank * 8, 0], bar, multicast_targets = [rank, peer]);
            }
        }
    }
    cluster_barrier();
}
"#;

const STEPS: usize = 6;

fn run_ring_sum(src: &str, opts: &InterpOptions) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let kernel = compile(src);
    let mem = HostMemory::new();
    let rows = STEPS * 16;
    let matrix: Vec<f32> = (0..rows * 32).map(|i| (i % 13) as f32 - 6.0).collect();
    let m_id = upload_f32(&mem, &matrix);
    let out_id = upload_f32(&mem, &vec![f32::NAN; 2 * 512]);
    let args = [
        ArgValue::TensorDesc {
            buffer: m_id,
            offset_elems: 0,
            elem: ScalarType::F32,
            rank: 2,
            shape: [rows as i64, 32, 0, 0, 0],
            strides: [32, 1, 0, 0, 0],
        },
        ArgValue::ptr(out_id),
        ArgValue::i32(STEPS as i32),
    ];
    run_kernel(&kernel, [2, 1, 1], &args, &mem, opts).map_err(Box::new)?;
    let mut want = vec![0f32; 512];
    for step in 0..STEPS {
        for (w, v) in want.iter_mut().zip(&matrix[step * 512..step * 512 + 512]) {
            *w += v;
        }
    }
    Ok((download_f32(&mem, out_id, 2 * 512), want))
}

fn random(seed: u64) -> InterpOptions {
    InterpOptions {
        schedule: Schedule::Random { seed },
        ..InterpOptions::default()
    }
}

#[test]
fn a_ring_filled_by_multicast_sums_every_tile_in_both_programs() {
    for opts in [InterpOptions::default(), random(1), random(2), random(3)] {
        let (got, want) = run_ring_sum(RING_SUM, &opts).expect("runs");
        assert_eq!(&got[..512], &want[..], "{:?}: program 0", opts.schedule);
        assert_eq!(&got[512..], &want[..], "{:?}: program 1", opts.schedule);
    }
}

#[test]
fn a_multicast_into_a_stage_the_peer_still_reads_is_a_race() {
    // Without the pair's handshake a producer refills the peer's stage as
    // soon as its own consumer released it.
    let mut src = RING_SUM.to_string();
    for line in [
        "barrier_arrive(free);",
        "barrier_arrive(free, 1, remote_cta_rank = peer);",
        "barrier_wait(free, phase);",
    ] {
        assert!(src.contains(line), "{line}");
        src = src.replacen(line, "", 1);
    }
    let race = (0..64)
        .filter_map(|seed| run_ring_sum(&src, &random(seed)).err())
        .find(|e| matches!(**e, InterpError::SharedMemoryRace { .. }))
        .expect("some schedule refills a stage the peer has not read yet");
    let text = race.to_string();
    assert!(text.contains("before waiting on its barrier"), "{text}");
    assert!(text.contains("op `local_load`"), "{text}");
}

/// Each program of a cluster has its own hardware named barriers: a task
/// hands a buffer to another through barrier 9 in both programs at once.
const HANDOFF: &str = r#"
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn handoff(out: Ptr<f32>) {
    let bufs = local_alloc([64], f32, 1);
    async_tasks! {
        task(default) {
            local_store(local_view(bufs, 0), program_id(0) * 64 + arange(0, 64));
            named_barrier_arrive(9, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 256);
            store(out + program_id(0) * 64 + arange(0, 64), local_load(local_view(bufs, 0)));
        }
    }
}
"#;

#[test]
fn named_barriers_are_per_program_in_a_cluster() {
    let kernel = compile(HANDOFF);
    for opts in [
        InterpOptions::default(),
        random(1),
        random(2),
        random(3),
        random(4),
    ] {
        let mem = HostMemory::new();
        let out = upload_f32(&mem, &[f32::NAN; 4 * 64]);
        run_kernel(&kernel, [4, 1, 1], &[ArgValue::ptr(out)], &mem, &opts)
            .unwrap_or_else(|e| panic!("{:?}: {e}", opts.schedule));
        let want: Vec<f32> = (0..4 * 64).map(|i| i as f32).collect();
        assert_eq!(download_f32(&mem, out, 4 * 64), want, "{:?}", opts.schedule);
    }
}

/// Program 0 stores into program 1 and arrives on its barrier; program 1
/// waits for that, or (broken) does not and may leave first.
const SEND_ONE_WAY: &str = r#"
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn send_one_way(out: Ptr<f32>) {
    let inbox = local_alloc([64], f32, 1);
    let bars = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    if rank == 0 {
        remote_shmem_store(local_view(inbox, 0), arange(0, 64), 1);
        barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = 1);
    } else {
        barrier_wait(local_view(bars, 0), 0);
        store(out + arange(0, 64), local_load(local_view(inbox, 0)));
    }
}
"#;

fn run_send_one_way(src: &str, opts: &InterpOptions) -> Result<Vec<f32>, Box<InterpError>> {
    let kernel = compile(src);
    let mem = HostMemory::new();
    let out = upload_f32(&mem, &[f32::NAN; 64]);
    run_kernel(&kernel, [2, 1, 1], &[ArgValue::ptr(out)], &mem, opts).map_err(Box::new)?;
    Ok(download_f32(&mem, out, 64))
}

#[test]
fn a_remote_store_into_a_program_that_has_exited_is_reported() {
    let want: Vec<f32> = (0..64).map(|i| i as f32).collect();
    for seed in 0..8 {
        let got = run_send_one_way(SEND_ONE_WAY, &random(seed)).expect("runs");
        assert_eq!(got, want, "seed {seed}");
    }
    let src = SEND_ONE_WAY.replace(
        "        barrier_wait(local_view(bars, 0), 0);\n        store(out + arange(0, 64), local_load(local_view(inbox, 0)));\n",
        "        store(out + arange(0, 64), 1.0);\n",
    );
    assert_ne!(src, SEND_ONE_WAY);
    let err = run_send_one_way(&src, &InterpOptions::default()).expect_err("program 1 left");
    let text = err.to_string();
    assert!(
        matches!(&*err, InterpError::Remote { error, .. } if matches!(**error, RemoteError::PeerExited { rank: 1, .. })),
        "{text}"
    );
    assert!(text.contains("program (0, 0, 0)"), "{text}");
    assert!(text.contains("has already exited"), "{text}");
}

#[test]
fn the_protocol_checker_passes_the_cluster_kernels_and_rejects_a_missing_fence() {
    use tlx_core::check::{check_protocol, ProtocolReport, Rule};
    for src in [EXCHANGE, RING_SUM, SEND_ONE_WAY, HANDOFF] {
        assert_eq!(check_protocol(&compile(src)), ProtocolReport::default());
    }
    let src = broken("fence_mbarrier_init_cluster();", "");
    let report = check_protocol(&compile(&src));
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    assert_eq!(finding.rule, Rule::ClusterAccess, "{finding:#?}");
    let line = line_of(
        &src,
        "barrier_arrive(local_view(bars, 0), 1, remote_cta_rank",
    );
    assert_eq!(finding.at.line, line, "{finding:#?}");
    assert!(
        finding.hint.contains("fence_mbarrier_init_cluster()"),
        "{finding:#?}"
    );
}

/// The kernel in PTX: one instruction of each primitive, and `ptxas`
/// accepts it.
#[test]
fn the_cluster_primitives_become_their_ptx_and_assemble() {
    let kernel = compile(EXCHANGE);
    for compiled in codegen_common::compile_all(&kernel) {
        for needle in [
            "mapa.shared::cluster.u32",
            "fence.mbarrier_init.release.cluster;",
            "mbarrier.arrive.release.cluster.shared::cluster.b64",
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
            "st.shared::cluster.",
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
            "barrier.cluster.arrive",
        ] {
            assert!(
                compiled.ptx.contains(needle),
                "no `{needle}` in\n{}",
                compiled.ptx
            );
        }
    }
}

/// The other threads' stores into the peer reach it with the first
/// thread's releasing arrival only through a barrier of the program between
/// them (the remote store's own trailing one).
#[test]
fn a_releasing_remote_arrival_follows_a_barrier_after_the_remote_stores() {
    let kernel = compile(EXCHANGE);
    for compiled in codegen_common::compile_all(&kernel) {
        let ptx = &compiled.ptx;
        let store = ptx.rfind("st.shared::cluster.").expect("a remote store");
        let arrive = ptx
            .find("mbarrier.arrive.release.cluster.shared::cluster.b64")
            .expect("a releasing arrival");
        assert!(store < arrive, "{ptx}");
        assert!(ptx[store..arrive].contains("barrier.sync 0;"), "{ptx}");
    }
}

/// A remote arrival that only says "done reading" (no generic store into
/// the peer before it, as in a multicast ring) is the plain
/// `shared::cluster` arrive, CUTLASS's and TLX's, and its waits acquire at
/// CTA scope: the cluster-scope release the exchange above needs costs a
/// GPU-wide `MEMBAR` on every arrival.
#[test]
fn a_remote_arrival_without_remote_stores_releases_at_cta_scope() {
    let kernel = compile(RING_SUM);
    for compiled in codegen_common::compile_all(&kernel) {
        assert!(
            compiled.ptx.contains("mbarrier.arrive.shared::cluster.b64"),
            "{}",
            compiled.ptx
        );
        for cluster_scope in [
            "mbarrier.arrive.release.cluster",
            "mbarrier.try_wait.parity.acquire.cluster",
        ] {
            assert!(!compiled.ptx.contains(cluster_scope), "{}", compiled.ptx);
        }
    }
}

/// Each program of a pair stores its row into its peer's buffer and reads
/// what its peer stored, ordered by `cluster_barrier()` alone (it releases
/// and acquires at cluster scope, as `barrier.cluster` does).
const SWAP: &str = r#"
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn swap(x: Ptr<f32>, out: Ptr<f32>) {
    let inbox = local_alloc([64], f32, 1);
    cluster_barrier();
    let row = load(x + program_id(0) * 64 + arange(0, 64));
    remote_shmem_store(local_view(inbox, 0), row, cluster_cta_rank() ^ 1);
    cluster_barrier();
    store(out + program_id(0) * 64 + arange(0, 64), local_load(local_view(inbox, 0)));
}
"#;

fn run_swap(src: &str, opts: &InterpOptions) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let kernel = compile(src);
    let mem = HostMemory::new();
    let x: Vec<f32> = (0..PROGRAMS * 64).map(|i| i as f32 - 50.0).collect();
    let x_id = upload_f32(&mem, &x);
    let out_id = upload_f32(&mem, &vec![f32::NAN; PROGRAMS * 64]);
    let args = [ArgValue::ptr(x_id), ArgValue::ptr(out_id)];
    run_kernel(&kernel, [PROGRAMS as u32, 1, 1], &args, &mem, opts).map_err(Box::new)?;
    Ok((x, download_f32(&mem, out_id, PROGRAMS * 64)))
}

#[test]
fn a_cluster_barrier_orders_remote_stores_before_the_peers_reads() {
    for seed in 0..8 {
        let opts = InterpOptions {
            schedule: Schedule::Random { seed },
            ..InterpOptions::default()
        };
        let (x, out) = run_swap(SWAP, &opts).expect("ordered by the cluster barrier");
        for pid in 0..PROGRAMS {
            let peer = pid ^ 1;
            assert_eq!(out[pid * 64..pid * 64 + 64], x[peer * 64..peer * 64 + 64]);
        }
    }
    // Without the second barrier nothing orders the peer's store before the read.
    let unordered = SWAP.replacen("    cluster_barrier();\n    store(", "    store(", 1);
    assert_ne!(unordered, SWAP);
    let err = run_swap(&unordered, &InterpOptions::default()).expect_err("unordered");
    assert!(
        matches!(
            &*err,
            InterpError::UnorderedStoreRead { .. } | InterpError::UnwrittenShared { .. }
        ),
        "{err}"
    );
}
