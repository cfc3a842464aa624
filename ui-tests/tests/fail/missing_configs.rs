use tlx::prelude::*;

#[tlx::kernel(num_warps = 4)]
fn fill<const BLOCK: usize>(out: Ptr<f32>) {
    store(out + arange(0, BLOCK), zeros([BLOCK], f32));
}

fn main() {}
