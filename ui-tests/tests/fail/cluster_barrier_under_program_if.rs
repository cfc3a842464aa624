use tlx::prelude::*;

#[tlx::kernel(ctas_per_cga = 2)]
fn exchange(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = program_id(0) * 64 + arange(0, 64);
    store(out + offs, load(x + offs));
    if cluster_cta_rank() == 0 {
        cluster_barrier();
    }
}

fn main() {}
