//! Syntactic pre-scans the lowering needs before it lowers a region: which
//! variables a loop body or branch assigns (they become loop-carried or
//! merged values) and whether a region can `return`.

use std::collections::BTreeSet;
use syn::visit::Visit;

/// The name of the hidden variable that records whether the kernel returned.
/// It cannot clash with a Rust identifier.
pub const RETURNED: &str = "#returned";

/// The flag `break` sets: this loop stops (its remaining iterations do nothing).
pub const BROKEN: &str = "#broken";

/// The flag `continue` sets: the rest of this iteration is skipped.
pub const CONTINUED: &str = "#continued";

/// The flags that, once set, skip the rest of a statement list.
pub const EXIT_FLAGS: [&str; 3] = [RETURNED, BROKEN, CONTINUED];

#[derive(Default)]
struct Assigned {
    names: BTreeSet<String>,
    /// Loops entered: a `break` or `continue` inside one belongs to it.
    loop_depth: usize,
}

impl<'ast> Visit<'ast> for Assigned {
    fn visit_expr_assign(&mut self, e: &'ast syn::ExprAssign) {
        if let Some(name) = ident_of(&e.left) {
            self.names.insert(name);
        }
        self.visit_expr(&e.right);
    }

    fn visit_expr_binary(&mut self, e: &'ast syn::ExprBinary) {
        if is_compound_assign(&e.op) {
            if let Some(name) = ident_of(&e.left) {
                self.names.insert(name);
            }
        }
        syn::visit::visit_expr_binary(self, e);
    }

    fn visit_expr_return(&mut self, e: &'ast syn::ExprReturn) {
        self.names.insert(RETURNED.to_string());
        syn::visit::visit_expr_return(self, e);
    }

    fn visit_expr_break(&mut self, e: &'ast syn::ExprBreak) {
        if self.loop_depth == 0 {
            self.names.insert(BROKEN.to_string());
        }
        syn::visit::visit_expr_break(self, e);
    }

    fn visit_expr_continue(&mut self, _: &'ast syn::ExprContinue) {
        if self.loop_depth == 0 {
            self.names.insert(CONTINUED.to_string());
        }
    }

    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.loop_depth += 1;
        syn::visit::visit_expr_for_loop(self, e);
        self.loop_depth -= 1;
    }

    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.loop_depth += 1;
        syn::visit::visit_expr_while(self, e);
        self.loop_depth -= 1;
    }

    // `name = value` inside a call is a keyword argument, not an assignment.
    fn visit_expr_call(&mut self, e: &'ast syn::ExprCall) {
        self.visit_expr(&e.func);
        for arg in &e.args {
            self.visit_argument(arg);
        }
    }

    fn visit_expr_method_call(&mut self, e: &'ast syn::ExprMethodCall) {
        self.visit_expr(&e.receiver);
        for arg in &e.args {
            self.visit_argument(arg);
        }
    }

    // Helper functions are lowered in their own scope.
    fn visit_item_fn(&mut self, _: &'ast syn::ItemFn) {}
}

impl Assigned {
    fn visit_argument(&mut self, arg: &syn::Expr) {
        match arg {
            syn::Expr::Assign(kw) => self.visit_expr(&kw.right),
            other => self.visit_expr(other),
        }
    }
}

fn ident_of(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        syn::Expr::Paren(p) => ident_of(&p.expr),
        _ => None,
    }
}

pub fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Names assigned (or the return flag, for `return`) anywhere in `stmts`.
pub fn assigned_in_stmts(stmts: &[syn::Stmt]) -> BTreeSet<String> {
    let mut v = Assigned::default();
    for s in stmts {
        v.visit_stmt(s);
    }
    v.names
}

pub fn assigned_in_expr(e: &syn::Expr) -> BTreeSet<String> {
    let mut v = Assigned::default();
    v.visit_expr(e);
    v.names
}

/// Whether `s` may `return`, or `break` or `continue` the loop it is in:
/// the statements after it then run only while no exit flag is set.
pub fn stmt_exits(s: &syn::Stmt) -> bool {
    let assigned = assigned_in_stmts(std::slice::from_ref(s));
    EXIT_FLAGS.iter().any(|f| assigned.contains(*f))
}

/// Every helper `fn` declared anywhere in the kernel body.
pub fn helper_fns(body: &syn::Block) -> Vec<&syn::ItemFn> {
    #[derive(Default)]
    struct Helpers<'ast> {
        found: Vec<&'ast syn::ItemFn>,
    }
    impl<'ast> Visit<'ast> for Helpers<'ast> {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.found.push(f);
            syn::visit::visit_item_fn(self, f);
        }
    }
    let mut v = Helpers::default();
    v.visit_block(body);
    v.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_arguments_are_not_assignments() {
        let block: syn::Block = syn::parse_quote!({
            acc += load(p, mask = m);
            x = 1;
            if c {
                return;
            }
            fn helper() {
                y = 2;
            }
        });
        let names: Vec<String> = assigned_in_stmts(&block.stmts).into_iter().collect();
        assert_eq!(names, vec![RETURNED.to_string(), "acc".into(), "x".into()]);
        assert!(stmt_exits(&block.stmts[2]));
        assert!(!stmt_exits(&block.stmts[0]));
        assert_eq!(helper_fns(&block).len(), 1);
    }
}
