//! Blackwell's tensor memory and fifth-generation tensor cores in PTX for
//! sm_100a (`tcgen05`): the kernel's tensor-memory buffers are one
//! allocation, made by warp 0 when the first of them is reached (the
//! address goes through a shared-memory slot to every thread) and freed by
//! the same warp at the kernel's end; an `async_dot` into a tensor-memory
//! accumulator is issued by one thread (one `tcgen05.mma` per K step of 16)
//! with a `tcgen05.commit` per completion barrier; `local_load` and
//! `local_store` move whole rows between TMEM lanes and threads (`32x32b`:
//! warp `w` reaches lanes `32 * (w % 4)` up).
//!
//! Thread synchronization and tensor-memory accesses are ordered by
//! `tcgen05.fence::before_thread_sync` before every barrier arrival and
//! `::after_thread_sync` after every wait (thread barriers included), in
//! kernels that use tensor memory (the PTX model's rule: a barrier alone
//! does not order them).
//!
//! Nothing here has run on a Blackwell GPU (there is none to borrow):
//! `ptxas` assembles it and the interpreter runs the kernels' semantics.

use super::analysis::mma::{OperandOrders, WgmmaPlan};
use super::analysis::storage::buffer_layout;
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::CodegenError;
use crate::layout::tensor_memory_rows;
use tlx_core::ir::{
    shared_swizzle, Arch, Op, ScalarType, ScaledForm, SharedMemoryType, TensorMemoryType, Type,
    ValueId,
};

/// Registers one `tcgen05.ld`/`tcgen05.st` moves per thread at most here
/// (PTX allows 128; 32 keeps each inline asm small).
const COLUMNS_PER_MOVE: usize = 32;

/// The version field (bits 46-48 = 0b001) that sets a Blackwell shared
/// matrix descriptor apart from Hopper's, whose other fields it keeps.
const DESCRIPTOR_VERSION: u64 = 1 << 46;

/// Columns `tcgen05.alloc` takes for `needed`: a power of two, 32 at least.
pub(super) fn allocation_columns(needed: usize) -> usize {
    needed.next_power_of_two().max(32)
}

/// The instruction descriptor of a `kind::f16` MMA with an f32
/// accumulator; over a pair of programs the MMA is `2M x 2N` (the plan is
/// one program's share: its rows of A, its half of B).
fn instruction_descriptor(plan: &WgmmaPlan, pair: bool) -> u32 {
    let input = u32::from(plan.input == ScalarType::BF16);
    let programs = if pair { 2 } else { 1 };
    (1 << 4)
        | input << 7
        | input << 10
        | u32::from(plan.a_m_major) << 15
        | u32::from(!plan.b_k_major) << 16
        | ((programs * plan.n as u32) >> 3) << 17
        | ((programs * plan.m as u32) >> 4) << 24
}

/// The instruction descriptor of a block-scaled MMA (f32 accumulator)
/// whose step reads scale byte `scale_byte` of its columns (the scale
/// factor ids): the operands' formats (mxf8f6f4: e4m3 0, e5m2 1; the fp4
/// kinds: e2m1 1), the scales' type (ue8m0 1, ue4m3 0), N / 8 and M / 128.
fn scaled_instruction_descriptor(
    plan: &WgmmaPlan,
    form: ScaledForm,
    (a, b): (ScalarType, ScalarType),
    scale_byte: u32,
) -> u32 {
    let format = |t: ScalarType| match form {
        ScaledForm::Mxfp8 => u32::from(t == ScalarType::F8E5M2),
        ScaledForm::Mxfp4 | ScaledForm::Nvfp4 => 1,
    };
    let ue8m0 = u32::from(form != ScaledForm::Nvfp4);
    scale_byte << 4
        | format(a) << 7
        | format(b) << 10
        | u32::from(plan.a_m_major) << 15
        | u32::from(!plan.b_k_major) << 16
        | (plan.n as u32 >> 3) << 17
        | ue8m0 << 23
        | (plan.m as u32 >> 7) << 27
        | scale_byte << 29
}

/// The PTX kind and scale vector of a block-scaled MMA form.
fn scaled_kind(form: ScaledForm) -> &'static str {
    match form {
        ScaledForm::Mxfp8 => "kind::mxf8f6f4.block_scale.scale_vec::1X",
        ScaledForm::Mxfp4 => "kind::mxf4.block_scale.scale_vec::2X",
        ScaledForm::Nvfp4 => "kind::mxf4nvf4.block_scale.scale_vec::4X",
    }
}

