//! LLVM IR text building: fresh SSA names, instructions, declarations, and
//! the LLVM spelling of IR element types and literals.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use tlx_core::ir::{AddressSpace, Elem, ScalarType};

/// A function body under construction, plus the module-level declarations it needs.
///
/// Pure instructions are value-numbered as they are emitted: the lowering
/// redoes index arithmetic per register (the same row offset for every
/// register of a row, `x + 0` for register 0...), which otherwise doubles the
/// LLVM IR that LLVM must parse and simplify before it finds the same values.
#[derive(Default)]
pub struct FuncText {
    /// Instructions of the entry block that every later block may use (thread ids).
    pub prologue: String,
    pub body: String,
    /// Module-level declarations and globals, deduplicated.
    pub decls: BTreeSet<String>,
    next_name: u32,
    /// Name of each pure instruction of the prologue, by its text.
    prologue_values: HashMap<String, String>,
    /// The same for the body's current basic block (which the prologue dominates).
    block_values: HashMap<String, String>,
    /// What replaces each placeholder (see [`FuncText::placeholder`]) once
    /// the body is complete: replacing each as it became known rewrote the
    /// whole body every time, quadratic in a loop that carries many
    /// registers (a fifth of the build time of the attention kernels).
    holes: HashMap<String, String>,
}

/// True for instruction texts without side effects or dependence on memory,
/// which may share one result when repeated in a block.
fn is_pure(rhs: &str) -> bool {
    const PURE: [&str; 27] = [
        "add ",
        "sub ",
        "mul ",
        "shl ",
        "lshr ",
        "ashr ",
        "and ",
        "or ",
        "xor ",
        "icmp ",
        "fcmp ",
        "select ",
        "zext ",
        "sext ",
        "trunc ",
        "getelementptr ",
        "bitcast ",
        "extractvalue ",
        "insertvalue ",
        "extractelement ",
        "insertelement ",
        "ptrtoint ",
        "inttoptr ",
        "fpext ",
        "fptrunc ",
        "sitofp ",
        "uitofp ",
    ];
    PURE.iter().any(|op| rhs.starts_with(op))
}

/// The operand an instruction adding, or-ing or xor-ing zero to a value
/// reduces to, if it is one.
fn identity_operand(rhs: &str) -> Option<&str> {
    let (op, rest) = rhs.split_once(' ')?;
    if !matches!(op, "add" | "or" | "xor") {
        return None;
    }
    let (_ty, operands) = rest.split_once(' ')?;
    let (a, b) = operands.split_once(", ")?;
    match (a, b) {
        (v, "0") | ("0", v) if v.starts_with('%') && !v.contains(' ') => Some(v),
        _ => None,
    }
}

impl FuncText {
    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    /// Emit `%t = rhs` in the body; returns `%t`, or the value it repeats.
    pub fn inst(&mut self, rhs: impl AsRef<str>) -> String {
        let rhs = rhs.as_ref();
        if let Some(v) = identity_operand(rhs) {
            return v.to_string();
        }
        let pure = is_pure(rhs);
        if pure {
            if let Some(v) = self
                .block_values
                .get(rhs)
                .or_else(|| self.prologue_values.get(rhs))
            {
                return v.clone();
            }
        }
        let name = self.fresh("%v");
        let _ = writeln!(self.body, "  {name} = {rhs}");
        if pure {
            self.block_values.insert(rhs.to_string(), name.clone());
        }
        name
    }

    /// Emit `%t = rhs` in the entry block's prologue; returns `%t`, or the
    /// value it repeats.
    pub fn prologue_inst(&mut self, rhs: impl AsRef<str>) -> String {
        let rhs = rhs.as_ref();
        if let Some(v) = identity_operand(rhs) {
            return v.to_string();
        }
        let pure = is_pure(rhs);
        if pure {
            if let Some(v) = self.prologue_values.get(rhs) {
                return v.clone();
            }
        }
        let name = self.fresh("%p");
        let _ = writeln!(self.prologue, "  {name} = {rhs}");
        if pure {
            self.prologue_values.insert(rhs.to_string(), name.clone());
        }
        name
    }

    /// A stand-in for text not known yet (a phi's latch operand, the moves
    /// at the end of an `if` branch), replaced by [`FuncText::fill`]'s text
    /// when the body is taken with [`FuncText::finished_body`].
    pub fn placeholder(&mut self, what: &str) -> String {
        format!("@@{}@@", self.fresh(what))
    }

    /// Sets the text that replaces `hole`.
    pub fn fill(&mut self, hole: &str, text: String) {
        self.holes.insert(hole.to_string(), text);
    }

    /// The body with every placeholder replaced by its text (which may hold
    /// placeholders of its own), in one pass.
    pub fn finished_body(&self) -> String {
        let mut out = String::with_capacity(self.body.len());
        self.resolve_into(&self.body, &mut out);
        out
    }

