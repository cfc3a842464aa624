use tlx::prelude::*;

#[tlx::kernel]
fn clamp(out: Ptr<i32>, n: i32) {
    if n {
        store(out, n);
    }
}

fn main() {}
