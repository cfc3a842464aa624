//! Flags a kernel waits on that nothing in it sets (TLE's signals, issue
//! 53): a `signal_wait_until` whose flag is derived only from pointer
//! parameters that no store or atomic of the kernel writes through, on any
//! rank or program. Then only another kernel or the host can end the wait,
//! which a kernel rarely means: a warning (the interpreter reports the
//! deadlock at run time). The skeleton the rest of the checker runs moves
//! no data, so this is a static look at where pointers come from:
//! `remote(x, r)` is derived from `x`'s table of peers, which counts as
//! `x`; a pointer that travels through a loop or branch is not followed,
//! and then nothing is reported.

use std::collections::{HashMap, HashSet};

use crate::ir::{Block, Kernel, OpKind, ParamKind, Prim};

use super::{Finding, Rule};

/// Where a value's address may come from: pointer parameters by name
/// (`x.peers` as `x`), or somewhere this look does not follow.
#[derive(Clone, Default)]
struct Roots {
    params: HashSet<String>,
    unknown: bool,
}

impl Roots {
    fn join(&mut self, other: &Roots) {
        self.params.extend(other.params.iter().cloned());
        self.unknown |= other.unknown;
    }
}

/// Every wait on a flag no op of `kernel` can set.
pub(crate) fn check(kernel: &Kernel) -> Vec<Finding> {
    let mut roots: HashMap<_, Roots> = HashMap::new();
    for param in &kernel.params {
        let mut r = Roots::default();
        if matches!(param.kind, ParamKind::Ptr(_)) {
            let name = param.name.strip_suffix(".peers").unwrap_or(&param.name);
            r.params.insert(name.to_string());
        }
        roots.insert(param.value, r);
    }
    let mut walk = Walk {
        roots,
        waits: Vec::new(),
        written: Roots::default(),
    };
    walk.block(&kernel.body);
    if walk.written.unknown {
        return Vec::new();
    }
    walk.waits
        .into_iter()
        .filter(|(r, _)| !r.unknown && !r.params.is_empty())
        .filter(|(r, _)| r.params.is_disjoint(&walk.written.params))
        .map(|(r, at)| {
            let mut names: Vec<&String> = r.params.iter().collect();
            names.sort();
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            Finding {
                rule: Rule::FlagNeverSet,
                at,
                message: format!(
                    "this waits on a flag in {}, which no store or atomic of this kernel writes on \
                     any rank or program: only another kernel or the host can end the wait",
                    names.join(" and ")
                ),
                hint: "set the flag in this kernel (`signal_set`, `signal_add`, or an atomic \
                       with `sem = \"release\"`) where its data is ready; if another kernel \
                       sets it, opt this kernel out with `check_protocol = false`"
                    .to_string(),
            }
        })
        .collect()
}

struct Walk {
    roots: HashMap<crate::ir::ValueId, Roots>,
    /// Each wait's flag's roots and where the wait is.
    waits: Vec<(Roots, crate::ir::SrcLoc)>,
    /// The roots of every address a store or atomic writes through.
    written: Roots,
}

impl Walk {
    fn of(&self, v: crate::ir::ValueId) -> Roots {
        self.roots.get(&v).cloned().unwrap_or(Roots {
            params: HashSet::new(),
            unknown: true,
        })
    }

    fn block(&mut self, block: &Block) {
        for arg in &block.args {
            self.roots.entry(*arg).or_insert(Roots {
                params: HashSet::new(),
                unknown: true,
            });
        }
        for op in &block.ops {
            for inner in op.kind.blocks() {
                self.block(inner);
            }
            match &op.kind {
                OpKind::Store { ptr, .. }
                | OpKind::AtomicRmw { ptr, .. }
                | OpKind::AtomicCas { ptr, .. } => {
                    let r = self.of(*ptr);
                    self.written.join(&r);
                }
                OpKind::Prim {
                    prim: Prim::SignalWaitUntil,
                    args,
                    ..
                } => {
                    if let Some(flag) = args.first() {
                        self.waits.push((self.of(*flag), op.loc));
                    }
                }
                _ => {}
            }
            // A control-flow op's results are what its blocks yield: not
            // followed. Any other result comes from its operands.
            let result_roots = if op.kind.blocks().is_empty() {
                let mut r = Roots::default();
                for operand in op.kind.operands() {
                    r.join(&self.of(operand));
                }
                r
            } else {
                Roots {
                    params: HashSet::new(),
                    unknown: true,
                }
            };
            for result in &op.results {
                self.roots.insert(*result, result_roots.clone());
            }
        }
    }
}
