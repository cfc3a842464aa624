//! Lowering of a kernel body to IR: the variable environment and
//! statements here; expressions, typing, builtins and control flow in the
//! submodules.

mod block_ptr;
mod builtins;
mod calls;
mod clc;
mod combine;
mod composite;
mod control;
mod expr;
mod index;
mod memory;
mod mesh;
mod pipe;
mod random;
mod sort;
mod tasks;
mod tlx;
mod typing;
mod warp;

use super::scan::{self, RETURNED};
use super::value::{ConstVal, Val};
use super::{BlockDim, SigParam, Signature};
use crate::diag::{Diagnostic, Diagnostics};
use proc_macro2::Span;
use quote::ToTokens;
use std::collections::HashMap;
use syn::spanned::Spanned;
use tlx_core::ir::{
    Builder, DescriptorBlock, Kernel, KernelOptions, ParamKind, ScalarType, SrcLoc,
};

type R<T> = Result<T, Diagnostic>;

/// Helper functions may call helpers; this bounds runaway recursion.
const MAX_INLINE_DEPTH: usize = 32;

pub(super) struct Lowerer<'a> {
    b: Builder,
    /// Const generics, visible everywhere (helpers included).
    globals: HashMap<String, Val>,
    /// One frame for the kernel body and one per inlined helper call; each a stack of scopes.
    frames: Vec<Vec<HashMap<String, Val>>>,
    helpers: HashMap<String, &'a syn::ItemFn>,
    /// Errors in top-level statements that bind nothing; lowering goes on after them
    /// so one build reports several.
    errors: Vec<Diagnostic>,
    /// Where each `cluster_barrier()` call is, by the location its op carries.
    cluster_barriers: Vec<(SrcLoc, Span)>,
    /// Where lowering stands with respect to `async_tasks!`.
    task: TaskLowering<'a>,
    /// What lowering learned about each `pipe!`, by pipe id.
    pipes: Vec<pipe::PipeState>,
    /// What is known of the shared and tensor memory made so far.
    shared: SharedFacts,
    /// The pointer of each `Strided` parameter, with its extents and then
    /// its strides: what `x.shape(d)` and `x.stride(d)` read.
    strided: HashMap<tlx_core::ir::ValueId, Vec<tlx_core::ir::ValueId>>,
    /// The local pointer of each `SymPtr` parameter, with its table of
    /// every rank's address: what `remote(x, rank)` reads.
    symmetric: HashMap<tlx_core::ir::ValueId, tlx_core::ir::ValueId>,
}

/// The `async_tasks!` regions of the body and the task being lowered.
struct TaskLowering<'a> {
    /// The kernel body's `async_tasks!`, parsed before lowering.
    task_regions: &'a HashMap<usize, tasks::TaskRegionSyntax>,
    /// Lowering the body of a task of `async_tasks!`: how many of the
    /// kernel frame's scopes are outside it (a task may not assign a
    /// variable of those).
    task_outer_scopes: Option<usize>,
    /// The task being lowered: its index in its region and its replicas.
    current_task: Option<(usize, u32)>,
    /// Warps of each replica of the task being lowered.
    task_warps: Option<u32>,
}

/// Facts about the buffers made so far that later primitives check.
#[derive(Default)]
struct SharedFacts {
    /// Field views of acquired pipe stages, which TMA copies may fill.
    slot_fields: HashMap<tlx_core::ir::ValueId, pipe::SlotField>,
    /// Results of `local_slice`: views whose elements are not the bytes
    /// after their start, which `local_reinterpret` cannot take.
    slices: std::collections::HashSet<tlx_core::ir::ValueId>,
    /// Results of `local_alloc`: what `reuse =` may name.
    allocations: std::collections::HashSet<tlx_core::ir::ValueId>,
    /// Tensor-memory columns the kernel's `local_alloc`s took so far.
    tmem_columns: usize,
    /// The first `tcgen05` op's `two_ctas`, and its line: the others must agree.
    pair_mma: Option<(bool, u32)>,
}

