//! The IR walker: lowers every op of a kernel to LLVM IR text, one LLVM
//! scalar per register of the value's layout. Pure ops take the layout of
//! their first tensor operand; an operand held in another layout is
//! recomputed in the wanted one when it derives only from constants, `arange`
//! and scalars, and otherwise moved through shared memory. A kernel whose
//! lowering moved loaded values is lowered again with those loads issued in
//! the layout their use wanted (see `lower_kernel`).

use super::analysis::storage::DESCRIPTOR_BYTES;
use super::analysis::KernelFacts;
use super::emit::{llvm_type, FuncText};
use super::error::{malformed, refused_upstream, Result};
use super::region::Region;
use super::rings::{RingRead, RING_BASE_SYMBOL};
use super::scalar;
use super::CodegenError;
use crate::layout::LinearLayout;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use tlx_core::ir::{
    Arch, Block, Elem, Kernel, Op, OpKind, ParamKind, Prim, ScalarType, Type, ValueId,
};

/// Shared memory one program may use on sm_90 and sm_100 (227 KB).
pub const SHARED_BYTES_LIMIT: u32 = 227 * 1024;

/// The lowered module and what the launch needs to know about it.
pub struct Lowered {
    pub module_text: String,
    pub shared_bytes: u32,
    /// Global scratch each program needs (its device-made descriptors).
    pub global_scratch_bytes: u32,
    /// Where the code took a slower path than the kernel could have had,
    /// and how to get the fast one (see [`crate::CompiledKernel::notes`]).
    pub notes: Vec<String>,
}

/// Where the code being emitted runs: the whole program (CTA), or one
/// replica of a warp-specialized task. Thread and warp indices, barriers,
/// layouts and scratch memory are all relative to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecContext {
    /// 0 for the program; otherwise 1 + the task replica's position in its
    /// region. Keys the per-thread caches and names the hardware barrier
    /// that synchronizes the region (barrier 0 is the program's).
    pub region: u32,
    pub first_warp: u32,
    pub num_warps: u32,
    /// Where this context's scratch starts in the shared buffer: tasks
    /// running at the same time each get scratch of their own.
    pub scratch_base: usize,
    /// The replica's index among its task's copies (an i32 operand: `0`
    /// for the program; a register computed from the warp index in a task,
    /// whose one body serves every replica it can).
    pub replica: String,
    /// The hardware barrier that syncs the context: 0 for the program,
    /// `region + replica` in a task.
    pub barrier_id: BarrierId,
}

/// A context's hardware barrier: known when the code is lowered, or (in a
/// `shared_body` task, whose one body serves every replica) an i32
/// register computed from the warp index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BarrierId {
    Fixed(u32),
    Register(String),
}

impl ExecContext {
    pub fn threads(&self) -> u32 {
        self.num_warps * 32
    }
}

/// A value as held by the threads: its layout and one LLVM operand per register.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub layout: LinearLayout,
    pub regs: Vec<String>,
}

/// Code generation's state while one kernel is emitted: the function being
/// written and the context it is written in, with the rest grouped by what
/// it is about.
pub struct Lowerer<'k> {
    pub kernel: &'k Kernel,
    /// The architecture code is generated for (wgmma needs sm_90a).
    pub arch: Arch,
    pub f: FuncText,
    pub num_warps: u32,
    /// What the kernel is, found before any code is emitted.
    pub(super) facts: KernelFacts,
    /// The values emitted so far, and how to emit them again elsewhere.
    pub(super) held: HeldValues<'k>,
    /// The thread and warp indices, and per-thread addresses made from them.
    pub(super) threads: ThreadIndices,
    /// Shared-memory bytes used so far, and tensor memory.
    pub(super) shared: SharedUse,
    /// Which layout each load is issued in, learnt across lowering rounds.
    pub(super) load_layouts: LoadLayouts<'k>,
    /// Barriers and fences emitted, to drop those another already covers.
    pub(super) sync: SyncState,
    /// The context code is emitted in.
    pub context: ExecContext,
    /// Label of the basic block being filled (phis name their predecessors).
    pub current_block: String,
    /// Loads of the loop body being lowered that read a pipeline ring.
    pub ring_reads: HashMap<ValueId, RingRead>,
    /// Slower paths taken (see [`Lowered::notes`]).
    pub(super) notes: Vec<String>,
}

/// Values as the threads hold them.
pub(super) struct HeldValues<'k> {
    pub(super) values: HashMap<ValueId, Tensor>,
    /// Defining op of each op result, for recomputation in another layout.
    pub(super) defs: HashMap<ValueId, &'k Op>,
    /// Values that derive only from constants, `arange` and scalars.
    pub(super) recomputable: HashSet<ValueId>,
    /// Values held before the task region being lowered, whose threads may
    /// not hold them (see `tasks.rs`).
    pub(super) outside_values: HashSet<ValueId>,
}

/// Thread indices (entry block) and what is computed from them once.
pub(super) struct ThreadIndices {
    /// This thread's index in the program.
    pub(super) tid: String,
    /// `(lane, warp)` of the context being lowered.
    pub(super) lane: String,
    pub(super) warp: String,
    /// The program's own thread and warp indices, from which a task's are
    /// derived.
    pub(super) program_tid: String,
    pub(super) program_warp: String,
    pub(super) thread_offsets: HashMap<(u32, Vec<u32>, Vec<u32>), String>,
    /// Per-thread shared pointers, by context, shared region and `(lanes,
    /// warps)` of the layout.
    pub(super) smem_thread_ptrs: HashMap<(u32, Region, Vec<u32>, Vec<u32>), String>,
    /// With timelines: the warp's track is set up (see `prims/timeline.rs`).
    pub(super) timeline_started: bool,
}

