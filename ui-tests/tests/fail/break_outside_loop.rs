use tlx::prelude::*;

// `break` leaves a loop; here there is none.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>, n: i32) {
    if n > 4 {
        break;
    }
    store(out, 1.0);
}

fn main() {}
