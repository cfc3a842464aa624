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

/// A mesh of two axes (`Mesh<2>`): each rank marks its slot with its
/// coordinates, then reads those of the ranks in its row (along axis 1)
/// after a barrier over that row only; marks again, and reads its column's
/// (axis 0) after a barrier over the column.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 32)])]
fn rows_then_columns<const BLOCK: usize>(mesh: Mesh<2>, marks: SymPtr<i32>, seen: Ptr<i32>) {
    let (row, col) = (shard_id(mesh, 0), shard_id(mesh, 1));
    let (rows, cols) = (shard_count(mesh, 0), shard_count(mesh, 1));
    let pid = program_id(0);
    store(marks + pid, row * 100 + col);
    distributed_barrier(mesh, 1);
    for c in 0..cols {
        store(
            seen + pid * 16 + c,
            load(remote(marks, row * cols + c) + pid),
        );
    }
    // Every rank of the row has read this rank's mark: overwrite it.
    distributed_barrier(mesh, 1);
    store(marks + pid, 1000 + row * 100 + col);
    distributed_barrier(mesh, 0);
    for r in 0..rows {
        store(
            seen + pid * 16 + 8 + r,
            load(remote(marks, r * cols + col) + pid),
        );
    }
}

fn rows_and_columns_meet(mesh: &mut Mesh, programs: usize) {
    let ranks = mesh.ranks();
    let (rows, cols) = match mesh.shape() {
        [r, c] => (*r, *c),
        [r] => (*r, 1),
        other => panic!("a mesh of shape {other:?}"),
    };
    let marks = mesh.alloc_zeros::<i32>(programs).expect("marks");
    let seen = mesh
        .upload_each(&vec![vec![-1i32; programs * 16]; ranks])
        .expect("upload");
    mesh.run(|rank, dev| {
        let r = rank.index();
        rows_then_columns::<32>::launch(dev, programs as u32, rank, &marks.rank(r)?, &seen[r])
    })
    .expect("run");
    for (rank, buffer) in seen.iter().enumerate() {
        let (row, col) = (rank / cols, rank % cols);
        let got = buffer.download().expect("download");
        for p in 0..programs {
            for c in 0..cols {
                let want = (row * 100 + c) as i32;
                assert_eq!(
                    got[p * 16 + c],
                    want,
                    "rank {rank} program {p}: row peer {c}"
                );
            }
            for r in 0..rows {
                let want = (1000 + r * 100 + col) as i32;
                assert_eq!(
                    got[p * 16 + 8 + r],
                    want,
                    "rank {rank} program {p}: column peer {r}"
                );
            }
        }
    }
}

#[test]
fn meshes_of_two_axes_on_the_interpreter() {
    for shape in [[2, 2], [2, 3], [3, 2], [4, 2]] {
        let ranks = shape[0] * shape[1];
        let mut mesh = Mesh::interpreter(ranks)
            .expect("mesh")
            .reshape(&shape)
            .expect("shape");
        rows_and_columns_meet(&mut mesh, 3);
    }
    // A one-axis mesh seen as `Mesh<2>`: one column of rows.
    let mut mesh = Mesh::interpreter(3).expect("mesh");
    rows_and_columns_meet(&mut mesh, 2);
}

/// Each rank's coordinates and extents as a `Mesh<3>` and as a `Mesh<2>`
/// (which sees the first two axes) sees them.
#[tlx::kernel(arch = "sm_90a")]
fn coordinates(mesh: Mesh<3>, flat: Mesh<2>, out: Ptr<i32>) {
    for axis in static_range(0, 3) {
        store(out + axis, shard_id(mesh, axis));
        store(out + 3 + axis, shard_count(mesh, axis));
    }
    for axis in static_range(0, 2) {
        store(out + 6 + axis, shard_id(flat, axis));
        store(out + 8 + axis, shard_count(flat, axis));
    }
}

#[test]
fn coordinates_on_a_mesh_of_three_axes() {
    let mut mesh = Mesh::interpreter(8)
        .expect("mesh")
        .reshape(&[2, 2, 2])
        .expect("shape");
    let out = mesh.upload_each(&vec![vec![-1i32; 10]; 8]).expect("upload");
    mesh.run(|rank, dev| coordinates::launch(dev, 1, rank, rank, &out[rank.index()]))
        .expect("run");
    for (r, buffer) in out.iter().enumerate() {
        let (i, j, k) = (r / 4, (r / 2) % 2, r % 2);
        let want = [i, j, k, 2, 2, 2, i, j, 2, 2].map(|v| v as i32);
        assert_eq!(buffer.download().expect("download"), want, "rank {r}");
    }
}