pub(super) fn lower_body(
    item: &syn::ItemFn,
    sig: &Signature,
    consts: &[(String, i64)],
    options: &KernelOptions,
) -> Result<Kernel, Diagnostics> {
    let mut b = Builder::new(sig.name.to_string(), options.clone());
    b.set_source_file(sig.name.span().file());
    let mut globals = HashMap::new();
    for c in &sig.consts {
        let name = c.name.to_string();
        let value = consts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                Diagnostic::new(c.name.span(), format!("no value given for `{name}`"))
            })?;
        b.add_const(name.clone(), value);
        let val = if c.ty == ScalarType::Bool {
            ConstVal::Bool(value != 0)
        } else {
            ConstVal::Int(value)
        };
        globals.insert(name, Val::Const(val));
    }
    let mut top = HashMap::new();
    let mut strided = HashMap::new();
    let mut symmetric = HashMap::new();
    for (ident, param) in &sig.params {
        let name = ident.to_string();
        let v = b.add_param(name.clone(), resolve_param(param, consts)?);
        // A `Strided` pointer's extents and strides, a mesh's size and
        // barrier words, a symmetric buffer's peers follow it.
        let trailing: Vec<_> = param
            .trailing_params(&name)
            .into_iter()
            .map(|(n, kind)| b.add_param(n, kind))
            .collect();
        let val = match param {
            SigParam::Strided { .. } => {
                strided.insert(v, trailing);
                Val::Ir(v)
            }
            SigParam::Mesh { axes } => Val::Mesh(crate::value::MeshVal {
                axes: *axes,
                rank: v,
                size: trailing[0],
                sync: trailing[1],
                sync_peers: trailing[2],
            }),
            SigParam::Sym { .. } => {
                symmetric.insert(v, trailing[0]);
                Val::Ir(v)
            }
            SigParam::Plain(_) | SigParam::Desc { .. } => Val::Ir(v),
        };
        top.insert(name, val);
    }
    if scan::assigned_in_stmts(&item.block.stmts).contains(RETURNED) {
        top.insert(RETURNED.to_string(), Val::Const(ConstVal::Bool(false)));
    }
    let mut helpers = HashMap::new();
    for f in scan::helper_fns(&item.block) {
        if helpers.insert(f.sig.ident.to_string(), f).is_some() {
            return Err(Diagnostic::new(
                f.sig.ident.span(),
                format!("helper function `{}` is defined twice", f.sig.ident),
            )
            .with_hint("give each helper function its own name")
            .into());
        }
    }
    let task_regions = tasks::parse_task_regions(&item.block.stmts)?;
    let mut lowerer = Lowerer {
        b,
        globals,
        frames: vec![vec![top]],
        helpers,
        errors: Vec::new(),
        cluster_barriers: Vec::new(),
        task: TaskLowering {
            task_regions: &task_regions,
            task_outer_scopes: None,
            current_task: None,
            task_warps: None,
        },
        pipes: Vec::new(),
        shared: SharedFacts::default(),
        strided,
        symmetric,
    };
    let result = lowerer.lower_stmts(&item.block.stmts);
    let mut errors = std::mem::take(&mut lowerer.errors);
    match result {
        Err(e) => errors.push(e),
        Ok(_) if errors.is_empty() => {
            let pipes = std::mem::take(&mut lowerer.pipes);
            let mut kernel = lowerer.b.finish();
            pipe::finish_pipes(&pipes, &mut kernel.body);
            check_cluster_sync(&kernel, &lowerer.cluster_barriers, sig)?;
            return Ok(kernel);
        }
        Ok(_) => {}
    }
    Err(Diagnostics(errors))
}

