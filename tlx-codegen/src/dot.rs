//! `Dot` (`acc + a @ b`). On sm_90a, 16-bit tiles that split into warp
//! groups go to wgmma (`wgmma.rs`). Otherwise operands are staged through
//! shared memory (A row-major, B transposed, rows padded by 16 bytes so that
//! `ldmatrix` reads them without bank conflicts): f16/bf16, tf32 (f32 inputs)
//! and i8/u8 tiles run on tensor cores with `mma.sync` (m16n8k16 / m16n8k8 /
//! m16n8k32), the accumulator living in the MMA fragment layout; other types
//! and shapes use per-element FMAs.

use super::analysis::mma::WgmmaPlan;
use super::error::{malformed, refused_upstream, Result};
use super::lower::{Lowerer, Tensor};
use super::region::{Placement, Region};
use super::scalar::{self, mem_bytes};
use crate::layout::{mma_sync_accumulator, warp_grid, LinearLayout};
use tlx_core::ir::{DotPrecision, Elem, Op, OpKind, ScalarType};

/// One `mma.sync` shape and type combination.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MmaKind {
    /// Operand elements per 32-bit fragment register.
    per_reg: usize,
    instr: &'static str,
    /// Accumulator asm constraint (`f` for f32, `r` for s32).
    acc_constraint: &'static str,
    /// Round f32 operands to tf32 first.
    round_tf32: bool,
}

impl MmaKind {
    fn k_tile(self) -> usize {
        8 * self.per_reg
    }
}

/// The MMA kind for `a @ b` accumulated in `acc`, if tensor cores apply.
pub fn mma_kind(
    a: ScalarType,
    b: ScalarType,
    acc: ScalarType,
    precision: DotPrecision,
) -> Option<MmaKind> {
    let kind = |per_reg, instr, acc_constraint, round_tf32| MmaKind {
        per_reg,
        instr,
        acc_constraint,
        round_tf32,
    };
    match (a, b, acc) {
        (ScalarType::F16, ScalarType::F16, ScalarType::F32) => Some(kind(
            2,
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            "f",
            false,
        )),
        (ScalarType::BF16, ScalarType::BF16, ScalarType::F32) => Some(kind(
            2,
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            "f",
            false,
        )),
        (ScalarType::F32, ScalarType::F32, ScalarType::F32) if precision == DotPrecision::Tf32 => {
            Some(kind(
                1,
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                "f",
                true,
            ))
        }
        (ScalarType::I8, ScalarType::I8, ScalarType::I32) => Some(kind(
            4,
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
            "r",
            false,
        )),
        (ScalarType::U8, ScalarType::U8, ScalarType::I32) => Some(kind(
            4,
            "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32",
            "r",
            false,
        )),
        _ => None,
    }
}

/// Elements between staged operand rows: `k` plus 16 bytes, so the eight rows a
/// fragment load touches fall in different shared memory banks.
fn padded_row(k: usize, elem_bytes: usize) -> usize {
    k + 16 / elem_bytes.max(1)
}

struct DotOperands {
    a: ValueIdTy,
    b: ValueIdTy,
    m: usize,
    n: usize,
    k: usize,
}

struct ValueIdTy {
    id: tlx_core::ir::ValueId,
    s: ScalarType,
}

impl<'k> Lowerer<'k> {
    fn dot_operands(&self, op: &Op) -> Result<(DotOperands, ScalarType, DotPrecision)> {
        let OpKind::Dot {
            a,
            b,
            acc,
            precision,
        } = &op.kind
        else {
            return Err(malformed("not a dot"));
        };
        let (ta, tb, tc) = (self.ty(*a), self.ty(*b), self.ty(*acc));
        let scalar = |t: &tlx_core::ir::Type| {
            t.elem()
                .scalar()
                .ok_or_else(|| malformed("dot of pointers"))
        };
        if ta.rank() != 2 || tb.rank() != 2 || tc.rank() != 2 {
            return Err(malformed("dot operands must be rank 2"));
        }
        let (m, k, n) = (ta.shape()[0], ta.shape()[1], tb.shape()[1]);
        if tb.shape()[0] != k || tc.shape() != [m, n] {
            return Err(malformed("dot shapes do not agree"));
        }
        Ok((
            DotOperands {
                a: ValueIdTy {
                    id: *a,
                    s: scalar(ta)?,
                },
                b: ValueIdTy {
                    id: *b,
                    s: scalar(tb)?,
                },
                m,
                n,
                k,
            },
            scalar(tc)?,
            *precision,
        ))
    }

