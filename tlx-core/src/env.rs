//! The `TLX_*` environment variables the project reads, at build time (the
//! proc macro) or at run time (the runtime, the interpreter, the examples,
//! benches and scripts), so that a misspelt one is reported instead of
//! silently ignored.

/// Every `TLX_*` variable something in the project reads, with what it does.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "TLX_ANCHORS",
        "scripts: the reference numbers file of the benches",
    ),
    ("TLX_ARCH", "the architecture a launch compiles for"),
    ("TLX_AUTOTUNE", "autotuning on or off"),
    (
        "TLX_AUTOTUNE_FORCE",
        "re-run autotuning even when a choice is cached",
    ),
    ("TLX_BENCH_FLUSH", "benches: flush the L2 between runs"),
    ("TLX_BENCH_ONLY", "benches: the shapes to run"),
    ("TLX_BLESS", "tests: rewrite expected outputs"),
    ("TLX_BLESS_PTX", "tests: rewrite the golden PTX manifest"),
    ("TLX_CACHE", "`0` turns the proc macro's PTX cache off"),
    ("TLX_CACHE_DIR", "the proc macro's PTX cache folder"),
    (
        "TLX_CHECK_BOUNDS",
        "build time: bounds checks in every kernel",
    ),
    (
        "TLX_CHECK_UNINIT",
        "interpreter: reads of unwritten memory are errors",
    ),
    (
        "TLX_COST_FILTER",
        "tests: the kernels the build-cost measurement runs",
    ),
    ("TLX_CUBIN_DIR", "scripts: where SASS dumps go"),
    ("TLX_DUMP", "build time: write IR, LLVM IR, PTX or notes"),
    ("TLX_DUMP_DIR", "the folder `TLX_DUMP` writes to"),
    ("TLX_EXAMPLE_SIZE", "examples: the problem size"),
    ("TLX_FA3", "scripts: the FlashAttention-3 reference"),
    ("TLX_FA_EXP", "benches: an attention experiment"),
    ("TLX_FA_NC", "benches: an attention experiment"),
    ("TLX_FA_STAGES", "benches: an attention experiment"),
    ("TLX_INTERPRET", "run kernels on the CPU interpreter"),
    (
        "TLX_MBAR_TIMEOUT_NS",
        "build time: a timeout on every mbarrier wait",
    ),
    ("TLX_NVDISASM", "scripts: the nvdisasm to use"),
    ("TLX_PTXAS", "tests: the ptxas that assembles every kernel"),
    ("TLX_REPORTS_CHILD", "tests: marks a child process"),
    ("TLX_SANITIZE", "scripts: run under compute-sanitizer"),
    ("TLX_SCHEDULE", "interpreter: the task interleaving"),
    ("TLX_SEED", "examples: the random inputs' seed"),
    ("TLX_TEST_DUMP", "tests: dump a test's PTX"),
    (
        "TLX_TIMELINE_ROUNDS",
        "scripts: rounds of the timeline measurement",
    ),
    (
        "TLX_TIMELINE_SHAPE",
        "scripts: the timeline measurement's shape",
    ),
    (
        "TLX_TRACE",
        "build time: kernels record timelines; run time: where they go",
    ),
    ("TLX_TRACE_EVENTS", "timeline words per track"),
    ("TLX_TRACE_LAUNCHES", "launches a timeline records"),
];

/// A `TLX_*` variable that nothing reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub name: String,
    /// The known variable it most likely means, if one is close.
    pub closest: Option<&'static str>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not a variable tlx reads", self.name)?;
        match self.closest {
            Some(known) => write!(f, " (did you mean `{known}`?)"),
            None => write!(
                f,
                " (known: {})",
                KNOWN
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The `TLX_*` names among `names` that are not [`KNOWN`], sorted.
pub fn unknown<I, S>(names: I) -> Vec<Unknown>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out: Vec<Unknown> = names
        .into_iter()
        .filter_map(|name| {
            let name = name.as_ref();
            let known = KNOWN.iter().any(|(k, _)| *k == name);
            (name.starts_with("TLX_") && !known).then(|| Unknown {
                name: name.to_owned(),
                closest: closest(name),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The unknown `TLX_*` variables of this process's environment.
pub fn unknown_in_environment() -> Vec<Unknown> {
    unknown(std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()))
}

/// The known name within a third of `name`'s length in edits, or one that
/// starts with `name` (a cut-off suffix: `TLX_MBAR_TIMEOUT`).
fn closest(name: &str) -> Option<&'static str> {
    let prefixed = KNOWN
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| k.starts_with(name))
        .min_by_key(|k| k.len());
    prefixed.or_else(|| {
        KNOWN
            .iter()
            .map(|(k, _)| (edits(name, k), *k))
            .filter(|&(d, _)| d <= name.len() / 3)
            .min()
            .map(|(_, k)| k)
    })
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_variable_is_unknown_and_names_the_one_meant() {
        let found = unknown([
            "TLX_MBAR_TIMEOUT",
            "TLX_DUMP",
            "PATH",
            "TLX_SHEDULE",
            "TLX_ZZZ",
        ]);
        let names: Vec<_> = found.iter().map(|u| (u.name.as_str(), u.closest)).collect();
        assert_eq!(
            names,
            [
                ("TLX_MBAR_TIMEOUT", Some("TLX_MBAR_TIMEOUT_NS")),
                ("TLX_SHEDULE", Some("TLX_SCHEDULE")),
                ("TLX_ZZZ", None),
            ]
        );
        assert!(found[2].to_string().contains("known: TLX_ANCHORS"));
    }

    #[test]
    fn known_names_are_sorted_and_unique() {
        assert!(KNOWN.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
