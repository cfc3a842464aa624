use tlx::prelude::*;

// One dimension and one stride per dimension of the block.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>, rows: i32) {
    let d = make_tensor_descriptor(x, [rows], [1], [16, 64]);
    let t = d.load([0, 0]);
    let r = arange(0, 16);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], t);
}

fn main() {}