/// Shared memory taken so far (the plan is settled once emission ends).
pub(super) struct SharedUse {
    pub(super) shared_bytes: u32,
    /// Alignment of the dynamic shared buffer: 16 bytes, or a swizzle
    /// period when the tensor cores read swizzled buffers from it.
    pub(super) shared_align: usize,
    /// Bytes of pipeline rings of the loops being lowered (they follow the
    /// scratch), and the most they took at once.
    pub(super) ring_bytes: usize,
    pub(super) ring_peak: usize,
    /// Pipelined loops being lowered (their rings are live), and the most
    /// scratch used while one was: the rings go after that. Scratch used
    /// while none is (`shared_bytes`) may reuse the rings' bytes.
    pub(super) pipelines_open: usize,
    pub(super) scratch_in_pipelines: u32,
    /// The tensor-memory address of the kernel's allocation, once made.
    pub(super) tmem_base: Option<String>,
    /// The global-scratch parameter of device-made descriptors, if any.
    pub(super) descriptor_scratch: Option<String>,
}

/// Loads to issue in a given layout (learnt by an earlier lowering), and
/// what this lowering learns for the next.
pub(super) struct LoadLayouts<'k> {
    pub(super) load_hints: HashMap<ValueId, LinearLayout>,
    /// Loads lowered so far (to find them behind elementwise ops).
    pub(super) loads: HashMap<ValueId, &'k Op>,
    /// Loads whose values were moved through shared memory to the layout given.
    pub(super) wanted_load_layouts: HashMap<ValueId, LinearLayout>,
    /// Moves through shared memory emitted (`convert`).
    pub(super) conversions: usize,
}

/// Synchronization emitted so far.
pub(super) struct SyncState {
    /// Where in the body the last barrier of a context was emitted, and its
    /// statement (see [`Lowerer::drop_barrier_subsumed_by`]).
    pub(super) last_barrier: Option<(usize, String)>,
    /// Where the last `fence.proxy.async` and barrier pair was emitted, and
    /// its text (see [`Lowerer::shared_writes_reach_async_proxy`]).
    pub(super) async_proxy_fence: Option<(usize, String)>,
    /// Values held in registers when a cluster barrier was emitted.
    pub(super) crossed_barrier: HashSet<ValueId>,
    /// `dot` results whose wgmma group a pipelined loop leaves in flight
    /// until the next iteration (or the loop's end) waits for it.
    pub(super) wgmma_in_flight: HashSet<ValueId>,
    /// A task sets its register budget (the kernel must declare one program
    /// per SM for that to take effect).
    pub(super) uses_setmaxnreg: bool,
}

pub fn lower_kernel(kernel: &Kernel, arch: Arch) -> Result<Lowered> {
    let mut best = lower_pass(kernel, arch, HashMap::new())?;
    // A load's layout is that of its address, unless a use elsewhere wanted
    // another: the first lowering learns which, the next issues those loads
    // in it (a bias or a softmax statistic broadcast over a tensor-core
    // accumulator). Kept only when it moves less through shared memory;
    // each round can only add hints, so a few rounds settle it.
    for _ in 0..3 {
        if best.wanted_load_layouts.is_empty() || best.conversions == 0 {
            break;
        }
        let mut hints = best.load_hints.clone();
        let before = hints.len();
        for (load, layout) in &best.wanted_load_layouts {
            hints.entry(*load).or_insert_with(|| layout.clone());
        }
        if hints.len() == before {
            break;
        }
        // A failed retry leaves the first lowering, which stands on its own.
        match lower_pass(kernel, arch, hints) {
            Ok(next) if next.conversions < best.conversions => best = next,
            _ => break,
        }
    }
    // Checked on the lowering kept: the moves a later one saves may be
    // what made the first too large.
    let needed = best.lowered.shared_bytes;
    if needed > SHARED_BYTES_LIMIT {
        return Err(CodegenError::SharedMemoryExceeded {
            needed,
            limit: SHARED_BYTES_LIMIT,
        });
    }
    Ok(best.lowered)
}

/// One lowering of a kernel, and what it learnt for the next.
struct Pass {
    lowered: Lowered,
    load_hints: HashMap<ValueId, LinearLayout>,
    wanted_load_layouts: HashMap<ValueId, LinearLayout>,
    conversions: usize,
}