/// The shared-memory descriptor fields of a 512-byte block-scale atom
/// (`tcgen05.cp` 32x128b): unswizzled rows of 16 bytes, 8-row groups 128
/// bytes apart.
const SCALE_ATOM_DESCRIPTOR: u64 = (16 >> 4) << 16 | (128 >> 4) << 32 | DESCRIPTOR_VERSION;

/// The `tcgen05.ld`/`st` shape that moves a buffer in its
/// [`tensor_memory_rows`] layout: a lane per row for 128 rows; for 64, half
/// a warp's lanes per row block, the other half-warp reading the same lanes
/// further along.
fn move_shape(m: &TensorMemoryType) -> &'static str {
    match m.shape().first() {
        Some(64) => "16x32bx2",
        _ => "32x32b",
    }
}

/// For 64 rows, the immediate column offset of the second half-warp's
/// words (each thread moves `words` words); nothing for 128.
fn second_half(m: &TensorMemoryType, words: usize) -> String {
    match m.shape().first() {
        Some(64) => format!(", {words}"),
        _ => String::new(),
    }
}

/// The `.cta_group` of the kernel's `tcgen05` instructions./// The `.cta_group` of the kernel's `tcgen05` instructions.
fn cta_group(pair: bool) -> u8 {
    if pair {
        2
    } else {
        1
    }
}

impl<'k> Lowerer<'k> {
    fn require_blackwell(&self, op: &Op, what: &str) -> Result<()> {
        self.require_sm100(
            op,
            what,
            "on Hopper accumulate in registers (`acc = async_dot(a, b, acc)` then `async_dot_wait`)",
        )
    }

    /// An error at `op` unless the kernel is built for Blackwell: `what`
    /// needs it, and `instead` says what Hopper does in its place.
    pub(crate) fn require_sm100(&self, op: &Op, what: &str, instead: &str) -> Result<()> {
        if self.arch == Arch::Sm100a {
            return Ok(());
        }
        Err(CodegenError::Misuse {
            message: format!("{what} needs Blackwell (sm_100a), not {}", self.arch.name()),
            hint: format!(
                "build the kernel for Blackwell: `#[tlx::kernel(arch = \"sm_100a\", ...)]`; {instead}"
            ),
            at: Some(op.loc),
        })
    }

    /// `local_alloc(..., storage = "tmem")`: the buffers' address (lane 0,
    /// their first column). The first one allocates every tensor-memory
    /// buffer of the kernel.
    pub(super) fn tmem_alloc(&mut self, op: &Op, result: ValueId) -> Result<()> {
        self.require_blackwell(op, "tensor memory")?;
        let column = self
            .facts
            .static_shared
            .tmem_columns
            .get(&result)
            .copied()
            .ok_or_else(|| malformed("a tensor-memory allocation the planner did not place"))?;
        let base = match self.shared.tmem_base.clone() {
            Some(base) => base,
            None => self.allocate_tensor_memory()?,
        };
        let at = self.f.inst(format!("add i32 {base}, {column}"));
        self.define_register(result, at)
    }

    /// Warp 0 allocates the kernel's columns into the shared slot; every
    /// thread then reads the address.
    fn allocate_tensor_memory(&mut self) -> Result<String> {
        let (slot, columns) = self
            .facts
            .static_shared
            .tmem_slot
            .ok_or_else(|| malformed("tensor memory without an address slot"))?;
        let slot_address = self.shared_address(&slot.to_string());
        let first_warp = self
            .f
            .inst(format!("icmp eq i32 {}, 0", self.threads.program_warp));
        let n = allocation_columns(columns);
        // Over pairs, warp 0 of both programs allocates, together.
        let group = cta_group(self.facts.pair_mma);
        self.when(&first_warp, |l| {
            let asm = format!(
                "tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [$0], {n}; \
                 tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned;"
            );
            l.f.asm("void", &asm, "r,~{memory}", &[("i32", &slot_address)]);
        });
        self.barrier();
        let p = self.smem_ptr(&slot.to_string());
        let base = self
            .f
            .inst(format!("load volatile i32, ptr addrspace(3) {p}, align 4"));
        self.shared.tmem_base = Some(base.clone());
        Ok(base)
    }

