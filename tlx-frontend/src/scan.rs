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

struct Assigned {
    names: BTreeSet<String>,
    /// Loops entered: a `break` or `continue` inside one belongs to it.
    loop_depth: usize,
    /// The names the region's own `let`s (and loop patterns) bind, per
    /// block: an assignment to one of those is to the region's variable,
    /// not to the one outside it that it shadows.
    declared: Vec<BTreeSet<String>>,
}

impl Default for Assigned {
    fn default() -> Self {
        Assigned {
            names: BTreeSet::new(),
            loop_depth: 0,
            declared: vec![BTreeSet::new()],
        }
    }
}

impl Assigned {
    fn assigns(&mut self, target: &syn::Expr) {
        if let Some(name) = ident_of(target) {
            if !self.declared.iter().any(|scope| scope.contains(&name)) {
                self.names.insert(name);
            }
        }
    }

    fn declare(&mut self, pat: &syn::Pat) {
        let mut bound = Bound::default();
        bound.visit_pat(pat);
        if let Some(scope) = self.declared.last_mut() {
            scope.extend(bound.names);
        }
    }
}

/// The names a pattern binds.
#[derive(Default)]
struct Bound {
    names: Vec<String>,
}

impl<'ast> Visit<'ast> for Bound {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.names.push(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
}

impl<'ast> Visit<'ast> for Assigned {
    fn visit_expr_assign(&mut self, e: &'ast syn::ExprAssign) {
        self.assigns(&e.left);
        self.visit_expr(&e.right);
    }

    fn visit_expr_binary(&mut self, e: &'ast syn::ExprBinary) {
        if is_compound_assign(&e.op) {
            self.assigns(&e.left);
        }
        syn::visit::visit_expr_binary(self, e);
    }

    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.declared.push(BTreeSet::new());
        syn::visit::visit_block(self, b);
        self.declared.pop();
    }

    // The initializer runs before the pattern binds: `let x = { x = 1; x };`
    // assigns the outer `x`.
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.declare(&l.pat);
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
        self.visit_expr(&e.expr);
        self.loop_depth += 1;
        self.declared.push(BTreeSet::new());
        self.declare(&e.pat);
        self.visit_block(&e.body);
        self.declared.pop();
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

    #[test]
    fn assignments_to_a_shadowing_let_are_not_to_the_outer_variable() {
        let block: syn::Block = syn::parse_quote!({
            a = 1;
            let a = 2;
            a = 3;
            if c {
                let mut b = zeros([64], f32);
                for i in static_range(0, 2) {
                    b = b + 1.0;
                    i += 1;
                }
            }
            b = 4;
            let d = {
                d = 5;
                d
            };
            for (e, f) in pairs {
                e = 6;
                f += 7;
            }
            e = 8;
        });
        let names: Vec<String> = assigned_in_stmts(&block.stmts).into_iter().collect();
        assert_eq!(names, vec!["a", "b", "d", "e"]);
    }
}
