use tlx::prelude::*;

// "Arrive remote, wait local": PTX has no wait on a peer's mbarrier.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn waits_on_peer(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let peer = cluster_cta_rank() ^ 1;
    let theirs = remote_view(local_view(bars, 0), peer);
    barrier_wait(theirs, 0);
    store(out + program_id(0), 1.0);
}

fn main() {}
