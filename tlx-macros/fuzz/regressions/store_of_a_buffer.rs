// A shared buffer stored as if it were a tensor reached the IR verifier.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn store_buffer(out: Ptr<bf16>) {
    let bufs = local_alloc([64, 64], bf16, 1);
    let rows = arange(0, 64);
    store(out + rows[(.., None)] * 64 + rows[(None, ..)], local_view(bufs, 0));
}
