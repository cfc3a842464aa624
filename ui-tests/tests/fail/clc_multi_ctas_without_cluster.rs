use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a")]
fn persistent(x: Ptr<f32>) {
    let clc = clc_create_context(1);
    let mut tile = program_id(0);
    let mut phase = 0;
    while tile != -1 {
        clc_producer(clc, phase ^ 1, multi_ctas = true);
        store(x + tile, 1.0);
        tile = clc_consumer(clc, phase);
        phase ^= 1;
    }
}

fn main() {}
