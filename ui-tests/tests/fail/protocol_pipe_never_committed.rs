use tlx::prelude::*;

// The writer fills each stage but never commits it: the readers wait forever.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [(BLOCK = 128, S = 2)])]
fn sums<const BLOCK: usize, const S: usize>(x: Ptr<f32>, out: Ptr<f32>, tiles: i32) {
    let bufs = local_alloc([BLOCK], f32, S);
    let ring = pipe!(capacity = S, x = bufs);
    let cols = arange(0, BLOCK);
    async_tasks! {
        task(default) {
            let writer = ring.writer();
            for t in 0..tiles {
                let slot = writer.acquire(t);
                local_store(slot.x, load(x + t * BLOCK + cols));
            }
        }
        task(num_warps = 4) {
            let reader = ring.reader();
            let mut acc = zeros([BLOCK], f32);
            for t in 0..tiles {
                let ready = reader.wait(t);
                acc = acc + local_load(ready.x);
                reader.release(t);
            }
            store(out + cols, acc);
        }
    }
}

fn main() {}