    /// At the kernel's end: warp 0 frees the tensor memory once every
    /// thread is done with it.
    pub(super) fn release_tensor_memory(&mut self) {
        let (Some(base), Some((_, columns))) = (
            self.shared.tmem_base.clone(),
            self.facts.static_shared.tmem_slot,
        ) else {
            return;
        };
        self.barrier();
        let group = cta_group(self.facts.pair_mma);
        if self.facts.pair_mma {
            // The pair's even program writes the odd one's accumulators: both
            // are done with them before either frees its columns.
            self.f.asm(
                "void",
                "barrier.cluster.arrive.aligned; barrier.cluster.wait.aligned;",
                "~{memory}",
                &[],
            );
        }
        let first_warp = self
            .f
            .inst(format!("icmp eq i32 {}, 0", self.threads.program_warp));
        let n = allocation_columns(columns);
        self.when(&first_warp, |l| {
            let asm = format!("tcgen05.dealloc.cta_group::{group}.sync.aligned.b32 $0, {n};");
            l.f.asm("void", &asm, "r,~{memory}", &[("i32", &base)]);
        });
    }

    /// `tcgen05.fence::before_thread_sync`, in kernels with tensor memory:
    /// its accesses before a barrier arrival are ordered before it.
    pub(super) fn tcgen05_fence_before(&mut self) {
        if self.facts.static_shared.tmem_slot.is_some() {
            self.f.asm(
                "void",
                "tcgen05.fence::before_thread_sync;",
                "~{memory}",
                &[],
            );
        }
    }

    /// `tcgen05.fence::after_thread_sync`: accesses after a wait are
    /// ordered after it.
    pub(super) fn tcgen05_fence_after(&mut self) {
        if self.facts.static_shared.tmem_slot.is_some() {
            self.f.asm(
                "void",
                "tcgen05.fence::after_thread_sync;",
                "~{memory}",
                &[],
            );
        }
    }

    /// A view of buffer `index` of a tensor-memory allocation.
    pub(super) fn tmem_view(&mut self, m: &TensorMemoryType, base: &str, index: &str) -> String {
        let delta = self.f.inst(format!("mul i32 {index}, {}", m.columns()));
        self.f.inst(format!("add i32 {base}, {delta}"))
    }

    /// This warp's address in a `[128, N]` buffer at `base` under
    /// [`tensor_memory_rows`]: its lane quarter and its warp group's first
    /// column.
    fn tmem_warp_address(&mut self, m: &TensorMemoryType, base: &str) -> String {
        let warps = self.context.num_warps;
        let per_group = m.columns() / (warps as usize / 4);
        let warp = self.threads.warp.clone();
        let quarter = self.f.inst(format!("and i32 {warp}, 3"));
        let lane = self.f.inst(format!("shl i32 {quarter}, 21"));
        let group = self.f.inst(format!("lshr i32 {warp}, 2"));
        let column = self.f.inst(format!("mul i32 {group}, {per_group}"));
        let at = self.f.inst(format!("add i32 {base}, {lane}"));
        self.f.inst(format!("add i32 {at}, {column}"))
    }

    /// [`tensor_memory_rows`] over the context's warps, which must be
    /// whole warp groups.
    fn tmem_layout(&self, op: &Op, m: &TensorMemoryType) -> Result<crate::layout::LinearLayout> {
        let warps = self.context.num_warps;
        if self.context.first_warp % 4 != 0 || warps % 4 != 0 {
            return Err(CodegenError::Misuse {
                message: format!(
                    "tensor memory is read and written by whole warp groups, and this task runs \
                     on {warps} warps from warp {}",
                    self.context.first_warp
                ),
                hint: "access tensor memory from a task of 4 or 8 warps (give 1-warp tasks after \
                       it, or make it the default task, so that its warps start at a multiple \
                       of 4)"
                    .into(),
                at: Some(op.loc),
            });
        }
        let (rows, cols) = (m.shape()[0], m.shape()[1]);
        tensor_memory_rows(rows, cols, self.context.num_warps).map_err(|e| CodegenError::Misuse {
            message: format!(
                "no tensor-memory access of {}: {e}",
                Type::TensorMemory(m.clone())
            ),
            hint: "tensor memory is read and written by whole warp groups (4 or 8 warps)".into(),
            at: Some(op.loc),
        })
    }

