//! Tensor descriptors made on the device (`make_tensor_descriptor`): one
//! per group of a ragged batch, each with its own row count, so that TMA
//! zero-fills and clips at that group's edge, not the buffer's. Used by
//! Triton's block-level loads and stores and by TLX's asynchronous copies
//! on an mbarrier. Each kernel runs on the interpreter against a CPU
//! reference and, where there is a GPU, on the GPU against the same one;
//! outputs are NaN-poisoned first, so unwritten elements show.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `y = 2x + 1` over each group's rows, through descriptors of the group:
/// a block reaching past the group's last row reads zeros there and writes
/// nothing there (the next group's rows are another program's).
#[tlx::kernel(configs = [(BR = 16, BC = 64)])]
fn ragged_scale<const BR: usize, const BC: usize>(
    x: Ptr<f32>,
    y: Ptr<f32>,
    starts: Ptr<i32>,
    lens: Ptr<i32>,
    cols: i32,
) {
    let g = program_id(1);
    let start = load(starts + g);
    let len = load(lens + g);
    let xd = make_tensor_descriptor(x + start * cols, [len, cols], [cols, 1], [BR, BC]);
    let yd = make_tensor_descriptor(y + start * cols, [len, cols], [cols, 1], [BR, BC]);
    let r0 = program_id(0) * BR;
    if r0 < len {
        for c0 in (0..cols).step_by(BC) {
            yd.store([r0, c0], xd.load([r0, c0]) * 2.0 + 1.0);
        }
    }
}

/// The same with TLX's primitives: the block copied into a shared buffer
/// on an mbarrier, scaled in registers, copied out by a TMA store.
#[tlx::kernel(arch = "sm_90a", configs = [(BR = 16, BC = 64)])]
fn ragged_scale_tlx<const BR: usize, const BC: usize>(
    x: Ptr<f32>,
    y: Ptr<f32>,
    starts: Ptr<i32>,
    lens: Ptr<i32>,
    cols: i32,
) {
    let buf = local_view(local_alloc([BR, BC], f32, 1), 0);
    let out = local_view(local_alloc([BR, BC], f32, 1), 0);
    let bar = local_view(alloc_barriers(1, 1), 0);
    let g = program_id(1);
    let start = load(starts + g);
    let len = load(lens + g);
    let xd = make_tensor_descriptor(x + start * cols, [len, cols], [cols, 1], [BR, BC]);
    let yd = make_tensor_descriptor(y + start * cols, [len, cols], [cols, 1], [BR, BC]);
    // No test of `r0` against `len`: a block wholly past the group's rows
    // reads zeros and writes nothing.
    let r0 = program_id(0) * BR;
    let mut phase = 0;
    for c0 in (0..cols).step_by(BC) {
        barrier_expect_bytes(bar, BR * BC * 4);
        async_descriptor_load(xd, buf, [r0, c0], bar);
        barrier_wait(bar, phase);
        phase = phase ^ 1;
        local_store(out, local_load(buf) * 2.0 + 1.0);
        fence_async_shared();
        async_descriptor_store(yd, out, [r0, c0]);
        async_descriptor_store_wait(0);
    }
}

/// Group `g` holds rows `starts[g]..starts[g] + lens[g]` of a `[rows, cols]`
/// matrix; rows in no group (a gap, the tail) must stay as they were.
struct Ragged {
    starts: Vec<i32>,
    lens: Vec<i32>,
    rows: usize,
    cols: usize,
}

impl Ragged {
    fn new() -> Ragged {
        // Lengths that are and are not multiples of the block; a gap of 3
        // rows after group 1 and 5 after the last.
        let lens = vec![37, 16, 5, 50];
        let mut starts = Vec::new();
        let mut at = 0;
        for (g, len) in lens.iter().enumerate() {
            starts.push(at);
            at += len + if g == 1 { 3 } else { 0 };
        }
        Ragged {
            starts,
            lens,
            rows: at as usize + 5,
            cols: 192,
        }
    }

    fn grid(&self) -> (u32, u32, u32) {
        let longest = self.lens.iter().copied().max().unwrap_or(0) as usize;
        (longest.div_ceil(16) as u32, self.lens.len() as u32, 1)
    }

    fn check(&self, x: &[f32], got: &[f32]) {
        let mut in_group = vec![false; self.rows];
        for (&s, &l) in self.starts.iter().zip(&self.lens) {
            in_group[s as usize..(s + l) as usize].fill(true);
        }
        for (i, &inside) in in_group.iter().enumerate() {
            for j in 0..self.cols {
                let (g, w) = (got[i * self.cols + j], x[i * self.cols + j]);
                if inside {
                    assert_eq!(g, w * 2.0 + 1.0, "element ({i}, {j})");
                } else {
                    assert!(
                        g.is_nan(),
                        "element ({i}, {j}) outside every group was written"
                    );
                }
            }
        }
    }
}

fn ragged_scale_agrees(dev: &Device, tlx_form: bool) {
    let r = Ragged::new();
    let x = fresh_rng().vec(r.rows * r.cols, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let yb = dev
        .upload(&vec![f32::NAN; r.rows * r.cols])
        .expect("upload");
    let (starts, lens) = (
        dev.upload(&r.starts).expect("upload"),
        dev.upload(&r.lens).expect("upload"),
    );
    let cols = r.cols as i32;
    if tlx_form {
        ragged_scale_tlx::<16, 64>::launch(dev, r.grid(), &xb, &yb, &starts, &lens, cols)
    } else {
        ragged_scale::<16, 64>::launch(dev, r.grid(), &xb, &yb, &starts, &lens, cols)
    }
    .expect("launch");
    r.check(&x, &yb.download().expect("download"));
}

#[test]
fn device_descriptors_on_the_interpreter() {
    let dev = Device::cpu();
    ragged_scale_agrees(&dev, false);
    ragged_scale_agrees(&dev, true);
}

/// A row stride TMA cannot take (not a multiple of 16 bytes) is reported
/// at the `make_tensor_descriptor` that built it.
#[test]
fn a_descriptor_breaking_tma_rules_is_reported_on_the_interpreter() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 64 * 67]).expect("upload");
    let y = dev.upload(&vec![0.0f32; 64 * 67]).expect("upload");
    let starts = dev.upload(&[0i32]).expect("upload");
    let lens = dev.upload(&[64i32]).expect("upload");
    let err = ragged_scale::<16, 64>::launch(&dev, (4, 1, 1), &x, &y, &starts, &lens, 67)
        .expect_err("rows of 268 bytes");
    let message = err.to_string();
    assert!(
        message.contains("device_descriptors.rs") && message.contains("268 bytes"),
        "{message}"
    );
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn device_descriptors_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    ragged_scale_agrees(&dev, false);
    ragged_scale_agrees(&dev, true);
    // Twice, with a smaller grid in between: the scratch is reused.
    ragged_scale_agrees(&dev, false);
}
