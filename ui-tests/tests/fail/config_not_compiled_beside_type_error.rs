use tlx::prelude::*;

// A launch with const arguments no configuration has is reported in the
// same build as the caller's other type errors, not only once they are fixed.
#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn fill<const BLOCK: usize>(out: Ptr<f32>) {
    store(out + program_id(0) * BLOCK + arange(0, BLOCK), zeros([BLOCK], f32));
}

fn main() -> Result<(), tlx::Error> {
    let dev = Device::cpu();
    let out = dev.alloc::<f32>(4096)?;
    let blocks: u32 = "8";
    fill::<512>::launch(&dev, blocks, &out)?;
    Ok(())
}
