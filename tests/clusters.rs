//! Clusters and alignment promises on the CPU interpreter, through the real
//! macro: the programs of a cluster run together, so one can wait at
//! `cluster_barrier()` for the others' partial sums; grids that are not whole
//! clusters and broken `multiple_of` promises are reported, not run.

use tlx::prelude::*;

#[path = "common/cluster_center.rs"]
mod cluster_center;

/// Each row of `n = 4 * 64` floats is split over a cluster of four programs;
/// each publishes its slice's sum, and after the barrier every program
/// divides its slice by the row's total.
#[tlx::kernel(num_warps = 2, ctas_per_cga = 4)]
fn normalize_rows(x: Ptr<f32>, partial: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let x = multiple_of(x, 16);
    let n = multiple_of(n, 4);
    let row = program_id(0) / cluster_num_ctas();
    let cols = cluster_cta_rank() * 64 + arange(0, 64);
    let v = load(x + row * n + cols);
    store(partial + program_id(0), sum(v, axis = 0));
    cluster_barrier();
    let total = sum(load(partial + row * 4 + arange(0, 4)), axis = 0);
    store(out + row * n + cols, v / total);
}

fn random_inputs(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            0.5 + (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

#[test]
fn a_cluster_shares_partial_sums_across_its_barrier() {
    let dev = Device::cpu();
    let (rows, n) = (6usize, 256usize);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    let host = random_inputs(rows * n, seed);
    let x = dev.upload(&host).unwrap();
    let partial = dev.upload(&vec![f32::NAN; rows * 4]).unwrap();
    let out = dev.upload(&vec![f32::NAN; rows * n]).unwrap();
    normalize_rows::launch(&dev, (rows * 4) as u32, &x, &partial, &out, n as i32).unwrap();
    let got = out.download().unwrap();
    for (r, row) in host.chunks(n).enumerate() {
        let total: f64 = row.iter().map(|&v| f64::from(v)).sum();
        for (c, &v) in row.iter().enumerate() {
            let want = f64::from(v) / total;
            let g = f64::from(got[r * n + c]);
            assert!(
                (g - want).abs() <= 1e-5 * want.abs(),
                "row {r} column {c}: {g} vs {want} (seed {seed})"
            );
        }
    }
}

#[test]
fn a_sixteen_program_cluster_centres_its_rows() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(11, |d| d.as_nanos() as u64);
    let x: Vec<bf16> = random_inputs(3 * cluster_center::ROW, seed)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let got = cluster_center::centre_rows(&Device::cpu(), &x).unwrap();
    cluster_center::check_centred(&x, &got, &format!("interpreter (seed {seed})"));
}

#[test]
fn a_grid_of_partial_clusters_is_refused() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 6 * 256]).unwrap();
    let partial = dev.upload(&[0.0f32; 24]).unwrap();
    let out = dev.upload(&vec![0.0f32; 6 * 256]).unwrap();
    let err = normalize_rows::launch(&dev, 6u32, &x, &partial, &out, 256)
        .expect_err("6 programs are not whole clusters of 4");
    let text = err.to_string();
    assert!(text.contains("clusters of [4, 1, 1]"), "{text}");
    assert!(text.contains("not a multiple of 4"), "{text}");
}

#[test]
fn a_broken_alignment_promise_is_reported() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 6 * 256]).unwrap();
    let partial = dev.upload(&[0.0f32; 24]).unwrap();
    let out = dev.upload(&vec![0.0f32; 6 * 256]).unwrap();
    // n = 254 breaks `multiple_of(n, 4)` (the kernel would misalign rows).
    let err = normalize_rows::launch(&dev, 4u32, &x, &partial, &out, 254)
        .expect_err("254 is not a multiple of 4");
    let text = err.to_string();
    assert!(
        text.contains("`multiple_of` promised a multiple of 4"),
        "{text}"
    );
    assert!(text.contains("254"), "{text}");
    assert!(text.contains("normalize_rows"), "{text}");
}

/// The two programs of a cluster swap tiles: each stores its tile into the
/// peer's inbox (`remote_shmem_store`, the generic proxy), arrives on the
/// peer's barrier, waits for the peer's tile, fences for the async proxy
/// and sends the tile out with a TMA store. Without the fence the checker
/// refuses it (`proxy-fence`, ui-tests).
#[tlx::kernel(arch = "sm_90a", num_warps = 4, ctas_per_cga = 2)]
fn swap_through_tma(x: Ptr<f32>, y: TensorDesc<f32, 16, 64>) {
    let inbox = local_alloc([16, 64], f32, 1);
    let bars = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let peer = cluster_cta_rank() ^ 1;
    let rows = program_id(0) * 16 + arange(0, 16);
    let tile = load(x + rows[(.., None)] * 64 + arange(0, 64)[(None, ..)]);
    remote_shmem_store(local_view(inbox, 0), tile, peer);
    barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = peer);
    barrier_wait(local_view(bars, 0), 0);
    fence_async_shared();
    async_descriptor_store(y, local_view(inbox, 0), [program_id(0) * 16, 0]);
    async_descriptor_store_wait(0);
    cluster_barrier();
}

