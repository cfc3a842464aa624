//! `device_print` and `device_assert` through CUDA's `vprintf`: each element
//! (its primary copy only) prints with its program id and index; a failed
//! assertion prints the message and traps.

use super::emit::{llvm_type, scalar_type};
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar;
use crate::layout::LinearLayout;
use tlx_core::ir::{Elem, Op, OpKind, ScalarType};

/// Bytes of `text` as an LLVM `c"..."` string body, NUL-terminated.
fn llvm_c_string(text: &str) -> (String, usize) {
    let mut out = String::new();
    let bytes: Vec<u8> = text.bytes().chain([0u8]).collect();
    for &b in &bytes {
        if b.is_ascii_graphic() && b != b'"' && b != b'\\' || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\{b:02X}"));
        }
    }
    (out, bytes.len())
}

/// `%` directives are the user's text, not conversions.
pub(super) fn escape_percent(text: &str) -> String {
    text.replace('%', "%%")
}

impl<'k> Lowerer<'k> {
    /// A generic pointer to a NUL-terminated global string.
    fn global_string(&mut self, text: &str) -> String {
        let (body, len) = llvm_c_string(text);
        let name = self.f.fresh("@str");
        self.f.declare(format!(
            "{name} = private unnamed_addr addrspace(1) constant [{len} x i8] c\"{body}\", align 1"
        ));
        self.f
            .inst(format!("addrspacecast ptr addrspace(1) {name} to ptr"))
    }

    /// `vprintf(format, args)` with the args packed as C varargs would be.
    pub(super) fn vprintf(&mut self, format: &str, args: &[(&str, String)]) {
        let fmt = self.global_string(format);
        self.f.declare("declare i32 @vprintf(ptr, ptr)");
        if args.is_empty() {
            self.f
                .inst(format!("call i32 @vprintf(ptr {fmt}, ptr null)"));
            return;
        }
        let types: Vec<&str> = args.iter().map(|(t, _)| *t).collect();
        let st = format!("{{ {} }}", types.join(", "));
        let buf = self.f.inst(format!("alloca {st}, align 8"));
        for (i, (t, v)) in args.iter().enumerate() {
            let slot = self.f.inst(format!(
                "getelementptr inbounds {st}, ptr {buf}, i32 0, i32 {i}"
            ));
            self.f.stmt(format!("store {t} {v}, ptr {slot}"));
        }
        self.f
            .inst(format!("call i32 @vprintf(ptr {fmt}, ptr {buf})"));
    }

    /// The printf conversion and promoted argument of one element.
    fn printf_arg(&mut self, elem: Elem, v: &str) -> Result<(&'static str, &'static str, String)> {
        Ok(match elem {
            Elem::Ptr(..) => (
                "%p",
                "i64",
                self.f
                    .inst(format!("ptrtoint {} {v} to i64", llvm_type(elem))),
            ),
            Elem::Scalar(ScalarType::I64) => ("%lld", "i64", v.to_string()),
            Elem::Scalar(ScalarType::U32) => ("%u", "i32", v.to_string()),
            Elem::Scalar(ScalarType::I32) => ("%d", "i32", v.to_string()),
            Elem::Scalar(s @ (ScalarType::Bool | ScalarType::U8)) => (
                "%u",
                "i32",
                self.f.inst(format!("zext {} {v} to i32", scalar_type(s))),
            ),
            Elem::Scalar(ScalarType::I8) => {
                ("%d", "i32", self.f.inst(format!("sext i8 {v} to i32")))
            }
            Elem::Scalar(s) => {
                let wide = scalar::cast(&mut self.f, s, ScalarType::F32, v)?;
                (
                    "%f",
                    "double",
                    self.f.inst(format!("fpext float {wide} to double")),
                )
            }
        })
    }

