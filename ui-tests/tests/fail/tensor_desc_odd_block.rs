use tlx::prelude::*;

// A TMA block lands in a tile, and tiles have power-of-two sides.
#[tlx::kernel(num_warps = 4)]
fn k(d: TensorDesc<f16, 48, 64>, out: Ptr<f16>) {
    let t = d.load([0, 0]);
    store(out + arange(0, 64), t.extract_tile([0, 0], [1, 64]).reshape([64]));
}

fn main() {}
