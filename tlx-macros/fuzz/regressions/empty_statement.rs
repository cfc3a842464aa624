// A lone `;` was refused with an error at no token.
#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn fill<const BLOCK: usize>(out: Ptr<f32>) {
    store(out + program_id(0) * BLOCK + arange(0, BLOCK), zeros([BLOCK], f32));
    ;
}
