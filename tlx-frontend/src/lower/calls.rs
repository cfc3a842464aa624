//! Calls: argument binding (positional and `name = value`), dispatch of
//! functions and methods to the builtins, and inlining of helper `fn`s.

use super::{Lowerer, MAX_INLINE_DEPTH, R};
use crate::diag::Diagnostic;
use crate::scan;
use crate::value::{ConstVal, Val};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::ValueId;

/// Builtins that may also be called as methods (`x.exp()`), receiver first.
/// Methods of pipes, their endpoints and slots (see `pipe.rs`).
const PIPE_METHODS: &[&str] = &[
    "writer", "reader", "acquire", "commit", "wait", "release", "slot",
];

const METHODS: &[&str] = &[
    "to",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "abs",
    "floor",
    "ceil",
    "tanh",
    "round",
    "trunc",
    "sigmoid",
    "softplus",
    "log1p",
    "expm1",
    "erf",
    "sum",
    "max",
    "min",
    "argmax",
    "argmin",
    "mean",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "split",
    "sort",
    "expand_dims",
    "broadcast_to",
    "reshape",
    "trans",
    "permute",
    "extract_tile",
    "insert_tile",
];

/// A call's arguments, split into positional and `name = value` ones.
pub(super) struct CallArgs<'e> {
    pub(super) name: String,
    pub(super) span: Span,
    pub(super) positional: Vec<&'e Expr>,
    pub(super) keywords: Vec<(String, &'e Expr, Span)>,
}

impl<'e> CallArgs<'e> {
    fn new(
        name: String,
        span: Span,
        receiver: Option<&'e Expr>,
        args: impl Iterator<Item = &'e Expr>,
    ) -> R<CallArgs<'e>> {
        let mut out = CallArgs {
            name,
            span,
            positional: receiver.into_iter().collect(),
            keywords: Vec::new(),
        };
        for arg in args {
            match arg {
                Expr::Assign(kw) => {
                    let Expr::Path(p) = &*kw.left else {
                        return Err(Diagnostic::new(
                            kw.left.span(),
                            "expected a keyword argument name",
                        ));
                    };
                    let Some(ident) = p.path.get_ident() else {
                        return Err(Diagnostic::new(
                            kw.left.span(),
                            "expected a keyword argument name",
                        ));
                    };
                    out.keywords
                        .push((ident.to_string(), &kw.right, ident.span()));
                }
                other if !out.keywords.is_empty() => {
                    return Err(Diagnostic::new(
                        other.span(),
                        "a positional argument cannot follow a keyword argument",
                    ));
                }
                other => out.positional.push(other),
            }
        }
        Ok(out)
    }

    /// Matches arguments to `params` (in Triton's order); the first `required` must be given.
    pub(super) fn bind(&self, params: &[&str], required: usize) -> R<Vec<Option<&'e Expr>>> {
        let signature = format!("`{}({})`", self.name, params.join(", "));
        if self.positional.len() > params.len() {
            return Err(Diagnostic::new(
                self.positional[params.len()].span(),
                format!(
                    "`{}` takes at most {} arguments, {} given",
                    self.name,
                    params.len(),
                    self.positional.len()
                ),
            )
            .with_hint(format!("its signature is {signature}")));
        }
        let mut bound: Vec<Option<&'e Expr>> = vec![None; params.len()];
        for (slot, e) in bound.iter_mut().zip(&self.positional) {
            *slot = Some(*e);
        }
        for (name, e, span) in &self.keywords {
            let Some(i) = params.iter().position(|p| p == name) else {
                return Err(Diagnostic::new(
                    *span,
                    format!("`{}` has no argument named `{name}`", self.name),
                )
                .with_hint(format!("its signature is {signature}")));
            };
            if bound[i].is_some() {
                return Err(Diagnostic::new(
                    *span,
                    format!("argument `{name}` is given twice"),
                ));
            }
            bound[i] = Some(*e);
        }
        if let Some(missing) = (0..required).find(|&i| bound[i].is_none()) {
            return Err(Diagnostic::new(
                self.span,
                format!(
                    "`{}` is missing its argument `{}`",
                    self.name, params[missing]
                ),
            )
            .with_hint(format!("its signature is {signature}")));
        }
        Ok(bound)
    }
}

pub(super) fn str_arg(e: &Expr) -> R<String> {
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Ok(s.value()),
        other => Err(Diagnostic::new(other.span(), "expected a string literal")),
    }
}

/// Parses a string option against its table of accepted values.
pub(super) fn choice<T: Copy>(e: Option<&Expr>, table: &[(&str, T)], default: T) -> R<T> {
    let Some(e) = e else { return Ok(default) };
    let s = str_arg(e)?;
    table
        .iter()
        .find(|(k, _)| *k == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = table.iter().map(|(k, _)| format!("\"{k}\"")).collect();
            Diagnostic::new(e.span(), format!("unknown option \"{s}\""))
                .with_hint(format!("use one of {}", names.join(", ")))
        })
}

