use tlx::prelude::*;

// A descriptor store writes whole blocks: the value must have the block's shape.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, y: TensorDesc<f32, 16, 64>) {
    let r = arange(0, 8);
    let c = arange(0, 64);
    let tile = load(x + r[(.., None)] * 64 + c[(None, ..)]);
    y.store([program_id(0) * 16, 0], tile);
}

fn main() {}