/// A parameter's kind in this config: a descriptor's block dimensions
/// take the config's constants.
fn resolve_param(param: &SigParam, consts: &[(String, i64)]) -> Result<ParamKind, Diagnostic> {
    let (elem, block, span, dim_spans) = match param {
        SigParam::Plain(kind) => return Ok(*kind),
        SigParam::Strided { elem, .. } | SigParam::Sym { elem } => {
            return Ok(ParamKind::Ptr(*elem))
        }
        SigParam::Mesh { .. } => return Ok(ParamKind::Scalar(ScalarType::I32)),
        SigParam::Desc {
            elem,
            block,
            span,
            dim_spans,
        } => (elem, block, span, dim_spans),
    };
    let mut shape = Vec::with_capacity(block.len());
    for dim in block {
        let value = match dim {
            BlockDim::Literal(n) => Some(*n as i64),
            BlockDim::Const(name) => consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v),
        };
        let Some(value) = value.and_then(|v| usize::try_from(v).ok()) else {
            let what = match dim {
                BlockDim::Const(name) => format!("`{name}` is not a const generic of the kernel"),
                BlockDim::Literal(n) => format!("{n} is not a block dimension"),
            };
            let at = dim_spans.get(shape.len()).unwrap_or(span);
            return Err(Diagnostic::new(*at, what)
                .with_hint("a descriptor's block is written with the kernel's const generics or literals, e.g. `TensorDesc<bf16, BLOCK_M, BLOCK_K>`"));
        };
        if !value.is_power_of_two() {
            let at = dim_spans.get(shape.len()).unwrap_or(span);
            return Err(Diagnostic::new(*at, format!("TMA block dimension {value} is not a power of two"))
                .with_hint("the tiles a block lands in have power-of-two shapes: use the next power of two (TMA fills the rows past the tensor's edge with zeros)"));
        }
        shape.push(value);
    }
    DescriptorBlock::new(*elem, &shape)
        .map(ParamKind::TensorDesc)
        .ok_or_else(|| {
            let (message, at) = match shape.iter().position(|d| !(1..=256).contains(d)) {
                Some(i) => (
                    format!(
                        "dimension {i} of the TMA block {shape:?} is {} elements; TMA moves at most 256 per dimension",
                        shape[i]
                    ),
                    dim_spans.get(i).unwrap_or(span),
                ),
                None => (
                    format!("a TMA block of {shape:?} is outside TMA's limits"),
                    span,
                ),
            };
            Diagnostic::new(*at, message).with_hint(
                "a TMA block has 1 to 5 dimensions of 1 to 256 elements each: use a smaller block \
                 and load a wider tile as several blocks (one `async_descriptor_load` each)",
            )
        })
}

/// `check::check_cluster_sync`, reported at the barrier's call.
fn check_cluster_sync(
    kernel: &Kernel,
    barriers: &[(SrcLoc, Span)],
    sig: &Signature,
) -> Result<(), Diagnostic> {
    tlx_core::check::check_cluster_sync(kernel).map_err(|e| {
        let span = barriers
            .iter()
            .find(|(loc, _)| *loc == e.barrier)
            .map_or(sig.name.span(), |(_, span)| *span);
        Diagnostic::new(
            span,
            format!(
                "`cluster_barrier()` may be reached by some programs of a cluster and not \
                 others: an enclosing {} (or an earlier `return`) depends on the program",
                e.construct
            ),
        )
        .with_hint(
            "every program of a cluster must reach each `cluster_barrier()`, or the others \
             wait forever: move it out of that control flow (an early `return` before it \
             counts too), or make the condition the same for the whole cluster, e.g. from \
             `program_id(0) / cluster_num_ctas()`",
        )
    })
}

pub(super) fn loc_of(span: Span) -> SrcLoc {
    let start = span.start();
    SrcLoc {
        line: start.line as u32,
        col: start.column as u32,
    }
}

/// The key under which a `const` item is recorded in its scope a second
/// time, for the helpers called from there (no identifier has a space).
fn const_item_key(name: &str) -> String {
    format!("const {name}")
}

