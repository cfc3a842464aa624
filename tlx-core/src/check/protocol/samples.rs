//! The run-time values a skeleton run is tried with. Integer parameters the
//! skeleton needs (sizes that set trip counts: `K`, `M`, `N`, a tile count)
//! take values from a ladder; the grid takes one and two clusters when
//! the skeleton reads `program_id` or `num_programs` (persistent kernels).
//!
//! Why concrete values decide for every trip count: barrier phases are
//! parities and ring indices are counters modulo the stage count, so the
//! skeleton's state at the head of a loop over a ring of `S` stages repeats
//! with period `2S` in the iteration number; a protocol error shows within
//! the first `2S + 1` iterations of the loop or never, since later
//! iterations see no state the earlier ones did not. Trip counts are
//! `ceil(n / B)` for a block `B` among the kernel's constants (or `n`
//! itself), so a size parameter's ladder holds `B * t + 1` for every
//! constant `B` that divides it on the way to a loop bound (see `blocks`:
//! per parameter, so a batch count that no block divides climbs only
//! `1..=T`) and `t` in `0..T`, and `1..=T`, with `T = 2S + 1` for the
//! kernel's largest ring (`S` the most buffers or barriers one allocation
//! holds): every loop sees each trip count from 1 to `T`
//! (`ladder_gives_every_trip_count` checks it). Each size parameter runs up
//! its ladder while the others sit at their pivots (`B + 1` for the
//! largest block of each, 2 without one), which give every loop two trips
//! or more (so a persistent loop carries its ring state across tiles), and
//! all of them together run up to the pivots; producers and consumers
//! share their bounds, so they iterate alike.
//!
//! A persistent kernel multiplies its sizes (batch × heads × tiles of one
//! program), so the pivots can make runs very long. The checker then
//! lowers them (`Sizes::pivots`: each to its next smaller `B + 1`, down to
//! 2) until a run with every size at its pivot stays short: the varied
//! size still climbs its whole ladder, and loops over the others still
//! run, with fewer trips.

use std::collections::{HashMap, HashSet};

use crate::interp::{ArgValue, Schedule};
use crate::ir::{
    BinaryOp, Block, Kernel, Literal, Op, OpKind, ParamKind, ScalarType, Type, ValueId,
};

use super::slice::Skeleton;

/// One skeleton run's inputs.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    pub(crate) grid: [u32; 3],
    /// `None`: a parameter the skeleton does not need (opaque).
    pub(crate) args: Vec<Option<ArgValue>>,
    pub(crate) interleaving: Interleaving,
}

/// How a sample's tasks are interleaved.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Interleaving {
    /// One run in this order.
    Fixed(Schedule),
    /// Every order of the first program's dependent steps, up to
    /// `EXPLORED_RUNS` runs (`crate::interp::explore_skeleton`).
    Explored,
}

/// Runs the exploration of the smallest sizes may take: a budget that
/// keeps the checker's cost per configuration within a few milliseconds.
pub(crate) const EXPLORED_RUNS: usize = 64;

/// Sizes tried for integer parameters, smallest first: every trip count
/// `1..=max_trips` of `ceil(n / B)` for each block `B` in `blocks`.
pub(crate) fn ladder(blocks: &[i64], max_trips: i64) -> Vec<i64> {
    let mut values: Vec<i64> = (1..=max_trips).collect();
    for &b in blocks.iter().filter(|&&b| b > 1) {
        values.extend((0..max_trips).map(|t| b * t + 1));
    }
    values.sort_unstable();
    values.dedup();
    values
}

/// The size parameters the skeleton needs and the blocks of each.
pub(crate) struct Sizes {
    /// Parameter indices.
    params: Vec<usize>,
    /// [`blocks`] of each, in the same order.
    blocks: Vec<Vec<i64>>,
    /// Trips each loop must see: `2S + 1` for the longest ring `S`.
    max_trips: i64,
}

