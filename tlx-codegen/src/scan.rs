//! Scans along any axis (TLE's `cumsum`; the prefixes behind `cumprod`,
//! `cummax`, `cummin`): a Hillis-Steele inclusive scan in shared memory
//! (log2(n) steps, each a read, a barrier and a write; every line along the
//! axis at once), from which each element takes its exclusive prefix (the
//! combine's identity first) and each line its total. f16/bf16 combine in
//! f32; `reverse` scans from the end.

use super::error::{malformed, refused_upstream, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar;
use tlx_core::ir::{BinaryOp, Elem, Literal, Op, OpKind, ScalarType};

impl<'k> Lowerer<'k> {
    pub fn lower_scan(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Scan {
            value,
            axis,
            reverse,
            combine,
        } = &op.kind
        else {
            return Err(malformed("not a scan"));
        };
        let (Some(&prefix_id), Some(&total_id)) = (op.results.first(), op.results.get(1)) else {
            return Err(malformed("a scan needs two results"));
        };
        let ty = self.ty(*value);
        let s = ty
            .elem()
            .scalar()
            .ok_or_else(|| malformed("a scan of pointers"))?;
        if !(s.is_int() || s.is_float()) {
            return Err(refused_upstream(format!("a scan of {s}")));
        }
        let shape = ty.shape().to_vec();
        let axis = *axis;
        if axis >= shape.len() {
            return Err(malformed("a scan along an axis the tensor does not have"));
        }
        // Narrow floats scan in f32, as the interpreter does.
        let acc_s = if s.is_float() && s != ScalarType::F64 {
            ScalarType::F32
        } else {
            s
        };
        let acc = Elem::Scalar(acc_s);
        // Every line along the axis is scanned at once: element `f` (flat)
        // sits at position `(f / inner) % n` of the line starting at
        // `f - position * inner`; the shared copy keeps the tensor's order.
        let n = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let numel: usize = shape.iter().product();
        let src: Tensor = self.tensor(*value)?;
        let layout = src.layout.clone();
        self.use_shared(numel * acc_s.size_bytes());
        // Per register: its flat slot and its scan position (from the end
        // when reversed); the slot `d` positions earlier in the scan is
        // `d * inner` before it, or after it when reversed.
        let toward_start = if *reverse { "add" } else { "sub" };
        let mut slots = Vec::new();
        let mut positions = Vec::new();
        for r in 0..layout.num_regs() {
            let flat = self.flat_index(&layout, r);
            let line = self.f.inst(format!("udiv i32 {flat}, {inner}"));
            let along = self.f.inst(format!("urem i32 {line}, {n}"));
            positions.push(if *reverse {
                self.f.inst(format!("sub i32 {}, {along}", n - 1))
            } else {
                along
            });
            slots.push(flat);
        }
        let acc_ty = super::emit::scalar_type(acc_s);
        let identity = scalar::literal(&mut self.f, acc, scan_identity(*combine, acc_s))?;
        // What register `r`'s line holds `steps` scan positions earlier, or
        // the identity before the line's start.
        let earlier = |l: &mut Self, r: usize, steps: usize| {
            let has = l.f.inst(format!("icmp uge i32 {}, {steps}", positions[r]));
            let back = l.f.inst(format!(
                "{toward_start} i32 {}, {}",
                slots[r],
                steps * inner
            ));
            let at = l.f.inst(format!("select i1 {has}, i32 {back}, i32 0"));
            let value = l.smem_load(acc, 0, &at);
            l.f.inst(format!(
                "select i1 {has}, {acc_ty} {value}, {acc_ty} {identity}"
            ))
        };
        let mut running = Vec::new();
        for v in &src.regs {
            running.push(scalar::cast(&mut self.f, s, acc_s, v)?);
        }
        self.barrier();
        for (r, v) in running.iter().enumerate() {
            self.smem_store(acc, 0, &slots[r], v);
        }
        let mut step = 1;
        while step < n {
            self.barrier();
            let mut next = Vec::new();
            for (r, v) in running.iter().enumerate() {
                let earlier = earlier(self, r, step);
                // `earlier` first: for a reverse scan it is the later element,
                // which only matters to non-commutative combines (none here).
                next.push(scalar::binary(&mut self.f, *combine, acc_s, &earlier, v)?);
            }
            self.barrier();
            for (r, v) in next.iter().enumerate() {
                self.smem_store(acc, 0, &slots[r], v);
            }
            running = next;
            step *= 2;
        }
        self.barrier();
        let mut prefix = Vec::new();
        for r in 0..positions.len() {
            let exclusive = earlier(self, r, 1);
            prefix.push(scalar::cast(&mut self.f, acc_s, s, &exclusive)?);
        }
        // Each line's total sits at its last scan position.
        let total_shape: Vec<usize> = shape
            .iter()
            .enumerate()
            .filter(|&(d, _)| d != axis)
            .map(|(_, &e)| e)
            .collect();
        let total_layout = if total_shape.is_empty() {
            self.scalar_layout()?
        } else {
            self.default_layout(&total_shape)?
        };
        let last = if *reverse { 0 } else { n - 1 };
        let mut totals = Vec::new();
        for r in 0..total_layout.num_regs() {
            let t = self.flat_index(&total_layout, r);
            let outer = self.f.inst(format!("udiv i32 {t}, {inner}"));
            let within = self.f.inst(format!("urem i32 {t}, {inner}"));
            let line = self.f.inst(format!("mul i32 {outer}, {}", n * inner));
            let start = self.f.inst(format!("add i32 {line}, {within}"));
            let at = self.f.inst(format!("add i32 {start}, {}", last * inner));
            let total = self.smem_load(acc, 0, &at);
            totals.push(scalar::cast(&mut self.f, acc_s, s, &total)?);
        }
        self.held.values.insert(
            prefix_id,
            Tensor {
                layout,
                regs: prefix,
            },
        );
        self.held.values.insert(
            total_id,
            Tensor {
                layout: total_layout,
                regs: totals,
            },
        );
        Ok(())
    }
}

/// The value a scan by `combine` starts from, in the accumulator's type.
fn scan_identity(combine: BinaryOp, acc: ScalarType) -> Literal {
    let float = acc.is_float();
    match combine {
        BinaryOp::Mul if float => Literal::Float(1.0),
        BinaryOp::Mul => Literal::Int(1),
        BinaryOp::Max if float => Literal::Float(f64::NEG_INFINITY),
        BinaryOp::Min if float => Literal::Float(f64::INFINITY),
        BinaryOp::Max | BinaryOp::Min => {
            let bits = acc.size_bytes() * 8;
            let (low, high) = if acc.is_signed_int() {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let pick = if combine == BinaryOp::Max { low } else { high };
            Literal::Int(pick as i64)
        }
        _ => Literal::Int(0),
    }
}