    fn resolve_into(&self, text: &str, out: &mut String) {
        let mut rest = text;
        while let Some(start) = rest.find("@@") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("@@") else {
                break;
            };
            let hole = &rest[start..start + 2 + end + 2];
            out.push_str(&rest[..start]);
            match self.holes.get(hole) {
                Some(fill) => self.resolve_into(fill, out),
                None => out.push_str(hole),
            }
            rest = &rest[start + 2 + end + 2..];
        }
        out.push_str(rest);
    }

    /// Emit an instruction with no result.
    pub fn stmt(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.body, "  {}", text.as_ref());
    }

    /// Removes the statement `text` that starts at `start` of the body, if
    /// it is still there and only pure instructions (which touch no memory
    /// and no other thread) follow it; true if removed.
    pub fn remove_if_last(&mut self, start: usize, text: &str) -> bool {
        let only_pure = self.only_pure_after(start, text);
        if only_pure {
            self.body.replace_range(start..start + text.len(), "");
        }
        only_pure
    }

    /// Whether `text` still stands at byte `start` of the body with
    /// nothing but pure instructions after it.
    pub fn only_pure_after(&self, start: usize, text: &str) -> bool {
        let Some(after) = self
            .body
            .get(start..)
            .and_then(|rest| rest.strip_prefix(text))
        else {
            return false;
        };
        after.lines().all(|line| {
            line.trim_start()
                .strip_prefix('%')
                .and_then(|l| l.split_once(" = "))
                .is_some_and(|(_, rhs)| is_pure(rhs))
        })
    }

    /// Swaps in another block's value numbering, returning the current one:
    /// for emitting into a block already left (`Lowerer::lower_if` fills a
    /// branch's conversions in once it knows the other branch's layouts).
    pub fn swap_block_values(&mut self, other: HashMap<String, String>) -> HashMap<String, String> {
        std::mem::replace(&mut self.block_values, other)
    }

    /// Start a new basic block (the previous one must have ended with a branch).
    pub fn start_block(&mut self, label: &str) {
        self.block_values.clear();
        let _ = writeln!(self.body, "{label}:");
    }

    pub fn declare(&mut self, decl: impl Into<String>) {
        self.decls.insert(decl.into());
    }

    /// Call an LLVM intrinsic or declared function returning `ret`.
    pub fn call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        let call = self.declared_call(ret, name, args);
        self.inst(call)
    }

    /// [`Self::call`] in the entry block's prologue (values every block
    /// sees, such as thread and warp indices).
    pub fn prologue_call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        let call = self.declared_call(ret, name, args);
        self.prologue_inst(call)
    }

    /// Declares `name` and returns the text of a call to it.
    fn declared_call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        let params: Vec<&str> = args.iter().map(|(t, _)| *t).collect();
        self.declare(format!("declare {ret} @{name}({})", params.join(", ")));
        let list: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        format!("call {ret} @{name}({})", list.join(", "))
    }

    /// Call inline PTX asm with one result of type `ret` (or `void`).
    pub fn asm(
        &mut self,
        ret: &str,
        asm: &str,
        constraints: &str,
        args: &[(&str, &str)],
    ) -> String {
        let list: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        // `convergent`: barriers and warp-collective instructions (`.aligned`)
        // must stay where every thread reaches them; LLVM may otherwise copy
        // one into both arms of a branch, which hangs `bar.sync`.
        let call = format!(
            "call {ret} asm sideeffect \"{asm}\", \"{constraints}\"({}) convergent",
            list.join(", ")
        );
        if ret == "void" {
            self.stmt(call);
            String::new()
        } else {
            self.inst(call)
        }
    }

    /// `asm` without `sideeffect`: a pure computation LLVM may move or
    /// delete, but not into a branch (warp-collective `mma.sync`).
    pub fn pure_asm(
        &mut self,
        ret: &str,
        asm: &str,
        constraints: &str,
        args: &[(&str, &str)],
    ) -> String {
        let list: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        self.inst(format!(
            "call {ret} asm \"{asm}\", \"{constraints}\"({}) convergent",
            list.join(", ")
        ))
    }
}

/// The LLVM type holding one register of an element.
pub fn llvm_type(elem: Elem) -> &'static str {
    match elem {
        Elem::Ptr(_, AddressSpace::Global) => "ptr addrspace(1)",
        Elem::Ptr(_, AddressSpace::Shared) => "ptr addrspace(3)",
        Elem::Scalar(s) => scalar_type(s),
    }
}

pub fn scalar_type(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "i1",
        ScalarType::I8 | ScalarType::U8 | ScalarType::F8E4M3 | ScalarType::F8E5M2 => "i8",
        ScalarType::I32 | ScalarType::U32 => "i32",
        ScalarType::I64 => "i64",
        ScalarType::F16 => "half",
        ScalarType::BF16 => "bfloat",
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
    }
}

/// True for the types LLVM does float arithmetic on (fp8 travels as raw bytes).
pub fn is_llvm_float(s: ScalarType) -> bool {
    matches!(
        s,
        ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
    )
}

/// The LLVM literal of an f32 value (LLVM writes float constants as exact doubles).
pub fn f32_literal(x: f32) -> String {
    format!("0x{:016X}", (x as f64).to_bits())
}