impl Sizes {
    pub(crate) fn new(kernel: &Kernel, skeleton: &Skeleton) -> Sizes {
        let params = sized_params(kernel, skeleton);
        let literals = int_literals(kernel);
        let blocks = params
            .iter()
            .map(|&p| blocks(kernel, skeleton, &literals, p))
            .collect();
        Sizes {
            params,
            blocks,
            max_trips: 2 * i64::from(largest_ring(kernel).max(1)) + 1,
        }
    }

    /// Each parameter's pivot number `level` (0 the highest): `B + 1` for
    /// its blocks `B`, highest first (two trips or more of every loop over
    /// it at the first), then 2; its lowest past the end.
    fn pivots(&self, level: usize) -> Vec<i64> {
        self.blocks
            .iter()
            .map(|blocks| {
                let pivots = pivot_list(blocks);
                pivots[level.min(pivots.len() - 1)]
            })
            .collect()
    }

    /// The trips every loop over the largest ring sees (`2S + 1`).
    pub(crate) fn max_trips(&self) -> i64 {
        self.max_trips
    }

    /// Whether some parameter has a pivot number `level`.
    pub(crate) fn has_level(&self, level: usize) -> bool {
        self.blocks.iter().any(|b| level < pivot_list(b).len())
    }
}

/// The pivots of a parameter with `blocks`, highest first.
fn pivot_list(blocks: &[i64]) -> Vec<i64> {
    let mut pivots: Vec<i64> = blocks.iter().map(|b| b.max(&1) + 1).chain([2]).collect();
    pivots.sort_unstable_by(|a, b| b.cmp(a));
    pivots.dedup();
    pivots
}

/// The samples for `kernel` around pivot number `level`, in the order to
/// try them (small first, so the first failure is the simplest to explain).
pub(crate) fn samples(
    kernel: &Kernel,
    skeleton: &Skeleton,
    sizes: &Sizes,
    level: usize,
) -> Vec<Sample> {
    // Two programs (or clusters) already split a persistent loop's tiles
    // unevenly for odd tile counts, which the ladder gives.
    let grids = if reads_program(kernel, skeleton) {
        vec![1, 2]
    } else {
        vec![1]
    };
    let pivots = sizes.pivots(level);
    let highest = pivots.iter().copied().max().unwrap_or(0);
    let every_block: Vec<i64> = sizes.blocks.iter().flatten().copied().collect();
    // All sizes together up to their pivots (one run when there are none)...
    let mut together: Vec<Vec<i64>> = match sizes.params.len() {
        0 => vec![Vec::new()],
        1 => Vec::new(),
        _ => ladder(&every_block, sizes.max_trips)
            .into_iter()
            .filter(|&v| v <= highest)
            .map(|v| pivots.iter().map(|&p| v.min(p)).collect())
            .collect(),
    };
    together.dedup();
    // ...then each up its own ladder with the others at their pivots.
    let one_at_a_time = sizes
        .blocks
        .iter()
        .enumerate()
        .flat_map(|(varied, blocks)| {
            let pivots = &pivots;
            ladder(blocks, sizes.max_trips).into_iter().map(move |v| {
                let mut values = pivots.clone();
                values[varied] = v;
                values
            })
        });
    // The happens-before checks do not depend on the interleaving, but
    // which phase a wait sees, which copy lands first and whether a peer
    // has exited do: the smallest sizes (short runs) are explored under
    // every order of their dependent steps, up to a budget (its first run
    // is the round-robin one); the others run round robin, and the pivot
    // also under one random interleaving of longer runs.
    let round_robin = Interleaving::Fixed(Schedule::RoundRobin);
    let random = Interleaving::Fixed(Schedule::Random { seed: 1 });
    let mut pivot_seen = false;
    let runs = together
        .into_iter()
        .chain(one_at_a_time)
        .enumerate()
        .map(|(i, values)| {
            let first_pivot = values == pivots && !std::mem::replace(&mut pivot_seen, true);
            let interleavings = if i == 0 {
                vec![Interleaving::Explored]
            } else if first_pivot {
                vec![round_robin, random]
            } else {
                vec![round_robin]
            };
            (values, interleavings)
        })
        .collect::<Vec<_>>();
    let mut out = Vec::new();
    for (values, schedules) in runs {
        for &programs in &grids {
            let grid = [0, 1, 2].map(|a| {
                let clusters = if a == 0 { programs } else { 1 };
                clusters * kernel.options.cluster[a].max(1)
            });
            for &interleaving in &schedules {
                // The exploration's budget goes to the one-program grid;
                // the grid of two runs round robin.
                let interleaving = match interleaving {
                    Interleaving::Explored if programs > 1 => round_robin,
                    other => other,
                };
                out.push(Sample {
                    grid,
                    args: args(kernel, skeleton, &sizes.params, &values),
                    interleaving,
                });
            }
        }
    }
    out
}