    /// `local_load` of a tensor-memory buffer.
    pub(super) fn tmem_load(&mut self, op: &Op, buffer: ValueId, result: ValueId) -> Result<()> {
        self.require_blackwell(op, "tensor memory")?;
        let Type::TensorMemory(m) = self.ty(buffer).clone() else {
            return Err(malformed("`local_load` of tensor memory"));
        };
        let layout = self.tmem_layout(op, &m)?;
        let base = self.register(buffer)?;
        let at = self.tmem_warp_address(&m, &base);
        // 32-bit words per thread: two 16-bit values share one.
        let columns = layout.num_regs() * m.elem().size_bytes() / 4;
        let mut words = Vec::with_capacity(columns);
        for chunk in 0..columns.div_ceil(COLUMNS_PER_MOVE) {
            let count = COLUMNS_PER_MOVE.min(columns - chunk * COLUMNS_PER_MOVE);
            let from = self
                .f
                .inst(format!("add i32 {at}, {}", chunk * COLUMNS_PER_MOVE));
            let outs: Vec<String> = (0..count).map(|i| format!("${i}")).collect();
            let asm = format!(
                "tcgen05.ld.sync.aligned.{}.x{count}.b32 {{{}}}, [${count}]{};",
                move_shape(&m),
                outs.join(", "),
                second_half(&m, columns)
            );
            let constraints = format!("{}r,~{{memory}}", "=r,".repeat(count));
            let ret = format!("{{ {} }}", vec!["i32"; count].join(", "));
            let r = self.f.asm(&ret, &asm, &constraints, &[("i32", &from)]);
            words.extend((0..count).map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}"))));
        }
        self.f
            .asm("void", "tcgen05.wait::ld.sync.aligned;", "~{memory}", &[]);
        let regs = match m.elem() {
            ScalarType::F32 => words
                .iter()
                .map(|w| self.f.inst(format!("bitcast i32 {w} to float")))
                .collect(),
            ScalarType::F16 | ScalarType::BF16 => self.unpack_halves(&words, m.elem()),
            _ => words,
        };
        self.define_value(result, Tensor { layout, regs });
        Ok(())
    }

    /// Before a `tcgen05` op one thread issues: the other warps of the
    /// context may have just stored into tensor memory (`local_store` of an
    /// accumulator or of an MMA's A), which only a barrier with the
    /// `tcgen05` fences orders before the issue; a one-warp context's
    /// `tcgen05.wait::st` already covers its lanes.
    fn tensor_memory_writes_reach_issuer(&mut self) {
        if self.context.threads() > 32 && !self.barrier_stands() {
            self.barrier();
        }
    }

    /// 16-bit values from the words of 16-bit tensor memory: column `c`
    /// holds values `2c` (low half) and `2c + 1` (high half) of the row.
    fn unpack_halves(&mut self, words: &[String], elem: ScalarType) -> Vec<String> {
        let ty = crate::emit::llvm_type(elem.into());
        let mut regs = Vec::with_capacity(2 * words.len());
        for w in words {
            let high = self.f.inst(format!("lshr i32 {w}, 16"));
            for half in [w.as_str(), high.as_str()] {
                let bits = self.f.inst(format!("trunc i32 {half} to i16"));
                regs.push(self.f.inst(format!("bitcast i16 {bits} to {ty}")));
            }
        }
        regs
    }

    /// The words of 16-bit tensor memory from a row's values, pairs in
    /// order (see [`Lowerer::unpack_halves`]).
    fn pack_halves(&mut self, regs: &[String], elem: ScalarType) -> Vec<String> {
        let ty = crate::emit::llvm_type(elem.into());
        regs.chunks(2)
            .map(|pair| {
                let mut halves = pair.iter().map(|r| {
                    let bits = self.f.inst(format!("bitcast {ty} {r} to i16"));
                    self.f.inst(format!("zext i16 {bits} to i32"))
                });
                let low = halves.next().unwrap_or_else(|| "0".into());
                let high = halves.next().unwrap_or_else(|| "0".into());
                let high = self.f.inst(format!("shl i32 {high}, 16"));
                self.f.inst(format!("or i32 {low}, {high}"))
            })
            .collect()
    }

