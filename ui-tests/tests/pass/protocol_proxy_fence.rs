//! A tile a peer stored with `remote_shmem_store` (the generic proxy) and
//! this program sends out with a TMA store (the async proxy): accepted
//! with a proxy fence after the wait that orders the store, in either
//! spelling (the checker keeps `fence("async_shared")`, not `fence("gpu")`).
use tlx::prelude::*;

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
    fence_async_shared();
    async_descriptor_store(y, local_view(inbox, 0), [program_id(0) * 16, 0]);
    async_descriptor_store_wait(0);
    cluster_barrier();
}

#[tlx::kernel(arch = "sm_90a", num_warps = 4, ctas_per_cga = 2)]
fn forward_scoped_fence(x: Ptr<f32>, y: TensorDesc<f32, 16, 64>) {
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
    fence("async_shared");
    async_descriptor_store(y, local_view(inbox, 0), [program_id(0) * 16, 0]);
    async_descriptor_store_wait(0);
    cluster_barrier();
}

pub fn main() {}
