use tlx::prelude::*;

#[tlx::kernel]
fn axpy(x: Ptr<f32>, y: Ptr<f32>, alpha: f32, n: i32) {
    let offs = program_id(0) * 128 + arange(0, 128);
    let mask = offs < n;
    let v = alpha * load(x + offs, mask = mask) + load(y + offs, mask = mask);
    store(y + offs, v, mask = mask);
}

fn main() -> Result<(), tlx::Error> {
    let dev = Device::new();
    let x = dev.upload(&[1.0f32; 256])?;
    let y = dev.upload(&[2.0f32; 256])?;
    // Named arguments: forgetting one is a compile error, not a misordered launch.
    axpy::launch_with(&dev, 2u32, AxpyArgs { x: &x, y: &y, alpha: 2.0 })
}