fn lower_pass(
    kernel: &Kernel,
    arch: Arch,
    load_hints: HashMap<ValueId, LinearLayout>,
) -> Result<Pass> {
    let mut l = Lowerer::new(kernel, arch, load_hints)?;
    let mut params = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        let arg = format!("%arg{i}");
        let (ty, reg) = match p.kind {
            // No `align` attribute: a caller may pass an offset view, and vector
            // accesses check their alignment at run time instead.
            ParamKind::Ptr(_) => ("ptr addrspace(1)".to_string(), arg.clone()),
            ParamKind::Scalar(ScalarType::Bool) => {
                let b = l.f.prologue_inst(format!("trunc i8 {arg} to i1"));
                ("i8".to_string(), b)
            }
            ParamKind::Scalar(s) => (super::emit::scalar_type(s).to_string(), arg.clone()),
            // A `__grid_constant__` by-value parameter: TMA reads the
            // descriptor where the launch put it, through its generic address.
            ParamKind::TensorDesc(_) => {
                let address = l.f.prologue_inst(format!("ptrtoint ptr {arg} to i64"));
                (
                    "ptr byval([128 x i8]) align 64 \"nvvm.grid_constant\"".to_string(),
                    address,
                )
            }
        };
        params.push(format!("{ty} {arg}"));
        let layout = l.scalar_layout()?;
        l.held.values.insert(
            p.value,
            Tensor {
                layout,
                regs: vec![reg],
            },
        );
    }
    if !l.facts.descriptor_slots.is_empty() {
        let arg = "%descriptor_scratch".to_string();
        params.push(format!("ptr addrspace(1) {arg}"));
        l.shared.descriptor_scratch = Some(arg);
    }
    l.current_block = "body".into();
    l.lower_block(&kernel.body)?;
    l.release_tensor_memory();
    l.f.stmt("ret void");

    // The rings follow the scratch used while they are live, 16-byte aligned
    // as `cp.async` wants (a swizzle period when the tensor cores read them);
    // scratch used outside pipelined loops shares their bytes (see
    // `start_pipeline`'s barrier).
    let in_pipelines = l.shared.scratch_in_pipelines as usize;
    let ring_base = in_pipelines.div_ceil(l.shared.shared_align) * l.shared.shared_align;
    let pipelined = if l.shared.ring_peak > 0 {
        ring_base + l.shared.ring_peak
    } else {
        in_pipelines
    };
    l.shared.shared_bytes = l.shared.shared_bytes.max(pipelined as u32);
    let mut text = String::new();
    let _ = writeln!(text, "target triple = \"{}\"\n", super::llvm::TRIPLE);
    let _ = writeln!(
        text,
        "@global_smem = external addrspace(3) global [0 x i8], align {}\n",
        l.shared.shared_align
    );
    let _ = writeln!(
        text,
        "{RING_BASE_SYMBOL} = internal constant i32 {ring_base}, align 4\n"
    );
    for d in &l.f.decls {
        let _ = writeln!(text, "{d}");
    }
    let _ = writeln!(
        text,
        "\ndefine ptx_kernel void @{}({}) #0 {{\nentry:\n{}  br label %body\nbody:\n{}}}\n",
        kernel.name,
        params.join(", "),
        l.f.prologue,
        l.f.finished_body()
    );
    // A cluster shape in the PTX (`.reqnctapercluster`) makes the driver
    // launch the kernel in clusters of that shape.
    let cluster = match kernel.options.cluster {
        [1, 1, 1] => String::new(),
        [x, y, z] => format!(" \"nvvm.cluster_dim\"=\"{x},{y},{z}\""),
    };
    // `.maxnreg`: ptxas keeps to the cap, spilling if it must.
    let maxnreg = match kernel.options.maxnreg {
        Some(n) => format!(" \"nvvm.maxnreg\"=\"{n}\""),
        None => String::new(),
    };
    // `setmaxnreg` only takes effect in a kernel that declares one program
    // per SM (ptxas warns C7508 and ignores it otherwise).
    let min_programs = if l.sync.uses_setmaxnreg {
        " \"nvvm.minctasm\"=\"1\""
    } else {
        ""
    };
    let _ = writeln!(
        text,
        "attributes #0 = {{ \"nvvm.maxntid\"=\"{}\"{cluster}{maxnreg}{min_programs} }}",
        kernel.threads_per_program()
    );
    Ok(Pass {
        lowered: Lowered {
            module_text: text,
            shared_bytes: l.shared.shared_bytes,
            global_scratch_bytes: (l.facts.descriptor_slots.len() * DESCRIPTOR_BYTES) as u32,
            notes: l.notes,
        },
        load_hints: l.load_layouts.load_hints,
        wanted_load_layouts: l.load_layouts.wanted_load_layouts,
        conversions: l.load_layouts.conversions,
    })
}

