use tlx::prelude::*;

// cp.async zero-fills masked-off elements; it cannot write another value.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn fill_ones(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let bufs = local_alloc([64], f32, 1);
    let offs = arange(0, 64);
    async_load(x + offs, local_view(bufs, 0), mask = offs < n, other = 1.0);
    store(out, 0.0);
}

fn main() {}
