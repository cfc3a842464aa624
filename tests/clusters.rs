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
