use tlx::prelude::*;

// A 2-d descriptor's block needs two offsets, outermost first.
#[tlx::kernel(num_warps = 4)]
fn k(a: TensorDesc<f32, 16, 64>, out: Ptr<f32>) {
    let tile = a.load([program_id(0) * 16]);
    let r = arange(0, 16);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], tile);
}

fn main() {}