#[test]
fn reshape_checks_the_shape() {
    let mesh = || Mesh::interpreter(4).expect("mesh");
    for bad in [&[3, 2][..], &[], &[1, 2, 2, 1]] {
        let err = mesh().reshape(bad).expect_err("a bad shape").to_string();
        assert!(err.contains("product"), "{err}");
    }
    assert_eq!(
        mesh().reshape(&[2, 1, 2]).expect("shape").shape(),
        [2, 1, 2]
    );
}

/// Each rank fills its `[rows, cols]` tile matrix, then (after a barrier)
/// copies the next rank's by TMA, through a descriptor it builds over the
/// peer's buffer (`make_tensor_descriptor(remote(..))`): blocks past the
/// edges read zeros there and write nothing.
#[tlx::kernel(arch = "sm_90a", configs = [(BR = 16, BC = 32)])]
fn pull_by_tma<const BR: usize, const BC: usize>(
    mesh: Mesh,
    tiles: SymPtr<f32>,
    out: Ptr<f32>,
    rows: i32,
    cols: i32,
) {
    let rank = shard_id(mesh, 0);
    let next = (rank + 1) % shard_count(mesh, 0);
    let r = program_id(0) * BR + arange(0, BR);
    let c = program_id(1) * BC + arange(0, BC);
    let inside = (r[(.., None)] < rows) & (c[(None, ..)] < cols);
    let mark = (rank * 1000000 + r[(.., None)] * cols + c[(None, ..)]).to(f32);
    store(
        tiles + r[(.., None)] * cols + c[(None, ..)],
        mark,
        mask = inside,
    );
    distributed_barrier(mesh);
    let peer = make_tensor_descriptor(remote(tiles, next), [rows, cols], [cols, 1], [BR, BC]);
    let mine = make_tensor_descriptor(out, [rows, cols], [cols, 1], [BR, BC]);
    mine.store(
        [program_id(0) * BR, program_id(1) * BC],
        peer.load([program_id(0) * BR, program_id(1) * BC]),
    );
}

fn tma_pulls_the_next_ranks_tiles(mesh: &mut Mesh, (rows, cols): (usize, usize)) {
    let ranks = mesh.ranks();
    let tiles = mesh.alloc_zeros::<f32>(rows * cols).expect("tiles");
    let out = mesh
        .upload_each(&vec![vec![f32::NAN; rows * cols]; ranks])
        .expect("upload");
    let grid = (rows.div_ceil(16) as u32, cols.div_ceil(32) as u32);
    // The barrier needs every program of every rank running at once (the
    // interpreter runs them all in one schedule).
    let resident =
        mesh.placement() == Placement::Interpreter || grid.0 * grid.1 <= mesh.programs_per_rank();
    assert!(
        resident,
        "{grid:?} programs per rank cannot all run at once"
    );
    mesh.run(|rank, dev| {
        let r = rank.index();
        let (rows, cols) = (rows as i32, cols as i32);
        pull_by_tma::<16, 32>::launch(dev, grid, rank, &tiles.rank(r)?, &out[r], rows, cols)
    })
    .expect("run");
    for (r, buffer) in out.iter().enumerate() {
        let got = buffer.download().expect("download");
        let next = (r + 1) % ranks;
        for (i, v) in got.iter().enumerate() {
            assert_eq!(*v, (next * 1000000 + i) as f32, "rank {r} element {i}");
        }
    }
}

#[test]
fn tma_through_remote_on_the_interpreter() {
    for ranks in [2, 3] {
        let mut mesh = Mesh::interpreter(ranks).expect("mesh");
        tma_pulls_the_next_ranks_tiles(&mut mesh, (37, 40));
    }
}

