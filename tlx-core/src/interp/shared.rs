//! A program's shared memory as TLX sees it: the buffers `local_alloc`
//! made (each buffer a flat row-major tile of its element type) and the
//! hardware named barriers (`bar.sync id, threads`). mbarriers live beside
//! them in the scheduler's `ProgramShared`.

use std::collections::HashMap;

use crate::ir::ScalarType;

use super::error::{Fault, FaultResult};
use super::value::{Data, Repr};
use super::wait::WaitReason;

/// One `local_alloc`: `buffers` tiles of `shape`.
#[derive(Clone, Debug)]
struct Allocation {
    elem: ScalarType,
    buffers: Vec<Data>,
    /// Whether anything has written each buffer yet.
    written: Vec<bool>,
}

/// The shared buffers of the programs scheduled together.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedMemory {
    allocations: Vec<Allocation>,
}

/// What fresh shared memory holds: NaN or a recognisable pattern, so a read
/// of an element nobody wrote shows in the result.
fn poison(elem: ScalarType, numel: usize) -> Data {
    match Repr::of_scalar(elem) {
        Repr::Float => Data::Float(vec![f32::NAN; numel]),
        Repr::F64 => Data::F64(vec![f64::NAN; numel]),
        Repr::Int => Data::Int(vec![crate::numeric::wrap_int(elem, 0x5a5a_5a5a); numel]),
        Repr::Bool => Data::Bool(vec![true; numel]),
    }
}

/// `data` (elements of `from`) seen as `count` elements of `to`, byte for
/// byte as the GPU stores them (little-endian); `count` may take fewer bytes.
pub(crate) fn reinterpret(
    from: ScalarType,
    data: &Data,
    to: ScalarType,
    count: usize,
) -> FaultResult<Data> {
    let (size_from, size_to) = (from.size_bytes(), to.size_bytes());
    let words: Vec<u64> = match data {
        Data::Float(v) => v
            .iter()
            .map(|&x| crate::numeric::float_to_bits(from, x))
            .collect(),
        Data::F64(v) => v.iter().map(|&x| x.to_bits()).collect(),
        Data::Int(v) => v.iter().map(|&x| x as u64).collect(),
        Data::Bool(v) => v.iter().map(|&x| u64::from(x)).collect(),
        Data::Ptr(_) | Data::Handle(_) => {
            return Err(Fault::malformed("shared memory holding pointers"))
        }
    };
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_le_bytes().into_iter().take(size_from))
        .collect();
    if count * size_to > bytes.len() {
        return Err(Fault::malformed(format!(
            "{count} elements of {to} from {} bytes",
            bytes.len()
        )));
    }
    let bits: Vec<u64> = bytes
        .chunks(size_to)
        .take(count)
        .map(|c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(word)
        })
        .collect();
    Ok(match Repr::of_scalar(to) {
        Repr::Float => Data::Float(
            bits.iter()
                .map(|&b| crate::numeric::float_from_bits(to, b))
                .collect(),
        ),
        Repr::F64 => Data::F64(bits.iter().map(|&b| f64::from_bits(b)).collect()),
        Repr::Int => Data::Int(
            bits.iter()
                .map(|&b| crate::numeric::int_from_bits(to, b))
                .collect(),
        ),
        Repr::Bool => Data::Bool(bits.iter().map(|&b| b != 0).collect()),
    })
}

impl SharedMemory {
    pub(crate) fn clear(&mut self) {
        self.allocations.clear();
    }

    /// A new allocation of `count` buffers of `numel` elements; its number.
    pub(crate) fn alloc(&mut self, elem: ScalarType, numel: usize, count: usize) -> usize {
        self.allocations.push(Allocation {
            elem,
            buffers: vec![poison(elem, numel); count],
            written: vec![false; count],
        });
        self.allocations.len() - 1
    }

    fn allocation(&self, alloc: usize) -> FaultResult<&Allocation> {
        self.allocations
            .get(alloc)
            .ok_or_else(|| Fault::malformed(format!("shared allocation #{alloc} does not exist")))
    }

    /// Buffer `index` of allocation `alloc`.
    pub(crate) fn buffer(&self, alloc: usize, index: usize) -> FaultResult<&Data> {
        self.allocation(alloc)?
            .buffers
            .get(index)
            .ok_or_else(|| Fault::malformed(format!("buffer {index} of allocation #{alloc}")))
    }

