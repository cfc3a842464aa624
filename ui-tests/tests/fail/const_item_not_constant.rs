use tlx::prelude::*;

// A `const` item is known at compile time; `n` is a run-time argument.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>, n: i32) {
    const ROWS: usize = n * 2;
    store(out, 1.0);
}

fn main() {}
