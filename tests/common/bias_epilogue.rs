// A kernel two tests share: `tests/gpu_differential.rs` runs it on the GPU
// and the interpreter, tlx-codegen's `async_dot_forms` inspects its PTX.

/// `out = A B + 2 bias` (a row vector broadcast over every row of a wgmma
/// accumulator; columns from `n` on take a bias of 1): code generation
/// loads the bias in the accumulator's column layout, not through shared
/// memory.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn bias_epilogue(a: Ptr<bf16>, b: Ptr<bf16>, bias: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let a_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let b_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let rows = arange(0, 64);
    let at = rows[(.., None)] * 64 + rows[(None, ..)];
    async_load(a + at, a_buf);
    async_load(b + at, b_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let cols = arange(0, 64);
    let scaled = load(bias + cols, mask = cols < n, other = 1.0) * 2.0;
    let acc = async_dot(a_buf, b_buf, zeros([64, 64], f32));
    let acc = async_dot_wait(0, acc);
    store(out + at, acc + scaled[(None, ..)]);
}
