use tlx::prelude::*;

// Scale atoms are copied unswizzled: an [8, 64] u8 buffer gets a swizzle.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn copy(c: Ptr<f32>) {
    let atoms = local_alloc([8, 64], u8, 1);
    let scales = local_alloc([128, 4], u8, 1, storage = "tmem");
    tmem_copy(local_view(atoms, 0), local_view(scales, 0));
    store(c + arange(0, 128), 1.0);
}

fn main() {}
