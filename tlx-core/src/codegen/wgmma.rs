//! `Dot` on Hopper's warp-group tensor cores (`wgmma.mma_async`, sm_90a).
//!
//! Both operands sit in NVMMA-swizzled shared memory (see
//! [`crate::layout::SharedLayout::nvmma`]) and are named by 64-bit matrix
//! descriptors; the accumulator stays in registers in the layout of
//! [`crate::layout::wgmma_accumulator`]. A is K-major (its rows are
//! contiguous in K) and B is N-major (a row-major `[K, N]` tile), which the
//! instruction reads transposed. Each warp group of four warps computes 64
//! rows per instruction; `[m, n]` accumulators with more rows issue one
//! instruction per further 64 rows.
//!
//! Two ways in: operands held in registers are stored into a scratch buffer
//! and multiplied at once (`wait_group 0`); operands a pipelined loop copied
//! straight into swizzled ring slots (see `pipeline.rs`) are multiplied in
//! place, the loop keeping one group of instructions in flight.

use super::lower::{malformed, Lowerer, Result, Tensor};
use super::pipeline::RingRead;
use crate::ir::{Arch, Elem, ScalarType};
use crate::layout::{wgmma_accumulator, LinearLayout, SharedLayout, Swizzle};

/// Bytes of K one instruction takes (k16 for 16-bit inputs, k32 for fp8).
const K_STEP_BYTES: usize = 32;

