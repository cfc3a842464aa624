//! Random elementwise expressions for the generated kernels: a typed tree
//! over the loaded tiles (`xv`, `yv`: f32; `av`: i32), its kernel-language
//! text, its value as the language defines it (f32 and wrapping i32
//! arithmetic, `.to()` as Rust's `as`), and smaller trees for the shrinker.

use super::Rng;

/// A float (`F`) or integer (`I`) expression.
#[derive(Clone, Debug)]
pub enum Expr {
    X,
    Y,
    A,
    Float(f32),
    Int(i32),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Maximum(Box<Expr>, Box<Expr>),
    Minimum(Box<Expr>, Box<Expr>),
    Abs(Box<Expr>),
    Neg(Box<Expr>),
    /// `select(l < r, a, b)`; `l`, `r` of either type, `a`, `b` of the node's.
    Select(Box<Expr>, Box<Expr>, Box<Expr>, Box<Expr>),
    /// An integer expression as f32 (`.to(f32)`).
    ToFloat(Box<Expr>),
    /// A float expression as i32 (`.to(i32)`: toward zero, saturating).
    ToInt(Box<Expr>),
}

#[derive(Clone, Copy, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    And,
    Or,
    Xor,
    Shr(u32),
    Shl(u32),
}

/// A value of an expression at one element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    F(f32),
    I(i32),
}

impl V {
    pub fn f(self) -> f32 {
        match self {
            V::F(v) => v,
            V::I(v) => v as f32,
        }
    }
    fn i(self) -> i32 {
        match self {
            V::I(v) => v,
            V::F(v) => v as i32,
        }
    }
}

/// One element of the loaded tiles.
#[derive(Clone, Copy)]
pub struct Env {
    pub x: f32,
    pub y: f32,
    pub a: i32,
}

impl Expr {
    /// A float expression of at most `depth` levels, never a bare literal.
    pub fn float(rng: &mut Rng, depth: u32) -> Expr {
        let e = Expr::gen(rng, depth, true);
        if e.is_literal() {
            Expr::Bin(BinOp::Mul, Box::new(Expr::X), Box::new(e))
        } else {
            e
        }
    }

    /// An integer expression of at most `depth` levels, never a bare literal.
    pub fn int(rng: &mut Rng, depth: u32) -> Expr {
        let e = Expr::gen(rng, depth, false);
        if e.is_literal() {
            Expr::Bin(BinOp::Add, Box::new(Expr::A), Box::new(e))
        } else {
            e
        }
    }

    fn is_literal(&self) -> bool {
        matches!(self, Expr::Float(_) | Expr::Int(_))
    }

    fn leaf(rng: &mut Rng, float: bool) -> Expr {
        match (float, rng.below(4)) {
            (true, 0) => Expr::Float([0.5, 1.5, -2.0, 3.25][rng.below(4)]),
            (true, 1) => Expr::Y,
            (true, _) => Expr::X,
            (false, 0) => Expr::Int([1, 3, -7, 100][rng.below(4)]),
            (false, _) => Expr::A,
        }
    }

    /// A child that is not a literal (the language folds literal pairs).
    fn operand(rng: &mut Rng, depth: u32, float: bool) -> Box<Expr> {
        let e = Expr::gen(rng, depth, float);
        Box::new(if e.is_literal() {
            if float {
                Expr::X
            } else {
                Expr::A
            }
        } else {
            e
        })
    }

    fn gen(rng: &mut Rng, depth: u32, float: bool) -> Expr {
        if depth == 0 || rng.below(5) == 0 {
            return Expr::leaf(rng, float);
        }
        let d = depth - 1;
        let kinds = if float { 7 } else { 9 };
        match rng.below(kinds) {
            0 => Expr::Maximum(
                Expr::operand(rng, d, float),
                Box::new(Expr::gen(rng, d, float)),
            ),
            1 => Expr::Minimum(
                Expr::operand(rng, d, float),
                Box::new(Expr::gen(rng, d, float)),
            ),
            2 => Expr::Abs(Expr::operand(rng, d, float)),
            3 => Expr::Neg(Expr::operand(rng, d, float)),
            4 => {
                let cmp_float = rng.below(2) == 0;
                Expr::Select(
                    Expr::operand(rng, d, cmp_float),
                    Box::new(Expr::gen(rng, d, cmp_float)),
                    Expr::operand(rng, d, float),
                    Expr::operand(rng, d, float),
                )
            }
            5 if float => Expr::ToFloat(Expr::operand(rng, d, false)),
            5 => Expr::ToInt(Expr::operand(rng, d, true)),
            _ => {
                let op = if float {
                    [BinOp::Add, BinOp::Sub, BinOp::Mul][rng.below(3)]
                } else {
                    match rng.below(8) {
                        0 => BinOp::Add,
                        1 => BinOp::Sub,
                        2 => BinOp::Mul,
                        3 => BinOp::And,
                        4 => BinOp::Or,
                        5 => BinOp::Xor,
                        6 => BinOp::Shr(1 + rng.below(8) as u32),
                        _ => BinOp::Shl(1 + rng.below(4) as u32),
                    }
                };
                match op {
                    BinOp::Shr(_) | BinOp::Shl(_) => {
                        Expr::Bin(op, Expr::operand(rng, d, false), Box::new(Expr::Int(0)))
                    }
                    _ => Expr::Bin(
                        op,
                        Expr::operand(rng, d, float),
                        Box::new(Expr::gen(rng, d, float)),
                    ),
                }
            }
        }
    }

