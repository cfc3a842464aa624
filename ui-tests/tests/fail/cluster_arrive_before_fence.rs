use tlx::prelude::*;

// The peer's `mbarrier.init` may not be visible yet: the arrival needs
// `fence_mbarrier_init_cluster()` and then `cluster_barrier()` before it.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn signals_too_soon(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    cluster_barrier();
    let peer = cluster_cta_rank() ^ 1;
    barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = peer);
    barrier_wait(local_view(bars, 0), 0);
    store(out + program_id(0), 1.0);
}

fn main() {}
