//! Triton's `join` and `split`, in registers: `join` puts the new size-2
//! dimension in the lowest register bit of its operands' layout (each thread
//! already holds both halves of what it holds), and `split` reads that bit
//! back off, converting its operand first only when no register alone
//! carries the last dimension.

use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use tlx_core::ir::{Op, OpKind};

impl<'k> Lowerer<'k> {
    pub fn lower_join_split(&mut self, op: &'k Op) -> Result<()> {
        match &op.kind {
            OpKind::Join { a, b } => {
                let result = *op
                    .results
                    .first()
                    .ok_or_else(|| malformed("join without result"))?;
                let first = self.tensor(*a)?;
                let second = self.get(*b, &first.layout)?;
                let regs = first
                    .regs
                    .into_iter()
                    .zip(second)
                    .flat_map(|(x, y)| [x, y])
                    .collect();
                let layout = first.layout.joined();
                self.define_value(result, Tensor { layout, regs });
                Ok(())
            }
            OpKind::Split(value) => {
                let (Some(&low), Some(&high)) = (op.results.first(), op.results.get(1)) else {
                    return Err(malformed("split needs two results"));
                };
                let held = self.tensor(*value)?;
                let (halves, bit, regs) = match held.layout.split_halves() {
                    Some((halves, bit)) => (halves, bit, held.regs),
                    None => {
                        let shape = self.ty(low).shape().to_vec();
                        let halves = self.default_layout(&shape)?;
                        let regs = self.get(*value, &halves.joined())?;
                        (halves, 0, regs)
                    }
                };
                // Register `r` of a half sits at `r` with a 0 or 1 inserted at `bit`.
                let at = |r: usize, j: usize| {
                    let below = r & ((1 << bit) - 1);
                    (r - below) << 1 | j << bit | below
                };
                for (j, result) in [low, high].into_iter().enumerate() {
                    let part = (0..halves.num_regs())
                        .map(|r| regs[at(r, j)].clone())
                        .collect();
                    let layout = halves.clone();
                    self.define_value(result, Tensor { layout, regs: part });
                }
                Ok(())
            }
            _ => Err(malformed("not a join or split")),
        }
    }
}