    /// The kernel-language text.
    pub fn text(&self) -> String {
        match self {
            Expr::X => "xv".into(),
            Expr::Y => "yv".into(),
            Expr::A => "av".into(),
            Expr::Float(v) => format!("{v:?}"),
            Expr::Int(v) if *v < 0 => format!("({v})"),
            Expr::Int(v) => v.to_string(),
            Expr::Bin(op, l, r) => {
                let (l, r) = (l.text(), r.text());
                match op {
                    BinOp::Add => format!("({l} + {r})"),
                    BinOp::Sub => format!("({l} - {r})"),
                    BinOp::Mul => format!("({l} * {r})"),
                    BinOp::And => format!("({l} & {r})"),
                    BinOp::Or => format!("({l} | {r})"),
                    BinOp::Xor => format!("({l} ^ {r})"),
                    BinOp::Shr(k) => format!("({l} >> {k})"),
                    BinOp::Shl(k) => format!("({l} << {k})"),
                }
            }
            Expr::Maximum(l, r) => format!("maximum({}, {})", l.text(), r.text()),
            Expr::Minimum(l, r) => format!("minimum({}, {})", l.text(), r.text()),
            Expr::Abs(e) => format!("abs({})", e.text()),
            Expr::Neg(e) => format!("(-{})", e.text()),
            Expr::Select(l, r, a, b) => format!(
                "select({} < {}, {}, {})",
                l.text(),
                r.text(),
                a.text(),
                b.text()
            ),
            Expr::ToFloat(e) => format!("({}).to(f32)", e.text()),
            Expr::ToInt(e) => format!("({}).to(i32)", e.text()),
        }
    }

    /// The value at one element.
    pub fn eval(&self, env: Env) -> V {
        match self {
            Expr::X => V::F(env.x),
            Expr::Y => V::F(env.y),
            Expr::A => V::I(env.a),
            Expr::Float(v) => V::F(*v),
            Expr::Int(v) => V::I(*v),
            Expr::Bin(op, l, r) => {
                let (l, r) = (l.eval(env), r.eval(env));
                match (l, op) {
                    (V::F(a), BinOp::Add) => V::F(a + r.f()),
                    (V::F(a), BinOp::Sub) => V::F(a - r.f()),
                    (V::F(a), BinOp::Mul) => V::F(a * r.f()),
                    (V::F(_), _) => unreachable!("bit operations are generated on integers"),
                    (V::I(a), op) => V::I(match op {
                        BinOp::Add => a.wrapping_add(r.i()),
                        BinOp::Sub => a.wrapping_sub(r.i()),
                        BinOp::Mul => a.wrapping_mul(r.i()),
                        BinOp::And => a & r.i(),
                        BinOp::Or => a | r.i(),
                        BinOp::Xor => a ^ r.i(),
                        BinOp::Shr(k) => a >> k,
                        BinOp::Shl(k) => a.wrapping_shl(*k),
                    }),
                }
            }
            Expr::Maximum(l, r) => match (l.eval(env), r.eval(env)) {
                (V::F(a), b) => V::F(a.max(b.f())),
                (V::I(a), b) => V::I(a.max(b.i())),
            },
            Expr::Minimum(l, r) => match (l.eval(env), r.eval(env)) {
                (V::F(a), b) => V::F(a.min(b.f())),
                (V::I(a), b) => V::I(a.min(b.i())),
            },
            Expr::Abs(e) => match e.eval(env) {
                V::F(a) => V::F(a.abs()),
                V::I(a) => V::I(a.wrapping_abs()),
            },
            Expr::Neg(e) => match e.eval(env) {
                V::F(a) => V::F(-a),
                V::I(a) => V::I(a.wrapping_neg()),
            },
            Expr::Select(l, r, a, b) => {
                let less = match (l.eval(env), r.eval(env)) {
                    (V::F(p), q) => p < q.f(),
                    (V::I(p), q) => p < q.i(),
                };
                if less {
                    a.eval(env)
                } else {
                    b.eval(env)
                }
            }
            Expr::ToFloat(e) => V::F(e.eval(env).i() as f32),
            Expr::ToInt(e) => V::I(e.eval(env).f() as i32),
        }
    }

    /// Smaller expressions of the same type: each non-literal child in the
    /// node's place, or a leaf.
    pub fn shrunk(&self, float: bool) -> Vec<Expr> {
        let leaf = if float { Expr::X } else { Expr::A };
        let mut out = Vec::new();
        if !matches!(self, Expr::X | Expr::A) {
            out.push(leaf);
        }
        let same_type = |e: &Expr| match e {
            Expr::X | Expr::Y | Expr::Float(_) | Expr::ToFloat(_) => float,
            Expr::A | Expr::Int(_) | Expr::ToInt(_) => !float,
            _ => true,
        };
        let children: Vec<&Expr> = match self {
            Expr::Bin(_, l, r) | Expr::Maximum(l, r) | Expr::Minimum(l, r) => vec![l, r],
            Expr::Abs(e) | Expr::Neg(e) => vec![e],
            Expr::Select(_, _, a, b) => vec![a, b],
            _ => vec![],
        };
        out.extend(
            children
                .into_iter()
                .filter(|c| !c.is_literal() && same_type(c))
                .cloned(),
        );
        out
    }
}
