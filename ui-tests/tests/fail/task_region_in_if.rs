use tlx::prelude::*;

// Task regions belong to the kernel body itself.
#[tlx::kernel(num_warps = 4)]
fn nested(out: Ptr<f32>, flag: bool) {
    if flag {
        async_tasks! {
            task(default) {
                store(out, 1.0);
            }
        }
    }
}

fn main() {}
