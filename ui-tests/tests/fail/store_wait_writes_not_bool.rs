use tlx::prelude::*;

// `writes` is a compile-time flag, not a count.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 64)])]
fn k<const BLOCK: usize>(x: Ptr<f32>, y_desc: TensorDesc<f32, 1, BLOCK>) {
    let buf = local_view(local_alloc([1, BLOCK], f32, 1), 0);
    local_store(buf, load(x + arange(0, BLOCK))[(None, ..)]);
    async_descriptor_store(y_desc, buf, [0, 0]);
    async_descriptor_store_wait(0, writes = 1);
}

fn main() {}
