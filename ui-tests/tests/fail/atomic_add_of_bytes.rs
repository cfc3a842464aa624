use tlx::prelude::*;

// PTX has no 8-bit atomics: a histogram of u8 counters is refused at the
// call, with the widening to write instead (it used to fail in code
// generation only).
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<i32>, counts: Ptr<u8>) {
    let i = arange(0, 128);
    atomic_add(counts + load(x + i), 1);
}

fn main() {}