/// The kernel's constants that can be blocks of the trip counts a size
/// parameter (`param`, an index) sets: those whose value `B` is a literal
/// operand, as `B` (`step_by(B)`, `n / B`), `B - 1` (`(n + B - 1) / B`) or
/// `log2 B` (a shift), of a skeleton op other than a product that computes
/// on a value derived from the parameter. A constant that appears in none of these forms next
/// to the parameter cannot divide it on the way to a loop bound (a head
/// dimension that only shapes data, a tile size that divides another
/// size), so its ladder values would repeat trip counts others give, and
/// each costs a run as long as the parameter is large.
fn blocks(
    kernel: &Kernel,
    skeleton: &Skeleton,
    literals: &HashMap<ValueId, i64>,
    param: usize,
) -> Vec<i64> {
    let derived = derived_from(kernel, kernel.params[param].value, literals);
    let mut beside: HashSet<i64> = HashSet::new();
    walk_ops(&kernel.body, &mut |op| {
        let operands = op.kind.operands();
        let computes = op.results.iter().any(|r| skeleton.needed.contains(r))
            || skeleton.keep.contains(&op.id);
        if computes && !scales(&op.kind, literals) && operands.iter().any(|v| derived.contains(v)) {
            beside.extend(operands.iter().filter_map(|v| literals.get(v).copied()));
        }
    });
    let mut blocks: Vec<i64> = kernel
        .consts
        .iter()
        .map(|&(_, b)| b)
        .filter(|&b| {
            let log2 = (b > 0 && b.count_ones() == 1).then(|| i64::from(b.trailing_zeros()));
            beside.contains(&b)
                || beside.contains(&(b - 1))
                || log2.is_some_and(|l| beside.contains(&l))
        })
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    blocks
}

/// The values computed from `root`, following operands to results and each
/// carried value through its loop or branch (to a fixed point: a carried
/// value feeds itself). Two paths are not followed, as what lies past them
/// divides no size: a loop's counter from its bounds (the counter numbers
/// iterations; a loop whose bound depends on it sees its trip counts
/// through the sizes of the outer loop), and a product with a literal `B`
/// (a multiple of `B`: `m * BM` divided by `BM` again sets trips that `m`
/// already does).
fn derived_from(
    kernel: &Kernel,
    root: ValueId,
    literals: &HashMap<ValueId, i64>,
) -> HashSet<ValueId> {
    let mut derived = HashSet::from([root]);
    let mut changed = true;
    while changed {
        changed = false;
        walk_ops(&kernel.body, &mut |op| {
            let mut add = Vec::new();
            if !scales(&op.kind, literals) && op.kind.operands().iter().any(|v| derived.contains(v))
            {
                add.extend(op.results.iter().copied());
            }
            for group in op.kind.carried_values(&op.results) {
                if group.iter().any(|v| derived.contains(v)) {
                    add.extend(group);
                }
            }
            for v in add {
                changed |= derived.insert(v);
            }
        });
    }
    derived
}