impl<'a> Lowerer<'a> {
    fn scopes(&self) -> &Vec<HashMap<String, Val>> {
        self.frames
            .last()
            .expect("the kernel frame is never popped")
    }

    fn scopes_mut(&mut self) -> &mut Vec<HashMap<String, Val>> {
        self.frames
            .last_mut()
            .expect("the kernel frame is never popped")
    }

    fn push_scope(&mut self) {
        self.scopes_mut().push(HashMap::new());
    }

    fn pop_scope(&mut self) {
        self.scopes_mut().pop();
    }

    fn lookup(&self, name: &str) -> Option<&Val> {
        self.scopes()
            .iter()
            .rev()
            .find_map(|s| s.get(name))
            .or_else(|| self.kernel_const_item(name))
            .or_else(|| self.globals.get(name))
    }

    /// In a helper, a `const` item of the kernel in scope where the helper
    /// was called: helpers see those as a nested Rust `fn` sees the items
    /// of the blocks around it (and none of the kernel's `let`s).
    fn kernel_const_item(&self, name: &str) -> Option<&Val> {
        let [kernel, _, ..] = self.frames.as_slice() else {
            return None;
        };
        let key = const_item_key(name);
        kernel.iter().rev().find_map(|s| s.get(&key))
    }

    /// A variable of the current frame (not a const generic), assignable.
    fn is_local(&self, name: &str) -> bool {
        self.scopes().iter().any(|s| s.contains_key(name))
    }

    fn define(&mut self, name: String, val: Val) {
        if let Some(scope) = self.scopes_mut().last_mut() {
            scope.insert(name, val);
        }
    }

    /// Rebinds an existing variable in the scope that declared it.
    fn assign(&mut self, name: &str, val: Val, span: Span) -> R<()> {
        // Tasks are lowered only in the kernel's own frame (helpers they
        // call have frames of their own, which cannot see these).
        let outer = match self.task.task_outer_scopes {
            Some(outer) if self.frames.len() == 1 => outer,
            _ => 0,
        };
        for (depth, scope) in self.scopes_mut().iter_mut().enumerate().rev() {
            if let Some(slot) = scope.get_mut(name) {
                if depth < outer {
                    return Err(Diagnostic::new(
                        span,
                        format!("this task assigns `{name}`, a variable declared outside it"),
                    )
                    .with_hint(
                        "tasks run at the same time and give nothing back: declare the variable inside the task",
                    ));
                }
                *slot = val;
                return Ok(());
            }
        }
        if self.globals.contains_key(name) {
            return Err(
                Diagnostic::new(span, format!("cannot assign to const generic `{name}`"))
                    .with_hint("declare a variable: `let mut x = NAME;`"),
            );
        }
        Err(
            Diagnostic::new(span, format!("cannot assign to unknown variable `{name}`"))
                .with_hint(format!("declare it first: `let mut {name} = ...;`")),
        )
    }

    /// Lowers a statement list; the value of a trailing expression is returned.
    fn lower_stmts(&mut self, stmts: &'a [syn::Stmt]) -> R<Val> {
        for (i, stmt) in stmts.iter().enumerate() {
            self.b.set_loc(loc_of(stmt.span()));
            let value = match self.lower_stmt(stmt) {
                Err(e) if self.can_continue_after(stmt) => {
                    self.errors.push(e);
                    continue;
                }
                other => other?,
            };
            if i + 1 == stmts.len() {
                return Ok(value);
            }
            if scan::stmt_exits(stmt) {
                // The rest of this block runs only if the kernel has not
                // returned and the loop was not broken or continued.
                self.b.set_loc(loc_of(stmt.span()));
                match self.keep_going(&scan::EXIT_FLAGS) {
                    control::Go::Never => return Ok(Val::Unit),
                    control::Go::If(keep_going) => {
                        self.lower_if(
                            keep_going,
                            control::Branch::Stmts(&stmts[i + 1..]),
                            control::Branch::Empty,
                            stmt.span(),
                        )?;
                        return Ok(Val::Unit);
                    }
                    control::Go::Always => {}
                }
            }
        }
        Ok(Val::Unit)
    }

