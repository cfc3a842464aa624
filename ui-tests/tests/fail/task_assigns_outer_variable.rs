use tlx::prelude::*;

// Tasks run at the same time and give nothing back.
#[tlx::kernel(num_warps = 4)]
fn leaks(x: Ptr<f32>, out: Ptr<f32>) {
    let mut total = 0.0;
    async_tasks! {
        task(default) {
            total = sum(load(x + arange(0, 512)), axis = 0);
        }
        task(num_warps = 1) {
            store(out + 1, 1.0);
        }
    }
    store(out, total);
}

fn main() {}
