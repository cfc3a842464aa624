use tlx::prelude::*;

// PTX approximates `exp` in f32 only: f64 transcendentals are refused with
// the f32 form to write instead.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f64>, out: Ptr<f64>) {
    let i = arange(0, 128);
    let v = load(x + i);
    store(out + i, exp(v) + sigmoid(v));
}

fn main() {}
