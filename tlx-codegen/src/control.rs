//! Structured control flow (`For`, `While`, `If`) to LLVM basic blocks and
//! phis. Loop-carried values keep the layout of their initial value; yielded
//! values are brought to it. Phi operands from the loop latch are not known
//! until the body is lowered, so they are written as placeholders and filled in.

use std::collections::HashMap;

use super::emit::llvm_type;
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::pipeline::LoopBounds;
use crate::layout::{wgmma_accumulator, LinearLayout};
use tlx_core::ir::{Block, Op, OpKind, Prim, ValueId};

/// Every op of `block` and its nested blocks by the values it defines.
fn index_producers<'k>(block: &'k Block, producers: &mut HashMap<ValueId, &'k Op>) {
    for op in &block.ops {
        for &r in &op.results {
            producers.insert(r, op);
        }
        for nested in op.kind.blocks() {
            index_producers(nested, producers);
        }
    }
}

/// Phis of loop-carried values, with the placeholders of their latch operands.
struct CarriedPhis {
    tensors: Vec<Tensor>,
    placeholders: Vec<Vec<String>>,
}

impl<'k> Lowerer<'k> {
    /// A stand-in for a phi's latch operand, not known until the loop body is lowered.
    pub(super) fn placeholder(&mut self) -> String {
        self.f.placeholder("latch")
    }

    /// Fills `hole` with `value`, arriving from the current block (the latch).
    pub(super) fn fill_latch(&mut self, hole: &str, value: &str) {
        let latch = &self.current_block;
        let text = format!("{value}, %{latch}");
        self.f.fill(hole, text);
    }

    fn branch_to(&mut self, label: &str) {
        self.f.stmt(format!("br label %{label}"));
    }

    fn enter(&mut self, label: &str) {
        self.f.start_block(label);
        self.current_block = label.to_string();
    }

    /// The initial carried values, in the layout the loop keeps them in: a value the
    /// body replaces by one derived from a tensor-core result stays in the
    /// layout that result comes in (see [`Lowerer::derived_layout`]).
    fn carried_inits(&mut self, inits: &[ValueId], body: &'k Block) -> Result<Vec<Tensor>> {
        let yielded = super::analysis::pipeline::yielded(body);
        let mut producers = HashMap::new();
        index_producers(body, &mut producers);
        let mut out = Vec::new();
        for (i, v) in inits.iter().enumerate() {
            let hint = match yielded.get(i) {
                Some(&y) => self.derived_layout(&producers, y, 0)?,
                None => None,
            };
            let mut t = self.tensor(*v)?;
            if let Some(layout) = hint {
                t.regs = self.get(*v, &layout)?;
                t.layout = layout;
            }
            out.push(t);
        }
        Ok(out)
    }

    /// The layout `v` will be computed in when it derives from a `dot` or
    /// `async_dot` result of the loop body: through elementwise ops of the
    /// same shape (the result's own layout), reductions (its slice),
    /// branches and nested loops. Carrying the value in that layout spares a conversion
    /// through shared memory, and a barrier, every iteration (flash
    /// attention's rescaled `O`, its row max and sum, its `P`).
    fn derived_layout(
        &self,
        producers: &HashMap<ValueId, &'k Op>,
        v: ValueId,
        depth: usize,
    ) -> Result<Option<LinearLayout>> {
        let Some(op) = producers.get(&v) else {
            return Ok(None);
        };
        if depth > 32 {
            return Ok(None);
        }
        let same_shape = |o: &ValueId| self.ty(*o).shape() == self.ty(v).shape();
        let from_operands = |operands: Vec<ValueId>| -> Result<Option<LinearLayout>> {
            for o in operands.iter().filter(|o| same_shape(o)) {
                if let Some(layout) = self.derived_layout(producers, *o, depth + 1)? {
                    return Ok(Some(layout));
                }
            }
            Ok(None)
        };
        match &op.kind {
            OpKind::Dot { .. } => self.dot_result_layout(op),
            OpKind::Prim {
                prim: Prim::AsyncDot | Prim::AsyncDotWait,
                ..
            } => Ok(match self.ty(v).shape() {
                &[m, n] => wgmma_accumulator(m, n, self.num_warps).ok(),
                _ => None,
            }),
            OpKind::Reduce { value, axis, .. } => Ok(self
                .derived_layout(producers, *value, depth + 1)?
                .and_then(|l| l.sliced(*axis).ok())),
            OpKind::Binary { .. }
            | OpKind::Unary { .. }
            | OpKind::Select { .. }
            | OpKind::Fma { .. }
            | OpKind::Cast(_)
            | OpKind::Bitcast(_) => from_operands(op.kind.operands()),
            // A nested loop's result is its body's yield (an accumulator
            // carried through two loops); a branch's, either branch's.
            OpKind::If { .. } | OpKind::For { .. } | OpKind::While { .. } => {
                let group = op
                    .kind
                    .carried_values(&op.results)
                    .into_iter()
                    .find(|g| g.contains(&v))
                    .unwrap_or_default();
                from_operands(group.into_iter().filter(|&o| o != v).collect())
            }
            _ => Ok(None),
        }
    }

