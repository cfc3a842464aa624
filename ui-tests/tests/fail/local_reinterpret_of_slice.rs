use tlx::prelude::*;

// A slice's elements are not contiguous bytes: reinterpret the whole buffer.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<bf16>) {
    let words = local_alloc([64, 64], f32, 1);
    let top = local_slice(local_view(words, 0), [0, 0], [32, 64]);
    let halves = local_reinterpret(top, bf16, [32, 128]);
    let r = arange(0, 32);
    let c = arange(0, 128);
    store(out + r[(.., None)] * 128 + c[(None, ..)], local_load(halves));
}

fn main() {}