    /// Program id (x, y, z) and this register's coordinates, as printf args.
    fn position_args(
        &mut self,
        layout: &LinearLayout,
        reg: usize,
    ) -> (String, Vec<(&'static str, String)>) {
        let mut args = Vec::new();
        for d in ["x", "y", "z"] {
            args.push((
                "i32",
                self.f
                    .call("i32", &format!("llvm.nvvm.read.ptx.sreg.ctaid.{d}"), &[]),
            ));
        }
        let flat = self.flat_index(layout, reg);
        let mut low = 0;
        let mut coords = Vec::new();
        for &size in layout.shape.iter().rev() {
            let shifted = self.f.inst(format!("lshr i32 {flat}, {low}"));
            coords.push(self.f.inst(format!("and i32 {shifted}, {}", size - 1)));
            low += size.trailing_zeros();
        }
        coords.reverse();
        let idx = vec!["%d"; coords.len()].join(", ");
        args.extend(coords.into_iter().map(|c| ("i32", c)));
        (format!("pid (%d, %d, %d) idx ({idx})"), args)
    }

    /// Run `body` only when `pred` holds.
    fn guarded(&mut self, pred: &str, body: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let then = self.f.fresh("guard");
        let cont = self.f.fresh("guard_end");
        self.f
            .stmt(format!("br i1 {pred}, label %{then}, label %{cont}"));
        self.f.start_block(&then);
        self.current_block = then;
        body(self)?;
        self.f.stmt(format!("br label %{cont}"));
        self.f.start_block(&cont);
        self.current_block = cont;
        Ok(())
    }

    /// i1: this thread holds the primary copy of register `reg`.
    fn primary_copy(&mut self, layout: &LinearLayout, reg: usize) -> String {
        if layout.is_replica(reg, 0, 0) {
            return "false".into();
        }
        self.thread_is_primary(layout)
    }

    pub fn lower_debug(&mut self, op: &'k Op) -> Result<()> {
        match &op.kind {
            OpKind::Print { prefix, values } => {
                if values.is_empty() {
                    let layout = self.scalar_layout()?;
                    let primary = self.primary_copy(&layout, 0);
                    let text = format!("{}\n", escape_percent(prefix));
                    return self.guarded(&primary, |l| {
                        l.vprintf(&text, &[]);
                        Ok(())
                    });
                }
                for v in values {
                    let t: Tensor = self.tensor(*v)?;
                    let elem = self.ty(*v).elem();
                    for (r, reg) in t.regs.iter().enumerate() {
                        let primary = self.primary_copy(&t.layout, r);
                        let prefix = escape_percent(prefix);
                        self.guarded(&primary, |l| {
                            let (position, mut args) = l.position_args(&t.layout, r);
                            let (conv, ty, arg) = l.printf_arg(elem, reg)?;
                            args.push((ty, arg));
                            let args: Vec<(&str, String)> = args.into_iter().collect();
                            l.vprintf(&format!("{position} {prefix}{conv}\n"), &args);
                            Ok(())
                        })?;
                    }
                }
                Ok(())
            }
            OpKind::Assert { cond, message } => {
                let t: Tensor = self.tensor(*cond)?;
                let site = format!(
                    "{}:{}: device_assert failed: {}",
                    self.kernel.source_file,
                    op.loc.line,
                    escape_percent(message)
                );
                for (r, reg) in t.regs.iter().enumerate() {
                    let primary = self.primary_copy(&t.layout, r);
                    let failed = self.f.inst(format!("xor i1 {reg}, true"));
                    let report = self.f.inst(format!("and i1 {primary}, {failed}"));
                    self.guarded(&report, |l| {
                        let (position, args) = l.position_args(&t.layout, r);
                        l.vprintf(&format!("{site} at {position}\n"), &args);
                        l.f.declare("declare void @llvm.trap()");
                        l.f.stmt("call void @llvm.trap()");
                        Ok(())
                    })?;
                }
                Ok(())
            }
            _ => Err(malformed("not a print or assert")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_escape_quotes_and_controls() {
        assert_eq!(llvm_c_string("a\"b\n"), ("a\\22b\\0A\\00".to_string(), 5));
        assert_eq!(escape_percent("50%"), "50%%");
    }
}