fn tiles_swap(dev: &Device) {
    const PROGRAMS: usize = 6;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(13, |d| d.as_nanos() as u64);
    let host = random_inputs(PROGRAMS * 16 * 64, seed);
    let x = dev.upload(&host).expect("upload");
    let y = dev.upload(&vec![f32::NAN; host.len()]).expect("upload");
    let desc = TensorDesc::matrix(&y, PROGRAMS * 16, 64).expect("descriptor");
    swap_through_tma::launch(dev, PROGRAMS as u32, &x, &desc).expect("launch");
    let got = y.download().expect("download");
    for (i, &g) in got.iter().enumerate() {
        // Row block `p` holds the tile of program `p ^ 1`.
        let (block, within) = (i / (16 * 64), i % (16 * 64));
        let want = host[(block ^ 1) * 16 * 64 + within];
        assert_eq!(g, want, "element {i} (seed {seed})");
    }
}

#[test]
fn peers_swap_tiles_and_send_them_out_by_tma() {
    tiles_swap(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn peers_swap_tiles_and_send_them_out_by_tma_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    tiles_swap(&dev);
}

/// A stress test of ordering through distributed shared memory: in each of
/// `ROUNDS` rounds every thread of a program stores its part of a 16 KB
/// tile into its peer's inbox (`remote_shmem_store`, a ring of two), one
/// thread then arrives on the peer's barrier, and the peer reads the tile
/// after its wait and hands the slot back with an arrival of its own. Were
/// the arrival not ordered after every thread's stores (the hazard
/// compute-sanitizer's racecheck reports for `examples/cluster_exchange`,
/// docs/testing.md), some reader would see a stale or partial tile: the
/// kernel sums how far each received tile is from the one sent.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, ctas_per_cga = 2, configs = [(ROUNDS = 64)])]
fn dsm_stress<const ROUNDS: usize>(x: Ptr<f32>, errors: Ptr<f32>) {
    let inbox = local_alloc([64, 64], f32, 2);
    let full = alloc_barriers(2, 1);
    let empty = alloc_barriers(2, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let peer = cluster_cta_rank() ^ 1;
    let at = arange(0, 64)[(.., None)] * 64 + arange(0, 64)[(None, ..)];
    let mine = load(x + program_id(0) * 4096 + at);
    let theirs = load(x + (program_id(0) ^ 1) * 4096 + at);
    let mut error = 0.0;
    for i in 0..ROUNDS {
        let slot = i % 2;
        let phase = (i / 2) & 1;
        if i >= 2 {
            // The peer has read what this program stored two rounds ago.
            barrier_wait(local_view(empty, slot), phase ^ 1);
        }
        remote_shmem_store(local_view(inbox, slot), mine + i, peer);
        barrier_arrive(local_view(full, slot), 1, remote_cta_rank = peer);
        barrier_wait(local_view(full, slot), phase);
        let got = local_load(local_view(inbox, slot));
        error = error + sum(sum(abs(got - (theirs + i)), axis = 1), axis = 0);
        barrier_arrive(local_view(empty, slot), 1, remote_cta_rank = peer);
    }
    store(errors + program_id(0), error);
    // No program leaves while its peer may still arrive on its barriers.
    cluster_barrier();
}

fn dsm_ordering_holds(dev: &Device, programs: usize) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(17, |d| d.as_nanos() as u64);
    // Multiples of 1/64 below 4: adding a round number stays exact.
    let host: Vec<f32> = random_inputs(programs * 4096, seed)
        .iter()
        .map(|v| (v * 64.0).round() / 64.0)
        .collect();
    let x = dev.upload(&host).expect("upload");
    let errors = dev.upload(&vec![f32::NAN; programs]).expect("upload");
    dsm_stress::<64>::launch(dev, programs as u32, &x, &errors).expect("launch");
    let got = errors.download().expect("download");
    let wrong: Vec<(usize, f32)> = got
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, e)| e != 0.0)
        .collect();
    assert!(
        wrong.is_empty(),
        "programs that received a stale or partial tile (program, summed error): {wrong:?} \
         (seed {seed})"
    );
}

#[test]
fn every_round_of_a_dsm_ring_arrives_whole() {
    dsm_ordering_holds(&Device::cpu(), 4);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn every_round_of_a_dsm_ring_arrives_whole_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    // 132 SMs, a few clusters each, for many launches' worth of rounds.
    for _ in 0..20 {
        dsm_ordering_holds(&dev, 2 * 1024);
    }
}
