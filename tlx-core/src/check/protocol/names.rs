//! The user's names for the barriers and buffers a finding mentions. The
//! interpreter numbers them in each program in the order they are
//! allocated (`mbarrier #3`, `shared buffer #1`); a kernel that allocates
//! each once, at its top level, gives those numbers back the `let` names
//! the frontend kept (`empty[1]`, `a_bufs[0]`). Messages then read
//! "`empty[1]` (mbarrier #3)", the number kept for the list of blocked
//! tasks. A kernel that allocates inside a loop, a branch or a task keeps
//! the numbers alone, and so does a cluster kernel: its programs run in one
//! schedule, numbered together in the order they allocate.

use crate::ir::{Block, Kernel, OpKind, Prim, Type};

/// A run of consecutive numbers one allocation took, and its name.
struct Run {
    first: usize,
    count: usize,
    name: Option<String>,
    /// The allocation's value, and the names of allocations made on its
    /// bytes (`local_alloc(.., reuse = it)`).
    value: Option<crate::ir::ValueId>,
    aliases: Vec<String>,
    /// Where the allocation is written.
    at: Option<crate::ir::SrcLoc>,
}

#[derive(Default)]
pub(crate) struct HandleNames {
    barriers: Vec<Run>,
    buffers: Vec<Run>,
}

impl HandleNames {
    pub(crate) fn of(kernel: &Kernel) -> HandleNames {
        let mut names = HandleNames::default();
        let nested = kernel
            .body
            .ops
            .iter()
            .any(|op| op.kind.blocks().into_iter().any(allocates));
        if nested || kernel.options.cluster != [1, 1, 1] {
            return names;
        }
        let (mut barriers, mut buffers) = (0, 0);
        for op in &kernel.body.ops {
            let OpKind::Prim { prim, args, .. } = &op.kind else {
                continue;
            };
            let Some(&result) = op.results.first() else {
                continue;
            };
            let name = kernel.names.get(result).map(str::to_owned);
            match (prim, kernel.type_of(result)) {
                (Prim::AllocBarriers, ty) => {
                    let count = ty.numel();
                    names.barriers.push(Run {
                        first: barriers,
                        count,
                        name,
                        value: Some(result),
                        aliases: Vec::new(),
                        at: Some(op.loc),
                    });
                    barriers += count;
                }
                // `reuse = other` (its one operand) takes no buffers of
                // its own: messages name it beside `other`.
                (Prim::LocalAlloc, _) if !args.is_empty() => {
                    let other = names.buffers.iter_mut().find(|r| r.value == Some(args[0]));
                    if let (Some(other), Some(name)) = (other, name) {
                        other.aliases.push(name);
                    }
                }
                (Prim::LocalAlloc, ty) => {
                    let count = match ty {
                        Type::SharedMemory(m) => m.buffers() as usize,
                        Type::TensorMemory(m) => m.buffers() as usize,
                        _ => continue,
                    };
                    names.buffers.push(Run {
                        first: buffers,
                        count,
                        name,
                        value: Some(result),
                        aliases: Vec::new(),
                        at: Some(op.loc),
                    });
                    buffers += count;
                }
                _ => {}
            }
        }
        names
    }

    /// Where mbarrier number `id` is allocated (its `alloc_barriers`), when
    /// the kernel's numbering is known.
    pub(crate) fn barrier_allocation(&self, id: usize) -> Option<crate::ir::SrcLoc> {
        run_of(&self.barriers, id)?.at
    }

    /// `message` with each `mbarrier #N`, `shared buffer #N` and
    /// `tensor-memory buffer #N` the user named preceded by its name.
    pub(crate) fn rewrite(&self, message: &str) -> String {
        let mut out = String::with_capacity(message.len());
        let mut rest = message;
        while let Some((at, kind, runs)) = self.next_mention(rest) {
            let digits_from = at + kind.len();
            let digits = rest[digits_from..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(rest.len(), |n| digits_from + n);
            out.push_str(&rest[..at]);
            let mention = &rest[at..digits];
            match rest[digits_from..digits]
                .parse::<usize>()
                .ok()
                .and_then(|id| name_of(runs, id))
            {
                Some((name, aliases)) => out.push_str(&format!("`{name}` ({mention}{aliases})")),
                None => out.push_str(mention),
            }
            rest = &rest[digits..];
        }
        out.push_str(rest);
        out
    }

    /// The first mention of a numbered barrier or buffer in `text`: where,
    /// its words up to the number, and the runs that number it.
    fn next_mention(&self, text: &str) -> Option<(usize, &'static str, &[Run])> {
        [
            ("mbarrier #", &self.barriers),
            ("shared buffer #", &self.buffers),
            ("tensor-memory buffer #", &self.buffers),
        ]
        .into_iter()
        .filter_map(|(kind, runs)| text.find(kind).map(|at| (at, kind, runs.as_slice())))
        .min_by_key(|(at, ..)| *at)
    }
}

/// `name[index]` for number `id`, where a named run holds it, with the
/// allocations that reuse its bytes (`` `words[1]` `` by `reuse`).
fn name_of(runs: &[Run], id: usize) -> Option<(String, String)> {
    let run = run_of(runs, id)?;
    let name = run.name.as_ref()?;
    let index = id - run.first;
    let aliases: Vec<String> = run
        .aliases
        .iter()
        .map(|a| format!("`{a}[{index}]`"))
        .collect();
    let label = format!("{name}[{index}]");
    Some(match aliases.len() {
        0 => (label, String::new()),
        _ => (
            label,
            format!("; {} on its bytes, by `reuse = {name}`", aliases.join(", ")),
        ),
    })
}

/// The run that took number `id`.
fn run_of(runs: &[Run], id: usize) -> Option<&Run> {
    runs.iter()
        .find(|r| (r.first..r.first + r.count).contains(&id))
}

/// Whether `block` (or a block inside it) allocates buffers or barriers.
fn allocates(block: &Block) -> bool {
    block.ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::Prim {
                prim: Prim::AllocBarriers | Prim::LocalAlloc,
                ..
            }
        ) || op.kind.blocks().into_iter().any(allocates)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: usize, count: usize, name: Option<&str>) -> Run {
        Run {
            first,
            count,
            name: name.map(str::to_owned),
            value: None,
            aliases: Vec::new(),
            at: None,
        }
    }

    #[test]
    fn numbers_a_message_mentions_get_their_names() {
        let names = HandleNames {
            barriers: vec![run(0, 2, Some("full")), run(2, 2, None)],
            buffers: vec![run(0, 3, Some("bufs"))],
        };
        assert_eq!(
            names.rewrite(
                "a wait on mbarrier #1 and on mbarrier #3; shared buffer #2, tensor-memory \
                 buffer #7."
            ),
            "a wait on `full[1]` (mbarrier #1) and on mbarrier #3; `bufs[2]` (shared buffer \
             #2), tensor-memory buffer #7."
        );
    }
}