    /// `local_store` of a register tensor into a tensor-memory buffer.
    pub(super) fn tmem_store(&mut self, op: &Op, buffer: ValueId, value: ValueId) -> Result<()> {
        self.require_blackwell(op, "tensor memory")?;
        let Type::TensorMemory(m) = self.ty(buffer).clone() else {
            return Err(malformed("`local_store` into tensor memory"));
        };
        let layout = self.tmem_layout(op, &m)?;
        let regs = self.get(value, &layout)?;
        let words: Vec<String> = match m.elem() {
            ScalarType::F32 => regs
                .iter()
                .map(|r| self.f.inst(format!("bitcast float {r} to i32")))
                .collect(),
            ScalarType::F16 | ScalarType::BF16 => self.pack_halves(&regs, m.elem()),
            _ => regs,
        };
        let base = self.register(buffer)?;
        let at = self.tmem_warp_address(&m, &base);
        for (chunk, part) in words.chunks(COLUMNS_PER_MOVE).enumerate() {
            let to = self
                .f
                .inst(format!("add i32 {at}, {}", chunk * COLUMNS_PER_MOVE));
            let ins: Vec<String> = (1..=part.len()).map(|i| format!("${i}")).collect();
            let asm = format!(
                "tcgen05.st.sync.aligned.{}.x{}.b32 [$0]{}, {{{}}};",
                move_shape(&m),
                part.len(),
                second_half(&m, words.len()),
                ins.join(", ")
            );
            let constraints = format!("r{},~{{memory}}", ",r".repeat(part.len()));
            let mut args = vec![("i32", to.as_str())];
            args.extend(part.iter().map(|w| ("i32", w.as_str())));
            self.f.asm("void", &asm, &constraints, &args);
        }
        self.f
            .asm("void", "tcgen05.wait::st.sync.aligned;", "~{memory}", &[]);
        Ok(())
    }

    /// `async_dot(a, b, acc, use_acc, mbarriers)` into tensor memory: from
    /// the context's first thread, one `tcgen05.mma` per K step (the first
    /// accumulating when `use_acc` holds, the rest always), then one
    /// `tcgen05.commit` per barrier.
    pub(super) fn tcgen05_mma(
        &mut self,
        op: &Op,
        [a, b, acc, use_acc]: [ValueId; 4],
        barriers: &[ValueId],
    ) -> Result<()> {
        self.require_blackwell(op, "an `async_dot` into tensor memory")?;
        let (Type::SharedMemory(mb), Type::TensorMemory(macc)) = (self.ty(b), self.ty(acc)) else {
            return Err(malformed("`tcgen05_mma` operand types"));
        };
        // A from tensor memory: planned as the K-major shared buffer it
        // stands for (only B's descriptor and the steps are used).
        let (ma, a_in_tmem) = match self.ty(a) {
            Type::SharedMemory(ma) => (ma.clone(), false),
            Type::TensorMemory(mt) => {
                let shape = mt.shape().to_vec();
                let swizzle = shared_swizzle(mt.elem(), &shape);
                (
                    SharedMemoryType::new(mt.elem(), shape, 1, swizzle, false),
                    true,
                )
            }
            _ => return Err(malformed("`tcgen05_mma`'s a")),
        };
        let pair = self.facts.pair_mma;
        let plan = self.tcgen05_plan(op, &ma, mb, macc, pair)?;
        self.tensor_memory_writes_reach_issuer();
        let (a_at, b_at) = (self.register(a)?, self.register(b)?);
        let a_shared = (!a_in_tmem).then(|| self.shared_address(&a_at));
        let b_base = self.shared_address(&b_at);
        let d = self.register(acc)?;
        let first = self.register(use_acc)?;
        let first = self.f.inst(format!("zext i1 {first} to i32"));
        let bars = barriers
            .iter()
            .map(|&bar| self.shared_address_of(bar))
            .collect::<Result<Vec<_>>>()?;
        let idesc = instruction_descriptor(&plan, pair);
        let group = cta_group(pair);
        let issuer = self.pair_leader(pair);
        let a_base = a_shared
            .map(|at| self.descriptor_base(plan.a_descriptor_bits() | DESCRIPTOR_VERSION, &at));
        let b_base = self.descriptor_base(plan.b_descriptor_bits() | DESCRIPTOR_VERSION, &b_base);
        self.on_first_thread(&issuer, |l| {
            for s in 0..plan.k / plan.k_step() {
                let k0 = (s * plan.k_step()) as u32;
                // A's step: a shared-memory descriptor, or its columns in
                // tensor memory (two 16-bit values per column).
                let (a_operand, a_ty, a_con, a_arg) = match &a_base {
                    Some(base) => ("$1", "i64", "l", l.descriptor_at(base, plan.a.offset(k0))),
                    None => (
                        "[$1]",
                        "i32",
                        "r",
                        l.f.inst(format!("add i32 {a_at}, {}", k0 / 2)),
                    ),
                };
                let b_desc = l.descriptor_at(&b_base, plan.b.offset(k0 * plan.n as u32));
                let accumulate = if s == 0 { first.clone() } else { "1".into() };
                let asm = format!(
                    "{{ .reg .pred p; setp.ne.b32 p, $3, 0; \
                     tcgen05.mma.cta_group::{group}.kind::f16 [$0], {a_operand}, $2, {idesc}, p; }}"
                );
                l.f.asm(
                    "void",
                    &asm,
                    &format!("r,{a_con},l,r,~{{memory}}"),
                    &[
                        ("i32", &d),
                        (a_ty, &a_arg),
                        ("i64", &b_desc),
                        ("i32", &accumulate),
                    ],
                );
            }
            for bar in &bars {
                l.commit_to(bar, pair);
            }
        });
        Ok(())
    }

