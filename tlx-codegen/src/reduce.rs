//! `Reduce` along one axis: first the registers of each thread, then across
//! lanes with butterfly shuffles, then across warps through shared memory.
//! The result is in the operand layout's slice (replicated along the reduced
//! axis). f16/bf16 sums accumulate in f32 and round once at the end.

use super::emit::scalar_type;
use super::error::{malformed, refused_upstream, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar;
use crate::layout::dim_bits;
use tlx_core::ir::{BinaryOp, Elem, Op, OpKind, ReduceKind, ScalarType};

/// A partial result: the value and, for argmax/argmin, its index along the axis.
#[derive(Clone)]
struct Partial {
    value: String,
    index: Option<String>,
}

fn accumulator_type(kind: ReduceKind, s: ScalarType) -> ScalarType {
    match (kind, s) {
        (ReduceKind::Sum, ScalarType::F16 | ScalarType::BF16) => ScalarType::F32,
        // fp8 has no arithmetic or comparison of its own.
        (_, ScalarType::F8E4M3 | ScalarType::F8E5M2) => ScalarType::F32,
        _ => s,
    }
}

impl<'k> Lowerer<'k> {
    fn combine(
        &mut self,
        kind: ReduceKind,
        s: ScalarType,
        a: &Partial,
        b: &Partial,
    ) -> Result<Partial> {
        let binary = |op| -> Option<BinaryOp> { Some(op) };
        let op = match kind {
            ReduceKind::Sum => binary(BinaryOp::Add),
            ReduceKind::Max => binary(BinaryOp::Max),
            ReduceKind::Min => binary(BinaryOp::Min),
            ReduceKind::Argmax | ReduceKind::Argmin => None,
        };
        if let Some(op) = op {
            let value = scalar::binary(&mut self.f, op, s, &a.value, &b.value)?;
            return Ok(Partial { value, index: None });
        }
        let (ai, bi) = match (&a.index, &b.index) {
            (Some(ai), Some(bi)) => (ai.clone(), bi.clone()),
            _ => return Err(malformed("arg reduction without indices")),
        };
        let ty = scalar_type(s);
        let float = super::emit::is_llvm_float(s);
        let better_pred = match (kind == ReduceKind::Argmax, float, s.is_signed_int()) {
            (true, true, _) => "fcmp ogt",
            (false, true, _) => "fcmp olt",
            (true, false, true) => "icmp sgt",
            (true, false, false) => "icmp ugt",
            (false, false, true) => "icmp slt",
            (false, false, false) => "icmp ult",
        };
        let f = &mut self.f;
        let better = f.inst(format!("{better_pred} {ty} {}, {}", a.value, b.value));
        let first = f.inst(format!("icmp slt i32 {ai}, {bi}"));
        let a_wins = if float {
            // NaN beats every number (as `maximum`/`minimum` propagate it); ties go to the first index.
            let eq = f.inst(format!("fcmp oeq {ty} {}, {}", a.value, b.value));
            let a_nan = f.inst(format!("fcmp uno {ty} {}, 0.0", a.value));
            let b_nan = f.inst(format!("fcmp uno {ty} {}, 0.0", b.value));
            let both_nan = f.inst(format!("and i1 {a_nan}, {b_nan}"));
            let tie = f.inst(format!("or i1 {eq}, {both_nan}"));
            let tie_first = f.inst(format!("and i1 {tie}, {first}"));
            let b_num = f.inst(format!("xor i1 {b_nan}, true"));
            let nan_wins = f.inst(format!("and i1 {a_nan}, {b_num}"));
            let w = f.inst(format!("or i1 {better}, {tie_first}"));
            f.inst(format!("or i1 {w}, {nan_wins}"))
        } else {
            let eq = f.inst(format!("icmp eq {ty} {}, {}", a.value, b.value));
            let tie_first = f.inst(format!("and i1 {eq}, {first}"));
            f.inst(format!("or i1 {better}, {tie_first}"))
        };
        let value = f.inst(format!(
            "select i1 {a_wins}, {ty} {}, {ty} {}",
            a.value, b.value
        ));
        let index = f.inst(format!("select i1 {a_wins}, i32 {ai}, i32 {bi}"));
        Ok(Partial {
            value,
            index: Some(index),
        })
    }

    /// `value` from the lane `lane ^ mask` of this warp.
    fn shuffle_xor(&mut self, s: ScalarType, value: &str, mask: u32) -> String {
        let ty = scalar_type(s);
        let shfl = |f: &mut super::emit::FuncText, v: &str| {
            f.call(
                "i32",
                "llvm.nvvm.shfl.sync.bfly.i32",
                &[
                    ("i32", "-1"),
                    ("i32", v),
                    ("i32", &mask.to_string()),
                    ("i32", "31"),
                ],
            )
        };
        let f = &mut self.f;
        match ty {
            "i32" => shfl(f, value),
            "float" => {
                let b = f.inst(format!("bitcast float {value} to i32"));
                let r = shfl(f, &b);
                f.inst(format!("bitcast i32 {r} to float"))
            }
            "double" => {
                let b = f.inst(format!("bitcast double {value} to i64"));
                let r = self.shuffle_xor(ScalarType::I64, &b, mask);
                self.f.inst(format!("bitcast i64 {r} to double"))
            }
            "i64" => {
                let lo = f.inst(format!("trunc i64 {value} to i32"));
                let hi64 = f.inst(format!("lshr i64 {value}, 32"));
                let hi = f.inst(format!("trunc i64 {hi64} to i32"));
                let (lo, hi) = (shfl(f, &lo), shfl(f, &hi));
                let lo = f.inst(format!("zext i32 {lo} to i64"));
                let hi = f.inst(format!("zext i32 {hi} to i64"));
                let hi = f.inst(format!("shl i64 {hi}, 32"));
                f.inst(format!("or i64 {hi}, {lo}"))
            }
            narrow => {
                let int = match narrow {
                    "half" | "bfloat" => f.inst(format!("bitcast {narrow} {value} to i16")),
                    _ => value.to_string(),
                };
                let int_ty = if narrow == "half" || narrow == "bfloat" {
                    "i16"
                } else {
                    narrow
                };
                let wide = f.inst(format!("zext {int_ty} {int} to i32"));
                let r = shfl(f, &wide);
                let back = f.inst(format!("trunc i32 {r} to {int_ty}"));
                if int_ty == narrow {
                    back
                } else {
                    f.inst(format!("bitcast i16 {back} to {narrow}"))
                }
            }
        }
    }

    pub fn lower_reduce(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Reduce { value, axis, kind } = &op.kind else {
            return Err(malformed("not a reduce"));
        };
        let (kind, axis) = (*kind, *axis);
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("reduce without result"))?;
        let src: Tensor = self.tensor(*value)?;
        let s = self
            .ty(*value)
            .elem()
            .scalar()
            .ok_or_else(|| refused_upstream("reducing pointers"))?;
        let layout = src.layout.clone();
        let shape = layout.shape.clone();
        if axis >= shape.len() {
            return Err(malformed(format!(
                "reduce axis {axis} of rank {}",
                shape.len()
            )));
        }
        let bits = dim_bits(&shape)?;
        let low: usize = bits[axis + 1..].iter().sum();
        let field = ((1u32 << bits[axis]) - 1) << low;
        let mixed = |bases: &[u32]| bases.iter().any(|&b| b & field != 0 && b & !field != 0);
        if mixed(&layout.regs) || mixed(&layout.lanes) || mixed(&layout.warps) {
            return Err(malformed("reducing a layout that mixes dimensions"));
        }
        let (reg_mask, lane_mask, warp_mask) = layout.axis_bits(axis)?;
        let acc_s = accumulator_type(kind, s);
        let with_index = matches!(kind, ReduceKind::Argmax | ReduceKind::Argmin);

        // Registers of this thread.
        let n = layout.num_regs();
        let mut partials: Vec<Option<Partial>> = vec![None; n];
        for r in 0..n {
            let base = r & !(reg_mask as usize);
            let value = scalar::cast(&mut self.f, s, acc_s, &src.regs[r])?;
            let index = if with_index {
                let flat = self.flat_index(&layout, r);
                let shifted = self.f.inst(format!("lshr i32 {flat}, {low}"));
                Some(
                    self.f
                        .inst(format!("and i32 {shifted}, {}", (1u32 << bits[axis]) - 1)),
                )
            } else {
                None
            };
            let p = Partial { value, index };
            partials[base] = Some(match partials[base].take() {
                None => p,
                Some(acc) => self.combine(kind, acc_s, &acc, &p)?,
            });
        }
        let bases: Vec<usize> = (0..n).filter(|r| r & reg_mask as usize == 0).collect();
        let mut reduced: Vec<Partial> = bases
            .iter()
            .map(|&b| {
                partials[b]
                    .clone()
                    .ok_or_else(|| malformed("empty register group"))
            })
            .collect::<Result<_>>()?;

        // Lanes of the warp.
        for bit in 0..crate::layout::LANE_BITS {
            if lane_mask >> bit & 1 == 0 {
                continue;
            }
            for p in reduced.iter_mut() {
                let value = self.shuffle_xor(acc_s, &p.value, 1 << bit);
                let index = p
                    .index
                    .as_ref()
                    .map(|i| self.shuffle_xor(ScalarType::I32, i, 1 << bit));
                *p = self.combine(kind, acc_s, p, &Partial { value, index })?;
            }
        }

        // Warps of the CTA.
        let result_layout = layout.sliced(axis)?;
        let sliced: Vec<usize> = bases
            .iter()
            .map(|&b| layout.sliced_register(axis, b))
            .collect::<std::result::Result<_, _>>()?;
        if warp_mask != 0 {
            reduced =
                self.reduce_across_warps(kind, acc_s, &result_layout, &sliced, reduced, warp_mask)?;
        }

        let out_s = self.ty(result).elem().scalar().unwrap_or(ScalarType::I32);
        let mut finals = Vec::with_capacity(reduced.len());
        for p in &reduced {
            finals.push(match &p.index {
                Some(i) => i.clone(),
                None => scalar::cast(&mut self.f, acc_s, out_s, &p.value)?,
            });
        }
        if result_layout.shape.is_empty() {
            // Every register holds the total: keep the one register a scalar has.
            let layout = self.scalar_layout()?;
            let total = finals.swap_remove(0);
            self.held.values.insert(
                result,
                Tensor {
                    layout,
                    regs: vec![total],
                },
            );
            return Ok(());
        }
        // Bases that differ only in replicated registers give the same one.
        let mut regs = vec![String::new(); result_layout.num_regs()];
        for (&k, value) in sliced.iter().zip(finals) {
            regs[k] = value;
        }
        self.held.values.insert(
            result,
            Tensor {
                layout: result_layout,
                regs,
            },
        );
        Ok(())
    }

    fn reduce_across_warps(
        &mut self,
        kind: ReduceKind,
        s: ScalarType,
        result_layout: &crate::layout::LinearLayout,
        sliced: &[usize],
        reduced: Vec<Partial>,
        warp_mask: u32,
    ) -> Result<Vec<Partial>> {
        let groups = 1usize << warp_mask.count_ones();
        let numel = result_layout.numel();
        let elem = Elem::Scalar(s);
        let value_bytes = groups * numel * s.size_bytes();
        let index_base = value_bytes.div_ceil(4) * 4;
        let with_index = reduced.first().is_some_and(|p| p.index.is_some());
        self.use_shared(if with_index {
            index_base + groups * numel * 4
        } else {
            value_bytes
        });
        // This warp's position among the warps that split the axis.
        let mut group = "0".to_string();
        for (j, bit) in (0..32).filter(|b| warp_mask >> b & 1 == 1).enumerate() {
            let shifted = self
                .f
                .inst(format!("lshr i32 {}, {bit}", self.threads.warp));
            let one = self.f.inst(format!("and i32 {shifted}, 1"));
            let placed = self.f.inst(format!("shl i32 {one}, {j}"));
            group = self.f.inst(format!("or i32 {group}, {placed}"));
        }
        let group_base = self.f.inst(format!("mul i32 {group}, {numel}"));
        self.barrier();
        let mut flats = Vec::new();
        for (p, &k) in reduced.iter().zip(sliced) {
            let flat = self.flat_index(result_layout, k);
            let slot = self.f.inst(format!("add i32 {group_base}, {flat}"));
            self.smem_store(elem, 0, &slot, &p.value);
            if let Some(i) = &p.index {
                self.smem_store(Elem::Scalar(ScalarType::I32), index_base, &slot, i);
            }
            flats.push(flat);
        }
        self.barrier();
        let mut out = Vec::with_capacity(reduced.len());
        for flat in flats {
            let mut acc: Option<Partial> = None;
            for g in 0..groups {
                let slot = self.f.inst(format!("add i32 {flat}, {}", g * numel));
                let value = self.smem_load(elem, 0, &slot);
                let index = with_index
                    .then(|| self.smem_load(Elem::Scalar(ScalarType::I32), index_base, &slot));
                let p = Partial { value, index };
                acc = Some(match acc {
                    None => p,
                    Some(a) => self.combine(kind, s, &a, &p)?,
                });
            }
            out.push(acc.ok_or_else(|| malformed("no warp groups"))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{unflatten, LinearLayout, WARP_SIZE};

    /// Runs the reduction plan of `lower_reduce` (registers of a thread, then lane
    /// butterflies, then one slot per warp group) on the layout alone, summing the
    /// flat indices, and checks every thread ends with the true sum of its slice.
    fn check_sum_plan(shape: &[usize], vector: usize, num_warps: u32, axis: usize) {
        let layout = LinearLayout::blocked(shape, vector, num_warps).unwrap();
        let (reg_mask, lane_mask, warp_mask) = layout.axis_bits(axis).unwrap();
        let result = layout.sliced(axis).unwrap();
        let n = layout.num_regs();
        // Per thread: register partials after the in-thread step.
        let threads = (num_warps * WARP_SIZE) as usize;
        let mut partial = vec![vec![0u64; n]; threads];
        for (t, regs) in partial.iter_mut().enumerate() {
            let (lane, warp) = (t as u32 % WARP_SIZE, t as u32 / WARP_SIZE);
            for r in 0..n {
                regs[r & !(reg_mask as usize)] += u64::from(layout.flat_index(r, lane, warp));
            }
        }
        // Lane butterflies.
        for bit in 0..5 {
            if lane_mask >> bit & 1 == 0 {
                continue;
            }
            let before = partial.clone();
            for (t, regs) in partial.iter_mut().enumerate() {
                let other = t ^ (1 << bit);
                for r in 0..n {
                    regs[r] = before[t][r] + before[other][r];
                }
            }
        }
        // Warp groups through shared memory: slot[group][result flat index].
        let groups = 1usize << warp_mask.count_ones();
        let mut slots = vec![vec![None; result.numel()]; groups];
        let group_of = |warp: u32| {
            (0..32)
                .filter(|b| warp_mask >> b & 1 == 1)
                .enumerate()
                .fold(0usize, |g, (j, b)| g | ((warp as usize >> b) & 1) << j)
        };
        for (t, regs) in partial.iter().enumerate() {
            let (lane, warp) = (t as u32 % WARP_SIZE, t as u32 / WARP_SIZE);
            for r in (0..n).filter(|r| r & reg_mask as usize == 0) {
                let k = layout.sliced_register(axis, r).unwrap();
                let slot = &mut slots[group_of(warp)][result.flat_index(k, lane, warp) as usize];
                assert!(slot.is_none_or(|v| v == regs[r]), "replicas disagree");
                *slot = Some(regs[r]);
            }
        }
        let mut want = vec![0u64; result.numel()];
        for flat in 0..layout.numel() {
            let mut c = unflatten(shape, flat);
            c.remove(axis);
            let out: usize = c
                .iter()
                .zip(&result.shape)
                .fold(0, |acc, (x, s)| acc * s + x);
            want[out] += flat as u64;
        }
        for t in 0..threads {
            let (lane, warp) = (t as u32 % WARP_SIZE, t as u32 / WARP_SIZE);
            for r in 0..n {
                let k = layout.sliced_register(axis, r).unwrap();
                let at = result.flat_index(k, lane, warp) as usize;
                let total: u64 = (0..groups)
                    .map(|g| slots[g][at].expect("slot written"))
                    .sum();
                assert_eq!(total, want[at], "{shape:?} axis {axis} thread {t} reg {r}");
            }
        }
    }

    #[test]
    fn reduction_plan_sums_each_slice_exactly_once() {
        for (shape, vector, warps) in [
            (vec![4, 1024], 4, 4),
            (vec![64, 32], 4, 4),
            (vec![2, 8], 4, 8),
            (vec![128], 4, 2),
            (vec![8], 4, 4),
            (vec![16, 4, 8], 2, 4),
        ] {
            for axis in 0..shape.len() {
                check_sum_plan(&shape, vector, warps, axis);
            }
        }
    }
}
