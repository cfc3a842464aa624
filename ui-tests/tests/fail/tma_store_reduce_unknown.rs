use tlx::prelude::*;

// `store_reduce` names TLX's reductions: "add", "min", "max", "and", "or", "xor".
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(y: TensorDesc<f32, 16, 64>) {
    let out = local_view(local_alloc([16, 64], f32, 1), 0);
    local_store(out, full([16, 64], 1.0, f32));
    async_descriptor_store(y, out, [0, 0], store_reduce = "sum");
    async_descriptor_store_wait(0);
}

fn main() {}
