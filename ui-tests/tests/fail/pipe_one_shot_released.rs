use tlx::prelude::*;

// A one-shot pipe is a single ready edge: nothing to give back.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn release_once(out: Ptr<f32>) {
    let bufs = local_alloc([16], f32, 1);
    let p = pipe!(capacity = 1, one_shot = true, x = bufs);
    let reader = p.reader();
    let ready = reader.wait(0);
    store(out + arange(0, 16), local_load(ready.x));
    reader.release(0);
}

fn main() {}
