use tlx::prelude::*;

// 16-bit floats have atom.add only.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<bf16>, y: Ptr<bf16>) {
    let i = arange(0, 128);
    atomic_xchg(y + i, load(x + i));
}

fn main() {}
