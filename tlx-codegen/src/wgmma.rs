//! `Dot` on Hopper's warp-group tensor cores (`wgmma.mma_async`, sm_90a).
//!
//! Both operands sit in NVMMA-swizzled shared memory (see
//! [`crate::layout::SharedLayout::nvmma`]) and are named by 64-bit matrix
//! descriptors; the accumulator stays in registers in the layout of
//! [`crate::layout::wgmma_accumulator`]. A is K-major (its rows are
//! contiguous in K) and B is N-major (a row-major `[K, N]` tile), which the
//! instruction reads transposed. For f16/bf16, A may also be M-major (a
//! `local_trans` view of a `[K, M]` tile), read transposed by the same
//! flag's A half. Each warp group of four warps computes 64
//! rows per instruction; `[m, n]` accumulators with more rows issue one
//! instruction per further 64 rows.
//!
//! Two ways in: operands held in registers are stored into a scratch buffer
//! and multiplied at once (`wait_group 0`); operands a pipelined loop copied
//! straight into swizzled ring slots (see `pipeline.rs`) are multiplied in
//! place, the loop keeping one group of instructions in flight.
//!
//! TLX's `async_dot` also takes A from registers (16-bit inputs, in the
//! layout of [`crate::layout::wgmma_register_a`]): each instruction then
//! reads four 32-bit registers of packed pairs instead of A's descriptor.
//! Besides f16/bf16, `async_dot` takes fp8 and tf32 (`f32` buffers, k8)
//! with an f32 accumulator and s8/u8 (k32) with an i32 one; those forms read
//! both operands K-major, so B is a `local_trans` view of an `[N, K]` tile.

use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::rings::RingRead;
use crate::analysis::mma::{is_16_bit_float, WgmmaPlan};
use tlx_core::ir::{Elem, Literal, ScalarType};

