//! Row-wise ops over `[rows, cols]` tensors: [`softmax`], [`rms_norm`] and
//! [`layer_norm`], in f32, bf16 or f16, computed in f32. Two plans cover a
//! row: one program per row walking it in blocks (any number of columns), or,
//! up to 131072 columns, a cluster of up to 16 programs per row, each holding
//! a slice in registers and exchanging its partial results through the
//! peers' shared memory (the row read once, and a few rows still fill the
//! GPU). The autotuner picks per shape among the plans that fit it.

use crate::prelude::*;
use crate::{Element, PtrArg};

/// Element types the row-wise ops take: `f32`, `bf16` and `f16`.
pub trait RowElement: Element + sealed::Sealed {}

impl RowElement for f32 {}
impl RowElement for bf16 {}
impl RowElement for f16 {}

mod sealed {
    use crate::{Device, Error, PtrArg};

    /// What one row-wise op is asked to do.
    pub enum Row<'a, P> {
        Softmax,
        RmsNorm {
            weight: &'a P,
            eps: f32,
        },
        LayerNorm {
            weight: &'a P,
            bias: &'a P,
            eps: f32,
        },
    }

    /// The kernels of one element type.
    pub trait Sealed: crate::Element {
        fn launch<P: PtrArg<Self>>(
            device: &Device,
            op: Row<'_, P>,
            operands: (&P, &P),
            shape: (usize, usize),
        ) -> Result<(), Error>;
    }
}

use sealed::Row;

/// Checks a `[rows, cols]` op's operands; `params` are its per-column
/// vectors (weight, bias).
fn check<T: Element, P: PtrArg<T>>(
    op: &'static str,
    (x, y): (&P, &P),
    params: &[(&str, &P)],
    (rows, cols): (usize, usize),
) -> Result<(), Error> {
    let n = super::extents(op, &[("rows", rows), ("cols", cols)])?;
    super::holds(op, "x", x, n)?;
    super::holds(op, "y", y, n)?;
    for (name, p) in params {
        super::holds(op, name, *p, cols)?;
    }
    Ok(())
}

/// `y = softmax(x)` along each row of `[rows, cols]` (row-major,
/// contiguous): `exp(x - max) / sum(exp(x - max))`.
pub fn softmax<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    y: &P,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    check("softmax", (x, y), &[], (rows, cols))?;
    T::launch(device, Row::Softmax, (x, y), (rows, cols))
}

/// `y = x / sqrt(mean(x^2) + eps) * weight` along each row of
/// `[rows, cols]`; `weight` has `cols` elements.
pub fn rms_norm<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    weight: &P,
    y: &P,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<(), Error> {
    check("rms_norm", (x, y), &[("weight", weight)], (rows, cols))?;
    T::launch(device, Row::RmsNorm { weight, eps }, (x, y), (rows, cols))
}

/// `y = (x - mean) / sqrt(var + eps) * weight + bias` along each row of
/// `[rows, cols]` (biased variance, as in PyTorch); `weight` and `bias`
/// have `cols` elements.
pub fn layer_norm<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    (weight, bias): (&P, &P),
    y: &P,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<(), Error> {
    let params = [("weight", weight), ("bias", bias)];
    check("layer_norm", (x, y), &params, (rows, cols))?;
    let op = Row::LayerNorm { weight, bias, eps };
    T::launch(device, op, (x, y), (rows, cols))
}

/// How a row-wise op covers a row: one program per row walking it in blocks
/// of `BLOCK` columns, or a cluster of `K` programs per row, each holding
/// `SLICE` columns in registers. Every value here is a compiled configuration
/// of the kernels below ([`with_plan`] binds it to their constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Row { block: usize },
    Split { slice: usize, k: usize },
}

const ROW_BLOCKS: [usize; 3] = [1024, 4096, 8192];
const SPLITS: [(usize, usize); 8] = [
    (1024, 16),
    (2048, 8),
    (2048, 16),
    (4096, 4),
    (4096, 8),
    (4096, 16),
    (8192, 8),
    (8192, 16),
];

