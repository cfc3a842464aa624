use tlx::prelude::*;

// `v` is spread over the default warps; the 2-warp task does not hold it.
#[tlx::kernel(num_warps = 4)]
fn crossing(x: Ptr<f32>, out: Ptr<f32>) {
    let v = load(x + arange(0, 512));
    async_tasks! {
        task(default) {}
        task(num_warps = 2) {
            store(out + arange(0, 512), v);
        }
    }
}

fn main() {}
