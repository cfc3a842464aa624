//! [`attention`] and [`attention_backward`]: flash attention on Hopper, the
//! warp-specialized TLX kernels of `forward.rs` and `backward.rs` (FA3's
//! schedule; speeds against cuDNN in BENCHMARKS.md), for `[batch, heads,
//! seq, head_dim]` tensors in bf16 or f16 with head dim 64, 128 or 256 (the
//! backward: 64 or 128), causal or not, grouped-query heads and any sequence
//! lengths. This file checks a problem and its tensors and picks the grid;
//! the kernels do the rest.

mod backward;
mod forward;

use std::fmt;

use crate::prelude::*;
use crate::{Element, PtrArg};

/// Element types [`attention`] takes: `bf16` and `f16`.
pub trait AttentionElement: Element + forward::ForwardKernels + backward::BackwardKernels {}

impl AttentionElement for bf16 {}
impl AttentionElement for f16 {}

const OP: &str = "attention";
const OP_BACKWARD: &str = "attention_backward";

/// The head dims each pass is compiled for: the backward has no 256 (its
/// K/V-stationary tiles do not fit in shared memory there).
fn head_dims(op: &str) -> &'static [usize] {
    if op == OP_BACKWARD {
        &[64, 128]
    } else {
        &[64, 128, 256]
    }
}

fn head_dim_not_compiled(op: &'static str, d: usize) -> Error {
    let dims = head_dims(op)
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>();
    Error::InvalidShape {
        op,
        reason: format!(
            "head_dim {d} is not compiled; {op} takes {}",
            dims.join(", ")
        ),
    }
}

/// One attention problem: `softmax(Q Kᵀ · scale) V` for queries
/// `[batch, heads, seq_q, head_dim]` against keys and values
/// `[batch, kv_heads, seq_kv, head_dim]`, every tensor row-major and
/// contiguous. Query head `h` reads key/value head `h / (heads / kv_heads)`
/// (grouped-query and multi-query attention); `causal` masks key `j > i` for
/// query `i` (the top-left convention of torch's `is_causal`).
///
/// ```
/// let problem = tlx::ops::Attention::new(2, 16, 4096, 128).causal(true).kv_heads(4);
/// assert_eq!(problem.rows(), 2 * 16 * 4096);
/// ```
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Attention {
    /// Independent sequences.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads; `heads` must be a multiple of it.
    pub kv_heads: usize,
    /// Query rows per sequence.
    pub seq_q: usize,
    /// Key/value rows per sequence.
    pub seq_kv: usize,
    /// Elements per row of every tensor: 64, 128 or 256 (the backward: 64 or
    /// 128).
    pub head_dim: usize,
    /// Whether key `j > i` is hidden from query `i`.
    pub causal: bool,
    /// The factor on `Q Kᵀ` before the softmax.
    pub scale: f32,
}

impl Attention {
    /// `heads` query and key/value heads of `seq` rows each, not causal,
    /// scaled by `1 / sqrt(head_dim)`.
    pub fn new(batch: usize, heads: usize, seq: usize, head_dim: usize) -> Self {
        Attention {
            batch,
            heads,
            kv_heads: heads,
            seq_q: seq,
            seq_kv: seq,
            head_dim,
            causal: false,
            scale: 1.0 / (head_dim as f32).sqrt(),
        }
    }

    /// With `kv_heads` key/value heads.
    pub fn kv_heads(self, kv_heads: usize) -> Self {
        Attention { kv_heads, ..self }
    }

    /// With `seq_kv` key/value rows per sequence.
    pub fn seq_kv(self, seq_kv: usize) -> Self {
        Attention { seq_kv, ..self }
    }

    /// Causal or not.
    pub fn causal(self, causal: bool) -> Self {
        Attention { causal, ..self }
    }

    /// With `scale` on `Q Kᵀ`.
    pub fn scale(self, scale: f32) -> Self {
        Attention { scale, ..self }
    }

    /// Query rows over all sequences and heads: the log-sum-exp's length.
    pub fn rows(&self) -> usize {
        self.batch * self.heads * self.seq_q
    }

    /// Elements of Q (and O, dO, dQ).
    pub fn q_len(&self) -> usize {
        self.rows() * self.head_dim
    }

    /// Elements of K (and V, dK, dV).
    pub fn kv_len(&self) -> usize {
        self.batch * self.kv_heads * self.seq_kv * self.head_dim
    }

    /// Floating-point operations of the forward pass's two products, as
    /// FlashAttention counts them (causal: half).
    pub fn flops(&self) -> f64 {
        let full = 4.0 * (self.batch * self.heads) as f64 * (self.seq_q * self.seq_kv) as f64;
        full * self.head_dim as f64 / if self.causal { 2.0 } else { 1.0 }
    }