/// Where one wgmma group reads its A operand.
pub enum WgmmaA<'r> {
    /// A tile in shared memory at this byte offset (an i32 operand) of the
    /// dynamic shared buffer, in the plan's `a` placement.
    Shared(&'r str),
    /// The registers of an `[m, k]` tensor in the layout of
    /// [`crate::layout::wgmma_register_a`] (16-bit elements).
    Registers(&'r [String]),
}

/// A shared operand's descriptor less its per-instruction offset.
pub(super) struct MatrixDescriptor {
    /// The low half: the start-address field and the leading byte offset
    /// (an i32 register).
    low: String,
    /// The high half, a constant: stride, base offset and swizzle mode.
    high: u64,
}

/// One instruction's A: a descriptor (i64) or four packed registers (i32).
enum WgmmaOperandA {
    Descriptor(String),
    Packed(Vec<String>),
}

impl<'k> Lowerer<'k> {
    /// The shared-window address (i32) of byte `offset` (an i32 operand) of
    /// the dynamic shared buffer.
    pub(super) fn shared_address(&mut self, offset: &str) -> String {
        let p = self.smem_ptr(offset);
        self.f.inst(format!("ptrtoint ptr addrspace(3) {p} to i32"))
    }

    /// The descriptors of one shared operand starting at shared address
    /// `address`: its start-address field (and the low half of `bits`)
    /// computed once, so that each instruction's descriptor
    /// ([`Self::descriptor_at`]) costs one add, where computing each from
    /// the address took six uniform instructions per instruction in the
    /// wgmma sequences of the attention loops.
    pub(super) fn descriptor_base(&mut self, bits: u64, address: &str) -> MatrixDescriptor {
        let units = self.f.inst(format!("lshr i32 {address}, 4"));
        let field = self.f.inst(format!("and i32 {units}, 16383"));
        let low = self.f.inst(format!("or i32 {field}, {}", bits as u32));
        MatrixDescriptor {
            low,
            high: bits >> 32,
        }
    }

    /// The descriptor (i64) of `base`'s operand `delta` bytes on (a whole
    /// number of 16-byte core-matrix rows, the field's unit). The
    /// start-address field is the address in 16-byte units, below 2^14 for
    /// every shared address, so the add never carries out of the field.
    pub(super) fn descriptor_at(&mut self, base: &MatrixDescriptor, delta: u32) -> String {
        let low = self.f.inst(format!("add i32 {}, {}", base.low, delta >> 4));
        let wide = self.f.inst(format!("zext i32 {low} to i64"));
        self.f.inst(format!("or i64 {wide}, {}", base.high << 32))
    }

    /// `wgmma.fence`: orders register accesses to the accumulators before
    /// the instructions that follow.
    fn wgmma_fence(&mut self) {
        self.f
            .asm("void", "wgmma.fence.sync.aligned;", "~{memory}", &[]);
    }

    /// `fence.proxy.async` for shared memory: makes this thread's ordinary
    /// (generic-proxy) writes, `cp.async` included, visible to the async
    /// proxy that wgmma reads through. Goes before the barrier that tells the
    /// other warps the data is there.
    pub fn fence_async_shared(&mut self) {
        self.f
            .asm("void", "fence.proxy.async.shared::cta;", "~{memory}", &[]);
    }

    /// Issues the instructions of `plan` for one `acc + a @ b` whose B
    /// starts at byte offset `b_at` (an i32 operand) of the shared buffer,
    /// and commits them as one group; returns the accumulator registers,
    /// which are not valid before a `wgmma.wait_group` covers the group.
    pub fn wgmma_issue(
        &mut self,
        plan: &WgmmaPlan,
        acc: Vec<String>,
        a: WgmmaA<'_>,
        b_at: &str,
    ) -> Result<Vec<String>> {
        let per_instr = plan.n / 2;
        if acc.len() != per_instr * plan.m_blocks() {
            return Err(malformed("wgmma accumulator register count"));
        }
        // Per instruction of a register A: 8 elements, 4 packed registers.
        let a_regs_per_block = plan.k / 2;
        let a_group = match a {
            WgmmaA::Shared(a_at) => {
                let a_base = self.shared_address(a_at);
                // This warp group's first row of A.
                let warp = self.threads.warp.clone();
                let group = self.f.inst(format!("lshr i32 {warp}, 2"));
                let group_bytes = plan.a.offset(64 * plan.k as u32);
                let group_offset = self.f.inst(format!("mul i32 {group}, {group_bytes}"));
                let a_at = self.f.inst(format!("add i32 {a_base}, {group_offset}"));
                Some(self.descriptor_base(plan.a_descriptor_bits(), &a_at))
            }
            WgmmaA::Registers(regs) => {
                if !is_16_bit_float(plan.input) || regs.len() != a_regs_per_block * plan.m_blocks()
                {
                    return Err(malformed("wgmma register A"));
                }
                None
            }
        };
        let b_address = self.shared_address(b_at);
        let b_base = self.descriptor_base(plan.b_descriptor_bits(), &b_address);
        let (dtype, itype) = match plan.input {
            ScalarType::BF16 => ("f32", "bf16"),
            ScalarType::F16 => ("f32", "f16"),
            ScalarType::F8E4M3 => ("f32", "e4m3"),
            ScalarType::F8E5M2 => ("f32", "e5m2"),
            ScalarType::F32 => ("f32", "tf32"),
            ScalarType::I8 => ("s32", "s8"),
            ScalarType::U8 => ("s32", "u8"),
            other => return Err(malformed(format!("wgmma of {other} inputs"))),
        };
        let instr = format!(
            "wgmma.mma_async.sync.aligned.m64n{}k{}.{dtype}.{itype}.{itype}",
            plan.n,
            plan.k_step()
        );
        // scale-d (accumulate); for float inputs A and B not negated; for
        // 16-bit inputs then the transposes: A K-major (0) or M-major (1),
        // none for a register A, B N-major (1) or K-major (0). The other
        // inputs are K-major by definition and take no transpose flags;
        // integer ones take no negation either.
        let trans_a = u8::from(plan.a_m_major);
        let trans_b = u8::from(!plan.b_k_major);
        let flags = match (plan.input, &a_group) {
            (ScalarType::I8 | ScalarType::U8, _) => "p".to_string(),
            (t, _) if !is_16_bit_float(t) => "p, 1, 1".to_string(),
            (_, Some(_)) => format!("p, 1, 1, {trans_a}, {trans_b}"),
            (_, None) => format!("p, 1, 1, {trans_b}"),
        };
        // A register operands are packed before the fence: PTX wants one
        // between a register's last write and the wgmma that reads it.
        let packed_a: Vec<Vec<String>> = match &a {
            WgmmaA::Registers(regs) => regs
                .chunks(8)
                .map(|elems| self.pack_pairs(plan.input, elems))
                .collect(),
            WgmmaA::Shared(_) => Vec::new(),
        };
        self.wgmma_fence();
        // A zero accumulator (a `zeros` tile passed straight in) is not
        // read: the first K step runs with scale-d off, and its registers
        // need no zeroing (a product of 64 x 64 f32 per warp group saves
        // 16 register-pair moves a thread).
        let zero = super::scalar::literal(&mut self.f, Elem::Scalar(plan.acc), Literal::Int(0))?;
        let from_zero = acc.iter().all(|r| *r == zero);
        let mut acc = acc;
        for s in 0..plan.k / plan.k_step() {
            let k0 = (s * plan.k_step()) as u32;
            let b_desc = self.descriptor_at(&b_base, plan.b.offset(k0 * plan.n as u32));
            for j in 0..plan.m_blocks() {
                let a_operand = match (&a, &a_group) {
                    (_, Some(a_group)) => {
                        let row = (64 * plan.groups() * j) as u32;
                        let delta = plan.a.offset(row * plan.k as u32 + k0);
                        WgmmaOperandA::Descriptor(self.descriptor_at(a_group, delta))
                    }
                    (WgmmaA::Registers(_), None) => {
                        // Eight elements per (M block, K step), in that order.
                        let chunk = (j * a_regs_per_block + 8 * s) / 8;
                        WgmmaOperandA::Packed(packed_a[chunk].clone())
                    }
                    (WgmmaA::Shared(_), None) => return Err(malformed("wgmma A")),
                };
                let accumulate = s > 0 || !from_zero;
                let regs = if accumulate {
                    acc[j * per_instr..(j + 1) * per_instr].to_vec()
                } else {
                    vec!["undef".to_string(); per_instr]
                };
                let out = self.wgmma_instruction(
                    &instr, &flags, accumulate, plan.acc, &regs, a_operand, &b_desc,
                );
                acc.splice(j * per_instr..(j + 1) * per_instr, out);
            }
        }
        self.f
            .asm("void", "wgmma.commit_group.sync.aligned;", "~{memory}", &[]);
        Ok(acc)
    }

    /// Packs 16-bit elements two to a 32-bit register, the first in the low
    /// half, as wgmma's register operands hold them.
    fn pack_pairs(&mut self, elem: ScalarType, elems: &[String]) -> Vec<String> {
        let t = super::emit::scalar_type(elem);
        elems
            .chunks(2)
            .map(|pair| {
                let v = format!("<2 x {t}>");
                let lo = self
                    .f
                    .inst(format!("insertelement {v} poison, {t} {}, i32 0", pair[0]));
                let both = self
                    .f
                    .inst(format!("insertelement {v} {lo}, {t} {}, i32 1", pair[1]));
                self.f.inst(format!("bitcast {v} {both} to i32"))
            })
            .collect()
    }

    /// One `wgmma.mma_async` reading B through a descriptor and A through a
    /// descriptor or four packed registers, the accumulators (of type
    /// `acc_type`) tied in and out; without `accumulate` (scale-d off) it
    /// writes `A B` and ignores the accumulators' values.
    #[allow(clippy::too_many_arguments)]
    fn wgmma_instruction(
        &mut self,
        instr: &str,
        flags: &str,
        accumulate: bool,
        acc_type: ScalarType,
        acc: &[String],
        a: WgmmaOperandA,
        b_desc: &str,
    ) -> Vec<String> {
        let n = acc.len();
        let outs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
        let (a_text, mut extra, constraints): (String, Vec<(&str, &str)>, Vec<&str>) = match &a {
            WgmmaOperandA::Descriptor(d) => (format!("${n}"), vec![("i64", d.as_str())], vec!["l"]),
            WgmmaOperandA::Packed(regs) => (
                format!(
                    "{{{}}}",
                    (n..n + regs.len())
                        .map(|i| format!("${i}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                regs.iter().map(|r| ("i32", r.as_str())).collect(),
                vec!["r"; regs.len()],
            ),
        };
        let b_index = n + extra.len();
        extra.push(("i64", b_desc));
        let mut extra_constraints = constraints;
        extra_constraints.push("l");
        let scale_d = u8::from(accumulate);
        let asm = format!(
            "{{ .reg .pred p; setp.ne.b32 p, {scale_d}, 0; {instr} {{{}}}, {a_text}, ${b_index}, {flags}; }}",
            outs.join(", "),
        );
        self.tied_asm(&asm, acc_type, acc, &extra, &extra_constraints)
    }

    /// Inline asm whose accumulator registers `regs` (f32 or i32, as
    /// `acc_type`) are read and written (outputs `$0..`, tied inputs after
    /// `extra`, whose constraints are `extra_constraints`); returns the new
    /// registers.
    fn tied_asm(
        &mut self,
        asm: &str,
        acc_type: ScalarType,
        regs: &[String],
        extra: &[(&str, &str)],
        extra_constraints: &[&str],
    ) -> Vec<String> {
        let (ty, out) = if acc_type == ScalarType::I32 {
            ("i32", "=r")
        } else {
            ("float", "=f")
        };
        let n = regs.len();
        let mut constraints = vec![out.to_string(); n];
        constraints.extend(extra_constraints.iter().map(|c| c.to_string()));
        constraints.extend((0..n).map(|i| i.to_string()));
        constraints.push("~{memory}".to_string());
        let mut args: Vec<(&str, &str)> = extra.to_vec();
        args.extend(regs.iter().map(|r| (ty, r.as_str())));
        let ret = format!("{{ {} }}", vec![ty; n].join(", "));
        let r = self.f.asm(&ret, asm, &constraints.join(","), &args);
        (0..n)
            .map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}")))
            .collect()
    }

    /// `wgmma.wait_group pending`: at most `pending` groups stay in flight.
    /// The accumulators (of type `acc_type`) pass through it, so their later
    /// uses follow it.
    pub fn wgmma_wait(
        &mut self,
        pending: usize,
        acc_type: ScalarType,
        acc: &[String],
    ) -> Vec<String> {
        let asm = format!("wgmma.wait_group.sync.aligned {pending};");
        // One asm per instruction's registers keeps operand lists short.
        acc.chunks(128)
            .flat_map(|chunk| self.tied_asm(&asm, acc_type, chunk, &[], &[]))
            .collect()
    }

    /// `acc + a @ b` with both operands in the current slots of pipeline
    /// rings (already waited for, fenced and shared by the pipeline): the
    /// group is issued and, when `in_flight`, left running (the loop waits
    /// for it one iteration later, or after its last one).
    pub fn wgmma_from_rings(
        &mut self,
        plan: &WgmmaPlan,
        (a, b): (&RingRead, &RingRead),
        acc: Vec<String>,
        in_flight: bool,
    ) -> Result<Tensor> {
        let a_at = self.ring_slot_base(a, &a.read_slot);
        let b_at = self.ring_slot_base(b, &b.read_slot);
        let out = self.wgmma_issue(plan, acc, WgmmaA::Shared(&a_at), &b_at)?;
        let regs = self.wgmma_wait(usize::from(in_flight), plan.acc, &out);
        Ok(Tensor {
            layout: plan.acc_layout()?,
            regs,
        })
    }

    /// `acc + a @ b` with both operands in registers: stored into the scratch
    /// buffer in wgmma's placements, then multiplied and waited for.
    pub fn wgmma_from_registers(
        &mut self,
        plan: &WgmmaPlan,
        (a, b): (&Tensor, &Tensor),
        acc: Vec<String>,
    ) -> Result<Tensor> {
        let elem = Elem::Scalar(plan.input);
        let b_at = plan.a_bytes_aligned().to_string();
        self.use_shared(plan.operand_bytes());
        // Earlier readers of the scratch are done once every thread is here.
        self.barrier();
        self.store_placed(a, elem, &plan.a, "0")?;
        self.store_placed(b, elem, &plan.b, &b_at)?;
        self.fence_async_shared();
        self.barrier();
        let (a_at, b_at) = (
            self.scratch(0).to_string(),
            self.scratch(plan.a_bytes_aligned()).to_string(),
        );
        let out = self.wgmma_issue(plan, acc, WgmmaA::Shared(&a_at), &b_at)?;
        let regs = self.wgmma_wait(0, plan.acc, &out);
        Ok(Tensor {
            layout: plan.acc_layout()?,
            regs,
        })
    }
}