/// How one `acc + a @ b` maps onto wgmma instructions.
#[derive(Clone, Debug, PartialEq)]
pub struct WgmmaPlan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The input type (f16 or bf16, both operands).
    pub input: ScalarType,
    pub a: SharedLayout,
    pub a_swizzle: Swizzle,
    pub b: SharedLayout,
    pub b_swizzle: Swizzle,
    /// B stored K-major (a `local_trans` view of an `[N, K]` tile) rather
    /// than N-major; fp8 inputs need it.
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
        WgmmaPlan::with_b_order(arch, types, dims, num_warps, false)
    }

    /// [`WgmmaPlan::new`], with B K-major when `b_k_major` (the only order
    /// wgmma takes fp8 operands in).
    pub fn with_b_order(
        arch: Arch,
        (a, b, acc): (ScalarType, ScalarType, ScalarType),
        (m, n, k): (usize, usize, usize),
        num_warps: u32,
        b_k_major: bool,
    ) -> Option<WgmmaPlan> {
        let sixteen_bit = matches!(a, ScalarType::F16 | ScalarType::BF16);
        let fp8 = matches!(a, ScalarType::F8E4M3 | ScalarType::F8E5M2);
        let input_ok = sixteen_bit || (fp8 && b_k_major);
        if arch != Arch::Sm90a || a != b || !input_ok || acc != ScalarType::F32 {
            return None;
        }
        wgmma_accumulator(m, n, num_warps).ok()?;
        let eb = a.size_bytes();
        // An N-major B's 64-element column blocks are what its descriptor
        // steps over; narrower rows would need the other swizzles' forms.
        if k % (K_STEP_BYTES / eb) != 0 || (!b_k_major && n < 64) || n % 8 != 0 {
            return None;
        }
        let a_swizzle = Swizzle::widest_for(k * eb)?;
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
            a: SharedLayout::nvmma(&[m, k], eb, a_swizzle).ok()?,
            a_swizzle,
            b,
            b_swizzle,
            b_k_major,
            num_warps,
        })
    }

    /// K of one instruction.
    fn k_step(&self) -> usize {
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

    /// The constant part of A's descriptor: K-major and swizzled, one
    /// instruction's 16 columns lie in one atom row, so only the stride
    /// between 8-row core groups (SBO) matters.
    fn a_descriptor_bits(&self) -> u64 {
        let sbo = 8 * self.a_swizzle.atom_bytes() as u64;
        descriptor_bits(1, sbo, self.a_swizzle)
    }

    /// The constant part of B's descriptor: N-major, the leading offset
    /// steps between 64-column blocks along N and the stride between 8-row
    /// groups along K.
    fn b_descriptor_bits(&self) -> u64 {
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

    /// A matrix descriptor (i64) starting at shared address `address` plus
    /// the constant `delta` bytes.
    fn descriptor(&mut self, bits: u64, address: &str, delta: u32) -> String {
        let at = self.f.inst(format!("add i32 {address}, {delta}"));
        let units = self.f.inst(format!("lshr i32 {at}, 4"));
        let field = self.f.inst(format!("and i32 {units}, 16383"));
        let wide = self.f.inst(format!("zext i32 {field} to i64"));
        self.f.inst(format!("or i64 {wide}, {bits}"))
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

    /// Issues the instructions of `plan` for one `acc + a @ b` whose operands
    /// start at byte offsets `a_at` and `b_at` (i32 operands) of the shared
    /// buffer, and commits them as one group; returns the accumulator
    /// registers, which are not valid before a `wgmma.wait_group` covers
    /// the group.
    pub fn wgmma_issue(
        &mut self,
        plan: &WgmmaPlan,
        acc: Vec<String>,
        a_at: &str,
        b_at: &str,
    ) -> Result<Vec<String>> {
        let per_instr = plan.n / 2;
        if acc.len() != per_instr * plan.m_blocks() {
            return Err(malformed("wgmma accumulator register count"));
        }
        let a_base = self.shared_address(a_at);
        let b_base = self.shared_address(b_at);
        // This warp group's first row of A.
        let warp = self.warp.clone();
        let group = self.f.inst(format!("lshr i32 {warp}, 2"));
        let group_rows = self.f.inst(format!("mul i32 {group}, 64"));
        let row_bytes = plan.a_swizzle.atom_bytes();
        let group_offset = self.f.inst(format!("mul i32 {group_rows}, {row_bytes}"));
        let a_group = self.f.inst(format!("add i32 {a_base}, {group_offset}"));
        let (a_bits, b_bits) = (plan.a_descriptor_bits(), plan.b_descriptor_bits());
        let dtype = match plan.input {
            ScalarType::BF16 => "bf16",
            ScalarType::F8E4M3 => "e4m3",
            ScalarType::F8E5M2 => "e5m2",
            _ => "f16",
        };
        let instr = format!(
            "wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{dtype}.{dtype}",
            plan.n,
            plan.k_step()
        );
        // scale-d (accumulate), A and B not negated, then for 16-bit inputs
        // the transposes: A K-major (0), B N-major (1) or K-major (0). fp8
        // operands are K-major by definition and take no transpose flags.
        let flags = match (plan.input.size_bytes(), plan.b_k_major) {
            (1, _) => "p, 1, 1",
            (_, true) => "p, 1, 1, 0, 0",
            (_, false) => "p, 1, 1, 0, 1",
        };
        self.wgmma_fence();
        let mut acc = acc;
        for s in 0..plan.k / plan.k_step() {
            let k0 = (s * plan.k_step()) as u32;
            let b_desc = self.descriptor(b_bits, &b_base, plan.b.offset(k0 * plan.n as u32));
            for j in 0..plan.m_blocks() {
                let row = (64 * plan.groups() * j) as u32;
                let delta = plan.a.offset(row * plan.k as u32 + k0);
                let a_desc = self.descriptor(a_bits, &a_group, delta);
                let regs = acc[j * per_instr..(j + 1) * per_instr].to_vec();
                let out = self.wgmma_instruction(&instr, flags, &regs, &a_desc, &b_desc);
                acc.splice(j * per_instr..(j + 1) * per_instr, out);
            }
        }
        self.f
            .asm("void", "wgmma.commit_group.sync.aligned;", "~{memory}", &[]);
        Ok(acc)
    }

    /// One `wgmma.mma_async` reading A and B through descriptors, the
    /// accumulators tied in and out.
    fn wgmma_instruction(
        &mut self,
        instr: &str,
        flags: &str,
        acc: &[String],
        a_desc: &str,
        b_desc: &str,
    ) -> Vec<String> {
        let n = acc.len();
        let outs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
        let asm = format!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; {instr} {{{}}}, ${}, ${}, {flags}; }}",
            outs.join(", "),
            n,
            n + 1
        );
        self.tied_asm(&asm, acc, &[("i64", a_desc), ("i64", b_desc)], "l")
    }

    /// Inline asm whose `f32` registers `regs` are read and written (outputs
    /// `$0..`, tied inputs after `extra`); returns the new registers.
    fn tied_asm(
        &mut self,
        asm: &str,
        regs: &[String],
        extra: &[(&str, &str)],
        extra_constraint: &str,
    ) -> Vec<String> {
        let n = regs.len();
        let mut constraints = vec!["=f".to_string(); n];
        constraints.extend(extra.iter().map(|_| extra_constraint.to_string()));
        constraints.extend((0..n).map(|i| i.to_string()));
        constraints.push("~{memory}".to_string());
        let mut args: Vec<(&str, &str)> = extra.to_vec();
        args.extend(regs.iter().map(|r| ("float", r.as_str())));
        let ret = format!("{{ {} }}", vec!["float"; n].join(", "));
        let r = self.f.asm(&ret, asm, &constraints.join(","), &args);
        (0..n)
            .map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}")))
            .collect()
    }

    /// `wgmma.wait_group pending`: at most `pending` groups stay in flight.
    /// The accumulators pass through it, so their later uses follow it.
    pub fn wgmma_wait(&mut self, pending: usize, acc: &[String]) -> Vec<String> {
        let asm = format!("wgmma.wait_group.sync.aligned {pending};");
        // One asm per instruction's registers keeps operand lists short.
        acc.chunks(128)
            .flat_map(|chunk| self.tied_asm(&asm, chunk, &[], ""))
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
        let a_at = a.slot_base(self, &a.read_slot);
        let b_at = b.slot_base(self, &b.read_slot);
        let out = self.wgmma_issue(plan, acc, &a_at, &b_at)?;
        let regs = self.wgmma_wait(usize::from(in_flight), &out);
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
        let out = self.wgmma_issue(plan, acc, &a_at, &b_at)?;
        let regs = self.wgmma_wait(0, &out);
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
