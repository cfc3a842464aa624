use tlx::prelude::*;

// Pointers have no order: a max over a tensor of them is refused at the call.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let ptrs = x + arange(0, 128);
    let m = max(ptrs, axis = 0);
    store(out, load(m));
}

fn main() {}
