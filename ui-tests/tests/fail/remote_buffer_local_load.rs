use tlx::prelude::*;

// A peer's buffer may be stored into, not read.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn reads_peer(out: Ptr<f32>) {
    let bufs = local_alloc([64], f32, 1);
    cluster_barrier();
    let peer = cluster_cta_rank() ^ 1;
    let theirs = local_load(remote_view(local_view(bufs, 0), peer));
    store(out + program_id(0) * 64 + arange(0, 64), theirs);
}

fn main() {}