impl Plan {
    fn label(self) -> String {
        match self {
            Plan::Row { block } => format!("row BLOCK = {block}"),
            Plan::Split { slice, k } => format!("cluster K = {k}, SLICE = {slice}"),
        }
    }
}

/// The plans worth trying on `[rows, cols]`, the untimed choice first (what
/// the interpreter and `TLX_AUTOTUNE=off` run). A split plan covers the row
/// with less than half of its cluster to spare, so that few of its programs
/// idle; it comes first where one program per row would leave the GPU short
/// of rows or read a long row twice.
fn plans(device: &Device, (rows, cols): (usize, usize)) -> Vec<Plan> {
    let row = ROW_BLOCKS.iter().map(|&block| Plan::Row { block });
    let split: Vec<Plan> = SPLITS
        .iter()
        .filter(|&&(slice, k)| slice * k >= cols && slice * k < 2 * cols)
        .map(|&(slice, k)| Plan::Split { slice, k })
        .collect();
    let few_rows = rows < 4 * device.multiprocessor_count() as usize;
    if few_rows || cols > 8192 {
        split.into_iter().chain(row).collect()
    } else {
        row.chain(split).collect()
    }
}

/// Runs the fastest plan for this shape (timed once per rows rounded up to a
/// power of two and cols, then remembered: see `tlx::autotune`).
fn choose_plan(
    device: &Device,
    kernel: &str,
    (rows, cols): (usize, usize),
    mut launch: impl FnMut(Plan) -> Result<(), Error>,
) -> Result<(), Error> {
    let plans = plans(device, (rows, cols));
    let labels: Vec<String> = plans.iter().map(|p| p.label()).collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let key = format!("rows<={}, cols={cols}", rows.next_power_of_two());
    crate::autotune(device, kernel, &key, &labels, |i| launch(plans[i])).map(|_| ())
}

/// Evaluates the first expression with `BLOCK`, or the second with `SLICE`
/// and `K`, bound as constants to the plan's values.
macro_rules! with_plan {
    ($plan:expr, |$b:ident| $row:expr, |$s:ident, $k:ident| $split:expr) => {
        with_plan!(@arms $plan, $b, $row, $s, $k, $split,
            [1024, 4096, 8192],
            [(1024, 16), (2048, 8), (2048, 16), (4096, 4), (4096, 8), (4096, 16), (8192, 8), (8192, 16)])
    };
    (@arms $plan:expr, $b:ident, $row:expr, $s:ident, $k:ident, $split:expr,
        [$($block:literal),*], [$(($slice:literal, $kk:literal)),*]) => {
        match $plan {
            $(Plan::Row { block: $block } => {
                const $b: usize = $block;
                $row
            })*
            $(Plan::Split { slice: $slice, k: $kk } => {
                const $s: usize = $slice;
                const $k: usize = $kk;
                $split
            })*
            other => Err(Error::InvalidConfig {
                kernel: "tlx::ops row-wise",
                reason: format!("no kernel is compiled for the plan {other:?}"),
            }),
        }
    };
}

