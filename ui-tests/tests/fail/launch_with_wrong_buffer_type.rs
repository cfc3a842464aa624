use tlx::prelude::*;

#[tlx::kernel]
fn fill(out: Ptr<f32>) {
    store(out + arange(0, 128), zeros([128], f32));
}

fn main() -> Result<(), tlx::Error> {
    let dev = Device::cpu();
    let out = dev.alloc::<f16>(128)?;
    fill::launch(&dev, 1u32, &out)?;
    Ok(())
}