    /// Phis in the current (header) block for each init, entering from `pre`.
    fn carried_phis(
        &mut self,
        inits: &[ValueId],
        init_tensors: Vec<Tensor>,
        pre: &str,
    ) -> Result<CarriedPhis> {
        let mut tensors = Vec::new();
        let mut placeholders = Vec::new();
        for (v, init) in inits.iter().zip(init_tensors) {
            let ty = llvm_type(self.ty(*v).elem());
            let mut regs = Vec::new();
            let mut holes = Vec::new();
            for r in &init.regs {
                let hole = self.placeholder();
                regs.push(self.f.inst(format!("phi {ty} [ {r}, %{pre} ], [ {hole} ]")));
                holes.push(hole);
            }
            tensors.push(Tensor {
                layout: init.layout,
                regs,
            });
            placeholders.push(holes);
        }
        Ok(CarriedPhis {
            tensors,
            placeholders,
        })
    }

    /// Fill the latch operands of `phis` with `yielded` values (in the phis' layouts).
    fn close_phis(&mut self, phis: &CarriedPhis, yielded: &[ValueId]) -> Result<()> {
        if yielded.len() != phis.tensors.len() {
            return Err(malformed("yield count differs from carried values"));
        }
        let mut fills = Vec::new();
        for ((t, holes), v) in phis.tensors.iter().zip(&phis.placeholders).zip(yielded) {
            let regs = self.get(*v, &t.layout)?;
            fills.extend(holes.iter().cloned().zip(regs));
        }
        for (hole, reg) in fills {
            self.fill_latch(&hole, &reg);
        }
        Ok(())
    }

    fn bind_args(&mut self, block: &Block, tensors: &[Tensor]) -> Result<()> {
        if block.args.len() != tensors.len() {
            return Err(malformed("block arg count differs from carried values"));
        }
        for (a, t) in block.args.iter().zip(tensors) {
            self.held.values.insert(*a, t.clone());
        }
        Ok(())
    }