macro_rules! row_kernels {
    ($t:ident, $softmax:ident, $rms:ident, $layer:ident, $softmax_split:ident, $rms_split:ident, $layer_split:ident) => {
        /// Softmax. A row of one block is read once and kept in registers;
        /// a longer one in two passes: a running maximum and a sum rescaled
        /// to it per lane, combined at the end (the row asked to stay in L2
        /// for the second pass), then the normalized values.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $softmax<const BLOCK: usize>(x: Ptr<$t>, y: Ptr<$t>, cols: i32) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let v = select(mask, v, -3.0e38);
                let e = exp(v - max(v, axis = 0));
                // One division per row, a multiply per element.
                let inv = 1.0 / sum(e, axis = 0);
                store(yr + c, (e * inv).to($t), mask = mask);
            } else {
                // Finite, so that lanes no column reaches never meet inf - inf.
                let lowest = -3.0e38;
                let mut m = full([BLOCK], lowest, f32);
                let mut s = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let v = select(mask, v.to(f32), lowest);
                    let top = maximum(m, v);
                    s = s * exp(m - top) + select(mask, exp(v - top), 0.0);
                    m = top;
                }
                let row_max = max(m, axis = 0);
                let inv = 1.0 / sum(s * exp(m - row_max), axis = 0);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    store(yr + c, (exp(v.to(f32) - row_max) * inv).to($t), mask = mask);
                }
            }
        }

        /// RMSNorm: the mean square, then the scaled row; one read of a row
        /// of one block, two of a longer one.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $rms<const BLOCK: usize>(x: Ptr<$t>, w: Ptr<$t>, y: Ptr<$t>, cols: i32, eps: f32) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let scale = rsqrt(sum(v * v, axis = 0) / cols.to(f32) + eps);
                let g = load(w + c, mask = mask, other = 0.0).to(f32);
                store(yr + c, (v * scale * g).to($t), mask = mask);
            } else {
                let mut squares = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let v = load(
                        xr + c,
                        mask = c < cols,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let v = v.to(f32);
                    squares += v * v;
                }
                let scale = rsqrt(sum(squares, axis = 0) / cols.to(f32) + eps);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    let g = load(w + c, mask = mask, other = 0.0).to(f32);
                    store(yr + c, (v.to(f32) * scale * g).to($t), mask = mask);
                }
            }
        }

        /// LayerNorm: both moments in one pass, shifted by the row's first
        /// element so that a large mean does not cancel the variance; one
        /// read of a row of one block, two of a longer one.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $layer<const BLOCK: usize>(
            x: Ptr<$t>,
            w: Ptr<$t>,
            b: Ptr<$t>,
            y: Ptr<$t>,
            cols: i32,
            eps: f32,
        ) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            let shift = load(xr).to(f32);
            let count = cols.to(f32);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let d = select(mask, v - shift, 0.0);
                let mean_shifted = sum(d, axis = 0) / count;
                let var = sum(d * d, axis = 0) / count - mean_shifted * mean_shifted;
                let rstd = rsqrt(maximum(var, 0.0) + eps);
                let g = load(w + c, mask = mask, other = 0.0).to(f32);
                let h = load(b + c, mask = mask, other = 0.0).to(f32);
                store(
                    yr + c,
                    ((d - mean_shifted) * rstd * g + h).to($t),
                    mask = mask,
                );
            } else {
                let mut sum1 = zeros([BLOCK], f32);
                let mut sum2 = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let d = select(mask, v.to(f32) - shift, 0.0);
                    sum1 += d;
                    sum2 += d * d;
                }
                let mean_shifted = sum(sum1, axis = 0) / count;
                let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
                let rstd = rsqrt(maximum(var, 0.0) + eps);
                let mean = mean_shifted + shift;
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    let g = load(w + c, mask = mask, other = 0.0).to(f32);
                    let h = load(b + c, mask = mask, other = 0.0).to(f32);
                    store(
                        yr + c,
                        ((v.to(f32) - mean) * rstd * g + h).to($t),
                        mask = mask,
                    );
                }
            }
        }

        /// Softmax with each row split over a cluster of `K` programs, a
        /// slice of `SLICE` columns each, held in registers: the row is read
        /// once whatever its length, and a few rows still fill the GPU. Each
        /// program sends its slice's maximum and rescaled sum into every
        /// peer's shared memory; one `cluster_barrier()` later each combines
        /// them.
        #[tlx::kernel(configs = [(SLICE = 1024, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 4, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 8192, K = 8, num_warps = 8, ctas_per_cga = K), (SLICE = 8192, K = 16, num_warps = 8, ctas_per_cga = K)])]
        fn $softmax_split<const SLICE: usize, const K: usize>(x: Ptr<$t>, y: Ptr<$t>, cols: i32) {
            let inbox = local_alloc([K, 2], f32, 1);
            let rank = cluster_cta_rank();
            let row = program_id(0) / K;
            let (xr, yr) = (x + row * cols, y + row * cols);
            let c = rank * SLICE + arange(0, SLICE);
            let mask = c < cols;
            let v = load(xr + c, mask = mask, other = 0.0, eviction_policy = "evict_first");
            let lowest = -3.0e38;
            let m = max(select(mask, v.to(f32), lowest), axis = 0);
            let s = sum(select(mask, exp(v.to(f32) - m), 0.0), axis = 0);
            let pair = select(arange(0, 2) == 0, m, s);
            // Every peer has started (its shared memory exists) past here;
            // the loads above are in flight meanwhile.
            cluster_barrier();
            for peer in 0..K {
                let slot = local_slice(local_view(inbox, 0), [rank, 0], [1, 2]);
                remote_shmem_store(slot, pair[(None, ..)], peer);
            }
            cluster_barrier();
            let parts = local_load(local_view(inbox, 0));
            let first = arange(0, 2)[(None, ..)] == 0;
            let peer_max = max(select(first, parts, lowest), axis = 1);
            let row_max = max(peer_max, axis = 0);
            let peer_sum = sum(select(first, 0.0, parts), axis = 1);
            let inv = 1.0 / sum(peer_sum * exp(peer_max - row_max), axis = 0);
            store(yr + c, (exp(v.to(f32) - row_max) * inv).to($t), mask = mask, cache_modifier = ".cs");
        }

        /// RMSNorm over a cluster of `K` programs per row (see the softmax
        /// above): each sends its slice's sum of squares to its peers.
        #[tlx::kernel(configs = [(SLICE = 1024, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 4, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 8192, K = 8, num_warps = 8, ctas_per_cga = K), (SLICE = 8192, K = 16, num_warps = 8, ctas_per_cga = K)])]
        fn $rms_split<const SLICE: usize, const K: usize>(
            x: Ptr<$t>,
            w: Ptr<$t>,
            y: Ptr<$t>,
            cols: i32,
            eps: f32,
        ) {
            let inbox = local_alloc([K, 2], f32, 1);
            let rank = cluster_cta_rank();
            let row = program_id(0) / K;
            let (xr, yr) = (x + row * cols, y + row * cols);
            let c = rank * SLICE + arange(0, SLICE);
            let mask = c < cols;
            let v = load(xr + c, mask = mask, other = 0.0, eviction_policy = "evict_first");
            let squares = sum(v.to(f32) * v.to(f32), axis = 0);
            let pair = select(arange(0, 2) == 0, squares, 0.0);
            // Every peer has started (its shared memory exists) past here;
            // the loads above are in flight meanwhile.
            cluster_barrier();
            for peer in 0..K {
                let slot = local_slice(local_view(inbox, 0), [rank, 0], [1, 2]);
                remote_shmem_store(slot, pair[(None, ..)], peer);
            }
            cluster_barrier();
            let parts = local_load(local_view(inbox, 0));
            let first = arange(0, 2)[(None, ..)] == 0;
            let total = sum(sum(select(first, parts, 0.0), axis = 1), axis = 0);
            let scale = rsqrt(total / cols.to(f32) + eps);
            let g = load(w + c, mask = mask, other = 0.0, eviction_policy = "evict_last").to(f32);
            store(yr + c, (v.to(f32) * scale * g).to($t), mask = mask, cache_modifier = ".cs");
        }

        /// LayerNorm over a cluster of `K` programs per row (see the softmax
        /// above): each sends its slice's moments, shifted by the row's first
        /// element, to its peers.
        #[tlx::kernel(configs = [(SLICE = 1024, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 2048, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 4, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 8, num_warps = 4, ctas_per_cga = K), (SLICE = 4096, K = 16, num_warps = 4, ctas_per_cga = K), (SLICE = 8192, K = 8, num_warps = 8, ctas_per_cga = K), (SLICE = 8192, K = 16, num_warps = 8, ctas_per_cga = K)])]
        fn $layer_split<const SLICE: usize, const K: usize>(
            x: Ptr<$t>,
            w: Ptr<$t>,
            b: Ptr<$t>,
            y: Ptr<$t>,
            cols: i32,
            eps: f32,
        ) {
            let inbox = local_alloc([K, 2], f32, 1);
            let rank = cluster_cta_rank();
            let row = program_id(0) / K;
            let (xr, yr) = (x + row * cols, y + row * cols);
            let c = rank * SLICE + arange(0, SLICE);
            let mask = c < cols;
            let shift = load(xr).to(f32);
            let v = load(xr + c, mask = mask, other = 0.0, eviction_policy = "evict_first");
            let d = select(mask, v.to(f32) - shift, 0.0);
            let pair = select(arange(0, 2) == 0, sum(d, axis = 0), sum(d * d, axis = 0));
            // Every peer has started (its shared memory exists) past here;
            // the loads above are in flight meanwhile.
            cluster_barrier();
            for peer in 0..K {
                let slot = local_slice(local_view(inbox, 0), [rank, 0], [1, 2]);
                remote_shmem_store(slot, pair[(None, ..)], peer);
            }
            cluster_barrier();
            let parts = local_load(local_view(inbox, 0));
            let first = arange(0, 2)[(None, ..)] == 0;
            let count = cols.to(f32);
            let mean_shifted = sum(sum(select(first, parts, 0.0), axis = 1), axis = 0) / count;
            let squares = sum(sum(select(first, 0.0, parts), axis = 1), axis = 0) / count;
            let rstd = rsqrt(maximum(squares - mean_shifted * mean_shifted, 0.0) + eps);
            let g = load(w + c, mask = mask, other = 0.0, eviction_policy = "evict_last").to(f32);
            let h = load(b + c, mask = mask, other = 0.0, eviction_policy = "evict_last").to(f32);
            store(
                yr + c,
                ((v.to(f32) - (shift + mean_shifted)) * rstd * g + h).to($t),
                mask = mask,
                cache_modifier = ".cs",
            );
        }

        impl sealed::Sealed for $t {
            fn launch<P: PtrArg<Self>>(
                device: &Device,
                op: Row<'_, P>,
                (x, y): (&P, &P),
                (rows, cols): (usize, usize),
            ) -> Result<(), Error> {
                let c = cols as i32;
                let r = rows as u32;
                let name = match op {
                    Row::Softmax => stringify!($softmax),
                    Row::RmsNorm { .. } => stringify!($rms),
                    Row::LayerNorm { .. } => stringify!($layer),
                };
                choose_plan(device, name, (rows, cols), |plan| match op {
                    Row::Softmax => with_plan!(
                        plan,
                        |BLOCK| $softmax::<BLOCK>::launch(device, r, x, y, c),
                        |SLICE, K| $softmax_split::<SLICE, K>::launch(device, r * K as u32, x, y, c)
                    ),
                    Row::RmsNorm { weight, eps } => with_plan!(
                        plan,
                        |BLOCK| $rms::<BLOCK>::launch(device, r, x, weight, y, c, eps),
                        |SLICE, K| $rms_split::<SLICE, K>::launch(
                            device,
                            r * K as u32,
                            x,
                            weight,
                            y,
                            c,
                            eps
                        )
                    ),
                    Row::LayerNorm { weight, bias, eps } => with_plan!(
                        plan,
                        |BLOCK| $layer::<BLOCK>::launch(device, r, x, weight, bias, y, c, eps),
                        |SLICE, K| $layer_split::<SLICE, K>::launch(
                            device,
                            r * K as u32,
                            x,
                            weight,
                            bias,
                            y,
                            c,
                            eps
                        )
                    ),
                })
            }
        }
    };
}

