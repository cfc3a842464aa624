use tlx::prelude::*;

// atom.cas takes 32- and 64-bit values only.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f16>) {
    let i = arange(0, 128);
    atomic_cas(x + i, load(x + i), load(x + i) * 2.0);
}

fn main() {}
