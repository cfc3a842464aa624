use tlx::prelude::*;

// A configuration that breaks the kernel's own requirement stops the build
// at the assertion, with its message.
#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 24)])]
fn k<const BLOCK: usize>(out: Ptr<f32>) {
    static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16");
    store(out, 1.0);
}

fn main() {}