    pub(crate) fn store(&mut self, alloc: usize, index: usize, data: Data) -> FaultResult<()> {
        let missing = || Fault::malformed(format!("buffer {index} of allocation #{alloc}"));
        let allocation = self.allocations.get_mut(alloc).ok_or_else(missing)?;
        let slot = allocation.buffers.get_mut(index).ok_or_else(missing)?;
        if slot.len() != data.len() {
            return Err(Fault::malformed("a store of another size into a buffer"));
        }
        *slot = data;
        allocation.written[index] = true;
        Ok(())
    }

    /// Writes `data` into buffer `index` of `alloc`, or into the elements
    /// `window` picks (a slice's).
    pub(crate) fn write_window(
        &mut self,
        alloc: usize,
        index: usize,
        window: Option<&[usize]>,
        data: Data,
    ) -> FaultResult<()> {
        let full = match window {
            Some(w) => {
                let mut full = self.buffer(alloc, index)?.clone();
                full.scatter(w, &data)?;
                full
            }
            None => data,
        };
        self.store(alloc, index, full)
    }

    /// Records that buffer `index` of `alloc` was written, contents aside
    /// (a skeleton run's buffers hold none).
    pub(crate) fn mark_written(&mut self, alloc: usize, index: usize) -> FaultResult<()> {
        let missing = || Fault::malformed(format!("buffer {index} of allocation #{alloc}"));
        let allocation = self.allocations.get_mut(alloc).ok_or_else(missing)?;
        *allocation.written.get_mut(index).ok_or_else(missing)? = true;
        Ok(())
    }

    /// Whether anything has written buffer `index` of `alloc`.
    pub(crate) fn written(&self, alloc: usize, index: usize) -> bool {
        self.allocations
            .get(alloc)
            .and_then(|a| a.written.get(index).copied())
            .unwrap_or(false)
    }

    /// Buffer `index` of `alloc` seen as elements of `elem`: as many as its
    /// bytes hold (its own elements when `elem` is the allocation's).
    pub(crate) fn read_as(
        &self,
        alloc: usize,
        index: usize,
        elem: ScalarType,
    ) -> FaultResult<Data> {
        let own = self.elem(alloc)?;
        let data = self.buffer(alloc, index)?;
        if elem == own {
            return Ok(data.clone());
        }
        let count = data.len() * own.size_bytes() / elem.size_bytes();
        reinterpret(own, data, elem, count)
    }

    /// Writes `data`, elements of `elem`, into buffer `index` of `alloc`
    /// seen as such elements: at the flat indices `window`, or over the
    /// first `data.len()` of them; the buffer's other bytes are kept.
    pub(crate) fn write_as(
        &mut self,
        alloc: usize,
        index: usize,
        window: Option<&[usize]>,
        elem: ScalarType,
        data: Data,
    ) -> FaultResult<()> {
        let own = self.elem(alloc)?;
        let current = self.buffer(alloc, index)?;
        let prefix: Vec<usize>;
        let window = match window {
            Some(w) => w,
            None if elem == own && data.len() == current.len() => {
                return self.store(alloc, index, data)
            }
            None => {
                prefix = (0..data.len()).collect();
                &prefix
            }
        };
        if elem == own {
            return self.write_window(alloc, index, Some(window), data);
        }
        let mut seen = self.read_as(alloc, index, elem)?;
        seen.scatter(window, &data)?;
        let count = seen.len() * elem.size_bytes() / own.size_bytes();
        let back = reinterpret(elem, &seen, own, count)?;
        let covered: Vec<usize> = (0..back.len()).collect();
        self.write_window(alloc, index, Some(&covered), back)
    }

    pub(crate) fn elem(&self, alloc: usize) -> FaultResult<ScalarType> {
        Ok(self.allocation(alloc)?.elem)
    }

    /// A number for buffer `index` of `alloc`, unique in the program, for
    /// race reports.
    pub(crate) fn buffer_id(&self, alloc: usize, index: usize) -> usize {
        let before: usize = self.allocations[..alloc.min(self.allocations.len())]
            .iter()
            .map(|a| a.buffers.len())
            .sum();
        before + index
    }
}

/// The 16 hardware barriers of a program: `bar.sync`/`bar.arrive id, n`
/// complete a generation once `n` threads arrived.
#[derive(Clone, Debug, Default)]
pub(crate) struct NamedBarriers {
    barriers: HashMap<u32, NamedBarrier>,
}

