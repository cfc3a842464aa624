use tlx::prelude::*;

// wgmma reads fp8 operands K-major only: an A stored [K, M] (through
// `local_trans`) is refused, naming the order.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(at: Ptr<f8e4m3>, bt: Ptr<f8e4m3>, out: Ptr<f32>) {
    let at_buf = local_view(local_alloc([64, 64], f8e4m3, 1), 0);
    let bt_buf = local_view(local_alloc([64, 64], f8e4m3, 1), 0);
    let r = arange(0, 64);
    let tile = r[(.., None)] * 64 + r[(None, ..)];
    async_load(at + tile, at_buf);
    async_load(bt + tile, bt_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c = async_dot(local_trans(at_buf), local_trans(bt_buf), zeros([64, 64], f32));
    let c = async_dot_wait(0, c);
    store(out + tile, c);
}

fn main() {}