/// A float literal rounded (to nearest even) to `s`.
pub fn float_literal(s: ScalarType, x: f64) -> String {
    match s {
        ScalarType::F16 => format!("0xH{:04X}", half::f16::from_f64(x).to_bits()),
        ScalarType::BF16 => format!("0xR{:04X}", half::bf16::from_f64(x).to_bits()),
        ScalarType::F64 => format!("0x{:016X}", x.to_bits()),
        _ => f32_literal(x as f32),
    }
}

/// The LLVM integer type of the same width as `s` (for bit moves and shuffles).
pub fn bits_type(s: ScalarType) -> &'static str {
    match s.size_bytes() {
        1 => "i8",
        2 => "i16",
        8 => "i64",
        _ => "i32",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_to_the_element_type() {
        assert_eq!(f32_literal(1.0), "0x3FF0000000000000");
        // 0.1 is not an f32: the literal is the f32 nearest 0.1, widened exactly.
        assert_eq!(float_literal(ScalarType::F32, 0.1), "0x3FB99999A0000000");
        assert_eq!(float_literal(ScalarType::F16, 1.0), "0xH3C00");
        assert_eq!(float_literal(ScalarType::BF16, -2.0), "0xRC000");
    }

    #[test]
    fn repeated_pure_instructions_share_a_value_within_a_block() {
        let mut f = FuncText::default();
        let tid = f.prologue_inst("lshr i32 %t, 5");
        assert_eq!(f.prologue_inst("lshr i32 %t, 5"), tid);
        // The prologue dominates the body.
        assert_eq!(f.inst("lshr i32 %t, 5"), tid);
        let a = f.inst("mul i32 %x, 3");
        assert_eq!(f.inst("mul i32 %x, 3"), a);
        // Loads and side effects are never merged.
        let l = f.inst("load i32, ptr addrspace(3) %p, align 4");
        assert_ne!(f.inst("load i32, ptr addrspace(3) %p, align 4"), l);
        // A value of another block may not dominate this one.
        f.start_block("next");
        assert_ne!(f.inst("mul i32 %x, 3"), a);
    }

    #[test]
    fn placeholders_are_replaced_once_the_body_is_finished() {
        let mut f = FuncText::default();
        let latch = f.placeholder("latch");
        let moves = f.placeholder("moves");
        f.stmt(format!("%v = phi i32 [ 0, %entry ], [ {latch} ]"));
        f.body.push_str(&moves);
        f.stmt("br label %merge");
        let unfilled = f.placeholder("never");
        f.stmt(format!("; {unfilled}"));
        // A fill may hold a placeholder filled later.
        let inner = f.placeholder("inner");
        f.fill(&moves, format!("  %w = add i32 %v, {inner}\n"));
        f.fill(&inner, "1".to_string());
        f.fill(&latch, "%next, %loop".to_string());
        let body = f.finished_body();
        assert!(body.contains("[ %next, %loop ]"), "{body}");
        assert!(
            body.contains("  %w = add i32 %v, 1\n  br label %merge"),
            "{body}"
        );
        // Nothing fills it: it stays, for LLVM's parser to reject.
        assert!(body.contains(&unfilled), "{body}");
        // The body itself is untouched until then.
        assert!(f.body.contains(&latch));
    }

    #[test]
    fn a_statement_is_removed_only_when_pure_instructions_follow_it() {
        let mut f = FuncText::default();
        let start = f.body.len();
        f.stmt("call void @barrier()");
        let text = f.body[start..].to_string();
        f.inst("mul i32 %x, 3");
        assert!(f.remove_if_last(start, &text));
        assert!(!f.body.contains("@barrier"));
        // A memory access after it keeps it.
        let start = f.body.len();
        f.stmt("call void @barrier()");
        f.inst("load i32, ptr addrspace(3) %p, align 4");
        assert!(!f.remove_if_last(start, &text));
        assert!(f.body.contains("@barrier"));
        // So does text that is no longer where it was.
        assert!(!f.remove_if_last(0, &text));
    }

    #[test]
    fn adding_zero_is_the_value_itself() {
        let mut f = FuncText::default();
        assert_eq!(f.inst("add i32 %x, 0"), "%x");
        assert_eq!(f.inst("xor i32 0, %y"), "%y");
        assert_eq!(f.prologue_inst("or i32 %z, 0"), "%z");
        assert_ne!(f.inst("add i32 0, 0"), "0");
        assert!(f.body.contains("add i32 0, 0"));
    }

    #[test]
    fn asm_and_calls_declare_what_they_use() {
        let mut f = FuncText::default();
        let r = f.call("i32", "llvm.smax.i32", &[("i32", "1"), ("i32", "%x")]);
        assert_eq!(r, "%v1");
        assert!(f.body.contains("call i32 @llvm.smax.i32(i32 1, i32 %x)"));
        assert!(f.decls.contains("declare i32 @llvm.smax.i32(i32, i32)"));
        f.asm("void", "bar.sync 0;", "", &[]);
        assert!(f.body.contains("asm sideeffect \"bar.sync 0;\""));
    }
}
