use tlx::prelude::*;

// The combine function of an f32 reduction must return an f32.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    fn larger(a: f32, b: f32) -> bool {
        a > b
    }
    let i = arange(0, 128);
    store(out, reduce(load(x + i), 0, larger));
}

fn main() {}
