//! Rewrites of the emitted PTX that keep `ptxas` away from its own bugs.
//! Each is a textual change to instructions LLVM printed, equivalent in
//! PTX's semantics, with the bug it avoids described where it is applied.

/// The PTX with every workaround applied.
pub fn apply(ptx: String) -> String {
    if !ptx.contains("neg.s32") {
        return ptx;
    }
    negations_outside_min_max(&ptx)
}

/// `neg.s32 d, a` becomes `not.b32 d, a; add.s32 d, d, 1` (the same two's
/// complement negation).
///
/// Why: ptxas (12.9, and the CUDA 13.0 JIT of driver 580) folds 32-bit
/// negations into the three-input integer min/max it forms on sm_90
/// (`VIMNMX3`) and drops one of them: for `max(-a, -b, -c, -d)` it negates
/// `a`, `c` and `d` and takes `b` as it is. Found by the random kernels on
/// an H100 (`max(-av, axis = 1)` over four i32s gave `max(-a, b, -c, -d)`);
/// with the negation spelled as `not` and `add`, ptxas emits
/// `LOP3` + `VIADDMNMX` and every operand is negated.
fn negations_outside_min_max(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    for line in ptx.split_inclusive('\n') {
        match negation(line) {
            Some((indent, dst, src)) => {
                out.push_str(&format!("{indent}not.b32 \t{dst}, {src};\n"));
                out.push_str(&format!("{indent}add.s32 \t{dst}, {dst}, 1;\n"));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The indentation, destination and source of a `neg.s32 d, a;` line.
fn negation(line: &str) -> Option<(&str, &str, &str)> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let operands = body.strip_prefix("neg.s32")?.trim().strip_suffix(';')?;
    let (dst, src) = operands.split_once(',')?;
    Some((indent, dst.trim(), src.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negation_becomes_not_and_add_and_nothing_else_changes() {
        let ptx = "\tmax.s32 \t%r1, %r2, %r3;\n\tneg.s32 \t%r7, %r13;\n\tneg.s64 \t%rd1, %rd2;\n";
        assert_eq!(
            apply(ptx.to_string()),
            "\tmax.s32 \t%r1, %r2, %r3;\n\tnot.b32 \t%r7, %r13;\n\tadd.s32 \t%r7, %r7, 1;\n\tneg.s64 \t%rd1, %rd2;\n"
        );
        let none = "\tadd.s32 \t%r1, %r2, 1;\n".to_string();
        assert_eq!(apply(none.clone()), none);
    }

    #[test]
    fn an_in_place_negation_stays_in_place() {
        assert_eq!(
            apply("\tneg.s32 \t%r5, %r5;\n".to_string()),
            "\tnot.b32 \t%r5, %r5;\n\tadd.s32 \t%r5, %r5, 1;\n"
        );
    }
}