#[derive(Clone, Debug, Default)]
struct NamedBarrier {
    expected: u32,
    arrived: u32,
    generation: u64,
    /// Per waiting task: the generation it arrived in.
    waiting: HashMap<usize, u64>,
    /// The tasks (index and name) that arrived in the open generation.
    arrivers: std::collections::BTreeMap<usize, String>,
    /// The tasks that completed the first generation: one protocol's
    /// tasks, which every later generation must be made of too.
    participants: Option<std::collections::BTreeMap<usize, String>>,
}

/// A named-barrier misuse PTX leaves undefined.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamedBarrierError {
    #[error(
        "named barrier {id} is used with {threads} threads while a generation awaiting \
         {expected} is open; every arrive and wait of one barrier must name the same count"
    )]
    CountMismatch {
        id: u32,
        threads: u32,
        expected: u32,
    },
    #[error("{arrived} threads arrived at named barrier {id}, which awaits {expected}")]
    TooManyThreads {
        id: u32,
        arrived: u32,
        expected: u32,
    },
    #[error(
        "named barrier {id} completed a generation with {} after completing one with {}: two \
         protocols share the id, so one's arrivals can release the other's waiters",
        names(.now), names(.first)
    )]
    MixedProtocols {
        id: u32,
        first: Vec<String>,
        now: Vec<String>,
    },
    #[error("named barrier {id} is not one of the program's 16 (0..16)")]
    BadId { id: i64 },
    #[error(
        "named barrier {id} is the compiler's: it synchronizes the whole program (0) or one \
         task replica (1..={last}) of this kernel's `async_tasks!`"
    )]
    Reserved { id: u32, last: u32 },
}

fn names(tasks: &[String]) -> String {
    let quoted: Vec<String> = tasks.iter().map(|t| format!("`{t}`")).collect();
    match quoted.len() {
        1 => format!("task {} alone", quoted[0]),
        _ => format!("tasks {}", quoted.join(", ")),
    }
}

impl NamedBarriers {
    /// The generation of barrier `id` that `task` is in (or would arrive in).
    pub(crate) fn arrival_generation(&self, task: usize, id: u32) -> (u64, bool) {
        match self.barriers.get(&id) {
            Some(bar) => match bar.waiting.get(&task) {
                Some(&generation) => (generation, true),
                None => (bar.generation, false),
            },
            None => (0, false),
        }
    }

    /// `threads` threads of `task` arrive at barrier `id` of `expected`
    /// threads; with `wait`, they then wait for the generation to complete.
    /// `Ok(Err(reason))` when the task must wait (poll again later).
    pub(crate) fn arrive(
        &mut self,
        (task, name): (usize, &str),
        id: u32,
        threads: u32,
        expected: u32,
        wait: bool,
    ) -> Result<Result<(), WaitReason>, NamedBarrierError> {
        let bar = self.barriers.entry(id).or_default();
        if let Some(&generation) = bar.waiting.get(&task) {
            // Polled again: passes once its generation completed.
            if bar.generation > generation {
                bar.waiting.remove(&task);
                return Ok(Ok(()));
            }
            return Ok(Err(bar.reason(id)));
        }
        if bar.arrived == 0 {
            bar.expected = expected;
        } else if bar.expected != expected {
            return Err(NamedBarrierError::CountMismatch {
                id,
                threads: expected,
                expected: bar.expected,
            });
        }
        bar.arrived += threads;
        bar.arrivers.insert(task, name.to_owned());
        if bar.arrived > bar.expected {
            return Err(NamedBarrierError::TooManyThreads {
                id,
                arrived: bar.arrived,
                expected: bar.expected,
            });
        }
        let generation = bar.generation;
        if bar.arrived == bar.expected {
            bar.generation += 1;
            bar.arrived = 0;
            let done = std::mem::take(&mut bar.arrivers);
            match &bar.participants {
                None => bar.participants = Some(done),
                Some(first) if !first.keys().eq(done.keys()) => {
                    return Err(NamedBarrierError::MixedProtocols {
                        id,
                        first: first.values().cloned().collect(),
                        now: done.into_values().collect(),
                    })
                }
                Some(_) => {}
            }
            return Ok(Ok(()));
        }
        if !wait {
            return Ok(Ok(()));
        }
        bar.waiting.insert(task, generation);
        Ok(Err(bar.reason(id)))
    }
}

