use tlx::prelude::*;

// A reinterpreted view may not reach past the buffer's bytes.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let halves = local_alloc([64, 64], bf16, 1);
    let words = local_reinterpret(local_view(halves, 0), f32, [64, 64]);
    let r = arange(0, 64);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], local_load(words));
}

fn main() {}