impl<'a> Lowerer<'a> {
    pub(super) fn lower_call(&mut self, call: &'a syn::ExprCall) -> R<Val> {
        let name = match &*call.func {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        let Some(name) = name else {
            return Err(
                Diagnostic::new(call.func.span(), "only named functions can be called").with_hint(
                    "call a builtin such as `load(...)` or a helper `fn` declared in the kernel",
                ),
            );
        };
        let name = name.strip_prefix("r#").map(str::to_string).unwrap_or(name);
        if let Some(helper) = self.helpers.get(&name).copied() {
            return self.inline_helper(helper, call);
        }
        let args = CallArgs::new(name, call.func.span(), None, call.args.iter())?;
        self.builtin(&args)
    }

    pub(super) fn lower_method_call(&mut self, m: &'a syn::ExprMethodCall) -> R<Val> {
        let name = m.method.to_string();
        if let Some(t) = &m.turbofish {
            return Err(
                Diagnostic::new(t.span(), "type arguments are not supported")
                    .with_hint("pass the dtype as an argument, e.g. `x.to(f16)`"),
            );
        }
        if PIPE_METHODS.contains(&name.as_str()) {
            let receiver = self.lower_expr(&m.receiver)?;
            let args = CallArgs::new(name.clone(), m.method.span(), None, m.args.iter())?;
            if let Some(result) = self.pipe_method(&receiver, &args) {
                return result;
            }
        }
        if name == "shape" || name == "stride" {
            return self.strided_dim(m, &name);
        }
        // Triton's `desc.load([o0, o1])` and `desc.store([o0, o1], v)`;
        // pointers have no methods.
        let descriptor_method = match name.as_str() {
            "load" => Some(tlx_core::ir::Prim::DescriptorLoad),
            "store" => Some(tlx_core::ir::Prim::DescriptorStore),
            _ => None,
        };
        if let Some(prim) = descriptor_method {
            let args = CallArgs::new(name, m.method.span(), Some(&m.receiver), m.args.iter())?;
            return self.prim_call(prim, &args);
        }
        if !METHODS.contains(&name.as_str()) {
            return Err(
                Diagnostic::new(m.method.span(), format!("unknown method `{name}`")).with_hint(
                    format!(
                        "the methods are: {}, and `load` and `store` of a tensor descriptor",
                        METHODS.join(", ")
                    ),
                ),
            );
        }
        let args = CallArgs::new(name, m.method.span(), Some(&m.receiver), m.args.iter())?;
        self.builtin(&args)
    }

    /// `x.shape(d)` or `x.stride(d)` of a `Strided` parameter: the `i32`
    /// scalar parameter the launch filled in.
    fn strided_dim(&mut self, m: &'a syn::ExprMethodCall, name: &str) -> R<Val> {
        let receiver = self.lower_expr(&m.receiver)?;
        let dims = match receiver {
            Val::Ir(v) => self.strided.get(&v).cloned(),
            _ => None,
        };
        let Some(dims) = dims else {
            return Err(Diagnostic::new(
                m.method.span(),
                format!("`{name}` is a method of a `Strided` parameter"),
            )
            .with_hint(
                "declare the tensor as `x: Strided<f32, 2>` and pass a `tlx::Strided` view: \
                 the launch then passes its extents and strides",
            ));
        };
        let rank = dims.len() / 2;
        let dim_span = m.args.first().map_or(m.method.span(), |a| a.span());
        let dim = match (m.args.len(), m.args.first().map(|a| self.lower_expr(a))) {
            (1, Some(Ok(Val::Const(ConstVal::Int(d))))) => usize::try_from(d).ok(),
            (1, Some(Err(e))) => return Err(e),
            _ => {
                return Err(Diagnostic::new(
                    dim_span,
                    format!("`{name}` takes one constant dimension"),
                )
                .with_hint(format!("e.g. `x.{name}(0)`")))
            }
        };
        match dim.filter(|&d| d < rank) {
            Some(d) => Ok(Val::Ir(dims[if name == "shape" { d } else { rank + d }])),
            None => Err(Diagnostic::new(
                dim_span,
                format!("this `Strided` parameter has {rank} dimensions"),
            )
            .with_hint(format!("dimensions are 0 to {}", rank - 1))),
        }
    }

    fn inline_helper(&mut self, helper: &'a syn::ItemFn, call: &'a syn::ExprCall) -> R<Val> {
        let span = call.func.span();
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            if let Expr::Assign(kw) = arg {
                return Err(Diagnostic::new(
                    kw.left.span(),
                    "helper functions take positional arguments only",
                ));
            }
            let value = self.lower_expr(arg)?;
            if matches!(value, Val::Unit) {
                return Err(Diagnostic::new(arg.span(), "this argument has no value"));
            }
            args.push(value);
        }
        self.inline_helper_with(helper, args, span)
    }

