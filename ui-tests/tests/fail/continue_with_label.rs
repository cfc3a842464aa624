use tlx::prelude::*;

// Loops have no labels in kernels: `continue` leaves the innermost one.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>, n: i32) {
    for i in 0..n {
        for j in 0..n {
            if j > i {
                continue 'outer;
            }
            store(out + j, 1.0);
        }
    }
}

fn main() {}
