use tlx::prelude::*;

// `dtype_of(x)` names a type: it goes where a dtype is taken, not in a value.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let v = load(x + i);
    let t = dtype_of(v);
    store(out + i, v);
}

fn main() {}
