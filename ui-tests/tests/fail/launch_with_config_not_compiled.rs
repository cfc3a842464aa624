use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn fill<const BLOCK: usize>(out: Ptr<f32>) {
    store(out + program_id(0) * BLOCK + arange(0, BLOCK), zeros([BLOCK], f32));
}

fn main() -> Result<(), tlx::Error> {
    let dev = Device::cpu();
    let out = dev.alloc::<f32>(4096)?;
    fill::<512>::launch(&dev, 8u32, &out)?;
    Ok(())
}