/// The value of each integer constant, by the value it defines.
fn int_literals(kernel: &Kernel) -> HashMap<ValueId, i64> {
    let mut literals = HashMap::new();
    walk_ops(&kernel.body, &mut |op| {
        if let OpKind::Constant(Literal::Int(v)) = op.kind {
            literals.extend(op.results.iter().map(|&r| (r, v)));
        }
    });
    literals
}

/// Whether `kind` multiplies by a literal.
fn scales(kind: &OpKind, literals: &HashMap<ValueId, i64>) -> bool {
    match kind {
        OpKind::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => literals.contains_key(lhs) || literals.contains_key(rhs),
        _ => false,
    }
}

/// Calls `visit` on every op of `block`, nested ones after their parent.
fn walk_ops<'k>(block: &'k Block, visit: &mut impl FnMut(&'k Op)) {
    for op in &block.ops {
        visit(op);
        for inner in op.kind.blocks() {
            walk_ops(inner, visit);
        }
    }
}

/// One program with every size at its pivot number `level`: the longest
/// run the samples make at that level. `None` when no size is sampled.
pub(crate) fn all_at_pivot(
    kernel: &Kernel,
    skeleton: &Skeleton,
    sizes: &Sizes,
    level: usize,
) -> Option<Sample> {
    if sizes.params.is_empty() {
        return None;
    }
    Some(Sample {
        grid: kernel.options.cluster.map(|c| c.max(1)),
        args: args(kernel, skeleton, &sizes.params, &sizes.pivots(level)),
        interleaving: Interleaving::Fixed(Schedule::RoundRobin),
    })
}

/// The integer parameters the skeleton needs, by index.
fn sized_params(kernel: &Kernel, skeleton: &Skeleton) -> Vec<usize> {
    kernel
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| skeleton.needed.contains(&p.value))
        .filter(|(_, p)| matches!(p.kind, ParamKind::Scalar(s) if s.is_int()))
        .map(|(i, _)| i)
        .collect()
}

/// The arguments: sampled sizes, `true` for needed flags, opaque the rest.
fn args(
    kernel: &Kernel,
    skeleton: &Skeleton,
    sized: &[usize],
    values: &[i64],
) -> Vec<Option<ArgValue>> {
    kernel
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if !skeleton.needed.contains(&p.value) {
                return None;
            }
            match p.kind {
                ParamKind::Scalar(ty) if ty.is_int() => {
                    let at = sized.iter().position(|&s| s == i)?;
                    Some(ArgValue::Scalar(ty, values[at] as u64 & mask(ty)))
                }
                ParamKind::Scalar(ScalarType::Bool) => Some(ArgValue::bool(true)),
                ParamKind::Scalar(ScalarType::F32) => Some(ArgValue::f32(1.0)),
                _ => None,
            }
        })
        .collect()
}

fn mask(ty: ScalarType) -> u64 {
    match ty.size_bytes() {
        8 => u64::MAX,
        n => (1u64 << (8 * n)) - 1,
    }
}

/// The most buffers or mbarriers one allocation holds: the longest ring.
fn largest_ring(kernel: &Kernel) -> u32 {
    let mut largest = 0;
    walk_ops(&kernel.body, &mut |op| {
        let own = match op.results.first().map(|&r| kernel.type_of(r)) {
            Some(Type::SharedMemory(m)) => m.buffers(),
            Some(Type::Barriers(b)) => b.count() as u32,
            _ => 0,
        };
        largest = largest.max(own);
    });
    largest
}

/// Whether the skeleton depends on which program runs it.
fn reads_program(kernel: &Kernel, skeleton: &Skeleton) -> bool {
    let mut reads = false;
    walk_ops(&kernel.body, &mut |op| {
        reads |= matches!(
            op.kind,
            OpKind::ProgramId { .. } | OpKind::NumPrograms { .. } | OpKind::ClusterCtaRank
        ) && skeleton.keep.contains(&op.id);
    });
    reads
}

