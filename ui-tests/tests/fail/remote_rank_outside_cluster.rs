use tlx::prelude::*;

// Ranks run from 0 to cluster_num_ctas() - 1.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn arrives_nowhere(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    barrier_arrive(local_view(bars, 0), 1, remote_cta_rank = 2);
    store(out + program_id(0), 1.0);
}

fn main() {}