fn all_reduce_matches_the_reference(mesh: &mut Mesh, n: usize, epoch: i32) {
    const BLOCK: usize = 256;
    let ranks = mesh.ranks();
    let programs = n.div_ceil(BLOCK);
    let mut rng = fresh_rng();
    let inputs: Vec<Vec<f32>> = (0..ranks).map(|_| rng.vec(n, 1.0)).collect();
    let upload = |data: &[Vec<f32>]| mesh.upload_each(data).expect("upload");
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
    let seen = mesh
        .upload_each(&vec![vec![-1i32; programs * ranks]; ranks])
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
        tma_pulls_the_next_ranks_tiles(&mut mesh, (150, 96));
    }
    let mut mesh = Mesh::new(4).expect("mesh").reshape(&[2, 2]).expect("shape");
    let programs = mesh.programs_per_rank().min(16) as usize;
    rows_and_columns_meet(&mut mesh, programs);
}

/// The all-reduce's protocol with one thing broken, by `MODE`: 1 raises no
/// flag; 2 raises it before the data it announces is stored; 3 pushes a
/// second round into the same slots without waiting for the peers to have
/// read the first.
#[tlx::kernel(arch = "sm_90a", configs = [
    (BLOCK = 16, MODE = 1), (BLOCK = 16, MODE = 2), (BLOCK = 16, MODE = 3),
])]
fn broken_push<const BLOCK: usize, const MODE: usize>(
    mesh: Mesh,
    x: Ptr<f32>,
    slots: SymPtr<f32>,
    flags: SymPtr<i32>,
    out: Ptr<f32>,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let offs = arange(0, BLOCK);
    let rounds = if MODE == 3 { 2 } else { 1 };
    for round in 0..rounds {
        for peer in 0..ranks {
            let flag = remote(flags, peer) + rank;
            if MODE == 2 {
                atomic_xchg(flag, round + 1, sem = "release", scope = "sys");
            }
            store(
                remote(slots, peer) + rank * BLOCK + offs,
                load(x + round * BLOCK + offs),
            );
            if MODE == 3 {
                atomic_xchg(flag, round + 1, sem = "release", scope = "sys");
            }
        }
        let mut acc = zeros([BLOCK], f32);
        for src in 0..ranks {
            signal_wait_until(flags + src, "ge", round + 1);
            acc += load(slots + src * BLOCK + offs);
        }
        store(out + round * BLOCK + offs, acc);
    }
}

/// The all-gather's protocol (a copier program pulls peers' splits into
/// `full` and counts them in `ready`; a consumer program reads them) with
/// one thing broken, by `MODE`: 1 counts each split before copying it; 2
/// reads without waiting for the count.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 16, MODE = 1), (BLOCK = 16, MODE = 2)])]
fn broken_gather<const BLOCK: usize, const MODE: usize>(
    mesh: Mesh,
    shard: SymPtr<f32>,
    full: Ptr<f32>,
    ready: Ptr<i32>,
    out: Ptr<f32>,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let offs = arange(0, BLOCK);
    if program_id(0) == 0 {
        for step in 1..ranks {
            let src = (rank + step) % ranks;
            if MODE == 1 {
                atomic_add(ready, 1, sem = "release", scope = "gpu");
            }
            store(full + src * BLOCK + offs, load(remote(shard, src) + offs));
            if MODE == 2 {
                atomic_add(ready, 1, sem = "release", scope = "gpu");
            }
        }
    } else {
        if MODE == 1 {
            signal_wait_until(ready, "ge", ranks - 1);
        }
        for step in 1..ranks {
            let src = (rank + step) % ranks;
            store(
                out + src * BLOCK + offs,
                load(full + src * BLOCK + offs) * 2.0,
            );
        }
    }
}

/// The reduce-scatter's protocol (each rank pushes a partial into slot
/// `rank` of the owner and counts it there; the owner sums its slots once
/// every rank has counted) with the count raised before the partial is
/// stored.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 16)])]
fn broken_scatter<const BLOCK: usize>(
    mesh: Mesh,
    x: Ptr<f32>,
    partials: SymPtr<f32>,
    arrived: SymPtr<i32>,
    out: Ptr<f32>,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let offs = arange(0, BLOCK);
    for step in 1..ranks + 1 {
        let owner = (rank + step) % ranks;
        atomic_add(remote(arrived, owner), 1, sem = "release", scope = "sys");
        store(
            remote(partials, owner) + rank * BLOCK + offs,
            load(x + owner * BLOCK + offs),
        );
    }
    signal_wait_until(arrived, "ge", ranks);
    let mut sum = zeros([BLOCK], f32);
    for src in 0..ranks {
        sum += load(partials + src * BLOCK + offs);
    }
    store(out + offs, sum);
}