    /// `Err` naming what is wrong unless the kernels take this problem.
    fn validate(&self, op: &'static str) -> Result<(), Error> {
        let invalid = |reason: String| Err(Error::InvalidShape { op, reason });
        super::extents(
            op,
            &[
                ("batch x heads x seq_q", self.rows()),
                ("head_dim", self.head_dim),
            ],
        )?;
        super::extents(
            op,
            &[
                ("batch", self.batch),
                ("kv_heads", self.kv_heads),
                ("seq_kv", self.seq_kv),
                ("head_dim", self.head_dim),
            ],
        )?;
        let (heads, kv_heads) = (self.heads, self.kv_heads);
        if heads % kv_heads != 0 {
            return invalid(format!(
                "{heads} query heads do not split evenly over {kv_heads} key/value heads"
            ));
        }
        if !head_dims(op).contains(&self.head_dim) {
            return Err(head_dim_not_compiled(op, self.head_dim));
        }
        if !self.scale.is_finite() {
            return invalid(format!("scale {} is not finite", self.scale));
        }
        Ok(())
    }

    /// A `[batch, heads, seq, head_dim]` descriptor over `tensor`.
    fn heads_desc<'a, U: Element>(
        &self,
        tensor: &'a (impl PtrArg<U> + ?Sized),
        (heads, seq): (usize, usize),
    ) -> Result<TensorDesc<'a, U>, Error> {
        let d = self.head_dim;
        TensorDesc::over(
            tensor,
            &[self.batch, heads, seq, d],
            &[heads * seq * d, seq * d, d, 1],
        )
    }
}

/// `2x16/4x4096x128 over 4096 keys, causal`: batch x heads / kv heads x
/// query rows x head dim.
impl fmt::Display for Attention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{}/{}x{}x{} over {} keys{}",
            self.batch,
            self.heads,
            self.kv_heads,
            self.seq_q,
            self.head_dim,
            self.seq_kv,
            if self.causal { ", causal" } else { "" }
        )
    }
}

/// `o = softmax(q kᵀ · scale) v` for `problem`; with `lse`, also each query
/// row's natural log-sum-exp of its scaled scores (what
/// [`attention_backward`] takes), `problem.rows()` f32s. Without it the call
/// allocates that much scratch.
///
/// Runs on Hopper GPUs (`sm_90a`) and on the CPU interpreter.
///
/// ```
/// use tlx::prelude::*;
/// use tlx::ops::Attention;
///
/// let dev = Device::cpu();
/// let problem = Attention::new(1, 2, 100, 64).causal(true);
/// let q = dev.upload(&vec![bf16::from_f32(0.5); problem.q_len()])?;
/// let kv = dev.upload(&vec![bf16::from_f32(0.25); problem.kv_len()])?;
/// let o = dev.alloc::<bf16>(problem.q_len())?;
/// tlx::ops::attention(&dev, &q, &kv, &kv, &o, None, &problem)?;
/// assert_eq!(o.download()?[0].to_f32(), 0.25);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn attention<T: AttentionElement>(
    device: &Device,
    q: &(impl PtrArg<T> + ?Sized),
    k: &(impl PtrArg<T> + ?Sized),
    v: &(impl PtrArg<T> + ?Sized),
    o: &(impl PtrArg<T> + ?Sized),
    lse: Option<&dyn PtrArg<f32>>,
    problem: &Attention,
) -> Result<(), Error> {
    let p = problem;
    p.validate(OP)?;
    super::holds(OP, "q", q, p.q_len())?;
    super::holds(OP, "k", k, p.kv_len())?;
    super::holds(OP, "v", v, p.kv_len())?;
    super::holds(OP, "o", o, p.q_len())?;
    let scratch;
    let lse: &dyn PtrArg<f32> = match lse {
        Some(lse) => {
            super::holds(OP, "lse", lse, p.rows())?;
            lse
        }
        None => {
            scratch = device.alloc::<f32>(p.rows())?;
            &scratch
        }
    };
    let queries = (p.heads, p.seq_q);
    let keys = (p.kv_heads, p.seq_kv);
    let descs = [
        &p.heads_desc(q, queries)?,
        &p.heads_desc(k, keys)?,
        &p.heads_desc(v, keys)?,
        &p.heads_desc(o, queries)?,
    ];
    // Persistent: one program per SM, or per tile when there are fewer.
    let tiles = p.seq_q.div_ceil(forward::QUERY_TILE) * p.batch * p.heads;
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    T::launch_forward(device, grid, descs, lse, p)
}

/// The forward pass's tensors and the output gradient, for
/// [`attention_backward`]: `lse` is what [`attention`] wrote for `o`.
pub struct AttentionSaved<'a, T: Element> {
    /// Queries.
    pub q: &'a dyn PtrArg<T>,
    /// Keys.
    pub k: &'a dyn PtrArg<T>,
    /// Values.
    pub v: &'a dyn PtrArg<T>,
    /// The forward's output.
    pub o: &'a dyn PtrArg<T>,
    /// The forward's log-sum-exp per query row.
    pub lse: &'a dyn PtrArg<f32>,
    /// The gradient of the loss with respect to `o`.
    pub d_o: &'a dyn PtrArg<T>,
}