impl<'k> Lowerer<'k> {
    fn new(
        kernel: &'k Kernel,
        arch: Arch,
        load_hints: HashMap<ValueId, LinearLayout>,
    ) -> Result<Self> {
        let mut f = FuncText::default();
        let tid = f.prologue_call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[]);
        let lane = f.prologue_inst(format!("and i32 {tid}, 31"));
        let warp = f.prologue_inst(format!("lshr i32 {tid}, 5"));
        let facts = KernelFacts::analyze(kernel)?;
        // Buffers and barriers first; scratch and rings follow them.
        let static_end = facts.static_shared.bytes.div_ceil(16) * 16;
        let shared_align = facts.static_shared.align.max(16);
        Ok(Lowerer {
            kernel,
            arch,
            f,
            num_warps: kernel.options.num_warps,
            facts,
            held: HeldValues {
                values: HashMap::new(),
                defs: HashMap::new(),
                recomputable: HashSet::new(),
                outside_values: HashSet::new(),
            },
            threads: ThreadIndices {
                program_tid: tid.clone(),
                program_warp: warp.clone(),
                tid,
                lane,
                warp,
                thread_offsets: HashMap::new(),
                smem_thread_ptrs: HashMap::new(),
                timeline_started: false,
            },
            shared: SharedUse {
                shared_bytes: static_end as u32,
                shared_align,
                ring_bytes: 0,
                ring_peak: 0,
                pipelines_open: 0,
                scratch_in_pipelines: static_end as u32,
                tmem_base: None,
                descriptor_scratch: None,
            },
            load_layouts: LoadLayouts {
                load_hints,
                loads: HashMap::new(),
                wanted_load_layouts: HashMap::new(),
                conversions: 0,
            },
            sync: SyncState {
                last_barrier: None,
                async_proxy_fence: None,
                crossed_barrier: HashSet::new(),
                wgmma_in_flight: HashSet::new(),
                uses_setmaxnreg: false,
            },
            context: ExecContext {
                region: 0,
                first_warp: 0,
                num_warps: kernel.options.num_warps,
                scratch_base: static_end,
                replica: "0".into(),
                barrier_id: BarrierId::Fixed(0),
            },
            current_block: String::new(),
            ring_reads: HashMap::new(),
            notes: Vec::new(),
        })
    }

    /// Whether any op of the kernel reads `v`.
    pub fn is_used(&self, v: ValueId) -> bool {
        self.facts.used.contains(&v)
    }

    pub fn ty(&self, v: ValueId) -> &'k Type {
        self.kernel.type_of(v)
    }

    pub fn scalar_layout(&self) -> Result<LinearLayout> {
        Ok(LinearLayout::scalar(self.num_warps)?)
    }

    /// The default layout of a shape: 16-byte vectors of the widest element accessed at it.
    pub fn default_layout(&self, shape: &[usize]) -> Result<LinearLayout> {
        let vector = self.facts.vector_of_shape.get(shape).copied().unwrap_or(4);
        Ok(LinearLayout::blocked(shape, vector, self.num_warps)?)
    }

    /// `v` as held by the threads. A deferred layout-only op is lowered here, at the
    /// use, in its natural layout (not cached: the use may sit in a nested block).
    pub fn tensor(&mut self, v: ValueId) -> Result<Tensor> {
        if self.crosses_into_task(v)? {
            if let Some(op) = self.held.defs.get(&v).copied() {
                return self.lower_pure(op, None);
            }
        }
        if let Some(t) = self.held.values.get(&v) {
            return Ok(t.clone());
        }
        match self.held.defs.get(&v).copied() {
            Some(op) => self.lower_pure(op, None),
            None => Err(malformed(format!("{v} used before its definition"))),
        }
    }

    /// The pure op defining `v`, if any (loads, reductions and loops are not recorded).
    pub fn def_of(&self, v: ValueId) -> Option<&'k Op> {
        self.held.defs.get(&v).copied()
    }

    /// True if `v` can be produced in any layout without moving data between threads.
    pub fn is_recomputable(&self, v: ValueId) -> bool {
        self.ty(v).is_scalar() || self.held.recomputable.contains(&v)
    }

    /// The layout `v` is held in (or, if deferred, would be), without emitting code.
    pub fn layout_of(&self, v: ValueId) -> Result<LinearLayout> {
        if let Some(t) = self.held.values.get(&v) {
            return Ok(t.layout.clone());
        }
        let op = self
            .held
            .defs
            .get(&v)
            .copied()
            .ok_or_else(|| malformed(format!("{v} used before its definition")))?;
        self.natural_layout(op, self.ty(v))
    }

    /// The flat-index part owned by this thread (lane and warp bits), for `layout`.
    pub fn thread_offset(&mut self, layout: &LinearLayout) -> String {
        self.thread_xor(&layout.lanes, &layout.warps)
    }

    /// The XOR of the bases (flat indices or byte offsets) that this
    /// thread's lane and warp bits select, i32, in the entry block.
    pub fn thread_xor(&mut self, lanes: &[u32], warps: &[u32]) -> String {
        let key = (self.context.region, lanes.to_vec(), warps.to_vec());
        if let Some(v) = self.threads.thread_offsets.get(&key) {
            return v.clone();
        }
        let mut acc = "0".to_string();
        for (id, bases) in [
            (self.threads.lane.clone(), lanes),
            (self.threads.warp.clone(), warps),
        ] {
            for (bit, &basis) in bases.iter().enumerate() {
                if basis == 0 {
                    continue;
                }
                let set = self
                    .f
                    .prologue_inst(format!("and i32 {id}, {}", 1u32 << bit));
                let on = self.f.prologue_inst(format!("icmp ne i32 {set}, 0"));
                let part = self
                    .f
                    .prologue_inst(format!("select i1 {on}, i32 {basis}, i32 0"));
                acc = self.f.prologue_inst(format!("xor i32 {acc}, {part}"));
            }
        }
        self.threads.thread_offsets.insert(key, acc.clone());
        acc
    }

    /// Flat index of register `reg` of this thread in `layout`.
    pub fn flat_index(&mut self, layout: &LinearLayout, reg: usize) -> String {
        let thread = self.thread_offset(layout);
        let own = layout.reg_offset(reg);
        if own == 0 {
            thread
        } else {
            self.f.inst(format!("xor i32 {thread}, {own}"))
        }
    }

    /// `v`'s registers in `layout`: as held, recomputed, or moved through shared memory.
    pub fn get(&mut self, v: ValueId, layout: &LinearLayout) -> Result<Vec<String>> {
        if self.ty(v).is_scalar() {
            let t = self.tensor(v)?;
            return Ok(vec![t.regs[0].clone(); layout.num_regs()]);
        }
        if self.crosses_into_task(v)? {
            if let Some(op) = self.held.defs.get(&v).copied() {
                return Ok(self.lower_pure(op, Some(layout))?.regs);
            }
        }
        if let Some(t) = self.held.values.get(&v) {
            if t.layout == *layout {
                return Ok(t.regs.clone());
            }
            if let Some(regs) = in_thread_regroup(t, layout) {
                return Ok(regs);
            }
        }
        if let Some(op) = self.held.defs.get(&v).copied() {
            // Deferred layout-only ops and values derived from constants are redone in
            // the wanted layout: moving a (smaller or equal) operand is never dearer.
            if !self.held.values.contains_key(&v) || self.held.recomputable.contains(&v) {
                return Ok(self.lower_pure(op, Some(layout))?.regs);
            }
        }
        self.note_wanted_layout(v, layout);
        self.load_layouts.conversions += 1;
        let t = self.tensor(v)?;
        let elem = self.ty(v).elem();
        self.convert(&t, elem, layout)
    }

    /// Records a load being lowered, for [`Lowerer::note_wanted_layout`].
    pub(super) fn note_load(&mut self, result: ValueId, op: &'k Op) {
        self.load_layouts.loads.insert(result, op);
    }

    /// The layout an earlier lowering learnt this load is wanted in.
    pub(super) fn load_hint(&self, result: ValueId) -> Option<LinearLayout> {
        self.load_layouts.load_hints.get(&result).cloned()
    }

    /// `v`, held in another layout, is about to be moved to `layout`. The
    /// loads it is an elementwise function of (through any number of
    /// elementwise ops, beside values cheap to redo or held otherwise) whose
    /// address, mask and default can be computed in any layout are noted:
    /// the next lowering issues them in `layout` (each element once per
    /// thread), and what they feed then moves less or not at all.
    fn note_wanted_layout(&mut self, v: ValueId, layout: &LinearLayout) {
        let mut pending = vec![v];
        // A value two operands share is walked once (chains of squares
        // would otherwise double the walk at every step).
        let mut seen = HashSet::new();
        while let Some(v) = pending.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(load) = self.load_layouts.loads.get(&v) {
                // A shared buffer reads the same in any layout; a global
                // load needs its addresses (and mask and default) there.
                let addressable = matches!(
                    load.kind,
                    OpKind::Prim {
                        prim: Prim::LocalLoad,
                        ..
                    }
                ) || load
                    .kind
                    .operands()
                    .iter()
                    .all(|o| self.is_recomputable(*o));
                if addressable && self.ty(v).shape() == layout.shape.as_slice() {
                    self.load_layouts
                        .wanted_load_layouts
                        .entry(v)
                        .or_insert_with(|| layout.without_register_replicas());
                }
                continue;
            }
            let Some(op) = self.held.defs.get(&v) else {
                continue;
            };
            let elementwise = matches!(
                op.kind,
                OpKind::Binary { .. }
                    | OpKind::Unary { .. }
                    | OpKind::Compare { .. }
                    | OpKind::Select { .. }
                    | OpKind::Fma { .. }
                    | OpKind::Cast(_)
                    | OpKind::Bitcast(_)
            );
            if elementwise {
                pending.extend(
                    op.kind
                        .operands()
                        .into_iter()
                        .filter(|o| !self.is_recomputable(*o)),
                );
            }
        }
    }

    pub fn lower_block(&mut self, block: &'k Block) -> Result<Option<&'k Op>> {
        for op in &block.ops {
            if op.kind.is_terminator() {
                return Ok(Some(op));
            }
            self.lower_op(op)?;
        }
        Ok(None)
    }

    fn define(&mut self, v: ValueId, t: Tensor) {
        self.held.values.insert(v, t);
    }

    pub(super) fn define_value(&mut self, v: ValueId, t: Tensor) {
        self.define(v, t);
    }

    fn lower_op(&mut self, op: &'k Op) -> Result<()> {
        match &op.kind {
            OpKind::Load { .. } => self.lower_load(op),
            OpKind::Store { .. } => self.lower_store(op),
            OpKind::Reduce { .. } => self.lower_reduce(op),
            OpKind::For { .. } => self.lower_for(op),
            OpKind::While { .. } => self.lower_while(op),
            OpKind::If { .. } => self.lower_if(op),
            OpKind::Yield(_) | OpKind::Condition(_) => Err(malformed("terminator inside a block")),
            OpKind::Scan { .. } => self.lower_scan(op),
            OpKind::Dot { .. } => self.lower_dot(op),
            OpKind::AtomicRmw { .. } | OpKind::AtomicCas { .. } => self.lower_atomic(op),
            OpKind::ExtractTile { .. } | OpKind::InsertTile { .. } => self.lower_tile(op),
            OpKind::Join { .. } | OpKind::Split(_) => self.lower_join_split(op),
            OpKind::Print { .. } | OpKind::Assert { .. } => self.lower_debug(op),
            OpKind::AsyncTasks { .. } => self.lower_async_tasks(op),
            OpKind::Prim { .. } => self.lower_prim(op),
            OpKind::AsyncTaskReplicaId => {
                let result = *op
                    .results
                    .first()
                    .ok_or_else(|| malformed("op without result"))?;
                let layout = self.scalar_layout()?;
                let regs = vec![self.context.replica.clone()];
                self.define(result, Tensor { layout, regs });
                Ok(())
            }
            OpKind::ClusterBarrier if self.context.region != 0 => Err(refused_upstream(
                "cluster_barrier inside an async task (every thread of the program must arrive)",
            )),
            OpKind::ClusterBarrier => {
                // Arrive has release and wait acquire semantics by default;
                // `.aligned`: every thread of each warp executes it together,
                // as every thread runs the block language's straight-line code.
                for step in ["arrive", "wait"] {
                    let asm = format!("barrier.cluster.{step}.aligned;");
                    self.f.asm("void", &asm, "~{memory}", &[]);
                }
                self.note_barrier();
                Ok(())
            }
            OpKind::Constant(_)
            | OpKind::ProgramId { .. }
            | OpKind::NumPrograms { .. }
            | OpKind::MultipleOf { .. }
            | OpKind::ClusterCtaRank
            | OpKind::Arange { .. }
            | OpKind::Splat(_)
            | OpKind::Broadcast(_)
            | OpKind::ExpandDims { .. }
            | OpKind::Reshape(_)
            | OpKind::Trans { .. }
            | OpKind::Cast(_)
            | OpKind::Bitcast(_)
            | OpKind::Binary { .. }
            | OpKind::Unary { .. }
            | OpKind::Compare { .. }
            | OpKind::Select { .. }
            | OpKind::Fma { .. }
            | OpKind::AddPtr { .. } => {
                let layout_only = matches!(
                    op.kind,
                    OpKind::Broadcast(_)
                        | OpKind::ExpandDims { .. }
                        | OpKind::Reshape(_)
                        | OpKind::Trans { .. }
                );
                let t = if layout_only {
                    None
                } else {
                    Some(self.lower_pure(op, None)?)
                };
                let result = *op
                    .results
                    .first()
                    .ok_or_else(|| malformed("op without result"))?;
                let operands = op.kind.operands();
                let leaf = matches!(
                    op.kind,
                    OpKind::Constant(_) | OpKind::Arange { .. } | OpKind::Splat(_)
                );
                let derived = operands
                    .iter()
                    .all(|o| self.held.recomputable.contains(o) || self.ty(*o).is_scalar());
                if leaf || derived {
                    self.held.recomputable.insert(result);
                }
                self.held.defs.insert(result, op);
                if let Some(t) = t {
                    self.define(result, t);
                }
                Ok(())
            }
        }
    }

    /// Lower a side-effect-free op, in `forced` layout if given.
    fn lower_pure(&mut self, op: &'k Op, forced: Option<&LinearLayout>) -> Result<Tensor> {
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("op without result"))?;
        let rty = self.ty(result);
        let layout = match forced {
            Some(l) => l.clone(),
            None if rty.is_scalar() => self.scalar_layout()?,
            None => self.natural_layout(op, rty)?,
        };
        let n = layout.num_regs();
        let elem = rty.elem();
        let regs = match &op.kind {
            OpKind::Constant(lit) => {
                let c = scalar::literal(&mut self.f, elem, *lit)?;
                vec![c; n]
            }
            OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
                let dim = ["x", "y", "z"]
                    .get(*axis as usize)
                    .ok_or_else(|| malformed(format!("grid axis {axis}")))?;
                let reg = if matches!(op.kind, OpKind::ProgramId { .. }) {
                    "ctaid"
                } else {
                    "nctaid"
                };
                let r = self
                    .f
                    .call("i32", &format!("llvm.nvvm.read.ptx.sreg.{reg}.{dim}"), &[]);
                vec![r; n]
            }
            // A promise for the axis analysis; the value itself is unchanged.
            OpKind::MultipleOf { value, .. } => self.get(*value, &layout)?,
            OpKind::ClusterCtaRank => vec![self.cluster_rank(); n],
            OpKind::Arange { start, .. } => (0..n)
                .map(|r| {
                    let flat = self.flat_index(&layout, r);
                    self.f.inst(format!("add i32 {flat}, {}", *start as i32))
                })
                .collect(),
            OpKind::Splat(v) => {
                let s = self.tensor(*v)?.regs[0].clone();
                vec![s; n]
            }
            OpKind::Broadcast(v) => {
                let src = layout.broadcast_source(self.ty(*v).shape())?;
                self.get(*v, &src)?
            }
            OpKind::ExpandDims { value: v, .. } | OpKind::Reshape(v) => {
                let src = layout.reshaped(self.ty(*v).shape());
                self.get(*v, &src)?
            }
            OpKind::Trans { value, perm } => {
                let mut inverse = vec![0; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    *inverse
                        .get_mut(p)
                        .ok_or_else(|| malformed("bad permutation"))? = i;
                }
                let src = layout.transposed(&inverse)?;
                self.get(*value, &src)?
            }
            kind => {
                let operands = kind.operands();
                let mut regs: Vec<Vec<String>> = operands
                    .iter()
                    .map(|o| self.get(*o, &layout))
                    .collect::<Result<_>>()?;
                if self.widens_across_barrier(kind, elem) {
                    regs[0] = self.opaque_copy(&regs[0], self.ty(operands[0]).elem());
                }
                let types: Vec<Elem> = operands.iter().map(|o| self.ty(*o).elem()).collect();
                (0..n)
                    .map(|r| {
                        let args: Vec<&str> = regs.iter().map(|v| v[r].as_str()).collect();
                        self.elementwise(kind, &types, elem, &args)
                    })
                    .collect::<Result<_>>()?
            }
        };
        Ok(Tensor { layout, regs })
    }

    /// The layout a pure op's result takes when nobody asks for one: that of its
    /// first tensor operand held in registers for real (loaded, reduced, a dot
    /// result...), so values that are cheap to redo adapt to it, not the reverse.
    fn natural_layout(&self, op: &Op, rty: &Type) -> Result<LinearLayout> {
        let tensors: Vec<ValueId> = op
            .kind
            .operands()
            .into_iter()
            .filter(|o| !self.ty(*o).is_scalar())
            .collect();
        let anchored = tensors
            .iter()
            .copied()
            .find(|o| self.held.values.contains_key(o) && !self.held.recomputable.contains(o));
        match (&op.kind, anchored.or(tensors.first().copied())) {
            (OpKind::Broadcast(_), _) | (_, None) => self.default_layout(rty.shape()),
            (OpKind::ExpandDims { .. } | OpKind::Reshape(_), Some(v)) => {
                Ok(self.layout_of(v)?.reshaped(rty.shape()))
            }
            (OpKind::Trans { perm, .. }, Some(v)) => Ok(self.layout_of(v)?.transposed(perm)?),
            (_, Some(v)) => self.layout_of(v),
        }
    }

    fn elementwise(
        &mut self,
        kind: &OpKind,
        types: &[Elem],
        out: Elem,
        args: &[&str],
    ) -> Result<String> {
        let scalar_of = |e: Elem| {
            e.scalar()
                .ok_or_else(|| refused_upstream(format!("{kind:?} on pointers")))
        };
        let f = &mut self.f;
        match kind {
            OpKind::Binary { op, .. } => scalar::binary(f, *op, scalar_of(out)?, args[0], args[1]),
            OpKind::Unary { op, .. } => scalar::unary(f, *op, scalar_of(out)?, args[0]),
            OpKind::Compare { pred, .. } => scalar::compare(f, *pred, types[0], args[0], args[1]),
            OpKind::Select { .. } => {
                let ty = llvm_type(out);
                Ok(f.inst(format!(
                    "select i1 {}, {ty} {}, {ty} {}",
                    args[0], args[1], args[2]
                )))
            }
            OpKind::Fma { .. } => scalar::fma(f, scalar_of(out)?, args[0], args[1], args[2]),
            OpKind::Cast(_) if types[0].pointee().is_some() => Ok(f.inst(format!(
                "ptrtoint {} {} to i64",
                llvm_type(types[0]),
                args[0]
            ))),
            OpKind::Cast(_) if out.pointee().is_some() => {
                Ok(f.inst(format!("inttoptr i64 {} to {}", args[0], llvm_type(out))))
            }
            OpKind::Cast(_) => scalar::cast(f, scalar_of(types[0])?, scalar_of(out)?, args[0]),
            OpKind::Bitcast(_) => {
                scalar::bitcast(f, scalar_of(types[0])?, scalar_of(out)?, args[0])
            }
            OpKind::AddPtr { .. } => {
                let pointee = out
                    .pointee()
                    .ok_or_else(|| malformed("add_ptr result is not a pointer"))?;
                let off_ty = types[1]
                    .scalar()
                    .ok_or_else(|| malformed("pointer offset"))?;
                let wide = match off_ty {
                    ScalarType::I64 => args[1].to_string(),
                    s if s.is_signed_int() => {
                        f.inst(format!("sext {} {} to i64", llvm_type(types[1]), args[1]))
                    }
                    _ => f.inst(format!("zext {} {} to i64", llvm_type(types[1]), args[1])),
                };
                let elem_ty = match pointee {
                    ScalarType::Bool => "i8",
                    s => super::emit::scalar_type(s),
                };
                Ok(f.inst(format!(
                    "getelementptr {elem_ty}, {} {}, i64 {wide}",
                    llvm_type(out),
                    args[0]
                )))
            }
            other => Err(malformed(format!("{other:?} is not elementwise"))),
        }
    }

    /// i1: this thread holds the primary copies of its elements in `layout` (it is the
    /// lowest of the lanes and warps that replicate them).
    pub fn thread_is_primary(&mut self, layout: &LinearLayout) -> String {
        // Replicated in every thread (a scalar): the context's first thread,
        // from the thread index TMA issues use too, so that no lane or warp
        // index stays live for it (across a hot loop, say).
        if layout.lanes.iter().chain(&layout.warps).all(|&b| b == 0) {
            return self.f.inst(format!("icmp eq i32 {}, 0", self.thread_id()));
        }
        let mut acc = "true".to_string();
        for (id, bases) in [
            (self.threads.lane.clone(), layout.lanes.clone()),
            (self.threads.warp.clone(), layout.warps.clone()),
        ] {
            for (bit, &b) in bases.iter().enumerate() {
                if b == 0 {
                    let set = self.f.inst(format!("and i32 {id}, {}", 1u32 << bit));
                    let clear = self.f.inst(format!("icmp eq i32 {set}, 0"));
                    acc = self.f.inst(format!("and i1 {acc}, {clear}"));
                }
            }
        }
        acc
    }

    /// This program's rank in its cluster (`%cluster_ctarank`).
    pub(super) fn cluster_rank(&mut self) -> String {
        self.f
            .call("i32", "llvm.nvvm.read.ptx.sreg.cluster.ctarank", &[])
    }

    /// This thread's index in its context (the program or a task replica).
    pub fn thread_id(&self) -> String {
        self.threads.tid.clone()
    }

    pub(super) fn set_thread_id(&mut self, tid: String) {
        self.threads.tid = tid;
    }

    /// Scratch bytes used so far by every context, in or out of pipelines.
    pub(super) fn scratch_used(&self) -> u32 {
        self.shared
            .shared_bytes
            .max(self.shared.scratch_in_pipelines)
    }

    /// Fails when `v`, held before the current task region, may not be in
    /// this task's registers (see `tasks.rs`); `Ok(true)` when it must be
    /// recomputed here rather than taken as held.
    fn crosses_into_task(&self, v: ValueId) -> Result<bool> {
        let ty = self.ty(v);
        // Scalars, buffers, barriers and descriptors are uniform: every
        // thread computed them before the tasks split.
        if !self.held.outside_values.contains(&v) || ty.is_scalar() || !ty.is_tensor() {
            return Ok(false);
        }
        if self.held.recomputable.contains(&v) {
            return Ok(true);
        }
        Err(CodegenError::Misuse {
            message: format!(
                "a tensor computed before `async_tasks!` ({v} in the IR) is used inside a task that runs on other warps, whose threads do not hold it"
            ),
            hint: "compute it inside the task (values built from constants, `arange` and scalars may cross)".into(),
            at: None,
        })
    }

    /// Runs `f` with the pure ops `ops` lowered as if `bind` held (an
    /// induction variable at a later iteration, say), then forgets what they
    /// defined: their real lowering comes later, at their place.
    pub fn with_detached<T>(
        &mut self,
        ops: &[&'k Op],
        bind: (ValueId, Tensor),
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let (var, value) = bind;
        let saved = self.held.values.insert(var, value);
        let lowered = ops.iter().try_for_each(|op| self.lower_op(op));
        let out = lowered.and_then(|()| f(self));
        for r in ops.iter().flat_map(|op| &op.results) {
            self.held.values.remove(r);
            self.held.defs.remove(r);
            self.held.recomputable.remove(r);
        }
        match saved {
            Some(v) => self.held.values.insert(var, v),
            None => self.held.values.remove(&var),
        };
        out
    }

    /// Emit a barrier over the threads of the current context, the whole
    /// program or one task replica (also a compiler memory fence). It is
    /// `barrier.sync`, not `bar.sync` (the `.aligned` form): after a branch
    /// that only some lanes take (an elected thread's arrive or copy) a
    /// warp is not guaranteed to have reconverged, and an aligned barrier
    /// there is undefined (compute-sanitizer's synccheck flagged the
    /// attention backward); measured no slower on the H100. In kernels with
    /// tensor memory it carries the `tcgen05` fences, without which it does
    /// not order tensor-memory accesses.
    pub fn barrier(&mut self) {
        let start = self.f.body.len();
        self.tcgen05_fence_before();
        let threads = self.context.threads();
        match &self.context.barrier_id {
            BarrierId::Fixed(0) => {
                self.f.asm("void", "barrier.sync 0;", "~{memory}", &[]);
            }
            BarrierId::Fixed(id) => {
                let text = format!("barrier.sync {id}, {threads};");
                self.f.asm("void", &text, "~{memory}", &[]);
            }
            BarrierId::Register(id) => {
                let text = format!("barrier.sync $0, {threads};");
                self.f.asm("void", &text, "r,~{memory}", &[("i32", id)]);
            }
        }
        self.tcgen05_fence_after();
        self.sync.last_barrier = Some((start, self.f.body[start..].to_string()));
    }

    /// Makes every thread's generic shared-memory writes so far visible to
    /// the async proxy (TMA, wgmma) for any thread of the context: each
    /// thread's `fence.proxy.async`, then the context's barrier. Skipped
    /// when the last such pair stands with nothing but pure instructions
    /// after it (a `local_store` right before a TMA store emits one, which
    /// the store would repeat).
    pub(super) fn shared_writes_reach_async_proxy(&mut self) {
        if self.stands(&self.sync.async_proxy_fence) {
            return;
        }
        let start = self.f.body.len();
        self.fence_async_shared();
        self.barrier();
        self.sync.async_proxy_fence = Some((start, self.f.body[start..].to_string()));
    }

    /// Whether the context's last barrier stands with nothing but pure
    /// instructions after it, so that another one now would order nothing
    /// more.
    pub(super) fn barrier_stands(&self) -> bool {
        self.stands(&self.sync.last_barrier)
    }

    /// Whether `emitted` (where in the body some synchronization began, and
    /// its text) is still there with nothing but pure instructions after it.
    fn stands(&self, emitted: &Option<(usize, String)>) -> bool {
        emitted
            .as_ref()
            .is_some_and(|(start, text)| self.f.only_pure_after(*start, text))
    }

    /// Before a named barrier that every thread of the current task waits
    /// on, over at least its threads: the task's own barrier emitted just
    /// before it (a `local_store`'s trailing one, say) is redundant, since
    /// the named one orders the same threads' memory and more. Removed when
    /// nothing but pure instructions came after it.
    pub(super) fn drop_barrier_subsumed_by(&mut self, threads: u32) {
        if self.context.region == 0 || threads < self.context.threads() {
            return;
        }
        if let Some((start, text)) = self.sync.last_barrier.take() {
            self.f.remove_if_last(start, &text);
        }
    }

    /// Byte `offset` of the current context's scratch, as an offset in the
    /// shared buffer.
    pub fn scratch(&self, offset: usize) -> usize {
        self.context.scratch_base + offset
    }

    /// Pointer to byte `offset` (an i32 operand) of the dynamic shared array.
    pub fn smem_ptr(&mut self, offset: &str) -> String {
        self.f.inst(format!(
            "getelementptr i8, ptr addrspace(3) @global_smem, i32 {offset}"
        ))
    }

    /// Shared pointer `p` moved `offset` bytes on (`p` itself for 0).
    pub fn smem_ptr_plus(&mut self, p: &str, offset: usize) -> String {
        if offset == 0 {
            return p.to_string();
        }
        self.f.inst(format!(
            "getelementptr i8, ptr addrspace(3) {p}, i32 {offset}"
        ))
    }

    /// Notes that the current context's scratch is used up to `bytes`,
    /// while or outside a pipelined loop.
    pub fn use_shared(&mut self, bytes: usize) {
        let bytes = self.scratch(bytes);
        let used = if self.shared.pipelines_open > 0 {
            &mut self.shared.scratch_in_pipelines
        } else {
            &mut self.shared.shared_bytes
        };
        *used = (*used).max(bytes as u32);
    }
}

/// `t`'s registers rearranged into `dst` without leaving the thread: possible when
/// lanes and warps own the same elements in both layouts and every register
/// `dst` needs is one this thread holds.
fn in_thread_regroup(t: &Tensor, dst: &LinearLayout) -> Option<Vec<String>> {
    if t.layout.lanes != dst.lanes || t.layout.warps != dst.warps || t.layout.shape != dst.shape {
        return None;
    }
    let mut by_offset = HashMap::new();
    for r in (0..t.layout.num_regs()).rev() {
        by_offset.insert(t.layout.reg_offset(r), r);
    }
    (0..dst.num_regs())
        .map(|r| {
            by_offset
                .get(&dst.reg_offset(r))
                .map(|&i| t.regs[i].clone())
        })
        .collect()
}
