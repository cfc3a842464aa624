use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 128), (BLOCK = 256, num_warps = 8)])]
fn scale<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, factor: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    store(
        out + offs,
        load(x + offs, mask = mask) * factor,
        mask = mask,
    );
}

pub fn main() -> Result<(), tlx::Error> {
    let dev = Device::cpu();
    let x = dev.upload(&[1.0f32, 2.0, 3.0])?;
    let out = dev.alloc::<f32>(3)?;
    scale::<256>::launch(&dev, 1u32, &x, &out, 2.0, 3)?;
    assert_eq!(out.download()?, vec![2.0, 4.0, 6.0]);
    Ok(())
}
