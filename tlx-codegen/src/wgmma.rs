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
use crate::layout::{wgmma_accumulator, LinearLayout, SharedLayout, Swizzle};
use tlx_core::ir::{Arch, Elem, Literal, ScalarType};

/// Bytes of K one instruction takes (k16 for 16-bit inputs, k32 for fp8 and
/// 8-bit integers, k8 for tf32).
const K_STEP_BYTES: usize = 32;

/// Where one wgmma group reads its A operand.
pub enum WgmmaA<'r> {
    /// A tile in shared memory at this byte offset (an i32 operand) of the
    /// dynamic shared buffer, in the plan's `a` placement.
    Shared(&'r str),
    /// The registers of an `[m, k]` tensor in the layout of
    /// [`crate::layout::wgmma_register_a`] (16-bit elements).
    Registers(&'r [String]),
}

/// How one `acc + a @ b` maps onto wgmma instructions.
#[derive(Clone, Debug, PartialEq)]
pub struct WgmmaPlan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The input type (both operands): f16, bf16, fp8, f32 (read as tf32),
    /// s8 or u8.
    pub input: ScalarType,
    /// The accumulator type: f32, or i32 for 8-bit integer inputs.
    pub acc: ScalarType,
    pub a: SharedLayout,
    pub a_swizzle: Swizzle,
    pub b: SharedLayout,
    pub b_swizzle: Swizzle,
    /// A stored M-major (a `local_trans` view of a `[K, M]` tile) rather
    /// than K-major; f16/bf16 only.
    pub a_m_major: bool,
    /// B stored K-major (a `local_trans` view of an `[N, K]` tile) rather
    /// than N-major; every input but f16/bf16 needs it.
    pub b_k_major: bool,
    pub num_warps: u32,
}

impl WgmmaPlan {
    /// The plan for `[m, k] x [k, n]` accumulated in `acc`, or `None` when
    /// wgmma does not apply (another arch or type, a shape the warp groups
    /// cannot split, or operand rows narrower than a 32-byte swizzle).
    pub fn new(
        arch: Arch,
        types: (ScalarType, ScalarType, ScalarType),
        dims: (usize, usize, usize),
        num_warps: u32,
    ) -> Option<WgmmaPlan> {
        WgmmaPlan::with_orders(arch, types, dims, num_warps, OperandOrders::default())
    }

    /// [`WgmmaPlan::new`] with the operands stored in `orders`.
    pub fn with_orders(
        arch: Arch,
        types: (ScalarType, ScalarType, ScalarType),
        dims: (usize, usize, usize),
        num_warps: u32,
        orders: OperandOrders,
    ) -> Option<WgmmaPlan> {
        if arch != Arch::Sm90a {
            return None;
        }
        WgmmaPlan::operands(types, dims, num_warps, orders)
    }

    /// How the operands of `[m, k] x [k, n]` lie in swizzled shared memory
    /// and which descriptors name them, whatever the instruction (Hopper's
    /// wgmma, or Blackwell's `tcgen05.mma`, whose descriptors only add a
    /// version field); `None` when the types or shapes do not fit.
    pub(super) fn operands(
        (a, b, acc): (ScalarType, ScalarType, ScalarType),
        (m, n, k): (usize, usize, usize),
        num_warps: u32,
        OperandOrders {
            a_m_major,
            b_k_major,
        }: OperandOrders,
    ) -> Option<WgmmaPlan> {
        let sixteen_bit = is_16_bit_float(a);
        let k_major_only = matches!(
            a,
            ScalarType::F8E4M3
                | ScalarType::F8E5M2
                | ScalarType::F32
                | ScalarType::I8
                | ScalarType::U8
        );
        let input_ok = sixteen_bit || (k_major_only && b_k_major && !a_m_major);
        let integer = matches!(a, ScalarType::I8 | ScalarType::U8);
        let acc_ok = acc
            == if integer {
                ScalarType::I32
            } else {
                ScalarType::F32
            };
        if a != b || !input_ok || !acc_ok {
            return None;
        }
        wgmma_accumulator(m, n, num_warps).ok()?;
        let eb = a.size_bytes();
        // An N-major B's 64-element column blocks are what its descriptor
        // steps over; narrower rows would need the other swizzles' forms.
        if k % (K_STEP_BYTES / eb) != 0 || (!b_k_major && n < 64) || n % 8 != 0 {
            return None;
        }
        // Integer wgmma has N = 8, 16, 24, 32, then multiples of 16 only.
        if integer && n > 32 && n % 16 != 0 {
            return None;
        }
        let (a_layout, a_swizzle) = if a_m_major {
            // Each warp group's 64 rows are 128 bytes of a stored row: one
            // column block of the 128-byte swizzle, so LBO never matters.
            let s = Swizzle::widest_for(m * eb)?;
            let stored = SharedLayout::nvmma(&[k, m], eb, s).ok()?;
            (stored.transposed().ok()?, s)
        } else {
            let s = Swizzle::widest_for(k * eb)?;
            (SharedLayout::nvmma(&[m, k], eb, s).ok()?, s)
        };
        let (b, b_swizzle) = if b_k_major {
            let s = Swizzle::widest_for(k * eb)?;
            (
                SharedLayout::nvmma(&[n, k], eb, s)
                    .ok()?
                    .transposed()
                    .ok()?,
                s,
            )
        } else {
            let s = Swizzle::widest_for(n * eb)?;
            (SharedLayout::nvmma(&[k, n], eb, s).ok()?, s)
        };
        Some(WgmmaPlan {
            m,
            n,
            k,
            input: a,
            acc,
            a: a_layout,
            a_swizzle,
            b,
            b_swizzle,
            a_m_major,
            b_k_major,
            num_warps,
        })
    }