    /// The layout a `Dot` produces its result in (loops carry their accumulator in it).
    pub fn dot_result_layout(&self, op: &Op) -> Result<Option<LinearLayout>> {
        let (d, acc_s, precision) = self.dot_operands(op)?;
        if let Some(plan) = self.wgmma_plan(&d, acc_s) {
            return plan.acc_layout().map(Some);
        }
        self.mma_plan(&d, acc_s, precision)
            .map(|_| mma_sync_accumulator(d.m, d.n, self.num_warps))
            .transpose()
            .map_err(Into::into)
    }

    fn wgmma_plan(&self, d: &DotOperands, acc_s: ScalarType) -> Option<WgmmaPlan> {
        let types = (d.a.s, d.b.s, acc_s);
        WgmmaPlan::new(self.arch, types, (d.m, d.n, d.k), self.num_warps)
    }

    fn mma_plan(
        &self,
        d: &DotOperands,
        acc_s: ScalarType,
        precision: DotPrecision,
    ) -> Option<MmaKind> {
        let kind = mma_kind(d.a.s, d.b.s, acc_s, precision)?;
        (d.m % 16 == 0 && d.n % 8 == 0 && d.k % kind.k_tile() == 0).then_some(kind)
    }

    /// Write `value` (a `[rows, cols]` tile) to shared memory at byte `base`, row-major,
    /// or transposed (`[cols, rows]`) when `transpose`, each stored row `stride`
    /// elements apart.
    fn stage(
        &mut self,
        value: tlx_core::ir::ValueId,
        base: usize,
        transpose: bool,
        stride: usize,
    ) -> Result<()> {
        let t: Tensor = self.tensor(value)?;
        let ty = self.ty(value);
        let region = Region {
            base,
            placement: Placement {
                cols: ty.shape()[1],
                stride,
                transpose,
            },
            elem_bytes: mem_bytes(ty.elem()),
        };
        for (r, v) in t.regs.iter().enumerate() {
            if t.layout.is_replica(r, 0, 0) {
                continue;
            }
            self.smem_store_reg(ty.elem(), region, &t.layout, r, v);
        }
        Ok(())
    }

    /// This lane's `ldmatrix` row pointer into an operand staged at scratch
    /// byte `base`: stored row `row`, element `col`. Every other row the
    /// lane names is a constant byte offset from it, which keeps the
    /// addresses simple for LLVM and lets them fold into the instruction's
    /// immediate.
    fn fragment_base(
        &mut self,
        base: usize,
        row: &str,
        col: &str,
        row_elems: usize,
        bytes: usize,
    ) -> String {
        let base = self.scratch(base);
        let idx = self.f.inst(format!("mul i32 {row}, {row_elems}"));
        let idx = self.f.inst(format!("add i32 {idx}, {col}"));
        let off = self.f.inst(format!("mul i32 {idx}, {bytes}"));
        let off = self.f.inst(format!("add i32 {off}, {base}"));
        self.smem_ptr(&off)
    }