/// Where [`attention_backward`] writes the gradients (overwritten, not
/// accumulated into).
pub struct AttentionGrads<'a, T: Element> {
    /// Gradient with respect to the queries, laid out as `q`.
    pub dq: &'a dyn PtrArg<T>,
    /// Gradient with respect to the keys, laid out as `k` (summed over the
    /// query heads that read each key/value head).
    pub dk: &'a dyn PtrArg<T>,
    /// Gradient with respect to the values, laid out as `v`.
    pub dv: &'a dyn PtrArg<T>,
}

/// The f32 scratch [`attention_backward`] needs for one problem size:
/// `delta = rowsum(dO ∘ O)` and the log-sum-exp in base 2 per query row,
/// and dQ's accumulator. Keep one per training step's shape and pass it to
/// every call.
pub struct AttentionWorkspace {
    delta: Buffer<f32>,
    lse_log2: Buffer<f32>,
    dq_accum: Buffer<f32>,
}

impl AttentionWorkspace {
    /// Scratch for `problem` on `device` (about `problem.rows() x (head_dim
    /// + 2)` f32s).
    pub fn new(device: &Device, problem: &Attention) -> Result<Self, Error> {
        problem.validate(OP_BACKWARD)?;
        let stats = stats_rows(problem);
        Ok(AttentionWorkspace {
            delta: device.alloc(stats)?,
            lse_log2: device.alloc(stats)?,
            dq_accum: device.alloc(problem.q_len())?,
        })
    }
}

/// Rows of the backward's per-row statistics: each head's query rows
/// padded to whole tiles.
fn stats_rows(p: &Attention) -> usize {
    p.batch * p.heads * backward::padded_seq(p.seq_q)
}

/// The gradients of [`attention`] for `problem`: `dq`, `dk` and `dv` from
/// the forward's tensors and `d_o` (FA2's algorithm with FA3's schedule:
/// a K/V-stationary main kernel, dQ reduced in f32 by TMA).
///
/// ```
/// use tlx::prelude::*;
/// use tlx::ops::{Attention, AttentionGrads, AttentionSaved, AttentionWorkspace};
///
/// let dev = Device::cpu();
/// let problem = Attention::new(1, 1, 64, 64);
/// let x = dev.upload(&vec![bf16::from_f32(0.5); problem.q_len()])?;
/// let (o, lse) = (dev.alloc::<bf16>(problem.q_len())?, dev.alloc::<f32>(problem.rows())?);
/// tlx::ops::attention(&dev, &x, &x, &x, &o, Some(&lse), &problem)?;
/// let grads: Vec<_> = (0..3).map(|_| dev.alloc::<bf16>(problem.q_len())).collect::<Result<_, _>>()?;
/// let saved = AttentionSaved { q: &x, k: &x, v: &x, o: &o, lse: &lse, d_o: &x };
/// let out = AttentionGrads { dq: &grads[0], dk: &grads[1], dv: &grads[2] };
/// let workspace = AttentionWorkspace::new(&dev, &problem)?;
/// tlx::ops::attention_backward(&dev, &saved, &out, &workspace, &problem)?;
/// // Every value is 0.5, so the output cannot move with V and dV = P dO.
/// assert_eq!(grads[2].download()?[0].to_f32(), 0.5);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn attention_backward<T: AttentionElement>(
    device: &Device,
    saved: &AttentionSaved<T>,
    grads: &AttentionGrads<T>,
    workspace: &AttentionWorkspace,
    problem: &Attention,
) -> Result<(), Error> {
    let p = problem;
    p.validate(OP_BACKWARD)?;
    let holds = |what, value: &dyn PtrArg<T>, n| super::holds(OP_BACKWARD, what, value, n);
    holds("q", saved.q, p.q_len())?;
    holds("k", saved.k, p.kv_len())?;
    holds("v", saved.v, p.kv_len())?;
    holds("o", saved.o, p.q_len())?;
    holds("d_o", saved.d_o, p.q_len())?;
    holds("dq", grads.dq, p.q_len())?;
    holds("dk", grads.dk, p.kv_len())?;
    holds("dv", grads.dv, p.kv_len())?;
    super::holds(OP_BACKWARD, "lse", saved.lse, p.rows())?;
    let stats = stats_rows(p);
    let scratch_ok = workspace.delta.len() >= stats
        && workspace.lse_log2.len() >= stats
        && workspace.dq_accum.len() >= p.q_len();
    if !scratch_ok {
        return Err(Error::InvalidShape {
            op: OP_BACKWARD,
            reason: format!(
                "the workspace was made for a smaller problem than {p}; \
                 make one with `AttentionWorkspace::new` for this one"
            ),
        });
    }
    T::launch_backward(device, saved, grads, workspace, p)
}
