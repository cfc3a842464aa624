use tlx::prelude::*;

#[tlx::kernel]
fn spin(out: Ptr<i32>) {
    loop {
        store(out, 1);
    }
}

fn main() {}
