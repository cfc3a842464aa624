use tlx::prelude::*;

#[tlx::kernel(num_warps = 4)]
fn k(x: Strided<f32, 2>) {
    store(x, 1.0);
}

// A rank-3 view given to a rank-2 parameter: a type error at the argument.
fn main() -> Result<(), tlx::Error> {
    let dev = Device::cpu();
    let buf = dev.alloc::<f32>(8)?;
    let view = Strided::contiguous(&buf, [2, 2, 2])?;
    k::launch(&dev, 1u32, &view)
}
