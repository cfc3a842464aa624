// `-` of an mbarrier array reached the IR verifier (an internal error).
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn negate(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    let x = -bars;
    store(out, 1.0);
}
