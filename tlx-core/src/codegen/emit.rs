//! LLVM IR text building: fresh SSA names, instructions, declarations, and
//! the LLVM spelling of IR element types and literals.

use crate::ir::{Elem, ScalarType};
use std::collections::BTreeSet;
use std::fmt::Write;

/// A function body under construction, plus the module-level declarations it needs.
#[derive(Default)]
pub struct FuncText {
    /// Instructions of the entry block that every later block may use (thread ids).
    pub prologue: String,
    pub body: String,
    /// Module-level declarations and globals, deduplicated.
    pub decls: BTreeSet<String>,
    next_name: u32,
}

impl FuncText {
    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    /// Emit `%t = rhs` in the body; returns `%t`.
    pub fn inst(&mut self, rhs: impl AsRef<str>) -> String {
        let name = self.fresh("%v");
        let _ = writeln!(self.body, "  {name} = {}", rhs.as_ref());
        name
    }

    /// Emit `%t = rhs` in the entry block's prologue.
    pub fn prologue_inst(&mut self, rhs: impl AsRef<str>) -> String {
        let name = self.fresh("%p");
        let _ = writeln!(self.prologue, "  {name} = {}", rhs.as_ref());
        name
    }

    /// Emit an instruction with no result.
    pub fn stmt(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.body, "  {}", text.as_ref());
    }

    /// Start a new basic block (the previous one must have ended with a branch).
    pub fn start_block(&mut self, label: &str) {
        let _ = writeln!(self.body, "{label}:");
    }

    pub fn declare(&mut self, decl: impl Into<String>) {
        self.decls.insert(decl.into());
    }

    /// Call an LLVM intrinsic or declared function returning `ret`.
    pub fn call(&mut self, ret: &str, name: &str, args: &[(&str, &str)]) -> String {
        let params: Vec<&str> = args.iter().map(|(t, _)| *t).collect();
        self.declare(format!("declare {ret} @{name}({})", params.join(", ")));
        let list: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        self.inst(format!("call {ret} @{name}({})", list.join(", ")))
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
        let call = format!(
            "call {ret} asm sideeffect \"{asm}\", \"{constraints}\"({})",
            list.join(", ")
        );
        if ret == "void" {
            self.stmt(call);
            String::new()
        } else {
            self.inst(call)
        }
    }

    /// `asm` without `sideeffect`: a pure computation LLVM may move or delete.
    pub fn pure_asm(
        &mut self,
        ret: &str,
        asm: &str,
        constraints: &str,
        args: &[(&str, &str)],
    ) -> String {
        let list: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        self.inst(format!(
            "call {ret} asm \"{asm}\", \"{constraints}\"({})",
            list.join(", ")
        ))
    }
}

/// The LLVM type holding one register of an element.
pub fn llvm_type(elem: Elem) -> &'static str {
    match elem {
        Elem::Ptr(_) => "ptr addrspace(1)",
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
    }
}

/// True for the types LLVM does float arithmetic on (fp8 travels as raw bytes).
pub fn is_llvm_float(s: ScalarType) -> bool {
    matches!(s, ScalarType::F16 | ScalarType::BF16 | ScalarType::F32)
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
