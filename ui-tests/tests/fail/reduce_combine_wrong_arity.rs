use tlx::prelude::*;

// An argmax of one's own reduces two tensors, so its combine function takes
// four arguments (the left value and index, then the right ones).
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<i32>) {
    fn larger(a: f32, b: f32) -> f32 {
        maximum(a, b)
    }
    let i = arange(0, 128);
    let (best, at) = reduce((load(x + i), i), 0, larger);
    store(out, at);
}

fn main() {}