row_kernels!(
    f32,
    softmax_f32,
    rms_norm_f32,
    layer_norm_f32,
    softmax_split_f32,
    rms_norm_split_f32,
    layer_norm_split_f32
);
row_kernels!(
    bf16,
    softmax_bf16,
    rms_norm_bf16,
    layer_norm_bf16,
    softmax_split_bf16,
    rms_norm_split_bf16,
    layer_norm_split_bf16
);
row_kernels!(
    f16,
    softmax_f16,
    rms_norm_f16,
    layer_norm_f16,
    softmax_split_f16,
    rms_norm_split_f16,
    layer_norm_split_f16
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every plan runs its kernels (a configuration `with_plan` or a
    /// kernel lacks would be an error) and agrees with f64, on the
    /// interpreter, on a row that fills its cluster three quarters.
    #[test]
    fn every_plan_runs_and_agrees() {
        let device = Device::cpu();
        let row_plans = ROW_BLOCKS.map(|block| (Plan::Row { block }, 3 * block / 2));
        let split_plans = SPLITS.map(|(slice, k)| (Plan::Split { slice, k }, 3 * slice * k / 4));
        for (plan, cols) in row_plans.into_iter().chain(split_plans) {
            let x: Vec<f32> = (0..cols)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let dx = device.upload(&x).expect("upload");
            let ones = device.upload(&vec![1.0f32; cols]).expect("upload");
            let zeros = device.upload(&vec![0.0f32; cols]).expect("upload");
            let y = device.upload(&vec![f32::NAN; cols]).expect("upload");
            let c = cols as i32;
            let v: Vec<f64> = x.iter().map(|&e| f64::from(e)).collect();
            let n = cols as f64;
            let top = v.iter().copied().fold(f64::MIN, f64::max);
            let total: f64 = v.iter().map(|e| (e - top).exp()).sum();
            let mean = v.iter().sum::<f64>() / n;
            let var = v.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / n;
            let rms = (v.iter().map(|e| e * e).sum::<f64>() / n + 1e-6).sqrt();
            type Want = fn(f64, (f64, f64, f64, f64, f64)) -> f64;
            let cases: [(&str, Want); 3] = [
                ("softmax", |e, (top, total, ..)| (e - top).exp() / total),
                ("rms_norm", |e, (.., rms)| e / rms),
                ("layer_norm", |e, (_, _, mean, var, _)| {
                    (e - mean) / (var + 1e-5).sqrt()
                }),
            ];
            for (op, want) in cases {
                let run = match op {
                    "softmax" => with_plan!(
                        plan,
                        |BLOCK| softmax_f32::<BLOCK>::launch(&device, 1, &dx, &y, c),
                        |SLICE, K| softmax_split_f32::<SLICE, K>::launch(
                            &device, K as u32, &dx, &y, c
                        )
                    ),
                    "rms_norm" => with_plan!(
                        plan,
                        |BLOCK| rms_norm_f32::<BLOCK>::launch(&device, 1, &dx, &ones, &y, c, 1e-6),
                        |SLICE, K| rms_norm_split_f32::<SLICE, K>::launch(
                            &device, K as u32, &dx, &ones, &y, c, 1e-6
                        )
                    ),
                    _ => with_plan!(
                        plan,
                        |BLOCK| layer_norm_f32::<BLOCK>::launch(
                            &device, 1, &dx, &ones, &zeros, &y, c, 1e-5
                        ),
                        |SLICE, K| layer_norm_split_f32::<SLICE, K>::launch(
                            &device, K as u32, &dx, &ones, &zeros, &y, c, 1e-5
                        )
                    ),
                };
                run.unwrap_or_else(|e| panic!("{op} {plan:?}: {e}"));
                let got = y.download().expect("download");
                let stats = (top, total, mean, var, rms);
                for (i, (&g, &e)) in got.iter().zip(&v).enumerate() {
                    let w = want(e, stats);
                    let error = (f64::from(g) - w).abs();
                    assert!(
                        error <= 1e-4 * w.abs().max(1e-3),
                        "{op} {plan:?} [{i}]: {g} vs {w}"
                    );
                }
            }
        }
    }
}
