use tlx::prelude::*;

// A scan runs along an axis of a tensor; a scalar has none.
#[tlx::kernel]
fn scan_scalar(x: Ptr<i32>, out: Ptr<i32>) {
    let v = load(x + program_id(0));
    let (excl, total) = cumsum(v);
    store(out + program_id(0), excl + total);
}

fn main() {}
