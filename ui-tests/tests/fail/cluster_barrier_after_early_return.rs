use tlx::prelude::*;

#[tlx::kernel(ctas_per_cga = 4)]
fn exchange(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    if program_id(0) >= n {
        return;
    }
    store(out + program_id(0), load(x + program_id(0)));
    cluster_barrier();
}

fn main() {}
