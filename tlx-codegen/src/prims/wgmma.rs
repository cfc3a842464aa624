//! The wgmma family's lowering (`async_dot` into a register accumulator,
//! `async_dot_wait`) on Hopper's warp-group tensor cores: the operands'
//! checks and the plan, then `crate::wgmma`'s issue and wait. An
//! `async_dot` into tensor memory is `tcgen05`'s.

use super::{no_lowering, Operands};
use crate::analysis::mma::{is_16_bit_float, OperandOrders, WgmmaPlan};
use crate::analysis::storage::buffer_layout;
use crate::error::{malformed, Result};
use crate::layout::wgmma_register_a;
use crate::lower::{Lowerer, Tensor};
use crate::wgmma::WgmmaA;
use crate::CodegenError;
use tlx_core::ir::{Arch, Op, Prim, ScalarType, Type, ValueId};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_wgmma_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let imm = |name: &str| named.imm(name);
        let result = || named.result();
        match named.prim() {
            Prim::AsyncDot => {
                self.lower_async_dot(op, arg("a")?, arg("b")?, arg("acc")?, result()?)
            }
            Prim::AsyncDotWait => {
                let acc = self.tensor(arg("acc")?)?;
                let acc_type = self
                    .ty(arg("acc")?)
                    .elem()
                    .scalar()
                    .unwrap_or(ScalarType::F32);
                let regs = self.wgmma_wait(imm("pendings")? as usize, acc_type, &acc.regs);
                self.define_value(
                    result()?,
                    Tensor {
                        layout: acc.layout,
                        regs,
                    },
                );
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }

    fn lower_async_dot(
        &mut self,
        op: &Op,
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        result: ValueId,
    ) -> Result<()> {
        let Type::SharedMemory(mb) = self.ty(b) else {
            return Err(malformed("`async_dot`'s b is not a buffer"));
        };
        let (a_elem, a_shape, a_buffer) = match self.ty(a) {
            Type::SharedMemory(ma) => (ma.elem(), ma.shape().to_vec(), Some(ma)),
            t => match t.elem().scalar() {
                Some(s) => (s, t.shape().to_vec(), None),
                None => return Err(malformed("`async_dot`'s a")),
            },
        };
        let [m, k] = a_shape[..] else {
            return Err(malformed("`async_dot`'s a is not a matrix"));
        };
        let n = mb.shape()[1];
        let acc_elem = self.ty(acc).elem().scalar().unwrap_or(ScalarType::F32);
        let warps = self.context.num_warps;
        let types = (a_elem, mb.elem(), acc_elem);
        if a_buffer.is_none() && !is_16_bit_float(a_elem) {
            return Err(CodegenError::Misuse {
                message: format!("`async_dot` with A in registers takes f16 or bf16, not {a_elem}"),
                hint: "wgmma reads only 16-bit A operands from registers: `local_store` A into \
                       a shared buffer for fp8, tf32 (f32) and 8-bit integer inputs, or cast it \
                       (`.to(bf16)`)"
                    .into(),
                at: Some(op.loc),
            });
        }
        let orders = OperandOrders {
            a_m_major: a_buffer.is_some_and(|ma| ma.transposed()),
            b_k_major: mb.transposed(),
        };
        let plan = WgmmaPlan::with_orders(self.arch, types, (m, n, k), warps, orders)
            .filter(|p| {
                a_buffer.is_none_or(|ma| buffer_layout(ma).is_ok_and(|l| l == p.a))
                    && buffer_layout(mb).is_ok_and(|l| l == p.b)
            })
            .ok_or_else(|| CodegenError::Misuse {
                message: format!(
                    "`async_dot` of [{m}, {k}] x [{k}, {n}] {a_elem} tiles on {warps} warps does not map onto wgmma{}",
                    wgmma_mismatch(self.arch, types, (m, n, k), warps, orders)
                ),
                hint: "wgmma takes f16/bf16 buffers (A may be a register tensor or M-major, \
                       `local_trans` of a [K, M] buffer) with an f32 accumulator; fp8 or f32 (tf32) buffers with an f32 accumulator and \
                       s8/u8 buffers with an i32 one, all three with B K-major (`local_trans` \
                       of an [N, K] tile); on sm_90a, whole warp groups (the task's num_warps \
                       a multiple of 4), M a multiple of 64 per warp group, N a multiple of 8 \
                       up to 256 (64 or more for an N-major B, a multiple of 16 above 32 for \
                       8-bit integers) and K a whole number of 32-byte steps (16 for 16-bit \
                       inputs, 32 for 8-bit, 8 for tf32)"
                    .into(),
                at: Some(op.loc),
            })?;
        let layout = plan.acc_layout()?;
        let acc_regs = self.get(acc, &layout)?;
        let b_at = self.register(b)?;
        let regs = if a_buffer.is_some() {
            let a_at = self.register(a)?;
            self.wgmma_issue(&plan, acc_regs, WgmmaA::Shared(&a_at), &b_at)?
        } else {
            // Free when A already sits in this layout, as an accumulator of
            // N = K (cast to 16 bits) does.
            let a_layout = wgmma_register_a(m, k, warps)?;
            let a_regs = self.get(a, &a_layout)?;
            self.wgmma_issue(&plan, acc_regs, WgmmaA::Registers(&a_regs), &b_at)?
        };
        self.define_value(result, Tensor { layout, regs });
        Ok(())
    }
}

