//! The program and its grid: the SM's cycle counter, programmatic
//! dependent launch (`griddepcontrol`), and waits on flags that other
//! programs (or other GPUs) set.

use super::rules::no_results;
use super::{Choice, Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface};
use crate::ir::def::{Effects, MemorySpace, MemorySpaces};
use crate::ir::types::{ScalarType, Type};

/// `clock64()`: this SM's 64-bit cycle counter (i64), for timing a stretch
/// of a kernel. Volatile: two reads are two instructions, in program order.
/// The interpreter's cycles are the ops the task has run.
pub(super) const CLOCK64: PrimDef = PrimDef {
    name: "clock64",
    signature: PrimSignature::new(&[], &[], 1),
    surface: Surface::generic(&[], |_| Ok(vec![Type::scalar(ScalarType::I64)])),
    effects: Effects {
        volatile: true,
        ..Effects::PURE
    },
    rule: |t| match t.results {
        [r] if **r == Type::scalar(ScalarType::I64) => Ok(()),
        _ => Err("`clock64` gives one i64 scalar".into()),
    },
    protocol: Protocol::KEPT,
    lowering: Lowering::Asm {
        asm: "mov.u64 $0, %clock64;",
        result: "i64",
        constraints: "=l,~{memory}",
    },
    interp: Interp::Custom,
};

/// `gdc_wait()` (Triton's name; PTX `griddepcontrol.wait`): in a kernel
/// launched as a programmatic dependent (`launch_pdl = true`), waits until
/// the grids it depends on (the kernel before it on the stream) have
/// completed and their memory is visible; otherwise returns at once, as it
/// always does on the interpreter, which runs one grid at a time. Global
/// accesses after the wait may read what the grids before wrote: none moves
/// above it.
pub(super) const GDC_WAIT: PrimDef = PrimDef {
    name: "gdc_wait",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        writes: MemorySpaces::only(MemorySpace::Global),
        volatile: true,
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    // Between grids, not between this grid's threads.
    protocol: Protocol::Dropped,
    lowering: Lowering::Asm {
        asm: "griddepcontrol.wait;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Nothing,
};

/// `gdc_launch_dependents()` (`griddepcontrol.launch_dependents`): once
/// every program of this grid has run it (or exited), the next kernel on
/// the stream, if launched with `launch_pdl`, may start. Where it runs
/// decides when the next kernel starts: kept in place.
pub(super) const GDC_LAUNCH_DEPENDENTS: PrimDef = PrimDef {
    name: "gdc_launch_dependents",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        volatile: true,
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    // Between grids, not between this grid's threads.
    protocol: Protocol::Dropped,
    lowering: Lowering::Asm {
        asm: "griddepcontrol.launch_dependents;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Nothing,
};

/// `signal_wait_until(flag, cmp, value)`: waits until the `i32` at `flag`
/// (a scalar pointer) compares to `value` as `cmp` says (`"eq"`, `"ne"`,
/// `"ge"`, `"gt"`, `"le"`, `"lt"`, signed), reading it with system-scope
/// acquire (`ld.acquire.sys`): what the program that set the flag wrote
/// before its release (`atomic_add(flag, 1, sem = "release", scope =
/// "sys")`, or `atomic_xchg`) is visible after the wait, on this GPU or,
/// through peer memory, another. Every thread of the program (or task)
/// polls, backing off with `nanosleep`. Global accesses after it stay
/// after it. The interpreter runs every program of a kernel that waits on
/// flags in one schedule, so a wait blocks until another program sets the
/// flag, and a flag no program sets is a deadlock naming the wait.
/// The checker's skeleton moves no data, so it cannot follow a flag: the
/// wait is dropped from it (the interpreter checks it at run time), and
/// a static look warns about a flag nothing in the kernel sets (TLX-W002).
pub(super) const SIGNAL_WAIT_UNTIL: PrimDef = PrimDef {
    name: "signal_wait_until",
    signature: PrimSignature::new(&["flag", "value"], &["cmp"], 0).with_choices(&[Choice {
        immediate: "cmp",
        options: &[
            ("eq", "eq"),
            ("ne", "ne"),
            ("ge", "ge"),
            ("gt", "gt"),
            ("le", "le"),
            ("lt", "lt"),
        ],
    }]),
    surface: Surface::generic(&["flag", "cmp", "value"], no_results),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        writes: MemorySpaces::only(MemorySpace::Global),
        volatile: true,
        ..Effects::PURE
    },
    rule: signal_wait_until,
    protocol: Protocol::Dropped,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// How `signal_wait_until` compares the flag with its value (signed), in
/// the code order of its `cmp` choice, whose words name them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FlagComparison {
    Eq,
    Ne,
    Ge,
    Gt,
    Le,
    Lt,
}

impl FlagComparison {
    const ALL: [FlagComparison; 6] = [
        FlagComparison::Eq,
        FlagComparison::Ne,
        FlagComparison::Ge,
        FlagComparison::Gt,
        FlagComparison::Le,
        FlagComparison::Lt,
    ];

    pub fn from_code(code: i64) -> Option<FlagComparison> {
        Self::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// The word of the kernel language (`"ge"`).
    pub fn word(self) -> &'static str {
        let code = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        SIGNAL_WAIT_UNTIL.signature.choices[0].options[code].0
    }

    /// Whether `flag` compares to `value` so.
    pub fn holds(self, flag: i64, value: i64) -> bool {
        match self {
            FlagComparison::Eq => flag == value,
            FlagComparison::Ne => flag != value,
            FlagComparison::Ge => flag >= value,
            FlagComparison::Gt => flag > value,
            FlagComparison::Le => flag <= value,
            FlagComparison::Lt => flag < value,
        }
    }
}

fn signal_wait_until(t: &super::Typing) -> Result<(), String> {
    let flag = t.operand("flag")?;
    if *flag != Type::ptr(ScalarType::I32) {
        return Err(format!(
            "`signal_wait_until` waits on one i32 flag: give a scalar pointer to it \
             (`flags + i` of a `Ptr<i32>`), not {flag}"
        ));
    }
    super::rules::i32_scalar(t.operand("value")?, "the value it waits for")
}

#[cfg(test)]
mod tests {
    use super::{FlagComparison, SIGNAL_WAIT_UNTIL};

    /// The comparisons and the `cmp` choice's words are in one order.
    #[test]
    fn each_comparison_has_its_word() {
        let words: Vec<&str> = SIGNAL_WAIT_UNTIL.signature.choices[0]
            .options
            .iter()
            .map(|(w, _)| *w)
            .collect();
        let named: Vec<&str> = (0..)
            .map_while(FlagComparison::from_code)
            .map(FlagComparison::word)
            .collect();
        assert_eq!(named, words);
        assert!(FlagComparison::Ge.holds(3, 3) && !FlagComparison::Gt.holds(3, 3));
        assert!(FlagComparison::Lt.holds(-1, 0) && FlagComparison::Ne.holds(-1, 0));
    }
}