    /// A failed statement can be skipped when it is at the kernel's top level,
    /// binds no name and cannot return: nothing later depends on it.
    fn can_continue_after(&self, stmt: &syn::Stmt) -> bool {
        self.frames.len() == 1
            && self.b.depth() == 0
            && matches!(stmt, syn::Stmt::Expr(_, Some(_)) | syn::Stmt::Macro(_))
            && !scan::stmt_exits(stmt)
    }

    fn lower_stmt(&mut self, stmt: &'a syn::Stmt) -> R<Val> {
        match stmt {
            syn::Stmt::Local(local) => {
                self.lower_local(local)?;
                Ok(Val::Unit)
            }
            syn::Stmt::Item(syn::Item::Fn(_)) => Ok(Val::Unit),
            // A lone `;` (an empty statement).
            syn::Stmt::Expr(syn::Expr::Verbatim(t), Some(_)) if t.is_empty() => Ok(Val::Unit),
            syn::Stmt::Item(syn::Item::Const(item)) => {
                self.lower_const_item(item)?;
                Ok(Val::Unit)
            }
            syn::Stmt::Item(other) => Err(Diagnostic::new(
                other.span(),
                "only helper `fn`s and `const` items may be declared inside a kernel",
            )
            .with_hint("use a `let` binding or a const generic instead")),
            syn::Stmt::Expr(e, semi) => {
                let v = self.lower_expr(e)?;
                Ok(if semi.is_some() { Val::Unit } else { v })
            }
            syn::Stmt::Macro(m) if tasks::is_task_region(&m.mac) => {
                self.lower_task_region(&m.mac)?;
                Ok(Val::Unit)
            }
            syn::Stmt::Macro(m) => Err(macro_error(&m.mac)),
        }
    }

