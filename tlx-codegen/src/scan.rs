//! Scans of a rank-1 tensor (TLE's `cumsum`; the prefixes behind `cumprod`,
//! `cummax`, `cummin`): a Hillis-Steele inclusive scan in shared memory
//! (log2(n) steps, each a read, a barrier and a write), from which each
//! element takes its exclusive prefix (the combine's identity first) and
//! every thread the total. f16/bf16 combine in f32; `reverse` scans from the
//! end.

use super::lower::{malformed, Lowerer, Result, Tensor};
use super::scalar;
use super::CodegenError;
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
        if ty.rank() != 1 || *axis != 0 {
            return Err(CodegenError::Unsupported(
                "a scan of a tensor of rank above 1".into(),
            ));
        }
        let s = ty
            .elem()
            .scalar()
            .ok_or_else(|| malformed("a scan of pointers"))?;
        if !(s.is_int() || matches!(s, ScalarType::F16 | ScalarType::BF16 | ScalarType::F32)) {
            return Err(CodegenError::Unsupported(format!("a scan of {s}")));
        }
        let acc_s = if s.is_float() { ScalarType::F32 } else { s };
        let acc = Elem::Scalar(acc_s);
        let n = ty.shape()[0];
        let src: Tensor = self.tensor(*value)?;
        let layout = src.layout.clone();
        self.use_shared(n * acc_s.size_bytes());
        // Scan position of each register: its index, or n-1-index when reversed.
        let mut positions = Vec::new();
        for r in 0..layout.num_regs() {
            let flat = self.flat_index(&layout, r);
            positions.push(if *reverse {
                self.f.inst(format!("sub i32 {}, {flat}", n - 1))
            } else {
                flat
            });
        }
        let mut running = Vec::new();
        for v in &src.regs {
            running.push(scalar::cast(&mut self.f, s, acc_s, v)?);
        }
        self.barrier();
        for (r, v) in running.iter().enumerate() {
            self.smem_store(acc, 0, &positions[r], v);
        }
        let identity = scalar::literal(&mut self.f, acc, scan_identity(*combine, acc_s))?;
        let mut step = 1;
        while step < n {
            self.barrier();
            let mut next = Vec::new();
            for (r, v) in running.iter().enumerate() {
                let pos = &positions[r];
                let has = self.f.inst(format!("icmp uge i32 {pos}, {step}"));
                let back = self.f.inst(format!("sub i32 {pos}, {step}"));
                let at = self.f.inst(format!("select i1 {has}, i32 {back}, i32 0"));
                let earlier = self.smem_load(acc, 0, &at);
                let earlier = self.f.inst(format!(
                    "select i1 {has}, {} {earlier}, {} {identity}",
                    super::emit::scalar_type(acc_s),
                    super::emit::scalar_type(acc_s)
                ));
                // `earlier` first: for a reverse scan it is the later element,
                // which only matters to non-commutative combines (none here).
                next.push(scalar::binary(&mut self.f, *combine, acc_s, &earlier, v)?);
            }
            self.barrier();
            for (r, v) in next.iter().enumerate() {
                self.smem_store(acc, 0, &positions[r], v);
            }
            running = next;
            step *= 2;
        }
        self.barrier();
        let acc_ty = super::emit::scalar_type(acc_s);
        let mut prefix = Vec::new();
        for pos in &positions {
            let has = self.f.inst(format!("icmp ugt i32 {pos}, 0"));
            let back = self.f.inst(format!("sub i32 {pos}, 1"));
            let at = self.f.inst(format!("select i1 {has}, i32 {back}, i32 0"));
            let earlier = self.smem_load(acc, 0, &at);
            let exclusive = self.f.inst(format!(
                "select i1 {has}, {acc_ty} {earlier}, {acc_ty} {identity}"
            ));
            prefix.push(scalar::cast(&mut self.f, acc_s, s, &exclusive)?);
        }
        let last = (n - 1).to_string();
        let total = self.smem_load(acc, 0, &last);
        let total = scalar::cast(&mut self.f, acc_s, s, &total)?;
        self.values.insert(
            prefix_id,
            Tensor {
                layout,
                regs: prefix,
            },
        );
        let scalar_layout = self.scalar_layout()?;
        self.values.insert(
            total_id,
            Tensor {
                layout: scalar_layout,
                regs: vec![total],
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
