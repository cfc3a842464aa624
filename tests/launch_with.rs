//! `launch_with`: every kernel also takes its arguments as a struct with one
//! named field per parameter (`<Kernel>Args`), so a long argument list
//! cannot be passed in the wrong order; the positional `launch` stays.

use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 64)])]
fn scaled_rows<const BLOCK: usize>(
    x: Ptr<f32>,
    out: Ptr<f32>,
    rows: i32,
    cols: i32,
    stride_x: i32,
    stride_out: i32,
    scale: f32,
) {
    let row = program_id(0);
    let c = arange(0, BLOCK);
    let mask = (c < cols) & (row < rows);
    let v = load(x + row * stride_x + c, mask = mask, other = 0.0);
    store(out + row * stride_out + c, v * scale, mask = mask);
}

#[test]
fn named_and_positional_launches_agree() {
    let dev = Device::cpu();
    let (rows, cols, stride_x, stride_out) = (5usize, 40usize, 48usize, 41usize);
    let x: Vec<f32> = (0..rows * stride_x)
        .map(|i| (i % 97) as f32 * 0.25 + 1.0)
        .collect();
    let x = dev.upload(&x).unwrap();
    let named = dev.upload(&vec![f32::NAN; rows * stride_out]).unwrap();
    let positional = dev.upload(&vec![f32::NAN; rows * stride_out]).unwrap();
    scaled_rows::<64>::launch_with(
        &dev,
        rows as u32,
        ScaledRowsArgs {
            // In any order: the fields are named.
            scale: 3.0,
            stride_out: stride_out as i32,
            stride_x: stride_x as i32,
            cols: cols as i32,
            rows: rows as i32,
            out: &named,
            x: &x,
        },
    )
    .unwrap();
    let (sx, so) = (stride_x as i32, stride_out as i32);
    scaled_rows::<64>::launch(&dev, rows as u32, &x, &positional, 5, 40, sx, so, 3.0).unwrap();
    let (named, positional, x) = (
        named.download().unwrap(),
        positional.download().unwrap(),
        x.download().unwrap(),
    );
    for r in 0..rows {
        for c in 0..cols {
            let want = x[r * stride_x + c] * 3.0;
            assert_eq!(named[r * stride_out + c], want, "row {r}, col {c}");
            assert_eq!(positional[r * stride_out + c], want, "row {r}, col {c}");
        }
    }
}
