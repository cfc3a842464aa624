//! `async_tasks!`: TLX's warp-specialized task regions in Rust syntax.
//!
//! ```text
//! async_tasks! {
//!     task(default) { ... }                                  // the kernel's own warps
//!     task(num_warps = 1, num_regs = 40) { ... }             // TLX: async_task(num_warps=1, num_regs=40)
//!     task(num_warps = 4, num_regs = 232, replicate = 2) { ... }
//! }
//! ```
//!
//! The macro's body is not Rust syntax the lowerer walks directly, and the
//! lowerer borrows the kernel's syntax tree for its whole run, so every
//! top-level `async_tasks!` is parsed before lowering starts (in
//! [`parse_task_regions`]) and found again by the macro's address. A task
//! reads the variables in scope before the region but cannot assign them:
//! tasks have no results, and they run at the same time.

use super::{loc_of, Lowerer, R};
use crate::diag::Diagnostic;
use proc_macro2::Span;
use std::collections::HashMap;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use tlx_core::ir::{OpKind, TaskRegion};

/// One `task(...) { ... }` as written.
pub(super) struct TaskSyntax {
    span: Span,
    default: bool,
    /// `name = value` arguments, values integer literals or const generics.
    args: Vec<(syn::Ident, syn::Expr)>,
    body: syn::Block,
}

/// The tasks of one `async_tasks!`.
pub(super) struct TaskRegionSyntax {
    tasks: Vec<TaskSyntax>,
}

impl Parse for TaskSyntax {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let keyword: syn::Ident = input.parse()?;
        if keyword != "task" {
            return Err(syn::Error::new(
                keyword.span(),
                "expected `task(...) { ... }` in `async_tasks!`",
            ));
        }
        let inner;
        syn::parenthesized!(inner in input);
        let (mut default, mut args) = (false, Vec::new());
        while !inner.is_empty() {
            let name: syn::Ident = inner.parse()?;
            if name == "default" && !inner.peek(syn::Token![=]) {
                default = true;
            } else {
                inner.parse::<syn::Token![=]>()?;
                args.push((name, inner.parse()?));
            }
            if !inner.is_empty() {
                inner.parse::<syn::Token![,]>()?;
            }
        }
        let body: syn::Block = input.parse()?;
        Ok(TaskSyntax {
            span: keyword.span(),
            default,
            args,
            body,
        })
    }
}

impl Parse for TaskRegionSyntax {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut tasks = Vec::new();
        while !input.is_empty() {
            tasks.push(input.parse()?);
        }
        Ok(TaskRegionSyntax { tasks })
    }
}

/// True for an `async_tasks!` invocation.
pub(super) fn is_task_region(mac: &syn::Macro) -> bool {
    mac.path.is_ident("async_tasks")
}

/// Where a macro sits in the syntax tree: its key in the parsed regions.
fn key(mac: &syn::Macro) -> usize {
    mac as *const syn::Macro as usize
}

/// Every `async_tasks!` among the kernel body's top-level statements, parsed.
pub(super) fn parse_task_regions(
    stmts: &[syn::Stmt],
) -> Result<HashMap<usize, TaskRegionSyntax>, Diagnostic> {
    let mut regions = HashMap::new();
    for stmt in stmts {
        let mac = match stmt {
            syn::Stmt::Macro(m) => &m.mac,
            syn::Stmt::Expr(syn::Expr::Macro(m), _) => &m.mac,
            _ => continue,
        };
        if !is_task_region(mac) {
            continue;
        }
        let parsed: TaskRegionSyntax = mac.parse_body().map_err(|e| {
            Diagnostic::new(e.span(), format!("cannot read this `async_tasks!`: {e}")).with_hint(
                "write `async_tasks! { task(default) { ... } task(num_warps = 1) { ... } }`",
            )
        })?;
        regions.insert(key(mac), parsed);
    }
    Ok(regions)
}

