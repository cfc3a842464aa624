//! One synchronization bug put into a random TLX kernel (a `cp.async` or
//! TMA ring, a warp-specialized pair, a pipe, a cluster ring): a wait left out, a phase
//! not flipped, an arrival left out or sent to the wrong program, an
//! arrive count too low, a `cp.async` group waited for too loosely, a
//! pipe stage never released. The protocol checker must refuse every one;
//! one it accepts is a blind spot, and the test then says whether the
//! interpreter's runs (the default schedule and random ones) show it.

use super::family::Case;

/// A bug: its name and the source edit that makes it.
pub struct Bug {
    pub name: &'static str,
    /// The text replaced (it must occur in the source) and its replacement.
    pub from: &'static str,
    pub to: &'static str,
}

const fn bug(name: &'static str, from: &'static str, to: &'static str) -> Bug {
    Bug { name, from, to }
}

const RING: &[Bug] = &[
    bug(
        "the ring waits for one group too few",
        "async_load_wait_group(S - 2);",
        "async_load_wait_group(S - 1);",
    ),
    bug(
        "the ring never waits for its copies",
        "        async_load_wait_group(S - 2);\n",
        "",
    ),
];

const TMA_RING: &[Bug] = &[
    bug(
        "the TMA ring announces half the bytes",
        "barrier_expect_bytes(local_view(bars, t), BR * BC * 4);",
        "barrier_expect_bytes(local_view(bars, t), BR * BC * 2);",
    ),
    bug(
        "the TMA ring's phase is flipped",
        "barrier_wait(local_view(bars, s), (i / S) % 2);",
        "barrier_wait(local_view(bars, s), (i / S) % 2 ^ 1);",
    ),
    bug(
        "the TMA ring never waits for its copies",
        "        barrier_wait(local_view(bars, s), (i / S) % 2);\n",
        "",
    ),
];

const NAMED: &[Bug] = &[
    bug(
        "the producer does not wait for the consumer to finish reading",
        "                if t > 0 {\n                    named_barrier_wait(9, 256);\n                }\n",
        "",
    ),
    bug(
        "the consumer does not wait for the producer's tile",
        "                named_barrier_wait(8, 256);\n",
        "",
    ),
    bug(
        "the named barrier counts one task's threads",
        "named_barrier_arrive(8, 256);",
        "named_barrier_arrive(8, 128);",
    ),
];

const HAND_WRITTEN: &[Bug] = &[
    bug(
        "the producer does not wait for a free stage",
        "                barrier_wait(local_view(empty, s), (t / S) % 2 ^ 1);\n",
        "",
    ),
    bug(
        "the consumers do not wait for a full stage",
        "                barrier_wait(local_view(full, s), (t / S) % 2);\n",
        "",
    ),
    bug(
        "the producer's phase is not flipped",
        "(t / S) % 2 ^ 1",
        "(t / S) % 2",
    ),
    bug(
        "the consumers' phase is flipped",
        "barrier_wait(local_view(full, s), (t / S) % 2);",
        "barrier_wait(local_view(full, s), (t / S) % 2 ^ 1);",
    ),
    bug(
        "the consumers never release a stage",
        "                barrier_arrive(local_view(empty, s));\n",
        "",
    ),
    bug(
        "the producer never announces a stage",
        "                barrier_arrive(local_view(full, s));\n",
        "",
    ),
];

const REPLICATED: &[Bug] = &[bug(
    "the empty barriers count one consumer of two",
    "alloc_barriers(S, R)",
    "alloc_barriers(S, 1)",
)];

const PIPE: &[Bug] = &[
    bug(
        "a reader never releases its stage",
        "                reader.release(t);\n",
        "",
    ),
    bug(
        "the writer never commits",
        "                writer.commit(t);\n",
        "",
    ),
];

const CLUSTER: &[Bug] = &[
    bug(
        "the arrival goes to the sender's own barrier",
        "barrier_arrive(local_view(full, slot), 1, remote_cta_rank = next);",
        "barrier_arrive(local_view(full, slot), 1, remote_cta_rank = rank);",
    ),
    bug(
        "the sender does not wait for a free slot",
        "            barrier_wait(local_view(empty, slot), phase ^ 1);\n",
        "",
    ),
    bug(
        "the release goes to the wrong program",
        "barrier_arrive(local_view(empty, slot), 1, remote_cta_rank = prev);",
        "barrier_arrive(local_view(empty, slot), 1, remote_cta_rank = next);",
    ),
    bug(
        "the receiver does not wait for its inbox",
        "        barrier_wait(local_view(full, slot), phase);\n",
        "",
    ),
];

/// The bugs that apply to `case` and change what it does: each needs the
/// loop to come round (enough tiles or rounds) or the counts it edits.
pub fn applicable(case: &Case) -> Vec<&'static Bug> {
    let mut out: Vec<&Bug> = Vec::new();
    match case {
        Case::Ring { .. } => out.extend(RING),
        Case::TmaRing { .. } => out.extend(TMA_RING),
        Case::Named { tiles, .. } => out.extend(NAMED.iter().filter(|b| {
            // Waiting for the consumer matters from the second tile on.
            *tiles > 1 || !b.name.contains("finish reading")
        })),
        Case::WarpSpecialized {
            tiles,
            stages,
            replicas,
            pipe,
            ..
        } => {
            let wraps = *tiles > *stages;
            if *pipe {
                if wraps {
                    out.extend(PIPE);
                } else {
                    out.push(&PIPE[1]);
                }
            } else {
                // Every stage is used once before the ring wraps: the
                // waits on `empty` and the flip only matter after.
                let needs_wrap = |b: &&Bug| {
                    ["free stage", "not flipped", "never release"]
                        .iter()
                        .any(|w| b.name.contains(w))
                };
                out.extend(HAND_WRITTEN.iter().filter(|b| wraps || !needs_wrap(b)));
                if *replicas > 1 && wraps {
                    out.extend(REPLICATED);
                }
            }
        }
        Case::Cluster {
            rounds, cluster, ..
        } => out.extend(CLUSTER.iter().filter(|b| {
            let wraps = *rounds > 2;
            // In a pair the previous program is the next one, and the
            // wait for a free slot is implied: a program enters round
            // `i` only after its peer's round `i - 1` store, which the
            // peer made after reading round `i - 2`'s slot.
            let pair_only = b.name.contains("wrong program") || b.name.contains("free slot");
            !pair_only || (wraps && *cluster > 2)
        })),
        _ => {}
    }
    out
}

/// `source` with `bug` in it.
pub fn inject(source: &str, bug: &Bug) -> Option<String> {
    source
        .contains(bug.from)
        .then(|| source.replacen(bug.from, bug.to, 1))
}
