//! Building a [`Kernel`] op by op: the frontend uses it, and so do tests
//! that need IR without going through Rust syntax.
//!
//! Nested blocks are built on a stack: `begin_block` opens one (with typed
//! args), ops are appended to the innermost, `end_block` closes it and hands
//! it back to be placed in a control-flow op.

use super::kernel::{Kernel, KernelOptions, Param, ParamKind};
use super::ops::{Block, Op, OpId, OpKind, SrcLoc, ValueId};
use super::types::Type;

pub struct Builder {
    kernel: Kernel,
    /// Open blocks; the kernel body is the bottom entry.
    stack: Vec<Block>,
    loc: SrcLoc,
}

impl Builder {
    pub fn new(name: impl Into<String>, options: KernelOptions) -> Builder {
        Builder {
            kernel: Kernel {
                name: name.into(),
                params: Vec::new(),
                consts: Vec::new(),
                options,
                body: Block::default(),
                types: Vec::new(),
                source_file: String::new(),
                names: Default::default(),
            },
            stack: vec![Block::default()],
            loc: SrcLoc::default(),
        }
    }

    /// Names `value` for messages (the user's `let` binding).
    pub fn name_value(&mut self, value: ValueId, name: impl Into<String>) {
        self.kernel.names.set(value, name);
    }

    pub fn set_source_file(&mut self, file: impl Into<String>) {
        self.kernel.source_file = file.into();
    }

    pub fn add_const(&mut self, name: impl Into<String>, value: i64) {
        self.kernel.consts.push((name.into(), value));
    }

    /// The location given to ops appended from now on.
    pub fn set_loc(&mut self, loc: SrcLoc) {
        self.loc = loc;
    }

    /// The options of the kernel being built.
    pub fn options(&self) -> &KernelOptions {
        &self.kernel.options
    }

    pub fn loc(&self) -> SrcLoc {
        self.loc
    }

    /// A fresh value of type `ty`, defined by nobody yet.
    pub fn new_value(&mut self, ty: Type) -> ValueId {
        let id = ValueId(self.kernel.types.len() as u32);
        self.kernel.types.push(ty);
        id
    }

    pub fn type_of(&self, v: ValueId) -> &Type {
        &self.kernel.types[v.index()]
    }

    pub fn add_param(&mut self, name: impl Into<String>, kind: ParamKind) -> ValueId {
        let value = self.new_value(kind.value_type());
        self.kernel.params.push(Param {
            name: name.into(),
            kind,
            value,
        });
        value
    }

    /// Append an op defining fresh values of the given types; returns them.
    pub fn push(&mut self, kind: OpKind, result_types: Vec<Type>) -> Vec<ValueId> {
        let results: Vec<ValueId> = result_types
            .into_iter()
            .map(|t| self.new_value(t))
            .collect();
        self.push_with_results(kind, results.clone());
        results
    }

    /// Append an op with exactly one result.
    pub fn push1(&mut self, kind: OpKind, result_type: Type) -> ValueId {
        self.push(kind, vec![result_type])[0]
    }

    /// Append an op whose result values already exist (see [`Builder::new_value`]).
    pub fn push_with_results(&mut self, kind: OpKind, results: Vec<ValueId>) {
        let op = self.op(kind, results);
        self.current().ops.push(op);
    }

    /// An op at the current location, for a block that is no longer open
    /// (a yield appended to a closed arm). [`Builder::finish`] gives it its id.
    pub fn op(&self, kind: OpKind, results: Vec<ValueId>) -> Op {
        Op {
            id: OpId::default(),
            kind,
            results,
            loc: self.loc,
        }
    }

    /// Open a nested block whose args have the given types; returns the args.
    pub fn begin_block(&mut self, arg_types: Vec<Type>) -> Vec<ValueId> {
        let args: Vec<ValueId> = arg_types.into_iter().map(|t| self.new_value(t)).collect();
        self.stack.push(Block {
            args: args.clone(),
            ops: Vec::new(),
        });
        args
    }

    /// Close the innermost nested block.
    ///
    /// # Panics
    /// If only the kernel body is open (a bug in the caller, not user input).
    pub fn end_block(&mut self) -> Block {
        assert!(self.stack.len() > 1, "end_block without begin_block");
        self.stack.pop().unwrap_or_default()
    }

    /// How many nested blocks are open.
    pub fn depth(&self) -> usize {
        self.stack.len() - 1
    }

    fn current(&mut self) -> &mut Block {
        let last = self.stack.len() - 1;
        &mut self.stack[last]
    }

    /// Finish the kernel: every op gets its id (see [`OpId`]).
    ///
    /// # Panics
    /// If a nested block is still open (a bug in the caller, not user input).
    pub fn finish(mut self) -> Kernel {
        assert_eq!(self.stack.len(), 1, "finish with an open nested block");
        self.kernel.body = self.stack.pop().unwrap_or_default();
        self.kernel.number_ops();
        self.kernel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Literal, ScalarType};

    #[test]
    fn builds_a_loop_with_a_carried_value() {
        let mut b = Builder::new("k", KernelOptions::default());
        let out = b.add_param("out", ParamKind::Ptr(ScalarType::I32));
        let i32t = Type::scalar(ScalarType::I32);
        let zero = b.push1(OpKind::Constant(Literal::Int(0)), i32t.clone());
        let ten = b.push1(OpKind::Constant(Literal::Int(10)), i32t.clone());
        let one = b.push1(OpKind::Constant(Literal::Int(1)), i32t.clone());
        let args = b.begin_block(vec![i32t.clone(), i32t.clone()]);
        let next = b.push1(
            OpKind::Binary {
                op: crate::ir::BinaryOp::Add,
                lhs: args[1],
                rhs: args[0],
            },
            i32t.clone(),
        );
        b.push(OpKind::Yield(vec![next]), vec![]);
        let body = b.end_block();
        let sum = b.push1(
            OpKind::For {
                lower: zero,
                upper: ten,
                step: one,
                inits: vec![zero],
                body,
            },
            i32t,
        );
        b.push(
            OpKind::Store {
                ptr: out,
                value: sum,
                mask: None,
                cache: Default::default(),
                eviction: Default::default(),
            },
            vec![],
        );
        let k = b.finish();
        assert_eq!(k.body.ops.len(), 5);
        // Pre-order: the loop is op 3 and its body's ops follow it.
        let ids: Vec<u32> = k.body.ops.iter().map(|op| op.id.0).collect();
        assert_eq!(ids, [0, 1, 2, 3, 6]);
        let OpKind::For { body, .. } = &k.body.ops[3].kind else {
            panic!("op 3 is the loop");
        };
        assert_eq!(body.ops[1].id, OpId(5));
        assert!(matches!(
            k.op(OpId(5)).map(|op| &op.kind),
            Some(OpKind::Yield(_))
        ));
        assert_eq!(k.op(OpId(7)), None);
        assert_eq!(k.type_of(sum), &Type::scalar(ScalarType::I32));
        assert_eq!(k.params[0].value, out);
    }
}
