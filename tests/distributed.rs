//! Kernels across the ranks of a mesh (docs/distributed.md): remote stores
//! and loads through `remote`, system-scope signals, and
//! `distributed_barrier`, with 2 and 4 ranks on the interpreter (CI) and on
//! the GPU, where a mesh's ranks share one GPU unless the machine has one
//! per rank; each against a CPU reference in f64 on fresh random inputs.

use tlx::prelude::*;
use tlx::Placement;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// Every rank's `x` summed into every rank's `out`: each program pushes its
/// block of `x` into slot `rank` of every peer's `slots`, raises its flag
/// there (set to `epoch`, so flags need no reset between runs), then waits
/// for every rank's flag in its own `flags` and sums the slots.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 256)])]
fn push_all_reduce<const BLOCK: usize>(
    mesh: Mesh,
    x: Ptr<f32>,
    slots: SymPtr<f32>,
    flags: SymPtr<i32>,
    out: Ptr<f32>,
    n: i32,
    epoch: i32,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let pid = program_id(0);
    let programs = num_programs(0);
    let offs = pid * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let mine = load(x + offs, mask = mask);
    for peer in 0..ranks {
        store(remote(slots, peer) + rank * n + offs, mine, mask = mask);
        atomic_xchg(
            remote(flags, peer) + rank * programs + pid,
            epoch,
            sem = "release",
            scope = "sys",
        );
    }
    let mut acc = zeros([BLOCK], f32);
    for src in 0..ranks {
        signal_wait_until(flags + src * programs + pid, "ge", epoch);
        acc += load(slots + src * n + offs, mask = mask, other = 0.0);
    }
    store(out + offs, acc, mask = mask);
}

/// Each rank writes its rank into its own `marks`, meets every other rank
/// at `distributed_barrier`, then reads every peer's mark (and would read a
/// stale one if the barrier let it through early).
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 32)])]
fn barrier_then_read<const BLOCK: usize>(mesh: Mesh, marks: SymPtr<i32>, seen: Ptr<i32>) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let pid = program_id(0);
    store(marks + pid, rank + 100);
    distributed_barrier(mesh);
    for peer in 0..ranks {
        store(seen + pid * ranks + peer, load(remote(marks, peer) + pid));
    }
}

fn all_reduce_matches_the_reference(mesh: &mut Mesh, n: usize, epoch: i32) {
    const BLOCK: usize = 256;
    let ranks = mesh.ranks();
    let programs = n.div_ceil(BLOCK);
    let mut rng = fresh_rng();
    let inputs: Vec<Vec<f32>> = (0..ranks).map(|_| rng.vec(n, 1.0)).collect();
    let upload = |data: &[Vec<f32>]| -> Vec<Buffer<f32>> {
        (0..ranks)
            .map(|r| mesh.device(r).and_then(|d| d.upload(&data[r])))
            .collect::<Result<_, _>>()
            .expect("upload")
    };
    let x = upload(&inputs);
    let out = upload(&vec![vec![f32::NAN; n]; ranks]);
    let slots = mesh.alloc::<f32>(ranks * n).expect("slots");
    let flags = mesh.alloc_zeros::<i32>(ranks * programs).expect("flags");
    mesh.run(|rank, dev| {
        let r = rank.index();
        push_all_reduce::<BLOCK>::launch(
            dev,
            programs as u32,
            rank,
            &x[r],
            &slots.rank(r)?,
            &flags.rank(r)?,
            &out[r],
            n as i32,
            epoch,
        )
    })
    .expect("run");
    for (r, buffer) in out.iter().enumerate() {
        let got = buffer.download().expect("download");
        for i in 0..n {
            let want: f64 = inputs.iter().map(|x| f64::from(x[i])).sum();
            let scale: f64 = inputs.iter().map(|x| f64::from(x[i]).abs()).sum();
            let err = (f64::from(got[i]) - want).abs();
            assert!(
                err <= 1e-6 * scale.max(1e-3),
                "rank {r} element {i}: got {}, want {want}",
                got[i]
            );
        }
    }
}

#[test]
fn all_reduce_on_the_interpreter() {
    for ranks in [2, 4] {
        let mut mesh = Mesh::interpreter(ranks).expect("mesh");
        all_reduce_matches_the_reference(&mut mesh, 1000, 1);
    }
}

fn barrier_orders_the_ranks(mesh: &mut Mesh, programs: usize) {
    let ranks = mesh.ranks();
    let marks = mesh.alloc_zeros::<i32>(programs).expect("marks");
    let seen: Vec<Buffer<i32>> = (0..ranks)
        .map(|r| {
            mesh.device(r)
                .and_then(|d| d.upload(&vec![-1; programs * ranks]))
        })
        .collect::<Result<_, _>>()
        .expect("upload");
    mesh.run(|rank, dev| {
        let r = rank.index();
        barrier_then_read::<32>::launch(dev, programs as u32, rank, &marks.rank(r)?, &seen[r])
    })
    .expect("run");
    for (r, buffer) in seen.iter().enumerate() {
        let got = buffer.download().expect("download");
        for p in 0..programs {
            for peer in 0..ranks {
                assert_eq!(
                    got[p * ranks + peer],
                    peer as i32 + 100,
                    "rank {r} program {p} peer {peer}"
                );
            }
        }
    }
}

#[test]
fn barrier_on_the_interpreter() {
    for ranks in [2, 4] {
        let mut mesh = Mesh::interpreter(ranks).expect("mesh");
        barrier_orders_the_ranks(&mut mesh, 3);
    }
}

#[test]
fn kernels_across_ranks_on_the_gpu() {
    if Device::count() == 0 {
        eprintln!("skipped: no CUDA GPU");
        return;
    }
    for ranks in [2, 4] {
        let mut mesh = Mesh::new(ranks).expect("mesh");
        assert_ne!(mesh.placement(), Placement::Interpreter);
        let programs = mesh.programs_per_rank().min(16) as usize;
        all_reduce_matches_the_reference(&mut mesh, 256 * programs - 17, 1);
        all_reduce_matches_the_reference(&mut mesh, 256 * programs - 17, 2);
        barrier_orders_the_ranks(&mut mesh, programs);
    }
}
