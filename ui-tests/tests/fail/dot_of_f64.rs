use tlx::prelude::*;

// The tensor cores take no f64 here: `dot` of f64 tiles is refused.
#[tlx::kernel(num_warps = 4)]
fn k(a: Ptr<f64>, out: Ptr<f32>) {
    let r = arange(0, 16);
    let tile = load(a + r[(.., None)] * 16 + r[(None, ..)]);
    store(out + r[(.., None)] * 16 + r[(None, ..)], dot(tile, tile));
}

fn main() {}
