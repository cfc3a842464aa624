//! Timelines (`tlx::trace::capture`, what `TLX_TRACE` writes): a
//! warp-specialized ring built with `timeline = true` records its program,
//! each task and each barrier wait, on the interpreter (task steps) and on
//! the GPU (nanoseconds, one track per SM and warp), and computes what it
//! computes without. The GPU test skips with a message when no GPU is
//! present.

use tlx::prelude::*;
use tlx::testing::gpu_or_skip;
use tlx::trace::{capture, Clock, LaunchTimeline};

#[path = "common/rng.rs"]
mod rng;

/// Per program, a 4-warp producer loads `chunks` blocks of `x` into a ring
/// of shared buffers and the default task sums them.
#[tlx::kernel(configs = [(BLOCK = 256, STAGES = 2)], num_warps = 4, timeline = true)]
fn ring_sum<const BLOCK: usize, const STAGES: usize>(x: Ptr<f32>, out: Ptr<f32>, chunks: i32) {
    let pid = program_id(0);
    let base = x + pid * chunks * BLOCK;
    let bufs = local_alloc([BLOCK], f32, STAGES);
    let full = alloc_barriers(STAGES, 1);
    let empty = alloc_barriers(STAGES, 1);
    async_tasks! {
        task(default) {
            let mut acc = zeros([BLOCK], f32);
            for i in 0..chunks {
                let slot = i % STAGES;
                barrier_wait(local_view(full, slot), (i / STAGES) % 2);
                acc = acc + local_load(local_view(bufs, slot));
                barrier_arrive(local_view(empty, slot));
            }
            store(out + pid, sum(acc, axis = 0));
        }
        task(num_warps = 4) {
            for i in 0..chunks {
                let slot = i % STAGES;
                barrier_wait(local_view(empty, slot), (i / STAGES) % 2 ^ 1);
                local_store(local_view(bufs, slot), load(base + i * BLOCK + arange(0, BLOCK)));
                barrier_arrive(local_view(full, slot));
            }
        }
    }
}

/// The same sum, built without timelines.
#[tlx::kernel(configs = [(BLOCK = 256)], num_warps = 4)]
fn plain_sum<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, chunks: i32) {
    let pid = program_id(0);
    let mut acc = zeros([BLOCK], f32);
    for i in 0..chunks {
        acc = acc + load(x + (pid * chunks + i) * BLOCK + arange(0, BLOCK));
    }
    store(out + pid, sum(acc, axis = 0));
}

const PROGRAMS: usize = 6;
const CHUNKS: usize = 10;
const BLOCK: usize = 256;

/// Runs both kernels on fresh inputs on `dev`, checks the sums against an
/// f64 reference, and returns each launch's timelines.
fn run(dev: &Device) -> Vec<LaunchTimeline> {
    let mut rng = rng::fresh_rng();
    let x = rng.vec(PROGRAMS * CHUNKS * BLOCK, 1.0);
    let dx = dev.upload(&x).expect("upload");
    let ring = dev.upload(&[f32::NAN; PROGRAMS]).expect("upload");
    let plain = dev.upload(&[f32::NAN; PROGRAMS]).expect("upload");
    let (ran, timelines) = capture(|| {
        ring_sum::<BLOCK, 2>::launch(dev, PROGRAMS as u32, &dx, &ring, CHUNKS as i32)?;
        plain_sum::<BLOCK>::launch(dev, PROGRAMS as u32, &dx, &plain, CHUNKS as i32)
    });
    ran.expect("launches");
    for out in [ring, plain] {
        let got = out.download().expect("download");
        for (p, g) in got.iter().enumerate() {
            let rows = &x[p * CHUNKS * BLOCK..(p + 1) * CHUNKS * BLOCK];
            let want: f64 = rows.iter().map(|v| f64::from(*v)).sum();
            let error = (f64::from(*g) - want).abs() / want.abs().max(1.0);
            assert!(error < 1e-5, "program {p}: {g} vs {want}");
        }
    }
    timelines
}

fn count(t: &LaunchTimeline, name: &str) -> usize {
    t.slices.iter().filter(|s| s.name.starts_with(name)).count()
}

#[test]
fn the_interpreter_records_each_task_and_wait_in_task_steps() {
    let timelines = run(&Device::cpu());
    // The interpreter traces every kernel it runs.
    let kernels: Vec<&str> = timelines.iter().map(|t| t.kernel.as_str()).collect();
    assert_eq!(kernels, ["ring_sum", "plain_sum"]);
    let ring = &timelines[0];
    assert_eq!(ring.clock, Clock::TaskSteps);
    assert_eq!(count(ring, "default task"), PROGRAMS);
    assert_eq!(count(ring, "task 1"), PROGRAMS);
    assert!(count(ring, "wait: ") > 0, "{:?}", ring.slices);
}

#[test]
fn the_gpu_records_each_task_and_wait_on_sm_and_warp_tracks() {
    let Some(dev) = gpu_or_skip() else {
        return;
    };
    let timelines = run(&dev);
    // Only the kernel built with timelines records one on the GPU.
    assert_eq!(timelines.len(), 1, "{timelines:?}");
    let ring = &timelines[0];
    assert_eq!(
        (ring.kernel.as_str(), ring.clock),
        ("ring_sum", Clock::Nanoseconds)
    );
    assert_eq!(ring.dropped, 0);
    assert_eq!(count(ring, "program"), PROGRAMS);
    assert_eq!(count(ring, "default task"), PROGRAMS);
    assert_eq!(count(ring, "task 1"), PROGRAMS);
    // Every wait of both tasks, each inside its task's slice.
    assert_eq!(count(ring, "wait: mbarrier"), 2 * PROGRAMS * CHUNKS);
    for wait in ring.slices.iter().filter(|s| s.name.starts_with("wait")) {
        let task = ring
            .slices
            .iter()
            .find(|t| t.name.contains("task") && t.track == wait.track && t.program == wait.program)
            .expect("the wait's task");
        assert!(
            task.start <= wait.start && wait.end <= task.end,
            "{wait:?} outside {task:?}"
        );
    }
    // Producer and consumer run on warps of their own: 0 and 4.
    let warps: std::collections::BTreeSet<&str> = ring
        .slices
        .iter()
        .filter(|s| s.name.contains("task"))
        .map(|s| s.track.rsplit("warp").next().unwrap_or("").trim())
        .collect();
    assert_eq!(warps.into_iter().collect::<Vec<_>>(), ["0", "4"]);

    // A buffer too small for the waits: they are dropped and counted, and
    // every task's and program's slice still closes (their ends are kept).
    std::env::set_var("TLX_TRACE_EVENTS", "16");
    let small = run(&dev);
    std::env::remove_var("TLX_TRACE_EVENTS");
    let ring = &small[0];
    assert!(ring.dropped > 0, "{ring:?}");
    assert_eq!(count(ring, "program"), PROGRAMS);
    assert_eq!(count(ring, "default task"), PROGRAMS);
    assert_eq!(count(ring, "task 1"), PROGRAMS);
    assert!(count(ring, "wait: mbarrier") < 2 * PROGRAMS * CHUNKS);
}