impl<'a> Lowerer<'a> {
    /// Lowers an `async_tasks!` to an `AsyncTasks` op.
    pub(super) fn lower_task_region(&mut self, mac: &'a syn::Macro) -> R<()> {
        let top_level = self.frames.len() == 1 && self.b.depth() == 0;
        let parsed = match self.task.task_regions.get(&key(mac)) {
            Some(p) if top_level => p,
            _ => {
                return Err(Diagnostic::new(
                    mac.span(),
                    "`async_tasks!` must be a statement of the kernel body itself",
                )
                .with_hint("move it out of the `if`, loop or helper function it is in"))
            }
        };
        let mut tasks = Vec::new();
        for (index, task) in parsed.tasks.iter().enumerate() {
            let region = self.task_options(task)?;
            self.b.begin_block(vec![]);
            self.task.task_outer_scopes = Some(self.scopes().len());
            self.push_scope();
            self.task.current_task = Some((index, region.replicate));
            self.task.task_warps = Some(region.num_warps.unwrap_or(self.b.options().num_warps));
            let lowered = self.lower_stmts(&task.body.stmts);
            self.task.current_task = None;
            self.task.task_warps = None;
            self.task.task_outer_scopes = None;
            self.pop_scope();
            let body = self.b.end_block();
            lowered?;
            tasks.push(TaskRegion { body, ..region });
        }
        tlx_core::check::check_task_region(&tasks, self.b.options()).map_err(|e| {
            Diagnostic::new(mac.span(), e.to_string()).with_hint(
                "see the `async_tasks!` section of docs/language.md for how tasks share warps and registers",
            )
        })?;
        let loc = self.b.loc();
        self.b.set_loc(loc_of(mac.span()));
        self.b.push(OpKind::AsyncTasks { tasks }, vec![]);
        self.b.set_loc(loc);
        Ok(())
    }

    /// A task's options, its body left empty.
    fn task_options(&self, task: &TaskSyntax) -> R<TaskRegion> {
        let mut region = TaskRegion {
            default: task.default,
            ..TaskRegion::default_task(tlx_core::ir::Block::default())
        };
        for (name, value) in &task.args {
            let what = format!("`{name}`");
            if name == "shared_body" {
                region.shared_body = match self.eval_const(value, &what)? {
                    super::ConstVal::Bool(b) => b,
                    _ => {
                        return Err(Diagnostic::new(value.span(), "`shared_body` is a bool")
                            .with_hint(
                                "write `shared_body = true` (or a `const` bool such as `CAUSAL`)",
                            ))
                    }
                };
                continue;
            }
            let n = self.const_int(value, &what)?;
            let n = u32::try_from(n).map_err(|_| {
                Diagnostic::new(value.span(), format!("{what} must be a non-negative count"))
            })?;
            let name_text = name.to_string();
            // Counted in warps: anything past a program's 32 cannot be
            // placed (and would make the placement loop over it).
            if name_text != "num_regs" && n > 32 {
                return Err(Diagnostic::new(
                    value.span(),
                    format!("{what} is {n}, but a program has at most 32 warps (1024 threads)"),
                )
                .with_hint("tasks share the program's warps: keep every task's warps, replicas included, within 32"));
            }
            match name_text.as_str() {
                "num_warps" => region.num_warps = Some(n),
                "num_regs" => region.num_regs = Some(n),
                "replicate" => region.replicate = n,
                "warp_group_start_id" => region.start_warp = Some(n),
                other => return Err(Diagnostic::new(
                    name.span(),
                    format!("`{other}` is not an option of `task`"),
                )
                .with_hint(
                    "use `default`, `num_warps`, `num_regs`, `replicate`, `warp_group_start_id` or `shared_body`",
                )),
            }
        }
        if task.default && region.num_warps.is_some() {
            return Err(Diagnostic::new(
                task.span,
                "the default task runs on the kernel's own warps",
            )
            .with_hint("set `num_warps` in the kernel attribute, not on `task(default)`"));
        }
        Ok(region)
    }
}
