use tlx::prelude::*;

// Each program stores a tile into its peer's inbox and signals it on the
// peer's barrier; the peer waits, then sends the tile out with a TMA store.
// The store came through the generic proxy and TMA reads through the async
// proxy: without `fence_async_shared()` after the wait, TMA may miss it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, ctas_per_cga = 2)]
fn forward(x: Ptr<f32>, y: TensorDesc<f32, 16, 64>) {
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
    async_descriptor_store(y, local_view(inbox, 0), [program_id(0) * 16, 0]);
    async_descriptor_store_wait(0);
    cluster_barrier();
}

fn main() {}
