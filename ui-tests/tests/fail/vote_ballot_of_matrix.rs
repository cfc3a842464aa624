use tlx::prelude::*;

// Warp-level functions take a 1-D tile whose runs of 32 elements are warps.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<i32>) {
    let r = arange(0, 16);
    let c = arange(0, 16);
    let at = r[(.., None)] * 16 + c[(None, ..)];
    store(out + at, vote_ballot_sync(0xFFFFFFFF, load(x + at) > 0.0));
}

fn main() {}
