use tlx::prelude::*;

#[tlx::kernel]
fn scan_rows(x: Ptr<i32>, out: Ptr<i32>) {
    let r = arange(0, 32);
    let tile = load(x + r[(.., None)] * 32 + r[(None, ..)]);
    let (excl, total) = cumsum(tile, axis = 1);
    store(out + r[(.., None)] * 32 + r[(None, ..)], excl);
    store(out + 1024 + r, total);
}

fn main() {}