    fn terminator_values(&mut self, block: &'k Block) -> Result<&'k Op> {
        self.lower_block(block)?
            .ok_or_else(|| malformed("nested block without terminator"))
    }

    pub fn lower_for(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::For {
            lower,
            upper,
            step,
            inits,
            body,
        } = &op.kind
        else {
            return Err(malformed("not a for"));
        };
        let iv_ty = self.ty(*lower).elem();
        let signed = iv_ty.scalar().is_some_and(|s| s.is_signed_int());
        let ty = llvm_type(iv_ty);
        let lo = self.tensor(*lower)?.regs[0].clone();
        let hi = self.tensor(*upper)?.regs[0].clone();
        let st = self.tensor(*step)?.regs[0].clone();
        let init_tensors = self.carried_inits(inits, body)?;
        let bounds = LoopBounds {
            lower: lo.clone(),
            upper: hi.clone(),
            step: st.clone(),
            ty,
            signed,
        };
        // The first iterations' copies go before the loop, so `pre` comes after.
        let mut pipe = self.start_pipeline(body, &bounds)?;
        let pre = self.current_block.clone();
        let head = self.f.fresh("for_head");
        let body_label = self.f.fresh("for_body");
        let exit = self.f.fresh("for_exit");
        self.branch_to(&head);
        self.enter(&head);
        let iv_hole = self.placeholder();
        let iv = self
            .f
            .inst(format!("phi {ty} [ {lo}, %{pre} ], [ {iv_hole} ]"));
        // The ring slot of this iteration, and the parity of the ring's round.
        let (slot_hole, phase_hole) = (self.placeholder(), self.placeholder());
        let (slot, phase) = match pipe {
            Some(_) => (
                self.f
                    .inst(format!("phi i32 [ 0, %{pre} ], [ {slot_hole} ]")),
                self.f
                    .inst(format!("phi i32 [ 0, %{pre} ], [ {phase_hole} ]")),
            ),
            None => (String::new(), String::new()),
        };
        let phis = self.carried_phis(inits, init_tensors, &pre)?;
        let cmp = if signed { "slt" } else { "ult" };
        let go = self.f.inst(format!("icmp {cmp} {ty} {iv}, {hi}"));
        self.f
            .stmt(format!("br i1 {go}, label %{body_label}, label %{exit}"));
        self.enter(&body_label);
        let layout = self.scalar_layout()?;
        let mut args = vec![Tensor {
            layout,
            regs: vec![iv.clone()],
        }];
        args.extend(phis.tensors.iter().cloned());
        self.bind_args(body, &args)?;
        if let (Some(p), Some(&iv_arg)) = (pipe.as_mut(), body.args.first()) {
            self.advance_pipeline(p, iv_arg, &bounds, &iv, (&slot, &phase))?;
        }
        let term = self.terminator_values(body)?;
        self.ring_reads.clear();
        let OpKind::Yield(yielded) = &term.kind else {
            return Err(malformed("for body must end with yield"));
        };
        self.close_phis(&phis, yielded)?;
        let next_slot = pipe.as_ref().map(|p| self.next_slot(p, (&slot, &phase)));
        let next = self.f.inst(format!("add {ty} {iv}, {st}"));
        self.fill_latch(&iv_hole, &next);
        if let Some((slot, phase)) = next_slot {
            self.fill_latch(&slot_hole, &slot);
            self.fill_latch(&phase_hole, &phase);
        }
        self.branch_to(&head);
        self.enter(&exit);
        let mut results = phis.tensors;
        if let Some(p) = &pipe {
            self.finish_pipeline(p, body, &mut results);
        }
        self.bind_results(op, results)
    }

    pub fn lower_while(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::While { inits, cond, body } = &op.kind else {
            return Err(malformed("not a while"));
        };
        let init_tensors = self.carried_inits(inits, body)?;
        let pre = self.current_block.clone();
        let head = self.f.fresh("while_head");
        let body_label = self.f.fresh("while_body");
        let exit = self.f.fresh("while_exit");
        self.branch_to(&head);
        self.enter(&head);
        let phis = self.carried_phis(inits, init_tensors, &pre)?;
        self.bind_args(cond, &phis.tensors)?;
        let term = self.terminator_values(cond)?;
        let OpKind::Condition(c) = &term.kind else {
            return Err(malformed("while condition must end with condition"));
        };
        let go = self.tensor(*c)?.regs[0].clone();
        self.f
            .stmt(format!("br i1 {go}, label %{body_label}, label %{exit}"));
        self.enter(&body_label);
        self.bind_args(body, &phis.tensors)?;
        let term = self.terminator_values(body)?;
        let OpKind::Yield(yielded) = &term.kind else {
            return Err(malformed("while body must end with yield"));
        };
        self.close_phis(&phis, yielded)?;
        self.branch_to(&head);
        self.enter(&exit);
        self.bind_results(op, phis.tensors)
    }

    /// An `if` whose branches yield values: each result takes the `then`
    /// value's layout, unless that value is derived from constants and the
    /// `else` value is not, when it takes the `else` value's (a tile reset
    /// to `zeros` in one branch and rescaled in the other stays in the
    /// tensor cores' layout instead of going through shared memory). The
    /// `then` branch's conversions are filled in once both are known.
    pub fn lower_if(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::If {
            cond,
            then_block,
            else_block,
        } = &op.kind
        else {
            return Err(malformed("not an if"));
        };
        let c = self.tensor(*cond)?.regs[0].clone();
        let then_label = self.f.fresh("then");
        let else_label = self.f.fresh("else");
        let merge = self.f.fresh("endif");
        self.f.stmt(format!(
            "br i1 {c}, label %{then_label}, label %{else_label}"
        ));
        self.enter(&then_label);
        let term = self.terminator_values(then_block)?;
        let OpKind::Yield(then_values) = &term.kind else {
            return Err(malformed("if branch must end with yield"));
        };
        let then_tensors: Vec<Tensor> = then_values
            .iter()
            .map(|v| self.tensor(*v))
            .collect::<Result<_>>()?;
        let then_end = self.current_block.clone();
        let hole = self.placeholder();
        self.f.body.push_str(&hole);
        let then_numbering = self.f.swap_block_values(HashMap::new());
        self.branch_to(&merge);
        self.enter(&else_label);
        let term = self.terminator_values(else_block)?;
        let OpKind::Yield(else_values) = &term.kind else {
            return Err(malformed("if branch must end with yield"));
        };
        if else_values.len() != then_values.len() {
            return Err(malformed("if branches yield different counts"));
        }
        let mut layouts = Vec::new();
        for ((t, tv), ev) in then_tensors.iter().zip(then_values).zip(else_values) {
            let layout = if self.is_recomputable(*tv) && !self.is_recomputable(*ev) {
                self.tensor(*ev)?.layout
            } else {
                t.layout.clone()
            };
            layouts.push(layout);
        }
        let mut else_regs = Vec::new();
        for (v, layout) in else_values.iter().zip(&layouts) {
            else_regs.push(self.get(*v, layout)?);
        }
        let else_end = self.current_block.clone();
        self.branch_to(&merge);
        // The `then` values wanted in another layout, recomputed at the end
        // of their branch.
        let body = std::mem::take(&mut self.f.body);
        let else_numbering = self.f.swap_block_values(then_numbering);
        self.current_block = then_end.clone();
        let mut then_regs = Vec::new();
        for ((t, v), layout) in then_tensors.iter().zip(then_values).zip(&layouts) {
            then_regs.push(if t.layout == *layout {
                t.regs.clone()
            } else {
                self.get(*v, layout)?
            });
        }
        let conversions = std::mem::replace(&mut self.f.body, body);
        self.f.swap_block_values(else_numbering);
        self.f.fill(&hole, conversions);
        self.enter(&merge);
        let mut results = Vec::new();
        for (((a, b), v), layout) in then_regs
            .iter()
            .zip(&else_regs)
            .zip(then_values)
            .zip(layouts)
        {
            let ty = llvm_type(self.ty(*v).elem());
            let regs = a
                .iter()
                .zip(b)
                .map(|(a, b)| {
                    self.f.inst(format!(
                        "phi {ty} [ {a}, %{then_end} ], [ {b}, %{else_end} ]"
                    ))
                })
                .collect();
            results.push(Tensor { layout, regs });
        }
        self.bind_results(op, results)
    }

    fn bind_results(&mut self, op: &Op, tensors: Vec<Tensor>) -> Result<()> {
        if op.results.len() != tensors.len() {
            return Err(malformed("control flow result count"));
        }
        for (r, t) in op.results.iter().zip(tensors) {
            self.held.values.insert(*r, t);
        }
        Ok(())
    }
}