    /// `helper`'s body lowered with its parameters bound to `args`.
    pub(super) fn inline_helper_with(
        &mut self,
        helper: &'a syn::ItemFn,
        args: Vec<Val>,
        span: Span,
    ) -> R<Val> {
        if self.frames.len() > MAX_INLINE_DEPTH {
            return Err(Diagnostic::new(
                span,
                "helper functions are nested too deeply (recursion?)",
            )
            .with_hint("helpers are inlined, so they cannot be recursive"));
        }
        let params = &helper.sig.inputs;
        if params.len() != args.len() {
            return Err(Diagnostic::new(
                span,
                format!(
                    "`{}` takes {} arguments, {} given",
                    helper.sig.ident,
                    params.len(),
                    args.len()
                ),
            ));
        }
        let mut bindings = HashMap::new();
        if let Some(g) = helper.sig.generics.params.first() {
            return Err(Diagnostic::new(
                g.span(),
                "helper functions cannot have generic parameters",
            )
            .with_hint("pass constants as ordinary arguments"));
        }
        for (param, value) in params.iter().zip(args) {
            let syn::FnArg::Typed(pt) = param else {
                return Err(Diagnostic::new(
                    param.span(),
                    "helper functions cannot take `self`",
                ));
            };
            let syn::Pat::Ident(id) = &*pt.pat else {
                return Err(Diagnostic::new(
                    pt.pat.span(),
                    "a helper parameter must be a plain name",
                ));
            };
            // A scalar type is checked; other names (`Tensor`, `usize`)
            // only document the parameter.
            let value = match self.dtype_of_type(&pt.ty) {
                Ok(ty) => {
                    let what = format!("parameter `{}` of `{}`", id.ident, helper.sig.ident);
                    self.annotated(value, ty, &what, span)?
                }
                Err(_) => value,
            };
            bindings.insert(id.ident.to_string(), value);
        }
        self.frames.push(vec![bindings]);
        let result = self.lower_helper_body(helper);
        self.frames.pop();
        result
    }

    fn lower_helper_body(&mut self, helper: &'a syn::ItemFn) -> R<Val> {
        if scan::assigned_in_stmts(&helper.block.stmts).contains(scan::RETURNED) {
            return Err(Diagnostic::new(
                helper.sig.ident.span(),
                "`return` is not supported in helper functions",
            )
            .with_hint("give the result as the body's last expression"));
        }
        self.lower_stmts(&helper.block.stmts)
    }

    pub(super) fn expr_arg<'e>(&self, e: Option<&'e Expr>) -> R<&'e Expr> {
        e.ok_or_else(|| {
            Diagnostic::new(
                Span::call_site(),
                "internal: a required argument is missing",
            )
        })
    }

    pub(super) fn val_arg(&mut self, e: Option<&'a Expr>) -> R<Val> {
        let e = self.expr_arg(e)?;
        let v = self.lower_expr(e)?;
        if matches!(v, Val::Unit | Val::Tuple(_)) {
            return Err(Diagnostic::new(
                e.span(),
                "expected a tensor or scalar value here",
            ));
        }
        Ok(v)
    }

    pub(super) fn ir_arg(&mut self, e: Option<&'a Expr>) -> R<ValueId> {
        let e = self.expr_arg(e)?;
        let v = self.lower_expr(e)?;
        self.materialize(&v, e.span())
    }

    pub(super) fn const_bool(&self, e: &Expr) -> R<bool> {
        match self.eval_const(e, "this flag")? {
            ConstVal::Bool(b) => Ok(b),
            _ => Err(Diagnostic::new(e.span(), "expected `true` or `false`")
                .with_hint("this argument is a compile-time flag: write `true` or `false`, or a `const` bool")),
        }
    }

    /// A compile-time flag argument, `default` when absent.
    pub(super) fn const_bool_or(&self, e: Option<&Expr>, default: bool) -> R<bool> {
        match e {
            Some(e) => self.const_bool(e),
            None => Ok(default),
        }
    }

    /// An axis in `0..rank` (negative counts from the end).
    pub(super) fn axis_arg(&self, e: Option<&Expr>, rank: usize) -> R<usize> {
        let e = self.expr_arg(e)?;
        let axis = self.const_int(e, "an axis")?;
        let resolved = if axis < 0 { axis + rank as i64 } else { axis };
        if !(0..rank as i64).contains(&resolved) {
            return Err(Diagnostic::new(
                e.span(),
                format!("axis {axis} is out of range for rank {rank}"),
            ));
        }
        Ok(resolved as usize)
    }

    /// A list of non-negative compile-time integers `[a, b, ...]`.
    pub(super) fn index_list(&self, e: &Expr, what: &str) -> R<Vec<usize>> {
        let Expr::Array(a) = e else {
            return Err(Diagnostic::new(
                e.span(),
                format!("expected {what} as a list, e.g. `[0, 1]`"),
            ));
        };
        a.elems
            .iter()
            .map(|d| {
                let n = self.const_int(d, what)?;
                usize::try_from(n)
                    .map_err(|_| Diagnostic::new(d.span(), format!("{what} cannot be negative")))
            })
            .collect()
    }
}