impl NamedBarrier {
    fn reason(&self, id: u32) -> WaitReason {
        WaitReason::NamedBarrier {
            barrier: id,
            arrived_threads: self.arrived,
            expected_threads: self.expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_barrier_releases_its_waiters_when_the_count_is_reached() {
        let mut bars = NamedBarriers::default();
        let (a, b) = ((0, "a"), (1, "b"));
        // Task 0 (128 threads) waits; task 1 (128) arrives without waiting.
        assert!(bars.arrive(a, 1, 128, 256, true).unwrap().is_err());
        assert!(bars.arrive(a, 1, 128, 256, true).unwrap().is_err());
        assert_eq!(bars.arrive(b, 1, 128, 256, false), Ok(Ok(())));
        assert_eq!(bars.arrive(a, 1, 128, 256, true), Ok(Ok(())));
        // A second generation with a different count is a misuse.
        assert!(bars.arrive(a, 1, 128, 256, true).unwrap().is_err());
        assert!(matches!(
            bars.arrive(b, 1, 128, 384, false),
            Err(NamedBarrierError::CountMismatch { .. })
        ));
    }

    #[test]
    fn every_generation_of_a_named_barrier_has_the_same_tasks() {
        let mut bars = NamedBarriers::default();
        let (a, b, c) = ((0, "a"), (1, "b"), (2, "c"));
        for _ in 0..2 {
            assert!(bars.arrive(a, 9, 128, 256, true).unwrap().is_err());
            assert_eq!(bars.arrive(b, 9, 128, 256, false), Ok(Ok(())));
            assert_eq!(bars.arrive(a, 9, 128, 256, true), Ok(Ok(())));
        }
        // Task c completes a generation with a: another protocol on id 9.
        assert!(bars.arrive(c, 9, 128, 256, true).unwrap().is_err());
        let mixed = bars.arrive(a, 9, 128, 256, false).expect_err("mixed");
        assert!(matches!(
            mixed,
            NamedBarrierError::MixedProtocols { id: 9, .. }
        ));
        assert!(
            mixed
                .to_string()
                .contains("with tasks `a`, `c` after completing one with tasks `a`, `b`"),
            "{mixed}"
        );
    }

    #[test]
    fn reinterpreting_moves_bytes_little_endian() {
        use crate::ir::ScalarType::{BF16, F32, U8};
        let word = Data::Float(vec![1.0, -2.5]);
        // 1.0f32 is 0x3f80_0000: the even half is 0x0000, the odd one 1.0 in bf16.
        let halves = reinterpret(F32, &word, BF16, 4).expect("fits");
        assert_eq!(halves, Data::Float(vec![0.0, 1.0, 0.0, -2.5]));
        assert_eq!(reinterpret(BF16, &halves, F32, 2).expect("fits"), word);
        assert_eq!(
            reinterpret(F32, &word, U8, 4).expect("fits"),
            Data::Int(vec![0, 0, 0x80, 0x3f])
        );
        assert!(reinterpret(F32, &word, F32, 3).is_err());
        let mut smem = SharedMemory::default();
        let a = smem.alloc(F32, 2, 1);
        assert!(smem.store(a, 0, word.clone()).is_ok());
        // Writing the second bf16 half keeps the other bytes.
        assert!(smem
            .write_as(a, 0, Some(&[1]), BF16, Data::Float(vec![2.0]))
            .is_ok());
        assert_eq!(smem.buffer(a, 0), Ok(&Data::Float(vec![2.0, -2.5])));
    }

    #[test]
    fn fresh_buffers_are_poisoned_and_stores_keep_their_size() {
        let mut smem = SharedMemory::default();
        let a = smem.alloc(ScalarType::F32, 4, 2);
        let b = smem.alloc(ScalarType::I32, 2, 1);
        assert!(matches!(smem.buffer(a, 1), Ok(Data::Float(v)) if v.iter().all(|x| x.is_nan())));
        assert_eq!(smem.buffer_id(b, 0), 2);
        assert!(smem.store(b, 0, Data::Int(vec![1, 2])).is_ok());
        assert!(smem.store(b, 0, Data::Int(vec![1])).is_err());
        assert!(smem.buffer(a, 2).is_err());
    }
}