    /// `async_dot_scaled(a, b, acc, a_scale, b_scale, use_acc, mbarriers)`:
    /// from the context's first thread, one block-scaled `tcgen05.mma` per
    /// 32 bytes of K (32 fp8 or 64 fp4 elements), each pointed at the scale
    /// columns and byte of its first block (`TensorMemoryType`'s scale
    /// layout), then one `tcgen05.commit` per barrier. The operands' bytes
    /// are laid out as fp8 ones whatever their format.
    pub(super) fn tcgen05_mma_scaled(
        &mut self,
        op: &Op,
        [a, b, acc, a_scale, b_scale, use_acc]: [ValueId; 6],
        barriers: &[ValueId],
    ) -> Result<()> {
        self.require_blackwell(op, "`async_dot_scaled`")?;
        let (
            Type::SharedMemory(ma),
            Type::SharedMemory(mb),
            Type::TensorMemory(macc),
            Type::TensorMemory(ms),
        ) = (self.ty(a), self.ty(b), self.ty(acc), self.ty(a_scale))
        else {
            return Err(malformed("`async_dot_scaled` operand types"));
        };
        let form = ScaledForm::of(ma.elem(), ms.elem())
            .ok_or_else(|| malformed("`async_dot_scaled` of no scaled form"))?;
        let bytes = |m: &SharedMemoryType| m.with_elem(ScalarType::F8E4M3);
        let plan = self.tcgen05_plan(op, &bytes(ma), &bytes(mb), macc, false)?;
        self.tensor_memory_writes_reach_issuer();
        let formats = (ma.elem(), mb.elem());
        let (a_at, b_at) = (self.register(a)?, self.register(b)?);
        let (a_base, b_base) = (self.shared_address(&a_at), self.shared_address(&b_at));
        let d = self.register(acc)?;
        let (sa, sb) = (self.register(a_scale)?, self.register(b_scale)?);
        let first = self.register(use_acc)?;
        let first = self.f.inst(format!("zext i1 {first} to i32"));
        let bars = barriers
            .iter()
            .map(|&bar| self.shared_address_of(bar))
            .collect::<Result<Vec<_>>>()?;
        let a_base = self.descriptor_base(plan.a_descriptor_bits() | DESCRIPTOR_VERSION, &a_base);
        let b_base = self.descriptor_base(plan.b_descriptor_bits() | DESCRIPTOR_VERSION, &b_base);
        // Scale blocks each step covers: 32 bytes of K over the block size.
        let blocks_per_step = plan.k_step() * form.per_byte() / form.block();
        let kind = scaled_kind(form);
        self.on_first_thread("true", |l| {
            for s in 0..plan.k / plan.k_step() {
                let k0 = (s * plan.k_step()) as u32;
                let a_desc = l.descriptor_at(&a_base, plan.a.offset(k0));
                let b_desc = l.descriptor_at(&b_base, plan.b.offset(k0 * plan.n as u32));
                let accumulate = if s == 0 { first.clone() } else { "1".into() };
                // Scale columns: 4 blocks per column, R / 32 columns per 4 blocks.
                let block = s * blocks_per_step;
                let a_col =
                    l.f.inst(format!("add i32 {sa}, {}", block / 4 * plan.m / 32));
                let b_col =
                    l.f.inst(format!("add i32 {sb}, {}", block / 4 * plan.n / 32));
                let idesc = scaled_instruction_descriptor(&plan, form, formats, (block % 4) as u32);
                let asm = format!(
                    "{{ .reg .pred p; setp.ne.b32 p, $3, 0; \
                     tcgen05.mma.cta_group::1.{kind} [$0], $1, $2, {idesc}, [$4], [$5], p; }}"
                );
                l.f.asm(
                    "void",
                    &asm,
                    "r,l,l,r,r,r,~{memory}",
                    &[
                        ("i32", &d),
                        ("i64", &a_desc),
                        ("i64", &b_desc),
                        ("i32", &accumulate),
                        ("i32", &a_col),
                        ("i32", &b_col),
                    ],
                );
            }
            for bar in &bars {
                l.commit_to(bar, false);
            }
        });
        Ok(())
    }

