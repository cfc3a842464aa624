use tlx::prelude::*;

// `fdiv` chooses a float division's rounding; integers divide with `/`.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<i32>, out: Ptr<i32>) {
    let i = arange(0, 128);
    store(out + i, fdiv(load(x + i), 3));
}

fn main() {}
