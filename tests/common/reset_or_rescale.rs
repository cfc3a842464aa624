// A kernel two tests share: `tests/gpu_differential.rs` runs it on the GPU
// and the interpreter, tlx-codegen's `async_dot_forms` inspects its PTX.

/// An accumulator carried around a loop, reset to `zeros` in one branch of
/// an `if` and rescaled in the other (flash attention's per-tile reset):
/// code generation keeps both branches in the wgmma layout.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn reset_or_rescale(a: Ptr<bf16>, b: Ptr<bf16>, out: Ptr<f32>, steps: i32) {
    let a_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let b_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let rows = arange(0, 64);
    let at = rows[(.., None)] * 64 + rows[(None, ..)];
    async_load(a + at, a_buf);
    async_load(b + at, b_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let mut acc = zeros([64, 64], f32);
    for i in 0..steps {
        acc = async_dot(a_buf, b_buf, acc);
        acc = async_dot_wait(0, acc);
        if i % 4 == 1 {
            acc = zeros([64, 64], f32);
        } else {
            acc = acc * 0.5;
        }
    }
    store(out + at, acc);
}
