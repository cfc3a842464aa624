use tlx::prelude::*;

// [64, 64] bf16 rows are 128 bytes (128-byte swizzle); [64, 16] f32 rows
// would be 64 bytes, laid out with another swizzle.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let halves = local_alloc([64, 64], bf16, 1);
    let words = local_reinterpret(local_view(halves, 0), f32, [64, 16]);
    let r = arange(0, 64);
    let c = arange(0, 16);
    store(out + r[(.., None)] * 16 + c[(None, ..)], local_load(words));
}

fn main() {}
