use tlx::prelude::*;

// One request too many: after the answer said no work was left.
#[tlx::kernel(arch = "sm_100a")]
fn persistent(x: Ptr<f32>) {
    let clc = clc_create_context(1);
    let mut tile = program_id(0);
    let mut p_producer = 1;
    let mut p_consumer = 0;
    while tile != -1 {
        clc_producer(clc, p_producer);
        p_producer ^= 1;
        store(x + tile, 1.0);
        tile = clc_consumer(clc, p_consumer);
        p_consumer ^= 1;
    }
    clc_producer(clc, p_producer);
}

fn main() {}
