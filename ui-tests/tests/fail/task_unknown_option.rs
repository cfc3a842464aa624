use tlx::prelude::*;

// TLX spells it `num_warps`.
#[tlx::kernel(num_warps = 4)]
fn typo(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, 1.0);
        }
        task(warps = 2) {
            store(out + 1, 2.0);
        }
    }
}

fn main() {}
