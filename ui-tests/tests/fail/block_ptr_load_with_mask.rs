use tlx::prelude::*;

// A block pointer's edges are masked with `boundary_check`, not `mask`.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>, m: i32, n: i32) {
    let p = make_block_ptr(x, (m, n), (n, 1), (0, 0), (16, 16), (1, 0));
    let rows = arange(0, 16);
    let t = load(p, mask = rows[(.., None)] < m);
    store(out + rows, sum(t, axis = 1));
}

fn main() {}
