use tlx::prelude::*;

// A TMA store reads its buffer until `async_descriptor_store_wait`: the next
// iteration's `local_store` overwrites it while the previous store may still
// be reading.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(y: TensorDesc<f32, 16, 64>, n: i32) {
    let out = local_view(local_alloc([16, 64], f32, 1), 0);
    for i in 0..n {
        local_store(out, full([16, 64], 1.0, f32));
        async_descriptor_store(y, out, [i * 16, 0]);
    }
    async_descriptor_store_wait(0);
}

fn main() {}
