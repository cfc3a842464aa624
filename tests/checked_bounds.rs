//! Kernels compiled with `check_bounds = true` (what `TLX_CHECK_BOUNDS=1`
//! does to every kernel): an access outside its buffer is suppressed and
//! comes back from `launch` as `Error::KernelOutOfBounds`, naming the
//! parameter, the program and the line. The same kernels run on the CPU
//! interpreter here and on a GPU when there is one, with the same report.

use tlx::prelude::*;

/// Off by one: the last live element stores one past the end of `out`.
#[tlx::kernel(check_bounds = true)]
fn shifts_right(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 64 + arange(0, 64);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0.0);
    store(out + offs + 1, v * 2.0, mask = mask); // line 15
}

/// A row walk whose pointer is carried through the loop and reads one row
/// too many: the check follows the pointer back to `x`.
#[tlx::kernel(check_bounds = true)]
fn sums_rows(x: Ptr<f32>, out: Ptr<f32>, rows: i32) {
    let cols = arange(0, 32);
    let mut p = x + cols;
    let mut acc = zeros([32], f32);
    for _ in 0..rows + 1 {
        acc = acc + load(p); // line 26
        p = p + 32;
    }
    store(out + cols, acc);
}

/// In bounds everywhere: checked mode changes nothing.
#[tlx::kernel(check_bounds = true)]
fn scales(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 128 + arange(0, 128);
    let mask = offs < n;
    store(out + offs, load(x + offs, mask = mask) * 3.0, mask = mask);
}

fn out_of_bounds(err: tlx::Error) -> tlx::OutOfBoundsReport {
    println!("{err}");
    match err {
        tlx::Error::KernelOutOfBounds(report) => *report,
        other => panic!("expected KernelOutOfBounds, got {other}"),
    }
}

fn inputs(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + 11) % 101) as f32 / 7.0 + 0.5)
        .collect()
}

/// Runs the three kernels on `dev`; panics unless every report is as expected.
fn run_all(dev: &Device) {
    // 1000 elements: programs 0..16, the last live element is 999 in program 15.
    let n = 1000usize;
    let x = dev.upload(&inputs(n)).unwrap();
    let out = dev.upload(&vec![f32::NAN; n]).unwrap();
    let err = shifts_right::launch(dev, 16u32, &x, &out, n as i32).unwrap_err();
    let report = out_of_bounds(err);
    assert_eq!(report.kernel, "shifts_right");
    assert_eq!(report.program, [15, 0, 0]);
    assert_eq!(report.access, "store");
    assert_eq!(report.param, "`out`");
    assert_eq!(report.line, 15);
    assert_eq!(report.element, 999 - 15 * 64);
    assert_eq!(report.byte_offset, 4 * n as i64);
    assert_eq!(report.len_bytes, 4 * n as u64);
    assert_eq!(report.count, 1);
    // The lanes in bounds ran; the one outside touched nothing.
    let got = out.download().unwrap();
    let want = inputs(n);
    assert!(got[0].is_nan());
    for i in 1..n {
        assert_eq!(got[i], want[i - 1] * 2.0, "element {i}");
    }

    let rows = 6usize;
    let x = dev.upload(&inputs(rows * 32)).unwrap();
    let out = dev.upload(&[f32::NAN; 32]).unwrap();
    let err = sums_rows::launch(dev, 1u32, &x, &out, rows as i32).unwrap_err();
    let report = out_of_bounds(err);
    assert_eq!(report.access, "load");
    assert_eq!(report.param, "`x`");
    assert_eq!(report.line, 26);
    assert_eq!(
        report.byte_offset / 4 / 32,
        rows as i64,
        "the first row past the end"
    );
    assert_eq!(report.count, 32, "one whole row of lanes");

    let n = 300usize;
    let x = dev.upload(&inputs(n)).unwrap();
    let out = dev.upload(&vec![f32::NAN; n]).unwrap();
    scales::launch(dev, 3u32, &x, &out, n as i32).unwrap();
    let got = out.download().unwrap();
    for (i, (g, x)) in got.iter().zip(inputs(n)).enumerate() {
        assert_eq!(*g, x * 3.0, "element {i}");
    }
}

#[test]
fn out_of_bounds_accesses_are_reported_on_the_interpreter() {
    run_all(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn out_of_bounds_accesses_are_reported_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        run_all(&dev);
    }
}
