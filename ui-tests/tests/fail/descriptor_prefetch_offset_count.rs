// A prefetch names its block as a load does: one offset per dimension.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(a: TensorDesc<f32, 16, 64>) {
    async_descriptor_prefetch(a, [program_id(0) * 16]);
}

fn main() {}