    /// `const NAME: T = value;`: a compile-time constant of the kernel's
    /// constants and literals (from its declaration on).
    fn lower_const_item(&mut self, item: &'a syn::ItemConst) -> R<()> {
        let value = self.lower_expr(&item.expr)?;
        let Val::Const(c) = value else {
            return Err(Diagnostic::new(
                item.expr.span(),
                format!("`const {}` needs a value known at compile time", item.ident),
            )
            .with_hint("build it from literals, const generics and other constants; use `let` for run-time values"));
        };
        let ty = match &*item.ty {
            syn::Type::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        // Constants stay constants (usable as shapes and in `static_assert`);
        // the type only says integer, float or bool.
        let value = match (ty.as_deref(), c) {
            (Some("usize" | "isize" | "u64" | "i64" | "u32" | "i32" | "u16" | "i16" | "u8" | "i8"), ConstVal::Int(v)) => ConstVal::Int(v),
            (Some("f32" | "f64" | "f16" | "bf16"), ConstVal::Float(v)) => ConstVal::Float(v),
            (Some("f32" | "f64" | "f16" | "bf16"), ConstVal::Int(v)) => ConstVal::Float(v as f64),
            (Some("bool"), ConstVal::Bool(v)) => ConstVal::Bool(v),
            _ => {
                return Err(Diagnostic::new(
                    item.ty.span(),
                    format!("`const {}`: this type cannot hold `{}`", item.ident, item.expr.to_token_stream()),
                )
                .with_hint("integer constants are `usize` (or another integer type), float ones `f32`, flags `bool`"))
            }
        };
        let name = item.ident.to_string();
        self.define(const_item_key(&name), Val::Const(value));
        self.define(name, Val::Const(value));
        Ok(())
    }

    fn lower_local(&mut self, local: &'a syn::Local) -> R<()> {
        let Some(init) = &local.init else {
            return Err(Diagnostic::new(
                local.pat.span(),
                "a `let` must give the variable a value",
            )
            .with_hint("write `let x = ...;`"));
        };
        if let Some((_, diverge)) = &init.diverge {
            return Err(Diagnostic::new(
                diverge.span(),
                "`let ... else` is not supported",
            ));
        }
        let value = self.lower_expr(&init.expr)?;
        self.bind_pattern(&local.pat, value)
    }

    fn bind_pattern(&mut self, pat: &syn::Pat, value: Val) -> R<()> {
        match pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                if matches!(value, Val::Unit) {
                    return Err(
                        Diagnostic::new(p.ident.span(), "this expression has no value")
                            .with_hint("only bind values: tensors, scalars, constants or tuples"),
                    );
                }
                // A pipe's (or a CLC context's) barriers are named after it:
                // the checker then explains a finding on them with its calls.
                if let Val::Pipe(crate::value::PipeVal::Pipe(pipe)) = &value {
                    self.b.name_value(pipe.full, format!("{}.full", p.ident));
                    self.b.name_value(pipe.empty, format!("{}.empty", p.ident));
                }
                if let Val::Clc(ctx) = &value {
                    self.b
                        .name_value(ctx.response, format!("{}.answer", p.ident));
                    self.b.name_value(ctx.full, format!("{}.answered", p.ident));
                    self.b
                        .name_value(ctx.empty, format!("{}.released", p.ident));
                }
                if let Val::Ir(v) = value {
                    // Messages name buffers and barriers as the user does.
                    if matches!(
                        self.b.type_of(v),
                        tlx_core::ir::Type::SharedMemory(_)
                            | tlx_core::ir::Type::TensorMemory(_)
                            | tlx_core::ir::Type::Barriers(_)
                    ) {
                        self.b.name_value(v, p.ident.to_string());
                    }
                }
                self.define(p.ident.to_string(), value);
                Ok(())
            }
            syn::Pat::Wild(_) => Ok(()),
            syn::Pat::Tuple(t) => {
                let Val::Tuple(items) = value else {
                    return Err(Diagnostic::new(t.span(), "this value is not a tuple"));
                };
                if items.len() != t.elems.len() {
                    return Err(Diagnostic::new(
                        t.span(),
                        format!(
                            "the pattern has {} elements but the tuple has {}",
                            t.elems.len(),
                            items.len()
                        ),
                    ));
                }
                for (p, v) in t.elems.iter().zip(items) {
                    self.bind_pattern(p, v)?;
                }
                Ok(())
            }
            syn::Pat::Type(t) => {
                let ty = self.dtype_of_type(&t.ty)?;
                let span = t.ty.span();
                let what = match &*t.pat {
                    syn::Pat::Ident(id) => format!("`{}`", id.ident),
                    _ => "this binding".to_string(),
                };
                let v = self.annotated(value, ty, &what, span)?;
                self.bind_pattern(&t.pat, v)
            }
            other => Err(Diagnostic::new(other.span(), "unsupported pattern")
                .with_hint("bind a name (`let x = ...`) or a tuple of names (`let (a, b) = ...`)")),
        }
    }

    /// `!flag` for a scalar bool value.
    fn logical_not(&mut self, flag: tlx_core::ir::ValueId) -> tlx_core::ir::ValueId {
        let ty = self.b.type_of(flag).clone();
        self.b.push1(
            tlx_core::ir::OpKind::Unary {
                op: tlx_core::ir::UnaryOp::Not,
                value: flag,
            },
            ty,
        )
    }
}

fn macro_error(mac: &syn::Macro) -> Diagnostic {
    if tasks::is_task_region(mac) {
        return Diagnostic::new(
            mac.span(),
            "`async_tasks!` is a statement of the kernel body, not a value",
        )
        .with_hint("write it on its own: `async_tasks! { task(default) { ... } ... }`");
    }
    Diagnostic::new(mac.span(), "macros are not supported in kernels").with_hint(
        "use `device_print(\"x =\", x)`, `device_assert(cond, \"message\")` or `async_tasks! { ... }`",
    )
}