    /// `tmem_copy` of block scales: one `tcgen05.cp` 32x128b.warpx4 per
    /// 512-byte atom (32 rows of 16 bytes into 4 columns of lanes 0-31,
    /// repeated in each quarter of the lanes), atom `i` at column `4 i`.
    fn scale_copy(&mut self, src: ValueId, dst: ValueId, atoms: usize) -> Result<()> {
        let base = self.shared_address_of(src)?;
        let base = self.descriptor_base(SCALE_ATOM_DESCRIPTOR, &base);
        let d = self.register(dst)?;
        self.on_first_thread("true", |l| {
            for i in 0..atoms {
                let desc = l.descriptor_at(&base, (512 * i) as u32);
                let column = l.f.inst(format!("add i32 {d}, {}", 4 * i));
                l.f.asm(
                    "void",
                    "tcgen05.cp.cta_group::1.32x128b.warpx4 [$0], $1;",
                    "r,l,~{memory}",
                    &[("i32", &column), ("i64", &desc)],
                );
            }
        });
        Ok(())
    }

    /// `tmem_copy(src, dst)`: one `tcgen05.cp` of 128 rows x 256 bits (8
    /// columns) per step, from the context's first thread. The source's
    /// 32-bit `[128, N]` rows are read as a K-major MMA operand of 16-bit
    /// `[128, 2N]` (the same bytes), whose descriptors step 32 bytes along
    /// a row as an MMA's K steps do.
    pub(super) fn tmem_copy(&mut self, op: &Op, src: ValueId, dst: ValueId) -> Result<()> {
        self.require_blackwell(op, "`tmem_copy`")?;
        let Type::SharedMemory(m) = self.ty(src) else {
            return Err(malformed("`tmem_copy` of a non-buffer"));
        };
        if let Type::TensorMemory(scales) = self.ty(dst) {
            if scales.elem().size_bytes() == 1 {
                let atoms = scales.shape().iter().product::<usize>() / 512;
                return self.scale_copy(src, dst, atoms);
            }
        }
        let n = m.shape()[1];
        let halves =
            SharedMemoryType::new(ScalarType::BF16, vec![128, 2 * n], 1, m.swizzle(), true);
        let rows = SharedMemoryType::new(
            ScalarType::BF16,
            vec![2 * n, 64],
            1,
            shared_swizzle(ScalarType::BF16, &[2 * n, 64]),
            true,
        );
        let macc = TensorMemoryType::new(ScalarType::F32, vec![128, 64], 1);
        let plan = self.tcgen05_plan(op, &halves, &rows, &macc, false)?;
        let base = self.shared_address_of(src)?;
        let base = self.descriptor_base(plan.a_descriptor_bits() | DESCRIPTOR_VERSION, &base);
        let d = self.register(dst)?;
        let group = cta_group(self.facts.pair_mma);
        self.on_first_thread("true", |l| {
            for step in 0..n / 8 {
                let desc = l.descriptor_at(&base, plan.a.offset((16 * step) as u32));
                let column = l.f.inst(format!("add i32 {d}, {}", 8 * step));
                let asm = format!("tcgen05.cp.cta_group::{group}.128x256b [$0], $1;");
                l.f.asm(
                    "void",
                    &asm,
                    "r,l,~{memory}",
                    &[("i32", &column), ("i64", &desc)],
                );
            }
        });
        Ok(())
    }

