use tlx::prelude::*;

// A TMA block's rows are whole 16-byte chunks: 2 f32 columns are 8 bytes.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>, rows: i32) {
    let d = make_tensor_descriptor(x, [rows, 2], [2, 1], [64, 2]);
    let t = d.load([0, 0]);
    let r = arange(0, 64);
    let c = arange(0, 2);
    store(out + r[(.., None)] * 2 + c[(None, ..)], t);
}

fn main() {}