/// What running `samples` covers. Samples of one set of sizes and grid
/// come one after another (one per interleaving), so neighbours dedup.
/// What `samples` covered, with the exploration's runs and whether it
/// ran every order (`explored`).
pub(crate) fn coverage(samples: &[Sample], trips: i64, explored: (usize, bool)) -> super::Coverage {
    let mut sizes: Vec<(&[Option<ArgValue>], [u32; 3])> = samples
        .iter()
        .map(|s| (s.args.as_slice(), s.grid))
        .collect();
    sizes.dedup();
    let fixed = samples
        .iter()
        .filter(|s| matches!(s.interleaving, Interleaving::Fixed(_)))
        .count();
    super::Coverage {
        runs: fixed + explored.0,
        random_interleavings: samples
            .iter()
            .filter(|s| matches!(s.interleaving, Interleaving::Fixed(Schedule::Random { .. })))
            .count(),
        sizes: sizes.len(),
        trips,
        explored: explored.0,
        explored_all: explored.1,
    }
}

/// The sample's sizes and grid, for messages: `K = 65, a grid of 3 programs`.
pub(crate) fn describe(kernel: &Kernel, sample: &Sample) -> String {
    let mut parts: Vec<String> = kernel
        .params
        .iter()
        .zip(&sample.args)
        .filter_map(|(p, a)| match a {
            Some(ArgValue::Scalar(ty, bits)) if ty.is_int() => Some(format!(
                "{} = {}",
                p.name,
                crate::numeric::int_from_bits(*ty, *bits)
            )),
            _ => None,
        })
        .collect();
    let programs: u32 = sample.grid.iter().product();
    parts.push(if programs == 1 {
        "one program".to_owned()
    } else {
        format!("a grid of {programs} programs")
    });
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel of IR `text` and its skeleton.
    fn parsed(text: &str) -> (Kernel, Skeleton) {
        let kernel = crate::ir::parse(text).expect("parses");
        let skeleton = super::super::slice::skeleton(&kernel);
        (kernel, skeleton)
    }

    /// A ring loop over `cdiv(k, BK)` tiles whose data is `D` wide: `BK`
    /// (and the ring's `2`) may divide a trip count; `D` only shapes data.
    #[test]
    fn blocks_are_the_constants_loop_bounds_divide_by() {
        // What the frontend makes of
        // `for i in 0..cdiv(k, BK) { let s = i % 2; arrive and wait on
        // bars[s]; local_store(bufs[s], zeros([8, D], f32)) }`.
        let text = r#"
kernel "ring" {
  source "ring.rs"
  options num_warps 4 num_stages 1
  const "BK" 32
  const "D" 64
  param "x" %0 ptr<f32>
  param "k" %1 i32
  %2 = local_alloc : smem<8x64xf32, buffers 2, swizzle 128b, mutable>  // line 4:15
  %3 = alloc_barriers [1] : barriers<2>  // line 5:15
  %4 = constant 32 : i32  // line 6:16
  %5 = add %1, %4 : i32  // line 6:16
  %6 = constant 1 : i32  // line 6:16
  %7 = sub %5, %6 : i32  // line 6:16
  %8 = constant 32 : i32  // line 6:16
  %9 = div %7, %8 : i32  // line 6:16
  %10 = constant 0 : i32  // line 6:4
  %11 = constant 1 : i32  // line 6:4
  for %10 to %9 step %11 iter() {  // line 11:8
    ^(%12: i32)
    %13 = constant 2 : i32  // line 7:16
    %14 = rem %12, %13 : i32  // line 7:16
    %15 = local_view %3, %14 : barriers<1>  // line 8:18
    %16 = constant true : bool  // line 9:8
    barrier_arrive %15, %16 [1]  // line 9:8
    %17 = constant 2 : i32  // line 10:27
    %18 = div %12, %17 : i32  // line 10:27
    %19 = constant 2 : i32  // line 10:26
    %20 = rem %18, %19 : i32  // line 10:26
    %21 = constant true : bool  // line 10:8
    barrier_wait %15, %20, %21  // line 10:8
    %22 = local_view %2, %14 : smem<8x64xf32, buffers 1, swizzle 128b, mutable>  // line 11:20
    %23 = constant 0.0 : tensor<8x64xf32>  // line 11:41
    local_store %22, %23  // line 11:8
    yield  // line 11:8
  }
}
"#;
        let (kernel, skeleton) = parsed(text);
        let literals = int_literals(&kernel);
        assert_eq!(blocks(&kernel, &skeleton, &literals, 1), vec![32]);
    }

    /// `for t in 0..cdiv(m, BM) * b { for k in 0..cdiv(t % 4 * BM + BM, BK) {
    /// ring } }`: `BM` divides `m`; `b` (a batch) is divided by nothing,
    /// and `BK` divides only a multiple of `BM` computed from the counter.
    #[test]
    fn blocks_are_per_parameter() {
        let text = r#"
kernel "tiles" {
  source "tiles.rs"
  options num_warps 4 num_stages 1
  const "BM" 64
  const "BK" 32
  param "m" %0 i32
  param "b" %1 i32
  %2 = alloc_barriers [1] : barriers<2>  // line 4:15
  %3 = constant 64 : i32  // line 5:16
  %4 = add %0, %3 : i32  // line 5:16
  %5 = constant 1 : i32  // line 5:16
  %6 = sub %4, %5 : i32  // line 5:16
  %7 = div %6, %3 : i32  // line 5:16
  %8 = mul %7, %1 : i32  // line 5:16
  %9 = constant 0 : i32  // line 6:4
  for %9 to %8 step %5 iter() {  // line 6:8
    ^(%10: i32)
    %11 = constant 4 : i32  // line 7:16
    %12 = rem %10, %11 : i32  // line 7:16
    %13 = mul %12, %3 : i32  // line 7:16
    %14 = add %13, %3 : i32  // line 7:16
    %15 = constant 32 : i32  // line 7:16
    %16 = add %14, %15 : i32  // line 7:16
    %17 = sub %16, %5 : i32  // line 7:16
    %18 = div %17, %15 : i32  // line 7:16
    for %9 to %18 step %5 iter() {  // line 8:8
      ^(%19: i32)
      %20 = constant 2 : i32  // line 9:16
      %21 = rem %19, %20 : i32  // line 9:16
      %22 = local_view %2, %21 : barriers<1>  // line 9:18
      %23 = constant true : bool  // line 9:8
      barrier_arrive %22, %23 [1]  // line 9:8
      %24 = div %19, %20 : i32  // line 10:27
      %25 = rem %24, %20 : i32  // line 10:26
      barrier_wait %22, %25, %23  // line 10:8
      yield  // line 10:8
    }
    yield  // line 11:8
  }
}
"#;
        let (kernel, skeleton) = parsed(text);
        let literals = int_literals(&kernel);
        assert_eq!(blocks(&kernel, &skeleton, &literals, 0), vec![64]);
        assert_eq!(blocks(&kernel, &skeleton, &literals, 1), Vec::<i64>::new());
        let sizes = Sizes::new(&kernel, &skeleton);
        assert_eq!(sizes.pivots(0), vec![65, 2]);
        assert_eq!(sizes.pivots(1), vec![2, 2]);
        assert!(sizes.has_level(1) && !sizes.has_level(2));
    }

    #[test]
    fn ladder_gives_every_trip_count() {
        let blocks = [16, 64, 128, 256];
        let ladder = ladder(&blocks, 9);
        for block in blocks.iter().chain(&[1]) {
            for trips in 1..=9 {
                assert!(
                    ladder.iter().any(|&n| (n + block - 1) / block == trips),
                    "no ladder value gives {trips} trips of {block}"
                );
            }
        }
    }
}