/// What a mesh run of a broken kernel reports: the interpreter's message.
fn report(run: Result<(), tlx::Error>) -> String {
    match run {
        Err(tlx::Error::Interpreter { message, .. }) => {
            eprintln!("reported: {message}");
            message
        }
        other => panic!("expected the interpreter to report the broken protocol, got {other:?}"),
    }
}

fn broken_push_report(mode: usize, ranks: usize) -> String {
    let mut mesh = Mesh::interpreter(ranks).expect("mesh");
    let x = mesh
        .upload_each(&vec![vec![1.5f32; 32]; ranks])
        .expect("upload");
    let out = mesh.alloc_each::<f32>(32).expect("alloc");
    let slots = mesh.alloc::<f32>(16 * ranks).expect("slots");
    let flags = mesh.alloc_zeros::<i32>(ranks).expect("flags");
    report(mesh.run(|rank, dev| {
        let r = rank.index();
        let args = (&x[r], &slots.rank(r)?, &flags.rank(r)?, &out[r]);
        match mode {
            1 => broken_push::<16, 1>::launch(dev, 1, rank, args.0, args.1, args.2, args.3),
            2 => broken_push::<16, 2>::launch(dev, 1, rank, args.0, args.1, args.2, args.3),
            _ => broken_push::<16, 3>::launch(dev, 1, rank, args.0, args.1, args.2, args.3),
        }
    }))
}

#[test]
fn a_missing_signal_is_a_deadlock_naming_the_wait() {
    let report = broken_push_report(1, 2);
    assert!(report.contains("signal_wait_until"), "{report}");
    assert!(
        report.contains("of rank 0") && report.contains("of rank 1"),
        "{report}"
    );
}

#[test]
fn a_signal_before_its_data_is_a_race_naming_rank_and_line() {
    for ranks in [2, 4] {
        let report = broken_push_report(2, ranks);
        // Read after the early signal: a read before the data it announces;
        // read before the store (a random schedule): that store overwrites
        // what the reader took.
        assert!(
            report.contains("no signal orders that write before this read")
                || report.contains("has not released"),
            "{report}"
        );
        assert!(report.contains("of rank"), "{report}");
        assert!(report.contains("line"), "{report}");
    }
}

#[test]
fn a_slot_reused_before_its_reader_is_done_is_a_race() {
    let report = broken_push_report(3, 2);
    assert!(
        report.contains("has not released") || report.contains("no signal orders"),
        "{report}"
    );
}

#[test]
fn a_split_counted_before_it_is_copied_or_read_unwaited_is_a_race() {
    for mode in [1, 2] {
        let mut mesh = Mesh::interpreter(2).expect("mesh");
        let shard = mesh.alloc_zeros::<f32>(16).expect("shard");
        let full = mesh.alloc_zeros_each::<f32>(32).expect("alloc");
        let out = mesh.alloc_zeros_each::<f32>(32).expect("alloc");
        let ready = mesh.alloc_zeros_each::<i32>(1).expect("alloc");
        let run = mesh.run(|rank, dev| {
            let r = rank.index();
            let args = (&shard.rank(r)?, &full[r], &ready[r], &out[r]);
            if mode == 1 {
                broken_gather::<16, 1>::launch(dev, 2, rank, args.0, args.1, args.2, args.3)
            } else {
                broken_gather::<16, 2>::launch(dev, 2, rank, args.0, args.1, args.2, args.3)
            }
        });
        let report = report(run);
        assert!(
            report.contains("has not released") || report.contains("no signal orders"),
            "mode {mode}: {report}"
        );
    }
}

#[test]
fn a_partial_counted_before_it_is_stored_is_a_race() {
    let mut mesh = Mesh::interpreter(2).expect("mesh");
    let x = mesh
        .upload_each(&vec![vec![0.25f32; 32]; 2])
        .expect("upload");
    let out = mesh.alloc_each::<f32>(16).expect("alloc");
    let partials = mesh.alloc::<f32>(32).expect("partials");
    let arrived = mesh.alloc_zeros::<i32>(1).expect("arrived");
    let report = report(mesh.run(|rank, dev| {
        let r = rank.index();
        broken_scatter::<16>::launch(
            dev,
            1,
            rank,
            &x[r],
            &partials.rank(r)?,
            &arrived.rank(r)?,
            &out[r],
        )
    }));
    assert!(
        report.contains("has not released") || report.contains("no signal orders"),
        "{report}"
    );
}
