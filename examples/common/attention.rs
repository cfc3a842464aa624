//! What the attention examples share: the problems they check, and f64
//! CPU references of the forward pass (per row) and of the backward pass
//! (on inputs widened to f64 once, with [`widen`]).

use tlx::ops::Attention;

use super::Size;

/// Attention in f64 on the CPU for query row `i` of head `h` of batch `b`:
/// its output and natural log-sum-exp.
pub fn reference_row<'a>(
    (q, k, v): (&'a [f64], &'a [f64], &'a [f64]),
    problem: &Attention,
    (b, h, i): (usize, usize, usize),
) -> (Vec<f64>, f64) {
    let Attention {
        heads,
        kv_heads,
        seq_q,
        seq_kv,
        head_dim: d,
        causal,
        scale,
        ..
    } = *problem;
    let sm_scale = f64::from(scale);
    let kvh = h / (heads / kv_heads);
    let query = &q[((b * heads + h) * seq_q + i) * d..][..d];
    let kv_row = |t: &'a [f64], j: usize| -> &'a [f64] {
        &t[((b * kv_heads + kvh) * seq_kv + j) * d..][..d]
    };
    let seen = if causal { (i + 1).min(seq_kv) } else { seq_kv };
    let scores: Vec<f64> = (0..seen)
        .map(|j| {
            let key = kv_row(k, j);
            query.iter().zip(key).map(|(x, y)| x * y).sum::<f64>() * sm_scale
        })
        .collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut out = vec![0.0; d];
    for (j, w) in weights.iter().enumerate() {
        for (o, x) in out.iter_mut().zip(kv_row(v, j)) {
            *o += w * x / total;
        }
    }
    (out, max + total.ln())
}

/// The gradients of attention in f64 on the CPU: `(dq, dk, dv)` for output
/// gradient `d_o`, laid out as `q`, `k` and `v` (a key/value head sums the
/// gradients of every query head that reads it).
pub fn reference_backward(
    (q, k, v, d_o): (&[f64], &[f64], &[f64], &[f64]),
    problem: &Attention,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let Attention {
        batch,
        heads,
        kv_heads,
        seq_q,
        seq_kv,
        head_dim: d,
        causal,
        scale,
    } = *problem;
    let sm_scale = f64::from(scale);
    let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    for b in 0..batch {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let q_row = |i: usize| ((b * heads + h) * seq_q + i) * d;
            let kv_row = |j: usize| ((b * kv_heads + kvh) * seq_kv + j) * d;
            for i in 0..seq_q {
                let seen = if causal { (i + 1).min(seq_kv) } else { seq_kv };
                let qi = &q[q_row(i)..][..d];
                let gi = &d_o[q_row(i)..][..d];
                let scores: Vec<f64> = (0..seen)
                    .map(|j| dot(qi, &k[kv_row(j)..][..d]) * sm_scale)
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                let p: Vec<f64> = scores.iter().map(|s| (s - max).exp() / total).collect();
                let dp: Vec<f64> = (0..seen).map(|j| dot(gi, &v[kv_row(j)..][..d])).collect();
                let delta = dot(&p, &dp);
                for j in 0..seen {
                    let ds = p[j] * (dp[j] - delta);
                    for c in 0..d {
                        dq[q_row(i) + c] += sm_scale * ds * k[kv_row(j) + c];
                        dk[kv_row(j) + c] += sm_scale * ds * qi[c];
                        dv[kv_row(j) + c] += p[j] * gi[c];
                    }
                }
            }
        }
    }
    (dq, dk, dv)
}

/// The largest error of attention outputs (rows of `head_dim`) against the
/// reference. P and the output are rounded to 16 bits, so the error is about
/// 2^-8 of the values a row averages; the row's mean magnitude (at least 0.1)
/// stands for their scale. Causal rows near the top average a few values of
/// order 1, and their near-zero outputs carry errors of that order.
pub fn output_error(got: &[f32], want: &[f64], head_dim: usize) -> f64 {
    got.chunks(head_dim)
        .zip(want.chunks(head_dim))
        .map(|(got, want)| {
            let scale = want.iter().map(|w| w.abs()).sum::<f64>() / head_dim as f64;
            super::max_rel_error(got, want, scale.max(0.1))
        })
        .fold(0.0, f64::max)
}

/// Elements as f64, for the references.
pub fn widen<T: Copy>(t: &[T], to_f32: impl Fn(T) -> f32) -> Vec<f64> {
    t.iter().map(|&x| to_f32(x) as f64).collect()
}

/// One problem the attention examples check, in f16 or bf16.
pub struct Case {
    pub problem: Attention,
    pub f16: bool,
}

/// (batch, heads, kv_heads, seq_q, seq_kv, head_dim, causal, f16)
type Row = (usize, usize, usize, usize, usize, usize, bool, bool);

/// Head dims 64 and 128 (both passes), causal and not, GQA, bf16 and f16, and lengths
/// that are not multiples of the tiles (and differ between queries and
/// keys); smaller on the interpreter.
pub fn cases(size: Size) -> Vec<Case> {
    let table: &[Row] = match size {
        Size::Gpu => &[
            (2, 8, 2, 1000, 1000, 128, false, false),
            (2, 8, 2, 1000, 1000, 128, true, false),
            (1, 4, 4, 777, 1500, 64, false, false),
            (1, 4, 1, 1500, 777, 64, true, false),
            (1, 2, 2, 4096, 4096, 128, true, false),
            (2, 4, 2, 1000, 1000, 128, true, true),
            (1, 4, 4, 777, 1500, 64, false, true),
            // Seventeen heads of 2048 keys: the causal backward's programs
            // longest first, in a group of sixteen heads and one of one on
            // a GPU of 132 SMs.
            (1, 17, 17, 2048, 2048, 64, true, false),
            // More key tiles than an H100 or H200 has SMs: the non-causal
            // backward's persistent programs take two or more.
            (2, 8, 4, 200, 2300, 128, false, false),
            (1, 8, 8, 300, 2200, 64, false, true),
        ],
        Size::Interpreter => &[
            (1, 2, 1, 200, 150, 64, false, false),
            (1, 2, 1, 100, 170, 128, false, false),
            (1, 2, 2, 190, 190, 128, true, false),
            (2, 2, 1, 130, 260, 64, true, true),
            (1, 1, 1, 260, 140, 64, true, false),
            // Eighteen key tiles: more than the interpreter has threads
            // (its programs) on most machines, so that the persistent
            // backward's programs take several.
            (1, 2, 2, 70, 1100, 128, false, false),
        ],
    };
    rows(table)
}

/// [`cases`] and head dim 256, which only the forward takes.
pub fn forward_cases(size: Size) -> Vec<Case> {
    let wide: &[Row] = match size {
        Size::Gpu => &[
            (1, 4, 2, 1000, 1000, 256, true, false),
            (1, 2, 2, 777, 1500, 256, false, true),
        ],
        Size::Interpreter => &[
            (1, 1, 1, 150, 100, 256, true, false),
            (1, 2, 1, 200, 230, 256, true, true),
            (1, 2, 1, 70, 200, 256, false, true),
        ],
    };
    let mut all = cases(size);
    all.extend(rows(wide));
    all
}

fn rows(table: &[Row]) -> Vec<Case> {
    table
        .iter()
        .map(
            |&(batch, heads, kv_heads, seq_q, seq_kv, head_dim, causal, f16)| Case {
                problem: Attention::new(batch, heads, seq_q, head_dim)
                    .kv_heads(kv_heads)
                    .seq_kv(seq_kv)
                    .causal(causal),
                f16,
            },
        )
        .collect()
}
