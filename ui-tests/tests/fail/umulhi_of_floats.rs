use tlx::prelude::*;

// `umulhi` is the high half of an integer product: floats have none.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let v = load(x + i);
    store(out + i, umulhi(v, v));
}

fn main() {}
