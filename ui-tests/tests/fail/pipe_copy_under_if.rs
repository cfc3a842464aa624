use tlx::prelude::*;

// `commit` announces the bytes of the stage's copies; a copy that may not
// run would leave the readers waiting for bytes that never come.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn maybe_copy(desc: TensorDesc<bf16, 64, 64>, out: Ptr<f32>, k_tiles: i32, skip: i32) {
    let bufs = local_alloc([64, 64], bf16, 2);
    let p = pipe!(capacity = 2, x = bufs);
    let writer = p.writer();
    for i in 0..k_tiles {
        let slot = writer.acquire(i);
        if i != skip {
            async_descriptor_load(desc, slot.x, [0, i * 64]);
        }
        writer.commit(i);
    }
    store(out, 0.0);
}

fn main() {}