    /// K of one instruction.
    pub(super) fn k_step(&self) -> usize {
        K_STEP_BYTES / self.input.size_bytes()
    }

    /// The accumulator's register layout.
    pub fn acc_layout(&self) -> Result<LinearLayout> {
        Ok(wgmma_accumulator(self.m, self.n, self.num_warps)?)
    }

    fn groups(&self) -> usize {
        self.num_warps as usize / 4
    }

    /// Instructions each warp group issues along M per K step.
    fn m_blocks(&self) -> usize {
        self.m / (64 * self.groups())
    }

    /// The constant part of A's descriptor. K-major and swizzled, one
    /// instruction's 16 columns lie in one atom row, so only the stride
    /// between 8-row core groups (SBO) matters. M-major, as an N-major B:
    /// the leading offset steps between 64-row blocks along M, the stride
    /// between 8-row groups of the stored tile along K.
    pub(super) fn a_descriptor_bits(&self) -> u64 {
        let atom = self.a_swizzle.atom_bytes() as u64;
        let lbo = if self.a_m_major {
            self.k as u64 * atom
        } else {
            1
        };
        descriptor_bits(lbo, 8 * atom, self.a_swizzle)
    }

    /// The constant part of B's descriptor: N-major, the leading offset
    /// steps between 64-column blocks along N and the stride between 8-row
    /// groups along K.
    pub(super) fn b_descriptor_bits(&self) -> u64 {
        let atom = self.b_swizzle.atom_bytes();
        if self.b_k_major {
            // Like A: 8-row core groups of the stored [N, K] tile, SBO apart.
            return descriptor_bits(1, 8 * atom as u64, self.b_swizzle);
        }
        let lbo = (self.k * atom) as u64;
        let sbo = 8 * atom as u64;
        descriptor_bits(lbo, sbo, self.b_swizzle)
    }

    /// Bytes of the A tile, padded so that B starts on a swizzle period.
    pub fn a_bytes_aligned(&self) -> usize {
        self.a.bytes.div_ceil(1024) * 1024
    }

    /// Bytes A and B take together in one buffer (A first).
    pub fn operand_bytes(&self) -> usize {
        self.a_bytes_aligned() + self.b.bytes
    }
}

/// How `async_dot`'s shared operands are stored: the defaults are A
/// K-major and B N-major (row-major `[M, K]` and `[K, N]` tiles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperandOrders {
    /// A is a `local_trans` view of a `[K, M]` tile.
    pub a_m_major: bool,
    /// B is a `local_trans` view of an `[N, K]` tile.
    pub b_k_major: bool,
}

/// f16 or bf16: the inputs wgmma reads A of from registers, and the only
/// ones it transposes.
pub fn is_16_bit_float(t: ScalarType) -> bool {
    matches!(t, ScalarType::F16 | ScalarType::BF16)
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

/// A descriptor without its start address: offsets in 16-byte units, the
/// swizzle mode in bits 62-63, base offset 0 (buffers start on a period).
fn descriptor_bits(lbo: u64, sbo: u64, swizzle: Swizzle) -> u64 {
    ((lbo >> 4) & 0x3fff) << 16 | ((sbo >> 4) & 0x3fff) << 32 | swizzle.descriptor_mode() << 62
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(m: usize, n: usize, k: usize, w: u32) -> Option<WgmmaPlan> {
        let t = ScalarType::BF16;
        WgmmaPlan::new(Arch::Sm90a, (t, t, ScalarType::F32), (m, n, k), w)
    }

    #[test]
    fn applies_to_warp_group_shapes_only() {
        assert!(plan(128, 128, 64, 8).is_some());
        assert!(plan(128, 256, 64, 8).is_some());
        assert!(plan(64, 128, 32, 4).is_some());
        // Rows a warp group cannot split, too-narrow B, K not a multiple of 16.
        assert!(plan(32, 128, 64, 4).is_none());
        assert!(plan(64, 32, 64, 4).is_none());
        assert!(plan(64, 128, 8, 4).is_none());
        let f32 = ScalarType::F32;
        assert!(WgmmaPlan::new(Arch::Sm90a, (f32, f32, f32), (64, 64, 64), 4).is_none());
        let t = ScalarType::F16;
        assert!(WgmmaPlan::new(Arch::Sm100a, (t, t, f32), (64, 64, 64), 4).is_none());
    }

    #[test]
    fn descriptors_encode_offsets_and_swizzle() {
        let p = plan(128, 128, 64, 8).unwrap();
        assert_eq!(p.a_swizzle, Swizzle::B128);
        // A: SBO 1024 bytes (64 units) in bits 32-45, mode 1 in bits 62-63.
        assert_eq!(p.a_descriptor_bits() >> 32 & 0x3fff, 64);
        assert_eq!(p.a_descriptor_bits() >> 62, 1);
        // B: LBO = one 64-column block of 64 rows of 128 bytes.
        assert_eq!(p.b_descriptor_bits() >> 16 & 0x3fff, (64 * 128) >> 4);
        assert_eq!(p.operand_bytes(), 128 * 64 * 2 + 64 * 128 * 2);
    }
}
