use tlx::prelude::*;

// Each program stores a row into its peer's inbox, but signals "it's there"
// on its own barrier instead of the peer's: the peer's wait passes on its
// own arrival, and its read is not ordered after the store.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn exchange(x: Ptr<f32>, out: Ptr<f32>) {
    let inbox = local_alloc([64], f32, 1);
    let bars = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let peer = rank ^ 1;
    let row = load(x + program_id(0) * 64 + arange(0, 64));
    remote_shmem_store(local_view(inbox, 0), row, peer);
    barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = rank);
    barrier_wait(local_view(bars, 0), 0);
    store(out + program_id(0) * 64 + arange(0, 64), local_load(local_view(inbox, 0)));
    cluster_barrier();
}

fn main() {}