/// Which of wgmma's requirements an `async_dot` misses, as `": reason"`
/// (empty when none of these is the reason).
fn wgmma_mismatch(
    arch: Arch,
    (a, b, acc): (ScalarType, ScalarType, ScalarType),
    (m, n, k): (usize, usize, usize),
    warps: u32,
    OperandOrders {
        a_m_major,
        b_k_major,
    }: OperandOrders,
) -> String {
    let groups = warps as usize / 4;
    let integer = matches!(a, ScalarType::I8 | ScalarType::U8);
    let k_major_only = matches!(
        a,
        ScalarType::F8E4M3 | ScalarType::F8E5M2 | ScalarType::F32 | ScalarType::I8 | ScalarType::U8
    );
    let k_step = 32 / a.size_bytes();
    let reason = if arch != Arch::Sm90a {
        format!("wgmma exists only on sm_90a, not {}", arch.name())
    } else if a != b {
        format!("the operands are {a} and {b}, not one type")
    } else if !is_16_bit_float(a) && !k_major_only {
        format!("wgmma has no {a} inputs")
    } else if k_major_only && !b_k_major {
        format!("{a} operands must be K-major: B must be `local_trans` of an [N, K] buffer")
    } else if k_major_only && a_m_major {
        format!(
            "{a} operands must be K-major: A must be an [M, K] buffer, not `local_trans` of one"
        )
    } else if integer && acc != ScalarType::I32 {
        format!("the accumulator is {acc}, not i32")
    } else if !integer && acc != ScalarType::F32 {
        format!("the accumulator is {acc}, not f32")
    } else if warps % 4 != 0 {
        format!("{warps} warps are not whole warp groups of 4")
    } else if m % (64 * groups) != 0 {
        format!(
            "M = {m} is not a multiple of 64 rows per warp group ({groups} warp group{})",
            if groups == 1 { "" } else { "s" }
        )
    } else if n > 256 || n % 8 != 0 || (!b_k_major && n < 64) {
        format!("N = {n} is not a multiple of 8 up to 256 (at least 64 for an N-major B)")
    } else if integer && n > 32 && n % 16 != 0 {
        format!("N = {n}: 8-bit integer wgmma has N = 8, 16, 24, 32 or a multiple of 16")
    } else if k % k_step != 0 {
        format!("K = {k} is not a multiple of {k_step}")
    } else {
        return String::new();
    };
    format!(": {reason}")
}
