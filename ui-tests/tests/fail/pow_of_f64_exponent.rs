use tlx::prelude::*;

// An f64 exponent would make `pow` an f64 transcendental, which PTX lacks.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, e: Ptr<f64>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let y = pow(load(x + i), load(e + i));
    store(out + i, y.to(f32));
}

fn main() {}
