//! Distributed shared memory between the two programs of a cluster
//! (`ctas_per_cga = 2`), one primitive at a time: each program stores its
//! row of `x`, doubled, into its peer's shared buffer (`remote_shmem_store`)
//! and tells it so with a remote arrival on the peer's barrier; stores it
//! again, plus one, with `async_remote_shmem_store`, whose bytes complete
//! on the peer's barrier by themselves; and loads half of the cluster's
//! 16x32 tile with TMA, multicast into both programs' buffers. Each program
//! then writes what it received, which the host checks exactly.
//!
//! `cargo run --release --example cluster_exchange`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
pub fn cluster_exchange(
    x: Ptr<f32>,
    desc: TensorDesc<f32, 8, 32>,
    sent: Ptr<f32>,
    tiles: Ptr<f32>,
) {
    let inbox = local_alloc([64], f32, 2);
    let tile = local_alloc([16, 32], f32, 1);
    // 0: the peer's synchronous store is in; 1: its asynchronous one; 2: the tile.
    let bars = alloc_barriers(3, 1);
    // Peers arrive on these barriers: their initialization must be visible
    // to the cluster, and both programs started, before anyone does.
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
    async_descriptor_load(
        desc,
        half,
        [first_row, 0],
        local_view(bars, 2),
        multicast_targets = [rank, peer],
    );
    barrier_wait(local_view(bars, 0), 0);
    barrier_wait(local_view(bars, 1), 0);
    barrier_wait(local_view(bars, 2), 0);
    let offs = program_id(0) * 128 + arange(0, 64);
    store(sent + offs, local_load(local_view(inbox, 0)));
    store(sent + offs + 64, local_load(local_view(inbox, 1)));
    let r = arange(0, 16);
    let c = arange(0, 32);
    store(
        tiles + program_id(0) * 512 + r[(.., None)] * 32 + c[(None, ..)],
        local_load(local_view(tile, 0)),
    );
    // No program leaves while its peer may still write into it.
    cluster_barrier();
}

/// Runs the exchange over `programs` programs (an even number) and checks
/// every value each one received.
pub fn run(device: &Device) -> Outcome {
    let programs: usize = match Size::for_device(device) {
        Size::Gpu => 2 * 1024,
        Size::Interpreter => 8,
    };
    let mut rng = common::Rng::fresh("cluster_exchange");
    let x = rng.uniform_vec(programs * 64, -4.0, 4.0);
    // Multiples of 1/64: exact in f32 whatever is added to them here.
    let x: Vec<f32> = x.iter().map(|v| (v * 64.0).round() / 64.0).collect();
    let rows = programs / 2 * 16;
    let matrix = rng.uniform_vec(rows * 32, -1.0, 1.0);
    let dx = device.upload(&x)?;
    let dm = device.upload(&matrix)?;
    let desc = TensorDesc::matrix(&dm, rows, 32)?;
    let sent = device.upload(&vec![f32::NAN; programs * 128])?;
    let tiles = device.upload(&vec![f32::NAN; programs * 512])?;
    cluster_exchange::launch(device, programs as u32, &dx, &desc, &sent, &tiles)?;
    let (sent, tiles) = (sent.download()?, tiles.download()?);
    let mut wrong = 0usize;
    for pid in 0..programs {
        let peer = pid ^ 1;
        for i in 0..64 {
            let from_peer = x[peer * 64 + i];
            wrong += usize::from(sent[pid * 128 + i] != from_peer * 2.0);
            wrong += usize::from(sent[pid * 128 + 64 + i] != from_peer + 1.0);
        }
        let cluster_rows = &matrix[pid / 2 * 512..pid / 2 * 512 + 512];
        let got = &tiles[pid * 512..pid * 512 + 512];
        wrong += got.iter().zip(cluster_rows).filter(|(g, w)| g != w).count();
    }
    let what = format!("{programs} programs in clusters of 2");
    if wrong == 0 {
        println!("PASS cluster_exchange: {what}: every received value exact");
        Ok(())
    } else {
        println!("FAIL cluster_exchange: {what}: {wrong} wrong values");
        Err(format!("cluster_exchange: {wrong} wrong values").into())
    }
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("cluster_exchange", run)
}
