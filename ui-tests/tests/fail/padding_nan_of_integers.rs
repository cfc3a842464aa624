use tlx::prelude::*;

// Integers have no NaN to pad a block pointer's edges with.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<i32>, out: Ptr<i32>, n: i32) {
    let p = make_block_ptr(x, (n,), (1,), (0,), (128,), (0,));
    let t = load(p, boundary_check = (0,), padding_option = "nan");
    store(out + arange(0, 128), t);
}

fn main() {}
