use tlx::prelude::*;

// PTX's atom.max and atom.min take integers: a float maximum is refused
// with what to write instead.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, best: Ptr<f32>) {
    let i = arange(0, 128);
    atomic_max(best + i * 0, load(x + i));
}

fn main() {}
