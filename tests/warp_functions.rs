//! TLX's per-thread and warp-level functions as tiles: `thread_id(0)` (one
//! element per thread of the task or program), `vote_ballot_sync` and
//! `warp_redux` over runs of 32 elements. Checked against plain Rust on the
//! interpreter and, where there is a GPU, on the GPU; outputs are poisoned
//! first, so unwritten elements show.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

#[tlx::kernel(num_warps = 4)]
fn warp_votes(
    x: Ptr<f32>,
    ids: Ptr<i32>,
    ballots: Ptr<i32>,
    maxes: Ptr<f32>,
    abs_mins: Ptr<f32>,
    sums: Ptr<i32>,
) {
    let tid = thread_id(0);
    let v = load(x + tid);
    store(ids + tid, tid);
    store(ballots + tid, vote_ballot_sync(0xFFFF00FF, v > 0.0));
    store(maxes + tid, warp_redux(v, "max"));
    store(abs_mins + tid, warp_redux(v, "abs_min"));
    store(sums + tid, warp_redux(tid % 7, "sum"));
}

/// In a warp-specialized kernel each task numbers its own threads.
#[tlx::kernel(num_warps = 4)]
fn task_threads(out: Ptr<i32>) {
    async_tasks! {
        task(default) {
            let tid = thread_id(0);
            store(out + tid, tid);
        }
        task(num_warps = 1) {
            let tid = thread_id(0);
            store(out + 128 + tid, vote_ballot_sync(0xFFFFFFFF, tid % 3 == 0));
        }
    }
}

/// Bit `j` of each run's ballot: element `32 r + j` voted and mask bit `j`.
fn ballot(pred: &[bool], mask: u32) -> Vec<i32> {
    pred.chunks(32)
        .flat_map(|run| {
            let bits = run
                .iter()
                .enumerate()
                .filter(|(j, &p)| p && mask >> j & 1 == 1)
                .fold(0u32, |b, (j, _)| b | 1 << j);
            [bits as i32; 32]
        })
        .collect()
}

fn per_run<T: Copy>(x: &[T], f: impl Fn(&[T]) -> T) -> Vec<T> {
    x.chunks(32).flat_map(|run| [f(run); 32]).collect()
}

fn agrees(dev: &Device) {
    let n = 128;
    // Zeros among the values: they vote no.
    let mut x = fresh_rng().vec(n, 1.0);
    x[5] = 0.0;
    let xb = dev.upload(&x).expect("upload");
    let poison_i = || dev.upload(&vec![i32::MIN; n]).expect("upload");
    let poison_f = || dev.upload(&vec![f32::NAN; n]).expect("upload");
    let (ids, ballots, sums) = (poison_i(), poison_i(), poison_i());
    let (maxes, abs_mins) = (poison_f(), poison_f());
    warp_votes::launch(dev, 1u32, &xb, &ids, &ballots, &maxes, &abs_mins, &sums).expect("launch");
    let want_ids: Vec<i32> = (0..n as i32).collect();
    assert_eq!(ids.download().expect("download"), want_ids);
    let positive: Vec<bool> = x.iter().map(|v| *v > 0.0).collect();
    assert_eq!(
        ballots.download().expect("download"),
        ballot(&positive, 0xFFFF00FF)
    );
    let max = per_run(&x, |r| r.iter().copied().fold(f32::MIN, f32::max));
    assert_eq!(maxes.download().expect("download"), max);
    let abs_min = per_run(&x, |r| r.iter().map(|v| v.abs()).fold(f32::MAX, f32::min));
    assert_eq!(abs_mins.download().expect("download"), abs_min);
    let residues: Vec<i32> = want_ids.iter().map(|i| i % 7).collect();
    assert_eq!(
        sums.download().expect("download"),
        per_run(&residues, |r| r.iter().sum())
    );

    let out = dev.upload(&vec![i32::MIN; 160]).expect("upload");
    task_threads::launch(dev, 1u32, &out).expect("launch");
    let got = out.download().expect("download");
    assert_eq!(got[..128], want_ids[..]);
    let thirds: Vec<bool> = (0..32).map(|i| i % 3 == 0).collect();
    assert_eq!(got[128..], ballot(&thirds, u32::MAX)[..]);
}

#[test]
fn warp_functions_on_the_interpreter() {
    agrees(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn warp_functions_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        agrees(&dev);
    }
}