    /// `tcgen05_commit(bar)`, from the thread that issues the MMAs.
    pub(super) fn tcgen05_commit(&mut self, op: &Op, bar: ValueId) -> Result<()> {
        self.require_blackwell(op, "`tcgen05_commit`")?;
        let bar = self.shared_address_of(bar)?;
        let pair = self.facts.pair_mma;
        let issuer = self.pair_leader(pair);
        self.on_first_thread(&issuer, |l| l.commit_to(&bar, pair));
        Ok(())
    }

    /// Over pairs, whether this program is its pair's even one (which
    /// issues for both); else `true`.
    fn pair_leader(&mut self, pair: bool) -> String {
        if !pair {
            return "true".into();
        }
        let rank = self.cluster_rank();
        let odd = self.f.inst(format!("and i32 {rank}, 1"));
        self.f.inst(format!("icmp eq i32 {odd}, 0"))
    }

    /// An arrival on `bar` when the issuing thread's MMAs complete; over
    /// pairs, on `bar` of both programs (the even one's rank and the next).
    fn commit_to(&mut self, bar: &str, pair: bool) {
        if !pair {
            self.f.asm(
                "void",
                "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [$0];",
                "r,~{memory}",
                &[("i32", bar)],
            );
            return;
        }
        let rank = self.cluster_rank();
        let mask = self.f.inst(format!("shl i32 3, {rank}"));
        let mask = self.f.inst(format!("trunc i32 {mask} to i16"));
        self.f.asm(
            "void",
            "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [$0], $1;",
            "r,h,~{memory}",
            &[("i32", bar), ("i16", &mask)],
        );
    }

    /// The operands' placement for a `[128, K] x [K, N]` MMA.
    fn tcgen05_plan(
        &self,
        op: &Op,
        a: &SharedMemoryType,
        b: &SharedMemoryType,
        acc: &TensorMemoryType,
        pair: bool,
    ) -> Result<WgmmaPlan> {
        // Over pairs, this program's half of N (what its B holds).
        let n = if pair {
            acc.shape()[1] / 2
        } else {
            acc.shape()[1]
        };
        let (m, k) = (a.shape()[0], a.shape()[1]);
        let orders = OperandOrders {
            a_m_major: a.transposed(),
            b_k_major: b.transposed(),
        };
        let types = (a.elem(), b.elem(), acc.elem());
        WgmmaPlan::operands(types, (m, n, k), 4, orders)
            .filter(|p| {
                buffer_layout(a).is_ok_and(|l| l == p.a) && buffer_layout(b).is_ok_and(|l| l == p.b)
            })
            .ok_or_else(|| CodegenError::Misuse {
                message: format!(
                    "`async_dot` of [{m}, {k}] x [{k}, {n}] {} tiles into tensor memory does not \
                     map onto `tcgen05.mma`",
                    a.elem()
                ),
                hint: "a tensor-memory `async_dot` takes f16 or bf16 buffers of 128 rows of A \
                       (K-major, or M-major through `local_trans`) and B with at least 64 \
                       columns (N-major) or K-major through `local_trans`, K a multiple of 16"
                    .into(),
                at: Some(op.loc),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_descriptor_encodes_types_and_shape() {
        let t = ScalarType::BF16;
        let orders = OperandOrders {
            a_m_major: false,
            b_k_major: true,
        };
        let plan = WgmmaPlan::operands((t, t, ScalarType::F32), (128, 256, 64), 4, orders)
            .expect("a plan");
        // f32 D, bf16 A and B, both K-major, N = 256, M = 128.
        assert_eq!(instruction_descriptor(&plan, false), 0x0840_0490);
        let n_major = OperandOrders::default();
        let plan = WgmmaPlan::operands((t, t, ScalarType::F32), (128, 128, 64), 4, n_major)
            .expect("a plan");
        assert_eq!(
            instruction_descriptor(&plan, false) >> 16 & 1,
            1,
            "B is N-major"
        );
        assert_eq!(instruction_descriptor(&plan, false) >> 17 & 0x3f, 16);
        // Over a pair: M = 256, and N both programs' halves.
        assert_eq!(instruction_descriptor(&plan, true) >> 17 & 0x3f, 32);
        assert_eq!(instruction_descriptor(&plan, true) >> 24 & 0x1f, 16);
    }

    #[test]
    fn allocations_are_powers_of_two_from_32_columns() {
        assert_eq!(allocation_columns(8), 32);
        assert_eq!(allocation_columns(96), 128);
        assert_eq!(allocation_columns(512), 512);
    }
}