    pub fn lower_dot(&mut self, op: &'k Op) -> Result<()> {
        let (d, acc_s, precision) = self.dot_operands(op)?;
        let OpKind::Dot { acc, .. } = &op.kind else {
            return Err(malformed("not a dot"));
        };
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("dot without result"))?;
        if let Some(plan) = self.wgmma_plan(&d, acc_s) {
            let layout = plan.acc_layout()?;
            let acc_regs = self.get(*acc, &layout)?;
            self.shared.shared_align = self.shared.shared_align.max(1024);
            let rings = (
                self.ring_reads.get(&d.a.id).cloned(),
                self.ring_reads.get(&d.b.id).cloned(),
            );
            let tensor = match rings {
                (Some(a), Some(b)) if a.is_operand() && b.is_operand() => {
                    let in_flight = self.sync.wgmma_in_flight.contains(&result);
                    self.wgmma_from_rings(&plan, (&a, &b), acc_regs, in_flight)?
                }
                _ => {
                    let (a, b) = (self.tensor(d.a.id)?, self.tensor(d.b.id)?);
                    self.wgmma_from_registers(&plan, (&a, &b), acc_regs)?
                }
            };
            self.held.values.insert(result, tensor);
            return Ok(());
        }
        let a_bytes = d.a.s.size_bytes();
        let (stride_a, stride_b) = (
            padded_row(d.k, a_bytes),
            padded_row(d.k, d.b.s.size_bytes()),
        );
        let b_base = (d.m * stride_a * a_bytes).div_ceil(16) * 16;
        self.use_shared(b_base + d.n * stride_b * d.b.s.size_bytes());
        self.barrier();
        self.stage(d.a.id, 0, false, stride_a)?;
        self.stage(d.b.id, b_base, true, stride_b)?;
        self.barrier();
        let tensor = match self.mma_plan(&d, acc_s, precision) {
            Some(kind) => self.mma_tiles(&d, *acc, kind, b_base)?,
            None => self.fma_dot(&d, *acc, acc_s, b_base)?,
        };
        self.held.values.insert(result, tensor);
        Ok(())
    }

    fn mma_tiles(
        &mut self,
        d: &DotOperands,
        acc: tlx_core::ir::ValueId,
        kind: MmaKind,
        b_base: usize,
    ) -> Result<Tensor> {
        let layout = mma_sync_accumulator(d.m, d.n, self.num_warps)?;
        let mut regs = self.get(acc, &layout)?;
        let (warps_m, warps_n) = warp_grid(d.m, d.n, self.num_warps);
        let reps_n = d.n / (8 * warps_n);
        let reps_m = d.m / (16 * warps_m);
        let bytes = 4 / kind.per_reg;
        // Elements in 16 bytes: the second half of a K step's fragment.
        let half = 16 / bytes;
        let (lane, warp) = (self.threads.lane.clone(), self.threads.warp.clone());
        let wm = self.f.inst(format!("and i32 {warp}, {}", warps_m - 1));
        let wn_shift = self
            .f
            .inst(format!("lshr i32 {warp}, {}", warps_m.trailing_zeros()));
        let wn = self.f.inst(format!("and i32 {wn_shift}, {}", warps_n - 1));
        let row_elems = padded_row(d.k, bytes);
        let acc_ty = if kind.acc_constraint == "f" {
            "float"
        } else {
            "i32"
        };
        // One `ldmatrix` per fragment, for every element size: each lane
        // names one 16-byte row of an 8x8 matrix of 16-bit words (A: rows
        // 0-15 at k and 16 bytes on; B: rows 0-7 of the transposed tile at
        // the same two places), and each thread receives the 32-bit word its
        // MMA fragment holds. The padded rows keep the eight rows of each
        // matrix in different banks.
        let a_first = self.f.inst(format!("mul i32 {wm}, 16"));
        let a_lrow = self.f.inst(format!("and i32 {lane}, 15"));
        let a_lrow = self.f.inst(format!("add i32 {a_first}, {a_lrow}"));
        let a_half = self.f.inst(format!("lshr i32 {lane}, 4"));
        let a_k = self.f.inst(format!("mul i32 {a_half}, {half}"));
        let b_first = self.f.inst(format!("mul i32 {wn}, 8"));
        let b_lrow = self.f.inst(format!("and i32 {lane}, 7"));
        let b_lrow = self.f.inst(format!("add i32 {b_first}, {b_lrow}"));
        let b_half = self.f.inst(format!("lshr i32 {lane}, 3"));
        let b_half = self.f.inst(format!("and i32 {b_half}, 1"));
        let b_k = self.f.inst(format!("mul i32 {b_half}, {half}"));
        let a_rows = self.fragment_base(0, &a_lrow, &a_k, row_elems, bytes);
        let b_rows = self.fragment_base(b_base, &b_lrow, &b_k, row_elems, bytes);
        for ks in 0..d.k / kind.k_tile() {
            let k0 = ks * kind.k_tile();
            let mut a_frags: Vec<Vec<String>> = Vec::new();
            for tm in 0..reps_m {
                let at = (tm * warps_m * 16 * row_elems + k0) * bytes;
                let words = self.ldmatrix(&a_rows, at, 4);
                a_frags.push(
                    words
                        .into_iter()
                        .map(|w| self.round_operand(kind, w))
                        .collect(),
                );
            }
            let mut b_frags: Vec<Vec<String>> = Vec::new();
            for tn in 0..reps_n {
                let at = (tn * warps_n * 8 * row_elems + k0) * bytes;
                let words = self.ldmatrix(&b_rows, at, 2);
                b_frags.push(
                    words
                        .into_iter()
                        .map(|w| self.round_operand(kind, w))
                        .collect(),
                );
            }
            for (tm, a_frag) in a_frags.iter().enumerate() {
                for (tn, b_frag) in b_frags.iter().enumerate() {
                    let first = 4 * (tn + reps_n * tm);
                    let c: Vec<String> = regs[first..first + 4].to_vec();
                    let out = self.mma(kind, acc_ty, a_frag, b_frag, &c);
                    regs.splice(first..first + 4, out);
                }
            }
        }
        Ok(Tensor { layout, regs })
    }

    /// `ldmatrix` of `count` 8x8 matrices of 16-bit elements, this lane's
    /// row at `offset` bytes after `lane_row` (a shared pointer): one 32-bit
    /// register per matrix, in `mma.sync`'s fragment order.
    fn ldmatrix(&mut self, lane_row: &str, offset: usize, count: usize) -> Vec<String> {
        let p = self.smem_ptr_plus(lane_row, offset);
        let addr = self.f.inst(format!("ptrtoint ptr addrspace(3) {p} to i32"));
        let outs: Vec<String> = (0..count).map(|i| format!("${i}")).collect();
        let asm = format!(
            "ldmatrix.sync.aligned.m8n8.x{count}.shared.b16 {{{}}}, [${count}];",
            outs.join(", ")
        );
        let constraints = [vec!["=r".to_string(); count], vec!["r".to_string()]]
            .concat()
            .join(",");
        let ret = format!("{{ {} }}", vec!["i32"; count].join(", "));
        let r = self.f.asm(&ret, &asm, &constraints, &[("i32", &addr)]);
        (0..count)
            .map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}")))
            .collect()
    }

    fn round_operand(&mut self, kind: MmaKind, word: String) -> String {
        if !kind.round_tf32 {
            return word;
        }
        let f = self.f.inst(format!("bitcast i32 {word} to float"));
        self.f
            .pure_asm("i32", "cvt.rna.tf32.f32 $0, $1;", "=r,f", &[("float", &f)])
    }

    fn mma(
        &mut self,
        kind: MmaKind,
        acc_ty: &str,
        a: &[String],
        b: &[String],
        c: &[String],
    ) -> Vec<String> {
        let ac = kind.acc_constraint;
        let asm = format!(
            "{} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, {{$10, $11, $12, $13}};",
            kind.instr
        );
        let constraints = [
            vec![format!("={ac}"); 4],
            vec!["r".to_string(); 6],
            vec![ac.to_string(); 4],
        ]
        .concat()
        .join(",");
        let mut args: Vec<(&str, &str)> = a.iter().chain(b).map(|v| ("i32", v.as_str())).collect();
        args.extend(c.iter().map(|v| (acc_ty, v.as_str())));
        let ret = format!("{{ {acc_ty}, {acc_ty}, {acc_ty}, {acc_ty} }}");
        let r = self.f.pure_asm(&ret, &asm, &constraints, &args);
        (0..4)
            .map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}")))
            .collect()
    }

    /// `acc + a @ b` one output element per register, reading operands from shared memory.
    fn fma_dot(
        &mut self,
        d: &DotOperands,
        acc: tlx_core::ir::ValueId,
        acc_s: ScalarType,
        b_base: usize,
    ) -> Result<Tensor> {
        let acc_t: Tensor = self.tensor(acc)?;
        let layout = acc_t.layout.clone();
        let (a_elem, b_elem) = (Elem::Scalar(d.a.s), Elem::Scalar(d.b.s));
        let mut regs = Vec::with_capacity(acc_t.regs.len());
        if matches!(
            acc_s,
            ScalarType::Bool | ScalarType::F8E4M3 | ScalarType::F8E5M2
        ) {
            return Err(refused_upstream(format!("dot accumulating in {acc_s}")));
        }
        for (r, c) in acc_t.regs.iter().enumerate() {
            let flat = self.flat_index(&layout, r);
            let row = self
                .f
                .inst(format!("lshr i32 {flat}, {}", d.n.trailing_zeros()));
            let col = self.f.inst(format!("and i32 {flat}, {}", d.n - 1));
            let a_row = self.f.inst(format!(
                "mul i32 {row}, {}",
                padded_row(d.k, d.a.s.size_bytes())
            ));
            let b_row = self.f.inst(format!(
                "mul i32 {col}, {}",
                padded_row(d.k, d.b.s.size_bytes())
            ));
            let mut sum = c.clone();
            for kk in 0..d.k {
                let ai = self.f.inst(format!("add i32 {a_row}, {kk}"));
                let bi = self.f.inst(format!("add i32 {b_row}, {kk}"));
                let av = self.smem_load(a_elem, 0, &ai);
                let bv = self.smem_load(b_elem, b_base, &bi);
                let av = scalar::cast(&mut self.f, d.a.s, acc_s, &av)?;
                let bv = scalar::cast(&mut self.f, d.b.s, acc_s, &bv)?;
                sum = scalar::fma(&mut self.f, acc_s, &av, &bv, &sum)?;
            }
            regs.push(sum);
        }
        Ok(Tensor { layout, regs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each 8x8 matrix an `ldmatrix` reads is eight 16-byte rows of the
    /// staged operand, one row per lane of a quarter warp: with the padded
    /// row stride they cover all 32 banks once (one wavefront), computed for
    /// every K and element size the MMAs take.
    #[test]
    fn ldmatrix_rows_of_padded_operands_hit_every_bank_once() {
        // K is a multiple of the MMA's K step: 32 bytes of elements.
        for (k, bytes) in [16, 32, 64, 128, 256]
            .into_iter()
            .flat_map(|k| [(k, 1), (k, 2), (k, 4)])
            .filter(|(k, bytes)| k % (32 / bytes) == 0)
        {
            let stride = padded_row(k, bytes) * bytes;
            assert_eq!(stride % 16, 0, "rows must stay 16-byte aligned");
            for first_row in [0, 8, 16] {
                for col in (0..k).step_by(16 / bytes) {
                    let mut banks: Vec<usize> = (first_row..first_row + 8)
                        .flat_map(|r| {
                            let at = r * stride + col * bytes;
                            (0..4).map(move |w| (at / 4 + w) % 32)
                        })
                        .collect();
                    banks.sort_unstable();
                    banks.dedup();
                    assert_eq!(banks.len(), 32, "k {k}, rows {first_row}.., column {col}");
                }
            }
        }
    }

    #[test]
    fn tensor_cores_only_for_supported_types() {
        assert!(mma_kind(
            ScalarType::F16,
            ScalarType::F16,
            ScalarType::F32,
            DotPrecision::Tf32
        )
        .is_some());
        assert!(mma_kind(
            ScalarType::F32,
            ScalarType::F32,
            ScalarType::F32,
            DotPrecision::Ieee
        )
        .is_none());
        assert_eq!(
            mma_kind(
                ScalarType::I8,
                ScalarType::I8,
                ScalarType::I32,
                DotPrecision::Tf32
            )
            .map(|k| k.k_tile()),
            Some(32)
        );
    }
}
